"""The one accuracy metric of clashx: α-accuracy of post-impact velocities (CLASH Fig. 4, Table III).

An event's velocity (vx, vy, ωz) is turned into a speed vector
u = (vx, vy, r·ωz), with r = `characteristic_length(shape)` (the footprint's
radius of gyration, so |u|² is proportional to the block's planar kinetic
energy per unit mass).  A prediction is within α when

    ‖u_pred − u_true‖ ≤ α ‖u_true‖,

and α-accuracy is the fraction of events within α.  Every method is scored
with these functions.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..core._types import Array, Float


def speed_vector(velocity: Float[Array, "... 3"], length: float) -> Float[Array, "... 3"]:
    """(vx, vy, ωz) → (vx, vy, r·ωz), m/s."""
    velocity = jnp.asarray(velocity)
    return velocity * jnp.array([1.0, 1.0, length])


def relative_error(pred: Float[Array, "... 3"], true: Float[Array, "... 3"], length: float) -> Float[Array, "..."]:
    """‖u_pred − u_true‖ / ‖u_true‖ per event (see module docs)."""
    du = speed_vector(jnp.asarray(pred) - jnp.asarray(true), length)
    u = speed_vector(true, length)
    return jnp.linalg.norm(du, axis=-1) / jnp.maximum(jnp.linalg.norm(u, axis=-1), 1e-12)


def alpha_accuracy(pred, true, length: float, alpha: float = 0.1) -> float:
    """Fraction of events whose relative error is at most α."""
    err = np.asarray(relative_error(pred, true, length))
    return float(np.mean(err <= alpha))


def alpha_curve(pred, true, length: float, alphas=None) -> tuple[np.ndarray, np.ndarray]:
    """α-accuracy over a grid of α (default 0 … 1): (alphas, accuracies), for plotting."""
    alphas = np.linspace(0.0, 1.0, 101) if alphas is None else np.asarray(alphas)
    err = np.asarray(relative_error(pred, true, length))
    return alphas, np.array([np.mean(err <= a) for a in alphas])

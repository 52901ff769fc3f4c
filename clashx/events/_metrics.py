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

from ..core import Array, Float

VELOCITY_FLOOR = 0.02  # m/s: the floor of every velocity loss (a near-still block does not dominate a fit)


def speed_vector(velocity: Float[Array, "... 3"], length: float) -> Float[Array, "... 3"]:
    """(vx, vy, ωz) → (vx, vy, r·ωz), m/s."""
    velocity = jnp.asarray(velocity)
    return velocity * jnp.array([1.0, 1.0, length])


def speed_scale(true: Float[Array, "... 3"], length: float, floor: float = 0.0) -> Float[Array, "... 1"]:
    """√(‖u_true‖² + floor²) per event (m/s), the denominator of every relative speed error; at least 1e-12."""
    u = speed_vector(true, length)
    return jnp.maximum(jnp.sqrt(jnp.sum(u**2, -1, keepdims=True) + floor**2), 1e-12)


def speed_residuals(
    pred: Float[Array, "... 3"], true: Float[Array, "... 3"], length: float, floor: float = 0.0
) -> Float[Array, "... 3"]:
    """(u_pred − u_true) / √(‖u_true‖² + floor²) per event: the residual vector of every clashx fit.

    With `floor` 0 its norm is `relative_error`; a floor (m/s) keeps events with a
    near-still block from dominating a loss.  Every loss on velocities in clashx is
    `sum(speed_residuals(...) ** 2, -1)` per event (`velocity_loss`, identification's
    residuals, fine-tuning, the baselines).
    """
    return speed_vector(jnp.asarray(pred) - jnp.asarray(true), length) / speed_scale(true, length, floor)


def relative_error(pred: Float[Array, "... 3"], true: Float[Array, "... 3"], length: float) -> Float[Array, "..."]:
    """‖u_pred − u_true‖ / ‖u_true‖ per event, u = (vx, vy, length·ωz) (module docs; `length`: the radius of
    gyration in m, `clashx.scenes.geometry.characteristic_length(shape)`)."""
    return jnp.linalg.norm(speed_residuals(pred, true, length), axis=-1)


def alpha_accuracy(pred, true, length: float, alpha: float = 0.1) -> float:
    """Fraction of events whose relative error is at most α (CLASH's α-accuracy, module docstring).

    Args:
        pred, true: (n, 3) predicted and true post-impact velocities (vx, vy, ωz) in m/s, m/s, rad/s.
        length: r, the block's radius of gyration in m, which turns ωz into a speed r·ωz
            (`clashx.scenes.geometry.characteristic_length(shape)`).
        alpha: the relative error ‖u_pred − u_true‖ / ‖u_true‖ within which a prediction counts.

    Example:
        >>> r = clashx.scenes.geometry.characteristic_length("square")
        >>> clashx.alpha_accuracy(pred, true, r, alpha=0.1)
    """
    err = np.asarray(relative_error(pred, true, length))
    return float(np.mean(err <= alpha))


def alpha_curve(pred, true, length: float, alphas=None) -> tuple[np.ndarray, np.ndarray]:
    """α-accuracy over a grid of α (default 0 … 1): (alphas, accuracies), for plotting.

    `pred`, `true` and `length` (the radius of gyration, m) as in `alpha_accuracy`.
    """
    alphas = np.linspace(0.0, 1.0, 101) if alphas is None else np.asarray(alphas)
    err = np.asarray(relative_error(pred, true, length))
    return alphas, np.array([np.mean(err <= a) for a in alphas])

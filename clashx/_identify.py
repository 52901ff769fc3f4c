"""Identifying contact parameters from a few real collisions through the frozen surrogate (CLASH step 2).

The surrogate's weights stay fixed; the parameters are optimised in an
unbounded space z with params = from_unit(sigmoid(z)), so every iterate stays
inside the prior box.  Many starts run at once under one `jax.vmap` and the
best final loss wins; the whole search is one jitted function, deterministic
for a given key.  The uncertainty is the Gauss-Newton (Laplace) estimate at
the optimum: cov = σ² (JᵀJ)⁻¹ with J the Jacobian of the relative residuals
with respect to the physical parameters and σ² their variance.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from . import _geometry as geo
from ._surrogate import Surrogate, predict, velocity_loss
from ._types import Array, Float, PRNGKeyArray


class IdentifyResult(eqx.Module):
    """Identified parameters.

    Attributes:
        params: best parameters (p,), physical units, in `model.space.names` order.
        std: their one-sigma uncertainty (p,) from the curvature at the optimum;
            large where the events do not constrain a parameter.
        loss: the fit loss at `params` (mean squared relative error of the speed vectors).
        start_losses: final loss of every start (n_starts,), to judge multimodality.
    """

    params: Float[Array, "p"]
    std: Float[Array, "p"]
    loss: Float[Array, ""]
    start_losses: Float[Array, "starts"]


def _params_of(model: Surrogate, z):
    return model.space.from_unit(jax.nn.sigmoid(z))


def fit_loss(model: Surrogate, params, strikes, velocities) -> Float[Array, ""]:
    """The identification loss of `params` on the events (see `velocity_loss`)."""
    return velocity_loss(predict(model, strikes, params), velocities, geo.characteristic_length(model.shape))


@eqx.filter_jit
def _search(model: Surrogate, strikes, velocities, z0, lr: float, steps: int):
    opt = optax.adam(lr)

    def one_start(z):
        loss_z = lambda z: fit_loss(model, _params_of(model, z), strikes, velocities)  # noqa: E731

        def body(carry, _):
            z, state = carry
            loss, g = jax.value_and_grad(loss_z)(z)
            upd, state = opt.update(g, state)
            return (optax.apply_updates(z, upd), state), loss

        (z, _), _ = jax.lax.scan(body, (z, opt.init(z)), None, length=steps)
        return z, loss_z(z)

    return jax.vmap(one_start)(z0)


@eqx.filter_jit
def _uncertainty(model: Surrogate, params, strikes, velocities):
    w = jnp.array([1.0, 1.0, geo.characteristic_length(model.shape)])

    def residuals(p):
        u = velocities * w
        scale = jnp.sqrt(jnp.sum(u**2, -1, keepdims=True) + 0.02**2)
        return ((predict(model, strikes, p) - velocities) * w / scale).ravel()

    r = residuals(params)
    jac = jax.jacfwd(residuals)(params)
    dof = jnp.maximum(r.size - params.size, 1)
    sigma2 = jnp.sum(r**2) / dof
    cov = sigma2 * jnp.linalg.pinv(jac.T @ jac)
    return jnp.sqrt(jnp.clip(jnp.diag(cov), 0.0))


def identify(
    model: Surrogate,
    strikes: Float[Array, "n 3"],
    velocities: Float[Array, "n 3"],
    *,
    key: PRNGKeyArray,
    n_starts: int = 64,
    steps: int = 300,
    lr: float = 0.05,
) -> IdentifyResult:
    """Find the contact parameters that make the surrogate reproduce observed collisions.

    Args:
        model: a pretrained surrogate (weights frozen).
        strikes: (n, 3) strikes (θ, θ1, v_pre) of the observed events.
        velocities: (n, 3) observed post-impact velocities (vx, vy, ωz), block frame.
        key: PRNG key of the starting points (uniform over the prior).
        n_starts: starts optimised together under `jax.vmap`.
        steps, lr: Adam steps and learning rate in the unbounded space.

    Returns:
        An `IdentifyResult`. Same key and data, same result.

    Example:
        >>> res = identify(model, strikes[:10], velocities[:10], key=jax.random.PRNGKey(0))
        >>> dict(zip(model.space.names, res.params.tolist()))
    """
    strikes, velocities = jnp.asarray(strikes, jnp.float32), jnp.asarray(velocities, jnp.float32)
    u0 = jax.random.uniform(key, (n_starts, model.space.size), minval=0.02, maxval=0.98)
    z0 = jnp.log(u0) - jnp.log1p(-u0)
    z, losses = _search(model, strikes, velocities, z0, lr, steps)
    best = jnp.argmin(losses)
    params = _params_of(model, z[best])
    return IdentifyResult(
        params=params,
        std=_uncertainty(model, params, strikes, velocities),
        loss=losses[best],
        start_losses=losses,
    )

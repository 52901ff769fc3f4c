"""Identifying parameters from a few real collisions through the frozen surrogate (CLASH step 2).

The surrogate's weights stay fixed; the parameters are found by
Levenberg-Marquardt on the residuals of the observed impacts (the surrogate's
`example_residuals`: for the strike, the post-impact velocities' relative errors),
in logits z of the prior's unit cube (params = from_unit(sigmoid(z)), so
every iterate stays inside the prior).  Many starts run at once under one
`jax.vmap` and the best final loss wins; the whole search is one jitted
function, deterministic for a given key.

Ten events carry thirty numbers, fewer than it takes to pin eight
parameters well, so two things keep the fit physical:

* `free`: which parameters move; the others keep `base` (e.g. the ground's
  friction and torsion fitted on the slides beforehand, HALO's second stage).
* `prior_std`: a Gaussian prior per parameter in units of its prior range,
  centred on `base` (∞: flat).  It enters as extra residuals (u − u_base) / σ,
  so a parameter the events say nothing about stays at its base value.

The uncertainty is the Gauss-Newton (Laplace) estimate at the optimum:
cov = σ² (JᵀJ)⁻¹ with J the Jacobian of the residuals (prior rows included)
with respect to the physical parameters and σ² the residuals' variance
(at least 1: the prior rows are in units of their own σ).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, PRNGKeyArray, event_weights, short_repr
from ..scenes import geometry as geo
from ..surrogate import AbstractSurrogate, StrikeSurrogate, predict, velocity_loss

_Z_MAX = 5.0  # logits stay in [-5, 5] (unit 0.007 … 0.993): the sigmoid's slope must not vanish


class IdentifyResult(eqx.Module):
    """Identified parameters.

    Attributes:
        params: best parameters (p,), physical units, in `model.space.names` order.
        std: their one-sigma uncertainty (p,) from the curvature at the optimum
            (0 for parameters held fixed); large where the data do not constrain one.
        loss: the fit loss at `params`: mean squared relative error of the speed vectors.
        start_losses: final loss of every start (n_starts,), to judge multimodality.
    """

    params: Float[Array, "p"]
    std: Float[Array, "p"]
    loss: Float[Array, ""]
    start_losses: Float[Array, "starts"]

    def __repr__(self) -> str:
        return short_repr(self)


def fit_loss(model: StrikeSurrogate, params, strikes, velocities) -> Float[Array, ""]:
    """The identification loss of `params` on the events (see `velocity_loss`)."""
    return velocity_loss(predict(model, strikes, params), velocities, geo.characteristic_length(model.shape))


def _event_residuals(model: AbstractSurrogate, params, inputs, outcomes, robust: float = 0.0, weights=None):
    """The events' `example_residuals` (n·k,) / √n; with `robust` > 0 each event's Cauchy-shrunk.

    Cauchy: an event whose residual norm is e counts as c·√log(1 + e²/c²), c = `robust`,
    instead of e: about e for small errors, slowly growing for a bad label.
    """
    n = jax.tree.leaves(inputs)[0].shape[0]
    r = jax.vmap(lambda x, y: model.example_residuals(x, y, params))(inputs, outcomes)
    if robust > 0:
        e2 = jnp.sum(r**2, -1, keepdims=True)
        shrink = jnp.sqrt(robust**2 * jnp.log1p(e2 / robust**2) / jnp.maximum(e2, 1e-12))
        r = r * jnp.where(e2 > 1e-12, shrink, 1.0)
    if weights is not None:
        r = r * jnp.sqrt(weights)[:, None]
    return r.ravel() / jnp.sqrt(n)


class _Problem(eqx.Module):
    """The residual function of one identification: which columns move, around what, with what prior."""

    model: AbstractSurrogate
    inputs: Array  # (n, ...): the events as the model's `example_residuals` takes them
    outcomes: Array
    base_u: Float[Array, "p"]
    free: tuple[int, ...] = eqx.field(static=True)
    prior_w: Float[Array, "k"]  # 1 / (σ √n) per free parameter; 0: flat
    robust: float = eqx.field(static=True, default=0.0)
    weights: Array | None = None  # (n,) per event, mean 1; None: equal

    def params(self, z):
        u = self.base_u.at[jnp.asarray(self.free)].set(jax.nn.sigmoid(z))
        return self.model.space.from_unit(u)

    def residuals(self, z):
        fit = _event_residuals(self.model, self.params(z), self.inputs, self.outcomes, self.robust, self.weights)
        prior = (jax.nn.sigmoid(z) - self.base_u[jnp.asarray(self.free)]) * self.prior_w
        return jnp.concatenate([fit, prior])


def _lm(problem: _Problem, z0, iterations: int):
    """Levenberg-Marquardt from one start; returns the best (z, ‖r‖², r, ∂r/∂z).

    Each trial costs one evaluation of the residuals and their Jacobian
    (forward mode, one tangent per free parameter); a trial that lowers the
    cost becomes the new best (λ /= 3), else λ *= 4 and the next trial steps
    from the best again.  The first trial is the start itself.
    """
    k = z0.size
    r_size = jax.eval_shape(problem.residuals, z0).shape[0]

    def body(carry, _):
        z_try, z, r, jac, lam = carry
        r_try = problem.residuals(z_try)
        j_try = jax.jacfwd(problem.residuals)(z_try)
        better = jnp.isfinite(r_try @ r_try) & (r_try @ r_try < r @ r)
        pick = lambda new, old: jnp.where(better, new, old)  # noqa: E731
        z, r, jac = pick(z_try, z), pick(r_try, r), pick(j_try, jac)
        lam = jnp.where(better, lam / 3, lam * 4)
        jtj = jac.T @ jac
        a = jtj + lam * (jnp.diag(jnp.diag(jtj)) + 1e-9 * jnp.eye(k))
        z_next = jnp.clip(z + jnp.linalg.solve(a, -jac.T @ r), -_Z_MAX, _Z_MAX)
        return (z_next, z, r, jac, lam), None

    inf_r = jnp.full(r_size, jnp.inf, z0.dtype).at[1:].set(0.0)
    init = (z0, z0, inf_r, jnp.zeros((r_size, k), z0.dtype), jnp.asarray(1e-2 * 3, z0.dtype))
    (_, z, r, jac, _), _ = jax.lax.scan(body, init, None, length=iterations + 1)
    return z, r @ r, r, jac


@eqx.filter_jit
def _search(problem: _Problem, z0, iterations: int):
    return jax.vmap(lambda z: _lm(problem, z, iterations))(z0)


def _uncertainty(problem: _Problem, z, r, jac, variance_floor: float | None = None) -> np.ndarray:
    """One-sigma of every parameter at logits `z` (0 for the fixed ones), Laplace, from the search's own Jacobian.

    The logits map to the parameters one by one, so the physical Jacobian is
    ∂r/∂z divided column-wise by dp/dz.
    """
    space, free = problem.model.space, list(problem.free)
    z = np.asarray(z, np.float64)
    u = 1.0 / (1.0 + np.exp(-z))
    dp_dz = space.unit_scale(problem.params(jnp.asarray(z)))[free] * u * (1.0 - u)
    jac = np.asarray(jac, np.float64) / np.where(dp_dz == 0, 1e-300, dp_dz)
    r = np.asarray(r, np.float64)
    n = problem.inputs.shape[0]
    n_fit = r.size - len(free)
    dof = max(n_fit - z.size, 1)
    sigma2 = max(float(np.sum(r[:n_fit] ** 2)) * n / dof, 1.0 / n if variance_floor is None else variance_floor)
    cov = sigma2 * np.linalg.pinv(jac.T @ jac)
    std = np.zeros(problem.model.space.size)
    std[free] = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return std


def identify(
    model: AbstractSurrogate,
    inputs,
    outcomes,
    *,
    key: PRNGKeyArray,
    n_starts: int = 16,
    iterations: int = 40,
    free: tuple[str, ...] | None = None,
    base=None,
    prior_std: dict[str, float] | None = None,
    robust: float = 0.0,
    variance_floor: float | None = None,
    weights=None,
) -> IdentifyResult:
    """Find the parameters that make the surrogate reproduce observed collisions.

    Written once for every surrogate: the residuals of an event are the model's `example_residuals`.
    This is the low-level step.  **From a strike recording, call `clashx.fit_families` (or
    `clashx.fit_recording`)** instead: they read the ground's friction off the slides first, weigh
    each label by its track's σ, re-distil and fine-tune, and average two impact families.  On the
    shipped square recordings that scores 0.77 at α = 0.1; `identify` alone on the ingested labels 0.37.

    Args:
        model: a pretrained surrogate (weights frozen).
        inputs, outcomes: the n observed events as the model's `example_residuals` takes them;
            for the strike, strikes (θ, θ1, v_pre) (n, 3) and post-impact velocities
            (vx, vy, ωz; block frame) (n, 3); for the cube, pre-impact states (n, 13) and
            aligned-frame targets (n, 12).
        key: PRNG key of the starting points (the first start is `base`, the
            others uniform over the middle 90 % of the prior).
        n_starts: starts optimised together under `jax.vmap`.
        iterations: Levenberg-Marquardt trials per start.
        free: names of the parameters to fit (default: all of `model.space`).
        base: (p,) values of the fixed parameters and the prior's centre
            (default: `model.space.vector()`, the nominal block).
        prior_std: {name: σ in units of the prior range} of a Gaussian prior
            around `base` (names not given: flat).
        robust: Cauchy scale c of the events' relative errors (0: least squares): a
            label whose error is well above c (a slow strike's short, noisy slide) pulls less.
        variance_floor: the least residual variance the uncertainty assumes (default 1/n: residuals
            in noise units, as the strike's); 0 trusts the fit's own residuals (simulated labels).
        weights: (n,) a weight per event (≥ 0, scaled to mean 1; default equal): an event's residuals count
            √w times, e.g. 1 / (the model's misfit + the label's own variance) for labels of known quality.

    Returns:
        An `IdentifyResult`. Same key and data, same result.

    Example:
        >>> res = identify(model, strikes[:10], velocities[:10], key=jax.random.PRNGKey(0))
        >>> dict(zip(model.space.names, res.params.tolist()))
    """
    space = model.space
    if n_starts < 1:
        raise ValueError(f"identify needs at least one start (n_starts={n_starts})")
    names = tuple(free) if free is not None else space.names
    cols = tuple(space.index(n) for n in names)
    base = np.asarray(space.vector() if base is None else base, np.float64)
    inputs, outcomes = jnp.asarray(inputs, jnp.float32), jnp.asarray(outcomes, jnp.float32)
    n = inputs.shape[0]
    prior_std = prior_std or {}
    unknown = sorted(set(prior_std) - set(space.names))
    if unknown:
        raise ValueError(f"prior_std names {unknown}; the space has {', '.join(space.names)}")
    prior_w = np.array([1.0 / (prior_std[nm] * np.sqrt(n)) if nm in prior_std else 0.0 for nm in names])
    base_u = jnp.asarray(np.clip(np.asarray(space.to_unit(jnp.asarray(base))), 0.0, 1.0), jnp.float32)
    weights = event_weights(weights, n, "identify")
    if weights is not None:
        weights = jnp.asarray(weights, jnp.float32)
    problem = _Problem(model, inputs, outcomes, base_u, cols, jnp.asarray(prior_w, jnp.float32), robust, weights)
    u_base = jnp.clip(base_u[jnp.asarray(cols)], 0.01, 0.99)[None]
    u_rand = jax.random.uniform(key, (n_starts - 1, len(cols)), minval=0.05, maxval=0.95)
    u0 = jnp.concatenate([u_base, u_rand])
    z, costs, r, jac = _search(problem, jnp.log(u0) - jnp.log1p(-u0), iterations)
    best = int(jnp.argmin(jnp.where(jnp.isfinite(costs), costs, jnp.inf)))
    params = problem.params(z[best])
    fit_rows = r.shape[1] - len(cols)  # the residuals' fit part is √(loss) per event, scaled by 1/√n
    return IdentifyResult(
        params=params,
        std=jnp.asarray(_uncertainty(problem, z[best], r[best], jac[best], variance_floor)),
        loss=jnp.sum(r[best][:fit_rows] ** 2),
        start_losses=costs,
    )

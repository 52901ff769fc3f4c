"""Bundled contact gradients (BCG): randomised smoothing of a rollout's stiff contact onset.

At the step where a stiff contact begins (`onset(data)` is true), the state is
copied B times and each copy's contacting degrees of freedom are perturbed:
positions (`qpos_dofs`) by N(0, σ_pos²) and velocities (`qvel_dofs`) by
N(0, σ_vel²), in antithetic pairs (δ, −δ), so the bundle's mean starts at the
unperturbed state.  The copies advance `horizon` differentiable steps; the
rollout then continues from the bundle's mean state.  The derivative of that
mean is the average of the copies' derivatives: a Monte-Carlo estimate of the
derivative of the Gaussian-smoothed contact map, which a stiff contact's
derivative at one state is not (it jumps with the onset's step).  Before the
onset and after the bundle closes, the rollout is the plain one.

Defaults (`BCGConfig`): B = 8 copies (4 antithetic pairs), σ_pos = 0.5 mm,
σ_vel = 0.02 m/s (rad/s for angular dofs), horizon = 10 steps: at the strike's
1 ms contact step that is two time constants of SCENE.md's 5 ms
striker-block contact, the part of the window where the impulse is delivered.

The rollout carries the B copies through every step (identical outside the
bundle), so one BCG rollout of n steps costs B plain ones of the same n:
a bundle only where it is needed would need the onset's step before tracing
(a data-dependent scan length, which `vmap` over worlds cannot have).  It
composes with `jit`, `vmap`, forward mode, and reverse mode when `step` is
`clashx.grad.step`.

Reference: Bundled gradients through contact via randomized smoothing
(Suh, Pang, Tedrake, RA-L 2022); the bundle-at-onset variant follows CLASH's
related-work discussion (He et al. 2026).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import Array, Bool, PRNGKeyArray, mjx

Step = Callable[[mjx.Data], mjx.Data]


class BCGConfig(eqx.Module):
    """How a bundle is drawn and how long it runs.

    Attributes:
        n_bundle: copies in a bundle (even: antithetic pairs); 0 or sigma 0 gives the plain rollout.
        sigma_pos: standard deviation of the position perturbation, m (rad for hinge dofs).
        sigma_vel: standard deviation of the velocity perturbation, m/s (rad/s for angular dofs).
        horizon: steps the copies advance before the rollout continues from their mean.
        qpos_dofs: indices into qpos that are perturbed (the contacting bodies' positions;
            leave quaternion entries out).
        qvel_dofs: indices into qvel that are perturbed.
        drop_nan: in forward mode, leave a copy whose tangent is not finite out of the
            bundle's mean derivative (the mean's value is unchanged).  MJX's tangents turn
            NaN at contacts that carry no friction force (a √0 in its solver, which
            `clashx.core._mjx` patches for clashx's own scenes); a bundle then still
            averages its finite copies.  Forward mode only: the rule reads the tangents'
            values, which reverse mode cannot transpose.
    """

    n_bundle: int = eqx.field(static=True, default=8)
    sigma_pos: float = 5e-4
    sigma_vel: float = 0.02
    horizon: int = eqx.field(static=True, default=10)
    qpos_dofs: tuple[int, ...] = eqx.field(static=True, default=())
    qvel_dofs: tuple[int, ...] = eqx.field(static=True, default=())
    drop_nan: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if self.n_bundle < 2 or self.n_bundle % 2:
            raise ValueError(f"BCGConfig.n_bundle = {self.n_bundle}: use an even number ≥ 2 (antithetic pairs)")
        if self.horizon < 1:
            raise ValueError(f"BCGConfig.horizon = {self.horizon}: use at least 1 step")


def perturbations(config: BCGConfig, nq: int, nv: int, *, key: PRNGKeyArray, dtype=jnp.float64):
    """The bundle's (δq (B, nq), δv (B, nv)): antithetic pairs, zero outside the listed dofs."""
    half = config.n_bundle // 2
    kq, kv = jax.random.split(key)
    dq = jnp.zeros((half, nq), dtype)
    dv = jnp.zeros((half, nv), dtype)
    if config.qpos_dofs:
        idx = jnp.asarray(config.qpos_dofs)
        dq = dq.at[:, idx].set(config.sigma_pos * jax.random.normal(kq, (half, len(config.qpos_dofs)), dtype))
    if config.qvel_dofs:
        idx = jnp.asarray(config.qvel_dofs)
        dv = dv.at[:, idx].set(config.sigma_vel * jax.random.normal(kv, (half, len(config.qvel_dofs)), dtype))
    return jnp.concatenate([dq, -dq]), jnp.concatenate([dv, -dv])


@jax.custom_jvp
def _mean_of_finite(a: Array) -> Array:
    """The mean over the leading axis; its derivative averages only the copies whose tangent is finite."""
    return a.mean(axis=0)


@_mean_of_finite.defjvp
def _mean_of_finite_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    good = jnp.all(jnp.isfinite(t.reshape(t.shape[0], -1)), axis=1)
    w = good / jnp.maximum(good.sum(), 1)
    t = jnp.where(good.reshape((-1,) + (1,) * (t.ndim - 1)), t, 0.0)
    return a.mean(axis=0), jnp.tensordot(w.astype(t.dtype), t, axes=1)


def bundle_mean(bundle: mjx.Data, drop_nan: bool = False) -> mjx.Data:
    """The mean state of a bundle (leading axis B): floating-point fields averaged, others from the first copy.

    With `drop_nan`, a copy whose forward-mode tangent is not finite is left out of the mean's tangent.
    """
    mean = _mean_of_finite if drop_nan else (lambda a: a.mean(axis=0))
    return jax.tree.map(lambda a: mean(a) if eqx.is_inexact_array(a) else a[0], bundle)


class BundleCarry(eqx.Module):
    """What a BCG scan carries: the copies, their mean, the steps the open bundle has left (0: none open), whether one may open."""

    copies: mjx.Data
    mean: mjx.Data
    left: Array
    armed: Bool[Array, ""]


def bcg_scan(
    step: Step,
    data: mjx.Data,
    n_steps: int,
    *,
    onset: Callable[[mjx.Data], Bool[Array, ""]],
    record: Callable[[mjx.Data], Any],
    config: BCGConfig,
    key: PRNGKeyArray,
    once: bool = True,
) -> tuple[mjx.Data, Any]:
    """A rollout of `n_steps` with a contact bundle at the onset (one world; batch with `jax.vmap`).

    Args:
        step: one differentiable step, `data -> data` (e.g. `lambda d: clashx.grad.step(model, d)`).
        data: the state at the start.
        n_steps: steps to take.
        onset: `data -> bool`, true when a stiff contact is about to act; checked on the
            (mean) state before each step while no bundle is open.  `data` holds the
            collision pass of the previous step (`data.contact`).
        record: `data -> pytree`, what to keep of the mean state after each step.
        config: the bundle's size, spread and horizon.
        key: the perturbations' key.
        once: open at most one bundle (the first onset); else one at every onset.

    Returns:
        (the final mean state, the records stacked over steps).
    """
    nq, nv = data.qpos.shape[0], data.qvel.shape[0]
    dq, dv = perturbations(config, nq, nv, key=key, dtype=data.qpos.dtype)
    copies = jax.tree.map(lambda a: jnp.broadcast_to(a, (config.n_bundle, *jnp.shape(a))), data)

    def body(carry: BundleCarry, _):
        mean = carry.mean  # the copies' mean, kept from the step before (not averaged again)
        open_now = (carry.left == 0) & carry.armed & onset(mean)
        copies = carry.copies.replace(
            qpos=jnp.where(open_now, mean.qpos + dq, carry.copies.qpos),
            qvel=jnp.where(open_now, mean.qvel + dv, carry.copies.qvel),
        )
        left = jnp.where(open_now, config.horizon, carry.left)
        copies = jax.vmap(step)(copies)
        left = jnp.maximum(left - 1, 0)
        new_mean = bundle_mean(copies, config.drop_nan)
        close = (carry.left > 0) | open_now
        close = close & (left == 0)
        copies = jax.tree.map(lambda c, m: jnp.where(close, jnp.broadcast_to(m, c.shape), c), copies, new_mean)
        armed = carry.armed & ~(open_now & once)
        return BundleCarry(copies, new_mean, left, armed), record(new_mean)

    init = BundleCarry(copies, data, jnp.zeros((), jnp.int32), jnp.array(True))
    final, records = jax.lax.scan(body, init, None, length=n_steps)
    return final.mean, records


def plain_scan(step: Step, data: mjx.Data, n_steps: int, *, record: Callable[[mjx.Data], Any]) -> tuple[mjx.Data, Any]:
    """The same rollout without a bundle: (final state, records stacked over steps)."""

    def body(d, _):
        d = step(d)
        return d, record(d)

    return jax.lax.scan(body, data, None, length=n_steps)

"""Strikes through the one hybrid rule: a strike in, the block's rest pose and the impact's record out.

Thin wrappers of `clashx.hybrid` (`hybrid_step`, `rollouts_c`) on the strike scene, whose
hooks (`clashx.scenes._strike_impact`) say what the impact is: the striker's touch, the
surrogate's block velocity at release (guarded), the arm pulling the striker away.  A
strike runs the rule for `n_steps` steps of the slide step (4 ms: approach, window,
release), then, every world past its release and only the block-ground contact left,
the engine alone at `dt_after` (DT_AFTER = 8 ms) until MAX_TIME: against the rule at 1 ms
the rest pose moves by 1.2-1.7 mm median (5 % of the slide) at 8 ms, 0.5-0.8 mm at 4 ms
(`tests/test_hybrid.py`).

`strike_rollout` is one strike on MJX (jit, vmap over strikes and parameters,
`jax.jacfwd`, and `jax.grad` on a scene built with `differentiable=True`);
`strike_rollouts_c` is the CPU fallback on MuJoCo C, no gradients.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Bool, Float, block_size, map_batched, mjx, short_repr, spread
from ..core import batch as _batch
from ..scenes import (
    MAX_TIME,
    RELEASE_AFTER,
    SolverSettings,
    StrikeBodies,
    StrikeScene,
    block_pose,
    guard,
    initial_state,
    initial_states_batch,
    make_strike_scene,
    slide_to_rest_c,
    strike_of_state,
    strike_world_bytes,
)
from ..scenes import geometry as geo
from ._rule import Handler, HybridState, RuleState, hybrid_step, hybrid_system, init_state, rollouts_c

DT_AFTER = 0.008  # s: the engine's step once every world is past release (module doc)


class StrikeHybrid(eqx.Module):
    """The strike scene prepared for hybrid rollouts.  Build with `make_strike_hybrid`.

    Attributes:
        sim: the strike scene (the rule's hooks); its slide model is the engine's.
        lite: the same without its MJX models (`StrikeScene.lite`), for the CPU fallback's jitted calls.
        dt: the rule's step (s), the scene's slide step.
        n_steps: steps at `dt` (n_approach + n_window + 1: the rule's part of a strike).
        n_window: steps from touch to release (RELEASE_AFTER / dt).
        n_approach: steps within which the slowest strike of the range touches; a later touch is a miss.
        dt_after: the step after that (s), when only the block-ground contact is left.
        n_after: steps at `dt_after` until MAX_TIME.
    """

    sim: StrikeScene
    lite: StrikeScene
    dt: float = eqx.field(static=True)
    n_steps: int = eqx.field(static=True)
    n_window: int = eqx.field(static=True)
    n_approach: int = eqx.field(static=True)
    dt_after: float = eqx.field(static=True)
    n_after: int = eqx.field(static=True)

    @property
    def shape(self) -> str:
        return self.sim.shape

    def __repr__(self) -> str:
        return short_repr(self)


def make_strike_hybrid(
    shape: str, *, sim: StrikeScene | None = None, differentiable: bool = False, dt_after: float = DT_AFTER
) -> StrikeHybrid:
    """The hybrid scene of one block shape.

    Args:
        shape: "semi-cylinder", "square" or "triangle".
        sim: an existing `StrikeScene` of that shape to share (default: a new one).  Its
            `settings.dt_slide` is the hybrid step.
        differentiable: build the scene for reverse-mode gradients (`jax.grad` through a
            rollout): MJX's constraint solver runs as a `while_loop` that reverse mode
            cannot differentiate unless it takes exactly one (Newton) iteration
            (mujoco#2259), so the scene's solver is set to one iteration.  That is a
            coarser simulator: over 32 prior strikes its rest poses differ from the
            16-iteration scene's by 2.5-5 mm median and up to 0.2 m (long slides).
            Forward mode (`jax.jacfwd`, `jax.jvp`) works on the accurate scene; prefer
            it for a few parameters.  Ignored if `sim` is given.
        dt_after: the step once every world is past release (default `DT_AFTER`).
    """
    geo.check_shape(shape)
    if sim is None:
        settings = SolverSettings(iterations=1) if differentiable else SolverSettings()
        sim = make_strike_scene(shape, settings)
    if sim.shape != shape:
        raise ValueError(f"sim is for the {sim.shape!r} block, not {shape!r}")
    dt = sim.dt
    if not dt_after >= dt:
        raise ValueError(f"dt_after = {dt_after} s must be at least the hybrid step {dt} s")
    n_window = int(round(RELEASE_AFTER / dt))
    n_steps = sim.n_approach + n_window + 1
    return StrikeHybrid(
        sim=sim,
        lite=sim.lite(),
        dt=dt,
        n_steps=n_steps,
        n_window=n_window,
        n_approach=sim.n_approach,
        dt_after=float(dt_after),
        n_after=int(math.ceil((MAX_TIME - n_steps * dt) / dt_after - 1e-9)),
    )


class StrikeHybridResult(eqx.Module):
    """The outcome of one hybrid strike.

    Attributes:
        rest_pose: block pose (x, y, yaw) at the end of the rollout, world frame.
        post_velocity: the (guarded) predicted velocity at release, block frame; zeros for a miss.
        t_touch: the touch (s after launch, the crossing; NaN for a miss).
        touched: whether the striker touched the block.
        clamped: whether the energy guard clamped the prediction.
        strike: the strike the handler saw (zeros for a miss).
    """

    rest_pose: Float[Array, "3"]
    post_velocity: Float[Array, "3"]
    t_touch: Float[Array, ""]
    touched: Bool[Array, ""]
    clamped: Bool[Array, ""]
    strike: Float[Array, "3"]

    def __repr__(self) -> str:
        return short_repr(self)


def _result(bodies: StrikeBodies, handler: Handler, params, qpos, impacts, pre, post, t_first) -> StrikeHybridResult:
    """A strike's `StrikeHybridResult` from its final qpos and the rule's record of its impact (one world)."""
    touched = impacts > 0
    strike = strike_of_state(bodies, pre[:10], pre[10:])
    _, clamped = guard(bodies, pre[:10], pre[10:], handler(strike, params))
    yaw = block_pose(post[:10])[2]
    velocity = jnp.concatenate([geo.rot2(-yaw) @ post[10:12], post[15:16]])
    zero = jnp.zeros_like(velocity)
    return StrikeHybridResult(
        rest_pose=block_pose(qpos),
        post_velocity=jnp.where(touched, velocity, zero),
        t_touch=jnp.where(touched, t_first, jnp.nan),
        touched=touched,
        clamped=touched & clamped,
        strike=jnp.where(touched, strike, zero),
    )


def strike_rollout(
    hs: StrikeHybrid,
    handler: Handler,
    strike: Float[Array, "3"],
    params: Float[Array, "p"],
    *,
    n_steps: int | None = None,
) -> StrikeHybridResult:
    """One strike from launch to MAX_TIME (or `n_steps` hybrid steps) on MJX.

    Args:
        hs: the hybrid scene.
        handler: the striker-block impact handler, `(strike, params) -> (vx, vy, ωz)`, e.g. a `StrikeSurrogate`.
        strike: (θ, θ1, v_pre), rad, rad, m/s.
        params: values of `hs.sim.space` (the handler's and the ground's).
        n_steps: steps to take (default: `hs.n_steps` at `hs.dt`, then `hs.n_after` at
            `hs.dt_after`, to MAX_TIME); past `hs.n_steps` they are taken at `hs.dt_after`.

    Returns:
        A `StrikeHybridResult`.  jit, vmap (per-world strikes and parameters) and grad all apply.
    """
    system = hybrid_system(hs.sim, handler, params)
    qpos, qvel = initial_state(hs.sim, strike)
    state = init_state(system, qpos, qvel)
    n_rule = hs.n_steps if n_steps is None else min(n_steps, hs.n_steps)
    n_after = hs.n_after if n_steps is None else max(n_steps - hs.n_steps, 0)
    state, _ = jax.lax.scan(lambda s, _: (hybrid_step(system, s), None), state, None, length=n_rule)
    if n_after:  # every world is past release: the engine alone, at the larger step
        m = system.model
        after = m.replace(opt=m.opt.replace(timestep=jnp.asarray(hs.dt_after, m.opt.timestep.dtype)))
        data, _ = jax.lax.scan(lambda d, _: (mjx.step(after, d), None), state.data, None, length=n_after)
        state = HybridState(data, state.rule)
    r = state.rule
    return _result(hs.sim.bodies, handler, params, state.data.qpos, r.impacts, r.pre, r.post, r.t_first)


def strike_rollouts(
    hs: StrikeHybrid, handler: Handler, strikes: Float[Array, "n 3"], params, *, block: int | None = None
) -> StrikeHybridResult:
    """`strike_rollout` over a batch (params: one set, or one per strike), vmapped in blocks the batching
    policy picks (one vmap on an accelerator; `block` overrides: `clashx.core.block_size`).

    With several local devices each block is spread over them (`clashx.core.map_batched`).
    """
    n = jnp.shape(strikes)[0]
    b = block_size(n, world=strike_world_bytes(hs.sim), block=block)
    params = jnp.broadcast_to(jnp.asarray(params), (n, hs.sim.space.size))
    (hs, handler), (strikes, params) = spread((hs, handler), (jnp.asarray(strikes), params))
    return _hybrid_rollouts(hs, handler, strikes, params, block=b)


@eqx.filter_jit
def _hybrid_rollouts(hs: StrikeHybrid, handler: Handler, strikes, params, *, block: int) -> StrikeHybridResult:
    return map_batched(lambda x: strike_rollout(hs, handler, x[0], x[1]), (strikes, params), batch_size=block)


@eqx.filter_jit
def _results(bodies: StrikeBodies, handler: Handler, params, qpos, impacts, pre, post, t_first) -> StrikeHybridResult:
    return jax.vmap(lambda *a: _result(bodies, handler, *a))(params, qpos, impacts, pre, post, t_first)


def strike_rollouts_c(
    hs: StrikeHybrid,
    handler: Handler,
    strikes: Float[np.ndarray, "n 3"],
    params: Float[np.ndarray, "p"] | Float[np.ndarray, "n p"],
    *,
    nthread: int = 0,
) -> StrikeHybridResult:
    """The hybrid rule on MuJoCo C: the CPU fallback of `strike_rollouts` (same rule, no gradients).

    `clashx.hybrid.rollouts_c` for the rule's `n_steps`, then the engine alone at
    `dt_after` until MAX_TIME (`mujoco.batch`, all CPUs with `nthread` 0).

    Returns:
        A `StrikeHybridResult` of numpy arrays with a leading batch axis.
    """
    strikes = np.asarray(strikes, np.float64)
    n = len(strikes)
    params = np.broadcast_to(np.asarray(params, np.float64), (n, hs.sim.space.size)).copy()
    q0, v0 = (np.asarray(a, np.float64) for a in initial_states_batch(hs.lite, jnp.asarray(strikes)))
    batch = _batch.make_batch(hs.sim.mj_slide_model(), hs.sim.space, hs.sim.slide_rows, params, nsim=n, nthread=nthread)
    ended = rollouts_c(hs.lite, handler, params, q0, v0, hs.n_steps, until_rest=False, batch=batch)
    q, v = ended.qpos, ended.qvel
    t_rel = np.full(n, hs.n_steps * hs.dt)
    q_end = slide_to_rest_c(hs.lite, params, q, v, t_rel, dt=hs.dt_after, batch=batch)  # the same batch goes on
    r: RuleState = ended.rule
    out = _results(hs.lite.bodies, handler, jnp.asarray(params), jnp.asarray(q_end), jnp.asarray(r.impacts), r.pre, r.post,
                   r.t_first)  # fmt: skip
    return jax.tree.map(lambda a: np.asarray(a, np.float64) if a.dtype.kind == "f" else np.asarray(a), out)

"""The hybrid simulator: the surrogate as the striker-block contact handler inside MJX (and MuJoCo C).

CLASH's hybridisation (He et al. 2026): the stiff striker-block
contact, which needs a 1 ms step and the solver's work for a whole contact
window, is replaced by one prediction, and everything else (the block on the
ground: sliding, spinning, coming to rest) stays the physics engine's.

One rule, written once in JAX on a world's (qpos, qvel), applied before each
engine step:

1. *approach*: the striker flies; the first state in which its square overlaps
   the block's footprint (planar separating-axis test, `separation` < 0) while
   the two close in is the touch.  The striker-block pair has no contact rows
   at all in the hybrid model (the scene's slide model, `StrikeSim.slide_model`,
   leaves that pair out), so MJX never pushes the bodies apart however deep
   they overlap;
2. *impact*: the pre-impact configuration is read back as a strike
   (θ, θ1, v_pre) (`strike_of_state`), the handler (a `Surrogate`, or any
   callable `(strike, params) -> (vx, vy, ωz)`) predicts the block's velocity
   at release, and that velocity is written into the block; the striker keeps
   the momentum the block did not take (the handler does not predict it).  A
   plausibility guard clamps the block's velocity change so that the kinetic
   energy of block and striker rises by at most `ENERGY_SLACK` (counted in
   `HybridResult.clamped`, never silent);
3. *window*: for `n_window` steps (RELEASE_AFTER = 0.02 s) the block is
   carried at the predicted velocity (its velocity is set to the prediction
   before every step: the heavier striker keeps pushing it, and the ground's
   friction does not eat into the velocity at release that the prediction
   is); then the arm pulls the striker away (parked off the scene).  The
   window's displacement is not predicted: in full contact the block covers
   v·(15-21 ms) (10th-90th percentile) in the window, here v·20 ms;
4. *slide*: the engine alone, until MAX_TIME after launch.

With no stiff pair left the rule's part of a rollout runs at the slide step
(4 ms, a fifth of the block-ground pair's 0.02 s time constant) instead of the
1 ms the striker-block pair needs, and once every world is past release the
rollout takes `DT_AFTER` = 8 ms steps; the test suite checks the rest pose
against the same rule at 1 ms and against the full-contact MuJoCo C strike
(`tests/test_hybrid.py`).

`hybrid_step` is one MJX step of the rule (jit, vmap over worlds with
per-world parameters, `jax.jacfwd` through a rollout, and `jax.grad` on a scene
built with `differentiable=True`); `hybrid_rollouts_c` runs the same rule on
MuJoCo C (`mujoco.batch`) in segments, the handler
evaluated in one batch between them: the CPU fallback, for rollouts that need
no gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..core import _batch
from ..core._mjx import mjx
from ..core._shard import map_batched, spread
from ..core._types import Array, Bool, Float, Int
from ..scenes import _geometry as geo
from ..scenes import _scenes, _strike

ENERGY_SLACK = 0.02  # post-impact kinetic energy may exceed the pre-impact energy by at most 2 %
# The step once every world is past release: only the block-ground pair is left (time constant
# 0.02 s, 2.5 steps of 8 ms).  Against the 1 ms reference the rest pose moves by 1.2-1.7 mm median
# (5 % of the slide, 128 prior strikes per shape), against 0.5-0.8 mm at 4 ms; test_hybrid.py checks it.
DT_AFTER = 0.008
APPROACH = 0
WINDOW = 1
RELEASED = 2

Handler = Callable[[Float[Array, "3"], Float[Array, "p"]], Float[Array, "3"]]


class HybridSim(eqx.Module):
    """The strike scene prepared for hybrid rollouts.  Build with `make_hybrid_sim`.

    Attributes:
        sim: the strike scene; its slide model (no striker-block pair) is the hybrid model.
        dt: the hybrid step (s), the scene's slide step, until every world is past release.
        n_steps: steps at `dt` (n_approach + n_window + 1: the rule's part of a rollout).
        n_window: steps from touch to release (RELEASE_AFTER / dt).
        n_approach: steps within which the slowest strike of the range touches; a later touch is a miss.
        dt_after: the step after that (s), when only the block-ground contact is left.
        n_after: steps at `dt_after` until MAX_TIME.
        outline: the footprint, counter-clockwise, (N, 2) m, block frame.
        block_mass, block_izz, block_com: the block's mass (kg), inertia about the vertical
            axis through its centre of mass (kg m²) and centre of mass (2,) in its frame (m).
        striker_mass: kg.
        park: the striker body's reference position in the world (2,), m.
    """

    sim: _strike.StrikeSim
    dt: float = eqx.field(static=True)
    n_steps: int = eqx.field(static=True)
    n_window: int = eqx.field(static=True)
    n_approach: int = eqx.field(static=True)
    dt_after: float = eqx.field(static=True)
    n_after: int = eqx.field(static=True)
    outline: Float[Array, "N 2"]
    block_mass: float = eqx.field(static=True)
    block_izz: float = eqx.field(static=True)
    block_com: tuple[float, float] = eqx.field(static=True)
    striker_mass: float = eqx.field(static=True)
    park: Float[Array, "2"]

    @property
    def shape(self) -> str:
        return self.sim.shape


def make_hybrid_sim(
    shape: str, *, sim: _strike.StrikeSim | None = None, differentiable: bool = False, dt_after: float = DT_AFTER
) -> HybridSim:
    """The hybrid scene of one block shape.

    Args:
        shape: "semi-cylinder", "square" or "triangle".
        sim: an existing `StrikeSim` of that shape to share (default: a new one).  Its
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

    Returns:
        A `HybridSim`.
    """
    geo.check_shape(shape)
    if sim is None:
        settings = _scenes.SolverSettings(iterations=1) if differentiable else _scenes.SolverSettings()
        sim = _strike.make_strike_sim(shape, settings)
    if sim.shape != shape:
        raise ValueError(f"sim is for the {sim.shape!r} block, not {shape!r}")
    m = sim.mj_slide_model()
    dt = float(m.opt.timestep)
    rot9 = np.zeros(9)
    mujoco.mju_quat2Mat(rot9, m.body_iquat[1])
    rot = rot9.reshape(3, 3)
    inertia = rot @ np.diag(m.body_inertia[1]) @ rot.T
    v_min = geo.STRIKE_RANGES["v_pre"][0]
    n_window = int(round(_strike.RELEASE_AFTER / dt))
    n_approach = int(math.ceil(geo.GAP / v_min / dt)) + 2
    n_steps = n_approach + n_window + 1
    if not dt_after >= dt:
        raise ValueError(f"dt_after = {dt_after} s must be at least the hybrid step {dt} s")
    return HybridSim(
        sim=sim,
        dt=dt,
        n_steps=n_steps,
        n_window=n_window,
        n_approach=n_approach,
        dt_after=float(dt_after),
        n_after=int(math.ceil((_strike.MAX_TIME - n_steps * dt) / dt_after - 1e-9)),
        outline=jnp.asarray(geo.outline(shape)),
        block_mass=float(m.body_mass[1]),
        block_izz=float(inertia[2, 2]),
        block_com=(float(m.body_ipos[1][0]), float(m.body_ipos[1][1])),
        striker_mass=float(m.body_mass[2]),
        park=jnp.asarray(m.body_pos[2, :2]),
    )


# --- the rule, on one world's (qpos, qvel) ------------------------------------------------------


def _striker_in_block(hs: HybridSim, qpos: Float[Array, "10"], qvel: Float[Array, "9"]):
    """Striker centre, yaw and velocity in the block frame."""
    pose = _strike.block_pose(qpos)
    rot_t = geo.rot2(-pose[2])
    centre = rot_t @ (hs.park + qpos[7:9] - pose[:2])
    return centre, qpos[9] - pose[2], rot_t @ qvel[6:8]


def _square(centre, yaw) -> Float[Array, "4 2"]:
    h = geo.STRIKER_HALF
    corners = jnp.array([[h, -h], [h, h], [-h, h], [-h, -h]], dtype=centre.dtype)
    return centre + corners @ geo.rot2(yaw).T


def _edge_normals(poly: Float[Array, "N 2"]) -> Float[Array, "N 2"]:
    edge = jnp.roll(poly, -1, axis=0) - poly
    n = jnp.stack([edge[:, 1], -edge[:, 0]], axis=1)
    return n / jnp.maximum(jnp.linalg.norm(n, axis=1, keepdims=True), 1e-12)


def separation(hs: HybridSim, qpos: Float[Array, "10"]) -> Float[Array, ""]:
    """Planar separating-axis distance between the striker's square and the block's footprint (m).

    Positive: the largest gap along any edge normal of either polygon (a lower
    bound on their distance); negative: they overlap, by the smallest
    penetration along those axes.  Both bodies are vertical prisms at the same
    height, so overlap in the plane is overlap in space while the block stands.
    """
    centre, yaw, _ = _striker_in_block(hs, qpos, jnp.zeros(9, qpos.dtype))
    a, b = hs.outline.astype(qpos.dtype), _square(centre, yaw)
    axes = jnp.concatenate([_edge_normals(a), _edge_normals(b)])
    pa, pb = a @ axes.T, b @ axes.T
    gap = jnp.maximum(pb.min(0) - pa.max(0), pa.min(0) - pb.max(0))
    return gap.max()


def touching(hs: HybridSim, qpos: Float[Array, "10"], qvel: Float[Array, "9"]) -> Bool[Array, ""]:
    """Whether the striker overlaps the block while closing in on it (the rule's touch)."""
    centre, _, v = _striker_in_block(hs, qpos, qvel)
    block_v = geo.rot2(-_strike.block_pose(qpos)[2]) @ qvel[0:2]
    return (separation(hs, qpos) < 0) & ((v - block_v) @ centre < 0)


def strike_of_state(hs: HybridSim, qpos: Float[Array, "10"], qvel: Float[Array, "9"]) -> Float[Array, "3"]:
    """The strike (θ, θ1, v_pre) that a pre-impact configuration is, read back from the striker's line of travel.

    The impact point is where the line through the striker's centre along its
    velocity enters the footprint (SCENE.md: the striker is launched with its
    centre on that line); θ is its polar angle, θ1 the signed angle from the
    inward normal there to the direction of travel, v_pre the striker's speed
    relative to the block.  The inverse of `clashx.scenes._strike.initial_state`.
    """
    centre, _, v = _striker_in_block(hs, qpos, qvel)
    block_v = geo.rot2(-_strike.block_pose(qpos)[2]) @ qvel[0:2]
    v = v - block_v
    speed = jnp.linalg.norm(v)
    d = v / jnp.maximum(speed, 1e-9)
    if hs.shape == "semi-cylinder":
        b = centre @ d
        disc = jnp.maximum(b * b - (centre @ centre - geo.RADIUS**2), 0.0)
        point = centre + (-b - jnp.sqrt(disc)) * d
    else:
        a = hs.outline.astype(qpos.dtype)
        t, s, ok, _ = geo.line_edge_hits(a, centre, d)
        entering = (d @ _edge_normals(a).T) < 0  # d · outward normal < 0
        ok = entering & ok & (s >= -1e-6) & (s <= 1 + 1e-6)
        point = centre + jnp.min(jnp.where(ok, t, jnp.inf)) * d
        point = jnp.where(jnp.isfinite(point), point, centre)
    theta = jnp.arctan2(point[1], point[0])
    _, normal = geo.impact_geometry(hs.shape, theta)
    inward = -normal
    theta1 = jnp.arctan2(inward[0] * d[1] - inward[1] * d[0], inward @ d)
    return jnp.stack([theta, theta1, speed])


def _kinetic(hs: HybridSim, qpos, block_v_world, block_w, striker_v):
    """Planar kinetic energy of block (velocity of its frame origin, yaw rate) and striker, J."""
    yaw = _strike.block_pose(qpos)[2]
    r = geo.rot2(yaw) @ jnp.asarray(hs.block_com, qpos.dtype)
    v_com = block_v_world + block_w * jnp.stack([-r[1], r[0]])
    return 0.5 * (hs.block_mass * v_com @ v_com + hs.block_izz * block_w**2 + hs.striker_mass * striker_v @ striker_v)


class Impact(eqx.Module):
    """What the handler did at a touch.

    Attributes:
        qvel: the world's velocities after the impact.
        post_velocity: the block's (vx, vy, ωz) in its frame at release (after the guard).
        strike: the strike the handler was given.
        clamped: whether the guard scaled the prediction down.
    """

    qvel: Float[Array, "9"]
    post_velocity: Float[Array, "3"]
    strike: Float[Array, "3"]
    clamped: Bool[Array, ""]


def impact(
    hs: HybridSim, handler: Handler, params: Float[Array, "p"], qpos: Float[Array, "10"], qvel: Float[Array, "9"]
) -> Impact:
    """Apply the handler at a touch: block velocity from the prediction, striker velocity from momentum, guarded.

    The block's planar velocity change Δ = (predicted − current) is scaled by
    the largest s ∈ [0, 1] for which the kinetic energy of block and striker
    is at most (1 + ENERGY_SLACK) times its pre-impact value (the energy is a
    quadratic in s); `clamped` says whether s < 1.
    """
    strike = strike_of_state(hs, qpos, qvel)
    pred = jnp.asarray(handler(strike, params), qpos.dtype)
    yaw = _strike.block_pose(qpos)[2]
    rot = geo.rot2(yaw)
    v0, w0, s0 = qvel[0:2], qvel[5], qvel[6:8]
    dv, dw = rot @ pred[:2] - v0, pred[2] - w0
    r = rot @ jnp.asarray(hs.block_com, qpos.dtype)
    dv_com = dv + dw * jnp.stack([-r[1], r[0]])
    ratio = hs.block_mass / hs.striker_mass

    def energy(s):
        return _kinetic(hs, qpos, v0 + s * dv, w0 + s * dw, s0 - ratio * s * dv_com)

    e0, e_half, e1 = energy(0.0), energy(0.5), energy(1.0)
    # e(s) = a s² + b s + e0 through the three values
    a = 2.0 * (e1 - 2.0 * e_half + e0)
    b = e1 - e0 - a
    bound = (1.0 + ENERGY_SLACK) * e0
    root = (-b + jnp.sqrt(jnp.maximum(b * b - 4.0 * a * (e0 - bound), 0.0))) / (2.0 * jnp.maximum(a, 1e-12))
    clamped = e1 > bound
    s = jnp.where(clamped, jnp.clip(root, 0.0, 1.0), 1.0)
    new = jnp.asarray(qvel).at[0:2].set(v0 + s * dv).at[5].set(w0 + s * dw).at[6:8].set(s0 - ratio * s * dv_com)
    post = jnp.concatenate([geo.rot2(-yaw) @ (v0 + s * dv), (w0 + s * dw)[None]])
    return Impact(qvel=new, post_velocity=post, strike=strike, clamped=clamped)


def carry(qpos: Float[Array, "10"], qvel: Float[Array, "9"], post_velocity: Float[Array, "3"]) -> Float[Array, "9"]:
    """The block's velocity set to the prediction (block frame → world at the current yaw), other velocities kept."""
    yaw = _strike.block_pose(qpos)[2]
    return jnp.asarray(qvel).at[0:2].set(geo.rot2(yaw) @ post_velocity[:2]).at[5].set(post_velocity[2])


def release(
    qpos: Float[Array, "10"], qvel: Float[Array, "9"], post_velocity: Float[Array, "3"]
) -> tuple[Float[Array, "10"], Float[Array, "9"]]:
    """The arm pulls the striker away; the block leaves with the predicted velocity at release."""
    return _strike.parked(qpos, carry(qpos, qvel, post_velocity))


# --- MJX: one step, a rollout -------------------------------------------------------------------


class HybridState(eqx.Module):
    """What evolves in a hybrid rollout of one world.

    Attributes:
        data: MJX data of the hybrid model.
        step: steps taken since launch.
        phase: APPROACH (0), WINDOW (1) or RELEASED (2).
        k_touch: the step of the touch (-1 before).
        post_velocity: the guarded prediction (block frame), zeros before the touch.
        strike: the strike the handler saw (zeros before the touch).
        clamped: whether the guard clamped this world's impact.
        launch: (qpos, qvel) at launch: the handler's input on steps without a touch, so that
            gradients stay finite (its value there is discarded; a parked striker has no
            direction of travel, and NaN gradients would leak through the discarded branch).
    """

    data: mjx.Data
    step: Int[Array, ""]
    phase: Int[Array, ""]
    k_touch: Int[Array, ""]
    post_velocity: Float[Array, "3"]
    strike: Float[Array, "3"]
    clamped: Bool[Array, ""]
    launch: tuple[Float[Array, "10"], Float[Array, "9"]]


def hybrid_model(hs: HybridSim, params: Float[Array, "p"]) -> mjx.Model:
    """The MJX model of the hybrid step with one world's parameters written in (the ground pair's μ2)."""
    return hs.sim.space.apply(hs.sim.slide_model, hs.sim.slide_rows, params)


def init_state(hs: HybridSim, model: mjx.Model, strike: Float[Array, "3"]) -> HybridState:
    """The launch state of one strike (SCENE.md), in the hybrid model."""
    qpos, qvel = _strike.initial_state(hs.sim, strike)
    data = mjx.make_data(model).replace(qpos=qpos.astype(model.qpos0.dtype), qvel=qvel.astype(model.qpos0.dtype))
    zero3 = jnp.zeros(3, data.qpos.dtype)
    return HybridState(
        data, jnp.array(0), jnp.array(APPROACH), jnp.array(-1), zero3, zero3, jnp.array(False), (data.qpos, data.qvel)
    )


def apply_rule(hs: HybridSim, handler: Handler, params, state: HybridState) -> HybridState:
    """The rule's decision for the current state (touch, release or nothing), before the engine steps."""
    q, v = state.data.qpos, state.data.qvel
    hit = (state.phase == APPROACH) & (state.step < hs.n_approach) & touching(hs, q, v)
    imp = impact(hs, handler, params, jnp.where(hit, q, state.launch[0]), jnp.where(hit, v, state.launch[1]))
    v = jnp.where(hit, imp.qvel, v)
    post = jnp.where(hit, imp.post_velocity, state.post_velocity)
    k_touch = jnp.where(hit, state.step, state.k_touch)
    phase = jnp.where(hit, WINDOW, state.phase)
    in_window = (phase == WINDOW) & ~hit
    v = jnp.where(in_window, carry(q, v, post), v)
    let_go = in_window & (state.step >= k_touch + hs.n_window)
    q_rel, v_rel = release(q, v, post)
    q, v = jnp.where(let_go, q_rel, q), jnp.where(let_go, v_rel, v)
    return HybridState(
        data=state.data.replace(qpos=q, qvel=v),
        step=state.step,
        phase=jnp.where(let_go, RELEASED, phase),
        k_touch=k_touch,
        post_velocity=post,
        strike=jnp.where(hit, imp.strike, state.strike),
        clamped=state.clamped | (hit & imp.clamped),
        launch=state.launch,
    )


def hybrid_step(hs: HybridSim, model: mjx.Model, state: HybridState, handler: Handler, params) -> HybridState:
    """One hybrid MJX step: the rule (touch → handler, release), then `mjx.step` of the hybrid model.

    Args:
        hs: the hybrid scene.
        model: `hybrid_model(hs, params)` (built once per world, outside the loop).
        state: the world's `HybridState`.
        handler: `(strike, params) -> (vx, vy, ωz)`, e.g. a `Surrogate`.
        params: the world's contact parameters (the handler's and the ground's).

    Returns:
        The state one step (hs.dt) later.  Batch worlds with `jax.vmap`.
    """
    state = apply_rule(hs, handler, params, state)
    return eqx.tree_at(lambda s: (s.data, s.step), state, (mjx.step(model, state.data), state.step + 1))


class HybridResult(eqx.Module):
    """The outcome of one hybrid strike.

    Attributes:
        rest_pose: block pose (x, y, yaw) at the end of the rollout, world frame.
        post_velocity: the (guarded) predicted velocity at release, block frame; zeros for a miss.
        t_touch: the touch (s after launch; NaN for a miss).
        touched: whether the striker touched the block.
        clamped: whether the energy guard clamped the prediction.
        strike: the strike the handler saw.
    """

    rest_pose: Float[Array, "3"]
    post_velocity: Float[Array, "3"]
    t_touch: Float[Array, ""]
    touched: Bool[Array, ""]
    clamped: Bool[Array, ""]
    strike: Float[Array, "3"]


def hybrid_rollout(
    hs: HybridSim, handler: Handler, strike: Float[Array, "3"], params: Float[Array, "p"], *, n_steps: int | None = None
) -> HybridResult:
    """One strike from launch to MAX_TIME (or `n_steps` hybrid steps) on MJX.

    Args:
        hs: the hybrid scene.
        handler: the striker-block contact handler, e.g. a `Surrogate`.
        strike: (θ, θ1, v_pre), rad, rad, m/s.
        params: contact parameters in `hs.sim.space` order (μ1, μ2, e1).
        n_steps: steps to take (default: `hs.n_steps` at `hs.dt`, then `hs.n_after` at
            `hs.dt_after`, to MAX_TIME); past `hs.n_steps` they are taken at `hs.dt_after`.

    Returns:
        A `HybridResult`.  jit, vmap (per-world strikes and parameters) and grad all apply.
    """
    model = hybrid_model(hs, params)
    state = init_state(hs, model, strike)
    n_rule = hs.n_steps if n_steps is None else min(n_steps, hs.n_steps)
    n_after = hs.n_after if n_steps is None else max(n_steps - hs.n_steps, 0)

    def body(s, _):
        return hybrid_step(hs, model, s, handler, params), None

    state, _ = jax.lax.scan(body, state, None, length=n_rule)
    if n_after:
        # Every world is past release: a hybrid step is an MJX step now, at the larger step.
        after = model.replace(opt=model.opt.replace(timestep=jnp.asarray(hs.dt_after, model.opt.timestep.dtype)))
        data, _ = jax.lax.scan(lambda d, _: (mjx.step(after, d), None), state.data, None, length=n_after)
        state = eqx.tree_at(lambda s: (s.data, s.step), state, (data, state.step + n_after))
    touched = state.k_touch >= 0
    return HybridResult(
        rest_pose=_strike.block_pose(state.data.qpos),
        post_velocity=state.post_velocity,
        t_touch=jnp.where(touched, state.k_touch * hs.dt, jnp.nan),
        touched=touched,
        clamped=state.clamped,
        strike=state.strike,
    )


def hybrid_rollouts(hs: HybridSim, handler: Handler, strikes: Float[Array, "n 3"], params) -> HybridResult:
    """`hybrid_rollout` over a batch (params: one set, or one per strike), vmapped in blocks per device.

    With several local devices each block is spread over them (`clashx.core.map_batched`).
    """
    params = jnp.broadcast_to(jnp.asarray(params), (jnp.shape(strikes)[0], hs.sim.space.size))
    (hs, handler), (strikes, params) = spread((hs, handler), (jnp.asarray(strikes), params))
    return _hybrid_rollouts(hs, handler, strikes, params)


@eqx.filter_jit
def _hybrid_rollouts(hs: HybridSim, handler: Handler, strikes, params) -> HybridResult:
    return map_batched(
        lambda x: hybrid_rollout(hs, handler, x[0], x[1]), (strikes, params), batch_size=_strike.MJX_BLOCK
    )


# --- MuJoCo C: the same rule in three segments -----------------------------------------------------


@eqx.filter_jit
def _touch_scan(hs: HybridSim, qpos: Float[Array, "n t 10"], qvel: Float[Array, "n t 9"]) -> Int[Array, "n"]:
    hit = jax.vmap(jax.vmap(lambda q, v: touching(hs, q, v)))(qpos, qvel)
    return jnp.where(hit.any(axis=1), jnp.argmax(hit, axis=1), -1)


@eqx.filter_jit
def _impacts(hs: HybridSim, handler, params, qpos, qvel) -> Impact:
    return jax.vmap(lambda p, q, v: impact(hs, handler, p, q, v))(params, qpos, qvel)


_releases = jax.jit(jax.vmap(release))
_carries = jax.jit(jax.vmap(carry))


def _slide_batch(hs: HybridSim, params: np.ndarray, nthread: int, timestep: float | None = None):
    m = hs.sim.mj_slide_model()
    if timestep is not None:
        m.opt.timestep = timestep
    return _batch.make_batch(m, hs.sim.space, hs.sim.slide_rows, params, nsim=len(params), nthread=nthread)


def _roll(batch, qpos, qvel, time, n: int, record=("qpos", "qvel")):
    return _batch.rollout(batch, qpos, qvel, n, time=time, record=record)


def hybrid_rollouts_c(
    hs: HybridSim,
    handler: Handler,
    strikes: Float[np.ndarray, "n 3"],
    params: Float[np.ndarray, "p"] | Float[np.ndarray, "n p"],
    *,
    nthread: int = 0,
) -> HybridResult:
    """The hybrid rule on MuJoCo C: the CPU fallback of `hybrid_rollouts` (same rule, no gradients).

    `mujoco.batch` rollouts of the hybrid model in segments: the approach
    (`n_approach` steps, recorded; the rule's touch test runs on every recorded
    state at once), the window from each world's touch (the handler evaluated
    for all worlds in one batch before it, the block carried step by step),
    the steps at `dt` from release to `n_steps`, and `n_after` steps at
    `dt_after` to MAX_TIME.  Step for step the rule sees the states MJX's
    `hybrid_step` would.

    Args:
        hs: the hybrid scene.
        handler: `(strike, params) -> (vx, vy, ωz)`, e.g. a `Surrogate`.
        strikes: (n, 3) strikes.
        params: (p,) or (n, p) contact parameters.
        nthread: MuJoCo C threads (0: all CPUs).

    Returns:
        A `HybridResult` of numpy arrays with a leading batch axis.
    """
    strikes = np.asarray(strikes, np.float64)
    n = len(strikes)
    params = np.broadcast_to(np.asarray(params, np.float64), (n, hs.sim.space.size)).copy()
    batch = _slide_batch(hs, params, nthread)
    q0, v0 = (np.asarray(a, np.float64) for a in _strike.initial_states_batch(hs.sim, jnp.asarray(strikes)))
    rec = _roll(batch, q0, v0, 0.0, hs.n_approach - 1)
    qs = np.concatenate([q0[:, None], rec["qpos"]], axis=1)  # state j at index j
    vs = np.concatenate([v0[:, None], rec["qvel"]], axis=1)
    k = np.asarray(_touch_scan(hs, jnp.asarray(qs), jnp.asarray(vs)))
    touched = k >= 0
    rows = np.arange(n)
    kk = np.maximum(k, 0)
    imp = _impacts(hs, handler, jnp.asarray(params), jnp.asarray(qs[rows, kk]), jnp.asarray(vs[rows, kk]))
    q_t, v_t = qs[rows, kk], np.where(touched[:, None], np.asarray(imp.qvel, np.float64), vs[rows, kk])
    # the window: n_window steps from the touch, the block carried at the prediction (misses just keep going)
    post = np.where(touched[:, None], np.asarray(imp.post_velocity, np.float64), 0.0)
    q_r, v_r = q_t, v_t
    for j in range(hs.n_window):
        if j > 0:
            v_r = np.where(
                touched[:, None], np.asarray(_carries(jnp.asarray(q_r), jnp.asarray(v_r), jnp.asarray(post))), v_r
            )
        rec = _roll(batch, q_r, v_r, (kk + j) * hs.dt, 1)
        q_r, v_r = rec["qpos"][:, -1], rec["qvel"][:, -1]
    q_rel, v_rel = (np.asarray(a, np.float64) for a in _releases(jnp.asarray(q_r), jnp.asarray(v_r), jnp.asarray(post)))
    q_r = np.where(touched[:, None], q_rel, q_r)
    v_r = np.where(touched[:, None], v_rel, v_r)
    left = hs.n_steps - kk - hs.n_window  # steps at dt from release until every world is past release
    rec = _roll(batch, q_r, v_r, (kk + hs.n_window) * hs.dt, int(left.max()))
    q_s, v_s = rec["qpos"][rows, left - 1], rec["qvel"][rows, left - 1]
    after = _slide_batch(hs, params, nthread, timestep=hs.dt_after)
    q_end = _roll(after, q_s, v_s, hs.n_steps * hs.dt, hs.n_after, record=("qpos",))["qpos"][:, -1]
    return HybridResult(
        rest_pose=np.asarray(_strike.block_poses_batch(jnp.asarray(q_end)), np.float64),
        post_velocity=post,
        t_touch=np.where(touched, kk * hs.dt, np.nan),
        touched=touched,
        clamped=touched & np.asarray(imp.clamped),
        strike=np.where(touched[:, None], np.asarray(imp.strike, np.float64), 0.0),
    )

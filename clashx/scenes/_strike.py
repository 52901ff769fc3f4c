"""Simulating one strike (SCENE.md) to rest, on MJX (jit/vmap/grad) and on MuJoCo C (a thread pool).

One strike runs in two phases that both engines share:

1. *contact phase*, timestep `dt_contact`: the striker is launched at the
   settled block; the first collision pass that finds a striker-block contact
   (distance < 0) marks the first touch, at the time of the state it was run
   on; `RELEASE_AFTER` = 0.02 s later the block's planar velocity is the
   collision event (the definition of the lab's `post_velocity_true`) and the
   arm pulls the striker away (it is parked far off the scene);
2. *slide phase*, timestep `dt_slide`: only the block-ground contact is left;
   the block slides until `MAX_TIME` after launch (the lab's cut-off), and its
   pose then is the rest pose.

The rule (initial state, touch, release, velocity in the block frame) is
written once in JAX; the MuJoCo C engine (`simulate_strikes_c`) calls the same
functions on numpy arrays around `mujoco.batch.Batch` rollouts.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import mujoco.batch
import numpy as np

from ..core import (
    Array,
    Bool,
    Float,
    Layout,
    ParamSpace,
    PRNGKeyArray,
    block_size,
    map_batched,
    mjx,
    model_world_bytes,
    spread,
)
from ..core import batch as _batch
from . import _geometry as geo
from . import _pair_state as ps
from . import _scenes
from . import _strike_impact as hooks
from ._scene import AbstractImpactScene, ImpactGate
from ._spaces import strike_space
from ._strike_impact import block_pose as block_pose
from ._strike_impact import parked as parked
from ._strike_impact import parked_np
from ._strike_impact import yaw_of as yaw_of

RELEASE_AFTER = 0.02  # s from first touch until the arm pulls the striker away
MAX_TIME = 4.0  # s after launch: the lab stops a strike here if the block still moves
SETTLE_TIME = 0.5  # s the block settles on the ground before any strike (long enough to be at rest)


class StrikeEvent(eqx.Module):
    """The outcome of one strike.

    Attributes:
        post_velocity: (vx, vy, ωz) of the block frame's origin in the block
            frame at release, m/s and rad/s; zeros if the striker missed.
        release_pose: block pose (x, y, yaw) in the world at release, m and rad
            (the pose at launch if the striker missed).
        t_touch: first touch, s after launch (NaN if the striker missed).
        t_release: t_touch + RELEASE_AFTER, s after launch: the contact window is [t_touch, t_release].
        touched: whether the striker touched the block.
        rest_pose: block pose (x, y, yaw) in the world at MAX_TIME, m and rad.
    """

    post_velocity: Float[Array, "3"]
    release_pose: Float[Array, "3"]
    t_touch: Float[Array, ""]
    t_release: Float[Array, ""]
    touched: Bool[Array, ""]
    rest_pose: Float[Array, "3"]


def sample_strikes(n: int, *, key: PRNGKeyArray) -> jax.Array:
    """`n` strikes (θ, θ1, v_pre) uniform over SCENE.md's ranges, (n, 3)."""
    lo, hi = jnp.asarray(geo.STRIKE_LOW), jnp.asarray(geo.STRIKE_HIGH)
    return lo + jax.random.uniform(key, (n, 3)) * (hi - lo)


class StrikeSim(AbstractImpactScene):
    """The strike scene of one block shape, ready to simulate on MJX or MuJoCo C.

    Build with `make_strike_sim(shape)`.  Static configuration is static; the
    MJX model is a pytree whose array fields can be traced.
    """

    shape: str = eqx.field(static=True)
    settings: _scenes.SolverSettings = eqx.field(static=True)
    space: ParamSpace
    rows: Layout = eqx.field(static=True)
    slide_rows: Layout = eqx.field(static=True)
    model: mjx.Model
    slide_model: mjx.Model
    block_rest: Float[Array, "7"]
    striker_geom: int = eqx.field(static=True)
    block_geoms: tuple[int, ...] = eqx.field(static=True)
    n_contact: int = eqx.field(static=True)
    n_window: int = eqx.field(static=True)
    n_slide: int = eqx.field(static=True)
    bodies: hooks.StrikeBodies = eqx.field(static=True)
    pair_joints: ps.PairJoints = eqx.field(static=True)

    name: ClassVar[str] = "strike"
    pair: ClassVar[tuple[str, str]] = ("striker", "block")

    @property
    def window(self) -> float:
        return RELEASE_AFTER

    def mjcf(self) -> str:
        return _scenes.strike_xml(self.shape, self.settings)

    def sample_inputs(self, n: int, *, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
        """`n` strikes (θ, θ1, v_pre) uniform over SCENE.md's ranges and `n` draws of the space's prior."""
        k_strike, k_params = jax.random.split(key)
        return np.asarray(sample_strikes(n, key=k_strike)), np.asarray(self.space.sample(n, key=k_params))

    def simulate_events(self, inputs: np.ndarray, params: np.ndarray, *, engine: str, to_rest: bool = True) -> dict:
        """Strike events (`clashx.events` "strike" schema) of a batch, on MuJoCo C ("c") or MJX ("mjx")."""
        if engine == "c":
            ev = simulate_strikes_c(self, inputs, params, to_rest=to_rest)
        else:
            ev = simulate_strikes_mjx(self, jnp.asarray(inputs), jnp.asarray(params), to_rest=to_rest)
        touched = np.asarray(ev.touched)
        start = np.broadcast_to(np.asarray(block_pose(self.block_rest)), (len(inputs), 3))
        return {
            "scene": "strike",
            "shape": self.shape,
            "source": engine if engine == "mjx" else "mujoco-c",
            "strike": inputs,
            "params": params,
            "post_velocity": np.where(touched[:, None], np.asarray(ev.post_velocity, np.float64), np.nan),
            "release_pose": np.asarray(ev.release_pose, np.float64),
            "t_touch": np.asarray(ev.t_touch, np.float64),  # NaN for a miss, from both engines
            "t_release": np.asarray(ev.t_release, np.float64),
            "touched": touched,
            "start_pose": start,
            "rest_pose": np.asarray(ev.rest_pose),
        }

    def describe(self) -> dict[str, Any]:
        return {
            "strike_ranges": {k: list(v) for k, v in geo.STRIKE_RANGES.items()},
            "param_space": self.space.describe(),
            "solver": dataclasses.asdict(self.settings),
            "release_after_s": RELEASE_AFTER,
            "max_time_s": MAX_TIME,
        }

    def mj_model(self, touch_sensor: bool = False) -> mujoco.MjModel:
        """A fresh MuJoCo C model of the contact phase (nominal parameters), ready for `space.apply_c`."""
        return _compile(self.space, self.shape, self.settings, touch_sensor=touch_sensor)

    def mj_slide_model(self) -> mujoco.MjModel:
        """A fresh MuJoCo C model of the slide phase: no striker-block pair, timestep dt_slide."""
        return _compile(self.space, self.shape, self.settings, striker_pair=False)

    # --- the hybrid rule's hooks (`clashx.scenes._strike_impact`) ---------------------------------
    # The engine steps the slide model at dt_slide: the striker-block pair has no contact in it,
    # since the arm pulls the striker away after its one impact and the pair never rests on each other.

    @property
    def joints(self) -> ps.PairJoints:
        return self.pair_joints

    def lite(self) -> StrikeSim:
        if self.model is None and self.slide_model is None:
            return self
        return eqx.tree_at(lambda s: (s.model, s.slide_model), self, (None, None), is_leaf=lambda x: x is None)

    @property
    def dt(self) -> float:
        return self.settings.dt_slide

    @property
    def n_approach(self) -> int:
        """Hybrid steps within which the slowest strike of the range touches; a later touch is a miss."""
        return int(math.ceil(geo.GAP / geo.STRIKE_RANGES["v_pre"][0] / self.dt)) + 2

    @property
    def gate(self) -> ImpactGate:
        return ImpactGate(
            window=RELEASE_AFTER,
            min_apart=self.dt,
            min_closing=0.01,
            max_impacts=1,
            until=self.n_approach * self.dt,
            rest_speed=REST_SPEED,
            energy_slack=None,  # the strike guards its own (`hooks.guard`: the striker keeps momentum)
        )

    def hybrid_c_model(self) -> mujoco.MjModel:
        return self.mj_slide_model()

    def world_bytes(self) -> int:
        return strike_world_bytes(self)

    def hybrid_rows(self) -> Layout:
        return self.slide_rows

    @property
    def switch_rows(self) -> tuple[int, ...]:
        return ()

    def separation(self, qpos: Float[Array, "10"]) -> Float[Array, ""]:
        return hooks.separation(self.bodies, qpos)

    def impact_input(self, pre: Float[Array, "19"]) -> Float[Array, "3"]:
        """The strike (θ, θ1, v_pre) a pre-impact state is: the strike surrogate's input."""
        return hooks.strike_of_state(self.bodies, pre[:10], pre[10:])

    def impact_output(self, pre: Float[Array, "19"], prediction: Float[Array, "3"]) -> Float[Array, "19"]:
        """The state at release: the block carried at the guarded prediction, the striker parked."""
        velocity, _ = hooks.guard(self.bodies, pre[:10], pre[10:], prediction)
        return hooks.release_state(self.bodies, RELEASE_AFTER, pre, velocity)


def _compile(space: ParamSpace, shape: str, settings: _scenes.SolverSettings, **kwargs) -> mujoco.MjModel:
    m = space.prepare(_scenes.compile_xml(_scenes.strike_xml(shape, settings, **kwargs)))
    if not kwargs.get("striker_pair", True):
        m.opt.timestep = settings.dt_slide
    return m


def _settle(m: mujoco.MjModel) -> np.ndarray:
    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    for _ in range(int(round(SETTLE_TIME / m.opt.timestep))):
        mujoco.mj_step(m, d)
    return d.qpos[:7].copy()


def make_strike_sim(
    shape: str, settings: _scenes.SolverSettings | None = None, space: ParamSpace | None = None
) -> StrikeSim:
    """Build the strike scene of `shape` with the block settled on the ground.

    Args:
        shape: "semi-cylinder", "square" or "triangle".
        settings: timesteps and solver settings (defaults: `SolverSettings()`).
        space: the identified parameters (default `strike_space()` for the shape's pieces).

    Returns:
        A `StrikeSim`. Its contact phase lasts long enough for the slowest
        strike of the range (v_pre = 0.2 m/s) to touch and be released.
    """
    geo.check_shape(shape)
    settings = settings or _scenes.SolverSettings()
    n_pieces = len(geo.convex_pieces(shape))
    space = space or strike_space(n_pieces)
    m = _compile(space, shape, settings)
    m_slide = _compile(space, shape, settings, striker_pair=False)
    v_min = geo.STRIKE_RANGES["v_pre"][0]
    n_window = int(round(RELEASE_AFTER / settings.dt_contact))
    n_contact = int(math.ceil(geo.GAP / v_min / settings.dt_contact)) + n_window + 5
    n_slide = int(math.ceil(MAX_TIME / settings.dt_slide))
    return StrikeSim(
        bodies=hooks.strike_bodies(shape, m_slide),
        pair_joints=ps.pair_joints(m_slide, "strike", ("striker", "block")),
        shape=shape,
        settings=settings,
        space=space,
        rows=space.rows(m),
        slide_rows=space.rows(m_slide, strict=False),
        model=mjx.put_model(m),
        slide_model=mjx.put_model(m_slide),
        block_rest=jnp.asarray(_settle(m)),
        striker_geom=mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "striker"),
        block_geoms=tuple(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"block_{k}") for k in range(n_pieces)),
        n_contact=n_contact,
        n_window=n_window,
        n_slide=n_slide,
    )


def block_velocity(qpos: Float[Array, "nq"], qvel: Float[Array, "nv"]) -> Float[Array, "3"]:
    """(vx, vy, ωz) of the block frame's origin in the block frame.

    MuJoCo's free joint gives the origin's linear velocity in the world frame
    and the angular velocity in the body frame.
    """
    yaw = yaw_of(qpos[3:7])
    v = geo.rot2(-yaw) @ qvel[0:2]
    return jnp.stack([v[0], v[1], qvel[5]])


def initial_state(sim: StrikeSim, strike: Float[Array, "3"]) -> tuple[Float[Array, "10"], Float[Array, "9"]]:
    """qpos and qvel at launch: the settled block, the striker placed and moving as SCENE.md says."""
    centre, s_yaw, vel = geo.striker_start(sim.shape, strike)
    pose = block_pose(sim.block_rest)
    rot = geo.rot2(pose[2])
    c_world = pose[:2] + rot @ centre
    v_world = rot @ vel
    park = jnp.asarray(sim.bodies.park)
    qpos = jnp.concatenate([sim.block_rest, c_world - park, (s_yaw + pose[2])[None]])
    qvel = jnp.concatenate([jnp.zeros(6), v_world, jnp.zeros(1)])
    return qpos, qvel


def _with_params(sim: StrikeSim, params: Float[Array, "p"]) -> mjx.Model:
    return sim.space.apply(sim.model, sim.rows, params)


class ContactResult(eqx.Module):
    """What the contact phase gives: the collision event and the state the slide phase starts from.

    Attributes:
        post_velocity: (vx, vy, ωz) of the block at release (zeros if the striker missed).
        release_pose: block pose (x, y, yaw) at release.
        t_touch, t_release: contact onset and release, s after launch.
        touched: whether the striker touched the block.
        q_end, v_end, t_end: the first simulated state at or after release.
    """

    post_velocity: Float[Array, "3"]
    release_pose: Float[Array, "3"]
    t_touch: Float[Array, ""]
    t_release: Float[Array, ""]
    touched: Bool[Array, ""]
    q_end: Float[Array, "10"]
    v_end: Float[Array, "9"]
    t_end: Float[Array, ""]


def release_rule(sim: StrikeSim, found, touch_k, depth, closing, q_a, v_a, q_b, v_b):
    """The event from the first touching step and the two states around release (both engines use this).

    The first collision pass that finds a striker-block contact runs on state
    `touch_k`; the contact began `depth / closing` earlier (the striker flies
    at constant velocity onto the resting block until then), which places the
    onset between steps.  Release is RELEASE_AFTER later, between states
    touch_k + n_window − 1 (`q_a`, `v_a`) and touch_k + n_window (`q_b`,
    `v_b`); the velocity there is interpolated linearly.  Resolving the onset
    below one step keeps the event a continuous function of the strike:
    otherwise a 1 ms jitter of the onset moves the release velocity by up to
    μ2·g·1 ms (1 cm/s at μ2 = 1).  `found` says whether any pass found a
    contact; a touch too late for its release to fall inside the contact
    phase counts as a miss (it cannot happen within SCENE.md's ranges).

    Returns:
        (touched, post_velocity, release_pose, t_touch, t_release): zeros, the
        pose at `q_b` and NaN times for a miss.
    """
    dt = sim.settings.dt_contact
    touched = found & (touch_k + sim.n_window <= sim.n_contact)
    tau = jnp.clip(depth / jnp.maximum(closing, 1e-6), 0.0, dt)
    t_touch = touch_k * dt - tau
    w = 1.0 - tau / dt
    post = (1.0 - w) * block_velocity(q_a, v_a) + w * block_velocity(q_b, v_b)
    pose_a, pose_b = jnp.asarray(block_pose(q_a)), block_pose(q_b)
    pose_a = pose_a.at[2].set(pose_b[2] + jnp.remainder(pose_a[2] - pose_b[2] + jnp.pi, 2 * jnp.pi) - jnp.pi)
    pose = (1.0 - w) * pose_a + w * pose_b
    return (
        touched,
        jnp.where(touched, post, 0.0),
        jnp.where(touched, pose, pose_b),
        jnp.where(touched, t_touch, jnp.nan),
        jnp.where(touched, t_touch + RELEASE_AFTER, jnp.nan),
    )


def striker_contact(sim: StrikeSim, data: mjx.Data):
    """(touching, depth, unit normal) of the deepest striker-block contact of the last collision pass."""
    contact = data._impl.contact
    g = contact.geom
    block = jnp.asarray(sim.block_geoms)
    pair = ((g[:, 0] == sim.striker_geom) & jnp.isin(g[:, 1], block)) | (
        jnp.isin(g[:, 0], block) & (g[:, 1] == sim.striker_geom)
    )
    dist = jnp.where(pair, contact.dist, jnp.inf)
    i = jnp.argmin(dist)
    return dist[i] < 0, -dist[i], jnp.reshape(contact.frame[i], (-1,))[0:3]  # normal: the frame's first row


def contact_phase(sim: StrikeSim, model: mjx.Model, strike: Float[Array, "3"]) -> ContactResult:
    """Run the contact phase of one strike on MJX (`model` carries the world's parameters)."""
    qpos0, qvel0 = initial_state(sim, strike)
    data = mjx.make_data(model).replace(qpos=qpos0, qvel=qvel0)
    n_win = sim.n_window

    def body(carry, k):
        data, touch_k, depth, closing, q_a, v_a, q_b, v_b = carry
        v_striker = jnp.concatenate([data.qvel[6:8], jnp.zeros(1)])
        data = mjx.step(model, data)  # data.contact: the collision pass on state k
        touching, d, normal = striker_contact(sim, data)
        first = (touch_k < 0) & touching
        touch_k = jnp.where(first, k, touch_k)
        depth = jnp.where(first, d, depth)
        closing = jnp.where(first, jnp.abs(v_striker @ normal), closing)
        at_a = (touch_k >= 0) & (k + 1 == touch_k + n_win - 1)
        at_b = (touch_k >= 0) & (k + 1 == touch_k + n_win)
        q_a, v_a = jnp.where(at_a, data.qpos, q_a), jnp.where(at_a, data.qvel, v_a)
        q_b, v_b = jnp.where(at_b, data.qpos, q_b), jnp.where(at_b, data.qvel, v_b)
        return (data, touch_k, depth, closing, q_a, v_a, q_b, v_b), None

    zero = jnp.zeros(())
    init = (data, jnp.array(-1), zero, zero, qpos0, qvel0, qpos0, qvel0)
    (data, touch_k, depth, closing, q_a, v_a, q_b, v_b), _ = jax.lax.scan(body, init, jnp.arange(sim.n_contact))
    touched, post, pose, t_touch, t_release = release_rule(
        sim, touch_k >= 0, touch_k, depth, closing, q_a, v_a, q_b, v_b
    )
    return ContactResult(
        post_velocity=post,
        release_pose=pose,
        t_touch=t_touch,
        t_release=t_release,
        touched=touched,
        q_end=q_b,
        v_end=v_b,
        t_end=(touch_k + n_win) * sim.settings.dt_contact,
    )


def slide_phase(sim: StrikeSim, params: Float[Array, "p"], qpos, qvel, t_start) -> Float[Array, "10"]:
    """Slide the block (striker parked) from time `t_start` until MAX_TIME; return the final qpos."""
    model = sim.space.apply(sim.slide_model, sim.slide_rows, params)
    qpos, qvel = parked(qpos, qvel)
    data = mjx.make_data(model).replace(qpos=qpos, qvel=qvel, time=t_start)
    n_steps = jnp.ceil((MAX_TIME - t_start) / sim.settings.dt_slide - 1e-9)

    def body(data, k):
        new = mjx.step(model, data)
        return jax.tree.map(lambda a, b: jnp.where(k < n_steps, a, b), new, data), None

    data, _ = jax.lax.scan(body, data, jnp.arange(sim.n_slide))
    return data.qpos


def simulate_strike(
    sim: StrikeSim, strike: Float[Array, "3"], params: Float[Array, "3"], *, to_rest: bool = True
) -> StrikeEvent:
    """Simulate one strike on MJX and return its collision event.

    Args:
        sim: the scene, from `make_strike_sim`.
        strike: (θ, θ1, v_pre), rad, rad, m/s (SCENE.md "A strike").
        params: (p,) values of `sim.space` (its `names`, physical units).
        to_rest: also run the slide phase for the rest pose (else rest_pose is the pose at release).

    Returns:
        A `StrikeEvent`.  Batch with `jax.vmap(simulate_strike, in_axes=(None, 0, 0))`.
    """
    c = contact_phase(sim, _with_params(sim, params), strike)
    q_end = slide_phase(sim, params, c.q_end, c.v_end, c.t_end) if to_rest else c.q_end
    return _event(c, block_pose(q_end))


def _event(contact, rest_pose) -> StrikeEvent:
    """The event of a contact phase's result (MJX's `ContactResult` or C's `ContactRecord`) and a rest pose."""
    fields = ("post_velocity", "release_pose", "t_touch", "t_release", "touched")
    return StrikeEvent(**{f: getattr(contact, f) for f in fields}, rest_pose=rest_pose)


def strike_world_bytes(sim: StrikeSim) -> int:
    """One strike's footprint in a vmapped batch, for the batching policy (`clashx.core.block_size`)."""
    return max(model_world_bytes(sim.model), model_world_bytes(sim.slide_model))


def simulate_strikes_mjx(
    sim: StrikeSim,
    strikes: Float[Array, "batch 3"],
    params: Float[Array, "batch 3"],
    *,
    to_rest: bool = True,
    block: int | None = None,
) -> StrikeEvent:
    """`simulate_strike` over a batch on MJX, vmapped in blocks the batching policy picks.

    One vmap over the whole batch on an accelerator (within its memory), blocks of
    `clashx.core.batching.CPU_BLOCK` on a CPU; `block` overrides (`clashx.core.block_size`).
    With several local devices each block is spread over them (`clashx.core.map_batched`).
    """
    b = block_size(jnp.shape(strikes)[0], world=strike_world_bytes(sim), block=block)
    sim, (strikes, params) = spread(sim, (jnp.asarray(strikes), jnp.asarray(params)))
    return _simulate_strikes_mjx(sim, strikes, params, to_rest=to_rest, block=b)


@eqx.filter_jit
def _simulate_strikes_mjx(sim: StrikeSim, strikes, params, *, to_rest: bool, block: int) -> StrikeEvent:
    return map_batched(lambda x: simulate_strike(sim, x[0], x[1], to_rest=to_rest), (strikes, params), batch_size=block)


# --- MuJoCo C: the same rule around mujoco.batch rollouts ---------------------------------
# The rule's functions, batched and compiled once per batch size, applied to numpy arrays.


@eqx.filter_jit
def initial_states_batch(sim: StrikeSim, strikes):
    """`initial_state` of each strike (n, 3): (qpos (n, nq), qvel (n, nv)), compiled once per batch size."""
    return jax.vmap(lambda s: initial_state(sim, s))(strikes)


@eqx.filter_jit
def _release_rules(sim: StrikeSim, found, k, depth, closing, q_a, v_a, q_b, v_b):
    return jax.vmap(lambda *a: release_rule(sim, *a))(found, k, depth, closing, q_a, v_a, q_b, v_b)


block_poses_batch = jax.jit(jax.vmap(block_pose))  # `block_pose` of each qpos row (n, nq) -> (n, 3)


def simulate_strikes_c(
    sim: StrikeSim,
    strikes: Float[np.ndarray, "batch 3"],
    params: Float[np.ndarray, "batch p"],
    *,
    to_rest: bool = True,
    nthread: int = 0,
) -> StrikeEvent:
    """Simulate a batch of strikes on MuJoCo C (`mujoco.batch`, all cores by default).

    The reference and CPU engine for `simulate_strike`: the same initial state,
    touch rule, release and phases, with MuJoCo C's solver.

    Args:
        sim: the scene.
        strikes: (batch, 3) strikes.
        params: (batch, p) values of `sim.space`.
        to_rest: run the slide phase.
        nthread: threads (0: all CPUs).

    Returns:
        A `StrikeEvent` of numpy arrays with a leading batch axis.
    """
    params = np.asarray(params, np.float64)
    c = contact_phase_c(sim, strikes, params, nthread=nthread)
    if to_rest:
        q_end = slide_to_rest_c(sim, params, c.q_end, c.v_end, c.t_end, nthread=nthread)
    else:
        q_end = c.q_end
    return _event(c, np.asarray(block_poses_batch(jnp.asarray(q_end))))


class ContactRecord(NamedTuple):
    """`contact_phase_c`'s result: the event's parts, the state the slide starts from, the recorded states.

    Attributes:
        post_velocity, release_pose, t_touch, t_release, touched: as in `StrikeEvent`.
        q_end, v_end, t_end: (n, 10), (n, 9), (n,): the first recorded state at or after release.
        qpos: (n, n_contact + 1, 10): the states at t = 0, dt, ..., n_contact·dt (dt = dt_contact).
    """

    post_velocity: np.ndarray
    release_pose: np.ndarray
    t_touch: np.ndarray
    t_release: np.ndarray
    touched: np.ndarray
    q_end: np.ndarray
    v_end: np.ndarray
    t_end: np.ndarray
    qpos: np.ndarray


def contact_phase_c(sim: StrikeSim, strikes, params, *, nthread: int = 0) -> ContactRecord:
    """The contact phase of a batch of strikes on MuJoCo C (the rule of `contact_phase`), states kept."""
    strikes = np.asarray(strikes, np.float64)
    params = np.asarray(params, np.float64)
    n = len(strikes)
    qpos0, qvel0 = (np.asarray(a) for a in initial_states_batch(sim, jnp.asarray(strikes)))
    batch = _batch.make_batch(sim.mj_model(touch_sensor=True), sim.space, sim.rows, params, nsim=n, nthread=nthread)
    rec = _batch.rollout(batch, qpos0, qvel0, sim.n_contact, record=("qpos", "qvel", "sensordata"))
    # the touch sensor: found, dist, normal of the deepest contact of the collision pass on state k
    found = rec["sensordata"][:, :, 0] > 0
    k = np.where(found.any(axis=1), found.argmax(axis=1), 0)
    rows = np.arange(n)
    sens = rec["sensordata"][rows, k]
    v_before = np.where((k > 0)[:, None], rec["qvel"][rows, np.maximum(k - 1, 0)], qvel0)  # state k
    closing = np.abs(np.sum(np.c_[v_before[:, 6:8], np.zeros(n)] * sens[:, 2:5], axis=1))
    a = np.clip(k + sim.n_window - 2, 0, sim.n_contact - 1)  # record j holds state j + 1
    b = np.clip(k + sim.n_window - 1, 0, sim.n_contact - 1)
    touched, post, pose, t_touch, t_release = _release_rules(
        sim,
        found.any(axis=1),
        k,
        -sens[:, 1],
        closing,
        rec["qpos"][rows, a],
        rec["qvel"][rows, a],
        rec["qpos"][rows, b],
        rec["qvel"][rows, b],
    )
    return ContactRecord(
        post_velocity=np.asarray(post, np.float64),
        release_pose=np.asarray(pose, np.float64),
        t_touch=np.asarray(t_touch, np.float64),
        t_release=np.asarray(t_release, np.float64),
        touched=np.asarray(touched),
        q_end=rec["qpos"][rows, b],
        v_end=rec["qvel"][rows, b],
        t_end=(k + sim.n_window) * sim.settings.dt_contact,
        qpos=np.concatenate([qpos0[:, None], rec["qpos"]], 1),
    )


# A block counts as at rest when every component of its velocity (m/s, rad/s) stayed below this over
# a whole check interval (a rocking block passes through zero speed); the C slide then stops early.  At rest on the floor MuJoCo's block creeps at ~1e-6 m/s (soft contact).
REST_SPEED = 1e-5
REST_CHECK_STEPS = 50  # slide steps between checks (0.2 s at dt_slide 4 ms)


def slide_to_rest_c(
    sim: StrikeSim,
    params,
    q_rel,
    v_rel,
    t_start,
    *,
    nthread: int = 0,
    dt: float | None = None,
    batch: mujoco.batch.Batch | None = None,
) -> np.ndarray:
    """Slide released blocks on MuJoCo C until MAX_TIME, or until every block is at rest; the final qpos (n, 10).

    The worlds still moving are stepped `REST_CHECK_STEPS` at a time (at `dt`, default the
    slide step; the checks stay 0.2 s apart; `mujoco.batch` steps only those).  A world's
    pose is read at its own MAX_TIME step, or where it was found at rest (`REST_SPEED`).

    Args:
        batch: a batch of the slide model with these worlds' parameters to go on in (its solver
            warm start kept; the states are written in); default a new one.
    """
    dt = sim.settings.dt_slide if dt is None else float(dt)
    check = max(1, round(REST_CHECK_STEPS * sim.settings.dt_slide / dt))
    n = len(q_rel)
    qp, qv = parked_np(q_rel, v_rel)
    if batch is None:
        params = np.broadcast_to(np.asarray(params, np.float64), (n, sim.space.size))
        batch = _batch.make_batch(sim.mj_slide_model(), sim.space, sim.slide_rows, params, nsim=n, nthread=nthread)
        batch.bind("qacc_warmstart")[:] = 0.0
    batch.expand("opt.timestep")[:] = dt
    batch.bind("qpos")[:] = qp
    batch.bind("qvel")[:] = qv
    batch.bind("time")[:] = np.broadcast_to(np.asarray(t_start, np.float64), (n,))
    n_steps = np.ceil((MAX_TIME - np.asarray(t_start)) / dt - 1e-9).astype(int) * np.ones(n, int)
    q_end = np.full(qp.shape, np.nan)
    active, done = np.arange(n), 0
    while active.size:
        k = int(min(check, n_steps[active].max() - done))
        rec = batch.rollout(k, ids=active, record=("qpos", "qvel"))
        ends = n_steps[active] <= done + k  # worlds whose MAX_TIME falls in this chunk
        q_end[active[ends]] = rec["qpos"][ends, n_steps[active[ends]] - done - 1]
        done += k
        rest = ~ends & (np.abs(rec["qvel"][:, :, :6]).max(axis=(1, 2)) < REST_SPEED)  # still over the whole chunk
        q_end[active[rest]] = rec["qpos"][rest, -1]
        active = active[~(ends | rest)]
    return q_end


def slide_c(sim: StrikeSim, params, q_rel, v_rel, t_start, n_steps: int, nthread: int = 0) -> np.ndarray:
    """Slide released blocks (striker parked) `n_steps` steps of dt_slide on MuJoCo C; returns every qpos (n, n_steps, 10)."""
    qp, qv = parked_np(q_rel, v_rel)
    batch = _batch.make_batch(sim.mj_slide_model(), sim.space, sim.slide_rows, params, nsim=len(q_rel), nthread=nthread)
    return _batch.rollout(batch, np.asarray(qp), np.asarray(qv), n_steps, time=t_start)["qpos"]

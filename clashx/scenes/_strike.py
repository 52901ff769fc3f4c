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
written once in JAX (`_strike_rule`); the MuJoCo C engine (`_strike_c`,
`simulate_strikes_c`) calls the same functions on numpy arrays around
`mujoco.batch.Batch` rollouts.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

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
from . import _geometry as geo
from . import _mjcf
from . import _pair_state as ps
from . import _strike_impact as hooks
from ._scene import AbstractImpactScene, ImpactGate
from ._spaces import strike_space
from ._strike_c import REST_SPEED, simulate_strikes_c
from ._strike_impact import block_pose as block_pose
from ._strike_impact import parked as parked
from ._strike_impact import yaw_of as yaw_of
from ._strike_rule import MAX_TIME as MAX_TIME
from ._strike_rule import RELEASE_AFTER as RELEASE_AFTER
from ._strike_rule import StrikeEvent as StrikeEvent
from ._strike_rule import block_poses_batch as block_poses_batch
from ._strike_rule import block_velocity as block_velocity
from ._strike_rule import initial_state as initial_state
from ._strike_rule import initial_states_batch as initial_states_batch
from ._strike_rule import release_rule as release_rule
from ._strike_rule import strike_event

SETTLE_TIME = 0.5  # s the block settles on the ground before any strike (long enough to be at rest)


def sample_strikes(n: int, *, key: PRNGKeyArray) -> jax.Array:
    """`n` strikes (θ, θ1, v_pre) uniform over SCENE.md's ranges, (n, 3)."""
    lo, hi = jnp.asarray(geo.STRIKE_LOW), jnp.asarray(geo.STRIKE_HIGH)
    return lo + jax.random.uniform(key, (n, 3)) * (hi - lo)


class StrikeScene(AbstractImpactScene):
    """The strike scene of one block shape, ready to simulate on MJX or MuJoCo C.

    Build with `make_strike_scene(shape)`.  Static configuration is static; the
    MJX model is a pytree whose array fields can be traced.
    """

    shape: str = eqx.field(static=True)
    settings: _mjcf.SolverSettings = eqx.field(static=True)
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
        return _mjcf.strike_xml(self.shape, self.settings)

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

    def lite(self) -> StrikeScene:
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


def _compile(space: ParamSpace, shape: str, settings: _mjcf.SolverSettings, **kwargs) -> mujoco.MjModel:
    m = space.prepare(_mjcf.compile_xml(_mjcf.strike_xml(shape, settings, **kwargs)))
    if not kwargs.get("striker_pair", True):
        m.opt.timestep = settings.dt_slide
    return m


def _settle(m: mujoco.MjModel) -> np.ndarray:
    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    for _ in range(int(round(SETTLE_TIME / m.opt.timestep))):
        mujoco.mj_step(m, d)
    return d.qpos[:7].copy()


def make_strike_scene(
    shape: str, settings: _mjcf.SolverSettings | None = None, space: ParamSpace | None = None
) -> StrikeScene:
    """Build the strike scene of `shape` with the block settled on the ground.

    Args:
        shape: "semi-cylinder", "square" or "triangle".
        settings: timesteps and solver settings (defaults: `SolverSettings()`).
        space: the identified parameters (default `strike_space()` for the shape's pieces).

    Returns:
        A `StrikeScene`. Its contact phase lasts long enough for the slowest
        strike of the range (v_pre = 0.2 m/s) to touch and be released.
    """
    geo.check_shape(shape)
    settings = settings or _mjcf.SolverSettings()
    n_pieces = len(geo.convex_pieces(shape))
    space = space or strike_space(n_pieces)
    m = _compile(space, shape, settings)
    m_slide = _compile(space, shape, settings, striker_pair=False)
    v_min = geo.STRIKE_RANGES["v_pre"][0]
    n_window = int(round(RELEASE_AFTER / settings.dt_contact))
    n_contact = int(math.ceil(geo.GAP / v_min / settings.dt_contact)) + n_window + 5
    n_slide = int(math.ceil(MAX_TIME / settings.dt_slide))
    return StrikeScene(
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


def _with_params(sim: StrikeScene, params: Float[Array, "p"]) -> mjx.Model:
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


def striker_contact(sim: StrikeScene, data: mjx.Data):
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


def contact_phase(sim: StrikeScene, model: mjx.Model, strike: Float[Array, "3"]) -> ContactResult:
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


def slide_phase(sim: StrikeScene, params: Float[Array, "p"], qpos, qvel, t_start) -> Float[Array, "10"]:
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
    sim: StrikeScene, strike: Float[Array, "3"], params: Float[Array, "3"], *, to_rest: bool = True
) -> StrikeEvent:
    """Simulate one strike on MJX and return its collision event.

    Args:
        sim: the scene, from `make_strike_scene`.
        strike: (θ, θ1, v_pre), rad, rad, m/s (SCENE.md "A strike").
        params: (p,) values of `sim.space` (its `names`, physical units).
        to_rest: also run the slide phase for the rest pose (else rest_pose is the pose at release).

    Returns:
        A `StrikeEvent`.  Batch with `jax.vmap(simulate_strike, in_axes=(None, 0, 0))`.
    """
    c = contact_phase(sim, _with_params(sim, params), strike)
    q_end = slide_phase(sim, params, c.q_end, c.v_end, c.t_end) if to_rest else c.q_end
    return strike_event(c, block_pose(q_end))


def strike_world_bytes(sim: StrikeScene) -> int:
    """One strike's footprint in a vmapped batch, for the batching policy (`clashx.core.block_size`)."""
    return max(model_world_bytes(sim.model), model_world_bytes(sim.slide_model))


def simulate_strikes_mjx(
    sim: StrikeScene,
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
def _simulate_strikes_mjx(sim: StrikeScene, strikes, params, *, to_rest: bool, block: int) -> StrikeEvent:
    return map_batched(lambda x: simulate_strike(sim, x[0], x[1], to_rest=to_rest), (strikes, params), batch_size=block)


# --- MuJoCo C: the same rule around mujoco.batch rollouts ---------------------------------

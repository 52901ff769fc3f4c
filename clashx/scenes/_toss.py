"""Simulating a cube toss (ContactNets) on MJX and on MuJoCo C, and its collision event.

The collision event of a toss
-----------------------------
A toss starts in flight (t = 0 at its first frame) and its *first impact* is
the first time the cube's lowest corner reaches the table top (z = 0):

- `t_impact`: that time, found on the free flight before it (ballistic centre,
  constant body angular velocity: exact for the cube, whose inertia is
  isotropic);
- `pre_state`: the free-flight state at `t_impact`, the state just before the
  table pushes;
- `post_state`: the state at `t_impact + WINDOW`, the end of the impact window.

WINDOW = 4 frames of the 148 Hz recordings (27.0 ms).  In the 350 real
tosses, aligned on their fitted `t_impact` (frame o spans [o, o + 1) frames
after it; |a - g| from second differences of the centre), the impulsive
accelerations last two frames (median |a - g| 133 and 19 m/s^2 in frames 0
and 1, then 3.4, the noise level, from frame 2 on); the quick follow-up
contacts of a tilted cube fade by frame 4 (90th percentile of |a - g| 30, 18,
12 m/s^2 in frames 2, 3, 4); second bounces show from frame 6 on (that
percentile and the share of tosses with a corner within 1 mm of the table
rise again).  A window of four frames holds the first impact with its
follow-ups, and the frames within two frames of its end (frames 2-5) are
settled enough for the local fit that estimates the real post-impact state
(`clashx.events._ingest_cube`).  On simulated tosses (MuJoCo C from the real initial
states) that estimate's error drops as W grows to four frames and is flat
after it (median 0.015 m/s, 0.2 rad/s).

A simulated event is defined the same way: the first collision pass that
finds a cube-table contact with distance < 0 runs on state k; states k-1 and
k are joined by free flight (no contact force acted), so `t_impact` is where
the free flight from state k-1 puts the lowest corner at z = 0, `pre_state`
is that flight's state there, and `post_state` is the simulated state at
`t_impact + WINDOW`, interpolated linearly between the two steps around it.

States
------
A toss state is a 13-vector in the ContactNets column layout:
`qw qx qy qz | x y z | wx wy wz | vx vy vz`, the orientation (world from
body, scalar first), the centre's position (m, world, z up, table at z = 0),
the angular velocity in the *body* frame (rad/s) and the centre's velocity in
the *world* frame (m/s).  MuJoCo's free joint holds the same quantities in
another order (`state_to_qpos_qvel`).

Timestep: 7 substeps per 148 Hz frame, dt = 1/1036 s = 0.965 ms: the
trajectory is sampled exactly at the recording's frames, and dt stays below
half the prior's shortest contact time constant (2 ms).  Newton solver, 16
iterations, pyramidal cone: MuJoCo C with 200 iterations gives the same
events, and MJX (float32) matches MuJoCo C to 1e-6 m and 1e-3 rad/s.  The
table touches the cube through its eight corners (`_mjcf.cube_xml`), where
both engines find the same contacts.

The event rule is written once in JAX (`_track_step`, `_finish`); MJX runs it
inside its `lax.scan`, and `simulate_tosses_c` runs the same jitted rule on
the states of `mujoco.batch` rollouts.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
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
from . import _mjcf
from . import _pair_contact as pc
from . import _pair_state as ps
from ._cube_flight import (
    GRAVITY,
    crossing_time,
    free_flight,
    interpolate_states,
    lowest_corner_z,
    qpos_qvel_to_state,
    state_to_qpos_qvel,
)
from ._scene import AbstractImpactScene, ImpactGate
from ._spaces import cube_space

FRAME_DT = 1.0 / 148.0  # s between frames of the ContactNets recordings
SUBSTEPS = 7  # simulation steps per frame
DT = FRAME_DT / SUBSTEPS  # s, 0.965 ms
WINDOW = 4 * FRAME_DT  # s: the impact window [t_impact, t_impact + WINDOW]
MIN_FLIGHT_S = 3 * FRAME_DT  # s of flight (no corner at or below the table) before a landing is the handler's
MIN_CLOSING_SPEED = 0.15  # m/s: slower landings of the lowest corner stay with the engine
REST_SPEED = 1e-3  # m/s, rad/s: a cube out of any window moving slower than this rests
CORNER_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)

# Initial states of generated tosses (world frame, table at z = 0), a box that
# holds the first frames of the 350 real tosses (see `sample_toss_inputs`).
INIT_RANGES = {
    "lowest_corner": (0.01, 0.15),  # m above the table
    "v_horizontal": (0.6, 1.5),  # m/s, any heading
    "vz": (-0.6, 0.5),  # m/s
    "omega": (0.0, 12.0),  # rad/s, |angular velocity|, any axis
}


def toss_settings() -> _mjcf.SolverSettings:
    """Integrator and solver settings of the toss: dt = 1/1036 s, Newton, pyramidal cone."""
    return _mjcf.SolverSettings(dt_contact=DT, dt_slide=DT, iterations=16, ls_iterations=8, cone="pyramidal")


# --- the scene ---------------------------------------------------------------------------------


class TossEvent(eqx.Module):
    """The first impact of one toss (module docstring), and its trajectory.

    Attributes:
        pre_state: state at `t_impact` (13,).
        post_state: state at `t_impact + WINDOW` (13,).
        t_impact: first contact, s after the initial state.
        valid: the cube started above the table, hit it, and the simulation
            reached `t_impact + WINDOW`; the other fields are meaningless if not.
        track: the states at the 148 Hz frames 0, 1, ..., n_frames - 1 (n_frames, 13).
    """

    pre_state: Float[Array, "13"]
    post_state: Float[Array, "13"]
    t_impact: Float[Array, ""]
    valid: Bool[Array, ""]
    track: Float[Array, "frames 13"]


class TossScene(AbstractImpactScene):
    """The cube-toss scene, ready to simulate on MJX or MuJoCo C.  Build with `make_toss_scene()`.

    As an instance of the one hybrid rule (`clashx.hybrid`): the pair is the cube's free
    joint against the table (the world), its separation the lowest corner's height, an
    impact a landing after `MIN_FLIGHT_S` of flight closing at `MIN_CLOSING_SPEED` or
    more, its window `WINDOW`, and the handler a `CubeSurrogate` on the dataset's
    13-vector state (`impact_input`, `impact_output`).
    """

    settings: _mjcf.SolverSettings = eqx.field(static=True)
    space: ParamSpace
    rows: Layout = eqx.field(static=True)
    model: mjx.Model
    table_geom: int = eqx.field(static=True)
    corner_geoms: tuple[int, ...] = eqx.field(static=True)
    n_event_frames: int = eqx.field(static=True)
    pair_joints: ps.PairJoints = eqx.field(static=True)
    corner_pairs: tuple[int, ...] = eqx.field(static=True)
    max_impacts: int | None = eqx.field(static=True, default=None)
    inertia: float = eqx.field(static=True, default=_mjcf.CUBE_INERTIA)

    name: ClassVar[str] = "cube-toss"
    pair: ClassVar[tuple[str, str]] = ("table", "cube")

    @property
    def window(self) -> float:
        return WINDOW

    def mjcf(self) -> str:
        return _mjcf.cube_xml(self.settings, inertia=self.inertia)

    def sample_inputs(self, n: int, *, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
        """`n` initial toss states (`INIT_RANGES`) and `n` draws of the space's prior."""
        states, params = sample_toss_inputs(n, key=key)
        return np.asarray(states), np.asarray(params)

    def simulate_events(self, inputs: np.ndarray, params: np.ndarray, *, engine: str, to_rest: bool = True) -> dict:
        """Cube-toss events (`clashx.events` "cube-toss" schema) of a batch of initial states (to_rest: unused)."""
        return toss_events(self, inputs, params, engine=engine)

    def describe(self) -> dict[str, Any]:
        return {
            "init_ranges": {k: list(v) for k, v in INIT_RANGES.items()},
            "param_space": self.space.describe(),
            "solver": dataclasses.asdict(self.settings),
            "window_s": WINDOW,
            "frame_dt": FRAME_DT,
        }

    @property
    def dt(self) -> float:
        return self.settings.dt_contact

    @property
    def substeps(self) -> int:
        return int(round(FRAME_DT / self.dt))

    def mj_model(self, touch_sensor: bool = False) -> mujoco.MjModel:
        """A fresh MuJoCo C model of this scene (nominal parameters)."""
        return _mjcf.compile_xml(_mjcf.cube_xml(self.settings, touch_sensor=touch_sensor, inertia=self.inertia))

    # --- the hybrid rule's hooks -----------------------------------------------------------------

    @property
    def joints(self) -> ps.PairJoints:
        return self.pair_joints

    def lite(self) -> TossScene:
        return self if self.model is None else eqx.tree_at(lambda s: s.model, self, None, is_leaf=lambda x: x is None)

    @property
    def gate(self) -> ImpactGate:
        return ImpactGate(
            window=WINDOW,
            min_apart=MIN_FLIGHT_S,
            min_closing=MIN_CLOSING_SPEED,
            max_impacts=self.max_impacts,
            rest_speed=REST_SPEED,
            energy_slack=None,
        )

    def hybrid_c_model(self) -> mujoco.MjModel:
        return self.mj_model()

    def hybrid_rows(self) -> Layout:
        return self.rows

    @property
    def switch_rows(self) -> tuple[int, ...]:
        return self.corner_pairs

    def separation(self, qpos: Float[Array, "7"]) -> Float[Array, ""]:
        """The lowest corner's height above the table (m)."""
        return lowest_corner_z(qpos_qvel_to_state(qpos, jnp.zeros(6, qpos.dtype)))

    def impact_input(self, pre: Float[Array, "13"]) -> Float[Array, "13"]:
        """The pair state (the free joint's qpos ‖ qvel) as the dataset's state, the surrogate's input."""
        return qpos_qvel_to_state(pre[:7], pre[7:])

    def impact_output(self, pre: Float[Array, "13"], prediction: Float[Array, "13"]) -> Float[Array, "13"]:
        """The surrogate's dataset state as the pair state."""
        q, v = state_to_qpos_qvel(prediction)
        return jnp.concatenate([q, v])

    def flight(self, state: Float[Array, "13"], tau) -> Float[Array, "13"]:
        """The exact free flight (`free_flight`) of a pair state (the free joint's qpos ‖ qvel)."""
        flown = free_flight(qpos_qvel_to_state(state[:7], state[7:]), tau)
        q, v = state_to_qpos_qvel(flown)
        return jnp.concatenate([q, v])

    def first_impact_only(self) -> TossScene:
        """This scene with only the toss's first impact through the handler (MJX's after it)."""
        return dataclasses.replace(self, max_impacts=1)


def max_flight_time() -> float:
    """Longest time (s) to first contact from an initial state in `INIT_RANGES` (or of a real toss)."""
    h = INIT_RANGES["lowest_corner"][1]
    vz = INIT_RANGES["vz"][1]
    return (vz + math.sqrt(vz * vz + 2 * GRAVITY * h)) / GRAVITY


def make_toss_scene(settings: _mjcf.SolverSettings | None = None, *, inertia_scale: float = 1.0) -> TossScene:
    """Build the cube-toss scene.

    Args:
        settings: solver settings (default `toss_settings()`); `dt_contact` is
            the timestep and must divide the 148 Hz frame into whole steps.
        inertia_scale: the cube's principal inertia in units of the drawing's
            (`CUBE_INERTIA`), in both engines' models (e.g. the rigid law's fit,
            `identify_rigid_impacts`' fourth parameter).

    Returns:
        A `TossScene` whose event horizon (`n_event_frames`) covers the first
        impact and its window for every initial state in `INIT_RANGES`.
    """
    settings = settings or toss_settings()
    substeps = FRAME_DT / settings.dt_contact
    if abs(substeps - round(substeps)) > 1e-6:
        raise ValueError(f"make_toss_scene: dt_contact={settings.dt_contact} must be 1/148 s divided by a whole number")
    if not (math.isfinite(inertia_scale) and inertia_scale > 0):
        raise ValueError(f"make_toss_scene: inertia_scale={inertia_scale} must be a positive number")
    inertia = float(_mjcf.CUBE_INERTIA * inertia_scale)
    m = _mjcf.compile_xml(_mjcf.cube_xml(settings, inertia=inertia))
    space = cube_space()
    cube = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "cube")
    return TossScene(
        pair_joints=ps.pair_joints(m, "cube-toss", ("cube", "world")),
        corner_pairs=pc.pair_rows(m, (cube, 0))[0],
        settings=settings,
        space=space,
        rows=space.rows(m),
        model=mjx.put_model(m),
        table_geom=mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "table"),
        corner_geoms=tuple(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"corner{i}") for i in range(8)),
        n_event_frames=int(math.ceil((max_flight_time() + WINDOW) / FRAME_DT)) + 2,
        inertia=inertia,
    )


# --- the event rule, one step at a time (MJX and MuJoCo C) ----------------------------------


class _Tracker(eqx.Module):
    last: Float[Array, "13"]  # state j - 1
    touched: Bool[Array, ""]
    bad_start: Bool[Array, ""]
    t_impact: Float[Array, ""]
    pre: Float[Array, "13"]
    t_post: Float[Array, ""]
    post_lo: Float[Array, "13"]
    post_hi: Float[Array, "13"]
    have_hi: Bool[Array, ""]


def _tracker(state0: Float[Array, "13"]) -> _Tracker:
    f = jnp.zeros((), state0.dtype)
    return _Tracker(
        state0, jnp.array(False), jnp.array(False), f, state0, f + jnp.inf, state0, state0, jnp.array(False)
    )


def _track_step(tr: _Tracker, j, state_j: Float[Array, "13"], touching_j: Bool[Array, ""], dt: float) -> _Tracker:
    """Update the event with state j (time j dt) and whether its collision pass found a contact."""
    first = touching_j & ~tr.touched
    tau = crossing_time(tr.last, jnp.asarray(dt, state_j.dtype))
    t_imp = (j - 1) * dt + tau
    pre = free_flight(tr.last, tau)
    j_post = jnp.floor(tr.t_post / dt)
    return _Tracker(
        last=state_j,
        touched=tr.touched | touching_j,
        bad_start=tr.bad_start | (first & (j == 0)),
        t_impact=jnp.where(first, t_imp, tr.t_impact),
        pre=jnp.where(first, pre, tr.pre),
        t_post=jnp.where(first, t_imp + WINDOW, tr.t_post),
        post_lo=jnp.where(j == j_post, state_j, tr.post_lo),
        post_hi=jnp.where(j == j_post + 1, state_j, tr.post_hi),
        have_hi=tr.have_hi | (j == j_post + 1),
    )


def _finish(
    tr: _Tracker, dt: float
) -> tuple[Float[Array, "13"], Float[Array, "13"], Float[Array, ""], Bool[Array, ""]]:
    s = tr.t_post / dt - jnp.floor(tr.t_post / dt)
    post = interpolate_states(tr.post_lo, tr.post_hi, jnp.where(tr.have_hi, s, 0.0))
    valid = tr.touched & ~tr.bad_start & tr.have_hi
    return tr.pre, post, tr.t_impact, valid


# --- MJX ------------------------------------------------------------------------------------


def _touching(sim: TossScene, data: mjx.Data) -> Bool[Array, ""]:
    contact = data._impl.contact
    g = contact.geom
    corner = jnp.asarray(sim.corner_geoms)
    on_cube = (g[:, :, None] == corner).any(-1)
    pair = ((g[:, 0] == sim.table_geom) & on_cube[:, 1]) | (on_cube[:, 0] & (g[:, 1] == sim.table_geom))
    return jnp.any(pair & (contact.dist < 0))


def simulate_toss(
    sim: TossScene, initial_state: Float[Array, "13"], params: Float[Array, "3"], n_frames: int = 0
) -> TossEvent:
    """Simulate one toss on MJX: its first-impact event and its trajectory at the 148 Hz frames.

    Args:
        sim: the scene, from `make_toss_scene`.
        initial_state: the state at t = 0 (13,), dataset layout (module docstring).
        params: (μ, time constant s, damping ratio), `sim.space` order.
        n_frames: frames of trajectory to return (static); the simulation runs
            max(n_frames, sim.n_event_frames) frames.

    Returns:
        A `TossEvent`.  Batch with `simulate_tosses` or
        `jax.vmap(simulate_toss, in_axes=(None, 0, 0))`.
    """
    model = sim.space.apply(sim.model, sim.rows, params)
    dt = sim.dt
    state0 = jnp.asarray(initial_state, model.opt.timestep.dtype)
    qpos0, qvel0 = state_to_qpos_qvel(state0)
    data = mjx.make_data(model).replace(qpos=qpos0, qvel=qvel0)

    def substep(carry, j):
        data, tr = carry
        new = mjx.step(model, data)  # new._impl.contact: the collision pass on state j
        tr = _track_step(tr, j, qpos_qvel_to_state(data.qpos, data.qvel), _touching(sim, new), dt)
        return (new, tr), None

    def frame(carry, f):
        frame_state = qpos_qvel_to_state(carry[0].qpos, carry[0].qvel)
        carry, _ = jax.lax.scan(substep, carry, f * sim.substeps + jnp.arange(sim.substeps))
        return carry, frame_state

    n_total = max(n_frames, sim.n_event_frames)
    (_, tr), track = jax.lax.scan(frame, (data, _tracker(state0)), jnp.arange(n_total))
    pre, post, t_impact, valid = _finish(tr, dt)
    return TossEvent(pre_state=pre, post_state=post, t_impact=t_impact, valid=valid, track=track[:n_frames])


def simulate_tosses(
    sim: TossScene, initial_states: Float[Array, "batch 13"], params: Float[Array, "batch 3"], n_frames: int = 0
) -> TossEvent:
    """`simulate_toss` over a batch (jit + vmap in blocks of the batching policy, `clashx.core.block_size`;
    one compilation per batch size and n_frames).

    With several local devices each block is spread over them (`clashx.core.map_batched`).
    """
    world = model_world_bytes(sim.model, recorded=n_frames * 13 * 4)
    b = block_size(jnp.shape(initial_states)[0], world=world)
    sim, (initial_states, params) = spread(sim, (jnp.asarray(initial_states), jnp.asarray(params)))
    return _simulate_tosses(sim, initial_states, params, n_frames, block=b)


@eqx.filter_jit
def _simulate_tosses(sim: TossScene, initial_states, params, n_frames: int, *, block: int) -> TossEvent:
    return map_batched(lambda x: simulate_toss(sim, x[0], x[1], n_frames), (initial_states, params), batch_size=block)


# --- MuJoCo C: the same rule around mujoco.batch rollouts ----------------------------------


@eqx.filter_jit
def _track_block(tr: _Tracker, j0, states, touching, dt: float) -> _Tracker:
    """Run `_track_step` over a block of substeps j0, j0+1, ... for a batch: states (batch, k, 13)."""

    def one(tr, states, touching):
        def body(tr, x):
            i, s, t = x
            return _track_step(tr, j0 + i, s, t, dt), None

        tr, _ = jax.lax.scan(body, tr, (jnp.arange(states.shape[0]), states, touching))
        return tr

    return jax.vmap(one)(tr, states, touching)


def simulate_tosses_c(
    sim: TossScene,
    initial_states: Float[np.ndarray, "batch 13"],
    params: Float[np.ndarray, "batch 3"],
    n_frames: int = 0,
    *,
    nthread: int = 0,
) -> TossEvent:
    """Simulate a batch of tosses on MuJoCo C (`mujoco.batch`, all cores by default).

    The reference and CPU engine for `simulate_toss`: the same initial state,
    event rule (jitted JAX, run on the rollouts' states) and frames.

    Args:
        sim: the scene.
        initial_states: (batch, 13) states at t = 0.
        params: (batch, 3) contact parameters.
        n_frames: frames of trajectory to return.
        nthread: threads (0: all CPUs).

    Returns:
        A `TossEvent` of numpy arrays with a leading batch axis.
    """
    states0 = np.asarray(initial_states, np.float64)
    params = np.asarray(params, np.float64)
    n = len(states0)
    batch = _batch.make_batch(sim.mj_model(touch_sensor=True), sim.space, sim.rows, params, nsim=n, nthread=nthread)
    batch.reset(stage=mujoco.mjtStage.mjSTAGE_NONE.value)
    batch.bind("qpos")[:] = np.c_[states0[:, 4:7], states0[:, 0:4]]
    batch.bind("qvel")[:] = np.c_[states0[:, 10:13], states0[:, 7:10]]
    batch.bind("time")[:] = 0.0
    k = sim.substeps
    tr = jax.vmap(_tracker)(jnp.asarray(states0))
    track = np.empty((n, max(n_frames, 1), 13))
    current = states0
    for f in range(max(n_frames, sim.n_event_frames)):
        if f < n_frames:
            track[:, f] = current
        rec = batch.rollout(k, record=("qpos", "qvel", "sensordata"))
        after = np.concatenate(
            [rec["qpos"][..., 3:7], rec["qpos"][..., 0:3], rec["qvel"][..., 3:6], rec["qvel"][..., 0:3]], -1
        )
        block = np.concatenate([current[:, None], after[:, :-1]], axis=1)  # states f k ... f k + k - 1
        found = rec["sensordata"][:, :, 0] > 0  # the collision pass of state j, recorded at step j
        tr = _track_block(tr, jnp.asarray(f * k), jnp.asarray(block), jnp.asarray(found), sim.dt)
        current = after[:, -1]
    pre, post, t_impact, valid = jax.vmap(lambda t: _finish(t, sim.dt))(tr)
    return TossEvent(
        pre_state=np.asarray(pre, np.float64),
        post_state=np.asarray(post, np.float64),
        t_impact=np.asarray(t_impact, np.float64),
        valid=np.asarray(valid),
        track=track[:, :n_frames],
    )


# --- generated data ----------------------------------------------------------------------------


def _uniform(key, shape, lo_hi):
    lo, hi = lo_hi
    return jax.random.uniform(key, shape, minval=lo, maxval=hi)


def sample_toss_inputs(
    n: int, *, key: PRNGKeyArray, ranges: dict | None = None
) -> tuple[Float[Array, "n 13"], Float[Array, "n 3"]]:
    """Initial states and contact parameters of `n` generated tosses.

    Orientation uniform over rotations (any heading); the lowest corner
    `ranges["lowest_corner"]` above the table; horizontal velocity of
    uniform heading and speed in `v_horizontal`; vertical velocity in `vz`;
    angular velocity of uniform axis and magnitude in `omega`.  The default
    `INIT_RANGES` holds the first frames of all 350 real tosses (tests/test_toss.py
    checks).  Parameters are drawn from `cube_space()`'s prior.

    Returns:
        (initial_states (n, 13) at t = 0, params (n, 3)).
    """
    ranges = INIT_RANGES if ranges is None else ranges
    k_q, k_h, k_sp, k_head, k_vz, k_wdir, k_wmag, k_p = jax.random.split(key, 8)
    quat = jax.random.normal(k_q, (n, 4))
    quat = quat / jnp.linalg.norm(quat, axis=1, keepdims=True)
    speed = _uniform(k_sp, (n,), ranges["v_horizontal"])
    heading = _uniform(k_head, (n,), (0.0, 2 * math.pi))
    vel = jnp.stack([speed * jnp.cos(heading), speed * jnp.sin(heading), _uniform(k_vz, (n,), ranges["vz"])], 1)
    axis = jax.random.normal(k_wdir, (n, 3))
    omega = axis / jnp.linalg.norm(axis, axis=1, keepdims=True) * _uniform(k_wmag, (n, 1), ranges["omega"])
    states = jnp.concatenate([quat, jnp.zeros((n, 3)), omega, vel], 1)
    low = _uniform(k_h, (n,), ranges["lowest_corner"])
    states = states.at[:, 6].set(low - jax.vmap(lowest_corner_z)(states))
    return states, cube_space().sample(n, key=k_p)


def toss_events(
    sim: TossScene,
    initial_states: Float[Array, "n 13"],
    params: Float[Array, "n 3"],
    engine: str = "mjx",
) -> dict:
    """Simulate tosses and return their events as a "cube-toss" event dict (`clashx.events._events`).

    Rows whose toss has no valid event (see `TossEvent.valid`) are left out;
    `toss_id` is the row of `initial_states` each event came from.

    Args:
        sim: the scene.
        initial_states, params: as from `sample_toss_inputs`.
        engine: "mjx" or "c" (MuJoCo C).
    """
    if engine == "mjx":
        ev = simulate_tosses(sim, jnp.asarray(initial_states), jnp.asarray(params))
        source = "mjx"
    elif engine == "c":
        ev = simulate_tosses_c(sim, np.asarray(initial_states), np.asarray(params))
        source = "mujoco-c"
    else:
        raise ValueError(f"toss_events: engine={engine!r}; use 'mjx' or 'c'")
    ok = np.asarray(ev.valid)
    rows = np.flatnonzero(ok)
    meta = {
        "window_s": WINDOW,
        "frame_dt": FRAME_DT,
        "timestep": sim.dt,
        "solver": {
            "iterations": sim.settings.iterations,
            "ls_iterations": sim.settings.ls_iterations,
            "solver": sim.settings.solver,
            "cone": sim.settings.cone,
        },
        "param_space": sim.space.describe(),
        "n_invalid": int((~ok).sum()),
    }
    return {
        "scene": "cube-toss",
        "shape": "",
        "source": source,
        "initial_state": np.asarray(initial_states, np.float64)[rows],
        "pre_state": np.asarray(ev.pre_state, np.float64)[rows],
        "post_state": np.asarray(ev.post_state, np.float64)[rows],
        "t_impact": np.asarray(ev.t_impact, np.float64)[rows],
        "params": np.asarray(params, np.float64)[rows],
        "toss_id": rows.astype(np.int64),
        "meta": json.dumps(meta),
    }

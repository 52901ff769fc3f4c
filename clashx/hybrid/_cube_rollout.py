"""The hybrid toss rollout: free flight, the surrogate over the first impact window, MJX for the rest.

A toss from its initial state (t = 0) is sampled at the 148 Hz frames
t_k = k / 148 s:

1. *flight*, t_k < t_impact: the exact free flight (`_toss.free_flight`);
   `t_impact` is where it first puts a corner at z = 0 (`flight_time`);
2. *impact window*, t_impact ≤ t_k < t_impact + WINDOW: the surrogate maps
   the pre-impact state to the state at the window's end; frames inside it are
   interpolated between the two (the window is 4 frames, 27 ms);
3. *rest*, from t_impact + WINDOW on: MJX with the same contact parameters
   (further bounces, sliding, rest), frames interpolated between its steps.

Only the first impact goes through the surrogate: it was trained on impacts
from flight, and what follows is a cube already near or on the table
(rocking, sliding), outside those inputs.  One toss per call; batch with
`jax.vmap` (`hybrid_tosses` jits and vmaps it in fixed-size blocks).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core._mjx import mjx
from ..core._types import Array, Float
from ..scenes import _toss
from ..scenes._toss import FRAME_DT, WINDOW, TossSim, free_flight, interpolate_states

MAX_FLIGHT_S = 0.5  # s: flights searched for a first contact (real tosses land within 0.25 s)
_GRID_STEP = 2.5e-4  # s, coarse crossing search before bisection


def flight_time(state0: Float[Array, "13"]) -> Float[Array, ""]:
    """First time (s) the free flight from `state0` puts a corner at z = 0; `MAX_FLIGHT_S` if none sooner.

    A grid of `_GRID_STEP` finds the first step below the table, bisection
    (`_toss.crossing_time`) refines it; a corner that dips under and comes back
    within one grid step is missed (a graze of < 0.1 mm).
    """
    grid = jnp.arange(0.0, MAX_FLIGHT_S, _GRID_STEP, dtype=state0.dtype)
    low = jax.vmap(lambda t: _toss.lowest_corner_z(free_flight(state0, t)))(grid)
    below = low < 0
    k = jnp.argmax(below)
    t_a = grid[jnp.maximum(k - 1, 0)]
    t = t_a + _toss.crossing_time(free_flight(state0, t_a), jnp.asarray(_GRID_STEP, state0.dtype))
    return jnp.where(below.any(), jnp.where(k > 0, t, 0.0), MAX_FLIGHT_S)


def rest_rollout(
    sim: TossSim, start: Float[Array, "13"], t_start: Float[Array, ""], params: Float[Array, "3"], n_frames: int
) -> Float[Array, "frames 13"]:
    """MJX from `start` at time `t_start`, sampled at the frames t_k = k / 148 s (k < n_frames) by interpolation.

    Frames before `t_start` hold `start` (the caller overwrites them).  Runs
    n_frames × substeps + 1 steps of `sim.dt` (static), enough for any t_start ≥ 0.
    """
    model = sim.space.apply(sim.model, sim.rows, params)
    dtype = model.opt.timestep.dtype
    start = jnp.asarray(start, dtype)
    qpos, qvel = _toss.state_to_qpos_qvel(start)
    data = mjx.make_data(model).replace(qpos=qpos, qvel=qvel)

    def step(d, _):
        new = mjx.step(model, d)
        return new, _toss.qpos_qvel_to_state(new.qpos, new.qvel)

    n_steps = n_frames * sim.substeps + 1
    _, states = jax.lax.scan(step, data, None, length=n_steps)
    states = jnp.concatenate([start[None], states])  # states[j] at t_start + j dt
    u = jnp.clip((jnp.arange(n_frames, dtype=dtype) * FRAME_DT - t_start) / sim.dt, 0.0, n_steps - 1e-3)
    lo = jnp.floor(u).astype(jnp.int32)
    return jax.vmap(interpolate_states)(states[lo], states[lo + 1], u - lo)


def hybrid_toss(
    sim: TossSim,
    impact: Callable[[Float[Array, "13"], Float[Array, "3"]], Float[Array, "13"]],
    initial_state: Float[Array, "13"],
    params: Float[Array, "3"],
    rest_params: Float[Array, "3"],
    n_frames: int,
) -> Float[Array, "frames 13"]:
    """One toss's frames (n_frames, 13) by the hybrid rollout (module docstring).

    Args:
        sim: the toss scene (MJX model, parameter space, timestep).
        impact: (pre_state, params) -> state WINDOW later, e.g. a `CubeSurrogate`.
        initial_state: the state at t = 0 (13,), dataset layout.
        params: contact parameters (μ, time constant, damping ratio) of the
            impact, given to `impact`.
        rest_params: those of MJX after the window (the same values, or ones
            fitted to the recorded frames after the impact, `clashx.baselines._cube_fit`).
        n_frames: frames to return (static).
    """
    dtype = sim.model.opt.timestep.dtype
    state0 = jnp.asarray(initial_state, dtype)
    params, rest_params = jnp.asarray(params, dtype), jnp.asarray(rest_params, dtype)
    t_imp = flight_time(state0)
    pre = free_flight(state0, t_imp)
    post = jnp.asarray(impact(pre, params), dtype)
    t_post = t_imp + WINDOW
    t = jnp.arange(n_frames, dtype=dtype) * FRAME_DT
    flight = jax.vmap(free_flight, in_axes=(None, 0))(state0, t)
    window = jax.vmap(interpolate_states, in_axes=(None, None, 0))(pre, post, jnp.clip((t - t_imp) / WINDOW, 0.0, 1.0))
    rest = rest_rollout(sim, post, t_post, rest_params, n_frames)
    phase = (t >= t_imp).astype(jnp.int32) + (t >= t_post).astype(jnp.int32)
    return jnp.choose(phase[:, None], [flight, window, rest], mode="clip")


@eqx.filter_jit
def _hybrid_block(sim: TossSim, impact, states, params, rest_params, n_frames: int):
    return jax.vmap(lambda s, p, q: hybrid_toss(sim, impact, s, p, q, n_frames))(states, params, rest_params)


def hybrid_tosses(
    sim: TossSim,
    impact: Callable,
    initial_states: Float[np.ndarray, "n 13"],
    params: Float[np.ndarray, "3"] | Float[np.ndarray, "n 3"],
    n_frames: int,
    *,
    rest_params: Float[np.ndarray, "3"] | Float[np.ndarray, "n 3"] | None = None,
    block: int = 128,
) -> Float[np.ndarray, "n frames 13"]:
    """`hybrid_toss` over a batch: jit + vmap in blocks of `block` tosses (one compilation per block size and n_frames).

    `impact` must be a pytree (an `eqx.Module` such as `CubeSurrogate`) or a
    function; `params` (and `rest_params`, default `params`) is one set for all tosses or one per toss.
    """
    states = np.asarray(initial_states, np.float32)
    n = len(states)
    params = np.broadcast_to(np.asarray(params, np.float32), (n, 3))
    rest_params = params if rest_params is None else np.broadcast_to(np.asarray(rest_params, np.float32), (n, 3))
    block = min(block, n)
    out = []
    for i in range(0, n, block):
        s, p, q = states[i : i + block], params[i : i + block], rest_params[i : i + block]
        pad = block - len(s)
        s, p, q = (np.concatenate([a, np.repeat(a[-1:], pad, 0)]) for a in (s, p, q))
        res = _hybrid_block(sim, impact, jnp.asarray(s), jnp.asarray(p), jnp.asarray(q), n_frames)
        out.append(np.asarray(res)[: block - pad])
    return np.concatenate(out).astype(np.float64)

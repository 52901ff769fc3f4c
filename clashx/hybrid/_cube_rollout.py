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

`hybrid_toss` sends only the first impact through the surrogate.
`hybrid_toss_every` sends every impact that ends a free flight: the toss's
first, and each landing after a bounce (see its docstring for the rule and
where it stops firing).  One toss per call; batch with `jax.vmap`
(`hybrid_tosses` jits and vmaps either in fixed-size blocks).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core._mjx import mjx
from ..core._types import Array, Float
from ..events._cube_impacts import corner_closing_speed
from ..scenes import _toss
from ..scenes._toss import FRAME_DT, WINDOW, TossSim, free_flight, interpolate_states

MAX_FLIGHT_S = 0.5  # s: flights searched for a first contact (real tosses land within 0.25 s)
_GRID_STEP = 2.5e-4  # s, coarse crossing search before bisection
MIN_FLIGHT_S = 3 * FRAME_DT  # s of flight (no corner at or below the table) before an impact goes to the handler
MIN_CLOSING_SPEED = 0.15  # m/s: slower landings of the lowest corner stay with MJX


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


def _mjx_start(sim: TossSim, params: Float[Array, "3"], state: Float[Array, "13"]) -> tuple[mjx.Model, mjx.Data]:
    """MJX's model at `params` and its data holding the toss state `state`."""
    model = sim.space.apply(sim.model, sim.rows, params)
    qpos, qvel = _toss.state_to_qpos_qvel(jnp.asarray(state, model.opt.timestep.dtype))
    return model, mjx.make_data(model).replace(qpos=qpos, qvel=qvel)


def rest_rollout(
    sim: TossSim, start: Float[Array, "13"], t_start: Float[Array, ""], params: Float[Array, "3"], n_frames: int
) -> Float[Array, "frames 13"]:
    """MJX from `start` at time `t_start`, sampled at the frames t_k = k / 148 s (k < n_frames) by interpolation.

    Frames before `t_start` hold `start` (the caller overwrites them).  Runs
    n_frames × substeps + 1 steps of `sim.dt` (static), enough for any t_start ≥ 0.
    """
    model, data = _mjx_start(sim, params, start)
    dtype = model.opt.timestep.dtype
    start = jnp.asarray(start, dtype)

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


class EveryImpactStats(eqx.Module):
    """What `hybrid_toss_every` did with the toss's landings (counts, int32).

    Attributes:
        fired: landings sent to the handler.
        slow: landings after a long enough flight but closing slower than `min_closing`.
        short_flight: landings after a flight shorter than `min_flight_s` (a corner
            lifting and dropping while the cube rocks).
    """

    fired: Array
    slow: Array
    short_flight: Array


def hybrid_toss_every(
    sim: TossSim,
    impact: Callable[[Float[Array, "13"], Float[Array, "3"]], Float[Array, "13"]],
    initial_state: Float[Array, "13"],
    params: Float[Array, "3"],
    rest_params: Float[Array, "3"],
    n_frames: int,
    *,
    min_flight_s: float = MIN_FLIGHT_S,
    min_closing: float = MIN_CLOSING_SPEED,
) -> tuple[Float[Array, "frames 13"], EveryImpactStats]:
    """One toss's frames (n_frames, 13) with every landing after a free flight through `impact`.

    One loop over steps of `sim.dt`:

    - *free flight*: while no corner is at or below the table, the state moves by
      the exact free flight (`_toss.free_flight`), as in the ingested real flights;
    - *a landing*: when the next step would put a corner below the table, the
      crossing time is found by bisection and the free-flight state there is the
      pre-impact state.  If the cube has flown at least `min_flight_s` and the
      lowest corner closes at `min_closing` m/s or more, `impact(pre, params)`
      gives the state WINDOW later, frames inside the window are interpolated,
      and MJX restarts from it (moved by free flight over the part of a step
      between the window's end and the step grid, < 1 ms);
    - otherwise (resting, sliding, rocking, the slow landings) MJX with `rest_params`.

    A toss's first landing is one of them (it flies from t = 0).  Returns the
    frames and the counts of `EveryImpactStats`.
    """
    model, data = _mjx_start(sim, rest_params, initial_state)
    dtype = model.opt.timestep.dtype
    dt = sim.dt
    k_min = int(round(min_flight_s / dt))
    params = jnp.asarray(params, dtype)
    s0 = jnp.asarray(initial_state, dtype)
    zero = jnp.zeros((), dtype)
    counts = jnp.zeros(3, jnp.int32)
    win = jnp.asarray(False)

    def body(carry, j):
        data, free, win, t_c, pre, post, counts = carry
        t_j = j * dt
        s_sim = _toss.qpos_qvel_to_state(data.qpos, data.qvel)
        s_j = jnp.where(win, interpolate_states(pre, post, jnp.clip((t_j - t_c) / WINDOW, 0.0, 1.0)), s_sim)
        new = mjx.step(model, data)
        flown = free_flight(s_sim, jnp.asarray(dt, dtype))
        above = _toss.lowest_corner_z(s_sim) >= 0
        in_flight = ~win & above & (_toss.lowest_corner_z(flown) >= 0)
        crossing = ~win & above & ~in_flight
        tau = _toss.crossing_time(s_sim, jnp.asarray(dt, dtype))
        pre_c = free_flight(s_sim, tau)
        fast = corner_closing_speed(pre_c) >= min_closing
        long = free >= k_min
        fire = crossing & long & fast
        post_c = jnp.asarray(impact(pre_c, params), dtype)
        t_end = t_c + WINDOW
        leaving = win & ((j + 1) * dt >= t_end)
        s_next = jnp.where(in_flight, flown, _toss.qpos_qvel_to_state(new.qpos, new.qvel))
        s_next = jnp.where(leaving, free_flight(post, (j + 1) * dt - t_end), s_next)
        q_n, v_n = _toss.state_to_qpos_qvel(s_next)
        win_next = fire | (win & ~leaving)
        free_next = jnp.where(win_next | (_toss.lowest_corner_z(s_next) < 0), 0, free + 1)
        counts = counts + jnp.stack([fire, crossing & long & ~fast, crossing & ~long]).astype(jnp.int32)
        carry = (
            new.replace(qpos=q_n, qvel=v_n),
            free_next,
            win_next,
            jnp.where(fire, t_j + tau, t_c),
            jnp.where(fire, pre_c, pre),
            jnp.where(fire, post_c, post),
            counts,
        )
        return carry, s_j

    init = (data, jnp.asarray(k_min, jnp.int32), win, zero, s0, s0, counts)
    carry, states = jax.lax.scan(body, init, jnp.arange(n_frames * sim.substeps))
    c = carry[-1]
    return states[:: sim.substeps], EveryImpactStats(fired=c[0], slow=c[1], short_flight=c[2])


@eqx.filter_jit
def _hybrid_block(sim: TossSim, impact, states, params, rest_params, n_frames: int, every: bool):
    if every:
        return jax.vmap(lambda s, p, q: hybrid_toss_every(sim, impact, s, p, q, n_frames))(states, params, rest_params)
    frames = jax.vmap(lambda s, p, q: hybrid_toss(sim, impact, s, p, q, n_frames))(states, params, rest_params)
    return frames, None


def hybrid_tosses(
    sim: TossSim,
    impact: Callable,
    initial_states: Float[np.ndarray, "n 13"],
    params: Float[np.ndarray, "3"] | Float[np.ndarray, "n 3"],
    n_frames: int,
    *,
    rest_params: Float[np.ndarray, "3"] | Float[np.ndarray, "n 3"] | None = None,
    block: int = 128,
    every_impact: bool = False,
    return_stats: bool = False,
):
    """`hybrid_toss` (or, with `every_impact`, `hybrid_toss_every`) over a batch: jit + vmap in blocks of `block` tosses.

    One compilation per block size, n_frames and rollout.  `impact` must be a
    pytree (an `eqx.Module` such as `CubeSurrogate`) or a function; `params`
    (and `rest_params`, default `params`) is one set for all tosses or one per toss.

    Returns:
        frames (n, n_frames, 13); with `return_stats` (needs `every_impact`) also
        {"fired", "slow", "short_flight"}: per-toss counts (`EveryImpactStats`).
    """
    if return_stats and not every_impact:
        raise ValueError("hybrid_tosses: return_stats counts the landings of every_impact=True")
    states = np.asarray(initial_states, np.float32)
    n = len(states)
    params = np.broadcast_to(np.asarray(params, np.float32), (n, 3))
    rest_params = params if rest_params is None else np.broadcast_to(np.asarray(rest_params, np.float32), (n, 3))
    block = min(block, n)
    out, stats = [], []
    for i in range(0, n, block):
        s, p, q = states[i : i + block], params[i : i + block], rest_params[i : i + block]
        pad = block - len(s)
        s, p, q = (np.concatenate([a, np.repeat(a[-1:], pad, 0)]) for a in (s, p, q))
        frames, st = _hybrid_block(sim, impact, jnp.asarray(s), jnp.asarray(p), jnp.asarray(q), n_frames, every_impact)
        out.append(np.asarray(frames)[: block - pad])
        if st is not None:
            stats.append({k: np.asarray(getattr(st, k))[: block - pad] for k in ("fired", "slow", "short_flight")})
    frames = np.concatenate(out).astype(np.float64)
    if not return_stats:
        return frames
    return frames, {k: np.concatenate([d[k] for d in stats]) for k in ("fired", "slow", "short_flight")}

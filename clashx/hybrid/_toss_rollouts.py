"""Cube tosses through the one hybrid rule: frames at the recordings' 148 Hz, every landing (or the first) to the handler.

Thin wrappers of `clashx.hybrid.rollouts` on the cube-toss scene (`clashx.scenes.TossScene`,
whose hooks say what a landing is): MJX runs the toss from its initial state, each
landing after `MIN_FLIGHT_S` of flight closing at `MIN_CLOSING_SPEED` or more goes to
the surrogate (`every_impact`; otherwise the first landing alone), and the frames within
a window are the interpolation between its pre- and post-impact states (`observe`).
The handler's parameters and the engine's may differ (`rest_params`: MJX's between
impacts, fitted to whole tosses).  `rest_rollout` is plain MJX from a state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, in_blocks, mjx, model_world_bytes
from ..scenes import FRAME_DT, TossScene, interpolate_states, qpos_qvel_to_state, state_to_qpos_qvel
from ._rule import rollouts


class TossFrames(NamedTuple):
    """What `hybrid_tosses` returns.

    Attributes:
        frames: (n, n_frames, 13) each toss's state at every frame (`clashx.scenes.FRAME_DT` apart), dataset layout.
        fired: (n,) landings each toss sent to the handler.
    """

    frames: Float[np.ndarray, "n f 13"]
    fired: np.ndarray


@eqx.filter_jit
def _block(sim: TossScene, impact, states, params, rest_params, n_frames: int, sparse: bool = True):
    qpos, qvel = jax.vmap(state_to_qpos_qvel)(states)
    final = rollouts(
        sim, impact, params, qpos, qvel, n_frames * sim.substeps, engine_params=rest_params,
        record_every=sim.substeps, sparse=sparse,
    )  # fmt: skip
    frames = jax.vmap(jax.vmap(lambda s: qpos_qvel_to_state(s[:7], s[7:])))(final.frames)
    return frames, final.rule.impacts


def hybrid_tosses(
    sim: TossScene,
    impact: Callable,
    initial_states: Float[np.ndarray, "n 13"],
    params: Float[np.ndarray, "p"] | Float[np.ndarray, "n p"],
    n_frames: int,
    *,
    rest_params: Float[np.ndarray, "3"] | Float[np.ndarray, "n 3"] | None = None,
    block: int | None = None,
    every_impact: bool = False,
    sparse: bool = True,
) -> TossFrames:
    """Tosses' frames through the hybrid rule on MJX, jit + vmap in blocks of the batching policy.

    Args:
        sim: the toss scene.
        impact: the handler, `(pre_state (13,), params) -> state WINDOW later`, e.g. a `CubeSurrogate`
            or the rigid law `clashx.scenes.rigid_cube_window`.
        initial_states: (n, 13) states at t = 0, dataset layout.
        params: the handler's parameters, (p,) or (n, p).
        n_frames: frames to return (static).
        rest_params: MJX's parameters between impacts, of `sim.space` (default `params`, when the handler's
            are MJX's, as the surrogate's).
        block: tosses per compiled block (default: the batching policy's, `clashx.core.block_size`).
        every_impact: every landing after a flight through the handler; False: the first only.
        sparse: the handler evaluated only where a toss lands (`clashx.hybrid.rollouts`); False: at every step.

    Returns:
        `TossFrames`: the frames (n, n_frames, 13) and the landings each toss sent to the handler.
    """
    scene = sim if every_impact else sim.first_impact_only()
    states = np.asarray(initial_states, np.float32)
    n = len(states)
    params = np.asarray(params, np.float32)
    params = np.broadcast_to(params, (n, params.shape[-1]))
    rest_params = params if rest_params is None else np.asarray(rest_params, np.float32)
    if rest_params.shape[-1] != sim.space.size:
        raise ValueError(
            f"hybrid_tosses: MJX's parameters between impacts have {rest_params.shape[-1]} values, the scene's space "
            f"{sim.space.names}; pass rest_params when the handler's parameters are not MJX's"
        )
    rest_params = np.broadcast_to(rest_params, (n, sim.space.size))
    world = model_world_bytes(sim.model, recorded=n_frames * 13 * 4)
    frames, fired = in_blocks(
        lambda s, p, q: _block(scene, impact, jnp.asarray(s), jnp.asarray(p), jnp.asarray(q), n_frames, sparse),
        states, params, rest_params, world=world, block=block,
    )  # fmt: skip
    return TossFrames(frames.astype(np.float64), np.asarray(fired))


def hybrid_toss_every(
    sim: TossScene, impact, initial_state, params, rest_params, n_frames: int
) -> tuple[np.ndarray, int]:
    """One toss's frames (n_frames, 13) with every landing after a flight through `impact`, and the landings sent."""
    frames, fired = hybrid_tosses(
        sim, impact, np.asarray(initial_state)[None], params, n_frames, rest_params=rest_params, every_impact=True
    )
    return frames[0], int(fired[0])


def hybrid_toss(sim: TossScene, impact, initial_state, params, rest_params, n_frames: int) -> np.ndarray:
    """One toss's frames (n_frames, 13) with its first landing through `impact`, MJX after its window."""
    return hybrid_tosses(
        sim, impact, np.asarray(initial_state)[None], params, n_frames, rest_params=rest_params
    ).frames[0]


def rest_rollout(
    sim: TossScene, start: Float[Array, "13"], t_start: Float[Array, ""], params: Float[Array, "3"], n_frames: int
) -> Float[Array, "frames 13"]:
    """Plain MJX from `start` at time `t_start`, sampled at the frames t_k = k / 148 s (k < n_frames) by interpolation.

    Frames before `t_start` hold `start` (the caller overwrites them).  Runs
    n_frames × substeps + 1 steps of `sim.dt` (static), enough for any t_start ≥ 0.
    """
    model = sim.space.apply(sim.model, sim.rows, params)
    dtype = model.opt.timestep.dtype
    start = jnp.asarray(start, dtype)
    qpos, qvel = state_to_qpos_qvel(start)
    data = mjx.make_data(model).replace(qpos=qpos, qvel=qvel)

    def step(d, _):
        new = mjx.step(model, d)
        return new, qpos_qvel_to_state(new.qpos, new.qvel)

    n_steps = n_frames * sim.substeps + 1
    _, states = jax.lax.scan(step, data, None, length=n_steps)
    states = jnp.concatenate([start[None], states])  # states[j] at t_start + j dt
    u = jnp.clip((jnp.arange(n_frames, dtype=dtype) * FRAME_DT - t_start) / sim.dt, 0.0, n_steps - 1e-3)
    lo = jnp.floor(u).astype(jnp.int32)
    return jax.vmap(interpolate_states)(states[lo], states[lo + 1], u - lo)

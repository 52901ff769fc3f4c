"""A batch of strikes on MuJoCo C (`mujoco.batch`, a thread pool): the contact phase, then the slide to rest.

The rule (launch state, touch, release, velocity in the block frame) is
`clashx.scenes._strike_rule`'s, the same functions MJX runs, applied to numpy
arrays between `mujoco.batch.Batch` rollouts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax.numpy as jnp
import mujoco
import mujoco.batch
import numpy as np

from ..core import Float
from ..core import batch as _batch
from ._strike_impact import parked_np
from ._strike_rule import (
    MAX_TIME,
    StrikeEvent,
    block_poses_batch,
    initial_states_batch,
    release_rules,
    strike_event,
)

if TYPE_CHECKING:
    from ._strike import StrikeScene


def simulate_strikes_c(
    sim: StrikeScene,
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
    return strike_event(c, np.asarray(block_poses_batch(jnp.asarray(q_end))))


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


def contact_phase_c(sim: StrikeScene, strikes, params, *, nthread: int = 0) -> ContactRecord:
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
    touched, post, pose, t_touch, t_release = release_rules(
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
    sim: StrikeScene,
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


def slide_c(sim: StrikeScene, params, q_rel, v_rel, t_start, n_steps: int, nthread: int = 0) -> np.ndarray:
    """Slide released blocks (striker parked) `n_steps` steps of dt_slide on MuJoCo C; returns every qpos (n, n_steps, 10)."""
    qp, qv = parked_np(q_rel, v_rel)
    batch = _batch.make_batch(sim.mj_slide_model(), sim.space, sim.slide_rows, params, nsim=len(q_rel), nthread=nthread)
    return _batch.rollout(batch, np.asarray(qp), np.asarray(qv), n_steps, time=t_start)["qpos"]

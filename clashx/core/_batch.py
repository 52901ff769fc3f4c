"""One way to run many MuJoCo C rollouts at once: `mujoco.batch` with per-world parameters.

Every C rollout of the package goes through `rollout` (a fresh, non-persistent
`mujoco.batch.Batch`: a persistent pool kept every call's batch alive and grew
by ~100 MB per thousand worlds).
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import mujoco.batch
import numpy as np

from ._params import Layout, ParamSpace


def make_batch(
    model: mujoco.MjModel,
    space: ParamSpace | None,
    rows: Layout | None,
    params: np.ndarray | None,
    *,
    nsim: int,
    nthread: int = 0,
) -> mujoco.batch.Batch:
    """A batch of `nsim` copies of `model` with one row of `params` (of `space`) written into each."""
    batch = mujoco.batch.Batch(model, nsim=nsim, nthread=nthread, persistent=False)
    if space is not None and params is not None:
        if rows is None:
            raise ValueError("make_batch: parameters of a space need its rows in this model (space.rows(model))")
        space.apply_c(batch, rows, np.broadcast_to(np.asarray(params, np.float64), (nsim, space.size)))
    return batch


def rollout(
    batch: mujoco.batch.Batch,
    qpos: np.ndarray,
    qvel: np.ndarray,
    n_steps: int,
    *,
    time: float | np.ndarray = 0.0,
    record: Sequence[str] = ("qpos",),
    warmstart: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Reset every world of `batch` to (qpos, qvel, time) and step it `n_steps` times.

    Args:
        batch: from `make_batch`.
        qpos, qvel: (nsim, nq), (nsim, nv) initial states.
        n_steps: steps per world.
        time: start time(s), s.
        record: data fields to record after every step.
        warmstart: (nsim, nv) the constraint solver's warm start (`qacc_warmstart`), to carry a
            rollout on in a new batch exactly as the old one would have gone on (default: zero).

    Returns:
        {field: (nsim, n_steps, ...)}: record j holds the state after step j + 1.
    """
    reset(batch, qpos, qvel, time=time, warmstart=warmstart)
    return batch.rollout(int(n_steps), record=tuple(record))


def reset(
    batch: mujoco.batch.Batch,
    qpos: np.ndarray,
    qvel: np.ndarray,
    *,
    time: float | np.ndarray = 0.0,
    warmstart: np.ndarray | None = None,
) -> None:
    """Reset every world of `batch` to (qpos, qvel, time) (and the solver's warm start; default zero)."""
    batch.reset(stage=mujoco.mjtStage.mjSTAGE_NONE.value)
    batch.bind("qpos")[:] = qpos
    batch.bind("qvel")[:] = qvel
    batch.bind("time")[:] = time
    if warmstart is not None:
        batch.bind("qacc_warmstart")[:] = warmstart


def advance(batch: mujoco.batch.Batch, n_steps: int, *, record: Sequence[str] = ("qpos",)) -> dict[str, np.ndarray]:
    """Step every world of `batch` on from where it is, `n_steps` more times (no reset; see `rollout`)."""
    return batch.rollout(int(n_steps), record=tuple(record))

"""The one batching policy: how many worlds one vmap runs at once, on whatever device JAX has.

Every batched MJX job of the package (strikes, hybrid rollouts, tosses,
`clashx generate --engine mjx`, CMA-ES generations) asks `block_size` how many
worlds to put in one vmapped block:

* on an accelerator (GPU, TPU) the whole batch is one vmap, bounded only by a
  memory budget: `MEMORY_SHARE` of the device's memory divided by an estimate
  of one world's footprint (`world_bytes`: its MJX data times `WORLD_OVERHEAD`,
  plus what it records);
* on a CPU, blocks of `CPU_BLOCK` worlds (`jax.lax.map` over blocks): one vmap
  over 1024 strikes compiled but never finished on a 2-core CPU with jax
  0.10.2 (all threads asleep, seen 4 times), while 256 and 512 ran, and 256 was
  the fastest per strike there.

A caller's `block=` argument, or `block_override(n)` around a job (what the CLI's
`--block-size` flag sets), replaces the policy's choice.

MuJoCo C batches its worlds too: every C rollout of the package goes through
`rollout` below (a fresh, non-persistent `mujoco.batch.Batch` with per-world
parameters: a persistent pool kept every call's batch alive and grew by ~100 MB
per thousand worlds).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import mujoco
import mujoco.batch
import numpy as np

from ._mjx import mjx
from ._params import Layout, ParamSpace

CPU_BLOCK = 256  # worlds per vmapped block on a CPU (module docstring)
MEMORY_SHARE = 0.5  # of the accelerator's memory one batched job may plan to use
# One world's working memory in a vmapped rollout, as a multiple of its MJX data: the XLA CPU
# compile of the square strike (contact phase + slide, vmapped) used 2.2x its data per world as
# temporaries (12.6 kB of 5.7 kB at 64 worlds); 16x leaves room for other scenes, solvers and devices.
WORLD_OVERHEAD = 16
DEFAULT_MEMORY = 16 * 2**30  # bytes assumed for an accelerator that does not report its memory

_OVERRIDE: contextvars.ContextVar[int | None] = contextvars.ContextVar("clashx_block", default=None)


def tree_bytes(tree) -> int:
    """Bytes of every array (or `jax.ShapeDtypeStruct`) in a pytree."""
    return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree) if hasattr(x, "dtype")))


def world_bytes(data, *, recorded: int = 0) -> int:
    """The policy's estimate of one world's footprint in a vmapped rollout.

    Args:
        data: one world's MJX data (or its `jax.eval_shape`, which allocates nothing).
        recorded: bytes the world keeps besides (frames recorded along the rollout, outputs).
    """
    return WORLD_OVERHEAD * tree_bytes(data) + int(recorded)


def model_world_bytes(model, *, recorded: int = 0) -> int:
    """`world_bytes` of one world of a model (an `mjx.Model` or a `mujoco.MjModel`), from its MJX data's
    shapes (`jax.eval_shape`: nothing allocated)."""
    return world_bytes(jax.eval_shape(lambda: mjx.make_data(model)), recorded=recorded)


def device_memory(device: jax.Device | None = None) -> int | None:
    """Bytes of memory of `device` (default: JAX's first device); None on a CPU."""
    device = jax.devices()[0] if device is None else device
    if device.platform == "cpu":
        return None
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 (a backend without memory statistics)
        stats = {}
    return int(stats.get("bytes_limit", DEFAULT_MEMORY))


def block_size(n: int, *, world: int, block: int | None = None, device: jax.Device | None = None) -> int:
    """Worlds per vmapped block for a batch of `n` worlds of `world` bytes each (`world_bytes`).

    Args:
        n: the batch.
        world: one world's estimated footprint in bytes.
        block: the caller's choice, which wins (then `block_override`'s, then the policy's).
        device: where the batch runs (default: JAX's first device).

    Returns:
        A block in [1, n]: n (one vmap) on an accelerator with room for it, else what fits in
        `MEMORY_SHARE` of its memory; `CPU_BLOCK` on a CPU.

    Raises:
        ValueError: if `block` (or the override) is not a positive integer.
    """
    n = max(int(n), 1)
    chosen = block if block is not None else _OVERRIDE.get()
    if chosen is not None:
        if int(chosen) < 1:
            raise ValueError(f"block size must be a positive number of worlds, got {chosen}")
        return min(int(chosen), n)
    memory = device_memory(device)
    if memory is None:
        return min(CPU_BLOCK, n)
    return max(1, min(n, int(MEMORY_SHARE * memory) // max(int(world), 1)))


@contextlib.contextmanager
def block_override(block: int | None) -> Iterator[None]:
    """Within the block, every batched job runs `block` worlds per vmap (None: the policy's choice).

    Example:
        >>> with block_override(1024):
        ...     block_size(4096, world=10_000)
        1024
    """
    if block is not None and int(block) < 1:
        raise ValueError(f"--block-size {block}: must be a positive number of worlds")
    token = _OVERRIDE.set(None if block is None else int(block))
    try:
        yield
    finally:
        _OVERRIDE.reset(token)


def in_blocks(fn: Callable[..., Any], *xs, world: int, block: int | None = None) -> Any:
    """`fn` over arrays `xs` (common leading batch axis) in blocks of `block_size` worlds, joined on the host.

    For jitted batched functions called from the host: each block has the same
    shape (the last one padded with copies of its last world, then cut), so `fn`
    compiles once.  On an accelerator with room for the batch this is one call.

    Args:
        fn: (*blocks) -> pytree of arrays with the block's leading axis.
        xs: numpy or JAX arrays, each (n, ...).
        world: one world's bytes (`world_bytes`).
        block: the caller's block size (default: the policy's).

    Returns:
        fn's outputs over all n worlds, as numpy arrays.
    """
    n = int(np.shape(xs[0])[0])
    b = block_size(n, world=world, block=block)
    outs = []
    for i in range(0, n, b):
        part = [np.asarray(x[i : i + b]) for x in xs]
        pad = b - len(part[0])
        if pad:
            part = [np.concatenate([p, np.repeat(p[-1:], pad, 0)]) for p in part]
        out = fn(*part)
        outs.append(jax.tree.map(lambda y, k=b - pad: np.asarray(y)[:k], out))
    return jax.tree.map(lambda *ys: np.concatenate(ys), *outs)


# --- MuJoCo C: many rollouts at once (`mujoco.batch`) --------------------------------------------------


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

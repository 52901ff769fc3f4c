"""Spreading a batch over every local device with `jax.sharding` (a one-axis `Mesh` named "batch").

On one device every function here is the plain single-device computation, so a
laptop and a multi-GPU node run the same code.  With several devices (GPUs, or
CPU devices made with `XLA_FLAGS=--xla_force_host_platform_device_count=N`), a
batch's leading axis is split across them and XLA partitions the vmapped work
(GSPMD); the results are the same within float tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"


def batch_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh | None:
    """A one-axis mesh ("batch") over `devices` (default: all local devices); None for a single device."""
    devices = list(jax.local_devices() if devices is None else devices)
    return None if len(devices) < 2 else Mesh(np.array(devices), (BATCH_AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading axis split over the mesh's "batch" axis, the rest replicated."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXIS))


def _placement(mesh: Mesh) -> Callable[[Any], NamedSharding]:
    """An array's sharding on `mesh`: its leading axis split, or replicated where that axis does not divide."""
    split, whole = batch_sharding(mesh), NamedSharding(mesh, PartitionSpec())
    return lambda a: split if a.ndim and a.shape[0] % mesh.size == 0 else whole


def shard_batch(tree: Any, mesh: Mesh | None = None) -> Any:
    """Place every array of `tree` with its leading axis split over the devices (unchanged on one device).

    Arrays whose leading axis does not divide by the device count are replicated instead.
    """
    mesh = batch_mesh() if mesh is None else mesh
    if mesh is None:
        return tree
    place = _placement(mesh)

    def put(a):
        a = jnp.asarray(a)
        return jax.device_put(a, place(a))

    return jax.tree.map(put, tree)


def constrain_batch(tree: Any, mesh: Mesh | None = None) -> Any:
    """Inside a jit: `tree`'s arrays with their leading axis split over the devices, as `shard_batch` places
    them (a sharding constraint; unchanged on one device, replicated where the axis does not divide)."""
    mesh = batch_mesh() if mesh is None else mesh
    if mesh is None:
        return tree
    place = _placement(mesh)
    return jax.tree.map(lambda a: jax.lax.with_sharding_constraint(a, place(a)), tree)


def map_batched(fn: Callable[[Any], Any], xs: Any, *, batch_size: int, mesh: Mesh | None = None) -> Any:
    """`jax.lax.map(fn, xs, batch_size=batch_size)`, each block of the map spread over the local devices.

    Args:
        fn: the single-example function (one world, one collision).
        xs: a pytree of arrays with a common leading batch axis n.
        batch_size: examples per device in one block (memory bound per device).
        mesh: from `batch_mesh` (default: all local devices).

    Returns:
        fn's outputs stacked over the n examples, as `jax.lax.map` returns them.
    """
    mesh = batch_mesh() if mesh is None else mesh
    if mesh is None:
        return jax.lax.map(fn, xs, batch_size=batch_size)
    n = jax.tree.leaves(xs)[0].shape[0]
    block = max(1, min(batch_size, -(-n // mesh.size))) * mesh.size
    n_blocks = -(-n // block)
    pad = n_blocks * block - n

    def blocks(a):
        a = jnp.asarray(a)
        a = jnp.concatenate([a, jnp.repeat(a[-1:], pad, 0)]) if pad else a
        return a.reshape(n_blocks, block, *a.shape[1:])

    split = batch_sharding(mesh)

    def body(x):
        x = jax.lax.with_sharding_constraint(x, split)
        return jax.lax.with_sharding_constraint(jax.vmap(fn)(x), split)

    ys = jax.lax.map(body, jax.tree.map(blocks, xs))
    return jax.tree.map(lambda y: y.reshape(n_blocks * block, *y.shape[2:])[:n], ys)


def spread(replicated: Any, batched: Any, mesh: Mesh | None = None) -> tuple[Any, Any]:
    """Place a computation's inputs on the mesh: `replicated` (a scene, a model) whole on every device,
    `batched` split along its leading axis (`shard_batch`).  Unchanged on one device.

    MJX's `put_model` commits a scene to one device; a jitted function that mixes it with a
    batch spread over several devices must get the scene replicated first.  Call this outside jit.
    """
    mesh = batch_mesh() if mesh is None else mesh
    if mesh is None:
        return replicated, batched
    whole = NamedSharding(mesh, PartitionSpec())
    placed = jax.tree.map(lambda a: jax.device_put(a, whole) if isinstance(a, jax.Array) else a, replicated)
    return placed, shard_batch(batched, mesh)

"""The choice of simulation engine: `--engine auto` resolved for the machine JAX runs on."""

from __future__ import annotations

import jax

AUTO = "auto"


GPU_BACKENDS = ("gpu", "cuda", "rocm")  # where "auto" picks MJX (resolve_engine)


def resolve_engine(name: str, *, cpu: str, accelerator: str) -> str:
    """The engine to run for `name`: itself, or for "auto" `accelerator` on a GPU and `cpu` elsewhere.

    MJX pays off on a GPU, where one jit runs a whole batch in parallel; on a
    CPU, MuJoCo C on every core is faster, and on a TPU too: on one TPU v5e
    chip MJX's strike contact saturated at 180-290 collisions/s (16 to 4,096
    worlds) while MuJoCo C on the same machine's 13 cores ran 10,500/s at
    4,096 (`bench/throughput.py`, README).  Callers record the resolved name
    (never "auto"), so a rerun on the same machine sees the same engine.

    Args:
        name: an engine name or "auto".
        cpu: what "auto" means unless `jax.default_backend()` is a GPU's (e.g. "c", "cpu-hybrid").
        accelerator: what "auto" means on a GPU (e.g. "mjx", "mjx-hybrid").

    Example:
        >>> resolve_engine("auto", cpu="c", accelerator="mjx")  # on a laptop
        'c'
    """
    if name != AUTO:
        return name
    return accelerator if jax.default_backend() in GPU_BACKENDS else cpu


def on_host():
    """A context in which JAX computes on the CPU, whatever accelerator it has.

    For the small host-side searches around a simulator on the host (CMA-ES ask and
    tell around MuJoCo C): their few arithmetic operations cost less on the CPU than
    a device round trip, and there they give the same numbers on a laptop and a GPU
    machine (an accelerator's linear algebra rounds differently, and CMA-ES
    amplifies that into another search).
    """
    return jax.default_device(jax.local_devices(backend="cpu")[0])

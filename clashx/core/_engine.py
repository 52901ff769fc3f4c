"""The choice of simulation engine: `--engine auto` resolved for the machine JAX runs on."""

from __future__ import annotations

import jax

AUTO = "auto"


def resolve_engine(name: str, *, cpu: str, accelerator: str) -> str:
    """The engine to run for `name`: itself, or for "auto" `cpu` on a CPU-only JAX and `accelerator` otherwise.

    MJX pays off on a GPU or TPU, where one jit runs a whole batch in parallel;
    on a CPU, MuJoCo C on every core is faster.  Callers record the resolved
    name (never "auto"), so a rerun on the same machine sees the same engine.

    Args:
        name: an engine name or "auto".
        cpu: what "auto" means when `jax.default_backend()` is "cpu" (e.g. "c", "cpu-hybrid").
        accelerator: what "auto" means on a GPU or TPU (e.g. "mjx", "mjx-hybrid").

    Example:
        >>> resolve_engine("auto", cpu="c", accelerator="mjx")  # on a laptop
        'c'
    """
    if name != AUTO:
        return name
    return cpu if jax.default_backend() == "cpu" else accelerator


def on_host():
    """A context in which JAX computes on the CPU, whatever accelerator it has.

    For the small host-side searches around a simulator on the host (CMA-ES ask and
    tell around MuJoCo C): their few arithmetic operations cost less on the CPU than
    a device round trip, and there they give the same numbers on a laptop and a GPU
    machine (an accelerator's linear algebra rounds differently, and CMA-ES
    amplifies that into another search).
    """
    return jax.default_device(jax.local_devices(backend="cpu")[0])

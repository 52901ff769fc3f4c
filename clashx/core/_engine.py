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

"""`step`: MJX's step with its constraint solver as a fixed-iteration scan, so reverse mode runs through it.

MJX's solver (mujoco 3.17, `mjx/_src/solver.py`, `solve`) iterates with
`jax.lax.while_loop` unless the model allows exactly one iteration, and
reverse-mode autodiff cannot differentiate a `while_loop` (mujoco#2259).  The
same module already holds a scan-based loop, `_while_loop_scan`, which it uses
for the line search: the loop body runs at most `max_iter` times and becomes a
no-op once the loop's condition fails, so values are the `while_loop`'s.

`step(model, data)` calls `mjx.step` with the solver module's `jax` swapped,
for the duration of that call (that is, while JAX traces it), for a proxy whose
`lax.while_loop` is `_while_loop_scan(cond, body, init, model.opt.iterations)`.
Only code traced inside `step` sees the swap: `mjx.step` elsewhere is untouched.
Its cost: under `vmap` a `while_loop` also runs until the slowest world has
converged, so the scan costs at most the iterations the worlds would not have
run; under reverse mode it stores every iteration's context.

`tests/test_grad.py` fails if MJX's solver stops calling
`jax.lax.while_loop(cond, body, ctx)` or drops `_while_loop_scan`.
"""

from __future__ import annotations

import threading
import types

import jax

from ..core import mjx, mjx_solver

_LOCK = threading.Lock()


class _FixedLax(types.ModuleType):
    """`jax.lax` with `while_loop` run as a scan of `max_iter` steps; every other name is jax.lax's."""

    def __init__(self, max_iter: int):
        super().__init__("jax.lax (clashx: fixed-iteration while_loop)")
        self.max_iter = max_iter

    def while_loop(self, cond_fun, body_fun, init_val):
        return mjx_solver._while_loop_scan(cond_fun, body_fun, init_val, self.max_iter)

    def __getattr__(self, name):
        return getattr(jax.lax, name)


class _JaxWithFixedLax(types.ModuleType):
    """`jax` whose `lax` is a `_FixedLax`; every other name is jax's."""

    def __init__(self, max_iter: int):
        super().__init__("jax (clashx: fixed-iteration while_loop)")
        self.lax = _FixedLax(max_iter)

    def __getattr__(self, name):
        return getattr(jax, name)


def reverse_mode_ready() -> bool:
    """Whether MJX's solver has the shape `step` relies on (a module-level `jax` and `_while_loop_scan`)."""
    return getattr(mjx_solver, "jax", None) is jax and callable(getattr(mjx_solver, "_while_loop_scan", None))


def step(model: mjx.Model, data: mjx.Data) -> mjx.Data:
    """One `mjx.step` whose constraint solver runs exactly `model.opt.iterations` iterations as a `lax.scan`.

    Values equal `mjx.step`'s (the scan stops changing the solution where the
    while-loop would have stopped); `jax.grad`, `jax.vjp` and `jax.jacrev`
    work through it, as do jit, vmap and forward mode.

    Args:
        model: an MJX model (its `opt.iterations` is the scan length).
        data: the state.

    Returns:
        The state one `model.opt.timestep` later.

    Raises:
        RuntimeError: if the installed MJX's solver no longer has the loop this replaces.
    """
    if not reverse_mode_ready():
        raise RuntimeError(
            "clashx.grad.step: this MuJoCo's MJX solver no longer has the module-level jax.lax.while_loop "
            "and _while_loop_scan it replaces; use forward mode (jax.jacfwd) or mujoco 3.17"
        )
    n_iter = int(model.opt.iterations)
    with _LOCK:
        mjx_solver.jax = _JaxWithFixedLax(n_iter)
        try:
            return mjx.step(model, data)
        finally:
            mjx_solver.jax = jax

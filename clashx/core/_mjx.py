"""MJX, imported once and quietly, with finite forward-mode tangents through elliptic friction cones.

mujoco.mjx prints "Failed to import warp" to stdout when the optional Warp
backend is absent (always, on a CPU machine); that line would land in users'
notebooks and in piped CLI output, so the import is done here with stdout
captured, and every clashx module imports `mjx` from here.

MJX's constraint solver (mujoco 3.17, `mjx/_src/solver.py`) takes `jnp.sqrt`
of the tangential force (and of a line-search bound) of elliptic-cone
contacts; where that is exactly zero (a contact that carries no friction
yet, a block at rest) the derivative of √x at 0 is infinite and every
forward-mode tangent of the step turns NaN, although the value is fine.
The solver module is given a `jax.numpy` whose `sqrt` has the derivative
1 / (2√x) for x > 0 and 0 at x = 0 (the value is unchanged): the one-sided
limit that the cone's zone test (tsqr > 0) already selects.
`tests/test_mjx_patch.py` fails if the solver stops calling `jnp.sqrt` there.
"""

import contextlib
import io
import types
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp

with contextlib.redirect_stdout(io.StringIO()):
    from mujoco import mjx
    from mujoco.mjx._src import solver as _solver


@jax.custom_jvp
def safe_sqrt(x):
    """√x whose derivative at x = 0 is 0 instead of ∞ (values as `jnp.sqrt`)."""
    return jnp.sqrt(x)


@safe_sqrt.defjvp
def _safe_sqrt_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    y = jnp.sqrt(x)
    slope = jnp.where(x > 0, 0.5 / jnp.where(x > 0, y, 1.0), 0.0)
    return y, slope * dx


class _NumpyWithSafeSqrt(types.ModuleType):
    """`jax.numpy` with `sqrt` replaced by `safe_sqrt`; every other name is jax.numpy's."""

    def __getattr__(self, name):
        return getattr(jnp, name)


_jnp = _NumpyWithSafeSqrt("jax.numpy (clashx: safe sqrt)")
_jnp.sqrt = safe_sqrt  # type: ignore[attr-defined]  # a module attribute set at run time
PATCHED = getattr(_solver, "jp", None) is jnp
if PATCHED:
    _solver.jp = _jnp

T = TypeVar("T")


def as_float64(tree: T) -> T:
    """`tree` (a scene, a model) with its floating-point arrays in float64; use it inside `jax.enable_x64(True)`.

    MJX's forward-mode derivatives need float64: in float32 the constraint
    solver stops when the *values* have converged, and the tangents carried
    along have not (on the square, ∂ωz/∂μ2 came out +2.7 where a central
    difference and float64 give −1.07).
    """
    return jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, tree)


__all__ = ["mjx", "safe_sqrt", "PATCHED", "as_float64"]

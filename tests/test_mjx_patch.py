"""The safe square root given to MJX's solver: present, still needed, and right (clashx.core._mjx)."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np

from clashx.core import _mjx

SLOPE_TOL = 1e-6


def test_the_solver_module_still_takes_jnp_sqrt():
    """Fails if MJX's solver stops importing jax.numpy as `jp` or stops calling `jp.sqrt`: revisit the patch."""
    from mujoco.mjx._src import solver

    assert _mjx.PATCHED, "mujoco.mjx._src.solver no longer has `jp = jax.numpy`; clashx.core._mjx cannot patch it"
    assert solver.jp.sqrt is _mjx.safe_sqrt
    assert "jp.sqrt(" in inspect.getsource(solver)


def test_safe_sqrt_has_finite_slope_at_zero_and_the_usual_one_elsewhere():
    x = jnp.array([0.0, 1e-8, 0.25, 4.0])
    np.testing.assert_array_equal(np.asarray(_mjx.safe_sqrt(x)), np.asarray(jnp.sqrt(x)))
    slope = jax.vmap(jax.grad(_mjx.safe_sqrt))(x)
    assert float(slope[0]) == 0.0
    np.testing.assert_allclose(np.asarray(slope[1:]), 0.5 / np.sqrt(np.asarray(x[1:])), rtol=SLOPE_TOL)

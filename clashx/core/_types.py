"""Shape-annotated array aliases used across clashx (jaxtyping)."""

from __future__ import annotations

import jax
import numpy as np
from jaxtyping import Bool, Float, Int, PRNGKeyArray

Array = jax.Array | np.ndarray  # what clashx functions take: JAX arrays inside jit, NumPy arrays at the edges

ScalarLike = float | jax.Array | np.ndarray

__all__ = ["Array", "Bool", "Float", "Int", "PRNGKeyArray", "ScalarLike"]

"""Shape-annotated array aliases used across clashx (jaxtyping)."""

from __future__ import annotations

import jax
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

ScalarLike = float | jax.Array | np.ndarray

__all__ = ["Array", "Bool", "Float", "Int", "PRNGKeyArray", "ScalarLike"]

"""Shape-annotated array aliases used across clashx (jaxtyping)."""

from __future__ import annotations

from typing import Union

import jax
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

ScalarLike = Union[float, jax.Array, np.ndarray]

__all__ = ["Array", "Bool", "Float", "Int", "PRNGKeyArray", "ScalarLike"]

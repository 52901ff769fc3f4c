"""Typed results: short reprs and JSON for the values clashx's functions return.

Every public function returns a typed value (a frozen dataclass, a NamedTuple or an
`eqx.Module`) with documented fields, never a dict (STYLE.md 17).  This module gives
them two things a user looks at:

* `short_repr`: the type and its fields, with values for scalars and short strings and
  `f32[8,3]`-style shapes for arrays, one level deep (a `LabFit` printed 13,000
  characters before);
* `to_json`: the JSON-able form the CLI and the benches write (`Result.to_dict`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

_DTYPES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool", "float16": "f16"}


def _fields(obj) -> list[tuple[str, Any]]:
    if dataclasses.is_dataclass(obj):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.repr]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple
        return list(zip(obj._fields, obj, strict=True))
    return [(k, v) for k, v in vars(obj).items() if not k.startswith("_")]


def summarize(x: Any, *, depth: int = 0) -> str:
    """One short line for a value: scalars and short strings as themselves, arrays as `f32[8,3]`.

    Nested typed values are shown as `Name(...)` (or, at the top two levels, their fields);
    mappings by their keys; long sequences by their length.
    """
    if isinstance(x, jax.Array | np.ndarray) and not isinstance(x, jax.core.Tracer):
        if x.size == 1 and x.ndim <= 1:
            return summarize(x.reshape(()).item(), depth=depth)
        dtype = _DTYPES.get(str(x.dtype), str(x.dtype))
        return f"{dtype}[{','.join(map(str, x.shape))}]"
    if isinstance(x, jax.core.Tracer):
        return f"Traced{list(x.shape)}"
    if isinstance(x, bool | np.bool_) or x is None:
        return repr(bool(x) if x is not None else None)
    if isinstance(x, int | np.integer):
        return str(int(x))
    if isinstance(x, float | np.floating):
        return f"{float(x):.4g}" if math.isfinite(float(x)) else str(float(x))
    if isinstance(x, str):
        return repr(x) if len(x) <= 60 else repr(x[:57] + "...")
    if isinstance(x, Mapping):
        keys = list(x)
        shown = ", ".join(map(str, keys[:6])) + (f", ... ({len(keys)} keys)" if len(keys) > 6 else "")
        return "{" + shown + "}"
    if callable(x) and not hasattr(x, "__dataclass_fields__") and not isinstance(x, tuple):
        if hasattr(x, "__wrapped__") or hasattr(x, "__name__"):
            return getattr(x, "__name__", type(x).__name__)
    if isinstance(x, tuple | list) and not hasattr(x, "_fields"):
        if len(x) <= 4 and all(isinstance(v, int | float | str | bool) for v in x):
            return repr(tuple(x)) if isinstance(x, tuple) else repr(list(x))
        return f"{type(x).__name__}[{len(x)}]"
    name = type(x).__name__
    if depth >= 1:
        return f"{name}(...)"
    try:
        fields = _fields(x)
    except TypeError:
        return name
    return f"{name}(" + ", ".join(f"{k}={summarize(v, depth=depth + 1)}" for k, v in fields) + ")"


def short_repr(obj: Any) -> str:
    """`Name(field=value, ...)`: scalars shown, arrays as shapes, nested values one level deep."""
    return f"{type(obj).__name__}(" + ", ".join(f"{k}={summarize(v, depth=1)}" for k, v in _fields(obj)) + ")"


def to_json(x: Any) -> Any:
    """A JSON-able copy of a result: arrays to (nested) lists, typed values to dicts of their fields.

    Models and other values with no JSON form (functions, equinox modules that are not
    results) are left out of dicts; NaN stays a float (json writes it as NaN).
    """
    if isinstance(x, Result):
        return x.to_dict()
    if isinstance(x, jax.Array | np.ndarray):
        return np.asarray(x).tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float | int | str | bool) or x is None:
        return x
    if isinstance(x, Mapping):
        return {str(k): to_json(v) for k, v in x.items() if _jsonable(v)}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return {k: to_json(v) for k, v in zip(x._fields, x, strict=True) if _jsonable(v)}
    if isinstance(x, tuple | list):
        return [to_json(v) for v in x]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: to_json(getattr(x, f.name)) for f in dataclasses.fields(x) if _jsonable(getattr(x, f.name))}
    raise TypeError(f"to_json: no JSON form for {type(x).__name__}")


def _jsonable(v: Any) -> bool:
    if isinstance(v, Result | jax.Array | np.ndarray | np.generic | float | int | str | bool | Mapping) or v is None:
        return True
    if isinstance(v, tuple | list):
        return all(_jsonable(e) for e in v)
    return dataclasses.is_dataclass(v) and not isinstance(v, type)


class Result:
    """What typed results share: a short repr and `to_dict()` (the JSON the CLI writes).

    Mixed into frozen dataclasses (`@dataclasses.dataclass(frozen=True)`); the fields are
    the documentation.  Fields holding models are left out of `to_dict()`.
    """

    def __repr__(self) -> str:
        return short_repr(self)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-able values (arrays as lists); models and functions left out."""
        return {k: to_json(v) for k, v in _fields(self) if _jsonable(v)}

"""One pair of calls to save and load any surrogate: the model folder's files tell which kind it holds."""

from __future__ import annotations

import os
from typing import Any

from ..scenes import AbstractImpactScene, PairScene
from ._base import AbstractSurrogate
from ._cube import META_FILE as CUBE_META
from ._cube import CubeSurrogate, load_cube_surrogate, save_cube_surrogate
from ._pair import META_FILE as PAIR_META
from ._pair import PairSurrogate, load_pair_surrogate, save_pair_surrogate
from ._strike_surrogate import META_FILE as STRIKE_META
from ._strike_surrogate import StrikeSurrogate, load_strike_surrogate, save_strike_surrogate


def save_surrogate(folder: str | os.PathLike, model: AbstractSurrogate, extra: dict[str, Any] | None = None) -> None:
    """Write any surrogate (strike, cube or your scene's) to `folder`: its weights and a JSON of metadata.

    Each file is written atomically.  `extra` is merged into the JSON (e.g. how it was trained).

    Example:
        >>> result = clashx.pretrain(config)
        >>> clashx.save_surrogate("my-model", result.model)
    """
    if isinstance(model, StrikeSurrogate):
        save_strike_surrogate(folder, model, extra)
    elif isinstance(model, CubeSurrogate):
        save_cube_surrogate(folder, model, extra)
    elif isinstance(model, PairSurrogate):
        save_pair_surrogate(folder, model, extra)
    else:
        raise TypeError(f"save_surrogate: model is a {type(model).__name__}; expected a clashx surrogate")


def load_surrogate(folder: str | os.PathLike, scene: AbstractImpactScene | None = None) -> AbstractSurrogate:
    """Load the surrogate saved in `folder` by `save_surrogate` (or `clashx pretrain` / `finetune`), of any kind.

    Args:
        folder: the model folder.
        scene: your scene (`clashx.load_scene(...)`), needed for a `PairScene`'s surrogate; the strike's and
            the cube's read their scene from the folder.

    Raises:
        FileNotFoundError: no surrogate in `folder`.
        ValueError: a pair surrogate without its `scene`, or one of another scene (the message says which).
    """
    folder = os.fspath(folder)
    if os.path.exists(os.path.join(folder, PAIR_META)):
        if not isinstance(scene, PairScene):
            raise ValueError(
                f"load_surrogate: {folder} holds a surrogate of your own scene; pass its scene "
                "(scene=clashx.load_scene('path/file.py:Class'))"
            )
        return load_pair_surrogate(folder, scene)
    if os.path.exists(os.path.join(folder, CUBE_META)):
        return load_cube_surrogate(folder)
    if os.path.exists(os.path.join(folder, STRIKE_META)):
        return load_strike_surrogate(folder)
    raise FileNotFoundError(
        f"{folder}: no surrogate here ({STRIKE_META}, {CUBE_META} or {PAIR_META}); "
        "train one with `clashx pretrain` or use a shipped one (clashx.shipped_strike_surrogate(shape))"
    )

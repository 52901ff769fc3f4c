"""Scenes by name: the shipped `make_scene("strike", shape)` and `make_scene("cube-toss")`, and a user's "module:Class"."""

from __future__ import annotations

from ._pair import load_scene
from ._scene import AbstractImpactScene
from ._strike import make_strike_scene
from ._toss import make_toss_scene

SCENES = ("strike", "cube-toss")


def make_scene(name: str, shape: str = "") -> AbstractImpactScene:
    """The scene called `name`: "strike" (needs a block `shape`), "cube-toss", or a `PairScene` as "module:Class"."""
    if name == "strike":
        return make_strike_scene(shape)
    if name == "cube-toss":
        return make_toss_scene()
    if ":" in name:
        return load_scene(name)
    raise ValueError(f"unknown scene {name!r}; expected one of {', '.join(SCENES)}, or MODULE:CLASS of a PairScene")

"""The scenes clashx ships, by name: `make_scene("strike", shape)` or `make_scene("cube-toss")`."""

from __future__ import annotations

from ._scene import AbstractImpactScene
from ._strike import make_strike_sim
from ._toss import make_toss_sim

SCENES = ("strike", "cube-toss")


def make_scene(name: str, shape: str = "") -> AbstractImpactScene:
    """The shipped scene called `name` ("strike" needs a block `shape`; "cube-toss" takes none)."""
    if name == "strike":
        return make_strike_sim(shape)
    if name == "cube-toss":
        return make_toss_sim()
    raise ValueError(f"unknown scene {name!r}; expected one of {', '.join(SCENES)}")

"""What an impact scene is to the pipeline: `AbstractImpactScene`, with the strike and the cube toss as instances.

A scene holds its MJCF, the two bodies of the learned pair, the `ParamSpace` it is
identified in, the prior over pre-impact inputs, the impact window, and how a batch
of its collisions is simulated into events.  Generation (`clashx.generate`) runs any
scene through this interface and nothing else (`clashx.scenes.make_scene` names them).
"""

from __future__ import annotations

import abc
from typing import Any

import equinox as eqx
import numpy as np

from ..core._params import ParamSpace
from ..core._types import PRNGKeyArray


class AbstractImpactScene(eqx.Module):
    """An impact scene: MJCF, learned pair, parameter space, prior over pre-impact inputs, window, events.

    Attributes:
        name: the scene's name in event files and on the command line (`--scene`).
        pair: the two bodies whose impact the surrogate learns (MJCF names).
        space: the physical parameters identified in this scene.
    """

    name: eqx.AbstractClassVar[str]
    pair: eqx.AbstractClassVar[tuple[str, str]]
    space: eqx.AbstractVar[ParamSpace]

    @property
    def schema(self) -> str:
        """The event files' scene (`clashx.events.SCHEMAS`) this scene writes: its name, unless it says otherwise."""
        return self.name

    @property
    @abc.abstractmethod
    def window(self) -> float:
        """The impact window (s): the surrogate predicts the pair's state this long after first contact."""

    @abc.abstractmethod
    def mjcf(self) -> str:
        """The scene's MJCF (nominal parameters)."""

    @abc.abstractmethod
    def sample_inputs(self, n: int, *, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
        """`n` pre-impact inputs drawn from the scene's prior and `n` parameter draws from `space`'s prior."""

    @abc.abstractmethod
    def simulate_events(self, inputs: np.ndarray, params: np.ndarray, *, engine: str, to_rest: bool = True) -> dict:
        """Simulate a batch on `engine` ("c" or "mjx") into event arrays of the scene's schema (`clashx.events`)."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """What a generated file records about the scene: ranges, parameter space, solver, window."""

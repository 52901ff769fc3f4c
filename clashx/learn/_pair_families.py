"""Impact families for your own scene: its surrogate (MuJoCo distilled) and its rigid law, identified apart and averaged.

As for the strike and the cube, a *family* is a physically different model of one
impact.  A `PairScene` has two: the surrogate distilled from MuJoCo's soft contact
(`PairSurrogate`, conditioned on the scene's MuJoCo parameters) and the rigid
impulse law (`clashx.scenes.pair_law`, with its own parameters e_n, e_t, μ).  Each
is identified on the same real impacts (`identify_pair`, `identify_pair_law`);
`PairFamilies` is the handler that averages their post-window states (positions,
velocities, and the quaternions of free and ball joints along the shorter arc), so
the one hybrid rule runs the average as it runs either family.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from ..core import Array, Bool, Float, short_repr
from ..scenes import AbstractHandler, PairLaw
from ..surrogate import PairSurrogate

SCENE_FAMILIES = ("mujoco", "rigid")  # a scene's surrogate (MuJoCo distilled) and its rigid law


class PairFamilies(AbstractHandler):
    """The average of a scene's two families as one handler: `handler(pre, params)` with params = surrogate's ‖ law's.

    Attributes:
        surrogate: the scene's surrogate (its parameters are the scene's MuJoCo ones, `scene.space`).
        law: the scene's rigid law (parameters e_n, e_t, μ: `clashx.scenes.law_space`).
        law_weight: the law's weight in the average (the surrogate's is 1 − it); equal by default, as the
            strike's and the cube's families are averaged.
    """

    surrogate: PairSurrogate
    law: PairLaw
    law_weight: float = eqx.field(static=True, default=0.5)

    @property
    def n_surrogate(self) -> int:
        """How many of the handler's parameters are the surrogate's (the first ones)."""
        return self.surrogate.space.size

    def __call__(self, pre: Float[Array, " d"], params: Float[Array, " p"]) -> Float[Array, " d"]:
        """The families' average pair state a window after the touch (quaternions averaged on the sphere)."""
        n = self.n_surrogate
        a = self.surrogate(pre, params[:n])
        b = jnp.asarray(self.law(pre, params[n:]), a.dtype)
        return self.surrogate.scene.interpolate(a, b, self.law_weight)

    def in_domain(self, x, params: Float[Array, " p"]) -> Bool[Array, ""]:
        """The surrogate's training ranges: outside them the average is a guess too."""
        return self.surrogate.in_domain(x, params[: self.n_surrogate])

    @property
    def checks_post(self) -> bool:
        return self.surrogate.checks_post

    def plausible(self, sep: Float[Array, ""], closing: Float[Array, ""]) -> Bool[Array, ""]:
        """The surrogate's bounds on a window's end."""
        return self.surrogate.plausible(sep, closing)

    def __repr__(self) -> str:
        return short_repr(self)

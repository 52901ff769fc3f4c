"""The engine as the handler: MuJoCo's own full contact over the impact window, the floor of any handler.

`engine_window(scene)` is a handler with the rule's signature whose prediction is
what full-contact MJX does over the window from the touch.  In the hybrid rule it
measures what the rule itself costs with a perfect handler: the rollouts then
differ from full contact only by where the rule cuts and joins the window (the
crossing interpolated within a step, the pair state set at the window's end).
It is a reference, not a model: it has MuJoCo's parameters and no learning.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import Array, Float, Layout, mjx, short_repr
from ..scenes import AbstractHandler, PairScene


class EngineWindow(AbstractHandler):
    """Full-contact MJX over a scene's impact window, as a handler; build with `engine_window(scene)`.

    Attributes:
        scene: the scene (its pair state and parameter space; static).
        model: the scene's full-contact MJX model.
        rows: where the scene's parameters are written in it (static).
        n_steps: engine steps over the window.
    """

    scene: PairScene = eqx.field(static=True)
    model: mjx.Model
    rows: Layout = eqx.field(static=True)
    n_steps: int = eqx.field(static=True)

    def __call__(self, pre: Float[Array, " d"], params: Float[Array, " p"]) -> Float[Array, " d"]:
        """The pair state `n_steps` engine steps after `pre`, under full contact at `params` (the scene's space)."""
        dtype = self.model.opt.timestep.dtype
        m = self.scene.space.apply(self.model, self.rows, jnp.asarray(params, dtype))
        q, v = self.scene.with_pair_state(m.qpos0, jnp.zeros(m.nv, dtype), jnp.asarray(pre, dtype))
        d = mjx.make_data(m).replace(qpos=q, qvel=v)
        d, _ = jax.lax.scan(lambda d, _: (mjx.step(m, d), None), d, None, length=self.n_steps)
        return jnp.asarray(self.scene.pair_state(d.qpos, d.qvel), jnp.asarray(pre).dtype)

    def __repr__(self) -> str:
        return short_repr(self)


def engine_window(scene: PairScene) -> EngineWindow:
    """The perfect handler of `scene`: its own full contact over the window (module docstring).

    Example:
        >>> perfect = clashx.hybrid.engine_window(scene)
        >>> clashx.rollouts_c(scene, perfect, params, qpos, qvel, 2000)   # the rule's own floor
    """
    m = scene.c_model()
    return EngineWindow(scene, mjx.put_model(m), scene.rows(), scene.n_window)

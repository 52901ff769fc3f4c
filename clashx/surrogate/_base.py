"""What every learned impact handler is: an MLP on features of (pre-impact input, parameters), affine outputs.

The learning stack (`clashx.learn`: pretraining, identification, fine-tuning) is
written once against this interface; the strike's `StrikeSurrogate` and the cube's
`CubeSurrogate` are its instances.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import Array, Float, ParamSpace, short_repr
from ..scenes import AbstractHandler


class MLP(eqx.Module):
    """A multilayer perceptron whose activation is a static field, so plain `jax.jit` and `jax.vmap` take it.

    The same layers as `eqx.nn.MLP` (built by it, `make_mlp`, so a key gives the same weights) and the same
    saved leaves (a saved surrogate loads into either); `eqx.nn.MLP` keeps its activation as a pytree leaf,
    which `jax.jit` refuses as an argument ("... at path handler.mlp.activation").

    Attributes:
        layers: the linear layers, input to output.
        activation: applied after every layer but the last (static).
    """

    layers: tuple[eqx.nn.Linear, ...]
    activation: Callable = eqx.field(static=True)

    def __call__(self, x: Float[Array, " n_in"]) -> Float[Array, " n_out"]:
        h = jnp.asarray(x)
        for layer in self.layers[:-1]:
            h = jnp.asarray(self.activation(layer(h)))
        return self.layers[-1](h)


def make_mlp(n_in: int, n_out: int, width: int, depth: int, *, activation: Callable = jax.nn.silu, key) -> MLP:
    """An `MLP` with `depth` hidden layers of `width`, initialised as `eqx.nn.MLP` with the same `key` is."""
    return MLP(eqx.nn.MLP(n_in, n_out, width, depth, activation=activation, key=key).layers, activation)


class AbstractSurrogate(AbstractHandler):
    """A parameter-conditioned impact surrogate.

    Concrete surrogates hold an `MLP` whose output is de-normalised by
    `out_mean + out_std * y`, the `ParamSpace` they are conditioned on, and say
    how far one prediction is from one observed impact (`example_loss`).
    """

    mlp: eqx.AbstractVar[MLP]
    out_mean: eqx.AbstractVar[Float[Array, " k"]]
    out_std: eqx.AbstractVar[Float[Array, " k"]]
    space: eqx.AbstractVar[ParamSpace]

    @abc.abstractmethod
    def example_residuals(self, x, y, params: Float[Array, " p"], reference=None) -> Float[Array, " k"]:
        """The residual vector of one observed impact: input `x`, observed outcome `y`, parameters (p,).

        Identification (Levenberg-Marquardt) works on these; `example_loss` is their
        squared norm.  `reference` is the model whose fixed scales define the units
        (fine-tuning passes the pretrained model); None: this model's own.
        """

    def example_loss(self, x, y, params: Float[Array, " p"], reference=None) -> Float[Array, ""]:
        """The loss of one observed impact: the squared norm of `example_residuals`."""
        return jnp.sum(self.example_residuals(x, y, params, reference) ** 2)

    def trainable(self, scope: str):
        """A filter spec (a pytree of bools) of the weights fine-tuning moves.

        Args:
            scope: "all" (every weight), "affine" (the output normalisers: a per-component
                gain and offset) or "head" (the MLP's last layer and the normalisers).
        """
        if scope == "all":
            return jax.tree.map(eqx.is_inexact_array, self)
        spec = jax.tree.map(lambda _: False, self)
        if scope == "affine":
            return eqx.tree_at(lambda m: (m.out_mean, m.out_std), spec, replace=(True, True))
        last = lambda m: (m.mlp.layers[-1].weight, m.mlp.layers[-1].bias, m.out_mean, m.out_std)  # noqa: E731
        return eqx.tree_at(last, spec, replace=(True,) * 4)

    def __repr__(self) -> str:
        return short_repr(self)


def predict(
    model: Callable[[Any, Any], Any], inputs: Float[Array, "n ..."], params: Float[Array, " p"] | Float[Array, "n p"]
) -> Float[Array, "n ..."]:
    """Any surrogate's predictions for a batch: `model(input, params)` vmapped over the inputs.

    Args:
        model: a surrogate (`StrikeSurrogate`, `CubeSurrogate`, `PairSurrogate`) or any handler
            `(input, params) -> outcome`.
        inputs: (n, ...) the impacts as the model takes them: strikes (θ, θ1, v_pre) for the strike's
            (rad, rad, m/s), pre-impact states for the cube's and a pair scene's.
        params: (p,) one parameter set for all, or (n, p) one per input, in `model.space.names` order.

    Returns:
        (n, ...) the outcomes: for the strike (vx, vy, ωz) at release (m/s, m/s, rad/s, block frame),
        for the cube and a pair scene the state a window after the touch.

    Example:
        >>> model = clashx.shipped_strike_surrogate("square")
        >>> clashx.predict(model, strikes, model.space.centre)   # jax.jit(clashx.predict) works as well
    """
    inputs = jnp.asarray(inputs)
    params = jnp.asarray(params)
    if params.ndim == 1:
        return jax.vmap(model, in_axes=(0, None))(inputs, params)
    return jax.vmap(model)(inputs, params)


def init_network(n_in: int, n_out: int, width: int, depth: int, *, key, out_mean=None, out_std=None) -> dict:
    """The fields every surrogate starts from: a SiLU MLP (`key`) and float32 output normalisers (default 0 and 1).

    Returns:
        {"mlp", "out_mean", "out_std", "width", "depth"}, to pass on to a surrogate's constructor.
    """
    return {
        "mlp": make_mlp(n_in, n_out, width, depth, key=key),
        "out_mean": jnp.zeros(n_out) if out_mean is None else jnp.asarray(out_mean, jnp.float32),
        "out_std": jnp.ones(n_out) if out_std is None else jnp.asarray(out_std, jnp.float32),
        "width": width,
        "depth": depth,
    }


class TargetSurrogate(AbstractSurrogate):
    """A surrogate of a pre-impact *state*: the network predicts normalised targets, the model maps them back.

    `model(pre, params)` is the state a window after the touch:
    `post_from_targets(pre, out_mean + out_std * mlp(features(pre, params)))`.  The
    cube's `CubeSurrogate` and a user scene's `PairSurrogate` are its instances; they
    give `features` and `post_from_targets`.  The residual of an observed impact is
    the target error in units of the training set's spread (`reference`'s when
    fine-tuning), over √k, so `example_loss` is the mean squared normalised error.
    """

    mlp: MLP
    out_mean: Float[Array, " k"]
    out_std: Float[Array, " k"]
    space: ParamSpace
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)

    @abc.abstractmethod
    def features(self, pre: Float[Array, " d"], params: Float[Array, " p"]) -> Float[Array, " f"]:
        """The network's input from a pre-impact state and the parameters (physical units)."""

    @abc.abstractmethod
    def post_from_targets(self, pre: Float[Array, " d"], y: Float[Array, " k"]) -> Float[Array, " d"]:
        """The post-window state from the pre-impact state and the (de-normalised) targets."""

    def targets(self, pre: Float[Array, " d"], params: Float[Array, " p"]) -> Float[Array, " k"]:
        """The predicted targets of the impact."""
        return self.out_mean + self.out_std * self.mlp(jnp.asarray(self.features(pre, params)))

    def __call__(self, pre: Float[Array, " d"], params: Float[Array, " p"]) -> Float[Array, " d"]:
        """The state a window after the touch."""
        return self.post_from_targets(pre, self.targets(pre, params))

    def example_residuals(self, x, y, params, reference=None) -> Float[Array, " k"]:
        """Target errors of one impact (input `x` = pre-impact state, `y` = its observed targets), normalised, / √k."""
        scale = (self if reference is None else reference).out_std
        return (self.targets(x, params) - y) / scale / jnp.sqrt(float(y.shape[-1]))

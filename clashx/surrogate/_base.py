"""What every learned impact handler is: an MLP on features of (pre-impact input, parameters), affine outputs.

The learning stack (`clashx.learn`: pretraining, identification, fine-tuning) is
written once against this interface; the strike's `StrikeSurrogate` and the cube's
`CubeSurrogate` are its instances.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import Array, Float, ParamSpace


class AbstractSurrogate(eqx.Module):
    """A parameter-conditioned impact surrogate.

    Concrete surrogates hold an `eqx.nn.MLP` whose output is de-normalised by
    `out_mean + out_std * y`, the `ParamSpace` they are conditioned on, and say
    how far one prediction is from one observed impact (`example_loss`).
    """

    mlp: eqx.AbstractVar[eqx.nn.MLP]
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


def init_network(n_in: int, n_out: int, width: int, depth: int, *, key, out_mean=None, out_std=None) -> dict:
    """The fields every surrogate starts from: a SiLU MLP (`key`) and float32 output normalisers (default 0 and 1).

    Returns:
        {"mlp", "out_mean", "out_std", "width", "depth"}, to pass on to a surrogate's constructor.
    """
    return {
        "mlp": eqx.nn.MLP(n_in, n_out, width, depth, activation=jax.nn.silu, key=key),
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

    mlp: eqx.nn.MLP
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

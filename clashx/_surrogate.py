"""The parameter-conditioned collision surrogate: (strike, contact parameters) → post-impact velocity.

CLASH's distilled model (He et al. 2026).  An Equinox MLP maps
features of one strike and the contact parameters to the block's velocity per
unit strike speed, so the network learns the shape of the outcome and the
physics' near-proportionality to v_pre comes for free.  The strike enters
through its geometry, what an impulse acts on: the impact point p, the outward
normal n, the strike direction d (all in the block frame, SCENE.md) and the
lever arm (p − c) × d about the footprint's centroid c.  An impulse J along d
changes the velocity by J d / m and the yaw rate by J (p − c) × d / I, so
these features make the outcome nearly linear in the inputs, and the kinks of
p(θ) at a polygon's corners come from geometry, not from the network:

    features = (p / r, n, d, (p − c) × d / r, θ1 / θ1_max, (v_pre − v̄) / v_s, 2·unit(params) − 1)
    velocity = v_pre · (mean + std ⊙ MLP(features))

`mean`/`std` normalise the targets and live in the model, with the shape and
the parameter space, so a saved surrogate carries everything it needs.
Saved as equinox leaves (`surrogate.eqx`) beside a JSON of metadata
(`surrogate.json`); loading it for another shape or parameter space raises.
"""

from __future__ import annotations

import math
import os
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from . import _geometry as geo
from ._io import check_space, load_model_leaves, read_model_meta, save_model
from ._params import ParamSpace, strike_space
from ._types import Array, Float, PRNGKeyArray

_N_STRIKE_FEATURES = 9  # the parameters add space.size more
MODEL_FILE = "surrogate.eqx"
META_FILE = "surrogate.json"
_META_KEYS = ("format", "scene", "shape", "param_space", "width", "depth")
_RETRAIN = "re-run `clashx pretrain` (or `clashx finetune`) into a fresh --out"

_THETA1_MAX = geo.STRIKE_RANGES["theta1"][1]
_V_MID = 0.5 * sum(geo.STRIKE_RANGES["v_pre"])
_V_HALF = 0.5 * (geo.STRIKE_RANGES["v_pre"][1] - geo.STRIKE_RANGES["v_pre"][0])


class Surrogate(eqx.Module):
    """Post-impact velocity (vx, vy, ωz; block frame) of one strike under given contact parameters.

    Call as `model(strike, params)`: strike (θ, θ1, v_pre) in rad, rad, m/s;
    params in the order of `model.space.names`, physical units.  Returns (3,)
    in m/s, m/s, rad/s.  Batch with `jax.vmap` (or `clashx.predict`).
    """

    mlp: eqx.nn.MLP
    out_mean: Float[Array, "3"]
    out_std: Float[Array, "3"]
    shape: str = eqx.field(static=True)
    space: ParamSpace
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)

    def features(self, strike: Float[Array, "3"], params: Float[Array, "p"]) -> Float[Array, "f"]:
        """The network's input for one strike and parameter set (module docstring): (9 + p,)."""
        theta, theta1, v_pre = strike[0], strike[1], strike[2]
        point, normal = geo.impact_geometry(self.shape, theta)
        d = geo.strike_direction(self.shape, theta, theta1)
        r = geo.characteristic_length(self.shape)
        arm = point - jnp.asarray(geo.footprint_com(self.shape), point.dtype)
        lever = (arm[0] * d[1] - arm[1] * d[0]) / r
        unit = 2.0 * self.space.to_unit(params) - 1.0
        scalars = jnp.stack([lever, theta1 / _THETA1_MAX, (v_pre - _V_MID) / _V_HALF])
        return jnp.concatenate([point / r, normal, d, scalars, unit])

    def __call__(self, strike: Float[Array, "3"], params: Float[Array, "p"]) -> Float[Array, "3"]:
        y = self.mlp(self.features(strike, params))
        return strike[2] * (self.out_mean + self.out_std * y)


def make_surrogate(
    shape: str,
    *,
    key: PRNGKeyArray,
    space: ParamSpace | None = None,
    width: int = 256,
    depth: int = 4,
    out_mean=None,
    out_std=None,
) -> Surrogate:
    """A freshly initialised surrogate for `shape` (weights from `key`).

    Args:
        shape: block shape.
        key: PRNG key of the initial weights.
        space: the contact parameters it is conditioned on (default `strike_space()`).
        width, depth: hidden width and number of hidden layers of the MLP.
        out_mean, out_std: target normalisers, velocity per unit v_pre (3,); default 0 and 1.
    """
    geo.check_shape(shape)
    space = space or strike_space()
    mlp = eqx.nn.MLP(_N_STRIKE_FEATURES + space.size, 3, width, depth, activation=jax.nn.silu, key=key)
    return Surrogate(
        mlp=mlp,
        out_mean=jnp.zeros(3) if out_mean is None else jnp.asarray(out_mean, jnp.float32),
        out_std=jnp.ones(3) if out_std is None else jnp.asarray(out_std, jnp.float32),
        shape=shape,
        space=space,
        width=width,
        depth=depth,
    )


def predict(
    model: Surrogate, strikes: Float[Array, "n 3"], params: Float[Array, "p"] | Float[Array, "n p"]
) -> Float[Array, "n 3"]:
    """Predicted post-impact velocities of `strikes` under `params` (one set for all, or one per strike)."""
    strikes = jnp.asarray(strikes)
    params = jnp.asarray(params)
    if params.ndim == 1:
        return jax.vmap(model, in_axes=(0, None))(strikes, params)
    return jax.vmap(model)(strikes, params)


def mirror(strikes: Float[Array, "n 3"], velocities: Float[Array, "n 3"]):
    """The mirror images of strikes and outcomes about the block's y axis (every SCENE.md shape is symmetric).

    θ → π − θ, θ1 → −θ1; (vx, vy, ωz) → (−vx, vy, −ωz).
    """
    s = jnp.asarray(strikes) * jnp.array([-1.0, -1.0, 1.0]) + jnp.array([math.pi, 0.0, 0.0])
    return s, jnp.asarray(velocities) * jnp.array([-1.0, 1.0, -1.0])


def describe(model: Surrogate) -> dict[str, Any]:
    """The metadata that must match for a checkpoint to be used with a scene and parameter space."""
    return {
        "scene": "strike",
        "shape": model.shape,
        "param_space": model.space.describe(),
        "width": model.width,
        "depth": model.depth,
        "format": "clashx.surrogate/2",
    }


def save_surrogate(run_dir: str | os.PathLike, model: Surrogate, extra: dict | None = None) -> None:
    """Write `model` to `run_dir` (weights and metadata, each file atomically)."""
    from ._generate import versions

    save_model(run_dir, model, describe(model) | {"versions": versions()} | (extra or {}), MODEL_FILE, META_FILE)


def load_surrogate(
    run_dir: str | os.PathLike, *, shape: str | None = None, space: ParamSpace | None = None
) -> Surrogate:
    """Load a surrogate saved by `save_surrogate` (or `clashx pretrain` / `finetune`).

    Args:
        run_dir: the run folder.
        shape, space: if given, the checkpoint must be for this shape and parameter space.

    Raises:
        FileNotFoundError: no surrogate in `run_dir`.
        ValueError: the checkpoint is for another scene, shape or parameter space, or a
            file of it is corrupt or does not match the other (names the file and the fix).
    """
    run_dir = os.fspath(run_dir)
    meta, meta_path = read_model_meta(
        run_dir, META_FILE, "is this a run folder written by `clashx pretrain`?", keys=_META_KEYS, retrain=_RETRAIN
    )
    if meta.get("format") != "clashx.surrogate/2" or meta.get("scene") != "strike":
        raise ValueError(
            f"{meta_path}: not a strike surrogate (format {meta.get('format')!r}, scene {meta.get('scene')!r})"
        )
    if shape is not None and meta["shape"] != shape:
        raise ValueError(
            f"{run_dir}: the surrogate is for the {meta['shape']!r} block, not {shape!r}; pretrain one for {shape!r}"
        )
    check_space(run_dir, meta, space)

    def skeleton() -> Surrogate:
        saved = ParamSpace.from_description(meta["param_space"])
        return make_surrogate(
            meta["shape"], key=jax.random.PRNGKey(0), space=saved, width=int(meta["width"]), depth=int(meta["depth"])
        )

    return load_model_leaves(run_dir, MODEL_FILE, META_FILE, skeleton, _RETRAIN)


def velocity_loss(
    pred: Float[Array, "n 3"], true: Float[Array, "n 3"], length: float, floor: float = 0.02
) -> Float[Array, ""]:
    """Mean squared relative error of the speed vectors (the α-accuracy metric's quantity, squared).

    ‖Δu‖² / (‖u‖² + floor²) per event, averaged, with u = (vx, vy, length·ωz);
    `length` is the shape's `characteristic_length` (m); `floor` (m/s) keeps
    events with a near-still block from dominating.
    """
    w = jnp.array([1.0, 1.0, length])
    du = (pred - true) * w
    u = true * w
    return jnp.mean(jnp.sum(du**2, -1) / (jnp.sum(u**2, -1) + floor**2))

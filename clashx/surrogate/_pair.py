"""The surrogate of a user's scene: `PairSurrogate`, the scene's features and targets around one MLP.

`model(pre, params)` is the pair's state a window after a touch, from its state
at the touch (`PairScene.pair_state`) and the parameters; the network predicts
the scene's `targets` (by default the change of the pair state), de-normalised
by the training set's statistics.  It is an `AbstractSurrogate`, so
`clashx.identify`, `clashx.finetune` and `train_on_targets` take it as they
take the strike's and the cube's.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Bool, Float, PRNGKeyArray, check_space, load_model_leaves, read_model_meta, save_model
from ..events import versions
from ..scenes import PairScene
from ._base import TargetSurrogate, init_network

FORMAT = "clashx.pair-surrogate/2"  # /2: input normalisers
# Of each feature's training range: an impact further outside is handed to the engine (`PairSurrogate.in_domain`).
# Not tuned: a network extrapolating a tenth of its range beyond its data is already guessing.
DOMAIN_MARGIN = 0.1
MODEL_FILE, META_FILE = "model.eqx", "model.json"
_RETRAIN = "retrain it: clashx pretrain --scene MODULE:CLASS --data EVENTS --out RUN"


class PairSurrogate(TargetSurrogate):
    """A parameter-conditioned impact handler of a `PairScene`.  Build with `make_pair_surrogate`.

    Attributes:
        scene: the scene (features, targets, the pair state).
        mlp: features ‖ parameters in [-1, 1] → normalised targets.
        out_mean, out_std: the targets' normalisers (training-set statistics).
        in_mean, in_std: the scene features' normalisers (training-set statistics; static, never trained).
        space: the parameters it is conditioned on (the scene's).
        width, depth: the MLP's hidden width and number of hidden layers.
        feature_low, feature_high: the range of each scene feature over its training impacts (static; None:
            unrecorded).  `in_domain` says whether an impact lies within them, `DOMAIN_MARGIN` widths aside.
        post_bounds: (lowest, highest separation in m; lowest, highest closing speed in m/s) of the pair at
            the window's end over its training impacts (static; None: unrecorded): what `plausible` holds a
            prediction to, `DOMAIN_MARGIN` widths aside.
    """

    scene: PairScene
    in_mean: tuple[float, ...] = eqx.field(static=True)
    in_std: tuple[float, ...] = eqx.field(static=True)
    feature_low: tuple[float, ...] | None = eqx.field(static=True, default=None)
    feature_high: tuple[float, ...] | None = eqx.field(static=True, default=None)
    post_bounds: tuple[float, float, float, float] | None = eqx.field(static=True, default=None)

    @property
    def checks_post(self) -> bool:
        return self.post_bounds is not None

    def plausible(self, sep: Float[Array, ""], closing: Float[Array, ""]) -> Bool[Array, ""]:
        """Whether a predicted window's end is no deeper inside, and closes no faster, than its training impacts
        ever ended (`post_bounds`, widened by `DOMAIN_MARGIN` of their ranges); True where unrecorded."""
        if self.post_bounds is None:
            return jnp.array(True)
        s_lo, s_hi, c_lo, c_hi = self.post_bounds
        return (sep >= s_lo - DOMAIN_MARGIN * (s_hi - s_lo)) & (closing <= c_hi + DOMAIN_MARGIN * (c_hi - c_lo))

    def in_domain(self, pre: Float[Array, " d"], params: Float[Array, " p"]) -> Bool[Array, ""]:
        """Whether every scene feature of `pre` lies within its training range, widened by `DOMAIN_MARGIN` of the
        range on each side (True where the ranges are unrecorded)."""
        if self.feature_low is None or self.feature_high is None:
            return jnp.array(True)
        low, high = jnp.asarray(self.feature_low), jnp.asarray(self.feature_high)
        pad = DOMAIN_MARGIN * (high - low)
        f = jnp.asarray(self.scene.features(pre), low.dtype)
        return jnp.all((f >= low - pad) & (f <= high + pad))

    def features(self, pre: Float[Array, " d"], params: Float[Array, " p"]) -> Float[Array, " f"]:
        """The scene's features of `pre`, standardised, and the parameters mapped to [-1, 1] over the prior."""
        unit = self.space.to_unit(jnp.asarray(params, jnp.float32))
        f = (jnp.asarray(self.scene.features(pre), jnp.float32) - jnp.asarray(self.in_mean)) / jnp.asarray(self.in_std)
        return jnp.concatenate([f, 2.0 * unit - 1.0])

    def post_from_targets(self, pre: Float[Array, " d"], y: Float[Array, " k"]) -> Float[Array, " d"]:
        """The scene's post-window pair state from its targets."""
        return self.scene.post_from_targets(pre, y)


def make_pair_surrogate(
    scene: PairScene,
    *,
    key: PRNGKeyArray,
    width: int = 128,
    depth: int = 3,
    out_mean=None,
    out_std=None,
    in_mean=None,
    in_std=None,
) -> PairSurrogate:
    """A freshly initialised surrogate of `scene` (weights from `key`; normalisers default 0 and 1)."""
    pre = jax.ShapeDtypeStruct((scene.joints.size,), jnp.float32)
    n_feat = int(jax.eval_shape(scene.features, pre).shape[0])
    n_out = int(jax.eval_shape(scene.targets, pre, pre).shape[0])
    net = init_network(n_feat + scene.space.size, n_out, width, depth, key=key, out_mean=out_mean, out_std=out_std)
    mean = (0.0,) * n_feat if in_mean is None else tuple(float(x) for x in np.asarray(in_mean).ravel())
    std = (1.0,) * n_feat if in_std is None else tuple(float(x) for x in np.asarray(in_std).ravel())
    if len(mean) != n_feat or len(std) != n_feat or min(std) <= 0:
        raise ValueError(f"input normalisers of {len(mean)}/{len(std)} values for {n_feat} features (std > 0)")
    return PairSurrogate(scene=scene, space=scene.space, in_mean=mean, in_std=std, **net)


def describe_pair_surrogate(model: PairSurrogate) -> dict[str, Any]:
    """What must match for a saved surrogate to be used with a scene, and the ranges of its training features."""
    ranges: dict[str, Any] = {}
    if model.feature_low is not None and model.feature_high is not None:
        ranges = {"input_ranges": {"low": list(model.feature_low), "high": list(model.feature_high)}}
    if model.post_bounds is not None:
        ranges["post_bounds"] = list(model.post_bounds)
    return (
        model.scene.describe()
        | {
            "width": model.width,
            "depth": model.depth,
            "in_mean": list(model.in_mean),
            "in_std": list(model.in_std),
            "format": FORMAT,
        }
        | ranges
    )


def save_pair_surrogate(run_dir: str | os.PathLike, model: PairSurrogate, extra: dict | None = None) -> None:
    """Write `model` to `run_dir` (weights and metadata, each file atomically)."""

    save_model(
        run_dir, model, describe_pair_surrogate(model) | {"versions": versions()} | (extra or {}), MODEL_FILE, META_FILE
    )


def load_pair_surrogate(run_dir: str | os.PathLike, scene: PairScene) -> PairSurrogate:
    """Load a surrogate of `scene` saved by `save_pair_surrogate` (e.g. by `clashx pretrain --scene`).

    Raises:
        FileNotFoundError: no surrogate in `run_dir`.
        ValueError: it was trained for another scene, window or parameter space, or a file is
            damaged (names the file and the fix).
    """
    run_dir = os.fspath(run_dir)
    if not os.path.exists(os.path.join(run_dir, META_FILE)) and os.path.exists(os.path.join(run_dir, "surrogate.json")):
        raise ValueError(
            f"{run_dir}: holds a strike surrogate (surrogate.json), not one of scene {scene.name!r}; "
            f"drop --scene to use it on strikes, or {_RETRAIN}"
        )
    meta, meta_path = read_model_meta(
        run_dir,
        META_FILE,
        _RETRAIN,
        keys=("format", "pair_scene", "window_s", "width", "depth", "in_mean", "in_std"),
        retrain=_RETRAIN,
    )
    if meta["format"] != FORMAT:
        raise ValueError(f"{meta_path}: format {meta['format']!r}, expected {FORMAT!r}; {_RETRAIN}")
    if meta["pair_scene"] != scene.name or abs(meta["window_s"] - scene.window) > 1e-12:
        raise ValueError(
            f"{meta_path}: a surrogate of scene {meta['pair_scene']!r} with a {meta['window_s']} s window; "
            f"--scene is {scene.name!r} with {scene.window} s; pass the scene it was trained for or {_RETRAIN}"
        )
    check_space(run_dir, meta, scene.space)
    want = scene.describe().get("mjcf_sha256")
    if meta.get("mjcf_sha256") not in (None, want):
        raise ValueError(
            f"{meta_path}: trained on another MJCF than --scene {scene.name!r} gives now (SHA-256 "
            f"{str(meta['mjcf_sha256'])[:12]}… there, {str(want)[:12]}… now: bodies, sizes or masses changed); "
            f"pass the scene it was trained for or {_RETRAIN}"
        )

    def skeleton() -> PairSurrogate:
        return make_pair_surrogate(
            scene,
            key=jax.random.PRNGKey(0),
            width=int(meta["width"]),
            depth=int(meta["depth"]),
            in_mean=meta["in_mean"],
            in_std=meta["in_std"],
        )

    model = load_model_leaves(run_dir, MODEL_FILE, META_FILE, skeleton, _RETRAIN)
    ranges = meta.get("input_ranges")
    if isinstance(ranges, dict) and len(ranges.get("low", ())) == len(model.in_mean) == len(ranges.get("high", ())):
        model = with_feature_ranges(model, ranges["low"], ranges["high"])
    bounds = meta.get("post_bounds")
    if isinstance(bounds, list) and len(bounds) == 4:
        model = dataclasses.replace(model, post_bounds=_four(bounds))
    return model


def with_feature_ranges(model: PairSurrogate, low, high, post_bounds=None) -> PairSurrogate:
    """`model` knowing the range of each scene feature over its training impacts (what `in_domain` tests) and,
    with `post_bounds`, how deep and how fast-closing their windows ended (what `plausible` tests)."""
    return dataclasses.replace(
        model,
        feature_low=tuple(float(v) for v in low),
        feature_high=tuple(float(v) for v in high),
        post_bounds=None if post_bounds is None else _four(post_bounds),
    )


def _four(values) -> tuple[float, float, float, float]:
    a, b, c, d = (float(v) for v in values)
    return a, b, c, d

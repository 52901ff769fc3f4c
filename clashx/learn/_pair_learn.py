"""Pretraining, identification, fine-tuning and scoring for a user's scene (a `PairScene`).

The same three steps as the strike's and the cube's, through the same functions:
`train_on_targets` (the loop, checkpointed and resumable), `clashx.identify` and
`clashx.finetune`; the events are the scene's "pair" events (`clashx.events`), the
loss the `PairSurrogate`'s normalised target error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import ParameterError, PRNGKeyArray, Result
from ..events import EventFileError, as_events, event_source
from ..scenes import SCHEMA, PairScene, symmetric_images
from ..surrogate import PairSurrogate, make_pair_surrogate, with_feature_ranges
from ._finetune import FinetuneConfig, FinetuneResult, finetune
from ._identify import IdentifyResult, identify
from ._pretrain import FLAGS, PretrainConfig
from ._train import PretrainResult, config_json, train_on_targets

SPEED_FLOOR = 0.05  # m/s (or rad/s): the relative error's denominator is at least this


def load_pair_events(
    path: str | Mapping[str, Any],
    scene: PairScene,
    *,
    simulated: bool = False,
    select: Callable[[int], np.ndarray] | None = None,
) -> dict:
    """The touched events of `scene` in an event file, checked against the scene.

    Args:
        path: a "pair" event file (`clashx generate --scene ...`, or your own recordings).
        scene: the scene they must be of (name and pair-state size).
        simulated: require known parameters (pretraining data).
        select: `select(n)` -> the file's rows to use, of its n (default: every touched row); a
            selected row without a touch is an error, never skipped.

    Returns:
        {"pre", "post", "params", "rows"}: the touched rows' states, parameters and row numbers.

    Raises:
        EventFileError: naming the file and what does not match.
    """
    ev = as_events(path, scene=SCHEMA)
    path = event_source(ev)
    if str(ev["shape"]) != scene.name:
        raise EventFileError(f"{path}: events of scene {str(ev['shape'])!r}; --scene is {scene.name!r}")
    d = scene.joints.size
    if ev["pre_state"].shape[1] != d:
        raise EventFileError(f"{path}: pair states of size {ev['pre_state'].shape[1]}; scene {scene.name!r} has {d}")
    usable = ev["touched"]  # a touched row has finite states (`validate_events`)
    if select is None:
        rows = np.flatnonzero(usable)
    else:
        rows = np.asarray(select(len(usable)))
        missed = rows[~usable[rows]]
        if len(missed):
            raise EventFileError(
                f"{path}: row {int(missed[0])} has no impact (touched is False); leave it out of --select "
                f"(rows with one: {_ranges(np.flatnonzero(usable))})"
            )
    if not len(rows):
        raise EventFileError(f"{path}: no event with a touch; nothing to learn from")
    params = ev["params"][rows]
    if simulated and (params.shape[1] != scene.space.size or not np.isfinite(params).all()):
        raise EventFileError(f"{path}: pretraining needs simulated events with the {scene.space.size} parameters known")
    if simulated:
        scene.space.check(
            ev["params"][usable], what=f"{path}: 'params' of the touched events (outside the scene's prior)"
        )
    return {"pre": ev["pre_state"][rows], "post": ev["post_state"][rows], "params": params, "rows": rows}


def _ranges(rows: np.ndarray) -> str:
    """Row numbers as short ranges: "0:4, 6, 9:12" (slices, end exclusive)."""
    parts, start = [], None
    for i, r in enumerate(rows):
        if start is None:
            start = r
        if i + 1 == len(rows) or rows[i + 1] != r + 1:
            parts.append(str(start) if r == start else f"{start}:{r + 1}")
            start = None
    return ", ".join(parts[:8]) + (", ..." if len(parts) > 8 else "")


@eqx.filter_jit
def _window_ends(scene: PairScene, post):
    m = scene.c_model()
    q0, v0 = jnp.asarray(m.qpos0, post.dtype), jnp.zeros(m.nv, post.dtype)

    def one(p):
        sep = scene.separation(scene.with_pair_state(q0, v0, p)[0])
        later = scene.separation(scene.with_pair_state(q0, v0, scene.coast(p, scene.dt))[0])
        return sep, (sep - later) / scene.dt

    return jax.vmap(one)(post)


def post_bounds(scene: PairScene, post: np.ndarray) -> tuple[float, float, float, float]:
    """(lowest, highest separation; lowest, highest closing speed) of the pair at the end of impact windows
    (n, d): what a surrogate trained on them holds its predictions to (`PairSurrogate.plausible`)."""
    sep, closing = (np.asarray(a, np.float64) for a in _window_ends(scene, jnp.asarray(post, jnp.float32)))
    return float(sep.min()), float(sep.max()), float(closing.min()), float(closing.max())


@eqx.filter_jit
def _targets(scene: PairScene, pre, post):
    return jax.vmap(scene.targets)(pre, post)


@eqx.filter_jit
def _features(scene: PairScene, pre):
    return jax.vmap(scene.features)(pre)


def pair_features(scene: PairScene, pre: np.ndarray) -> np.ndarray:
    """The scene's `features` of a batch of pre-impact pair states (n, f)."""
    return np.asarray(_features(scene, jnp.asarray(pre, jnp.float32)), np.float64)


def pair_targets(scene: PairScene, pre: np.ndarray, post: np.ndarray) -> np.ndarray:
    """The scene's `targets` of a batch of impacts (n, k)."""
    return np.asarray(_targets(scene, jnp.asarray(pre, jnp.float32), jnp.asarray(post, jnp.float32)))


def pretrain_pair(
    scene: PairScene,
    config: PretrainConfig,
    *,
    progress: Callable[[int, int, dict], None] | None = None,
    report: Callable[[str], None] | None = None,
) -> PretrainResult:
    """Train a surrogate of `scene` on `config.data` (a file or `Events`), checkpointed in `config.out` if set.

    A killed run resumes from its last epoch.

    Returns:
        A `PretrainResult`: the validation scores (`pair_scores`) and the loss history;
        `result.save(folder)` writes the model.
    """
    if isinstance(config.data, tuple):
        raise ParameterError("data", config.data, "a scene's pretraining takes one event file", "PretrainConfig")
    data = load_pair_events(config.data, scene, simulated=True)
    targets = pair_targets(scene, data["pre"], data["post"])
    pre_all, post_all = symmetric_images(scene, data["pre"], data["post"])  # the impacts, then their images
    k = len(pre_all) // len(data["pre"])
    feats = pair_features(scene, pre_all)
    targets_all = targets if k == 1 else pair_targets(scene, pre_all, post_all)

    def images(rows):
        every = (np.arange(k)[:, None] * len(data["pre"]) + rows[None, :]).ravel()
        return pre_all[every], np.tile(data["params"][rows], (k, 1)), targets_all[every]

    if k > 1 and report is not None:
        report(f"{scene.name}: each training impact is also used as its {k - 1} symmetric images")
    in_mean, in_std = feats.mean(0), np.maximum(feats.std(0), 1e-6 + 1e-3 * np.abs(feats.mean(0)))

    def make(key, out_mean, out_std):
        return make_pair_surrogate(
            scene,
            key=key,
            width=config.width,
            depth=config.depth,
            out_mean=out_mean,
            out_std=out_std,
            in_mean=in_mean,
            in_std=in_std,
        )

    model, history, val = train_on_targets(
        make, data["pre"], data["params"], targets, config, flags=FLAGS, progress=progress, report=report, images=images
    )
    model = with_feature_ranges(model, feats.min(0), feats.max(0), post_bounds(scene, post_all))
    scores = pair_scores(model, data["pre"][val], data["post"][val], data["params"][val])
    final = scores.to_dict() | {"val_loss": history[-1]["val_loss"]}
    ranges = {"low": feats.min(0).tolist(), "high": feats.max(0).tolist()}  # of the features the model sees
    metadata = {"pretrain": config_json(config), "validation": final, "input_ranges": ranges, "images": k}
    return PretrainResult(model, final, tuple(history), len(targets) - len(val), len(val), metadata)


@eqx.filter_jit
def _predict(model: PairSurrogate, pre, params):
    return jax.vmap(model)(pre, params)


def predict_pair(model: PairSurrogate, pre: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Post-window pair states (n, d) of impacts from their pre-impact states and parameters ((p,) or (n, p))."""
    x = jnp.asarray(pre, jnp.float32)
    p = jnp.broadcast_to(jnp.asarray(params, jnp.float32), (x.shape[0], model.space.size))
    return np.asarray(_predict(model, x, p), np.float64)


def velocity_errors(scene: PairScene, pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Each impact's relative error of the pair's post-window velocities: |Δv| / max(|v|, SPEED_FLOOR).

    Rotations count as speeds (`PairScene.speed_vector`: ω times the body's radius of gyration).
    """
    v_pred, v_true = scene.speed_vector(pred), scene.speed_vector(true)
    return np.linalg.norm(v_pred - v_true, axis=1) / np.maximum(np.linalg.norm(v_true, axis=1), SPEED_FLOOR)


@dataclasses.dataclass(frozen=True, repr=False)
class PairScores(Result):
    """How well a surrogate predicts a scene's impacts (`pair_scores`).

    Attributes:
        alpha: the α of `accuracy`.
        accuracy: the share of impacts whose post-window velocities are within relative error α
            (`velocity_errors`: |Δv| / |v|, rotations counted as speeds).
        median_rel_err: the median of those relative errors.
        median_rel_err_no_impact: the same for "no impact at all" (post = pre): the floor a model beats.
        n: impacts scored.
    """

    alpha: float
    accuracy: float
    median_rel_err: float
    median_rel_err_no_impact: float
    n: int

    def to_dict(self) -> dict[str, float]:
        """The JSON the CLI writes: {"alpha_0.1": accuracy, "median_rel_err", "median_rel_err_no_impact", "n"}."""
        return {
            f"alpha_{self.alpha}": self.accuracy,
            "median_rel_err": self.median_rel_err,
            "median_rel_err_no_impact": self.median_rel_err_no_impact,
            "n": self.n,
        }


def pair_scores(model: PairSurrogate, pre, post, params, alpha: float = 0.1) -> PairScores:
    """α-accuracy and median of `velocity_errors` of `model` on impacts; also of "no impact" (post = pre).

    Args:
        model: a scene's surrogate.
        pre, post: (n, d) the impacts' pair states at the touch and a window later.
        params: (p,) or (n, p) the parameters to predict with.
        alpha: the relative error within which a prediction counts as right.
    """
    err = velocity_errors(model.scene, predict_pair(model, pre, params), post)
    still = velocity_errors(model.scene, pre, post)
    return PairScores(
        float(alpha), float(np.mean(err <= alpha)), float(np.median(err)), float(np.median(still)), int(len(err))
    )


def identify_pair(model: PairSurrogate, pre, post, *, key: PRNGKeyArray, n_starts: int = 16) -> IdentifyResult:
    """The parameters under which the frozen surrogate best reproduces observed impacts (`clashx.identify`).

    Flat prior over the space; the σ of each parameter comes from the fit's own residual
    variance (the targets are in training-spread units, not noise units: no floor).
    """
    targets = pair_targets(model.scene, pre, post)
    x, y = jnp.asarray(pre, jnp.float32), jnp.asarray(targets)
    return identify(model, x, y, key=key, n_starts=n_starts, variance_floor=0.0)


def finetune_pair(
    model: PairSurrogate, pre, post, params, *, key: PRNGKeyArray, config: FinetuneConfig | None = None
) -> FinetuneResult:
    """Fine-tune on real impacts at fixed `params`, early-stopped by cross-validation (`clashx.finetune`)."""
    targets = pair_targets(model.scene, pre, post)
    return finetune(model, jnp.asarray(pre, jnp.float32), targets, params, key=key, config=config, what="impacts")

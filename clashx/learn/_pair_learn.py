"""Pretraining, identification, fine-tuning and scoring for a user's scene (a `PairScene`).

The same three steps as the strike's and the cube's, through the same functions:
`train_on_targets` (the loop, checkpointed and resumable), `clashx.identify` and
`clashx.finetune`; the events are the scene's "pair" events (`clashx.events`), the
loss the `PairSurrogate`'s normalised target error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import PRNGKeyArray
from ..events import EventFileError, load_events
from ..scenes import SCHEMA, PairScene
from ..surrogate import PairSurrogate, make_pair_surrogate, save_pair_surrogate
from ._finetune import FinetuneConfig, finetune
from ._identify import IdentifyResult, identify
from ._pretrain import FLAGS, PretrainConfig
from ._train import train_on_targets

SPEED_FLOOR = 0.05  # m/s (or rad/s): the relative error's denominator is at least this


def load_pair_events(
    path: str, scene: PairScene, *, simulated: bool = False, select: Callable[[int], np.ndarray] | None = None
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
    ev = load_events(path, scene=SCHEMA)
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
) -> tuple[PairSurrogate, dict]:
    """Train a surrogate of `scene` on `config.data` and save it in `config.out` (a killed run resumes).

    Returns:
        (model, result): the validation scores (`pair_scores`) and the loss history.
    """
    data = load_pair_events(str(config.data), scene, simulated=True)
    targets = pair_targets(scene, data["pre"], data["post"])
    feats = pair_features(scene, data["pre"])
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
        make, data["pre"], data["params"], targets, config, flags=FLAGS, progress=progress, report=report
    )
    scores = pair_scores(model, data["pre"][val], data["post"][val], data["params"][val])
    final = scores | {"val_loss": history[-1]["val_loss"]}
    ranges = {"low": feats.min(0).tolist(), "high": feats.max(0).tolist()}  # of the features the model sees
    extra = {"pretrain": dataclasses.asdict(config), "validation": final, "input_ranges": ranges}
    save_pair_surrogate(config.out, model, extra=extra)
    return model, {"validation": final, "n_train": len(targets) - len(val), "n_val": len(val), "history": history}


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


def pair_scores(model: PairSurrogate, pre, post, params, alpha: float = 0.1) -> dict:
    """α-accuracy and median of `velocity_errors` of `model` on impacts; also of "no impact" (post = pre)."""
    err = velocity_errors(model.scene, predict_pair(model, pre, params), post)
    still = velocity_errors(model.scene, pre, post)
    return {
        f"alpha_{alpha}": float(np.mean(err <= alpha)),
        "median_rel_err": float(np.median(err)),
        "median_rel_err_no_impact": float(np.median(still)),
        "n": int(len(err)),
    }


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
) -> tuple[PairSurrogate, dict]:
    """Fine-tune on real impacts at fixed `params`, early-stopped by cross-validation (`clashx.finetune`)."""
    targets = pair_targets(model.scene, pre, post)
    return finetune(model, jnp.asarray(pre, jnp.float32), targets, params, key=key, config=config, what="impacts")

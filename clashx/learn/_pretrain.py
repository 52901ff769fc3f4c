"""Pretraining the surrogate on generated collisions (CLASH step 1, "distil").

`pretrain(config)` trains a `StrikeSurrogate` with optax (AdamW, cosine decay) on
events from `clashx generate` (a file, or `Events` in memory), holding out a
validation split, and returns a `PretrainResult` (the model, its validation and
history).  With `config.out` it checkpoints there after every epoch:

    RUN/checkpoint.json, RUN/checkpoint-E.eqx  the training state after epoch E (resume)

and a killed run resumes from its last epoch when started again with the same
configuration.  `result.save(RUN)` writes the model beside them:

    RUN/surrogate.eqx, RUN/surrogate.json   the model and its metadata
    RUN/metrics.json                         validation error per epoch and at the end
  Every SCENE.md shape is mirror-symmetric, so each training
event is also used as its mirror image (`clashx.surrogate._strike_surrogate.mirror`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import ParameterError, ParamSpace
from ..events import as_events, event_source, relative_error
from ..scenes import geometry as geo
from ..surrogate import (
    StrikeSurrogate,
    make_strike_surrogate,
    mirror,
    release_loss,
    window_displacement,
)
from ._train import PretrainResult, config_json, data_sha256, split_indices, train_epochs, warn_small_validation


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """How to pretrain.

    Attributes:
        data: events from `clashx generate`: a file, or `Events` in memory (`clashx.load_events`,
            `clashx.generate`'s output read back); the cube's pretraining also takes a tuple of files.
        out: folder for resumable checkpoints (None: train in memory; save with `PretrainResult.save`).
        epochs: passes over the training events (mirror images included).
        batch_size: events per step.
        lr: peak learning rate (cosine decay to 1 % of it).
        weight_decay: AdamW weight decay.
        width, depth: the MLP's hidden width and number of hidden layers.
        val_fraction: share of events held out for validation.
        seed: PRNG seed (weights, split, shuffling).
    """

    data: str | tuple[str, ...] | Mapping[str, Any]
    out: str | None = None
    epochs: int = 30
    batch_size: int = 1024
    lr: float = 2e-3
    weight_decay: float = 1e-5
    width: int = 256
    depth: int = 4
    val_fraction: float = 0.05
    seed: int = 0

    def __post_init__(self):
        own = "PretrainConfig"
        for name in ("epochs", "batch_size", "width", "depth"):
            if getattr(self, name) < 1:
                raise ParameterError(name, getattr(self, name), "must be a positive whole number", own)
        if not 0 < self.lr < math.inf:
            raise ParameterError("lr", self.lr, "the learning rate must be a finite number > 0 (default 2e-3)", own)
        if not 0.0 < self.val_fraction < 0.5:
            raise ParameterError("val_fraction", self.val_fraction, "expected a share in (0, 0.5)", own)


def load_training_events(data: str | Mapping[str, Any]) -> tuple[str, ParamSpace, np.ndarray, np.ndarray, np.ndarray]:
    """Strikes, parameters and outcomes of the touched events of generated events, with their shape and space.

    Args:
        data: an event file, or its `Events` (or dict of arrays) in memory.

    Returns:
        (shape, space, strikes, params, outcomes); the outcomes are (n, 6): the velocity at
        release and the window's displacement (`window_displacement`; NaN without release poses).
    """
    ev = as_events(data, scene="strike")
    path = event_source(ev)
    meta = ev["meta"]
    if "param_space" not in meta or not np.isfinite(ev["params"]).all():
        raise ValueError(
            f"{path}: events without simulation parameters (real data?); pretrain on `clashx generate` output"
        )
    keep = ev["touched"]
    if keep.sum() < 10:
        raise ValueError(f"{path}: only {int(keep.sum())} touched events; generate more")
    space = ParamSpace.from_description(meta["param_space"])
    space.check(ev["params"], what=f"{path}: 'params' (the simulated values must lie in the file's prior)")
    disp = np.asarray(window_displacement(ev["start_pose"][keep], ev["release_pose"][keep]), np.float64)
    outcome = np.concatenate([ev["post_velocity"][keep], disp], 1)
    return str(ev["shape"]), space, ev["strike"][keep], ev["params"][keep], outcome


def validation_report(model: StrikeSurrogate, strikes, params, outcomes) -> dict:
    """α-accuracy (0.05, 0.1, 0.2) and median relative error of `model`'s velocities against simulated events.

    `outcomes` (n, 3) or (n, 6); with six columns, the median relative error of
    the window's displacement (dx, dy, r·dyaw) is reported too.
    """
    pred = np.asarray(_release_batched(model, jnp.asarray(strikes), jnp.asarray(params)))
    length = geo.characteristic_length(model.shape)
    err = np.asarray(relative_error(pred[:, :3], outcomes[:, :3], length))
    out = {
        "alpha_0.05": float(np.mean(err <= 0.05)),
        "alpha_0.1": float(np.mean(err <= 0.1)),
        "alpha_0.2": float(np.mean(err <= 0.2)),
        "median_rel_err": float(np.median(err)),
        "n": int(len(err)),
    }
    if outcomes.shape[1] == 6 and np.isfinite(outcomes[:, 3:]).all():
        d_err = np.asarray(relative_error(pred[:, 3:], outcomes[:, 3:], length))
        out["displacement_median_rel_err"] = float(np.median(d_err))
    return out


@eqx.filter_jit
def _release_batched(model, strikes, params):
    return jax.vmap(model.release)(strikes, params)


# The flag that sets each PretrainConfig field, for naming what differs from an interrupted run.
FLAGS = {k: "--" + k.replace("_", "-") for k in PretrainConfig.__dataclass_fields__} | {
    "data_sha256": "the contents of --data (SHA-256)",
    "train_sha256": "the training rows (SHA-256)",
}


def pretrain(
    config: PretrainConfig,
    *,
    progress: Callable[[int, int, dict], None] | None = None,
    report: Callable[[str], None] | None = None,
) -> PretrainResult:
    """Train a strike surrogate on `config.data`; checkpoint in `config.out` (if set) and resume a killed run there.

    Args:
        config: what to train.
        progress: called as `progress(epoch_done, epochs, metrics)` after each epoch.
        report: called with a line of news for the user (where a resumed run picks up).

    Returns:
        A `PretrainResult`: the model, its validation (α-accuracies and median relative error against
        the held-out simulated events) and history.  Save it with `result.save(folder)`.

    Example:
        >>> events = clashx.load_events("sim.npz")
        >>> result = clashx.pretrain(clashx.PretrainConfig(data=events, epochs=20))
        >>> result.validation["alpha_0.1"], result.model
    """
    if isinstance(config.data, tuple):
        raise ParameterError("data", config.data, "the strike's pretraining takes one event file", "PretrainConfig")
    shape, space, strikes, params, vel = load_training_events(config.data)
    key = jax.random.PRNGKey(config.seed)
    k_split, k_init, k_shuffle = jax.random.split(key, 3)
    train, val = split_indices(len(strikes), config.val_fraction, k_split)
    warn_small_validation(len(val), report)
    s_m, v_m, p_m = mirror(strikes[train], vel[train], params[train], space)
    s_tr = jnp.concatenate([jnp.asarray(strikes[train]), s_m])
    v_tr = jnp.concatenate([jnp.asarray(vel[train]), v_m])
    p_tr = jnp.concatenate([jnp.asarray(params[train]), p_m])
    ratio = jnp.nan_to_num(v_tr / s_tr[:, 2:3])
    model = make_strike_surrogate(
        shape, key=k_init, space=space, width=config.width, depth=config.depth,
        out_mean=jnp.mean(ratio, 0), out_std=jnp.std(ratio, 0) + 1e-6,
    )  # fmt: skip
    length = geo.characteristic_length(shape)

    def batch_loss(m, batch):
        s, p, v = batch
        return release_loss(jax.vmap(m.release)(s, p), v, length)

    def evaluate(m):
        return {"val_" + k: v for k, v in validation_report(m, strikes[val], params[val], vel[val]).items()}

    model, history = train_epochs(
        model, batch_loss, (s_tr, p_tr, v_tr), key=k_shuffle, epochs=config.epochs, batch_size=config.batch_size,
        lr=config.lr, weight_decay=config.weight_decay, evaluate=evaluate, run=config.out,
        run_config=config_json(config) | {"data_sha256": data_sha256(config.data)}, flags=FLAGS, progress=progress, report=report,
    )  # fmt: skip
    final = validation_report(model, strikes[val], params[val], vel[val])
    ranges = {k: [float(strikes[:, j].min()), float(strikes[:, j].max())] for j, k in enumerate(geo.STRIKE_NAMES)}
    metadata = {"pretrain": config_json(config), "validation": final, "input_ranges": ranges}
    return PretrainResult(model, final, tuple(history), int(len(train)), int(len(val)), metadata)

"""The one pretraining loop of clashx: minibatch AdamW with cosine decay, checkpointed every epoch, resumable.

Every surrogate is pretrained through `train_epochs`: the strike's (`clashx.pretrain`)
the cube's (`pretrain_cube`) and a user scene's (`pretrain_pair`), the last two through
`train_on_targets`.  They differ only in their data, their batch loss,
which weights train and what they report after an epoch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..core import (
    PRNGKeyArray,
    Result,
    constrain_batch,
    describe_changes,
    load_model_leaves,
    nonfinite_leaves,
    to_json,
    write_json,
)
from ..surrogate import AbstractSurrogate, save_surrogate


@dataclasses.dataclass(frozen=True, repr=False)
class PretrainResult(Result):
    """What pretraining returns: the model, how it did on held-out simulated impacts, and its history.

    Nothing is saved until you say so: `result.save(folder)` writes the model (and `metrics.json`)
    there, as `clashx pretrain --out FOLDER` does.

    Attributes:
        model: the trained surrogate.
        validation: scores on the held-out simulated events, by name (e.g. "alpha_0.1": the share
            within α = 0.1; "median_rel_err"; the cube's and a pair scene's have their own).
        history: one record per epoch: "epoch", "train_loss", the validation scores, "elapsed_s".
        n_train: training events (before mirror images).
        n_val: held-out events.
        metadata: what `save` writes beside the weights (the config, the validation, the input ranges).
    """

    model: AbstractSurrogate
    validation: dict[str, float]
    history: tuple[dict[str, float], ...]
    n_train: int
    n_val: int
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    def save(self, folder: str | os.PathLike) -> None:
        """Write the model (`clashx.save_surrogate`, with `metadata`) and `metrics.json` into `folder`."""
        save_surrogate(folder, self.model, extra=self.metadata)
        write_json(os.path.join(os.fspath(folder), "metrics.json"), self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `metrics.json`: validation, counts and history."""
        return {
            "validation": to_json(self.validation),
            "n_train_events": self.n_train,
            "n_val_events": self.n_val,
            "history": to_json(list(self.history)),
        }


def config_json(config: Any) -> dict[str, Any]:
    """A training config as JSON, its data given as files (their names) or in memory ("<in memory>")."""
    out = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    data = out.get("data")
    if data is not None and not (
        isinstance(data, str) or (isinstance(data, tuple) and all(isinstance(d, str) for d in data))
    ):
        out["data"] = "<in memory>"
    return json.loads(json.dumps(out))


def data_sha256(data: Any) -> str:
    """What a resumed run must read again: the contents of its files, or "" for data in memory (whose training
    rows are fingerprinted anyway, `data_fingerprint`)."""
    if isinstance(data, str) or (isinstance(data, tuple) and all(isinstance(d, str) for d in data)):
        return files_sha256(data)
    return ""


def split_indices(n: int, fraction: float, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) row indices: a random `fraction` of n rows held out (at least one), each sorted."""
    perm = np.asarray(jax.random.permutation(key, n))
    n_val = max(1, int(round(n * fraction)))
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def _resume(run: str, ckpt_meta: str, cfg_json: dict, flags: dict[str, str], like) -> tuple:
    """(model, opt_state, epochs done, history) of the interrupted run in `run`, checked against `cfg_json`."""
    fix = f"delete {ckpt_meta} (and {run}/checkpoint-*.eqx) to start over, or choose another --out"
    try:
        with open(ckpt_meta) as f:
            saved = json.load(f)
        old, weights, epoch, history = saved["config"], saved["weights"], saved["epoch"], saved["history"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        raise ValueError(f"{ckpt_meta}: damaged; {fix}") from None
    if old != cfg_json:
        raise ValueError(
            f"{run} holds a training run with other settings: {describe_changes(old, cfg_json, flags)}. "
            "Rerun with that run's flags to resume it, or choose another --out"
        )
    model, opt_state = load_model_leaves(run, weights, "checkpoint.json", lambda: like, fix)
    return model, opt_state, epoch, history


def _checkpoint(run: str, ckpt_meta: str, cfg_json: dict, epoch: int, model, opt_state, history: list) -> None:
    # weights under a new name first, then the JSON that points to them: a kill at any
    # moment leaves a JSON naming a complete weights file of the same epoch
    weights = f"checkpoint-{epoch:04d}.eqx"
    eqx.tree_serialise_leaves(os.path.join(run, weights + ".tmp"), (model, opt_state))
    os.replace(os.path.join(run, weights + ".tmp"), os.path.join(run, weights))
    write_json(ckpt_meta, {"config": cfg_json, "epoch": epoch, "weights": weights, "history": history})
    for old in os.listdir(run):
        if old.startswith("checkpoint-") and old.endswith(".eqx") and old != weights:
            os.remove(os.path.join(run, old))


def train_epochs(
    model,
    batch_loss: Callable[[Any, tuple], Any],
    data: tuple[jax.Array, ...],
    *,
    key: PRNGKeyArray,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    trainable=None,
    evaluate: Callable[[Any], dict] | None = None,
    run: str | None = None,
    run_config: dict | None = None,
    flags: dict[str, str] | None = None,
    progress: Callable[[int, int, dict], None] | None = None,
    report: Callable[[str], None] | None = None,
) -> tuple[Any, list[dict]]:
    """Train `model` on `data` by minibatch AdamW (cosine decay to 1 % of `lr`); checkpoint and resume in `run`.

    Each epoch is one compiled call: its shuffled rows cut into batches, AdamW scanned over them, each batch
    constrained to spread over the local devices (`clashx.core.constrain_batch`).  The whole training set is
    held on the default device, with a shuffled copy per epoch.

    Args:
        model: the initial model (an `eqx.Module`).
        batch_loss: `batch_loss(model, batch) -> scalar`, batch a tuple of arrays like `data`.
        data: training arrays with a common leading axis (rows are shuffled every epoch).
        key: PRNG key of the shuffles (epoch e uses `fold_in(key, e)`).
        epochs, batch_size, lr, weight_decay: the optimiser's schedule.
        trainable: a filter spec of the weights that train (default: every inexact array).
        evaluate: `evaluate(model) -> dict` after every epoch (validation metrics), merged into the history.
        run: folder for checkpoints (`checkpoint.json`, `checkpoint-E.eqx`); None: no checkpoints.
        run_config: the JSON-able configuration a resumed run must match.
        flags: the CLI flag of each `run_config` key, for naming what differs.
        progress: `progress(epoch_done, epochs, metrics)` after each epoch.
        report: a line of news for the user (where a resumed run picks up).

    Returns:
        (model, history): the trained model and one metrics dict per epoch.
    """
    spec = jax.tree.map(eqx.is_inexact_array, model) if trainable is None else trainable
    n = int(data[0].shape[0])
    steps_per_epoch = max(1, n // batch_size)
    if batch_size > n and report is not None:
        report(f"--batch-size {batch_size} is more than the {n} training rows: each epoch is one batch of {n}")
    schedule = optax.cosine_decay_schedule(lr, steps_per_epoch * epochs, alpha=0.01)
    opt = optax.adamw(schedule, weight_decay=weight_decay)
    opt_state = opt.init(eqx.filter(model, spec))
    start_epoch, history = 0, []
    run_config = json.loads(json.dumps(run_config or {}))  # as the checkpoint holds it (tuples become lists)
    run_config["train_sha256"] = data_fingerprint(data)  # a resume on other training rows is refused
    ckpt_meta = ""
    if run is not None:
        os.makedirs(run, exist_ok=True)
        ckpt_meta = os.path.join(run, "checkpoint.json")
        if os.path.exists(ckpt_meta):
            model, opt_state, start_epoch, history = _resume(
                run, ckpt_meta, run_config, flags or {}, (model, opt_state)
            )
            if report is not None and start_epoch < epochs:
                report(f"{run}: resuming at epoch {start_epoch + 1} of {epochs} ({start_epoch} done)")
            elif report is not None:
                report(f"{run}: all {epochs} epochs were done; writing the model")

    @eqx.filter_jit
    def run_epoch(model, opt_state, data, perm):
        # A Python loop over the steps took 3.2 s an epoch of 100,000 strikes on a TPU v5e, 2.5 s on its host's CPU.
        weights, static = eqx.partition(model, spec)
        rows = perm[: steps_per_epoch * batch_size]
        batches = tuple(a[rows].reshape(steps_per_epoch, -1, *a.shape[1:]) for a in data)

        def step(carry, batch):
            w, o = carry
            batch = constrain_batch(batch)  # data-parallel over local devices
            loss, grads = jax.value_and_grad(lambda w: batch_loss(eqx.combine(w, static), batch))(w)
            updates, o = opt.update(grads, o, w)
            return (optax.apply_updates(w, updates), o), loss

        (weights, opt_state), losses = jax.lax.scan(step, (weights, opt_state), batches)
        return eqx.combine(weights, static), opt_state, losses

    data = tuple(jnp.asarray(a) for a in data)
    t0 = time.perf_counter()
    for epoch in range(start_epoch, epochs):
        perm = jax.random.permutation(jax.random.fold_in(key, epoch), n)
        model, opt_state, losses = run_epoch(model, opt_state, data, perm)
        metrics = {"epoch": epoch + 1, "train_loss": float(jnp.mean(losses))}
        if not np.isfinite(metrics["train_loss"]) or nonfinite_leaves(model):
            kept = f"; {run} keeps epoch {epoch} to resume from" if run is not None and epoch else ""
            raise ValueError(
                f"training diverged in epoch {epoch + 1} (mean loss {metrics['train_loss']}, or non-finite weights): "
                f"lower --lr (now {lr:g}) and start again{kept}"
            )
        metrics |= evaluate(model) if evaluate is not None else {}
        metrics["elapsed_s"] = time.perf_counter() - t0
        history.append(metrics)
        if run is not None:
            _checkpoint(run, ckpt_meta, run_config, epoch + 1, model, opt_state, history)
        if progress is not None:
            progress(epoch + 1, epochs, metrics)
    return model, history


MIN_VALIDATION = 20  # held-out events below which the validation scores are reported with a warning


def warn_small_validation(n_val: int, report: Callable[[str], None] | None) -> None:
    """Say so when the validation split is too small for its scores to mean much."""
    if n_val < MIN_VALIDATION and report is not None:
        report(
            f"validation on {n_val} held-out events only: its scores say little "
            f"(generate more events or raise --val-fraction for {MIN_VALIDATION} or more)"
        )


def data_fingerprint(data: tuple) -> str:
    """SHA-256 of the training arrays' shapes and bytes: a resumed run must train on the same data."""
    h = hashlib.sha256()
    for a in data:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def files_sha256(paths: str | tuple[str, ...]) -> str:
    """SHA-256 of the contents of one file or several in order: a resumed run must read the same `--data`."""
    h = hashlib.sha256()
    for path in (paths,) if isinstance(paths, str) else paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def normalised_loss(model, inputs, params, targets, reference) -> jax.Array:
    """Mean `example_loss` of a batch of events, in units of `reference.out_std` (fixed during training).

    The scale comes from `reference`, not from the model being trained: were it
    the model's own `out_std`, growing it would shrink the loss without
    improving a single prediction.
    """
    return jnp.mean(jax.vmap(lambda x, p, y: model.example_loss(x, y, p, reference))(inputs, params, targets))


def train_on_targets(
    make_model: Callable[[PRNGKeyArray, np.ndarray, np.ndarray], Any],
    inputs: np.ndarray,
    params: np.ndarray,
    targets: np.ndarray,
    config: Any,
    *,
    flags: dict[str, str],
    progress: Callable[[int, int, dict], None] | None = None,
    report: Callable[[str], None] | None = None,
    images: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
) -> tuple[Any, list[dict], np.ndarray]:
    """Pretrain a surrogate whose network predicts normalised targets (the cube's, a `PairScene`'s).

    The rows are split into training and validation (`config.val_fraction`); the
    model is built with the training rows' target mean and spread as its output
    normalisers, which stay fixed while the MLP trains on `normalised_loss` in their units.

    Args:
        make_model: `make_model(key, out_mean, out_std)` -> an `AbstractSurrogate`.
        inputs, params, targets: the events (n, ...), as the model's `example_loss` takes them.
        config: a `PretrainConfig` (seed, split, schedule, run folder `out`).
        flags: the CLI flag of each config field, for naming what a resume changed.
        progress, report: as `train_epochs`.
        images: `images(rows)` -> (inputs, params, targets) of those rows and their symmetric images
            (`clashx.scenes.symmetric_images`): what the training rows become (validation stays as given).

    Returns:
        (model, history, validation rows).
    """
    k_split, k_init, k_shuffle = jax.random.split(jax.random.PRNGKey(config.seed), 3)
    train, val = split_indices(len(inputs), config.val_fraction, k_split)
    warn_small_validation(len(val), report)
    rows = images(train) if images is not None else (inputs[train], params[train], targets[train])
    model = make_model(k_init, rows[2].mean(0), rows[2].std(0) + 1e-6)
    x_tr, p_tr, y_tr = (jnp.asarray(a, jnp.float32) for a in rows)
    x_va, p_va, y_va = (jnp.asarray(a[val], jnp.float32) for a in (inputs, params, targets))
    initial = model
    spec = eqx.tree_at(
        lambda m: (m.out_mean, m.out_std), jax.tree.map(eqx.is_inexact_array, model), replace=(False, False)
    )
    val_loss = eqx.filter_jit(normalised_loss)
    model, history = train_epochs(
        model,
        lambda m, b: normalised_loss(m, b[0], b[1], b[2], initial),
        (x_tr, p_tr, y_tr),
        key=k_shuffle,
        epochs=config.epochs,
        batch_size=config.batch_size,
        lr=config.lr,
        weight_decay=config.weight_decay,
        trainable=spec,
        evaluate=lambda m: {"val_loss": float(val_loss(m, x_va, p_va, y_va, initial))},
        run=config.out,
        run_config=config_json(config) | {"data_sha256": data_sha256(config.data)},
        flags=flags,
        progress=progress,
        report=report,
    )
    return model, history, val

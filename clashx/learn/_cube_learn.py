"""Pretraining, identification and fine-tuning of the cube surrogate (CLASH steps 1-3 for the cube toss).

The same three steps as the strike's `_pretrain`, `_identify` and `_finetune`,
on the cube's impact (`clashx.surrogate._cube`): the loss everywhere is the mean squared
error of the network's normalised output against the normalised aligned-frame
targets (`impact_targets`), i.e. every target component in units of its spread
over the generated impacts.  Fine-tuning reuses `_finetune`'s configuration
and its choice of trainable weights (`scope`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, ParamSpace, PRNGKeyArray
from ..events import as_events, event_source
from ..scenes import CUBE_INERTIA, CUBE_MASS, GRAVITY
from ..surrogate import CubeSurrogate, impact_targets, make_cube_surrogate
from ._finetune import FinetuneConfig, FinetuneResult, finetune
from ._identify import identify
from ._pretrain import FLAGS, PretrainConfig
from ._train import PretrainResult, config_json, train_on_targets
from ._train import normalised_loss as normalised_loss


def cube_pretrain_config(data: str | tuple[str, ...], out: str, **settings) -> PretrainConfig:
    """`PretrainConfig` with the cube's defaults: 40 epochs, batches of 512, a 160-wide MLP of 3 hidden layers.

    Args:
        data: event file(s) of `clashx generate --scene cube-toss` (a path or a tuple of paths, concatenated).
        out: run folder (the surrogate and its checkpoints are written there).
        settings: any other `PretrainConfig` field, overriding the cube's default.
    """
    return PretrainConfig(
        **({"epochs": 40, "batch_size": 512, "width": 160, "depth": 3} | settings), data=data, out=out
    )


_batch_targets = jax.jit(jax.vmap(impact_targets))


ENERGY_GAIN_TOL = 0.01  # J: a generated impact may not gain more energy than this (the cube's is ~0.4 J)


def toss_energy(states: np.ndarray) -> np.ndarray:
    """Mechanical energy (J) of cube states (n, 13): kinetic, rotational and potential (table at z = 0)."""

    s = np.asarray(states, np.float64)
    kin = 0.5 * CUBE_MASS * np.sum(s[:, 10:13] ** 2, 1) + 0.5 * CUBE_INERTIA * np.sum(s[:, 7:10] ** 2, 1)
    return kin + CUBE_MASS * GRAVITY * s[:, 6]


def load_cube_training(
    path: str | tuple[str, ...] | Mapping[str, Any],
) -> tuple[ParamSpace, np.ndarray, np.ndarray, np.ndarray]:
    """(space, pre (n, 13), post (n, 13), params (n, p)) of a generated cube-toss event file.

    Events whose impact gains energy (more than `ENERGY_GAIN_TOL`) are left
    out: at the prior's stiffest, least damped corner (time constant near 2 ms,
    damping ratio near 0.1) MuJoCo's contact can go unstable at the 1 ms step
    and throw the cube up at several m/s (0.4 % of the generated impacts).
    """
    if isinstance(path, tuple):
        parts = [load_cube_training(p) for p in path]
        spaces = {json.dumps(sp.describe()) for sp, *_ in parts}
        if len(spaces) > 1:
            raise ValueError(f"{list(path)}: the files were generated over different parameter spaces; pretrain on one")
        pre, post, params = (np.concatenate([part[i] for part in parts]) for i in (1, 2, 3))
        return parts[0][0], pre, post, params
    ev = as_events(path, scene="cube-toss")
    path = event_source(ev)
    meta = ev["meta"]
    if "param_space" not in meta or not np.isfinite(ev["params"]).all():
        raise ValueError(f"{path}: events without simulation parameters (real data?); pretrain on generated tosses")
    if len(ev["params"]) < 10:
        raise ValueError(f"{path}: only {len(ev['params'])} events; generate more")
    ok = toss_energy(ev["post_state"]) <= toss_energy(ev["pre_state"]) + ENERGY_GAIN_TOL
    space = ParamSpace.from_description(meta["param_space"])
    return space, ev["pre_state"][ok], ev["post_state"][ok], ev["params"][ok]


@eqx.filter_jit
def _predict_targets(model: CubeSurrogate, pre, params):
    return jax.vmap(model.targets)(pre, params)


def target_errors(model: CubeSurrogate, pre, params, targets) -> dict:
    """Median absolute errors of the predicted targets: position (mm), velocity (m/s), ω (rad/s), rotation (deg)."""
    pred = np.asarray(_predict_targets(model, jnp.asarray(pre, jnp.float32), jnp.asarray(params, jnp.float32)))
    d = pred - np.asarray(targets)
    return {
        "pos_mm": float(np.median(np.linalg.norm(d[:, 0:3], axis=1)) * 1e3),
        "vel_m_s": float(np.median(np.linalg.norm(d[:, 3:6], axis=1))),
        "omega_rad_s": float(np.median(np.linalg.norm(d[:, 6:9], axis=1))),
        "rot_deg": float(np.degrees(np.median(np.linalg.norm(d[:, 9:12], axis=1)))),
    }


def pretrain_cube(
    config: PretrainConfig,
    *,
    progress: Callable[[int, int, dict], None] | None = None,
    report: Callable[[str], None] | None = None,
) -> PretrainResult:
    """Train a cube surrogate on `config.data`, checkpointed in `config.out` (if set); a killed run resumes there.

    The loop is `train_epochs`, the strike's too; the target normalisers stay at the
    training set's statistics and the loss is `normalised_loss` in their units.

    Returns:
        A `PretrainResult`: validation errors (`target_errors`, normalised loss) and the loss history;
        `result.save(folder)` writes the model.
    """
    space, pre, post, params = load_cube_training(config.data)
    targets = np.asarray(_batch_targets(jnp.asarray(pre), jnp.asarray(post)))

    def make(key, out_mean, out_std):
        return make_cube_surrogate(
            key=key, space=space, width=config.width, depth=config.depth, out_mean=out_mean, out_std=out_std
        )

    model, history, val = train_on_targets(
        make, pre, params, targets, config, flags=FLAGS, progress=progress, report=report
    )
    final = target_errors(model, pre[val], params[val], targets[val]) | {"val_loss": history[-1]["val_loss"]}
    metadata = {"pretrain": config_json(config), "validation": final}
    return PretrainResult(model, final, tuple(history), int(len(pre) - len(val)), int(len(val)), metadata)


# --- identification: `clashx.identify` on the targets ----------------------------------------------


def identify_cube(
    model: CubeSurrogate,
    pre: Float[Array, "n 13"],
    post: Float[Array, "n 13"],
    *,
    key: PRNGKeyArray,
    n_starts: int = 16,
    iterations: int = 40,
) -> tuple[np.ndarray, float]:
    """Contact parameters that make the frozen surrogate reproduce observed impacts.

    `clashx.identify` on the aligned-frame targets of the impacts (`impact_targets`):
    multistart Levenberg-Marquardt in logits of the prior's unit cube, flat prior,
    the residuals `CubeSurrogate.example_residuals`.

    Returns:
        (params (p,) in physical units, their loss: the mean squared normalised target error).
    """
    pre = jnp.asarray(pre, jnp.float32)
    targets = _batch_targets(pre, jnp.asarray(post, jnp.float32))
    res = identify(model, pre, targets, key=key, n_starts=n_starts, iterations=iterations)
    return np.asarray(res.params, np.float64), float(res.loss)


# --- fine-tuning: `clashx.finetune` on the targets ------------------------------------------------


def finetune_cube(
    model: CubeSurrogate,
    pre: Float[Array, "n 13"],
    post: Float[Array, "n 13"],
    params: Float[Array, "p"],
    *,
    key: PRNGKeyArray,
    config: FinetuneConfig | None = None,
) -> FinetuneResult:
    """Fine-tune the cube surrogate on real impacts at fixed `params`, early-stopped by k-fold CV.

    `clashx.finetune` on the aligned-frame targets of the impacts (`impact_targets`):
    the loss is `CubeSurrogate.example_loss` in the pretrained model's units.

    Returns:
        (model, report): the chosen step count, the CV losses and why.
    """
    pre = jnp.asarray(pre, jnp.float32)
    targets = _batch_targets(pre, jnp.asarray(post, jnp.float32))
    return finetune(model, pre, targets, params, key=key, config=config, what="impacts")


# --- MJX's parameters between impacts, through the every-impact hybrid -------------------------------

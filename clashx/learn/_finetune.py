"""Fine-tuning the surrogate on a few real collisions, early-stopped by cross-validation (CLASH step 3).

With the identified parameters fixed, the network's weights take small Adam
steps on the real events, with an L2 pull toward the pretrained weights.  How
many steps to take is decided inside the fitting events only: k-fold
cross-validation trains one copy per fold (all folds at once under
`jax.vmap`) and records the held-out loss after every step; the step count
with the lowest mean held-out loss is then used on all events.  If no step
beats the pretrained model, nothing changes, and the report says so.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..core import Array, Float, ParameterError, PRNGKeyArray, Result, to_json
from ..surrogate import AbstractSurrogate


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """How to fine-tune.

    Attributes:
        lr: Adam learning rate (small steps).
        max_steps: most steps considered.
        folds: cross-validation folds within the fitting events (at most one per event).
        pull: weight of the L2 pull toward the pretrained weights (0: none).
        min_gain: relative drop of the mean held-out loss a step count must bring to be taken.
        significance: and the drop must exceed this many standard errors of the per-fold drops:
            ten noisy events make the mean held-out curve wander, and a step count chosen on the
            wander alone made predictions worse (lab-B triangle: 19 steps, α = 0.1 from 0.53 to 0.27).
        scope: which weights move: "head" (the MLP's last layer and the output
            normalisers: a few hundred numbers, what ten noisy events can pin
            down), "affine" (the output normalisers only: a per-component gain
            and offset) or "all".
    """

    lr: float = 3e-4
    max_steps: int = 200
    folds: int = 5
    pull: float = 1e-3
    min_gain: float = 0.02
    significance: float = 2.0
    scope: str = "head"

    def __post_init__(self):
        own = "FinetuneConfig"
        if self.folds < 2:
            raise ParameterError("folds", self.folds, "cross-validation needs at least 2 folds", own)
        if self.max_steps < 0:
            raise ParameterError("max_steps", self.max_steps, "must be >= 0", own)
        if not 0 < self.lr < math.inf:
            raise ParameterError("lr", self.lr, "the learning rate must be a finite number > 0", own)
        if not 0 <= self.pull < math.inf:
            raise ParameterError(
                "pull", self.pull, "the weight of the pull toward the pretrained model is finite and >= 0", own
            )
        if self.scope not in ("head", "affine", "all"):
            raise ParameterError("scope", self.scope, "expected 'head', 'affine' or 'all'", own)


def _weighted_loss(model: AbstractSurrogate, base: AbstractSurrogate, inputs, outcomes, params, weights, pull: float):
    """Weighted mean of the events' `example_loss` (in `base`'s units) plus an L2 pull toward `base`'s weights."""
    per = jax.vmap(lambda x, y: model.example_loss(x, y, params, base))(inputs, outcomes)
    fit = jnp.sum(weights * per) / jnp.maximum(jnp.sum(weights), 1.0)
    diff = jax.tree.map(
        lambda a, b: jnp.sum((a - b) ** 2),
        eqx.filter(model, eqx.is_inexact_array),
        eqx.filter(base, eqx.is_inexact_array),
    )
    return fit + pull * sum(jax.tree.leaves(diff))


def _train_curve(base, inputs, outcomes, params, train_w, eval_w, config: FinetuneConfig, n_steps: int):
    """Train from `base` on `train_w`-weighted events; held-out loss on `eval_w` before each step and after the last."""
    opt = optax.adam(config.lr)
    params_base, static = eqx.partition(base, base.trainable(config.scope))

    def eval_loss(p):
        return _weighted_loss(eqx.combine(p, static), base, inputs, outcomes, params, eval_w, 0.0)

    def train_loss(p):
        return _weighted_loss(eqx.combine(p, static), base, inputs, outcomes, params, train_w, config.pull)

    def body(carry, _):
        p, state = carry
        held = eval_loss(p)
        upd, state = opt.update(jax.grad(train_loss)(p), state, p)
        return (optax.apply_updates(p, upd), state), held

    (p, _), curve = jax.lax.scan(body, (params_base, opt.init(params_base)), None, length=n_steps)
    return eqx.combine(p, static), jnp.append(curve, eval_loss(p))


@eqx.filter_jit
def _cv_curves(base, inputs, outcomes, params, fold_of, config: FinetuneConfig):
    def one(f):
        held = (fold_of == f).astype(jnp.float32)
        return _train_curve(base, inputs, outcomes, params, 1.0 - held, held, config, config.max_steps)[1]

    return jax.vmap(one)(jnp.arange(config.folds))


@eqx.filter_jit
def _train_steps(base, inputs, outcomes, params, n_steps: int, config: FinetuneConfig):
    ones = jnp.ones(jax.tree.leaves(inputs)[0].shape[0])
    return _train_curve(base, inputs, outcomes, params, ones, ones, config, n_steps)


def cv_folds(key: PRNGKeyArray, n: int, config: FinetuneConfig, *, what: str) -> tuple[FinetuneConfig, Array]:
    """The fold of each of `n` real `what` (at most one fold per event) and the config with that many folds."""
    if n < 2:
        raise ValueError(f"fine-tuning needs at least 2 {what} to cross-validate, got {n}")
    if config.folds > n:
        raise ParameterError(
            "folds", config.folds,
            f"more folds than the {n} {what} to fine-tune on (each fold holds out at least one); use {n} or fewer",
        )  # fmt: skip
    return config, jnp.asarray(np.asarray(jax.random.permutation(key, n)) % config.folds)


def choose_steps(curves: np.ndarray, config: FinetuneConfig) -> tuple[int, int, str]:
    """The early-stopping rule: (steps, best, reason) from the held-out loss curves (folds, max_steps + 1).

    The step count with the lowest mean held-out loss is taken if it beats the
    pretrained model (0 steps) by `config.min_gain` and its gain over the folds
    exceeds `config.significance` standard errors; otherwise none.
    """
    curves = np.atleast_2d(np.asarray(curves, np.float64))
    mean = curves.mean(0)
    best = int(np.argmin(mean))
    gain = 1.0 - mean[best] / max(mean[0], 1e-12)
    drops = curves[:, 0] - curves[:, best]
    se = float(np.std(drops, ddof=1) / np.sqrt(len(drops))) if len(drops) > 1 else np.inf
    z = float(np.mean(drops)) / se if se > 0 else (np.inf if np.mean(drops) > 0 else 0.0)
    if best == 0 or gain < config.min_gain:
        return (
            0,
            best,
            f"cross-validation: no step count lowers the held-out loss by {config.min_gain:.0%} (best {gain:.1%}); model unchanged",
        )
    if z < config.significance:
        return (
            0,
            best,
            f"cross-validation: the best step count ({best}) lowers the held-out loss by {gain:.1%}, but only "
            f"{z:.1f} standard errors over the folds (needs {config.significance:g}); model unchanged",
        )
    reason = (
        f"cross-validation: held-out loss lowest after {best} of {config.max_steps} steps "
        f"({gain:.1%} below the pretrained model, {z:.1f} standard errors over the folds)"
    )
    if best == config.max_steps:
        reason += "; the step budget ran out first, a larger --max-steps may help"
    return best, best, reason


SurrogateT = TypeVar("SurrogateT", bound=AbstractSurrogate)


@dataclasses.dataclass(frozen=True, repr=False)
class FinetuneResult(Result):
    """What fine-tuning returns (`clashx.finetune`, `finetune_on_tracks`, `finetune_pair`).

    Attributes:
        model: the fine-tuned surrogate; the pretrained one itself where `steps` is 0.
        steps: the steps chosen by cross-validation (0: fine-tuning would not help on held-out events).
        reason: why that number (in words).
        cv_curve: the mean held-out loss after 0, 1, ... steps.
        folds: the cross-validation folds.
        details: the rest, as JSON: the pretrained and best held-out losses, the settings, timings.
    """

    model: Any
    steps: int
    reason: str
    cv_curve: tuple[float, ...]
    folds: int
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON the CLI writes: steps, reason, cv_curve, folds and the details."""
        return {"steps": self.steps, "reason": self.reason, "cv_curve": list(self.cv_curve), "folds": self.folds} | (
            to_json(self.details)
        )


def finetune(
    model: SurrogateT,
    inputs,
    outcomes,
    params: Float[Array, "p"],
    *,
    key: PRNGKeyArray,
    config: FinetuneConfig | None = None,
    what: str = "events",
) -> FinetuneResult:
    """Fine-tune `model` on real events at fixed `params`, early-stopped by cross-validation.

    Written once for every surrogate: the loss of an event is the model's
    `example_loss`, in the pretrained model's units.

    Args:
        model: the pretrained surrogate (the strike's `StrikeSurrogate`, the cube's `CubeSurrogate`, ...).
        inputs, outcomes: the n real events (n ≥ 2) as the model's `example_loss` takes them:
            for the strike, strikes (n, 3) and post-impact velocities (n, 3).
        params: identified parameters (p,).
        key: PRNG key of the fold assignment.
        config: step size, step budget, folds, pull.
        what: what the events are called in messages.

    Returns:
        A `FinetuneResult`: the fine-tuned model (the pretrained one where cross-validation chose
        0 steps), the chosen number of steps and why, and the mean held-out loss curve.
    """
    config = config or FinetuneConfig()
    inputs = jnp.asarray(inputs, jnp.float32)
    outcomes = jnp.asarray(outcomes, jnp.float32)
    params = jnp.asarray(params, jnp.float32)
    config, fold_of = cv_folds(key, len(inputs), config, what=what)
    curves = np.asarray(_cv_curves(model, inputs, outcomes, params, fold_of, config))
    mean = curves.mean(0)
    steps, best, reason = choose_steps(curves, config)
    tuned = model if steps == 0 else _train_steps(model, inputs, outcomes, params, steps, config)[0]
    return FinetuneResult(
        tuned, steps, reason, tuple(float(v) for v in mean), config.folds,
        {"cv_loss_pretrained": float(mean[0]), "cv_loss_best": float(mean[best]), "config": dataclasses.asdict(config)},
    )  # fmt: skip

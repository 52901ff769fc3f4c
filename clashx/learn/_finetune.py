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

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..core._types import Array, Float, PRNGKeyArray
from ..scenes import _geometry as geo
from ..surrogate._surrogate import Surrogate


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
        if self.folds < 2 or self.max_steps < 0 or not self.lr > 0:
            raise ValueError(
                f"fine-tuning needs folds >= 2, max_steps >= 0 and lr > 0 (got {self.folds}, {self.max_steps}, {self.lr})"
            )
        if self.scope not in ("head", "affine", "all"):
            raise ValueError(f"fine-tuning scope {self.scope!r}: expected 'head', 'affine' or 'all'")


def _weighted_loss(model: Surrogate, base: Surrogate, strikes, velocities, params, weights, pull: float, length: float):
    w = jnp.array([1.0, 1.0, length])
    pred = jax.vmap(model, in_axes=(0, None))(strikes, params)
    per = jnp.sum(((pred - velocities) * w) ** 2, -1) / (jnp.sum((velocities * w) ** 2, -1) + 0.02**2)
    fit = jnp.sum(weights * per) / jnp.maximum(jnp.sum(weights), 1.0)
    diff = jax.tree.map(
        lambda a, b: jnp.sum((a - b) ** 2),
        eqx.filter(model, eqx.is_inexact_array),
        eqx.filter(base, eqx.is_inexact_array),
    )
    return fit + pull * sum(jax.tree.leaves(diff))


def _trainable(model: Surrogate, scope: str):
    """A filter spec (a pytree of bools) of the weights that fine-tuning moves."""
    if scope == "all":
        return jax.tree.map(eqx.is_inexact_array, model)
    spec = jax.tree.map(lambda _: False, model)
    if scope == "affine":
        return eqx.tree_at(lambda m: (m.out_mean, m.out_std), spec, replace=(True, True))
    last = lambda m: (m.mlp.layers[-1].weight, m.mlp.layers[-1].bias, m.out_mean, m.out_std)  # noqa: E731
    return eqx.tree_at(last, spec, replace=(True,) * 4)


def _train_curve(base, strikes, velocities, params, train_w, eval_w, config: FinetuneConfig, length: float):
    """Train from `base` on `train_w`-weighted events; held-out loss on `eval_w` before each step and after the last."""
    opt = optax.adam(config.lr)
    params_base, static = eqx.partition(base, _trainable(base, config.scope))

    def eval_loss(p):
        return _weighted_loss(eqx.combine(p, static), base, strikes, velocities, params, eval_w, 0.0, length)

    def body(carry, _):
        p, state = carry
        held = eval_loss(p)
        g = jax.grad(
            lambda q: _weighted_loss(
                eqx.combine(q, static), base, strikes, velocities, params, train_w, config.pull, length
            )
        )(p)
        upd, state = opt.update(g, state, p)
        return (optax.apply_updates(p, upd), state), held

    (p, _), curve = jax.lax.scan(body, (params_base, opt.init(params_base)), None, length=config.max_steps)
    return eqx.combine(p, static), jnp.append(curve, eval_loss(p))


@eqx.filter_jit
def _cv_curves(base, strikes, velocities, params, fold_of, config: FinetuneConfig, length: float):
    folds = jnp.arange(config.folds)

    def one(f):
        held = (fold_of == f).astype(jnp.float32)
        _, curve = _train_curve(base, strikes, velocities, params, 1.0 - held, held, config, length)
        return curve

    return jax.vmap(one)(folds)


@eqx.filter_jit
def _train_steps(base, strikes, velocities, params, n_steps, config: FinetuneConfig, length: float):
    ones = jnp.ones(len(strikes))
    cfg = dataclasses.replace(config, max_steps=n_steps)
    model, curve = _train_curve(base, strikes, velocities, params, ones, ones, cfg, length)
    return model, curve


def cv_folds(key: PRNGKeyArray, n: int, config: FinetuneConfig, *, what: str) -> tuple[FinetuneConfig, Array]:
    """The fold of each of `n` real `what` (at most one fold per event) and the config with that many folds."""
    if n < 2:
        raise ValueError(f"fine-tuning needs at least 2 {what} to cross-validate, got {n}")
    config = dataclasses.replace(config, folds=min(config.folds, n))
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


def finetune(
    model: Surrogate,
    strikes: Float[Array, "n 3"],
    velocities: Float[Array, "n 3"],
    params: Float[Array, "p"],
    *,
    key: PRNGKeyArray,
    config: FinetuneConfig | None = None,
) -> tuple[Surrogate, dict]:
    """Fine-tune `model` on real events at fixed `params`, early-stopped by cross-validation.

    Args:
        model: the pretrained surrogate.
        strikes, velocities: (n, 3) real events (n ≥ 2).
        params: identified contact parameters (p,).
        key: PRNG key of the fold assignment.
        config: step size, step budget, folds, pull.

    Returns:
        (fine-tuned model, report): the report gives the chosen number of steps,
        the mean held-out loss curve, the pretrained model's held-out loss and
        why it stopped.
    """
    config = config or FinetuneConfig()
    strikes = jnp.asarray(strikes, jnp.float32)
    velocities = jnp.asarray(velocities, jnp.float32)
    params = jnp.asarray(params, jnp.float32)
    config, fold_of = cv_folds(key, len(strikes), config, what="events")
    length = geo.characteristic_length(model.shape)
    curves = np.asarray(_cv_curves(model, strikes, velocities, params, fold_of, config, length))
    mean = curves.mean(0)
    steps, best, reason = choose_steps(curves, config)
    tuned = model if steps == 0 else _train_steps(model, strikes, velocities, params, steps, config, length)[0]
    report = {
        "steps": steps,
        "reason": reason,
        "cv_loss_pretrained": float(mean[0]),
        "cv_loss_best": float(mean[best]),
        "cv_curve": [float(v) for v in mean],
        "folds": config.folds,
        "config": dataclasses.asdict(config),
    }
    return tuned, report

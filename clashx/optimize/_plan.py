"""Which real strikes to run next: the ones that make the identified simulator right where it will be used (RSR's loop).

Real strikes are the expensive part.  Given a surrogate, the current parameters
and their uncertainty, and the strikes already run, `plan` proposes the next k
strikes from candidates drawn over the lab's ranges, greedily, by one of:

- "infogap" (the default): the sim-to-real gap first.  The model's error beyond
  the label noise on strikes it was *not* fitted to (`model_error` of held-out
  strikes: the loop's newest strikes against the fit before them, or
  `clashx plan --done`) says whether the surrogate can match the lab at all.
  While it is unknown, or larger than the label noise (MISSPECIFIED), the plan
  is "coverage": a misspecified model's fit is biased toward wherever the
  strikes sit, and the design that biases it least is the one that looks most
  like the strikes to be predicted.  Once held-out strikes say the model matches
  the lab within the label noise, the plan is "robust" (parameter information,
  plus coverage weighted by that error).  Measured in `bench/next_strikes.py`
  (README): on PyBullet's labs the error never fell below the label noise, so
  the plan stayed "coverage", and coverage beat random strikes where every
  information criterion lost to them;
- "coverage": kernel herding of the strikes to be predicted: each pick lowers
  the design's maximum mean discrepancy (Gaussian kernel of COVERAGE_LENGTH of
  each range) from the needed strikes the most (`need`: a task's strikes, by
  default strikes drawn uniformly over the ranges, the test distribution).  It
  is the bias term of Box & Draper's design for a model whose error is a
  Gaussian process with that kernel: the fit's bias is the design's
  discrepancy from where the model is used.  It needs no parameters, so the
  loop's first strikes are chosen this way too;
- "d-optimal": the largest gain in log det of the parameters' precision (the
  expected shrinkage of the posterior's volume, Laplace): a strike's information
  is JᵀJ / σ², J = ∂(relative velocity residual)/∂(parameters in the prior's unit
  cube) through the surrogate, σ the strike's expected label noise (`label_noise`);
- "predictive" (I-optimal): the largest expected drop of the predictions' variance averaged
  over strikes drawn like the candidates, tr(A Σ) − tr(A Σ'), A the candidates' mean
  information: what the α-accuracy on random test strikes scores;
- "disagreement": the largest spread of the strike's predicted velocity over an
  ensemble of parameter draws from the current posterior (the surrogate's
  disagreement with itself where the parameters are unsure), in label-noise units;
- "robust": the predictive criterion plus the model's own error (Box & Draper's
  variance-plus-bias design): the coverage term, normalised so that n random
  strikes score 1/n, times p times the model error over the label noise
  (squared): on a random design the model error acts like label noise,
  p σ_b² / n against the label noise's p σ² / n.  The model error is `error`
  (default: as large as the label noise);
- "random": uniform over the ranges (the baseline).

The label noise is what makes the information criteria prefer strikes the lab can measure.
A strike's velocity label is read from the block's slide after release
(`clashx.events._ingest_strike`); a slow strike's slide is a few millimetres, a few
motion-capture noise std, so its label is poor.  `label_noise` is LABEL_NOISE
(the labels' median error) and the motion-capture noise over the predicted slide
length v² / (2 μ2 g), in quadrature.  Without it every criterion chose slow
strikes near the ranges' ends, whose sensitivities are large and whose labels
are noise (issue 12's first measurements: D-optimal fell from 0.59 to 0.39 on
the square as strikes were added).

After each pick the posterior precision takes the picked strike's information,
so the next pick is informative about what is still unsure.  Parameters are
handled in the prior's unit cube, so no criterion depends on the units.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float
from ..events import NOISE, speed_vector
from ..scenes import geometry as geo
from ..scenes import sample_strikes
from ..surrogate import StrikeSurrogate

CRITERIA = ("infogap", "coverage", "robust", "d-optimal", "predictive", "disagreement", "random")
# One-sigma of a velocity label, relative (the stop-time labels of the lab's tracks: 4.4-4.9 % median error).
LABEL_NOISE = 0.05
COVERAGE_LENGTH = 0.25  # "coverage", "robust": the coverage kernel's length, in units of each strike range
# "infogap": a held-out model error above this (squared relative error beyond the label noise, summed over the
# 3 components) means the surrogate cannot match the lab within the label noise: plan for coverage.
MISSPECIFIED = 3.0 * LABEL_NOISE**2


@dataclasses.dataclass(frozen=True)
class PlanConfig:
    """How to plan.

    Attributes:
        k: strikes to propose.
        criterion: one of CRITERIA ("infogap", the default, is described in the module's docstring).
        candidates: strikes drawn uniformly over the lab's ranges to choose from.
        ensemble: parameter draws of the "disagreement" criterion.
        free: the parameters whose information counts (default: all of the model's space).
        seed: PRNG seed of the candidates and the ensemble.
    """

    k: int = 5
    criterion: str = "infogap"
    candidates: int = 2048
    ensemble: int = 32
    free: tuple[str, ...] | None = None
    seed: int = 0

    def __post_init__(self):
        if self.criterion not in CRITERIA:
            raise ValueError(f"--criterion {self.criterion!r}: expected one of {', '.join(CRITERIA)}")
        if self.k < 1 or self.candidates < self.k:
            raise ValueError(f"--k {self.k} / --candidates {self.candidates}: need 1 ≤ k ≤ candidates")
        if self.ensemble < 2:
            raise ValueError(f"--ensemble {self.ensemble}: need at least two draws")


@eqx.filter_jit
def _jacobians(model: StrikeSurrogate, strikes, params) -> Float[Array, "n 3 p"]:
    """∂ relative residual / ∂ parameters (physical) at `params`, each strike's label taken as its prediction."""

    def one(s):
        y0 = jax.lax.stop_gradient(model(s, params))
        return jax.jacfwd(lambda p: model.example_residuals(s, y0, p))(params)

    return jax.vmap(one)(strikes)


@eqx.filter_jit
def _speeds(model: StrikeSurrogate, strikes, params) -> Float[Array, " n"]:
    """The predicted post-impact translational speed of each strike (m/s)."""
    vel = jax.vmap(lambda s: model(s, params))(strikes)
    return jnp.linalg.norm(speed_vector(vel, geo.characteristic_length(model.shape))[:, :2], axis=-1)


def label_noise(model: StrikeSurrogate, strikes, params) -> np.ndarray:
    """Each strike's expected relative label noise (n,): LABEL_NOISE and the mocap noise over the slide, in quadrature.

    The slide's length is the predicted post-impact speed v over the ground's
    deceleration, v² / (2 μ2 g), μ2 the current value; the motion-capture noise
    is SCENE.md's 0.5 mm (`clashx.events._ingest_strike.NOISE`).
    """
    params = np.asarray(params, np.float64)
    speed = np.asarray(_speeds(model, jnp.asarray(strikes, jnp.float32), jnp.asarray(params, jnp.float32)), np.float64)
    decel = max(float(params[model.space.index("mu2")]), 1e-3) * geo.GRAVITY
    slide = np.maximum(speed, 1e-3) ** 2 / (2.0 * decel)
    return np.sqrt(LABEL_NOISE**2 + (NOISE[0] / slide) ** 2)


def strike_sensitivity(model: StrikeSurrogate, strikes, params, free: tuple[str, ...] | None = None) -> np.ndarray:
    """JᵀJ / LABEL_NOISE² (n, f, f): each strike's sensitivity on the `free` parameters, in prior-unit coordinates."""
    cols = _cols(model, free)
    jac = np.asarray(_jacobians(model, jnp.asarray(strikes, jnp.float32), jnp.asarray(params, jnp.float32)), np.float64)
    jac = jac[:, :, cols] * model.space.unit_scale(params)[cols]
    return np.einsum("nki,nkj->nij", jac, jac) / LABEL_NOISE**2


def strike_information(model: StrikeSurrogate, strikes, params, free: tuple[str, ...] | None = None) -> np.ndarray:
    """Each strike's Fisher information (n, f, f) on the `free` parameters, in prior-unit coordinates.

    JᵀJ / σ², σ the strike's `label_noise`.
    """
    return _information(model, strikes, params, strike_sensitivity(model, strikes, params, free))


def _information(model: StrikeSurrogate, strikes, params, sensitivity: np.ndarray) -> np.ndarray:
    """`strike_sensitivity` (JᵀJ / LABEL_NOISE²) → information (JᵀJ / σ², σ the strikes' `label_noise`)."""
    return sensitivity * ((LABEL_NOISE / label_noise(model, strikes, params)) ** 2)[:, None, None]


def prior_precision(model: StrikeSurrogate, params, std=None, free: tuple[str, ...] | None = None) -> np.ndarray:
    """The current precision (f, f) in prior-unit coordinates: from the identified σ, or the uniform prior (1/12)."""
    cols = _cols(model, free)
    if std is None:
        return np.eye(len(cols)) * 12.0
    s_u = np.asarray(std, np.float64)[cols] / model.space.unit_scale(params)[cols]
    return np.diag(1.0 / np.maximum(s_u, 1e-6) ** 2)


def _cols(model: StrikeSurrogate, free: tuple[str, ...] | None) -> list[int]:
    names = model.space.names if free is None else free
    return [model.space.index(n) for n in names]


@eqx.filter_jit
def _spread(model: StrikeSurrogate, strikes, draws) -> Float[Array, " n"]:
    """Mean squared relative residual of each strike's prediction under each draw against the draws' mean."""
    vel = jax.vmap(lambda p: jax.vmap(lambda s: model(s, p))(strikes))(draws)  # (m, n, 3)
    centre = vel.mean(0)
    res = jax.vmap(lambda p: jax.vmap(lambda s, y: model.example_residuals(s, y, p))(strikes, centre))(draws)
    return jnp.mean(res**2, axis=(0, 2))


def error_terms(model: StrikeSurrogate, strikes, labels, params) -> tuple[np.ndarray, np.ndarray]:
    """Each strike's squared relative residual beyond its label noise (n,), and its weight 1 / noise² (n,).

    `model_error` of several batches, each against its own fit, is `pooled_error` of their terms.
    """
    strikes = jnp.asarray(strikes, jnp.float32)
    res = jax.vmap(model.example_residuals, in_axes=(0, 0, None))(
        strikes, jnp.asarray(labels, jnp.float32), jnp.asarray(params, jnp.float32)
    )
    noise = label_noise(model, strikes, params)
    return np.sum(np.asarray(res, np.float64) ** 2, -1) - 3.0 * noise**2, 1.0 / noise**2


def pooled_error(excess: np.ndarray, weight: np.ndarray, *, upper: bool = False) -> float:
    """The precision-weighted mean of `error_terms`, at least 0; `upper`: its upper bound, mean + 2 standard errors.

    The standard error is the weighted mean's plug-in estimate, √(Σ w² (x − m)²) / Σ w
    (no small-sample correction; it is 0 for one strike, so callers pool at least two):
    from five or ten held-out strikes the mean is noisy, and the bound is what
    "infogap" needs before it trusts that the model matches the lab.
    """
    excess, weight = np.asarray(excess, np.float64), np.asarray(weight, np.float64)
    mean = float(np.sum(weight * excess) / np.sum(weight))
    if upper:
        mean += 2.0 * float(np.sqrt(np.sum(weight**2 * (excess - mean) ** 2)) / np.sum(weight))
    return max(mean, 0.0)


def model_error(model: StrikeSurrogate, strikes, labels, params) -> float:
    """The model's squared error beyond the label noise on strikes already run (summed over the 3 components).

    The mean squared relative residual of the labels at `params` less what their
    `label_noise` explains, each strike weighted by its label's precision (a slow
    strike's label says little about the model), at least 0: what no choice of
    parameters removes.  On strikes the parameters were fitted to it is biased low
    (few strikes, many parameters); on held-out strikes it also holds the
    parameters' own error, so it is biased high while they are unsure.
    """
    return pooled_error(*error_terms(model, strikes, labels, params))


def _unit_strikes(strikes) -> np.ndarray:
    return (np.asarray(strikes, np.float64) - geo.STRIKE_LOW) / (geo.STRIKE_HIGH - geo.STRIKE_LOW)


def _kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Gaussian kernel (len(a), len(b)) of points of the unit cube, COVERAGE_LENGTH wide."""
    d2 = np.sum(a**2, 1)[:, None] + np.sum(b**2, 1)[None, :] - 2.0 * a @ b.T
    return np.exp(-0.5 * np.maximum(d2, 0.0) / COVERAGE_LENGTH**2)


class _Coverage:
    """The design's maximum mean discrepancy from the needed strikes' distribution, per candidate added (greedy)."""

    def __init__(self, cand: np.ndarray, ran: np.ndarray | None, need: np.ndarray | None = None):
        self.cand = _unit_strikes(cand)
        k_cc = _kernel(self.cand, self.cand)
        target = self.cand if need is None else _unit_strikes(need)
        k_ct = k_cc if need is None else _kernel(self.cand, target)
        self.pool_mean = k_ct.mean(1)  # E_need k(c, ·)
        # the unit: E MMD² of one strike drawn uniformly over the ranges (a tight `need` would make its own ~0)
        self.norm = max(1.0 - float(k_cc.mean()), 1e-9)
        self.k_cc = k_cc
        d = np.zeros((0, 3)) if ran is None else _unit_strikes(ran)
        self.cross = _kernel(self.cand, d).sum(1)  # Σ_design k(c, d)
        self.self_sum = float(_kernel(d, d).sum())
        self.pool_sum = float(_kernel(d, target).sum()) / len(target)  # Σ_design E_need k(d, ·)
        self.n = len(d)

    def mmd(self) -> float:
        """MMD² of the design less its pool-pool constant, over one random strike's."""
        if self.n == 0:
            return 0.0
        return (self.self_sum / self.n**2 - 2.0 * self.pool_sum / self.n) / self.norm

    def after_each(self) -> np.ndarray:
        """MMD² (same units) of the design with each candidate added."""
        n = self.n + 1
        return (
            (self.self_sum + 2.0 * self.cross + 1.0) / n**2 - 2.0 * (self.pool_sum + self.pool_mean) / n
        ) / self.norm

    def add(self, j: int) -> None:
        self.self_sum += 2.0 * self.cross[j] + 1.0
        self.pool_sum += self.pool_mean[j]
        self.cross = self.cross + self.k_cc[:, j]
        self.n += 1


def plan(
    model: StrikeSurrogate,
    params,
    *,
    std=None,
    done=None,
    ran=None,
    error: float | None = None,
    need=None,
    config: PlanConfig | None = None,
) -> dict:
    """Propose the next `config.k` strikes (θ, θ1, v_pre) for the lab.

    Args:
        model: the strike surrogate (pretrained or fine-tuned).
        params: the current parameter values (p,), e.g. `clashx identify`'s; the prior's
            centre when nothing has been identified yet.
        std: their one-sigma (p,) (None: the uniform prior's spread).
        done: strikes already run (m, 3); their information is counted in (their labels
            are not needed, so a strike still to be ingested counts too).  With `std` from an
            identification on those strikes, leave this None (they are in `std` already).
        ran: strikes already run whose information is in `std` (m, 3): the coverage terms cover around them.
        error: the model's error beyond the label noise (`model_error`, squared relative error
            summed over the 3 components), measured on strikes the parameters were not fitted
            to.  "infogap" plans for coverage unless it is given and at most MISSPECIFIED;
            "robust" weights its coverage term by it (None: 3·LABEL_NOISE², as large as the label noise).
        need: the strikes the simulator will be used on (n, 3), e.g. a task's; "coverage",
            "infogap" and "robust" cover them (None: strikes drawn uniformly over the ranges).
        config: k, criterion, candidates, ensemble, free parameters, seed.

    Returns:
        {"strikes": (k, 3), "criterion", "mode" (the criterion "infogap" planned with), "scores":
        per pick, "std_before" / "std_after": the free parameters' Laplace σ (physical units)
        before and after the k strikes}.
    """
    config = config or PlanConfig()
    params = np.asarray(params, np.float64)
    cols = _cols(model, config.free)
    scale = model.space.unit_scale(params)[cols]
    k_cand, k_ens, k_rand = jax.random.split(jax.random.PRNGKey(config.seed), 3)
    cand = np.asarray(sample_strikes(config.candidates, key=k_cand), np.float64)
    if need is not None:
        need = np.asarray(need, np.float64).reshape(-1, 3)
        if not len(need) or not np.all((need >= geo.STRIKE_LOW - 1e-9) & (need <= geo.STRIKE_HIGH + 1e-9)):
            raise ValueError("need: expected strikes (n ≥ 1, 3) inside the lab's ranges (θ, θ1, v_pre)")
    mode = config.criterion
    if mode == "infogap":
        mode = "robust" if error is not None and error <= MISSPECIFIED else "coverage"
    precision = prior_precision(model, params, std, config.free)
    if done is not None and len(done):
        precision = precision + strike_information(model, done, params, config.free).sum(0)
    before = np.sqrt(np.diag(np.linalg.inv(precision))) * scale
    if mode == "random":
        picks = list(np.asarray(jax.random.choice(k_rand, config.candidates, (config.k,), replace=False)))
        info = strike_information(model, cand[picks], params, config.free)
        precision = precision + info.sum(0)
        scores = [0.0] * config.k
    else:
        sens = strike_sensitivity(model, cand, params, config.free)
        info = _information(model, cand, params, sens)
        z = np.asarray(jax.random.normal(k_ens, (config.ensemble, len(cols))), np.float64)
        a_mean = sens.mean(0)  # the prediction's sensitivity for a strike drawn like the candidates (predictive)
        if mode in ("robust", "coverage"):
            design = [a for a in (ran, done) if a is not None and len(a)]
            coverage = _Coverage(cand, np.concatenate(design) if design else None, need)
            # model error acts like label noise on a random design (p σ_b² / n, as the label noise gives p σ² / n)
            bias_weight = len(cols) * (3.0 * LABEL_NOISE**2 if error is None else float(error)) / LABEL_NOISE**2
        picks, scores = [], []
        for _ in range(config.k):
            if mode == "coverage":
                score = coverage.mmd() - coverage.after_each()
            elif mode == "d-optimal":
                score = np.linalg.slogdet(precision[None] + info)[1] - np.linalg.slogdet(precision)[1]
            elif mode in ("predictive", "robust"):
                after_each = np.linalg.inv(precision[None] + info)
                score = np.trace(a_mean @ np.linalg.inv(precision)) - np.einsum("ij,nji->n", a_mean, after_each)
                if mode == "robust":
                    score = score + bias_weight * (coverage.mmd() - coverage.after_each())
            else:
                score = _disagreement(model, cand, params, precision, z, cols)
            score[picks] = -np.inf
            j = int(np.argmax(score))
            picks.append(j)
            scores.append(float(score[j]))
            precision = precision + info[j]
            if mode in ("robust", "coverage"):
                coverage.add(j)
    after = np.sqrt(np.diag(np.linalg.inv(precision))) * scale
    names = [model.space.names[c] for c in cols]
    return {
        "strikes": cand[picks],
        "criterion": config.criterion,
        "mode": mode,
        "scores": scores,
        "std_before": dict(zip(names, before.tolist(), strict=True)),
        "std_after": dict(zip(names, after.tolist(), strict=True)),
    }


def _disagreement(model: StrikeSurrogate, cand: np.ndarray, params: np.ndarray, precision, z, cols) -> np.ndarray:
    """Spread of each candidate's predicted velocity over posterior draws (common random numbers), in label-noise units."""
    space = model.space
    u0 = np.asarray(space.to_unit(jnp.asarray(params)), np.float64)
    chol = np.linalg.cholesky(np.linalg.inv(precision))
    u = np.tile(u0, (len(z), 1))
    u[:, cols] = np.clip(u0[cols] + z @ chol.T, 0.0, 1.0)
    draws = jnp.asarray(space.from_unit(jnp.asarray(u)), jnp.float32)
    return np.asarray(_spread(model, jnp.asarray(cand, jnp.float32), draws), np.float64) / LABEL_NOISE**2

"""Which real strikes to run next: the ones expected to teach the identified parameters the most (RSR's loop, step 1).

Real strikes are the expensive part.  Given a surrogate, the current parameters
and their uncertainty, and the strikes already run, `plan` proposes the next k
strikes from candidates drawn over the lab's ranges, greedily, by one of:

- "d-optimal": the largest gain in log det of the parameters' precision (the
  expected shrinkage of the posterior's volume, Laplace): a strike's information
  is JᵀJ / σ², J = ∂(relative velocity residual)/∂(parameters in the prior's unit
  cube) through the surrogate, σ = LABEL_NOISE;
- "predictive" (I-optimal): the largest expected drop of the predictions' variance averaged
  over strikes drawn like the candidates, tr(A Σ) − tr(A Σ'), A the candidates' mean
  information: what the α-accuracy on random test strikes scores;
- "disagreement": the largest spread of the strike's predicted velocity over an
  ensemble of parameter draws from the current posterior (the surrogate's
  disagreement with itself where the parameters are unsure), in label-noise units;
- "random": uniform over the ranges (the baseline).

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

from ..core._types import Array, Float
from ..scenes._strike import sample_strikes
from ..surrogate._surrogate import Surrogate

CRITERIA = ("d-optimal", "predictive", "disagreement", "random")
# One-sigma of a velocity label, relative (the stop-time labels of the lab's tracks: 4.4-4.9 % median error).
LABEL_NOISE = 0.05


@dataclasses.dataclass(frozen=True)
class PlanConfig:
    """How to plan.

    Attributes:
        k: strikes to propose.
        criterion: "d-optimal", "predictive", "disagreement" or "random".
        candidates: strikes drawn uniformly over the lab's ranges to choose from.
        ensemble: parameter draws of the "disagreement" criterion.
        free: the parameters whose information counts (default: all of the model's space).
        seed: PRNG seed of the candidates and the ensemble.
    """

    k: int = 5
    criterion: str = "d-optimal"
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
def _jacobians(model: Surrogate, strikes, params) -> Float[Array, "n 3 p"]:
    """∂ relative residual / ∂ parameters (physical) at `params`, each strike's label taken as its prediction."""

    def one(s):
        y0 = jax.lax.stop_gradient(model(s, params))
        return jax.jacfwd(lambda p: model.example_residuals(s, y0, p))(params)

    return jax.vmap(one)(strikes)


def strike_information(model: Surrogate, strikes, params, free: tuple[str, ...] | None = None) -> np.ndarray:
    """Each strike's Fisher information (n, f, f) on the `free` parameters, in prior-unit coordinates, σ = LABEL_NOISE."""
    cols = _cols(model, free)
    jac = np.asarray(_jacobians(model, jnp.asarray(strikes, jnp.float32), jnp.asarray(params, jnp.float32)), np.float64)
    jac = jac[:, :, cols] * model.space.unit_scale(params)[cols]
    return np.einsum("nki,nkj->nij", jac, jac) / LABEL_NOISE**2


def prior_precision(model: Surrogate, params, std=None, free: tuple[str, ...] | None = None) -> np.ndarray:
    """The current precision (f, f) in prior-unit coordinates: from the identified σ, or the uniform prior (1/12)."""
    cols = _cols(model, free)
    if std is None:
        return np.eye(len(cols)) * 12.0
    s_u = np.asarray(std, np.float64)[cols] / model.space.unit_scale(params)[cols]
    return np.diag(1.0 / np.maximum(s_u, 1e-6) ** 2)


def _cols(model: Surrogate, free: tuple[str, ...] | None) -> list[int]:
    names = model.space.names if free is None else free
    return [model.space.index(n) for n in names]


@eqx.filter_jit
def _spread(model: Surrogate, strikes, draws) -> Float[Array, " n"]:
    """Mean squared relative residual of each strike's prediction under each draw against the draws' mean."""
    vel = jax.vmap(lambda p: jax.vmap(lambda s: model(s, p))(strikes))(draws)  # (m, n, 3)
    centre = vel.mean(0)
    res = jax.vmap(lambda p: jax.vmap(lambda s, y: model.example_residuals(s, y, p))(strikes, centre))(draws)
    return jnp.mean(res**2, axis=(0, 2))


def plan(
    model: Surrogate,
    params,
    *,
    std=None,
    done=None,
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
        config: k, criterion, candidates, ensemble, free parameters, seed.

    Returns:
        {"strikes": (k, 3), "criterion", "scores": per pick, "std_before" / "std_after":
        the free parameters' Laplace σ (physical units) before and after the k strikes}.
    """
    config = config or PlanConfig()
    params = np.asarray(params, np.float64)
    cols = _cols(model, config.free)
    scale = model.space.unit_scale(params)[cols]
    k_cand, k_ens, k_rand = jax.random.split(jax.random.PRNGKey(config.seed), 3)
    cand = np.asarray(sample_strikes(config.candidates, key=k_cand), np.float64)
    precision = prior_precision(model, params, std, config.free)
    if done is not None and len(done):
        precision = precision + strike_information(model, done, params, config.free).sum(0)
    before = np.sqrt(np.diag(np.linalg.inv(precision))) * scale
    if config.criterion == "random":
        picks = list(np.asarray(jax.random.choice(k_rand, config.candidates, (config.k,), replace=False)))
        info = strike_information(model, cand[picks], params, config.free)
        precision = precision + info.sum(0)
        scores = [0.0] * config.k
    else:
        info = strike_information(model, cand, params, config.free)
        z = np.asarray(jax.random.normal(k_ens, (config.ensemble, len(cols))), np.float64)
        a_mean = info.mean(0)  # the information of a strike drawn like the candidates (predictive)
        picks, scores = [], []
        for _ in range(config.k):
            if config.criterion == "d-optimal":
                score = np.linalg.slogdet(precision[None] + info)[1] - np.linalg.slogdet(precision)[1]
            elif config.criterion == "predictive":
                after_each = np.linalg.inv(precision[None] + info)
                score = np.trace(a_mean @ np.linalg.inv(precision)) - np.einsum("ij,nji->n", a_mean, after_each)
            else:
                score = _disagreement(model, cand, params, precision, z, cols)
            score[picks] = -np.inf
            j = int(np.argmax(score))
            picks.append(j)
            scores.append(float(score[j]))
            precision = precision + info[j]
    after = np.sqrt(np.diag(np.linalg.inv(precision))) * scale
    names = [model.space.names[c] for c in cols]
    return {
        "strikes": cand[picks],
        "criterion": config.criterion,
        "scores": scores,
        "std_before": dict(zip(names, before.tolist(), strict=True)),
        "std_after": dict(zip(names, after.tolist(), strict=True)),
    }


def _disagreement(model: Surrogate, cand: np.ndarray, params: np.ndarray, precision, z, cols) -> np.ndarray:
    """Spread of each candidate's predicted velocity over posterior draws (common random numbers), in label-noise units."""
    space = model.space
    u0 = np.asarray(space.to_unit(jnp.asarray(params)), np.float64)
    chol = np.linalg.cholesky(np.linalg.inv(precision))
    u = np.tile(u0, (len(z), 1))
    u[:, cols] = np.clip(u0[cols] + z @ chol.T, 0.0, 1.0)
    draws = jnp.asarray(space.from_unit(jnp.asarray(u)), jnp.float32)
    return np.asarray(_spread(model, jnp.asarray(cand, jnp.float32), draws), np.float64) / LABEL_NOISE**2

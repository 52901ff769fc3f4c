"""A strike recording identified in two impulse families, their predictions averaged (issue 26, item 1).

MuJoCo's contact model is one family of impulse laws; `clashx.scenes`'
compliant law (a Hunt-Crossley normal force, Coulomb friction, eight
parameters) is another, physically different one.  `fit_families` runs
clashx's whole identification (`fit_recording`: labels from the tracks, μ2
from the slides, the block under its priors) once per family through that
family's distilled surrogate, and `FamilyFit.predict` averages the
families' predicted velocities with equal weights.

Why an average, measured (`bench/compliant_surrogate.py`; α = 0.1 on each
lab's test strikes, ten fit strikes, three shapes): on lab A's fit seeds 2
and 12 and two labs of our own (twelve fits) MuJoCo's surrogate alone scores
0.600, the compliant one 0.649, the average 0.660, and a weight chosen per
fit by the ten strikes' loss 0.665; on eighteen fresh fits (seeds 22 and 32
of labs A, C and D) 0.563, 0.602, 0.645 and 0.618.  Ten labels choose a
weight no better than a fixed half, while the two families' errors are
partly independent, so the fixed average is the default.

`FamilyFit.predictive` gives the average a covariance per strike: the two
families' `strike_predictive` Gaussians as an equal-weight mixture, wider
where they disagree (30 fits: 0.85 / 0.95 inside the 50 % / 90 % ellipsoids,
rank correlation with the error 0.35; MuJoCo's family alone 0.79 / 0.91,
0.31).  The cube's pipeline averages its two families' rollouts the same way
(`clashx_families` in `clashx.workflows._cube_pipeline`).

The compliant family has no MuJoCo scene: its fit skips local
re-distillation, and the hybrid rollouts (`clashx.hybrid`) still run on the
MuJoCo family's surrogate; the average is for predicting the impact.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, PRNGKeyArray, short_repr
from ..events import recording_arrays
from ..scenes import AbstractHandler, make_strike_scene
from ..scenes import geometry as geo
from ..surrogate import StrikeSurrogate, predict, shipped_strike_surrogate
from ._lab_fit import LabFit, LabFitConfig, fit_recording, strike_predictive

FAMILIES = ("mujoco", "compliant")
# The compliant family's priors: the block's as MuJoCo's fit has them, its stiffness in the place of MuJoCo's
# time constant (one prior range around the nominal); friction and damping free, as μ1 and e1 are.
COMPLIANT_PRIOR_STD = (("mass", 1.0), ("com_x", 1.0), ("com_y", 1.0), ("log10k", 1.0), ("torsion", 1.0))


class StrikePredictive(NamedTuple):
    """Predicted post-impact speed vectors with their uncertainty (`FamilyFit.predictive`).

    Attributes:
        speed_vector: (n, 3) the predicted (vx, vy, r·ωz) in m/s: the velocity with the spin as the speed of
            a point at the radius of gyration r, the units the α-accuracy and the covariance are in.
        cov: (n, 3, 3) each prediction's covariance (m²/s²).
        sigma_rel: (n,) √trace(cov) / ‖speed_vector‖: the expected relative error of each prediction.
        length: r, the block's radius of gyration (m).
        families: each family's own predictive, by name (`strike_predictive`'s dict: "pred", "cov", ...).
    """

    speed_vector: Float[np.ndarray, "n 3"]
    cov: Float[np.ndarray, "n 3 3"]
    sigma_rel: Float[np.ndarray, " n"]
    length: float
    families: dict[str, dict]

    @property
    def velocity(self) -> Float[np.ndarray, "n 3"]:
        """(vx, vy, ωz) in m/s, m/s, rad/s: the units of `clashx.predict` and `FamilyFit.predict`."""
        return self.speed_vector / np.array([1.0, 1.0, self.length])

    def as_dict(self) -> dict[str, np.ndarray]:
        """{"pred", "cov", "sigma_rel"}: what `clashx.learn.predictive_calibration` scores."""
        return {"pred": self.speed_vector, "cov": self.cov, "sigma_rel": self.sigma_rel}

    def __repr__(self) -> str:
        return short_repr(self)


class StrikeFamilies(AbstractHandler):
    """The strike families' weighted average as one handler (`FamilyFit.handler`): (strike, params) -> (vx, vy, ωz).

    Attributes:
        model: the family whose parameters the handler takes (MuJoCo's: the engine's).
        weight: its weight.
        others: (surrogate, its identified parameters, its weight) of every other family, held.
    """

    model: StrikeSurrogate
    weight: float = eqx.field(static=True)
    others: tuple[tuple[StrikeSurrogate, Array, float], ...]

    def __call__(self, strike: Float[Array, "3"], params: Float[Array, " p"]) -> Float[Array, "3"]:
        """The weighted average of the families' post-impact velocities (block frame, m/s and rad/s)."""
        out = self.weight * self.model(strike, params)
        for model, p, w in self.others:
            out = out + w * model(strike, jnp.asarray(p, out.dtype))
        return out

    @property
    def space(self):
        """The parameters the handler takes: the engine family's."""
        return self.model.space

    @property
    def shape(self) -> str:
        return self.model.shape

    def __repr__(self) -> str:
        return short_repr(self)


class FamilyFit(NamedTuple):
    """What `fit_families` returns.

    Attributes:
        fits: one `LabFit` per family, by name.
        weights: each family's weight in `predict`, by name (they sum to 1).
    """

    fits: dict[str, LabFit]
    weights: dict[str, float]

    @classmethod
    def equal(cls, fits: dict[str, LabFit]) -> FamilyFit:
        """The families' fits weighed equally, the rule `fit_families` ships (module docstring)."""
        return cls(fits, {name: 1.0 / len(fits) for name in fits})

    def predict(self, strikes: Float[np.ndarray, "n 3"]) -> Float[np.ndarray, "n 3"]:
        """Post-impact velocities (vx, vy, ωz; block frame) of `strikes`: the families' weighted average."""
        return family_average(
            {n: (self.fits[n].model, self.fits[n].params) for n in self.weights}, self.weights, strikes
        )

    def predictive(self, strikes: Float[np.ndarray, "n 3"]) -> StrikePredictive:
        """The average's predictions with a covariance each: the families' weighted mixture.

        Each family's own Gaussian (`strike_predictive`: the Laplace posterior of its parameters and the noise
        of its fit residuals) enters the mixture; its moments are the weighted mean and covariance
        Σ w_f (C_f + (m_f − m)(m_f − m)ᵀ), so where the families disagree the σ widens.

        Returns:
            A `StrikePredictive`: the speed vectors (vx, vy, r ωz) and their covariance, the relative σ per
            strike, and each family's own (`velocity` gives (vx, vy, ωz), the units of `predict`).
        """
        parts = {name: strike_predictive(self.fits[name], strikes) for name in self.weights}
        names = list(self.weights)
        mean, cov = mixture_moments(
            [parts[n]["pred"] for n in names], [parts[n]["cov"] for n in names], [self.weights[n] for n in names]
        )
        scale = np.maximum(np.linalg.norm(mean, axis=1), 1e-9)
        length = geo.characteristic_length(next(iter(self.fits.values())).model.shape)
        sigma = np.sqrt(np.trace(cov, axis1=1, axis2=2)) / scale
        return StrikePredictive(mean, cov, sigma, float(length), parts)

    def handler(self, engine_family: str = "mujoco") -> StrikeFamilies:
        """The families' average as one impact handler of the strike's hybrid, taking `engine_family`'s parameters.

        The engine simulates the strike with MuJoCo's parameters (the slide, the block), so the handler is
        conditioned on them: `handler(strike, params)` is the weighted average of that family's surrogate at
        `params` and every other family's at its own identified values (held).  It runs wherever a strike
        surrogate runs: `clashx.strike_rollouts_c`, `clashx.optimize_strikes` (`handler=`).
        """
        others = tuple((self.fits[n].model, np.asarray(self.fits[n].params, np.float32), float(self.weights[n]))
                       for n in self.weights if n != engine_family)  # fmt: skip
        return StrikeFamilies(self.fits[engine_family].model, float(self.weights[engine_family]), others)

    def report(self) -> dict[str, Any]:
        """Each family's `LabFit.report` and the weights, JSON-able."""
        return {"weights": self.weights} | {name: fit.report for name, fit in self.fits.items()}

    def __repr__(self) -> str:
        return short_repr(self)


def family_average(
    members: Mapping[str, tuple[StrikeSurrogate, np.ndarray]], weights: Mapping[str, float], strikes
) -> Float[np.ndarray, "n 3"]:
    """Σ w · surrogate(strikes, params) over the families `weights` names: {family: (surrogate, its parameters)}."""
    strikes = np.asarray(strikes, np.float64)
    out = np.zeros((len(strikes), 3))
    for name, w in weights.items():
        model, params = members[name]
        out += w * np.asarray(predict(model, strikes, params), np.float64)
    return out


def mixture_moments(
    means: list[np.ndarray], covs: list[np.ndarray], weights: list[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Mean (n, k) and covariance (n, k, k) of a mixture of Gaussians per event: Σ w m and Σ w (C + (m − m̄)(m − m̄)ᵀ)."""
    mean = sum(w * np.asarray(m, np.float64) for m, w in zip(means, weights))
    cov = sum(
        w * (np.asarray(c, np.float64) + np.einsum("ni,nj->nij", np.asarray(m) - mean, np.asarray(m) - mean))
        for m, c, w in zip(means, covs, weights)
    )
    return np.asarray(mean), np.asarray(cov)


def family_config(family: str, config: LabFitConfig | None = None) -> LabFitConfig:
    """`config` (default `LabFitConfig()`) as `fit_family` uses it for `family`: the MuJoCo family's unchanged;
    the compliant family's with its own priors (`COMPLIANT_PRIOR_STD`), all its parameters free, stop-time labels
    and no local re-distillation (both of those steps simulate MuJoCo)."""
    config = config or LabFitConfig()
    if family not in FAMILIES:
        raise ValueError(f"family {family!r}: expected one of {', '.join(FAMILIES)}")
    if family == "mujoco":
        return config
    return dataclasses.replace(config, prior_std=COMPLIANT_PRIOR_STD, local=None, labels="stop-time", free=None)


def fit_family(
    recording: dict[str, Any],
    family: str,
    *,
    key: PRNGKeyArray,
    shape: str | None = None,
    model: StrikeSurrogate | None = None,
    where: str = "recording",
    rows: np.ndarray | None = None,
    config: LabFitConfig | None = None,
    label_sigma: np.ndarray | None = None,
    labels: np.ndarray | None = None,
) -> LabFit:
    """clashx's identification of a strike recording in one family (`fit_recording` with `family_config`).

    Args:
        recording: the recording's arrays (`clashx.events._ingest_strike` format).
        family: one of `FAMILIES`.
        key: PRNG key of the identification.
        shape: the block's shape (needed only without `model`).
        model: the family's surrogate (default: the shipped one, `clashx.shipped_strike_surrogate(shape, family)`); the
            MuJoCo family's scene is built for its parameter space.
        where: the recording's name for messages.
        rows: strikes to use (default: every touched one).
        config: the MuJoCo family's `LabFitConfig` (the compliant one's follows by `family_config`).
        label_sigma: each strike's label's relative σ (`fit_recording`), or None.
        labels: velocities measured otherwise than by the tracks (`fit_recording`), or None.
    """
    cfg = family_config(family, config)
    if model is None:
        if shape is None:
            raise ValueError("fit_family needs the block's shape or the family's surrogate")
        model = shipped_strike_surrogate(shape, family)
    sim = make_strike_scene(model.shape, space=model.space) if family == "mujoco" else None
    return fit_recording(model, sim, recording, where=where, rows=rows, key=key, config=cfg, label_sigma=label_sigma,
                         labels=labels)  # fmt: skip


def fit_families(
    recording: str | os.PathLike | Mapping[str, Any],
    shape: str,
    *,
    key: PRNGKeyArray,
    where: str = "recording",
    families: tuple[str, ...] = FAMILIES,
    models: Mapping[str, StrikeSurrogate] | None = None,
    config: LabFitConfig | None = None,
    label_sigma: np.ndarray | None = None,
    labels: np.ndarray | None = None,
) -> FamilyFit:
    """Identify a strike recording in each of `families` (`fit_family`) and weigh their predictions equally.

    Args:
        recording: the recording: its file (e.g. `clashx.lab_recording("square", "fit")`) or its arrays
            (`clashx.events._ingest_strike` format).
        shape: the block's shape.
        key: PRNG key of each identification (the same for every family).
        where: the recording's name for messages.
        families: which of `FAMILIES` (at least one).
        models: a surrogate per family (default: the shipped ones, `clashx.shipped_strike_surrogate(shape, family)`).
        config: the MuJoCo family's `LabFitConfig` (the compliant one's: `family_config`).
        label_sigma: each strike's label's relative σ (`fit_recording`; e.g. `clashx.events.track_label_sigma`),
            or None.
        labels: velocities measured otherwise than by the tracks (`fit_recording`), or None.

    Returns:
        A `FamilyFit` (`FamilyFit.equal`).
    """
    if not families or len(set(families)) != len(families):
        raise ValueError(f"families {families!r}: name each of {', '.join(FAMILIES)} at most once, at least one")
    models = models or {}
    recording, where = recording_arrays(recording, where)
    return FamilyFit.equal({
        family: fit_family(recording, family, key=key, shape=shape, model=models.get(family), where=where,
                           config=config, label_sigma=label_sigma, labels=labels)
        for family in families
    })  # fmt: skip

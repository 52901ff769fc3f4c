"""The σ per strike (`clashx.learn.strike_predictive`) on labels whose noise is known: the shipped square surrogate's
own predictions at known parameters, perturbed by a known relative noise per speed component."""

import jax
import numpy as np
import pytest

import clashx
from clashx.events import speed_vector
from clashx.learn import LabFit, predictive, predictive_calibration, strike_predictive
from clashx.scenes import geometry as geo
from clashx.scenes import sample_strikes

TAU = np.array([0.03, 0.05, 0.08])  # the labels' true relative noise of (vx, vy, r ωz)
TAU_TOL = 0.15  # relative: τ from 400 strikes (sampling spread 1/√(2·400) ≈ 3.5 %)
COVERAGE_TOL = 0.05  # 2000 evaluated strikes: a calibrated ellipsoid's coverage has a spread of ≈ 0.011
PRIOR_TOL = 1e-6  # a parameter held fixed has no spread, and none exceeds its prior


def _noisy(model, strikes, params, length, rng):
    """(labels as velocities (n, 3), true speed vectors + noise) at `params`."""
    u = np.asarray(speed_vector(np.asarray(clashx.predict(model, strikes, params), np.float64), length))
    u = u + TAU * np.linalg.norm(u, axis=1, keepdims=True) * rng.normal(size=u.shape)
    return u / np.array([1.0, 1.0, length]), u


@pytest.fixture(scope="module")
def fitted():
    model = clashx.shipped_surrogate("square")
    space, length = model.space, geo.characteristic_length("square")
    params = space.vector()
    rng = np.random.default_rng(0)
    strikes = np.asarray(sample_strikes(3000, key=jax.random.PRNGKey(3)), np.float64)
    strikes = strikes[np.linalg.norm(np.asarray(clashx.predict(model, strikes, params)), axis=1) > 0.05]
    fit_s, eval_s = strikes[:400], strikes[400:2400]
    labels, _ = _noisy(model, fit_s, params, length, rng)
    _, u_eval = _noisy(model, eval_s, params, length, rng)
    prior = {n: None for n in space.names} | {"mass": 1.0, "torsion": 0.0}
    lab = LabFit(
        params, np.zeros(space.size), model, {"strike": fit_s, "post_velocity": labels}, np.arange(len(fit_s)),
        {"joint": {"prior_std": prior}}, model,
    )  # fmt: skip
    pred = strike_predictive(lab, eval_s)
    return pred, predictive_calibration(pred, u_eval), space


def test_noise_is_recovered_per_component(fitted):
    pred, _, _ = fitted
    np.testing.assert_allclose(pred["tau"], TAU, rtol=TAU_TOL)


def test_ellipsoids_cover_what_they_claim(fitted):
    _, cal, _ = fitted
    assert abs(cal["coverage_50"] - 0.5) < COVERAGE_TOL, cal
    assert abs(cal["coverage_90"] - 0.9) < COVERAGE_TOL, cal


def test_priors_bound_the_parameters_spread(fitted):
    pred, _, space = fitted
    std = pred["param_std_unit"]
    assert std[space.index("torsion")] == 0.0
    assert std[space.index("mass")] <= 1.0 + PRIOR_TOL
    assert np.all(std <= np.sqrt(1 / 12) + PRIOR_TOL)  # the flat box's spread bounds the others


def test_the_median_scale_ignores_a_few_outlier_labels():
    """Three of 60 labels off by 50 %: the median-based τ stays within TAU_TOL of the bulk's, the RMS one does not."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 3)) + 2.0
    y = x + TAU * np.linalg.norm(x, axis=1, keepdims=True) * rng.normal(size=x.shape)
    y[:3] *= 1.5

    def fn(s, p):
        return s * p[0]

    def from_unit(u):
        return 0.5 + u

    taus = {s: predictive(fn, from_unit, np.array([0.5]), x, y, x[:2], noise_scale=s)["tau"] for s in ("mad", "rms")}
    np.testing.assert_allclose(taus["mad"], TAU, rtol=2 * TAU_TOL)  # 60 residuals: a median's spread is ≈ 16 %
    assert np.abs(taus["rms"] / TAU - 1).max() > 3 * TAU_TOL  # the RMS one is pulled up by the three
    with pytest.raises(ValueError, match="noise_scale"):
        predictive(fn, from_unit, np.array([0.5]), x, y, x[:2], noise_scale="std")

"""The σ per prediction (`clashx.learn.predictive`) against data whose noise and curvature are known.

Two instances of the one rule: the cube's first impact (`clashx.baselines.impact_predictive`) on a toy handler
with a closed-form posterior, and the strike (`clashx.learn.strike_predictive`) on the shipped square
surrogate's own predictions at known parameters, each perturbed by a known relative noise per speed component.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import clashx
from clashx.baselines import impact_calibration, impact_predictive
from clashx.events import speed_vector
from clashx.learn import LabFit, predictive, predictive_calibration, strike_predictive
from clashx.scenes import CUBE_INERTIA, CUBE_MASS, sample_strikes
from clashx.scenes import geometry as geo

R_GYR = np.sqrt(CUBE_INERTIA / CUBE_MASS)
TAU = {
    "cube": np.array([0.02, 0.03, 0.05, 0.04, 0.04, 0.06]),  # the true relative noise of (v, r ω)
    "strike": np.array([0.03, 0.05, 0.08]),  # of (vx, vy, r ωz)
}
TAU_TOL = 0.25  # relative: τ from 400 fit events (sampling spread 1/√(2·400) ≈ 3.5 %, a median's ≈ 4.5 %)
COVERAGE_TOL = 0.05  # 2000 evaluated events: a calibrated ellipsoid's coverage has a spread of ≈ 0.011
STD_TOL = 0.05  # relative, the Laplace one-sigma against the closed-form linear-regression one
PRIOR_TOL = 1e-6  # a parameter held fixed has no spread, and none exceeds its prior


# --- the cube: a toy handler ---------------------------------------------------------------------


def bounce(pre, params):
    """A toy handler: the vertical velocity reversed by restitution params[0]; params[1] does nothing."""
    return pre.at[12].set(-params[0] * pre[12])


def cube_from_unit(u):
    return jnp.asarray([0.2 + 0.6 * u[0], u[1]])


def _impacts(rng, n, e):
    """Level cubes (identity attitude) with random spins and velocities, and their noisy bounces."""
    pre = np.zeros((n, 13))
    pre[:, 0] = 1.0
    pre[:, 7:10] = rng.normal(0, 5, (n, 3))
    pre[:, 10:13] = rng.normal(0, 1, (n, 3))
    pre[:, 12] = -np.abs(pre[:, 12]) - 1.0
    post = pre.copy()
    post[:, 12] *= -e
    u = np.concatenate([post[:, 10:13], R_GYR * post[:, 7:10]], 1)
    noise = TAU["cube"] * np.linalg.norm(u, axis=1, keepdims=True) * rng.normal(size=(n, 6))
    post[:, 10:13] += noise[:, :3]
    post[:, 7:10] += noise[:, 3:] / R_GYR
    return pre, post


def _cube():
    rng = np.random.default_rng(0)
    pre_fit, post_fit = _impacts(rng, 400, 0.5)
    pre_eval, post_eval = _impacts(rng, 2000, 0.5)
    pred = impact_predictive(bounce, cube_from_unit, np.array([0.5, 0.5]), pre_fit, post_fit, pre_eval)
    return pred, impact_calibration(pred, post_eval), pre_fit


# --- the strike: the shipped surrogate -----------------------------------------------------------


def _noisy(model, strikes, params, length, rng):
    """(labels as velocities (n, 3), true speed vectors + noise) at `params`."""
    u = np.asarray(speed_vector(np.asarray(clashx.predict(model, strikes, params), np.float64), length))
    u = u + TAU["strike"] * np.linalg.norm(u, axis=1, keepdims=True) * rng.normal(size=u.shape)
    return u / np.array([1.0, 1.0, length]), u


def _strike():
    model = clashx.shipped_strike_surrogate("square")
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


@pytest.fixture(scope="module")
def cube():
    return _cube()


@pytest.fixture(scope="module")
def strike():
    return _strike()


@pytest.mark.parametrize("case", ["cube", "strike"])
def test_noise_is_recovered_per_component(case, request):
    pred = request.getfixturevalue(case)[0]
    np.testing.assert_allclose(pred["tau"], TAU[case], rtol=TAU_TOL)


@pytest.mark.parametrize("case", ["cube", "strike"])
def test_ellipsoids_cover_what_they_claim(case, request):
    cal = request.getfixturevalue(case)[1]
    assert abs(cal["coverage_50"] - 0.5) < COVERAGE_TOL, cal
    assert abs(cal["coverage_90"] - 0.9) < COVERAGE_TOL, cal


def test_parameter_std_is_the_regression_one_and_the_prior_where_unidentified(cube):
    """v_z' = −e v_z: weighted least squares in e has variance 1 / Σ (v_z² / (τ_z ‖u‖)²); u = (e − 0.2) / 0.6."""
    pred, _, pre_fit = cube
    post = pre_fit.copy()
    post[:, 12] *= -0.5
    norm = np.linalg.norm(np.concatenate([post[:, 10:13], R_GYR * post[:, 7:10]], 1), axis=1)
    info = np.sum((0.6 * pre_fit[:, 12]) ** 2 / (pred["tau"][2] * norm) ** 2) + 12.0
    np.testing.assert_allclose(pred["param_std_unit"][0], 1 / np.sqrt(info), rtol=STD_TOL)
    np.testing.assert_allclose(pred["param_std_unit"][1], np.sqrt(1 / 12), rtol=1e-6)


def test_the_strikes_priors_bound_the_parameters_spread(strike):
    pred, _, space = strike
    std = pred["param_std_unit"]
    assert std[space.index("torsion")] == 0.0
    assert np.all(std <= np.sqrt(1 / 12) + PRIOR_TOL)  # the box's spread bounds every other, the mass's prior too


def test_mismatched_fit_impacts_are_refused():
    with pytest.raises(ValueError, match="must match"):
        impact_predictive(
            bounce, cube_from_unit, np.array([0.5, 0.5]), np.zeros((3, 13)), np.zeros((2, 13)), np.zeros((1, 13))
        )


def test_noise_can_come_from_the_model_before_fine_tuning(cube):
    """A handler that fits the fit impacts worse (restitution off by 0.1) sets a wider vertical noise."""
    pred, _, pre_fit = cube
    rng = np.random.default_rng(0)
    _, post_fit = _impacts(rng, 400, 0.5)
    worse = impact_predictive(
        bounce, cube_from_unit, np.array([0.5, 0.5]), pre_fit, post_fit, pre_fit[:5],
        noise_from=lambda s, p: bounce(s, p + jnp.asarray([0.1, 0.0])),
    )  # fmt: skip
    np.testing.assert_allclose(worse["tau"][[0, 1, 3, 4, 5]], pred["tau"][[0, 1, 3, 4, 5]], rtol=1e-6)
    assert worse["tau"][2] > 1.5 * pred["tau"][2]


def test_the_median_scale_ignores_a_few_outlier_labels():
    """Three of 60 labels off by 50 %: the median-based τ stays near the bulk's, the RMS one does not."""
    rng = np.random.default_rng(1)
    tau = TAU["strike"]
    x = rng.normal(size=(60, 3)) + 2.0
    y = x + tau * np.linalg.norm(x, axis=1, keepdims=True) * rng.normal(size=x.shape)
    y[:3] *= 1.5

    def fn(s, p):
        return s * p[0]

    def from_unit(u):
        return 0.5 + u

    taus = {s: predictive(fn, from_unit, np.array([0.5]), x, y, x[:2], noise_scale=s)["tau"] for s in ("mad", "rms")}
    np.testing.assert_allclose(taus["mad"], tau, rtol=0.3)  # 60 residuals: a median's spread is ≈ 16 %
    assert np.abs(taus["rms"] / tau - 1).max() > 0.45  # the RMS one is pulled up by the three (+90 % here)
    with pytest.raises(ValueError, match="noise_scale"):
        predictive(fn, from_unit, np.array([0.5]), x, y, x[:2], noise_scale="std")

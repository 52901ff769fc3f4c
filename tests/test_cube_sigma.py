"""The σ per toss (`clashx.baselines.impact_predictive`) against a handler whose noise and curvature are known."""

import jax.numpy as jnp
import numpy as np
import pytest

from clashx.baselines import impact_calibration, impact_predictive
from clashx.scenes import CUBE_INERTIA, CUBE_MASS

R_GYR = np.sqrt(CUBE_INERTIA / CUBE_MASS)
TAU = np.array([0.02, 0.03, 0.05, 0.04, 0.04, 0.06])  # the true relative noise of each speed component
TAU_TOL = 0.25  # relative: τ estimated from 400 impacts (its sampling spread is 1/√(2·400) ≈ 3.5 %)
COVERAGE_TOL = 0.05  # 2000 evaluated impacts: a calibrated ellipsoid's coverage has a spread of ≈ 0.007
STD_TOL = 0.05  # relative, the Laplace one-sigma against the closed-form linear-regression one


def bounce(pre, params):
    """A toy handler: the vertical velocity reversed by restitution params[0]; params[1] does nothing."""
    return pre.at[12].set(-params[0] * pre[12])


def from_unit(u):
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
    noise = TAU * np.linalg.norm(u, axis=1, keepdims=True) * rng.normal(size=(n, 6))
    post[:, 10:13] += noise[:, :3]
    post[:, 7:10] += noise[:, 3:] / R_GYR
    return pre, post


@pytest.fixture(scope="module")
def predictive():
    rng = np.random.default_rng(0)
    e = 0.5
    pre_fit, post_fit = _impacts(rng, 400, e)
    pre_eval, post_eval = _impacts(rng, 2000, e)
    pred = impact_predictive(bounce, from_unit, np.array([0.5, 0.5]), pre_fit, post_fit, pre_eval)
    return pred, pre_fit, impact_calibration(pred, post_eval)


def test_noise_is_recovered_per_component(predictive):
    pred, _, _ = predictive
    np.testing.assert_allclose(pred["tau"], TAU, rtol=TAU_TOL)


def test_ellipsoids_cover_what_they_claim(predictive):
    _, _, cal = predictive
    assert abs(cal["coverage_50"] - 0.5) < COVERAGE_TOL, cal
    assert abs(cal["coverage_90"] - 0.9) < COVERAGE_TOL, cal


def test_parameter_std_is_the_regression_one_and_the_prior_where_unidentified(predictive):
    """v_z' = −e v_z: weighted least squares in e has variance 1 / Σ (v_z² / (τ_z ‖u‖)²); u = (e − 0.2) / 0.6."""
    pred, pre_fit, _ = predictive
    post = pre_fit.copy()
    post[:, 12] *= -0.5
    norm = np.linalg.norm(np.concatenate([post[:, 10:13], R_GYR * post[:, 7:10]], 1), axis=1)
    info = np.sum((0.6 * pre_fit[:, 12]) ** 2 / (pred["tau"][2] * norm) ** 2) + 12.0
    np.testing.assert_allclose(pred["param_std_unit"][0], 1 / np.sqrt(info), rtol=STD_TOL)
    np.testing.assert_allclose(pred["param_std_unit"][1], np.sqrt(1 / 12), rtol=1e-6)


def test_mismatched_fit_impacts_are_refused():
    with pytest.raises(ValueError, match="must match"):
        impact_predictive(
            bounce, from_unit, np.array([0.5, 0.5]), np.zeros((3, 13)), np.zeros((2, 13)), np.zeros((1, 13))
        )


def test_noise_can_come_from_the_model_before_fine_tuning(predictive):
    """A handler that fits the fit impacts worse (restitution off by 0.1) sets a wider vertical noise."""
    pred, pre_fit, _ = predictive
    rng = np.random.default_rng(0)
    _, post_fit = _impacts(rng, 400, 0.5)
    worse = impact_predictive(
        bounce, from_unit, np.array([0.5, 0.5]), pre_fit, post_fit, pre_fit[:5],
        noise_from=lambda s, p: bounce(s, p + jnp.asarray([0.1, 0.0])),
    )  # fmt: skip
    np.testing.assert_allclose(worse["tau"][[0, 1, 3, 4, 5]], pred["tau"][[0, 1, 3, 4, 5]], rtol=1e-6)
    assert worse["tau"][2] > 1.5 * pred["tau"][2]

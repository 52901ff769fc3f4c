"""Baselines of the accuracy bench: CMA-ES identification, MJX forward-mode gradients, MLP fits (clashx.baselines._baselines)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from clashx.baselines import _baselines as bl
from clashx.core._mjx import as_float64
from clashx.events._generate import sample_strikes
from clashx.events._metrics import relative_error
from clashx.scenes import _geometry as geo

SHAPE = "square"
TRUE_CONTACT = {"mu1": 0.4, "mu2": 0.3, "e1": 0.8}  # the synthetic events' (μ1, μ2, e1); the rest nominal
# CMA-ES (16 × 30) on noise-free events: the loss is piecewise smooth with jumps (contacts appear and
# vanish), so the search lands near the truth, not on it; within 6 % of each prior range, fit loss < 1e-3.
CMA_UNIT_TOL = 0.06
CMA_LOSS_TOL = 1e-3
# Forward mode (float64) against a central difference of step 1e-3 on a smooth piece of one strike
# (the velocity jumps where contacts appear or vanish): |J - FD| <= 2 % of the column's largest entry + 1e-3
# (m/s or rad/s per unit parameter).  Measured: agreement to 1e-5; float32 tangents miss by 300 % on ∂ωz/∂μ2.
FD_STEP = 1e-3
FD_REL_TOL = 0.02
FD_ABS_TOL = 1e-3
MLP_FIT_TOL = 0.03  # median relative error of an MLP on its own 10 training events
RESTART_RTOL = 1e-5  # the best of three vmapped CMA-ES restarts vs the same searches one by one (float32 ask/tell)


@pytest.fixture(scope="module")
def synthetic(strike_sims):
    """10 strikes from the prior with their MuJoCo C velocities at TRUE_PARAMS (no noise)."""
    sim = strike_sims(SHAPE)
    strikes = np.asarray(sample_strikes(10, key=jax.random.PRNGKey(1)), np.float64)
    return sim, strikes, bl.predict_c(sim, strikes, _true(sim))


def _true(sim):
    return sim.space.vector(**TRUE_CONTACT)


def test_cmaes_recovers_known_parameters(synthetic):
    sim, strikes, velocities = synthetic
    free = tuple(TRUE_CONTACT)
    res = bl.identify_cmaes(
        sim, strikes, velocities, key=jax.random.PRNGKey(0), population=16, generations=30, free=free,
        base=_true(sim),
    )  # fmt: skip
    unit_err = np.abs(np.asarray(sim.space.to_unit(res.params)) - np.asarray(sim.space.to_unit(_true(sim))))
    assert res.loss < CMA_LOSS_TOL
    assert np.all(unit_err < CMA_UNIT_TOL), (res.params, unit_err)
    assert res.evaluations == 16 * 30 * 10
    assert sim.space.check(res.params).shape == (sim.space.size,)  # inside the prior box
    # the reported loss is the loss of the reported parameters
    pred = bl.predict_c(sim, strikes, res.params)
    assert float(bl.relative_mse(pred, velocities, geo.characteristic_length(SHAPE))) == pytest.approx(
        res.loss, rel=1e-5
    )


F32_RTOL = 1e-6  # relative_error runs in JAX's float32
OUTLIER = 3.0  # one fit event's velocity scaled by this: a label far off, which weight 0 must take out of the fit


def test_cmaes_weights_take_an_outlier_out_of_the_fit(synthetic):
    """Weight 0 on a corrupted event: the search recovers the truth as on clean events; the loss is the weighted mean."""
    sim, strikes, velocities = synthetic
    length = geo.characteristic_length(SHAPE)
    corrupted = velocities.copy()
    corrupted[0] *= OUTLIER
    weights = np.ones(len(strikes))
    weights[0] = 0.0
    res = bl.identify_cmaes(
        sim, strikes, corrupted, key=jax.random.PRNGKey(0), population=16, generations=30, free=tuple(TRUE_CONTACT),
        base=_true(sim), weights=weights,
    )  # fmt: skip
    unit_err = np.abs(np.asarray(sim.space.to_unit(res.params)) - np.asarray(sim.space.to_unit(_true(sim))))
    assert np.all(unit_err < CMA_UNIT_TOL), (res.params, unit_err)
    err = np.asarray(relative_error(bl.predict_c(sim, strikes, res.params), corrupted, length))
    assert res.loss == pytest.approx(np.mean(weights / weights.mean() * err**2), rel=1e-5)
    assert res.loss < CMA_LOSS_TOL
    with pytest.raises(ValueError, match="identify_cmaes's weights must be 10 finite"):
        bl.identify_cmaes(sim, strikes, corrupted, key=jax.random.PRNGKey(0), generations=1, weights=-weights)


def test_mjx_residuals_are_the_weighted_relative_errors():
    """identify_mjx's residuals (speed-vector differences times `_residual_gain`) square-sum to the weighted loss."""
    rng = np.random.default_rng(0)
    length = geo.characteristic_length(SHAPE)
    y, v = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    w = rng.uniform(0.0, 2.0, 6)
    w = w / w.mean()
    r = (v - y) * np.array([1.0, 1.0, length]) * bl._residual_gain(y, length, w)
    err = np.asarray(relative_error(v, y, length))
    assert np.sum(r**2) == pytest.approx(np.mean(w * err**2), rel=F32_RTOL)


def _rastrigin(u):
    """A loss with many local minima over the unit box (global minimum 0 at u = 0.3)."""
    x = 5.12 * (np.asarray(u) - 0.3)
    return 10 * x.shape[1] + np.sum(x**2 - 10 * np.cos(2 * np.pi * x), axis=1)


def test_cmaes_restarts_are_independent_searches_in_one_batch():
    from clashx.optimize import cmaes_in_box

    calls = []

    def losses(u):
        calls.append(len(u))
        return _rastrigin(u)

    kw = dict(population=8, generations=12, std_init=0.3)
    key = jax.random.PRNGKey(4)
    u, loss, _ = cmaes_in_box(losses, np.full(2, 0.8), key=key, restarts=3, **kw)
    assert calls == [24] * 12  # every restart's population in one call per generation
    alone = [cmaes_in_box(_rastrigin, np.full(2, 0.8), key=k, **kw) for k in jax.random.split(key, 3)]
    # the best of the restarts is the best of the same searches run one by one
    assert loss == pytest.approx(min(a[1] for a in alone), rel=RESTART_RTOL)
    assert float(_rastrigin(np.asarray(u)[None])[0]) == pytest.approx(loss, rel=1e-12)
    with pytest.raises(ValueError, match="restarts must be at least 1"):
        cmaes_in_box(_rastrigin, np.full(2, 0.8), key=key, restarts=0, **kw)


def test_mjx_forward_mode_jacobian_matches_finite_difference(strike_sims):
    # float64 inside a context only (other tests stay float32); float32 tangents are wrong (bl.as_float64)
    with jax.enable_x64(True):
        sim = as_float64(strike_sims(SHAPE))
        strikes = jnp.array([[math.pi / 3, 0.1, 0.5]])
        p = sim.space.size
        params = jnp.asarray(sim.space.vector(com_x=0.002, torsion=0.01))
        v, jac = bl.mjx_velocity_jacobian(sim, strikes, params)
        assert jac.dtype == jnp.float64 and jac.shape == (1, 3, p)
        span = np.array(sim.space.high) - np.array(sim.space.low)
        for j in range(p):
            e = jnp.zeros(p).at[j].set(FD_STEP * span[j])
            fd = (
                bl.mjx_velocity_jacobian(sim, strikes, params + e)[0]
                - bl.mjx_velocity_jacobian(sim, strikes, params - e)[0]
            )
            fd = np.asarray(fd[0]) / (2 * FD_STEP)  # per unit of the prior range, as col
            col = np.asarray(jac[0, :, j]) * span[j]  # per unit of the prior range
            tol = FD_REL_TOL * np.abs(col).max() + FD_ABS_TOL
            assert np.all(np.abs(col - fd) <= tol), (sim.space.names[j], col, fd)
        assert np.all(np.isfinite(v)) and np.linalg.norm(v) > 0.1  # the striker touched the block


def test_mlp_and_residual_fit_their_training_data(synthetic):
    sim, strikes, velocities = synthetic
    length = geo.characteristic_length(SHAPE)
    config = bl.MLPConfig(weight_decay=1e-6)
    mlp = bl.train_velocity_mlp(strikes, velocities, length, key=jax.random.PRNGKey(0), config=config)
    err = np.asarray(relative_error(bl.predict_mlp(mlp, strikes), velocities, length))
    assert np.median(err) < MLP_FIT_TOL, err

    base = bl.predict_c(sim, strikes, bl.nominal_params(sim))
    scale = float(np.sqrt(np.mean(np.sum((velocities * [1, 1, length]) ** 2, -1))))
    res = bl.train_velocity_mlp(
        strikes, velocities - base, length, key=jax.random.PRNGKey(1), scale=scale, config=config
    )
    err = np.asarray(relative_error(base + bl.predict_mlp(res, strikes), velocities, length))
    assert np.median(err) < MLP_FIT_TOL, err
    assert np.median(np.asarray(relative_error(base, velocities, length))) > 3 * MLP_FIT_TOL  # the residual did work


def test_weight_decay_cross_validation_is_deterministic(synthetic):
    _, strikes, velocities = synthetic
    length = geo.characteristic_length(SHAPE)
    config = bl.MLPConfig(steps=200)
    candidates = (1e-4, 1e-2, 1.0)
    a = bl.choose_weight_decay(
        strikes, velocities, length, key=jax.random.PRNGKey(0), config=config, candidates=candidates
    )
    b = bl.choose_weight_decay(
        strikes, velocities, length, key=jax.random.PRNGKey(0), config=config, candidates=candidates
    )
    assert a[0] in candidates
    assert a[1].shape == (3,) and np.all(np.isfinite(a[1]))
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])

"""The cube's second impact family, the rigid impulse law (`clashx.scenes._cube_rigid`), against analytic cases."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from clashx.baselines import identify_handler_impacts, identify_rigid_impacts, impact_posts, impact_speed_errors
from clashx.core import quat_exp, quat_to_mat
from clashx.learn import identify_cube
from clashx.scenes import (
    CORNER_SIGNS,
    CUBE_INERTIA,
    CUBE_MASS,
    HALF,
    RIGID_HIGH,
    RIGID_LOW,
    WINDOW,
    rigid_cube_window,
    rigid_from_unit,
    rigid_space,
    rigid_to_unit,
    rigid_windows,
)
from clashx.scenes._cube_rigid import STEPS
from clashx.surrogate import make_cube_surrogate

G = 9.81
FLAT_TOL = 0.01  # m/s: a flat landing's bounce (the sweeps converge to within 0.2 % of it)
SLIDE_TOL = 0.015  # m/s: a flat slide's Coulomb deceleration over the window (the corners' share of the load)
ENERGY_TOL = 0.01  # relative: e_n, |e_t| ≤ 1 conserve energy at most (an exact single impulse: to rounding);
# stepped sweeps over re-touching corners gain up to 0.5 % at e_n = e_t = 1
RECOVER_TOL = 0.02  # mean relative speed error of a fit to the law's own impacts
BATCH_TOL = 1e-5  # float32: a vmapped block and single calls round apart (5e-6 seen)

window = jax.jit(rigid_cube_window)


def _flat(v):
    """A cube resting level on the table (corners at z = 0) with centre velocity v."""
    return np.r_[1.0, 0, 0, 0, 0, 0, HALF, 0, 0, 0, v]


@pytest.fixture(scope="module")
def corner_impact():
    q = np.asarray(quat_exp(jnp.array([0.3, 0.5, 0.1])))
    z0 = -(HALF * CORNER_SIGNS @ np.asarray(quat_to_mat(jnp.asarray(q))).T)[:, 2].min()
    return np.r_[q, 0, 0, z0, 1.0, 2.0, 0.0, 1.0, 0.0, -1.5]


@pytest.mark.parametrize("e_n", [0.0, 0.5, 1.0])
def test_flat_landing_bounces_by_newton(e_n):
    out = np.asarray(window(jnp.asarray(_flat([0.0, 0.0, -1.0]), jnp.float32), jnp.array([e_n, 0.0, 0.5, 1.0])))
    dt = WINDOW / STEPS
    expected = e_n * (1.0 + G * dt) - G * (WINDOW - dt) * (e_n > 0)  # the first step's gravity is in the approach
    assert out[12] == pytest.approx(expected, abs=FLAT_TOL)
    assert np.abs(out[7:10]).max() < FLAT_TOL / HALF  # no spin from a symmetric landing


def test_flat_slide_decelerates_by_coulomb():
    mu = 0.5
    out = np.asarray(window(jnp.asarray(_flat([1.0, 0.0, 0.0]), jnp.float32), jnp.array([0.0, 0.0, mu, 1.0])))
    assert out[10] == pytest.approx(1.0 - mu * G * WINDOW, abs=SLIDE_TOL)
    assert abs(out[12]) < SLIDE_TOL  # it neither lifts nor sinks


@pytest.mark.parametrize("params", [[0.5, 0.0, 0.3, 1.0], [1.0, 1.0, 1.5, 1.0], [0.0, -0.5, 1.0, 2.0]])
def test_corner_impact_gains_no_energy(corner_impact, params):
    pre = corner_impact
    out = np.asarray(window(jnp.asarray(pre, jnp.float32), jnp.asarray(params, jnp.float32)))
    inertia = params[3] * CUBE_INERTIA
    w_pre, w_out = (np.asarray(quat_to_mat(jnp.asarray(s[:4]))) @ s[7:10] for s in (pre, out))

    def energy(s, w):
        return 0.5 * CUBE_MASS * s[10:13] @ s[10:13] + 0.5 * inertia * w @ w + CUBE_MASS * G * s[6]

    assert energy(out, w_out) <= energy(pre, w_pre) * (1 + ENERGY_TOL)
    assert out[12] > pre[12]  # the table pushed it up


def test_identify_rigid_recovers_its_own_impacts(corner_impact):
    rng = np.random.default_rng(0)
    pre = np.tile(corner_impact, (6, 1))
    pre[:, 10:12] += rng.normal(0, 0.5, (6, 2))  # other throws at the same touch-down
    truth = np.array([0.3, 0.5, 0.2, 1.5])
    post = impact_posts(rigid_cube_window, pre, truth)[0]
    params, loss = identify_rigid_impacts(pre, post, key=jax.random.PRNGKey(0))  # one search stalls at 0.23
    assert loss < RECOVER_TOL
    assert params[2] == pytest.approx(truth[2], abs=0.02)  # μ and the inertia are what the impacts pin
    assert params[3] == pytest.approx(truth[3], abs=0.1)
    assert impact_speed_errors(impact_posts(rigid_cube_window, pre, params)[0], post).mean() == pytest.approx(
        loss, abs=1e-6
    )


def test_identify_rigid_rejects_mismatched_impacts():
    with pytest.raises(ValueError, match="must both be"):
        identify_rigid_impacts(np.zeros((3, 13)), np.zeros((2, 13)), key=jax.random.PRNGKey(0))


HYBRID_RIGID_TOL = 1e-4  # m: the hybrid's frames after a landing against the law's own post-window state, in flight


def test_hybrid_takes_the_rigid_law_as_its_handler():
    """The one hybrid rule with the rigid law (4 parameters, MJX's 3 between impacts): a flat cube dropped with
    a forward speed leaves its first window in the law's state, and flies from there."""
    from clashx.hybrid import hybrid_tosses
    from clashx.scenes import FRAME_DT, free_flight, make_toss_scene

    h, vx, n_frames = 0.1, 0.3, 40
    state0 = np.r_[1.0, 0, 0, 0, 0, 0, HALF + h, 0, 0, 0, vx, 0, 0]
    t_land = np.sqrt(2 * h / G)
    pre = np.r_[1.0, 0, 0, 0, vx * t_land, 0, HALF, 0, 0, 0, vx, 0, -G * t_land]
    params = np.array([0.7, 0.0, 0.5, 1.0])
    post = window(jnp.asarray(pre, jnp.float32), jnp.asarray(params, jnp.float32))
    frames = hybrid_tosses(
        make_toss_scene(), rigid_cube_window, state0[None], params, n_frames, rest_params=np.array([0.3, 0.01, 1.0]),
        every_impact=True,
    ).frames[0]  # fmt: skip
    t = np.arange(n_frames) * FRAME_DT
    t_out = t_land + WINDOW
    v_up = float(post[12])
    flying = (t > t_out) & (t < t_out + 2 * v_up / G)  # after the window, before the next landing
    assert flying.sum() >= 3
    want = np.array([free_flight(post, tt - t_out) for tt in t[flying]])
    assert np.abs(frames[flying, 4:7] - want[:, 4:7]).max() < HYBRID_RIGID_TOL


def test_the_rigid_box_maps_both_ways_in_numpy_and_in_jax():
    """`rigid_to_unit` inverts `rigid_from_unit`; a JAX array maps to the same values and is differentiable."""
    u = np.array([0.1, 0.5, 0.7, 0.3])
    p = rigid_from_unit(u)
    np.testing.assert_allclose(rigid_to_unit(p), u, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(rigid_from_unit(jnp.asarray(u, jnp.float32))), p, rtol=1e-6)
    jac = jax.jacfwd(rigid_from_unit)(jnp.asarray(u, jnp.float32))
    np.testing.assert_allclose(np.diag(np.asarray(jac)), np.asarray(RIGID_HIGH) - np.asarray(RIGID_LOW), rtol=1e-6)


def test_rigid_space_is_the_laws_box_and_its_windows_are_the_laws(corner_impact):
    """`rigid_space()` maps the unit box as `rigid_from_unit` does and checks the same bounds; `rigid_windows` (blocks
    of the batching policy, each impact at its own parameters) equals the law called one impact at a time; a cube
    surrogate conditioned on the space builds and identifies (what `bench/cube_rigid_distil.py` trains)."""
    space = rigid_space()
    u = np.random.default_rng(0).random((5, 4))
    np.testing.assert_allclose(np.asarray(space.from_unit(jnp.asarray(u, jnp.float32))), rigid_from_unit(u), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(space.to_unit(jnp.asarray(rigid_from_unit(u), jnp.float32))), u, atol=1e-6)
    with pytest.raises(ValueError, match="e_n=1.5 is outside the prior range"):
        space.check(np.array([1.5, 0.0, 0.5, 1.0]))
    pre = np.stack([corner_impact, _flat(np.array([0.3, 0.0, -1.0]))] * 3)
    params = rigid_from_unit(u[:, :4].repeat(2, 0)[: len(pre)] * 0.9 + 0.05)
    got = rigid_windows(pre, params, block=4)  # two blocks, the last padded
    want = np.stack(
        [np.asarray(window(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))) for a, b in zip(pre, params)]
    )
    np.testing.assert_allclose(got, want, rtol=0, atol=BATCH_TOL)
    with pytest.raises(ValueError, match="rigid_windows"):
        rigid_windows(pre, params[:, :3])
    model = make_cube_surrogate(key=jax.random.PRNGKey(0), space=space, width=16, depth=1)
    p, loss = identify_cube(model, pre, got, key=jax.random.PRNGKey(1), n_starts=2, iterations=3)
    space.check(p)
    assert np.isfinite(loss)
    p, loss = identify_handler_impacts(model, rigid_from_unit, 4, pre, got, key=jax.random.PRNGKey(2), generations=3)
    space.check(p)
    assert loss == pytest.approx(np.mean(impact_speed_errors(impact_posts(model, pre, p)[0], got)), rel=1e-5)


NOISE_TOL = 1e-5  # float32: the speed vector moved by τ ⊙ z ‖u‖, against the same in float64


def test_noisy_impact_moves_the_speed_vector_by_its_noise_draw(corner_impact):
    """`NoisyImpact` with z = 0 is its handler; with z it moves u = (v, r ω world) by exactly τ ⊙ z ‖u‖."""
    from clashx.baselines import speed_vectors
    from clashx.workflows._cube_ensemble import NoisyImpact

    params = np.array([0.4, 0.1, 0.5, 1.0])
    tau = np.array([0.1, 0.2, 0.05, 0.3, 0.1, 0.2])
    handler = NoisyImpact(rigid_cube_window, 4, jnp.asarray(tau, jnp.float32))
    plain = np.asarray(window(jnp.asarray(corner_impact, jnp.float32), jnp.asarray(params, jnp.float32)))
    same = np.asarray(handler(jnp.asarray(corner_impact, jnp.float32), jnp.asarray(np.r_[params, np.zeros(6)])))
    np.testing.assert_allclose(same, plain, atol=NOISE_TOL)
    z = np.array([1.0, -0.5, 2.0, 0.3, -1.0, 0.7])
    moved = np.asarray(handler(jnp.asarray(corner_impact, jnp.float32), jnp.asarray(np.r_[params, z], jnp.float32)))
    u = speed_vectors(plain)
    np.testing.assert_allclose(speed_vectors(moved), u + tau * z * np.linalg.norm(u), atol=NOISE_TOL)
    # pose untouched: exactly the handler's own (z = 0, the same eager ops) pose; `plain` is jitted, so it differs
    # from both by float32 rounding
    np.testing.assert_array_equal(moved[:7], same[:7])


def test_with_speed_vector_inverts_speed_vector(corner_impact):
    """A state whose velocities are set from its own speed vector is itself; from another u, its speed vector is u."""
    from clashx.baselines import speed_vector, with_speed_vector

    state = jnp.asarray(corner_impact, jnp.float32)
    np.testing.assert_allclose(with_speed_vector(state, speed_vector(state)), state, atol=NOISE_TOL)
    u = jnp.array([0.3, -0.2, 1.1, 0.05, 0.4, -0.3], jnp.float32)
    np.testing.assert_allclose(speed_vector(with_speed_vector(state, u)), u, atol=NOISE_TOL)


def test_posterior_mean_of_a_certain_fit_is_its_single_rollout():
    """`ensemble_tosses` with no posterior spread: every member is its toss's rollout through the fitted handler,
    and so is their mean (two different tosses, so that members stay with their toss); with a spread in e_n, the
    mean's bounce moves."""
    from clashx.hybrid import hybrid_tosses
    from clashx.scenes import make_toss_scene
    from clashx.workflows._cube_ensemble import ensemble_tosses

    sim = make_toss_scene()
    state0 = np.array([np.r_[1.0, 0, 0, 0, 0, 0, HALF + h, 0, 0, 0, vx, 0, 0] for h, vx in ((0.1, 0.3), (0.15, -0.2))])
    params, rest, n_frames = np.array([0.7, 0.0, 0.5, 1.0]), np.array([0.3, 0.01, 1.0]), 40
    u_hat = np.asarray(rigid_to_unit(jnp.asarray(params)))
    single = hybrid_tosses(sim, rigid_cube_window, state0, params, n_frames, rest_params=rest, every_impact=True).frames
    certain = {"param_cov_unit": np.zeros((4, 4)), "tau": np.zeros(6)}
    mean = ensemble_tosses(
        sim, rigid_cube_window, rigid_from_unit, u_hat, certain, state0, n_frames, rest_params=rest, samples=2,
        key=jax.random.PRNGKey(0),
    )  # fmt: skip
    np.testing.assert_allclose(mean, single, atol=NOISE_TOL)
    loose = {"param_cov_unit": np.diag([0.02, 0.0, 0.0, 0.0]), "tau": np.zeros(6)}  # e_n uncertain
    spread = ensemble_tosses(
        sim, rigid_cube_window, rigid_from_unit, u_hat, loose, state0, n_frames, rest_params=rest, samples=2,
        key=jax.random.PRNGKey(0),
    )  # fmt: skip
    assert np.abs(spread[:, :, 6] - single[:, :, 6]).max(axis=1).min() > 1e-3  # each toss's bounce moved
    with pytest.raises(ValueError, match="at least 1 member"):
        ensemble_tosses(sim, rigid_cube_window, rigid_from_unit, u_hat, certain, state0, n_frames, rest_params=rest,
                        samples=0, key=jax.random.PRNGKey(0))  # fmt: skip

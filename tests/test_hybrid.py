"""The hybrid simulator and strike optimisation, against MuJoCo C, analytic cases and finite differences."""

from __future__ import annotations

import json
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import clashx
from clashx import hybrid as _hybrid
from clashx.events._generate import sample_strikes
from clashx.optimize import _optimize
from clashx.scenes import _geometry as geo
from clashx.scenes import _mjcf, _strike
from clashx.scenes import _strike_impact as hooks
from clashx.workflows import _cli

ROUND_TRIP_TOL = 1e-4  # rad and m/s: strike → launch state → strike, float32
ENGINE_TOL_M = 2e-3  # MJX hybrid vs the MuJoCo C fallback, same rule and handler (measured ≤ 0.9 mm)
TOUCH_TOL_S = 1e-5  # s: the crossing, interpolated from float32 separations of float32 (MJX) or float64 (C) states
# The hybrid with the true post-impact velocity vs full-contact MuJoCo C: the window's displacement is
# not predicted (64 prior strikes per shape: median 0.8-1.3 mm, p90 4.1-5.6 mm, max 11-21 mm).
ORACLE_MEDIAN_M = 3e-3
ORACLE_P90_M = 8e-3
STEP_MEDIAN_M = 2.5e-3  # the hybrid at 4 ms, then 8 ms, vs at 1 ms throughout (full contact: 1.2-1.7 mm)
FD_RTOL = 2e-3  # reverse-mode gradient through a float64 rollout vs a central difference
STRIKE_ATOL = 1e-6  # units of the strike ranges (rad, m/s): one search per target vs the vmapped many
POSE_ATOL = 1e-5  # m, rad: the chosen strike's rest pose, batched with other targets or alone (float32)


class TableHandler(eqx.Module):
    """A handler that returns the recorded velocity of the nearest strike in a table (an oracle)."""

    strikes: jax.Array
    velocities: jax.Array

    def __call__(self, strike, params):
        i = jnp.argmin(jnp.sum((self.strikes - strike) ** 2, axis=1))
        return self.velocities[i]


class LinearHandler(eqx.Module):
    """A smooth handler (block velocity ∝ v_pre, turned by θ1) for gradient tests."""

    def __call__(self, strike, params):
        theta1, v = strike[1], strike[2]
        return jnp.stack([0.3 * v * jnp.sin(theta1), -0.6 * v / (1.0 + 0.2 * params[1]), 2.0 * v * theta1])


@pytest.fixture(scope="module")
def hybrid_sims(strike_sims):
    cache = {}

    def get(shape):
        if shape not in cache:
            cache[shape] = _hybrid.make_strike_hybrid(shape, sim=strike_sims(shape))
        return cache[shape]

    return get


def _draw(sim, n, seed):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return np.asarray(sample_strikes(n, key=k1), np.float64), np.asarray(sim.space.sample(n, key=k2), np.float64)


@pytest.fixture(scope="module")
def square_oracle(strike_sims):
    """16 prior strikes on the square, their full-contact MuJoCo C outcome, and an oracle handler."""
    sim = strike_sims("square")
    strikes, params = _draw(sim, 16, seed=3)
    ev = clashx.simulate_strikes_c(sim, strikes, params)
    return strikes, params, ev, TableHandler(jnp.asarray(strikes), jnp.asarray(ev.post_velocity))


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_strike_read_back_from_the_launch_state(hybrid_sims, shape):
    hs = hybrid_sims(shape)
    strikes, _ = _draw(hs.sim, 32, seed=1)
    q, v = _strike.initial_states_batch(hs.sim, jnp.asarray(strikes))
    back = jax.vmap(lambda a, b: hooks.strike_of_state(hs.sim.bodies, a, b))(q, v)
    np.testing.assert_allclose(np.asarray(back), strikes, atol=ROUND_TRIP_TOL)
    # the striker starts GAP away and does not touch yet
    sep = np.asarray(jax.vmap(hs.sim.separation)(q))
    assert (sep > 0).all()


def test_separation_is_the_gap_for_a_square_on_strike(hybrid_sims):
    hs = hybrid_sims("square")
    q, _ = _strike.initial_state(hs.sim, jnp.array([math.pi / 2, 0.0, 0.5]))  # face to face, GAP apart
    assert float(hs.sim.separation(q)) == pytest.approx(geo.GAP, abs=1e-6)
    q_in = q.at[8].add(-(geo.GAP + 0.003))  # the striker moves 3 mm into the block along -y
    assert float(hs.sim.separation(q_in)) == pytest.approx(-0.003, abs=1e-6)


def test_energy_guard_clamps_and_counts(hybrid_sims):
    hs = hybrid_sims("triangle")
    b = hs.sim.bodies
    strike = jnp.array([1.3, 0.1, 0.6])
    q, v = _strike.initial_state(hs.sim, strike)
    e_pre = 0.5 * b.striker_mass * 0.6**2
    ratio = b.block_mass / b.striker_mass

    def energy(
        vel,
    ):  # block at `vel` (block frame = world here), the striker keeping the momentum the block did not take
        block_v = np.asarray(vel[:2])
        striker_v = np.asarray(v[6:8]) - ratio * block_v  # the triangle's centre of mass is its origin
        return float(hooks._kinetic(b, 0.0, jnp.asarray(block_v), vel[2], jnp.asarray(striker_v)))

    wild, clamped = hooks.guard(b, q, v, jnp.array([0.5, -3.0, 20.0]))
    assert bool(clamped)
    assert energy(wild) == pytest.approx((1 + hooks.ENERGY_SLACK) * e_pre, rel=1e-4)
    tame, clamped = hooks.guard(b, q, v, jnp.array([0.0, -0.5, 1.0]))
    assert not bool(clamped)
    np.testing.assert_allclose(np.asarray(tame), [0.0, -0.5, 1.0], atol=1e-6)
    assert energy(tame) < e_pre
    # at release the block moves on at that velocity and the arm has parked the striker
    post = hooks.release_state(b, _strike.RELEASE_AFTER, jnp.concatenate([q, v]), tame)
    np.testing.assert_allclose(np.asarray(post[7:10]), 0.0)
    np.testing.assert_allclose(np.asarray(post[16:19]), 0.0)
    turn = float(tame[2]) * _strike.RELEASE_AFTER
    assert float(hooks.block_pose(post[:10])[2] - hooks.block_pose(q)[2]) == pytest.approx(turn, abs=1e-6)


def test_mjx_hybrid_matches_the_c_fallback_with_per_world_parameters(hybrid_sims, square_oracle):
    hs = hybrid_sims("square")
    strikes, params, _, oracle = square_oracle
    s, p = strikes[:8], params[:8]
    c = _hybrid.strike_rollouts_c(hs, oracle, s, p)
    m = _hybrid.strike_rollouts(hs, oracle, jnp.asarray(s), jnp.asarray(p))
    assert c.touched.all() and np.asarray(m.touched).all()
    np.testing.assert_allclose(np.asarray(m.t_touch), c.t_touch, atol=TOUCH_TOL_S)
    np.testing.assert_allclose(np.asarray(m.post_velocity), c.post_velocity, atol=1e-5)
    d = np.linalg.norm(np.asarray(m.rest_pose)[:, :2] - c.rest_pose[:, :2], axis=1)
    assert d.max() < ENGINE_TOL_M, d
    # per-world parameters act per world: the same strike slides farther on less friction
    sp = hs.sim.space
    two = _hybrid.strike_rollouts(
        hs, oracle, jnp.asarray(s[[0, 0]]), jnp.asarray([sp.vector(mu2=0.1), sp.vector(mu2=0.9)])
    )
    reach = np.linalg.norm(np.asarray(two.rest_pose)[:, :2], axis=1)
    assert reach[0] > 2 * reach[1]


def test_hybrid_with_the_true_velocity_lands_where_full_contact_does(hybrid_sims, square_oracle):
    hs = hybrid_sims("square")
    strikes, params, ev, oracle = square_oracle
    h = _hybrid.strike_rollouts_c(hs, oracle, strikes, params)
    d = np.linalg.norm(h.rest_pose[:, :2] - ev.rest_pose[:, :2], axis=1)
    assert np.median(d) < ORACLE_MEDIAN_M and np.percentile(d, 90) < ORACLE_P90_M, d
    assert not h.clamped.any()


def test_larger_steps_after_the_impact_keep_the_rest_pose(hybrid_sims, square_oracle):
    hs = hybrid_sims("square")
    strikes, params, _, oracle = square_oracle
    fine = _hybrid.make_strike_hybrid(
        "square", sim=_strike.make_strike_scene("square", _mjcf.SolverSettings(dt_slide=1e-3)), dt_after=1e-3
    )
    assert fine.dt == fine.dt_after == pytest.approx(1e-3)
    assert hs.dt == pytest.approx(4e-3) and hs.dt_after == pytest.approx(8e-3)
    a = _hybrid.strike_rollouts_c(hs, oracle, strikes, params)
    b = _hybrid.strike_rollouts_c(fine, oracle, strikes, params)
    d = np.linalg.norm(a.rest_pose[:, :2] - b.rest_pose[:, :2], axis=1)
    assert np.median(d) < STEP_MEDIAN_M, d


@pytest.mark.parametrize("mode", ["grad", "jacfwd"])
def test_gradient_through_a_hybrid_rollout_matches_finite_differences(hybrid_sims, mode):
    # reverse mode needs MJX's solver to run one Newton iteration (its loop is a while_loop otherwise,
    # mujoco#2259); forward mode goes through the scene's own 16-iteration solver
    hs = _hybrid.make_strike_hybrid("square", differentiable=True) if mode == "grad" else hybrid_sims("square")
    handler = LinearHandler()
    with jax.enable_x64(True):
        hs64 = jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, hs)

        def final_y(x):  # x = (v_pre, μ2): the block's y after 0.12 s
            strike = jnp.stack([jnp.asarray(1.4, jnp.float64), jnp.asarray(0.05, jnp.float64), x[0]])
            params = jnp.stack([jnp.asarray(0.5, jnp.float64), x[1], jnp.asarray(1.0, jnp.float64)])
            r = _hybrid.strike_rollout(hs64, handler, strike, params, n_steps=30)
            return r.rest_pose[1], jnp.ceil(r.t_touch / hs.dt - 1e-9)  # the step the touch is found on

        x0 = jnp.array([0.5, 0.4])
        f = jax.jit(final_y)
        derivative = jax.grad if mode == "grad" else jax.jacfwd
        g = jax.jit(derivative(lambda x: final_y(x)[0]))(x0)
        assert np.isfinite(np.asarray(g)).all()
        eps = 1e-5
        for i in range(2):
            e = jnp.zeros(2).at[i].set(eps)
            (yp, tp), (ym, tm) = f(x0 + e), f(x0 - e)
            assert float(tp) == float(tm)  # the touch step is the same on both sides
            fd = (float(yp) - float(ym)) / (2 * eps)
            assert float(g[i]) == pytest.approx(fd, rel=FD_RTOL, abs=1e-6)
        assert float(g[0]) < 0  # a harder strike pushes the block farther along -y
        assert float(g[1]) > 0  # more ground friction, less far


def test_cmaes_on_both_hybrid_engines_finds_the_same_strike(hybrid_sims):
    hs = hybrid_sims("square")
    sims = {("square", "hybrid"): hs}
    params = hs.sim.space.vector(mu2=0.4)
    reach = _hybrid.strike_rollouts_c(hs, LinearHandler(), np.array([[1.2, 0.05, 0.6]]), params).rest_pose[0]
    config = _optimize.MBOConfig(population=8, generations=12)
    key = jax.random.PRNGKey(0)
    kw = dict(key=key, handler=LinearHandler(), sims=sims)
    host = _optimize.optimize_strike("cpu-hybrid", "square", params, np.zeros(3), reach, config, **kw)
    jit = _optimize.optimize_strike("mjx-hybrid", "square", params, np.zeros(3), reach, config, **kw)
    for r in (host, jit):  # the engines differ by ~0.1 mm, so the searches part ways after a few generations
        pos, _ = _optimize.pose_error(r.rest_pose, jnp.asarray(reach, jnp.float32))
        assert float(pos) < 0.01  # a reachable target is found within a centimetre
        assert np.all(np.diff(np.asarray(r.history)) <= 0)  # best-so-far never worsens
    # the predicted rest pose is what the engine gives for the chosen strike
    again = _hybrid.strike_rollouts_c(hs, LinearHandler(), np.asarray(host.strike, np.float64)[None], params)
    np.testing.assert_allclose(again.rest_pose[0], np.asarray(host.rest_pose), atol=1e-5)


def _analytic_rest(strikes):
    """A smooth stand-in for a simulator: strikes (n, 3) → rest poses (n, 3), exact in JAX and NumPy alike."""
    s = jnp.asarray(strikes, jnp.float32)
    return jnp.stack([0.2 * s[:, 2] * jnp.cos(s[:, 0]), -0.3 * s[:, 2] * jnp.sin(s[:, 1] + 0.3), 0.5 * s[:, 1]], 1)


def test_cmaes_over_many_targets_is_each_targets_own_search(hybrid_sims):
    config = _optimize.MBOConfig(population=8, generations=5)
    targets = jnp.asarray([[0.05, -0.1, 0.02], [0.1, -0.05, -0.05], [0.02, -0.2, 0.1]], jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(3), len(targets))
    many = _optimize.optimize_many_jit(_analytic_rest, targets, config, keys=keys)
    host = _optimize.optimize_many_host(lambda s: np.asarray(_analytic_rest(s)), targets, config, keys=keys)
    assert many.strike.shape == (3, 3) and many.history.shape == (3, 5)
    for i in range(len(targets)):  # the same keys give the same strikes as one search per target
        one = _optimize.optimize_jit(_analytic_rest, targets[i], config, key=keys[i])
        np.testing.assert_allclose(np.asarray(many.strike[i]), np.asarray(one.strike), atol=STRIKE_ATOL)
        np.testing.assert_allclose(np.asarray(many.history[i]), np.asarray(one.history), atol=STRIKE_ATOL)
        np.testing.assert_allclose(np.asarray(host.strike[i]), np.asarray(one.strike), atol=STRIKE_ATOL)
    # and on a simulator: the CPU hybrid, t × population strikes in one C batch per generation
    hs = hybrid_sims("square")
    sims = {("square", "hybrid"): hs}
    params = hs.sim.space.vector(mu2=0.4)
    starts = np.array([[0.0, 0.0, 0.0], [0.1, 0.2, 1.0]])
    goals = np.array([[0.02, -0.12, 0.0], [0.15, 0.1, 0.9]])
    kw = dict(handler=LinearHandler(), sims=sims)
    key = jax.random.PRNGKey(1)
    both = _optimize.optimize_strikes("cpu-hybrid", "square", params, starts, goals, config, key=key, **kw)
    for i, k in enumerate(jax.random.split(key, 2)):
        one = _optimize.optimize_strike("cpu-hybrid", "square", params, starts[i], goals[i], config, key=k, **kw)
        np.testing.assert_allclose(np.asarray(both.strike[i]), np.asarray(one.strike), atol=STRIKE_ATOL)
        np.testing.assert_allclose(np.asarray(both.rest_pose[i]), np.asarray(one.rest_pose), atol=POSE_ATOL)


def test_start_frame_round_trip():
    start = jnp.array([0.3, -0.2, 2.5])
    pose = jnp.array([0.1, 0.4, -3.0])
    back = _optimize.to_world(_optimize.to_start_frame(pose, start), start)
    np.testing.assert_allclose(np.asarray(back[:2]), pose[:2], atol=1e-6)
    assert float(_optimize.wrap(back[2] - pose[2])) == pytest.approx(0.0, abs=1e-6)


def test_cli_optimize(tmp_path, capsys):
    model = clashx.make_strike_surrogate(
        "square", key=jax.random.PRNGKey(0), width=16, depth=1, out_mean=[0.0, -0.6, 0.0] * 2, out_std=[0.01] * 6
    )
    clashx.save_strike_surrogate(tmp_path / "run", model)
    space = clashx.strike_space()
    named = dict(zip(space.names, space.vector(mu2=0.4).tolist()))
    (tmp_path / "p.json").write_text(json.dumps({"shape": "square", "params": named}))
    out = tmp_path / "opt.json"
    args = ["optimize", "--model", str(tmp_path / "run"), "--params", str(tmp_path / "p.json"), "--shape", "square"]
    rc = _cli.main(
        [
            *args,
            "--start",
            "0.1,0,0",
            "--target",
            "0.1,-0.1,0",
            "--population",
            "8",
            "--generations",
            "3",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    (r,) = json.loads(out.read_text())["searches"]
    assert set(r["strike"]) == {"theta", "theta1", "v_pre"} and len(r["predicted_rest_pose"]) == 3
    assert len(r["history"]) == 3
    assert r["impact_clamped"] is False and len(r["post_velocity"]) == 3
    assert "predicted rest pose" in capsys.readouterr().out
    # many targets from a CSV: searched together, each the search of its row alone (its own key)
    csv = tmp_path / "targets.csv"
    csv.write_text("target_x,target_y,target_yaw,start_x,start_y,start_yaw\n0.1,-0.1,0,0.1,0,0\n0,-0.08,0.2,0,0,0\n")
    many = tmp_path / "many.json"
    fewer = ["--population", "8", "--generations", "3"]
    assert _cli.main([*args, "--targets", str(csv), *fewer, "--json", str(many)]) == 0
    both = json.loads(many.read_text())
    assert both["targets"] == 2 and [s["start"] for s in both["searches"]] == [[0.1, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert "target 2: strike" in capsys.readouterr().out
    csv.write_text("target_x,target_y\n0.1,0\n")
    assert _cli.main([*args, "--targets", str(csv), *fewer]) == 2
    assert "no column(s) target_yaw" in capsys.readouterr().err
    csv.write_text("target_x,target_y,target_yaw\n0.1,0,0\n0.1,zero,0\n")
    assert _cli.main([*args, "--targets", str(csv), *fewer]) == 2
    assert "line 3, target_y: 'zero' is not a number" in capsys.readouterr().err
    csv.write_text("target_x,target_y,target_yaw\n0.1,0,0\n14,0,0\n")
    assert _cli.main([*args, "--targets", str(csv), *fewer]) == 2
    assert "line 3, target 14,0" in capsys.readouterr().err
    assert _cli.main([*args, "--targets", str(csv), "--target", "0,0,0"]) == 2  # one or the other
    assert "not allowed with argument" in capsys.readouterr().err
    assert _cli.main([*args, "--target", "0.1,-0.1"]) == 2
    assert "expected three numbers" in capsys.readouterr().err
    bad = ["optimize", "--model", str(tmp_path / "run"), "--params", str(tmp_path / "p.json"), "--shape", "triangle"]
    assert _cli.main([*bad, "--target", "0,0,0"]) == 2
    assert "not 'triangle'" in capsys.readouterr().err
    assert not (tmp_path / "none.json").exists()


def test_identify_from_rest_recovers_the_ground_friction(hybrid_sims):
    hs = hybrid_sims("square")
    strikes, _ = _draw(hs.sim, 8, seed=11)
    sp = hs.sim.space
    truth = sp.vector(mu2=0.3)

    def rest_of(s, p):
        return _hybrid.strike_rollouts_c(hs, LinearHandler(), s, p).rest_pose

    rest = rest_of(strikes, np.broadcast_to(truth, (8, sp.size)))
    params, loss = _optimize.identify_from_rest(
        rest_of, sp, sp.vector(mu2=0.7), strikes, rest, key=jax.random.PRNGKey(0), free=("mu1", "mu2", "e1")
    )
    assert params[sp.index("mu2")] == pytest.approx(0.3, abs=0.03)
    assert loss < 1e-3

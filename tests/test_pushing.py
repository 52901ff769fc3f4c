"""Sequential pushing: the environment against the simulator, the task's rules, PPO training, reload, the planners."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from clashx.pushing import _planner, _response, _routes, _search, _value
from clashx.pushing._env import PushEnv, Task, observe
from clashx.pushing._episode import policy_controller, run_episode, table_rig
from clashx.pushing._train import PPOConfig, load_policy, save_policy, train_policy
from clashx.scenes import _geometry as geo
from clashx.scenes._spaces import strike_space

NODE_TOL = 1e-6  # m, rad: the table at its grid points is the simulator (float32 storage)
EXACT_TOL = 1e-5  # m, rad: the callback step against the direct rollout composed by hand (float32)
# trilinear table against the simulator off the grid, m and rad (measured at μ2 = 0.3, 24 strikes)
TABLE_POS_MEDIAN_TOL = 2e-3  # 1.2 mm measured
TABLE_POS_MAX_TOL = 6e-3  # m: worst of 24 strikes (4.1 mm measured at μ2 = 0.3)
TABLE_YAW_MEDIAN_TOL = 0.03  # rad (0.017 measured at μ2 = 0.3)
TABLE_YAW_MAX_TOL = 0.2  # rad (0.11 measured)
SMALL_GRID = (4, 3, 3)
# a cheap whole-route search for tests: a coarser cost-to-go (5 cm, 16 yaws) backed up over 63 actions
SMALL_SEARCH = _search.SearchConfig(beam=32, depth=6, grid=(13, 5, 5), value_grid=(22, 11, 16), value_actions=(7, 3, 3))
# strikes: value iteration against breadth-first search on a lattice of pushes and turns; exact where the optimal
# path stays on grid points, 0.073 measured where it leaves them (a push at a turned yaw is interpolated)
VALUE_STRIKES_TOL = 0.1
WEIGHT_ATOL = 1e-5  # the belief's log-weights against the Gaussian likelihood by hand (float32)


@pytest.fixture(scope="module")
def mujoco():
    """MuJoCo C's batched rest poses at the prior's centre with μ2 = 0.3 (a slide of a few cm)."""
    space = strike_space()
    params = np.asarray(space.vector(mu2=0.3), np.float64)
    return _response.simulator("mujoco"), params


def analytic_table(draws: int = 1) -> _response.StrikeTable:
    """A made-up response on the production grid: the block moves along the strike and turns with θ1 (no sim)."""
    strikes = _response.grid_strikes()
    theta, theta1, v = strikes.T
    reach = 0.12 * (v - 0.1)  # m, up to 0.084
    direction = theta + math.pi + theta1  # pushed away from the struck point
    local = np.stack([reach * np.cos(direction), reach * np.sin(direction), 2.0 * theta1 * v], 1)
    values = np.broadcast_to(local.reshape(*_response.GRID, 3), (draws, *_response.GRID, 3))
    return _response.StrikeTable(jnp.asarray(values, jnp.float32), jnp.zeros((draws, 8)), "mujoco")


def test_table_and_env_step_match_the_simulator(mujoco):
    rest_of, params = mujoco
    table = _response.build_table(rest_of, params[None], "mujoco", grid=SMALL_GRID)
    nodes = _response.grid_strikes(SMALL_GRID)
    direct = rest_of(nodes, params)
    u = (nodes - np.asarray(geo.STRIKE_LOW)) / (np.asarray(geo.STRIKE_HIGH) - np.asarray(geo.STRIKE_LOW))
    actions = jnp.asarray(2.0 * u - 1.0, jnp.float32)
    looked = jax.vmap(lambda a: _response.lookup(table, jnp.asarray(0), a))(actions)
    np.testing.assert_allclose(np.asarray(looked), direct, atol=NODE_TOL)

    # the exact step: the simulator through pure_callback, batched under vmap, composed with the pose
    env = PushEnv(_routes.route(1), table, randomize=False, response=_response.exact_response(rest_of, params))
    states = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(3), 4))
    rng = np.random.default_rng(0)
    acts = jnp.asarray(rng.uniform(-1, 1, (4, 3)), jnp.float32)
    nxt = jax.jit(jax.vmap(env.step))(states, acts)
    strikes = np.asarray(jax.vmap(_response.strike_of_action)(acts), np.float64)
    local = rest_of(strikes, params)
    start = np.asarray(states.pipeline_state.pose)
    for i in range(4):
        c, s = math.cos(start[i, 2]), math.sin(start[i, 2])
        xy = start[i, :2] + np.array([[c, -s], [s, c]]) @ local[i, :2]
        yaw = math.atan2(math.sin(start[i, 2] + local[i, 2]), math.cos(start[i, 2] + local[i, 2]))
        np.testing.assert_allclose(np.asarray(nxt.pipeline_state.pose[i]), [*xy, yaw], atol=EXACT_TOL)
    assert np.all(np.asarray(nxt.pipeline_state.used) == 1)


def test_production_table_off_grid(mujoco):
    rest_of, params = mujoco
    table = _response.build_table(rest_of, params[None], "mujoco")
    rng = np.random.default_rng(1)
    actions = rng.uniform(-1, 1, (24, 3))
    strikes = np.asarray(jax.vmap(_response.strike_of_action)(jnp.asarray(actions, jnp.float32)), np.float64)
    direct = rest_of(strikes, params)
    looked = np.asarray(jax.vmap(lambda a: _response.lookup(table, jnp.asarray(0), a))(jnp.asarray(actions)))
    pos = np.linalg.norm(looked[:, :2] - direct[:, :2], axis=1)
    yaw = np.abs(looked[:, 2] - direct[:, 2])
    assert np.median(pos) < TABLE_POS_MEDIAN_TOL and np.max(pos) < TABLE_POS_MAX_TOL, pos
    assert np.median(yaw) < TABLE_YAW_MEDIAN_TOL and np.max(yaw) < TABLE_YAW_MAX_TOL, yaw


def _advance(route_number, goal, used, pose):
    return _routes.advance(_routes.route(route_number), jnp.asarray(goal), jnp.asarray(used), jnp.asarray(pose))


def test_reward_and_termination_by_hand():
    # route 1: resting on the sub-goal after 3 of 12 strikes
    o = _advance(1, 0, 3, [0.35, 0.0, 1.0])
    assert bool(o.reached) and bool(o.done) and bool(o.success) and int(o.goal) == 1
    np.testing.assert_allclose(float(o.reward), 1.0 + (12 - 3), rtol=1e-6)
    # 0.05 m short: R1 only, not done
    o = _advance(1, 0, 3, [0.30, 0.0, 0.0])
    assert not bool(o.reached) and not bool(o.done)
    np.testing.assert_allclose(float(o.reward), math.exp(-(0.05**2) / _routes.REWARD_SIGMA**2), rtol=1e-5)
    # out of the corridor: R4, done, failed
    o = _advance(1, 0, 2, [0.30, 0.26, 0.0])
    assert bool(o.out) and bool(o.done) and not bool(o.success)
    assert float(o.reward) < _routes.OUT_PENALTY + 1.0
    # the budget spent without reaching
    o = _advance(1, 0, 12, [0.1, 0.0, 0.0])
    assert bool(o.done) and not bool(o.success)
    # route 2: the first sub-goal reached makes the second current; the episode goes on
    o = _advance(2, 0, 4, [0.21, 0.11, 2.0])
    assert bool(o.reached) and int(o.goal) == 1 and not bool(o.done)
    o = _advance(2, 1, 4, [0.21, 0.11, 2.0])  # the first sub-goal no longer counts
    assert not bool(o.reached)
    # route 3: the yaw counts, modulo 2π; R2 = (1 + cos Δyaw) / 2
    assert not bool(_advance(3, 0, 1, [0.15, -0.08, math.pi / 2 + 0.6]).reached)
    o = _advance(3, 0, 1, [0.15, -0.08, math.pi / 2 + 0.4 - 2 * math.pi])
    assert bool(o.reached)
    r1 = math.exp(-((_routes.YAW_LENGTH * 0.4) ** 2) / _routes.REWARD_SIGMA**2)
    np.testing.assert_allclose(float(o.reward), r1 + 0.5 * (1 + math.cos(0.4)) + 29, rtol=1e-5)
    # scoring and the evaluation start yaws of ROUTES.md
    s = _routes.table_vii(np.array([1, 0, 2]), np.array([False, False, True]), 2)
    assert s["sr_text"] == "1/3" and s["sgcr_text"] == "3/6"
    np.testing.assert_array_equal(
        _routes.evaluation_yaws(2), np.random.default_rng(1002).uniform(-math.pi, math.pi, 10)
    )
    np.testing.assert_array_equal(_routes.evaluation_yaws(3), np.zeros(10))


def test_observation_is_in_the_block_frame():
    r = _routes.route(1)
    task = Task(jnp.asarray([0.35, 0.1, math.pi / 2]), jnp.asarray(0), jnp.asarray(3), jnp.asarray(0))
    obs = np.asarray(observe(r, task))
    # the sub-goal 0.1 m along world -y is 0.1 m along the block's -x when the block faces +y
    np.testing.assert_allclose(obs[:2], [-1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(obs[-1], (12 - 3) / 12, atol=1e-7)


@pytest.fixture(scope="module")
def trained():
    """A tiny PPO run on route 1 over the analytic table, with two draws (randomisation on)."""
    env = PushEnv(_routes.route(1), analytic_table(draws=2), randomize=True)
    config = PPOConfig(timesteps=150_000, num_envs=256, batch_size=128, num_minibatches=4, evals=3, seed=0)
    return env, train_policy(env, config)


def _mean_return(env, act, episodes=64):
    def episode(key):
        s = env.reset(key)

        def body(carry, k):
            s, total, alive = carry
            s2 = env.step(s, act(s.obs, k))
            total = total + alive * s2.reward
            return (s2, total, alive * (1.0 - s2.done)), None

        (_, total, _), _ = jax.lax.scan(body, (s, 0.0, 1.0), jax.random.split(key, env.route.budget))
        return total

    return float(jnp.mean(jax.jit(jax.vmap(episode))(jax.random.split(jax.random.PRNGKey(7), episodes))))


def test_training_beats_a_random_policy(trained):
    env, policy = trained
    random_return = _mean_return(env, lambda obs, k: jax.random.uniform(k, (3,), minval=-1, maxval=1))
    trained_return = _mean_return(env, lambda obs, k: policy.act(obs))
    assert trained_return > random_return + 2.0, (trained_return, random_return)
    assert policy.curve and policy.info["env_steps"] >= 150_000


def test_saved_policy_reloads_to_the_same_actions(trained, tmp_path):
    _, policy = trained
    save_policy(policy, str(tmp_path / "pol"))
    again = load_policy(str(tmp_path / "pol"))
    obs = jax.random.normal(jax.random.PRNGKey(0), (32, 13))
    np.testing.assert_array_equal(np.asarray(again.act(obs)), np.asarray(policy.act(obs)))
    assert again.route == 1 and again.curve == policy.curve
    with pytest.raises(ValueError, match="policy.json"):
        load_policy(str(tmp_path))


def test_planner_and_policy_episodes_on_a_known_rig(trained):
    env, policy = trained
    table = analytic_table()
    r = _routes.route(1)
    start = np.array([0.0, 0.0, 0.4])
    config = _planner.PlannerConfig(generations=15)
    count = [0]

    def plan(task, seen):
        count[0] += 1
        now = Task(jnp.asarray(seen, jnp.float32), task.goal, task.used, task.draw)
        return np.asarray(_planner.plan_strike(table, r, now, config, key=jax.random.PRNGKey(count[0]))[0])

    ep = run_episode(plan, table_rig(table, 0, start), r, start)
    assert ep["success"] and ep["reached"] == 1 and ep["strikes"] <= r.budget
    assert np.linalg.norm(ep["poses"][-1, :2] - np.asarray(r.goals[0, :2])) <= _routes.GOAL_TOL
    ep = run_episode(policy_controller(policy, r), table_rig(table, 0, start), r, start)
    assert ep["strikes"] >= 1 and len(ep["poses"]) == ep["strikes"] + 1


def test_train_policy_cli(tmp_path, mujoco, capsys):
    from clashx.workflows._cli import main

    space = strike_space()
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"params": dict(zip(space.names, mujoco[1].tolist(), strict=True))}))
    out = tmp_path / "pol"
    common = ["train-policy", "--route", "1", "--params", str(params), "--out", str(out)]
    assert main([*common, "--sim", "mujoco", "--model", str(tmp_path)]) == 2  # mujoco takes no surrogate
    assert main([*common, "--sim", "mujoco"]) == 2  # --draws 8 needs the file's std
    assert not out.exists() or not any(out.iterdir())
    assert main([*common, "--sim", "mujoco", "--draws", "1", "--timesteps", "20000"]) == 0
    for name in ("policy.npz", "policy.json", "curve.png", "table.npz"):
        assert (out / name).exists(), name
    policy = load_policy(str(out))
    assert policy.simulator == "mujoco"
    ran = PPOConfig(timesteps=20000).total_steps()  # brax PPO trains in whole updates: more than asked
    assert policy.info["timesteps_requested"] == 20000 and policy.info["env_steps"] == ran > 20000
    assert f"--timesteps 20,000 runs {ran:,} strikes" in capsys.readouterr().out


def test_param_draws_keep_the_identified_values_first_and_cap_sigma():
    space = strike_space()
    params = np.asarray(space.vector(mu2=0.3), np.float64)
    low, high = np.asarray(space.low), np.asarray(space.high)
    draws = _response.param_draws(params, 10.0 * (high - low), low, high, 64, key=jax.random.PRNGKey(0))
    np.testing.assert_array_equal(draws[0], params)
    assert np.all(draws >= low) and np.all(draws <= high)
    spread = np.std(draws[1:], axis=0) / (high - low)
    # σ capped at SIGMA_CAP of the range (the sample std of 63 draws within 30 % of it; clipping only narrows it)
    assert np.all(spread < 1.3 * _response.SIGMA_CAP) and np.all(spread > 0.3 * _response.SIGMA_CAP), spread
    with pytest.raises(ValueError, match="σ"):
        _response.param_draws(params, -np.ones(8), low, high, 4, key=jax.random.PRNGKey(0))


def scaled_table(scales=(1.0, 1.5)) -> _response.StrikeTable:
    """The analytic response with one draw per scale of the displacement (yaw unchanged)."""
    base = np.asarray(analytic_table().values[0])
    values = np.stack([np.concatenate([k * base[..., :2], base[..., 2:]], -1) for k in scales])
    return _response.StrikeTable(jnp.asarray(values, jnp.float32), jnp.zeros((len(scales), 8)), "mujoco")


def test_search_one_strike_deep_is_the_best_single_strike():
    """Depth 1, sub-goal out of one strike's reach: the action whose landing costs least by the cost-to-go (strikes
    used + value-iterated strikes left + the tie-break on the distance), found by brute force over the actions."""
    table, r = analytic_table(), _routes.route(1)
    config = _search.SearchConfig(beam=16, depth=1, grid=(13, 5, 5), value_grid=SMALL_SEARCH.value_grid)
    actions = _search.action_set(config.grid)
    resp = _search.mean_responses(table, _search.prior_belief(table), actions)
    value = _search.route_value(table, _search.prior_belief(table), r, SMALL_SEARCH)
    task = Task(jnp.array([0.2, 0.02, 0.5]), jnp.asarray(0), jnp.asarray(0), jnp.asarray(0))  # out of reach
    a, cost, plan = _search.search_strike(resp, actions, r, value, task, config)
    poses = jax.vmap(lambda loc: _response.compose(task.pose, loc))(resp)
    dist = np.linalg.norm(np.asarray(poses[:, :2]) - np.asarray(r.goals[0, :2]), axis=1)
    assert dist.min() > _routes.GOAL_TOL  # no strike reaches: the cost is the cost-to-go's
    left = np.asarray(jax.vmap(lambda p: _value.route_strikes_left(value, r, jnp.asarray(0), p))(poses))
    inside = np.asarray(jax.vmap(lambda p: _routes.in_safe_zone(p, config.wall_margin))(poses))
    by_hand = np.where(inside, 1.0 + left + _search.TIE_BREAK * dist, np.inf)
    best = int(np.argmin(by_hand))
    np.testing.assert_allclose(np.asarray(a), np.asarray(actions[best]))
    assert abs(float(cost) - by_hand[best]) < 1e-4
    np.testing.assert_allclose(np.asarray(plan[0]), np.asarray(poses[best]), atol=1e-6)  # the plan: that one strike


def lattice_strikes(route_number: int, start: tuple[float, float, float], responses: np.ndarray) -> int:
    """Least strikes that finish a route from `start`, by breadth-first search over exact compositions (budget + 1
    where none finishes within the budget)."""
    r = _routes.route(route_number)
    goals, has_yaw = np.asarray(r.goals, np.float64), np.asarray(r.has_yaw)
    frontier = {(round(start[0], 6), round(start[1], 6), round(start[2], 6), 0)}
    for used in range(1, r.budget + 1):
        nxt = set()
        for x, y, yaw, g in frontier:
            for dx, dy, dyaw in responses:
                p = (x + dx * math.cos(yaw) - dy * math.sin(yaw), y + dx * math.sin(yaw) + dy * math.cos(yaw),
                     math.remainder(yaw + dyaw, 2 * math.pi))  # fmt: skip
                if not (
                    _routes.SAFE_LOW[0] <= p[0] <= _routes.SAFE_HIGH[0]
                    and _routes.SAFE_LOW[1] <= p[1] <= _routes.SAFE_HIGH[1]
                ):
                    continue
                near = math.hypot(p[0] - goals[g, 0], p[1] - goals[g, 1]) <= _routes.GOAL_TOL
                turned = abs(math.remainder(p[2] - goals[g, 2], 2 * math.pi)) <= _routes.YAW_TOL or not has_yaw[g]
                k = g + int(near and turned)
                if k == r.n_goals:
                    return used
                nxt.add((round(p[0], 6), round(p[1], 6), round(p[2], 6), k))
        frontier = nxt
    return r.budget + 1


@pytest.mark.parametrize("turns", [0, 1, 3, 16])
def test_value_iteration_counts_the_strikes_a_lattice_needs(turns):
    """Pushes of two grid steps along the block's axis and turns of one yaw step: the value-iterated strikes to
    finish route 1 equal breadth-first search's (7 pushes, plus the turns to face the sub-goal; 16 turns are
    more than the budget, and the value is its cap)."""
    step = 2 * math.pi / _value.ROUTE_GRID[2]
    responses = np.array([[0.05, 0.0, 0.0], [0.0, 0.0, step], [0.0, 0.0, -step]])
    r, start = _routes.route(1), (0.0, 0.0, turns * step)
    exact = lattice_strikes(1, start, responses)
    value = _value.route_value_iteration(jnp.asarray(responses, jnp.float32), r)
    got = float(_value.route_strikes_left(value, r, jnp.asarray(0), jnp.asarray(start, jnp.float32)))
    assert exact == min(7 + turns, r.budget + 1)
    assert abs(got - exact) <= VALUE_STRIKES_TOL


@pytest.mark.parametrize("number", [1, 3])
def test_search_solves_routes_on_a_known_rig(number):
    """Whole-route search on the analytic table's own rig: route 1 from a turned start, and route 3's turns."""
    table, r = analytic_table(), _routes.route(number)
    start = np.array([0.0, 0.0, 2.5 if number == 1 else 0.0])
    ctrl = _search.SearchController(table, r, SMALL_SEARCH, adapt=False)
    ep = run_episode(ctrl, table_rig(table, 0, start), r, start)
    assert ep["success"] and ep["reached"] == r.n_goals and ep["strikes"] <= r.budget and not ep["out"]
    # on its own rig a plan comes true: the first strike lands where the first plan said
    np.testing.assert_allclose(ep["poses"][1], ctrl.plans[0][0], atol=1e-5)


def test_adaptation_weighs_the_draws_by_the_observed_displacement():
    """One observed strike: each draw's log-weight drops by its Gaussian misfit; the true draw takes the weight."""
    table = scaled_table()
    action, before = jnp.array([0.2, 0.0, 0.8]), jnp.array([0.1, -0.05, 0.3])
    after = _response.compose(before, _response.lookup(table, jnp.asarray(1), action))  # the world is draw 1
    belief = _search.update_belief(table, _search.prior_belief(table), action, before, after)
    local = [np.asarray(_response.lookup(table, jnp.asarray(k), action)) for k in range(2)]
    seen = np.asarray(_response.compose(jnp.zeros(3), local[1]))
    misfit = [np.linalg.norm(loc[:2] - seen[:2]) ** 2 / _search.ADAPT_POS_SIGMA**2 for loc in local]
    np.testing.assert_allclose(np.asarray(belief.log_weight), -0.5 * np.asarray(misfit), atol=WEIGHT_ATOL, rtol=1e-4)
    assert float(belief.weights[1]) > 0.99
    resp = _search.mean_responses(table, belief, action[None])
    np.testing.assert_allclose(np.asarray(resp[0]), local[1], atol=1e-4)
    only = _search.prior_belief(table, identified_only=True)
    np.testing.assert_allclose(np.asarray(_search.mean_responses(table, only, action[None])[0]), local[0], atol=1e-6)


def test_adapting_search_needs_fewer_strikes_in_a_world_unlike_its_table():
    """The world moves the block 1.5× as far as the identified draw says: adapting, route 2 takes fewer strikes."""
    table, r = scaled_table(), _routes.route(2)
    start = np.array([0.0, 0.0, 0.0])
    used = {}
    for adapt in (False, True):
        ctrl = _search.SearchController(table, r, SMALL_SEARCH, adapt=adapt)
        ep = run_episode(ctrl, table_rig(table, 1, start), r, start)
        used[adapt] = ep["strikes"] if ep["success"] else r.budget + 1
    assert used[True] < used[False]

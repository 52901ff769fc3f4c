"""The one hybrid rule (`clashx.hybrid`) on the example scenes, with analytic handlers: no training needed.

A ball under gravity on a table (slide, slide and hinge joints) and a free box
(a free joint), the table the world's: every bounce through the handler while it
closes fast enough, MuJoCo's contact for the rest (resting, rolling, slow bounces),
the two engines alike, gradients against central differences, the guards, and the
scene's defaults (MuJoCo's distance, the contact frame) against MuJoCo C.
"""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from clashx.hybrid import full_rollouts_c, rollouts, rollouts_c, sparse_block, sparse_predict
from clashx.hybrid._rule import OFF_MARGIN, predict, switched
from clashx.scenes import AbstractHandler, load_scene
from clashx.scenes import _pair_state as ps

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
BALL = f"{EXAMPLES}/ball_on_table.py:BallOnTable"
BOX = f"{EXAMPLES}/free_box.py:FreeBox"
G = 9.81
RESTITUTION = 0.6
DROP_SPEED = 2.2  # m/s at the first touch (no touch speed within 10 % of min_closing)
FLIGHT_TOL_M = 2e-3  # the engine's semi-implicit Euler flight drifts by ½ g dt t (1 mm over 0.2 s at 1 ms)
REST_TOL_M = 1e-3  # a ball at rest sits this close to the table (MuJoCo's soft contact presses it in ~0.1 mm)
ENGINES_TOL_M = 2e-4  # MJX (float32) against MuJoCo C (float64), the same rule and handler
RESTING_TOL_M = 1e-5  # the hybrid of a resting ball against full-contact C: the engine's own contact
DISTANCE_TOL_M = 1e-5  # the scene's separation against MuJoCo C's mj_geomDistance
ROUND_TRIP_TOL = 1e-4  # contact-frame targets and back, float32
DERIVATIVE_RTOL = 0.05


class Bounce(eqx.Module):
    """An analytic bounce of the planar ball: vz reversed and scaled by e, then ballistic over the window.

    e = `restitution` · (1 − 0.2 (dampratio − 0.5)), so the outcome depends on a parameter (for derivatives).
    """

    window: float = eqx.field(static=True)
    restitution: float = eqx.field(static=True)

    def __call__(self, pre, params):
        e = self.restitution * (1.0 - 0.2 * (params[2] - 0.5))
        x, z, th, vx, vz, w = (pre[i] for i in range(6))
        vz1 = -e * vz
        t = self.window
        return jnp.stack([x + vx * t, z + vz1 * t - 0.5 * G * t**2, th + w * t, vx, vz1 - G * t, w])


class NaNHandler(eqx.Module):
    def __call__(self, pre, params):
        return jnp.full_like(pre, jnp.nan)


@pytest.fixture(scope="module")
def ball():
    return load_scene(BALL)


@pytest.fixture(scope="module")
def box():
    return load_scene(BOX)


def _drop(scene, n=2, speed=DROP_SPEED, vx=0.3):
    """n launches of the ball 2 cm above the table, falling to touch at `speed`."""
    gap = 0.02
    vz = -np.sqrt(speed**2 - 2 * G * gap)
    q = np.tile([0.0, gap, 0.0], (n, 1))
    v = np.tile([vx, vz, 0.0], (n, 1))
    return q, v, np.tile(scene.space.vector(dampratio=0.5), (n, 1))


def _bounces(speed: float, e: float, scene) -> list[float]:
    """The touch speeds of an ideal ball with restitution e that are impacts: closing at min_closing or faster,
    after flying min_apart past the last window (the window's own time does not count: the rule cannot see it)."""
    out = [speed]
    while True:
        up = out[-1] * e
        if up < scene.min_closing or 2 * up / G - scene.window < scene.min_apart:
            return out
        out.append(up)


@pytest.fixture(scope="module")
def c_bounce(ball):
    """The bouncing ball on the C fallback, to rest (2 s at most), with its trajectory's lowest point."""
    handler = Bounce(ball.window, RESTITUTION)
    q0, v0, p = _drop(ball)
    info = rollouts_c(ball, handler, p, q0, v0, 2000)
    q, v = info.qpos, info.qvel
    return handler, (q0, v0, p), (q, v, info)


def test_every_fast_bounce_goes_through_the_handler_and_the_ball_comes_to_rest(ball, c_bounce):
    """Every touch closing at min_closing or faster is the handler's; the slow ones and the rest are MuJoCo's."""
    _, _, (q, v, info) = c_bounce
    e = RESTITUTION * (1.0 - 0.2 * (ball.space.vector(dampratio=0.5)[2] - 0.5))
    expected = _bounces(DROP_SPEED, e, ball)
    assert (info.impacts == len(expected)).all(), (info.impacts, expected)
    assert (info.steps < 2000).all()  # at rest before the limit
    assert np.abs(q[:, 1]).max() < REST_TOL_M  # on the table, not through it
    assert (np.abs(v) < ball.rest_speed).all()


def test_bounces_follow_the_handler_between_impacts(ball):
    """Between impacts the engine flies the ball: the apex after each bounce is the ideal ball's (e² per bounce)."""
    handler = Bounce(ball.window, RESTITUTION)
    q0, v0, p = _drop(ball, n=1)
    e = RESTITUTION * (1.0 - 0.2 * (p[0, 2] - 0.5))
    apex_ideal = [(s * e) ** 2 / (2 * G) for s in _bounces(DROP_SPEED, e, ball)[:3]]
    states = rollouts(ball, handler, p, q0, v0, 900, record_every=1)
    shown = states.frames
    z = np.asarray(shown[0, :, 1])
    touches = np.flatnonzero((z[1:-1] < z[:-2]) & (z[1:-1] <= z[2:]))  # local minima: the touches
    apexes = [z[a:b].max() for a, b in zip(touches[:-1], touches[1:], strict=True)][:3]
    np.testing.assert_allclose(apexes, apex_ideal, atol=FLIGHT_TOL_M)
    assert z.min() > -FLIGHT_TOL_M


def test_mjx_and_the_c_fallback_run_the_same_rule(ball, c_bounce):
    handler, (q0, v0, p), _ = c_bounce
    info = rollouts_c(ball, handler, p, q0, v0, 600, until_rest=False)
    q_c = info.qpos
    states = rollouts(ball, handler, p, q0, v0, 600)
    np.testing.assert_array_equal(np.asarray(states.rule.impacts), info.impacts)
    np.testing.assert_allclose(np.asarray(states.data.qpos)[:, :2], q_c[:, :2], atol=ENGINES_TOL_M)


def test_a_resting_ball_is_the_engines(ball):
    """No impact: the hybrid is full-contact MuJoCo (the pair's contact stays in the model)."""
    q0 = np.array([[0.0, 0.0, 0.0], [0.0, -1e-4, 0.0]])
    v0 = np.array([[0.5, 0.0, 0.5 / 0.03], [0.0, 0.0, 0.0]])  # rolling; at rest
    p = np.tile(ball.space.vector(), (2, 1))
    info = rollouts_c(ball, Bounce(ball.window, RESTITUTION), p, q0, v0, 300, until_rest=False)
    q = info.qpos
    q_full, _ = full_rollouts_c(ball, p, q0, v0, 300)
    assert (info.impacts == 0).all()
    np.testing.assert_allclose(q[:, :2], q_full[:, :2], atol=RESTING_TOL_M)


def test_a_non_finite_prediction_falls_back_to_the_engine(ball):
    """The handler's NaN is counted and the touch is MuJoCo's: the ball still bounces off the table."""
    q0, v0, p = _drop(ball)
    info = rollouts_c(ball, NaNHandler(), p, q0, v0, 1500)
    q = info.qpos
    assert (info.impacts == 0).all() and (info.nonfinite >= 1).all()
    assert np.isfinite(q).all() and np.abs(q[:, 1]).max() < REST_TOL_M


def test_the_energy_guard_caps_a_handler_that_adds_energy(ball):
    handler = Bounce(ball.window, 1.5)  # e > 1
    q0, v0, p = _drop(ball, n=1, vx=0.0)
    states = rollouts(ball, handler, p, q0, v0, 600, record_every=1)
    shown = states.frames
    # the first impact is clamped; the next touch closes as fast (the guard kept its energy): a re-fire, the engine's
    assert int(states.rule.clamped[0]) == int(states.rule.impacts[0]) >= 1 and int(states.rule.refired[0]) >= 1
    apex = (DROP_SPEED**2) / (2 * G) * (1 + ball.gate.energy_slack)
    assert float(np.asarray(shown)[0, 50:, 1].max()) <= apex + FLIGHT_TOL_M


def test_the_pairs_contact_is_switched_off_in_one_world_only(ball):
    m = ball.hybrid_c_model()
    from clashx.core._mjx import mjx

    model = mjx.put_model(m)
    rows = ball.switch_rows
    assert len(rows) == 1 and m.pair_margin[rows[0]] == 0.0
    both = jax.vmap(lambda off: switched(model, rows, off).pair_margin)(jnp.array([True, False]))
    np.testing.assert_array_equal(np.asarray(both)[:, rows[0]], [OFF_MARGIN, 0.0])


@pytest.mark.parametrize("n_touch", [0, 3, 10])
def test_the_batch_evaluates_the_handler_only_where_a_world_touches(ball, n_touch):
    """`sparse_predict` (none, a gathered few, or all of 40 worlds) against the handler on every world, values and
    reverse-mode derivatives."""
    n = 40
    assert sparse_block(n) == 4  # 3 of 40 take the gathered branch, 10 the full one
    handler = Bounce(ball.window, RESTITUTION)
    rng = np.random.default_rng(1)
    pre = jnp.asarray(rng.normal(size=(n, 6)), jnp.float32)
    idle = jnp.asarray(rng.normal(size=(n, 6)), jnp.float32)
    params = jnp.asarray(np.tile(ball.space.vector(dampratio=0.5), (n, 1)) + rng.uniform(0, 0.2, (n, 1)), jnp.float32)
    touch = jnp.zeros(n, bool).at[rng.choice(n, n_touch, replace=False)].set(True)

    def dense(p):
        return jnp.where(touch[:, None], jax.vmap(lambda x, q: predict(ball, handler, x, q))(pre, p), idle)

    def sparse(p):
        return sparse_predict(ball, handler, p, touch, pre, idle)

    np.testing.assert_allclose(np.asarray(jax.jit(sparse)(params)), np.asarray(dense(params)), rtol=1e-6, atol=1e-6)
    g_sparse = jax.jit(jax.grad(lambda p: jnp.sum(sparse(p) ** 2)))(params)
    g_dense = jax.grad(lambda p: jnp.sum(dense(p) ** 2))(params)
    np.testing.assert_allclose(np.asarray(g_sparse), np.asarray(g_dense), rtol=1e-5, atol=1e-6)
    assert (np.abs(np.asarray(g_sparse)).sum(1) > 0).sum() == n_touch


def test_jacfwd_through_the_mjx_hybrid_matches_central_differences(ball):
    handler = Bounce(ball.window, RESTITUTION)
    q0, v0, p = _drop(ball, n=1)

    def height(x):  # the ball's height 0.2 s after launch, as a function of its damping ratio and launch speed
        pp = jnp.asarray(p, jnp.float32).at[0, 2].set(x[0])
        vv = jnp.asarray(v0, jnp.float32).at[0, 0].set(x[1])
        s = rollouts(ball, handler, pp, jnp.asarray(q0, jnp.float32), vv, 200)
        return jnp.stack([s.data.qpos[0, 1], s.data.qpos[0, 0]])

    x0 = jnp.array([0.5, 0.3], jnp.float32)
    jac = np.asarray(jax.jit(jax.jacfwd(height))(x0))
    f = jax.jit(height)
    h = np.array([0.05, 0.05])
    fd = np.stack(
        [(np.asarray(f(x0.at[j].add(h[j]))) - np.asarray(f(x0.at[j].add(-h[j])))) / (2 * h[j]) for j in (0, 1)], 1
    )
    assert np.isfinite(jac).all()
    np.testing.assert_allclose(jac, fd, atol=DERIVATIVE_RTOL * np.abs(fd).max())


def test_separation_is_mujocos_distance(ball, box):
    """The default separation against MuJoCo C's own distance between the pair's geoms, apart and overlapping."""
    rng = np.random.default_rng(0)
    for scene, geoms in ((ball, ("table", "ball")), (box, ("table", "box"))):
        m = scene.c_model()
        d = mujoco.MjData(m)
        g1, g2 = (mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in geoms)
        for _ in range(6):
            q = m.qpos0.copy()
            if m.nq == 7:
                quat = rng.normal(size=4)
                q[3:7] = quat / np.linalg.norm(quat)
                q[2] = rng.uniform(-0.01, 0.08)
            else:
                q[1] = rng.uniform(-0.01, 0.05)
            d.qpos[:] = q
            mujoco.mj_forward(m, d)
            want = mujoco.mj_geomDistance(m, d, g1, g2, 1.0, None)
            assert float(scene.separation(jnp.asarray(q))) == pytest.approx(want, abs=DISTANCE_TOL_M)


def test_contact_frame_targets_round_trip(box, ball):
    """`targets` then `post_from_targets` is the identity, free joint (box) and slides with a hinge (ball)."""
    rng = np.random.default_rng(1)
    for scene in (box, ball):
        n = scene.joints.size
        pre = rng.normal(size=(8, n)) * 0.3
        post = pre + rng.normal(size=(8, n)) * 0.1
        for s in (pre, post):
            for qo, _ in scene.joints.free:
                s[:, qo + 3 : qo + 7] /= np.linalg.norm(s[:, qo + 3 : qo + 7], axis=1, keepdims=True)
        pre, post = jnp.asarray(pre, jnp.float32), jnp.asarray(post, jnp.float32)
        back = jax.vmap(lambda a, b, sc=scene: sc.post_from_targets(a, sc.targets(a, b)))(pre, post)
        for qo, _ in scene.joints.free:  # a quaternion and its negative are one orientation
            sign = jnp.sign(jnp.sum(back[:, qo + 3 : qo + 7] * post[:, qo + 3 : qo + 7], axis=1, keepdims=True))
            back = back.at[:, qo + 3 : qo + 7].multiply(sign)
        np.testing.assert_allclose(np.asarray(back), np.asarray(post), atol=ROUND_TRIP_TOL)


def test_a_free_box_bounces_on_the_rule(box):
    """The free joint through the rule: a box dropped flat with spin, its centre's vz reflected by the handler."""

    class Flat(eqx.Module):  # the centre's vz reversed and halved, the spin kept, then ballistic over the window
        def __call__(self, pre, params):
            q, v = pre[:7], pre[7:]
            t = box.window
            v1 = v.at[2].set(-0.5 * v[2])
            out = ps.advance(box.joints, jnp.concatenate([q, v1]), t)
            return out.at[2].add(-0.5 * G * t**2).at[9].add(-G * t)

    q0 = np.array([[0.0, 0.0, 0.1, 1.0, 0.0, 0.0, 0.0]])
    v0 = np.array([[0.4, 0.0, -1.0, 0.0, 0.0, 3.0]])
    p = box.space.vector()[None]
    info = rollouts_c(box, Flat(), p, q0, v0, 2000)
    q = info.qpos
    assert int(info.impacts[0]) >= 2
    m = box.c_model()
    assert q[0, 2] == pytest.approx(m.geom_size[1][2], abs=REST_TOL_M)  # resting flat on its face
    assert abs(np.linalg.norm(q[0, 3:7]) - 1.0) < 1e-6


# --- a user's scene that the rule cannot run: named at load, before any work -------------------------


def _ball_scene(**overrides):
    """A subclass of the ball example with some of its attributes or hooks replaced."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ball_example", f"{EXAMPLES}/ball_on_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return type("Broken", (module.BallOnTable,), overrides)


NESTED_XML = """
<mujoco><option timestep="0.001"/><worldbody>
  <geom name="table" type="plane" size="1 1 .1"/>
  <body name="arm"><joint name="a" type="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 .5 .2 0 .5" size=".01"/>
    <body name="ball" pos=".2 0 .3"><joint name="z" type="slide" axis="0 0 1"/><geom name="ball" type="sphere" size=".03"/></body>
  </body>
</worldbody></mujoco>
"""


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"pair": ("ball", "floor")}, "pair body 'floor' is not in the MJCF"),
        ({"mjcf": lambda self: NESTED_XML}, "hangs from body 'arm', which has joints"),
        ({"separation": lambda self, q: jnp.stack([q[1], q[1]])}, "separation(qpos) must return one number"),
        ({"features": lambda self, pre: jnp.outer(pre, pre)}, "features(pre) must return a flat vector"),
        ({"window": -0.01}, "`window` = -0.01 must be a positive number of seconds"),
    ],
    ids=["no such body", "body under a jointed body", "separation shape", "features shape", "negative window"],
)
def test_a_scene_the_rule_cannot_run_is_refused_at_load(overrides, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("`", ".")):
        _ball_scene(**overrides)()


def test_launches_that_never_touch_are_named(ball):
    """Launches that fly away from the table: generation says which scene and what to check."""
    away = _ball_scene(
        sample_launch=lambda self, n, key: (np.tile([0.0, 0.05, 0.0], (n, 1)), np.tile([0.0, 2.0, 0.0], (n, 1)))
    )()
    launch, params = away.sample_inputs(4, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="none of 4 launches from sample_launch has an impact"):
        away.simulate_events(launch, params, engine="c")
    wrong = _ball_scene(sample_launch=lambda self, n, key: (np.zeros((n, 2)), np.zeros((n, 3))))()
    with pytest.raises(ValueError, match=r"sample_launch\(4, key\) gave qpos \(4, 2\)"):
        wrong.sample_inputs(4, key=jax.random.PRNGKey(0))


class Sink(AbstractHandler):
    """A handler that sets the ball 20 mm into the table, at rest, and holds window ends to a surrogate's bounds:
    no deeper than 6 mm (`PairSurrogate.plausible`'s rule, its training windows' deepest end)."""

    @property
    def checks_post(self) -> bool:
        return True

    def plausible(self, sep, closing):
        return sep >= -6e-3

    def __call__(self, pre, params):
        return pre.at[1].set(-0.02).at[3:].set(0.0)


def test_a_prediction_deeper_than_any_training_window_falls_back(ball):
    """A prediction deeper inside the table than the handler's own windows ever ended is never set: counted, and
    MuJoCo's contact bounces the ball instead."""
    q0, v0, p = _drop(ball)
    info = rollouts_c(ball, Sink(), p, q0, v0, 1500)
    assert (info.impacts == 0).all() and (info.rule.implausible >= 1).all()
    assert info.qpos[:, 1].min() > -REST_TOL_M  # the ball rests on the table, not in it


def test_a_handler_that_keeps_the_ball_bouncing_is_contained(ball):
    """An elastic handler (e = 1) would bounce the ball forever: a touch closing as fast as the impact before is a
    re-fire, which the engine's contact takes (counted); the handler fires no more impacts than full contact has
    bounces, plus one."""
    from clashx.workflows._pair_workflow import full_contact_bounces

    q0, v0, p = _drop(ball, n=1, vx=0.0)
    info = rollouts_c(ball, Bounce(ball.window, 1.0), p, q0, v0, 3000)  # dampratio 0.5: e = 1 exactly
    bounces = full_contact_bounces(ball, p, q0, v0, 3000)
    assert int(info.rule.refired[0]) >= 1 and int(info.impacts[0]) <= int(bounces[0]) + 1, (info.impacts, bounces)


def test_a_handler_trusted_nowhere_gives_full_contact(ball):
    """A surrogate whose training inputs lie nowhere near the launches hands every touch to the engine: the hybrid
    is then full-contact MuJoCo C, to the engine's own resting tolerance."""
    import clashx
    from clashx.surrogate import with_feature_ranges

    model = clashx.make_pair_surrogate(ball, key=jax.random.key(0), width=8, depth=1)
    n_feat = len(model.in_mean)
    model = with_feature_ranges(model, [1e6] * n_feat, [1e6 + 1] * n_feat)  # no impact's features lie there
    q0, v0, p = _drop(ball)
    info = rollouts_c(ball, model, p, q0, v0, 800, until_rest=False)
    q_full, _ = full_rollouts_c(ball, p, q0, v0, 800)
    assert (info.impacts == 0).all() and (info.rule.outside >= 1).all()
    np.testing.assert_allclose(info.qpos, q_full, atol=RESTING_TOL_M)

"""The rigid impact law of any PairScene (`clashx.scenes.PairLaw`): against the cube's law, analytic cases, energy."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import clashx
from clashx import PairScene, ParamSpace
from clashx.core import Target, quat_exp, quat_to_mat
from clashx.learn import identify_pair_law, law_posts, pair_law_scores, velocity_errors
from clashx.scenes import (
    CORNER_SIGNS,
    CUBE_INERTIA,
    CUBE_MASS,
    LAW_HIGH,
    LAW_LOW,
    LAW_NAMES,
    WINDOW,
    law_space,
    pair_law,
    rigid_cube_window,
)
from clashx.scenes._cube_rigid import PASSES, STEPS
from clashx.scenes._mjcf import CUBE_HALF
from clashx.scenes._pair_state import pair_energy

G = 9.81
# The generic law against `rigid_cube_window`, both float32 with the same substeps, passes and corner order: they
# differ only in rounding (ω carried in the body frame and q ⊗ exp(ω dt) against the world frame and exp(ω dt) ⊗ q,
# M⁻¹ Jᵀ against the cube's closed form, the effective masses regularised by 1e-6 of their trace), which 54 × 6 × 8
# sequential impulses carry to 4e-5 rad/s and 3e-6 m/s at most on these 20 landings (measured); a corner switched
# at SLOP or BOUNCE by that rounding would differ by ~0.1 and fail.
CUBE_V_TOL = 1e-4  # m/s: post-window centre velocity
CUBE_W_TOL = 5e-4  # rad/s: post-window angular velocity (body frame)
CUBE_X_TOL = 1e-5  # m: post-window centre; and the orientation's quaternion components
DROP_TOL = 1e-5  # m/s, m: a head-on drop against its closed form (float32 over 60 substeps: 1e-6 seen)
SLIDE_TOL = 1e-5  # m/s: a sliding ball's speed against Coulomb's and the 5/7 law (float32: 1e-6 seen)
GRAD_TOL = 1e-4  # relative: d v_post / d e_n of a head-on drop against its closed form s + g dt
ENERGY_TOL = 0.03  # of the pre-impact kinetic energy: the sweeps over re-touching corners gain up to 1.9 % at
# e_n = e_t = 1 (rigid_cube_window gains the same); e_t < 0 is left out: the law itself adds energy there (up to
# 1.2 × the kinetic energy, rigid_cube_window alike; `clashx.scenes._pair_law`'s docstring, Energy)
BATCH_TOL = 1e-5  # float32: a vmapped call against single calls
RECOVER_TOL = 0.02  # mean relative velocity error of a fit to the law's own impacts


# --- scenes ---------------------------------------------------------------------------------------

CUBE_XML = f"""
<mujoco model="free-cube">
  <option timestep="0.001" gravity="0 0 -{G}"/>
  <worldbody>
    <geom name="table" type="plane" size="3 3 0.1" contype="0" conaffinity="0"/>
    <body name="cube" pos="0 0 0.2">
      <freejoint name="cube"/>
      <inertial pos="0 0 0" mass="{CUBE_MASS}" diaginertia="{CUBE_INERTIA} {CUBE_INERTIA} {CUBE_INERTIA}"/>
      <geom name="cube" type="box" size="{CUBE_HALF} {CUBE_HALF} {CUBE_HALF}" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact><pair name="cube_table" geom1="table" geom2="cube" condim="3"/></contact>
</mujoco>
"""

DOME_XML = """
<mujoco model="ball-on-dome">
  <option timestep="0.001"/>
  <worldbody>
    <geom name="dome" type="sphere" size="0.05" contype="0" conaffinity="0"/>
    <body name="ball" pos="0 0 0.08">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.03" mass="0.05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact><pair name="ball_dome" geom1="dome" geom2="ball"/></contact>
</mujoco>
"""


def _friction_space(row: str) -> ParamSpace:
    return ParamSpace(
        names=("mu",), low=(0.1,), high=(1.0,), targets=((Target("pair_friction", row, (0, 1)),),), log_scale=(False,)
    )


class FreeCube(PairScene):
    """The cube toss's cube (`_mjcf`'s half edge, mass and inertia) as a free body on a plane, window WINDOW."""

    name = "free-cube"
    pair = ("cube", "world")
    window = WINDOW
    approach = 0.2

    def mjcf(self):
        return CUBE_XML

    def make_space(self):
        return _friction_space("cube_table")

    def sample_launch(self, n, key):
        raise NotImplementedError  # the law's tests start at the touch


class BallOnDome(PairScene):
    """A free 3 cm ball on a 5 cm sphere of the world: a row without a plane (MJX's collision)."""

    name = "ball-on-dome"
    pair = ("ball", "world")
    window = 0.03
    approach = 0.1

    def mjcf(self):
        return DOME_XML

    def make_space(self):
        return _friction_space("ball_dome")

    def sample_launch(self, n, key):
        raise NotImplementedError


@pytest.fixture(scope="module")
def cube():
    scene = FreeCube()
    return scene, pair_law(scene, substep=WINDOW / STEPS, passes=PASSES)


@pytest.fixture(scope="module")
def ball():
    scene = clashx.load_scene("examples/ball_on_table.py:BallOnTable")
    return scene, pair_law(scene)


@pytest.fixture(scope="module")
def dome():
    scene = BallOnDome()
    return scene, pair_law(scene)


@pytest.fixture(scope="module")
def box():
    scene = clashx.load_scene("examples/free_box.py:FreeBox")
    return scene, pair_law(scene)


def _box_landings(half, n: int, rng: np.random.Generator) -> np.ndarray:
    """n free-joint pair states (qpos ‖ qvel, 13) of a box of half-sizes `half` with its lowest corner (odd rows: an
    edge, the box turned about x alone) at z = 0, falling at 0.3-2.5 m/s, sliding and spinning."""
    signs = np.asarray(half) * CORNER_SIGNS
    out = []
    for i in range(n):
        axis = rng.normal(0, 1.0, 3) if i % 2 == 0 else np.r_[rng.uniform(0.2, 1.2), 0.0, 0.0]
        q = np.asarray(quat_exp(jnp.asarray(axis, jnp.float32)), np.float64)
        z0 = -(signs @ np.asarray(quat_to_mat(jnp.asarray(q)), np.float64).T)[:, 2].min()
        v = np.r_[rng.uniform(-1.5, 1.5, 2), rng.uniform(-2.5, -0.3)]
        out.append(np.r_[0.1, -0.2, z0, q, v, rng.uniform(-8.0, 8.0, 3)])
    return np.array(out)


def _law_params(n: int, rng: np.random.Generator, e_t: tuple[float, float] = (-1.0, 1.0)) -> np.ndarray:
    """n (e_n, e_t, μ) uniform over the law's box, e_t over `e_t`."""
    e_n, e_t_draw = rng.uniform(0.0, 1.0, n), rng.uniform(e_t[0], e_t[1], n)
    return np.stack([e_n, e_t_draw, rng.uniform(LAW_LOW[2], LAW_HIGH[2], n)], 1)


# --- the reference: the cube's own law ----------------------------------------------------------------


def test_free_cube_reproduces_rigid_cube_window(cube):
    """On 20 corner and edge landings at random (e_n, e_t, μ), the generic law of a free box on a plane is the cube's
    law (`rigid_cube_window`, inertia scale 1): the same post-window pose and velocities."""
    scene, law = cube
    assert law.steps == STEPS and law.passes == PASSES
    rng = np.random.default_rng(0)
    pre = _box_landings((CUBE_HALF,) * 3, 20, rng)
    params = _law_params(20, rng)
    out = np.asarray(jax.jit(jax.vmap(law))(jnp.asarray(pre, jnp.float32), jnp.asarray(params, jnp.float32)))
    toss = np.concatenate([pre[:, 3:7], pre[:, 0:3], pre[:, 10:13], pre[:, 7:10]], 1)  # q, x, ω body, v world
    ref = jax.jit(jax.vmap(rigid_cube_window))(
        jnp.asarray(toss, jnp.float32), jnp.asarray(np.c_[params, np.ones(20)], jnp.float32)
    )
    ref = np.asarray(ref, np.float64)
    assert np.abs(ref[:, 10:13] - pre[:, 7:10]).max() > 1.0  # the landings did change the velocities
    np.testing.assert_allclose(out[:, 7:10], ref[:, 10:13], rtol=0, atol=CUBE_V_TOL)
    np.testing.assert_allclose(out[:, 10:13], ref[:, 7:10], rtol=0, atol=CUBE_W_TOL)
    np.testing.assert_allclose(out[:, 0:3], ref[:, 4:7], rtol=0, atol=CUBE_X_TOL)
    same_sign = np.sign(np.sum(out[:, 3:7] * ref[:, 0:4], 1, keepdims=True))
    np.testing.assert_allclose(out[:, 3:7] * same_sign, ref[:, 0:4], rtol=0, atol=CUBE_X_TOL)


# --- analytic cases ---------------------------------------------------------------------------------


@pytest.mark.parametrize("e_n", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("which", ["ball", "dome"])
def test_head_on_drop_leaves_at_e_n_times_its_speed(which, e_n, request):
    """A ball dropped straight down at s = 1 m/s onto the table (a plane row) or onto a sphere (MJX's collision)
    leaves at e_n (s + g dt) and flies the rest of the window (the first substep's gravity is in the approach);
    e_n = 0 holds it at the contact.  The gradient in e_n is s + g dt."""
    scene, law = request.getfixturevalue(which)
    s, dt, k = 1.0, law.dt, law.steps
    pre = np.zeros(scene.joints.size)
    if which == "ball":  # slides x, z and a hinge: qpos (x, z, spin), z = 0 touching
        up_q, up_v = 1, 4
    else:  # a free joint: the ball's centre 8 cm above the dome's, unit quaternion
        pre[2], pre[3] = 0.08, 1.0
        up_q, up_v = 2, 9
    pre[up_v] = -s
    params = jnp.array([e_n, 0.3, 0.5])
    out = np.asarray(eqx.filter_jit(law)(jnp.asarray(pre, jnp.float32), params))
    v1 = e_n * (s + G * dt)
    v_end, rise = (v1 - G * (k - 1) * dt, dt * (k * v1 - G * dt * k * (k - 1) / 2)) if e_n > 0 else (0.0, 0.0)
    assert out[up_v] == pytest.approx(v_end, abs=DROP_TOL)
    assert out[up_q] - pre[up_q] == pytest.approx(rise, abs=DROP_TOL)
    others = np.delete(out[scene.joints.nq :], up_v - scene.joints.nq)
    assert np.abs(others).max() < DROP_TOL  # nothing else moves
    grad = jax.grad(lambda p: eqx.filter_jit(law)(jnp.asarray(pre, jnp.float32), p)[up_v])(params)
    assert np.isfinite(np.asarray(grad)).all()
    if e_n > 0:
        assert float(grad[0]) == pytest.approx(s + G * dt, rel=GRAD_TOL)


@pytest.mark.parametrize(("mu", "v0"), [(1.0, 0.5), (0.1, 1.0)])
def test_sliding_ball_decelerates_by_coulomb_until_it_rolls(ball, mu, v0):
    """The README's ball sliding at v0 without spin (e_t = 0, no bounce): friction takes μ g from its speed and gives
    its hinge 5 μ g / (2 R) (a solid sphere) until the contact point sticks, at v = 5/7 v0 and ω = v / R, which
    takes 2 v0 / (7 μ g): 15 ms of the 30 ms window at μ = 1, v0 = 0.5 (it ends rolling); 0.29 s at μ = 0.1
    (it ends still sliding, v0 − μ g T)."""
    scene, law = ball
    radius, window = 0.03, scene.window
    out = np.asarray(eqx.filter_jit(law)(jnp.array([0.0, 0.0, 0.0, v0, 0.0, 0.0]), jnp.array([0.0, 0.0, mu])))
    t_roll = 2 * v0 / (7 * mu * G)
    v_end = 5 / 7 * v0 if t_roll < window else v0 - mu * G * window
    w_end = v_end / radius if t_roll < window else 5 * mu * G * window / (2 * radius)
    assert out[3] == pytest.approx(v_end, abs=SLIDE_TOL)
    assert out[5] * radius == pytest.approx(w_end * radius, abs=SLIDE_TOL)
    assert abs(out[4]) < SLIDE_TOL and abs(out[1]) < SLIDE_TOL  # held at the table, neither lifted nor sunk


# --- energy, jit, vmap, grad: every scene -------------------------------------------------------------


def _landings(which: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n pre-impact pair states of each test scene, touching and approaching."""
    if which == "cube":
        return _box_landings((CUBE_HALF,) * 3, n, rng)
    if which == "box":
        return _box_landings((0.04, 0.03, 0.02), n, rng)
    if which == "ball":  # x, z, spin ‖ their velocities
        zero = np.zeros(n)
        return np.stack([zero, zero, zero, rng.uniform(-1.5, 1.5, n), -rng.uniform(0.15, 3.5, n),
                         rng.uniform(-40, 40, n)], 1)  # fmt: skip
    direction = np.c_[rng.uniform(-0.5, 0.5, (n, 2)), np.ones(n)]  # dome: touching off the top
    centre = 0.08 * direction / np.linalg.norm(direction, axis=1, keepdims=True)
    v = np.c_[rng.uniform(-1, 1, (n, 2)), -rng.uniform(0.3, 2.5, n)]
    return np.c_[centre, np.ones(n), np.zeros((n, 3)), v, rng.uniform(-20, 20, (n, 3))]


@pytest.mark.parametrize("which", ["cube", "box", "ball", "dome"])
def test_law_gains_no_energy_and_batches(which, request):
    """Random landings at e_n ∈ [0, 1], e_t ∈ [0, 1], μ in the box: the pair's kinetic + potential energy after the
    window is at most its energy before (within ENERGY_TOL of the kinetic energy); the vmapped law equals single
    jitted calls; every post-window state is finite."""
    scene, law = request.getfixturevalue(which)
    rng = np.random.default_rng(1)
    pre = _landings(which, 16, rng)
    params = _law_params(16, rng, e_t=(0.0, 1.0))
    params[:4, :2] = 1.0  # the most elastic corner of the box
    pre_j, params_j = jnp.asarray(pre, jnp.float32), jnp.asarray(params, jnp.float32)
    out = np.asarray(jax.jit(jax.vmap(law))(pre_j, params_j))
    assert np.isfinite(out).all()
    single = eqx.filter_jit(law)
    np.testing.assert_allclose(np.asarray(single(pre_j[0], params_j[0])), out[0], rtol=0, atol=BATCH_TOL)
    model, nq = scene.c_model(), scene.joints.nq
    qpos0, zero = jnp.asarray(model.qpos0, jnp.float32), jnp.zeros(model.nv, jnp.float32)

    def energy(state):  # (kinetic, kinetic + potential), J
        qpos, qvel = scene.with_pair_state(qpos0, zero, state)
        kinetic, potential = pair_energy(model, scene.joints, qpos, qvel)
        return kinetic, kinetic + potential

    k0, e0 = (np.asarray(x) for x in jax.jit(jax.vmap(energy))(pre_j))
    _, e1 = (np.asarray(x) for x in jax.jit(jax.vmap(energy))(jnp.asarray(out)))
    assert np.max((e1 - e0) / k0) <= ENERGY_TOL
    assert np.abs(out[:, nq:] - pre[:, nq:]).max() > 0.5  # impacts happened


def test_grad_through_a_tumbling_landing_is_finite(box):
    """jax.grad of a post-window velocity of a corner landing of the free box w.r.t. (e_n, e_t, μ) is finite and
    not zero (the landing depends on all three)."""
    scene, law = box
    pre = jnp.asarray(_box_landings((0.04, 0.03, 0.02), 1, np.random.default_rng(3))[0], jnp.float32)
    grad = jax.jit(jax.grad(lambda p: jnp.sum(law(pre, p)[7:] ** 2)))(jnp.array([0.6, 0.2, 0.5]))
    assert np.isfinite(np.asarray(grad)).all()
    assert np.abs(np.asarray(grad)).min() > 0


# --- the space, identification, errors ------------------------------------------------------------------


def test_law_space_is_the_laws_box():
    space = law_space()
    assert space.names == LAW_NAMES == ("e_n", "e_t", "mu")
    np.testing.assert_allclose(np.asarray(space.from_unit(jnp.array([0.0, 0.5, 1.0]))), [0.0, 0.5, 1.5], atol=1e-6)
    assert space.targets == ((),) * 3 and space.log_scale == (False,) * 3


def test_identify_pair_law_recovers_its_own_impacts(ball):
    """Impacts of the README's ball made by the law at known (e_n, e_t, μ) are fitted back: the fit's predictions
    are within RECOVER_TOL of them, and e_n, which every bounce shows, is the truth's."""
    scene, law = ball
    rng = np.random.default_rng(2)
    pre = _landings("ball", 8, rng)
    truth = np.array([0.6, 0.3, 0.4])
    post = law_posts(law, pre, truth[None])[0]
    fit = identify_pair_law(law, pre, post, key=jax.random.PRNGKey(0), population=12, generations=20, restarts=2)
    assert fit.loss < RECOVER_TOL
    assert fit.params[0] == pytest.approx(truth[0], abs=0.05)
    assert fit.n == 8 and fit.errors.shape == (8,) and len(fit.history) == 20
    assert np.mean(velocity_errors(scene, law_posts(law, pre, fit.params[None])[0], post)) == pytest.approx(
        fit.loss, abs=1e-6
    )
    scores = pair_law_scores(law, pre, post, fit.params)
    assert scores.median_rel_err == pytest.approx(fit.median_rel_err, abs=1e-6) and scores.n == 8
    assert len(repr(law)) < 600 and len(repr(fit)) < 600  # short reprs (no model dumps)


def test_bad_arguments_name_themselves(ball):
    scene, law = ball
    with pytest.raises(ValueError, match="substep"):
        pair_law(scene, substep=0.0)
    with pytest.raises(ValueError, match="passes"):
        pair_law(scene, passes=0)
    with pytest.raises(ValueError, match="identify_pair_law: pre"):
        identify_pair_law(law, np.zeros((3, 6)), np.zeros((2, 6)), key=jax.random.PRNGKey(0))

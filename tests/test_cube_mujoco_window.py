"""MuJoCo C's cube impact window (`clashx.baselines.mujoco_windows_c`) and its inertia parameter, against MuJoCo C
models compiled with that inertia, and against free flight."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from clashx.baselines import identify_mujoco_impacts, impact_speed_errors, mujoco_windows_c
from clashx.core import quat_exp, quat_to_mat
from clashx.scenes import (
    CORNER_SIGNS,
    CUBE_INERTIA,
    HALF,
    WINDOW,
    cube_space,
    make_toss_scene,
)

SAME_TOL = 1e-9  # the batch against a single MuJoCo C model stepped by hand: the same arithmetic
FLIGHT_POS_TOL = 5e-4  # m: MuJoCo's semi-implicit Euler against exact free flight over the window (g dt T ≈ 2.6e-4)
FLIGHT_VEL_TOL = 1e-9  # m/s, rad/s: constant gravity and a spinning cube's constant ω are exact in it
RECOVER_TOL = 0.02  # mean relative speed error of a fit to MuJoCo's own impacts


@pytest.fixture(scope="module")
def sim():
    return make_toss_scene()


def _corner_impacts(n: int, seed: int = 0) -> np.ndarray:
    """n cubes touching the table with one corner, thrown down and sideways with spin."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = np.asarray(quat_exp(jnp.asarray(rng.normal(0, 0.6, 3))))
        z0 = -(HALF * CORNER_SIGNS @ np.asarray(quat_to_mat(jnp.asarray(q))).T)[:, 2].min()
        out.append(np.r_[q, 0, 0, z0, rng.normal(0, 3, 3), rng.uniform(-1, 1, 2), -rng.uniform(0.5, 2)])
    return np.array(out)


def _by_hand(sim, params: np.ndarray, inertia: float, pre: np.ndarray) -> np.ndarray:
    """The window on a MuJoCo C model compiled with the cube's inertia × `inertia`, stepped by mj_step."""
    model = make_toss_scene(sim.settings, inertia_scale=inertia).mj_model()
    space = cube_space()
    space.apply_c(model, space.rows(model), params)
    data = mujoco.MjData(model)
    data.qpos[:] = np.r_[pre[4:7], pre[0:4]]
    data.qvel[:] = np.r_[pre[10:13], pre[7:10]]
    for _ in range(int(round(WINDOW / sim.dt))):
        mujoco.mj_step(model, data)
    return np.r_[data.qpos[3:7], data.qpos[0:3], data.qvel[3:6], data.qvel[0:3]]


def test_toss_sim_with_another_inertia(sim):
    other = make_toss_scene(sim.settings, inertia_scale=1.5)
    b = mujoco.mj_name2id(sim.mj_model(), mujoco.mjtObj.mjOBJ_BODY, "cube")
    np.testing.assert_allclose(sim.mj_model().body_inertia[b], CUBE_INERTIA, rtol=1e-12)
    np.testing.assert_allclose(other.mj_model().body_inertia[b], 1.5 * CUBE_INERTIA, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(other.model.body_inertia[b]), 1.5 * CUBE_INERTIA, rtol=1e-6)  # MJX's
    with pytest.raises(ValueError, match="inertia_scale"):
        make_toss_scene(inertia_scale=0.0)


@pytest.mark.parametrize("inertia", [0.7, 1.0, 2.5])
def test_inertia_parameter_is_a_model_compiled_with_it(sim, inertia):
    pre = _corner_impacts(3)
    params = np.array([[0.3, 0.01, 0.8, inertia], [0.5, 0.004, 1.5, inertia]])
    got = mujoco_windows_c(sim, cube_space(inertia=True), pre, params)
    for k in range(2):
        for i in range(3):
            want = _by_hand(sim, params[k, :3], inertia, pre[i])
            np.testing.assert_allclose(got[k, i], want, atol=SAME_TOL)
    if inertia != 1.0:  # the parameter matters: the same impacts at the drawing's inertia differ
        same = mujoco_windows_c(sim, cube_space(), pre, params[:, :3])
        assert np.abs(same[..., 7:10] - got[..., 7:10]).max() > 0.1


def test_free_flight_window(sim):
    pre = np.r_[1.0, 0, 0, 0, 0.1, -0.2, 0.5, 1.0, -2.0, 3.0, 0.8, -0.4, 0.6]  # high above the table
    post = mujoco_windows_c(sim, cube_space(), pre[None], np.array([0.3, 0.01, 1.0]))[0, 0]
    t = int(round(WINDOW / sim.dt)) * sim.dt
    np.testing.assert_allclose(post[10:13], pre[10:13] + np.r_[0, 0, -9.81 * t], atol=FLIGHT_VEL_TOL)
    np.testing.assert_allclose(post[7:10], pre[7:10], atol=FLIGHT_VEL_TOL)
    np.testing.assert_allclose(post[4:7], pre[4:7] + pre[10:13] * t + np.r_[0, 0, -4.905 * t * t], atol=FLIGHT_POS_TOL)


def test_identify_mujoco_recovers_its_own_impacts(sim):
    space = cube_space(inertia=True)
    pre = _corner_impacts(8, seed=1)
    truth = np.array([0.35, 0.008, 1.0, 1.6])
    post = mujoco_windows_c(sim, space, pre, truth[None])[0]
    params, loss = identify_mujoco_impacts(sim, space, pre, post, key=jax.random.PRNGKey(0), generations=25)
    assert loss < RECOVER_TOL
    assert params[3] == pytest.approx(truth[3], rel=0.1)
    assert impact_speed_errors(mujoco_windows_c(sim, space, pre, params[None])[0], post).mean() == pytest.approx(loss)

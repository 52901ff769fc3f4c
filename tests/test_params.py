"""The widened strike space against MuJoCo models compiled from XML edited to the same values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import mujoco.batch
import numpy as np
import pytest

from clashx.core._mjx import mjx
from clashx.scenes import _geometry as geo
from clashx.scenes import _mjcf, _strike

# Every field MuJoCo derives from the written ones; the edited XML is printed to 10 significant digits.
FIELDS = (
    "pair_friction",
    "pair_solref",
    "body_mass",
    "body_ipos",
    "body_inertia",
    "body_iquat",
    "body_subtreemass",
    "body_invweight0",
    "dof_invweight0",
)
FIELD_RTOL = 1e-7  # float64 writes against XML round-trips
MJX_RTOL = 1e-5  # MJX models hold float32
POSE_TOL = 1e-7  # m and rad: the same strike on both C models, 300 steps
JAC_RTOL = 1e-5  # float32 derivatives of from_unit against unit_scale's closed form


def _values(sim, seed):
    return np.asarray(sim.space.sample(1, key=jax.random.PRNGKey(seed))[0], np.float64)


def _edited(sim, values) -> mujoco.MjModel:
    xml = _mjcf.strike_xml(sim.shape, sim.settings, params=dict(zip(sim.space.names, values)))
    return sim.space.prepare(_mjcf.compile_xml(xml))


def _assert_fields(get_a, get_b, rtol, what):
    for f in FIELDS:
        a, b = np.asarray(get_a(f), np.float64), np.asarray(get_b(f), np.float64)
        scale = max(1.0, float(np.abs(b).max()))
        assert np.abs(a - b).max() <= rtol * scale, (what, f, a, b)


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_written_values_equal_an_edited_xml(shape, strike_sims):
    """apply_c (model and batch) and apply (MJX) write what compiling the edited XML gives, derived constants too."""
    sim = strike_sims(shape)
    values = _values(sim, seed=3)
    ref = _edited(sim, values)
    m = sim.mj_model()
    sim.space.apply_c(m, sim.rows, values)
    _assert_fields(lambda f: getattr(m, f), lambda f: getattr(ref, f), FIELD_RTOL, "C model")
    batch = mujoco.batch.Batch(sim.mj_model(), nsim=2, nthread=1)
    sim.space.apply_c(batch, sim.rows, np.stack([sim.space.vector(), values]))
    _assert_fields(lambda f: batch.expand(f)[1], lambda f: getattr(ref, f), FIELD_RTOL, "batch")
    mx = sim.space.apply(sim.model, sim.rows, jnp.asarray(values, jnp.float32))
    rx = mjx.put_model(ref)
    _assert_fields(lambda f: getattr(mx, f), lambda f: getattr(rx, f), MJX_RTOL, "MJX")


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_a_strike_runs_the_same_on_the_edited_xml(shape, strike_sims):
    """Mass, centre of mass and torsion written into the nominal model move the block as the edited model does."""
    sim = strike_sims(shape)
    values = sim.space.vector(mass=0.28, com_x=-0.006, com_y=0.005, torsion=0.008, timeconst1=0.004, e1=0.7)
    strike = jnp.array([1.1, 0.1, 0.5])
    q0, v0 = _strike.initial_state(sim, strike)
    poses = []
    for m in (sim.mj_model(), _edited(sim, values)):
        if len(poses) == 0:
            sim.space.apply_c(m, sim.rows, values)
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:] = np.asarray(q0), np.asarray(v0)
        for _ in range(300):
            mujoco.mj_step(m, d)
        poses.append(d.qpos[:7].copy())
    assert np.abs(poses[0][:2]).max() > 0.01  # the block was struck and moved
    np.testing.assert_allclose(poses[0], poses[1], atol=POSE_TOL)


def test_a_centre_of_mass_offset_leaves_the_geometry_in_place(strike_sims):
    """The triangle's mesh is compiled in its inertial frame; an offset must not carry the geom with it (C)."""
    sim = strike_sims("triangle")
    m = sim.mj_model()
    sim.space.apply_c(m, sim.rows, sim.space.vector(com_x=0.008, com_y=-0.008))
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    block = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "block_0")
    np.testing.assert_allclose(d.geom_xpos[block], d.xpos[1], atol=1e-12)
    np.testing.assert_allclose(d.xipos[1, :2] - d.xpos[1, :2], [0.008, -0.008], atol=1e-12)


def test_vector_fills_nominal_values_and_rejects_unknown_names(strike_sims):
    sp = strike_sims("square").space
    v = sp.vector(mu1=1.0)
    assert v[sp.index("mu1")] == 1.0 and v[sp.index("mass")] == geo.BLOCK_MASS and v[sp.index("com_x")] == 0.0
    with pytest.raises(ValueError, match="restitution"):
        sp.vector(restitution=0.4)


def test_unit_box_maps_inside_the_prior_however_exp_rounds(strike_sims):
    """from_unit(u ∈ [0, 1]) passes `check` at the box's corners and under an exp that rounds as a TPU's did
    (0.0025 → 0.0024998, 5e-5 low), while u outside [0, 1] still extrapolates and a value 1e-4 outside is refused."""
    space = strike_sims("square").space
    corners = jnp.asarray([np.zeros(space.size), np.ones(space.size)], jnp.float32)
    space.check(np.asarray(space.from_unit(corners), np.float64), what="corners")
    low, high = np.asarray(space.low), np.asarray(space.high)
    real_exp = jnp.exp
    with pytest.MonkeyPatch.context() as mp:  # the device's exp: 5e-5 relative low, 1e-4 high
        mp.setattr(jnp, "exp", lambda x: real_exp(x) * jnp.where(x < jnp.mean(x), 1 - 5e-5, 1 + 1e-4))
        drawn = np.asarray(space.from_unit(jnp.asarray(np.r_[corners, np.full((1, space.size), 0.5)])), np.float64)
    space.check(drawn, what="draws under a rounding exp")
    for corner in corners:  # the derivative at the box's edges is the unclipped one (a fit's σ is read there)
        jac = np.diag(np.asarray(jax.jacfwd(space.from_unit)(corner), np.float64))
        np.testing.assert_allclose(jac, space.unit_scale(np.asarray(space.from_unit(corner))), rtol=JAC_RTOL)
    beyond = np.asarray(space.from_unit(jnp.full(space.size, 1.5, jnp.float32)), np.float64)
    assert np.all(beyond > high), "u > 1 must extrapolate past the box"
    j = int(np.flatnonzero(space.log_scale)[0])
    bad = space.vector().copy()
    bad[j] = low[j] * (1 - 1e-4)
    with pytest.raises(ValueError, match=rf"{space.names[j]}=.* is outside the prior range"):
        space.check(bad)

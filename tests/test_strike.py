"""The strike simulation: MJX against MuJoCo C, momentum, mirror symmetry, per-world parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from clashx.core._mjx import mjx
from clashx.events import _metrics
from clashx.events._generate import sample_strikes
from clashx.scenes import _geometry as geo
from clashx.scenes import _strike, _strike_c

N_STRIKES = 12
# MJX against MuJoCo C, median relative error of the post-impact velocity (clashx.metrics). Contact
# manifolds of convex meshes differ between the two engines (e.g. the semi-cylinder rests on 3
# MJX ground contacts but 4 C ones), so the mesh shapes agree less closely than the box.
# With the striker-block time constant down to 2.5 ms (2.5 contact steps) the two integrators part
# more than at SCENE.md's 5 ms: the square's median is 1.0 % at 5 ms, 2.2 % over the prior.
MJX_C_MEDIAN_TOL = {"square": 0.03, "triangle": 0.06, "semi-cylinder": 0.08}
MJX_C_ALPHA_MIN = {"square": 0.9, "triangle": 0.75, "semi-cylinder": 0.7}  # fraction within α = 0.1
REST_POS_MEDIAN_TOL = 0.005  # m
TOUCH_STEP_TOL = 1  # contact-phase steps


def _inputs(sim, n, seed):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return np.asarray(sample_strikes(n, key=k1), np.float64), np.asarray(sim.space.sample(n, key=k2), np.float64)


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_mjx_matches_mujoco_c(shape, strike_sims, mjx_strike_fn):
    sim = strike_sims(shape)
    strikes, params = _inputs(sim, N_STRIKES, seed=1)
    ev_mjx = mjx_strike_fn(sim)(jnp.asarray(strikes), jnp.asarray(params))
    ev_c = _strike_c.simulate_strikes_c(sim, strikes, params)
    assert np.asarray(ev_mjx.touched).all() and ev_c.touched.all()
    dt = sim.settings.dt_contact
    assert np.abs(np.asarray(ev_mjx.t_touch) - ev_c.t_touch).max() <= TOUCH_STEP_TOL * dt + 1e-9
    err = np.asarray(
        _metrics.relative_error(ev_mjx.post_velocity, ev_c.post_velocity, geo.characteristic_length(shape))
    )
    assert np.median(err) <= MJX_C_MEDIAN_TOL[shape], err
    assert np.mean(err <= 0.1) >= MJX_C_ALPHA_MIN[shape], err
    rest = np.linalg.norm(np.asarray(ev_mjx.rest_pose)[:, :2] - ev_c.rest_pose[:, :2], axis=1)
    assert np.median(rest) <= REST_POS_MEDIAN_TOL


MOMENTUM_TOL = 0.02  # kg m/s, on a striker momentum of 1 kg × v_pre


def test_planar_momentum_is_conserved_up_to_ground_friction(strike_sims):
    """Striker + block momentum after the contact window equals the striker's before, less ground friction.

    The ground can take at most μ2·(m_b·g)·(window) of horizontal impulse (plus what the
    striker's push adds to the normal force while the block rocks, covered by the tolerance).
    """
    sim = strike_sims("square")
    strikes, params = _inputs(sim, 8, seed=2)
    params[:, 1] = 0.02  # μ2 at its prior minimum: the ground takes almost nothing
    run = jax.jit(jax.vmap(lambda s, p: _strike.contact_phase(sim, sim.space.apply(sim.model, sim.rows, p), s)))
    res = run(jnp.asarray(strikes), jnp.asarray(params))
    assert np.asarray(res.touched).all()
    v = np.asarray(res.v_end)
    m = sim.mj_model()
    m_block, m_striker = m.body_mass[1], m.body_mass[2]
    for i in range(len(strikes)):
        _, _, v0 = geo.striker_start("square", strikes[i])
        p_before = m_striker * np.asarray(v0)
        # free joint: v is the body origin's; the square's centre of mass is at its origin
        p_after = m_striker * np.asarray(v[i, 6:8]) + m_block * np.asarray(v[i, 0:2])
        ground_bound = 0.02 * m_block * 9.81 * _strike.RELEASE_AFTER
        assert np.linalg.norm(p_after - p_before) <= ground_bound + MOMENTUM_TOL


MIRROR_TOL = 0.03  # relative error (clashx.metrics) between a strike and its mirror image


@pytest.mark.parametrize("shape", ["square", "triangle"])
def test_mirror_symmetry(shape, strike_sims, mjx_strike_fn):
    """Each shape is symmetric about its y axis: θ → π − θ, θ1 → −θ1 flips vx and ωz."""
    sim = strike_sims(shape)
    strikes, params = _inputs(sim, N_STRIKES // 2, seed=3)
    mirrored = strikes * np.array([-1.0, -1.0, 1.0]) + np.array([np.pi, 0.0, 0.0])
    params_m = params * np.where(np.array(sim.space.names) == "com_x", -1.0, 1.0)  # the offset mirrors too
    both = mjx_strike_fn(sim)(
        jnp.asarray(np.concatenate([strikes, mirrored])), jnp.asarray(np.concatenate([params, params_m]))
    )
    v = np.asarray(both.post_velocity)
    a, b = v[: len(strikes)], v[len(strikes) :] * np.array([-1.0, 1.0, -1.0])
    err = np.asarray(_metrics.relative_error(b, a, geo.characteristic_length(shape)))
    assert np.median(err) <= MIRROR_TOL, err


def test_param_space_in_axes_batches_only_written_fields(strike_sims):
    sim = strike_sims("square")
    sp = sim.space
    values = np.stack(
        [sp.vector(mu1=0.1, mu2=0.2, e1=0.3, mass=0.22), sp.vector(mu1=0.9, mu2=0.8, e1=2.5, com_x=0.004)]
    )
    batched = sp.batch_model(sim.model, sim.rows, jnp.asarray(values))
    axes = sp.in_axes(sim.model)
    batched_fields = {jax.tree_util.keystr(path) for path, a in jax.tree_util.tree_leaves_with_path(axes)}
    inertial = {".body_mass", ".body_ipos", ".body_inertia", ".body_subtreemass", ".body_invweight0", ".dof_invweight0"}
    assert batched_fields == {".pair_friction", ".pair_solref"} | inertial
    got = jax.vmap(lambda m: (m.pair_friction, m.pair_solref, m.body_mass), in_axes=(axes,))(batched)
    sb, bg = sim.rows[0][0].row, sim.rows[1][0].row
    np.testing.assert_allclose(got[0][:, sb, :2], values[:, [0, 0]], rtol=1e-6)
    np.testing.assert_allclose(got[0][:, bg, :2], values[:, [1, 1]], rtol=1e-6)
    np.testing.assert_allclose(got[1][:, sb, 1], values[:, 2], rtol=1e-6)
    np.testing.assert_allclose(got[2][:, 1], values[:, sp.index("mass")], rtol=1e-6)
    # the other model fields stay unbatched
    assert batched.geom_size.shape == sim.model.geom_size.shape


def test_param_space_rejects_values_outside_prior(strike_sims):
    sim = strike_sims("square")
    with pytest.raises(ValueError, match=r"row 1: mu2=1.5 is outside the prior range"):
        sim.space.check(np.stack([sim.space.vector(), sim.space.vector(mu2=1.5)]))


def test_no_recompilation_for_new_values(strike_sims, mjx_strike_fn):
    """The same shapes with new strikes and parameters reuse the compiled rollout."""
    sim = strike_sims("square")
    fn = mjx_strike_fn(sim)
    strikes, params = _inputs(sim, N_STRIKES, seed=1)
    fn(jnp.asarray(strikes), jnp.asarray(params))
    before = fn._cache_size()
    strikes, params = _inputs(sim, N_STRIKES, seed=7)
    fn(jnp.asarray(strikes), jnp.asarray(params))
    assert fn._cache_size() == before


def test_models_use_explicit_pairs_only(strike_sims):
    m = strike_sims("triangle").mj_model()
    assert (m.geom_contype == 0).all() and (m.geom_conaffinity == 0).all()
    assert m.npair == 2
    mx = mjx.put_model(m)
    assert mx.npair == 2


def test_semi_cylinder_pieces_make_the_lab_block(strike_sims):
    """Three convex sectors of 16 segments: the lab's 49-point arc, 0.25 kg, centre of mass at 4R/(3π)."""
    m = strike_sims("semi-cylinder").mj_model()
    assert m.npair == 6 and m.nmesh == 3
    assert abs(m.body_mass[1] - geo.BLOCK_MASS) < 1e-6
    np.testing.assert_allclose(m.body_ipos[1][:2], geo.footprint_com("semi-cylinder"), atol=1e-5)


ONSET_TOL = 2e-5  # s
SETTLE_TOL = 2e-4  # m: the block's settled sink into the soft floor (0.11 mm with the condim-4 floor contacts)


def test_contact_onset_is_resolved_below_one_step(strike_sims):
    """A head-on strike on the square's +y face: the face is GAP away, so the touch is at GAP / v_pre."""
    sim = strike_sims("square")
    strikes = np.array([[np.pi / 2, 0.0, v] for v in (0.23, 0.37, 0.61)])
    params = np.tile(sim.space.vector(), (3, 1))
    ev = _strike_c.simulate_strikes_c(sim, strikes, params, to_rest=False)
    rest_z = float(sim.block_rest[2])  # the settled block sits 0.11 mm into the soft floor; the striker flies level
    assert abs(rest_z - geo.HEIGHT / 2) < SETTLE_TOL
    np.testing.assert_allclose(ev.t_touch, geo.GAP / strikes[:, 2], atol=ONSET_TOL)
    # a head-on push on the +y face sends the block along -y
    assert np.all(np.isfinite(ev.post_velocity)) and np.all(ev.post_velocity[:, 1] < 0)  # pushed along -y


EARLY_STOP_TOL = (
    1e-5  # m, rad: rest poses of the C slide stopped once every block is at rest, against MAX_TIME (seen 7e-7)
)


@pytest.mark.parametrize("shape", ["square", "semi-cylinder"])
def test_c_slide_stopped_at_rest_gives_the_rest_pose_at_max_time(strike_sims, shape):
    """`slide_to_rest_c` (stops once all blocks rest) against the full slide to MAX_TIME (`slide_c`)."""
    sim = strike_sims(shape)
    s = np.asarray(sample_strikes(24, key=jax.random.PRNGKey(8)), np.float64)
    p = np.asarray(sim.space.sample(24, key=jax.random.PRNGKey(9)), np.float64)
    c = _strike_c.contact_phase_c(sim, s, p)
    n_steps = np.ceil((_strike.MAX_TIME - c.t_end) / sim.settings.dt_slide - 1e-9).astype(int)
    full = _strike_c.slide_c(sim, p, c.q_end, c.v_end, c.t_end, int(n_steps.max()))[np.arange(24), n_steps - 1]
    early = _strike_c.slide_to_rest_c(sim, p, c.q_end, c.v_end, c.t_end)
    a, b = (np.asarray(_strike.block_poses_batch(jnp.asarray(q))) for q in (full, early))
    np.testing.assert_allclose(b, a, atol=EARLY_STOP_TOL)

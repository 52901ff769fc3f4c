"""clashx.grad: the fixed-iteration solver step (reverse mode) and bundled contact gradients, on a box and a plane.

A 5 cm box (elliptic friction cone, Newton, 8 iterations, 1 ms) keeps the
compiles small; the strike's own bookkeeping is checked against
`clashx.scenes._strike.contact_phase` on one strike.
"""

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from clashx import grad
from clashx.core import _mjx
from clashx.core._mjx import as_float64, mjx

XML = """<mujoco><option timestep="0.001" cone="elliptic" iterations="8" solver="Newton"/>
<worldbody><geom type="plane" size="1 1 .1" friction="0.5"/>
<body pos="0 0 0.05"><freejoint/><geom type="box" size=".05 .05 .05" mass="0.25"/></body></worldbody></mujoco>"""
N_STEPS = 20
VALUE_ATOL = 1e-12  # m: the scan's values against the while-loop's (the same arithmetic)
GRAD_RTOL = 1e-6  # reverse mode through the scan against forward mode through the while-loop
FD_STEP = 1e-6  # m/s
FD_RTOL = 1e-3  # reverse mode against central differences (the box slides: smooth in its velocity)
SIGMA_ZERO = 1e-9  # the bundle's spread for "σ → 0"
SIGMA_ZERO_ATOL = 1e-6  # that bundle's gradient against the plain gradient
BUNDLE_MEAN_TOL = (
    5e-4  # m: the bundle's mean state against the unperturbed rollout: within σ_pos = 0.5 mm (0.17 mm measured)
)
RESTING = (jnp.array([0.0, 0, 0.0499, 1, 0, 0, 0]), jnp.zeros(6))
SLIDING = (jnp.array([0.0, 0, 0.0499, 1, 0, 0, 0]), jnp.array([0.3, 0, 0, 0, 0, 0.0]))
FLYING = (jnp.array([0.0, 0, 0.3, 1, 0, 0, 0]), jnp.array([0.3, 0.1, 0.2, 0, 0, 1.0]))
DROPPING = (jnp.array([0.0, 0, 0.052, 1, 0, 0, 0]), jnp.array([0.2, 0, -0.5, 0, 0, 0.0]))
BOX_CONFIG = dict(qpos_dofs=(0, 1, 2), qvel_dofs=(0, 1, 2, 3, 4, 5))


@pytest.fixture(scope="module")
def model():
    with jax.enable_x64(True):
        m = as_float64(mjx.put_model(mujoco.MjModel.from_xml_string(XML)))
    return m


def _data(model, q, v):
    return mjx.make_data(model).replace(qpos=jnp.asarray(q, jnp.float64), qvel=jnp.asarray(v, jnp.float64))


def _position(model, stepper, q, v, n=N_STEPS):
    d, _ = jax.lax.scan(lambda d, _: (stepper(model, d), None), _data(model, q, v), None, length=n)
    return d.qpos[:3]


# Jitted once for every case (q, v, key are traced; the stepper and the config are static): the compiles
# of Jacobians through the solver are this file's cost.
@eqx.filter_jit
def _value(model, stepper, q, v):
    return _position(model, stepper, q, v)


@eqx.filter_jit
def _jacobian(model, stepper, q, v, reverse=False):
    return (jax.jacrev if reverse else jax.jacfwd)(lambda v: _position(model, stepper, q, v))(v)


def test_mjx_solver_still_has_the_loop_step_replaces():
    """Fails when MJX's solver changes the loop `clashx.grad.step` swaps (then revisit `_solver.py`)."""
    source = inspect.getsource(_mjx._solver.solve)
    assert "jax.lax.while_loop(cond, body, ctx)" in source
    assert grad.reverse_mode_ready()


def test_plain_mjx_step_still_blocks_reverse_mode(model):
    """mujoco#2259: if this stops raising, MJX differentiates its loop itself and `grad.step` can go."""
    with jax.enable_x64(True):
        q, v = SLIDING
        with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
            jax.jacrev(lambda v: _position(model, mjx.step, q, v, n=1))(v)  # one step raises as well as twenty


def test_step_values_and_reverse_gradient(model):
    with jax.enable_x64(True):
        q, v = SLIDING
        np.testing.assert_allclose(
            _value(model, grad.step, q, v), _value(model, mjx.step, q, v), rtol=0, atol=VALUE_ATOL
        )
        j_rev = _jacobian(model, grad.step, q, v, reverse=True)
        j_fwd = _jacobian(model, mjx.step, q, v)
        np.testing.assert_allclose(j_rev, j_fwd, rtol=GRAD_RTOL, atol=1e-12)
        e = jnp.zeros(6).at[0].set(FD_STEP)
        fd = (_value(model, mjx.step, q, v + e) - _value(model, mjx.step, q, v - e)) / (2 * FD_STEP)
        np.testing.assert_allclose(j_rev[:, 0], fd, rtol=FD_RTOL, atol=1e-9)
        assert np.abs(j_rev[0, 0]) > 1e-3  # a real dependence, not a zero matched to a zero


def _bundled(model, q, v, config, key, stepper=mjx.step, n=N_STEPS):
    d, _ = grad.bcg_scan(
        lambda d: stepper(model, d),
        _data(model, q, v),
        n,
        onset=lambda d: jnp.array(True),
        record=lambda d: d.qpos[:3],
        config=config,
        key=key,
    )
    return d.qpos[:3]


@eqx.filter_jit
def _bundled_value(model, q, v, config, key):
    return _bundled(model, q, v, config, key)


@eqx.filter_jit
def _bundled_jacobian(model, q, v, config, key, reverse=False):
    if reverse:
        return jax.jacrev(lambda v: _bundled(model, q, v, config, key, grad.step))(v)
    return jax.jacfwd(lambda v: _bundled(model, q, v, config, key))(v)


@pytest.mark.parametrize("case", ["flying", "sliding"])
def test_bcg_with_sigma_to_zero_is_the_plain_gradient(model, case):
    """Away from contact (free flight) and in smooth contact (sliding), σ → 0 gives the plain derivative."""
    q, v = {"flying": FLYING, "sliding": SLIDING}[case]
    config = grad.BCGConfig(sigma_pos=SIGMA_ZERO, sigma_vel=SIGMA_ZERO, horizon=5, **BOX_CONFIG)
    with jax.enable_x64(True):
        key = jax.random.PRNGKey(0)
        j_b = _bundled_jacobian(model, q, v, config, key)
        j_p = _jacobian(model, mjx.step, q, v)
        np.testing.assert_allclose(j_b, j_p, rtol=0, atol=SIGMA_ZERO_ATOL)
        # and in reverse mode through the fixed-iteration step
        j_r = _bundled_jacobian(model, q, v, config, key, reverse=True)
        np.testing.assert_allclose(j_r, j_p, rtol=0, atol=SIGMA_ZERO_ATOL)


def test_bundle_mean_stays_near_the_unperturbed_rollout(model):
    """A box landing on a corner-free face: the bundle's mean lands within BUNDLE_MEAN_TOL of the plain rollout."""
    q, v = DROPPING
    config = grad.BCGConfig(horizon=10, **BOX_CONFIG)
    with jax.enable_x64(True):
        plain = _value(model, mjx.step, q, v)
        for seed in range(3):
            mean = _bundled_value(model, q, v, config, jax.random.PRNGKey(seed))
            assert np.linalg.norm(np.asarray(mean - plain)) < BUNDLE_MEAN_TOL
            assert np.linalg.norm(np.asarray(mean - plain)) > 0  # the bundle did perturb


def test_bcg_is_finite_where_unpatched_mjx_gives_nan(model):
    """A box at rest: MJX's own √ of a zero friction force turns every tangent NaN; the bundle drops such copies.

    clashx patches that √ (`clashx.core._mjx`); the test restores MJX's `jax.numpy`
    to show what a user of plain MJX meets, and that the bundle (`drop_nan`) alone
    gives a finite derivative: its copies slide, and a copy whose corner carries no
    friction force is left out of the mean's derivative.
    """
    q, v = RESTING
    config = grad.BCGConfig(horizon=N_STEPS, drop_nan=True, **BOX_CONFIG)
    patched = _mjx._solver.jp
    _mjx._solver.jp = jnp
    try:
        with jax.enable_x64(True):
            j_plain = jax.jacfwd(lambda v: _position(model, mjx.step, q, v))(v)
            j_bcg = jax.jacfwd(lambda v: _bundled(model, q, v, config, jax.random.PRNGKey(0)))(v)
    finally:
        _mjx._solver.jp = patched
    assert np.isnan(np.asarray(j_plain)).any()
    assert np.isfinite(np.asarray(j_bcg)).all()
    assert np.abs(np.asarray(j_bcg)).max() > 1e-3  # some copies kept: not a zero from dropping them all


def test_bcg_config_rejects_odd_bundles():
    with pytest.raises(ValueError, match="even"):
        grad.BCGConfig(n_bundle=3)


def test_strike_records_give_the_contact_phase(strike_sims):
    """`contact_from_records` reproduces `_strike.contact_phase`'s event from the same steps (square, one strike)."""
    from clashx.grad import _strike_grad
    from clashx.scenes import _strike

    sim = strike_sims("square")
    p = jnp.asarray(sim.space.nominal)
    strike = jnp.array([0.2, 0.1, 0.6])

    @jax.jit
    def both(s):
        model = sim.space.apply(sim.model, sim.rows, p)
        ref = _strike.contact_phase(sim, model, s)
        q0, v0 = _strike.initial_state(sim, s)
        _, rec = grad.plain_scan(
            lambda d: mjx.step(model, d),
            mjx.make_data(model).replace(qpos=q0, qvel=v0),
            sim.n_contact,
            record=lambda d: _strike_grad._record(sim, d),
        )
        return ref, _strike_grad.contact_from_records(sim, q0, v0, rec)

    ref, mine = both(strike)
    assert bool(ref.touched)
    for field in ("post_velocity", "release_pose", "t_touch", "q_end", "v_end", "t_end"):
        np.testing.assert_allclose(getattr(mine, field), getattr(ref, field), rtol=0, atol=1e-9, err_msg=field)

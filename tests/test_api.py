"""The Python path a JAX user expects: plain `jax.jit`, `jax.vmap` and `jax.grad` on the public functions and pytrees,
typed results with short reprs, and one generic `predict` and `save_surrogate`/`load_surrogate` for every surrogate."""

from __future__ import annotations

import inspect
from pathlib import Path

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import clashx

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
JIT_TOL = 1e-5  # float32: one jitted world against the same world in a vmapped batch (XLA fuses differently)
REPR_CHARS = 400  # a result's repr fits a few lines (a LabFit printed 13,000 characters, a HybridSystem 14,000)


@pytest.fixture(scope="module")
def ball():
    """The README's ball on a table with a small untrained surrogate: the system, and two worlds' launch states."""
    scene = clashx.load_scene(f"{EXAMPLES / 'ball_on_table.py'}:BallOnTable")
    model = clashx.make_pair_surrogate(scene, key=jax.random.key(0), width=16, depth=1)
    params = jnp.asarray(scene.space.centre, jnp.float32)
    system = clashx.hybrid_system(scene, model, params)
    q, v = scene.sample_launch(2, jax.random.key(1))
    states = jax.vmap(lambda qq, vv: clashx.init_state(system, qq, vv))(jnp.asarray(q), jnp.asarray(v))
    return scene, model, system, states


def test_plain_jit_and_vmap_of_hybrid_step(ball):
    """`jax.jit(clashx.hybrid_step)(system, state)` as written, and `jax.vmap` over worlds equal to one world at a
    time; a second world through the same jitted step does not trace again (the recompilation guard)."""
    _, _, system, states = ball
    step = jax.jit(chex.assert_max_traces(clashx.hybrid_step, n=1))
    worlds = [step(system, jax.tree.map(lambda a, i=i: a[i], states)) for i in range(2)]
    batched = jax.vmap(clashx.hybrid_step, in_axes=(None, 0))(system, states)
    for i, world in enumerate(worlds):
        chex.assert_trees_all_close(jax.tree.map(lambda a, i=i: a[i], batched), world, rtol=JIT_TOL, atol=JIT_TOL)
        assert np.isfinite(np.asarray(world.data.qpos)).all()
    assert float(worlds[0].data.time) == pytest.approx(system.scene.dt)


def test_plain_jit_vmap_and_grad_of_predict_on_every_surrogate(ball):
    """One `clashx.predict` for the strike's, the cube's and a scene's surrogate; plain jit equal to eager;
    `jax.grad` through it against central differences (float32: FD_TOL)."""
    scene, pair_model, _, states = ball
    strike = clashx.shipped_strike_surrogate("square")
    strikes = jnp.array([[0.2, 0.1, 0.5], [1.0, -0.2, 0.3]])
    p = jnp.asarray(strike.space.centre, jnp.float32)
    chex.assert_trees_all_close(
        jax.jit(clashx.predict)(strike, strikes, p), clashx.predict(strike, strikes, p), rtol=JIT_TOL, atol=JIT_TOL
    )
    chex.assert_shape(clashx.predict(strike, strikes, jnp.stack([p, p])), (2, 3))

    cube = clashx.shipped_cube_surrogate()
    pre = jnp.zeros((1, 13)).at[0, 0].set(1.0).at[0, 6].set(0.06).at[0, 12].set(-1.0)
    chex.assert_shape(jax.jit(clashx.predict)(cube, pre, jnp.asarray(cube.space.centre, jnp.float32)), (1, 13))
    pair_pre = jax.vmap(scene.pair_state)(states.data.qpos, states.data.qvel)
    chex.assert_shape(
        clashx.predict(pair_model, pair_pre, jnp.asarray(scene.space.centre, jnp.float32)), pair_pre.shape
    )

    def speed(params):
        return jnp.sum(clashx.predict(strike, strikes, params) ** 2)

    g = jax.grad(speed)(p)
    h = 1e-2 * (jnp.asarray(strike.space.high) - jnp.asarray(strike.space.low))
    fd = jnp.array([(speed(p.at[j].add(h[j])) - speed(p.at[j].add(-h[j]))) / (2 * h[j]) for j in range(p.size)])
    np.testing.assert_allclose(np.asarray(g), np.asarray(fd), rtol=0.05, atol=0.05 * float(jnp.abs(fd).max()))


def test_typed_results_and_short_reprs(ball, tmp_path):
    """No public function returns a dict (by annotation), results print in a few lines, and any surrogate saves and
    loads through the one pair of calls."""
    returns_dict = [
        name
        for name in clashx.__all__
        if inspect.isfunction(obj := getattr(clashx, name))
        and "dict" in str(inspect.signature(obj).return_annotation).split("[")[0]
    ]
    assert not returns_dict, returns_dict
    scene, model, system, states = ball
    for value in (system, jax.tree.map(lambda a: a[0], states), model, scene):
        assert len(repr(value)) < REPR_CHARS, (type(value).__name__, len(repr(value)))
    assert repr(model).startswith("PairSurrogate(mlp=MLP(...)")
    clashx.save_surrogate(tmp_path / "m", model)
    again = clashx.load_surrogate(tmp_path / "m", scene)
    chex.assert_trees_all_equal(eqx.filter(model, eqx.is_array), eqx.filter(again, eqx.is_array))
    with pytest.raises(ValueError, match="pass its scene"):
        clashx.load_surrogate(tmp_path / "m")

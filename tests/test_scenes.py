"""Every shipped scene through the one `AbstractImpactScene` interface (one parametrised test, no scene special-cased)."""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import clashx
from clashx.events._events import validate_events
from clashx.scenes._by_name import SCENES


@pytest.fixture(scope="module", params=SCENES)
def scene(request) -> clashx.AbstractImpactScene:
    return clashx.make_scene(request.param, "square" if request.param == "strike" else "")


def test_a_scene_is_its_mjcf_pair_prior_window_and_events(scene):
    """MJCF that compiles with both bodies of the pair; prior draws inside their ranges; valid events on MuJoCo C."""
    assert isinstance(scene, clashx.AbstractImpactScene)
    model = mujoco.MjModel.from_xml_string(scene.mjcf())
    for body in scene.pair:  # a body, or (the table) a geom of the world
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body) >= 0 or (
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, body) >= 0
        ), body
    assert 0.0 < scene.window < 0.1
    inputs, params = scene.sample_inputs(4, key=jax.random.PRNGKey(0))
    assert len(inputs) == len(params) == 4 and params.shape[1] == scene.space.size
    assert np.all(params >= np.array(scene.space.low) - 1e-9) and np.all(params <= np.array(scene.space.high) + 1e-9)
    again, _ = scene.sample_inputs(4, key=jax.random.PRNGKey(0))
    np.testing.assert_array_equal(inputs, again)  # same key, same draws
    events = validate_events(scene.simulate_events(inputs, params, engine="c", to_rest=False), where=scene.name)
    assert str(events["scene"]) == scene.name and len(events["params"]) == 4
    assert "param_space" in scene.describe()


def test_an_unknown_scene_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="strike, cube-toss"):
        clashx.make_scene("paddle")

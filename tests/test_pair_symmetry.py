"""A free body's symmetric images (`clashx.scenes.symmetric_images`) against MuJoCo C itself.

The images of a simulated impact must be the impacts MuJoCo simulates from the
images of its launch: exact for the box's 180° turns and for the mirror (MuJoCo's
pyramidal cone and solver are symmetric under both), so the surrogate may learn
from them as from simulated impacts.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from clashx.scenes import load_scene, symmetric_images
from clashx.scenes._pair_symmetry import check_symmetries

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "free_box.py")
IMAGE_TOL = 1e-6  # MuJoCo C on the images against the images of MuJoCo C (events are stored in float32)
N = 12  # launches


@pytest.fixture(scope="module")
def box():
    return load_scene(f"{EXAMPLE}:FreeBox")


def _canonical(states: np.ndarray, qo: int = 3) -> np.ndarray:
    """States with each quaternion's sign fixed (q and −q are one orientation)."""
    out = states.copy()
    out[:, qo : qo + 4] *= np.where(out[:, qo : qo + 1] < 0, -1.0, 1.0)
    return out


def test_images_are_mujocos_own_impacts(box):
    assert box.body_symmetries and box.mirror is not None  # the example declares them
    launch, params = box.sample_inputs(N, key=jax.random.PRNGKey(3))
    ev = box.simulate_events(launch, params, engine="c")
    images, _ = symmetric_images(box, launch, launch)
    k = len(images) // N
    assert k == 8  # three turns and the identity, each mirrored
    ev_img = box.simulate_events(images, np.tile(params, (k, 1)), engine="c")
    assert ev["touched"].all() and ev_img["touched"].all()
    pre, post = symmetric_images(box, ev["pre_state"], ev["post_state"])
    for mine, theirs in ((pre, ev_img["pre_state"]), (post, ev_img["post_state"])):
        np.testing.assert_allclose(_canonical(mine), _canonical(theirs), atol=IMAGE_TOL)
    # each post keeps its pre's hemisphere, so the orientation change of an image is as small as the original's
    dots = np.sum(pre[:, 3:7] * post[:, 3:7], 1)
    np.testing.assert_array_equal(np.sign(dots), np.tile(np.sign(dots[:N]), k))


def test_declared_symmetries_are_checked(box):
    """A scene's declaration is checked when it is built (`PairScene.__init__` calls `check_symmetries`)."""

    def declared(**kw):
        return SimpleNamespace(name="box", joints=box.joints, **({"body_symmetries": (), "mirror": None} | kw))

    with pytest.raises(ValueError, match="odd number of -1"):
        check_symmetries(declared(mirror=(-1.0, -1.0, 1.0)))  # a rotation, not a reflection
    with pytest.raises(ValueError, match="unit quaternion"):
        check_symmetries(declared(body_symmetries=((0.0, 2.0, 0.0, 0.0),)))
    ball = load_scene(os.path.join(os.path.dirname(EXAMPLE), "ball_on_table.py") + ":BallOnTable")
    check_symmetries(ball)  # none declared: nothing to check

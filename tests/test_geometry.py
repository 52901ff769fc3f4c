"""Impact points and normals against SCENE.md's geometry (analytic cases and the lab's own code)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clashx import _geometry as geo

POINT_TOL = 1e-6  # m
NORMAL_TOL = 1e-6


@pytest.mark.parametrize(
    "shape, theta, point, normal",
    [
        ("square", math.pi / 2, (0.0, 0.05), (0.0, 1.0)),
        ("square", math.pi / 6, (0.05, 0.05 * math.tan(math.pi / 6)), (1.0, 0.0)),
        ("square", 5 * math.pi / 6, (-0.05, 0.05 * math.tan(math.pi / 6)), (-1.0, 0.0)),
        # the triangle's edge between its 330° and 90° vertices faces 30°, at the inradius side/(2√3)
        (
            "triangle",
            math.pi / 6,
            (0.12 / (2 * math.sqrt(3)) * math.cos(math.pi / 6), 0.12 / (2 * math.sqrt(3)) * 0.5),
            (math.cos(math.pi / 6), 0.5),
        ),
        ("semi-cylinder", 1.0, (0.06 * math.cos(1.0), 0.06 * math.sin(1.0)), (math.cos(1.0), math.sin(1.0))),
    ],
)
def test_impact_geometry_analytic(shape, theta, point, normal):
    p, n = geo.impact_geometry(shape, theta)
    np.testing.assert_allclose(p, point, atol=POINT_TOL)
    np.testing.assert_allclose(n, normal, atol=NORMAL_TOL)


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_impact_geometry_matches_lab(shape, strike_lab_module):
    lab = strike_lab_module
    for theta in np.linspace(*geo.STRIKE_RANGES["theta"], 37):
        p_ref, n_ref = lab.impact_geometry(shape, float(theta))
        p, n = geo.impact_geometry(shape, float(theta))
        np.testing.assert_allclose(p, p_ref, atol=POINT_TOL, err_msg=f"{shape} θ={theta}")
        np.testing.assert_allclose(n, n_ref, atol=NORMAL_TOL, err_msg=f"{shape} θ={theta}")


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_striker_start(shape):
    strike = np.array([1.1, 0.2, 0.5])
    centre, yaw, vel = geo.striker_start(shape, strike)
    point, normal = geo.impact_geometry(shape, strike[0])
    d = np.array([math.cos(yaw), math.sin(yaw)])
    # the face square to d lies GAP behind the impact point, the velocity is v_pre along d
    np.testing.assert_allclose(np.dot(np.asarray(point) - centre, d), geo.GAP + geo.STRIKER_HALF, atol=POINT_TOL)
    np.testing.assert_allclose(vel, 0.5 * d, atol=1e-7)
    # θ1 is the angle from the reversed normal to the direction, counter-clockwise
    rev = -np.asarray(normal)
    angle = math.atan2(rev[0] * d[1] - rev[1] * d[0], rev @ d)
    assert abs(angle - strike[1]) < 1e-6


def test_characteristic_length_square():
    # radius of gyration of a square of side a about its centre: a/√6
    assert abs(geo.characteristic_length("square") - 0.1 / math.sqrt(6)) < 1e-12


def test_outline_is_convex_and_counter_clockwise():
    for shape in geo.SHAPES:
        ring = geo.outline(shape)
        nxt = np.roll(ring, -1, 0)
        nxt2 = np.roll(ring, -2, 0)
        cross = (nxt[:, 0] - ring[:, 0]) * (nxt2[:, 1] - nxt[:, 1]) - (nxt[:, 1] - ring[:, 1]) * (
            nxt2[:, 0] - nxt[:, 0]
        )
        assert (cross > -1e-12).all(), shape


def test_unknown_shape_raises():
    with pytest.raises(ValueError, match="unknown shape 'circle'"):
        geo.outline("circle")

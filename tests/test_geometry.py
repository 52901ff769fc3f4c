"""Impact points and normals against SCENE.md's geometry (analytic cases and the lab's own code)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clashx.scenes import _geometry as geo

POINT_TOL = 1e-6  # m
NORMAL_TOL = 1e-6
UNIT_TOL = 1e-6  # |‖n‖ - 1| in float32
THETA_GRID = np.linspace(*geo.STRIKE_RANGES["theta"], 181)  # steps of π/216: hits the square's corners π/4, 3π/4
TRIANGLE_INRADIUS = geo.TRIANGLE_SIDE / (2 * math.sqrt(3))  # m
TRIANGLE_CIRCUMRADIUS = geo.TRIANGLE_SIDE / math.sqrt(3)  # m
TRIANGLE_FACES = np.deg2rad([30.0, 150.0, 270.0])  # outward normals of the triangle's edges


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
        # by hand: θ=60° meets the 30° edge at inradius/cos 30° = 0.04 m, two thirds along it from (0.06, -0.0346)
        ("triangle", math.pi / 3, (0.02, 0.04 * math.sin(math.pi / 3)), (math.cos(math.pi / 6), 0.5)),
        ("triangle", 5 * math.pi / 6, (-0.03, TRIANGLE_INRADIUS / 2), (-math.cos(math.pi / 6), 0.5)),
        ("square", math.pi / 3, (0.05 / math.tan(math.pi / 3), 0.05), (0.0, 1.0)),
        ("semi-cylinder", math.pi / 2, (0.0, 0.06), (0.0, 1.0)),
        ("semi-cylinder", math.pi / 12, (0.06 * math.cos(math.pi / 12), 0.06 * math.sin(math.pi / 12)), None),
    ],
)
def test_impact_geometry_analytic(shape, theta, point, normal):
    p, n = geo.impact_geometry(shape, theta)
    np.testing.assert_allclose(p, point, atol=POINT_TOL)
    if normal is None:  # radial
        normal = np.asarray(point) / np.linalg.norm(point)
    np.testing.assert_allclose(n, normal, atol=NORMAL_TOL)


@pytest.mark.parametrize(
    "shape, theta, corner, faces",
    [
        ("square", math.pi / 4, (0.05, 0.05), [(1.0, 0.0), (0.0, 1.0)]),
        ("square", 3 * math.pi / 4, (-0.05, 0.05), [(0.0, 1.0), (-1.0, 0.0)]),
        (
            "triangle",
            math.pi / 2,
            (0.0, TRIANGLE_CIRCUMRADIUS),
            [(math.cos(a), math.sin(a)) for a in TRIANGLE_FACES[:2]],
        ),
    ],
)
def test_impact_geometry_at_a_vertex(shape, theta, corner, faces):
    # the point is the vertex; the normal is one of its two edges' (the lab takes the first edge)
    p, n = geo.impact_geometry(shape, theta)
    np.testing.assert_allclose(p, corner, atol=POINT_TOL)
    assert min(np.abs(np.asarray(n) - f).max() for f in faces) < NORMAL_TOL, n


def reference_hit(shape: str, theta: float) -> tuple[np.ndarray, np.ndarray | None]:
    """Impact point and normal in closed form; the normal is None at a polygon's vertex."""
    ray = np.array([math.cos(theta), math.sin(theta)])
    if shape == "semi-cylinder":
        return geo.RADIUS * ray, ray
    if shape == "square":  # the ray leaves through the side its larger component points at
        axis = int(abs(ray[1]) > abs(ray[0]))
        normal = np.zeros(2)
        normal[axis] = math.copysign(1.0, ray[axis])
        at_vertex = abs(abs(ray[0]) - abs(ray[1])) < 1e-9
        return geo.SQUARE_SIDE / 2 / abs(ray[axis]) * ray, None if at_vertex else normal
    # the triangle: through the edge whose outward normal is nearest the ray, at inradius / cos(angle between)
    cosines = np.cos(theta - TRIANGLE_FACES)
    k = int(np.argmax(cosines))
    at_vertex = np.sort(cosines)[-2] > cosines[k] - 1e-9
    normal = np.array([math.cos(TRIANGLE_FACES[k]), math.sin(TRIANGLE_FACES[k])])
    return TRIANGLE_INRADIUS / cosines[k] * ray, None if at_vertex else normal


def distance_to_outline(shape: str, point: np.ndarray) -> float:
    """Distance (m) from a point to the exact footprint's boundary."""
    if shape == "semi-cylinder":  # the arc (the flat edge lies at y = 0, outside the strike range)
        return abs(float(np.linalg.norm(point)) - geo.RADIUS)
    ring = geo.outline(shape)
    a, b = ring, np.roll(ring, -1, 0)
    s = np.clip(np.einsum("ij,ij->i", point - a, b - a) / np.einsum("ij,ij->i", b - a, b - a), 0.0, 1.0)
    return float(np.min(np.linalg.norm(a + s[:, None] * (b - a) - point, axis=1)))


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_impact_geometry_over_the_strike_range(shape):
    # without the lab: over a grid of θ the point is on the ray and on the outline, the normal is
    # unit length and outward, with the footprint behind its tangent line, and both match closed forms
    ring = geo.outline(shape)  # on the semi-cylinder its vertices lie on the exact circle
    for theta in THETA_GRID:
        p, n = (np.asarray(x, dtype=float) for x in geo.impact_geometry(shape, float(theta)))
        ray = np.array([math.cos(theta), math.sin(theta)])
        where = f"{shape} θ={theta:.4f}"
        assert abs(ray[0] * p[1] - ray[1] * p[0]) < POINT_TOL and p @ ray > 0, where
        assert distance_to_outline(shape, p) < POINT_TOL, where
        assert abs(np.linalg.norm(n) - 1.0) < UNIT_TOL, where
        assert n @ p > 0, where
        assert np.max((ring - p) @ n) < POINT_TOL, where  # a supporting line: the footprint lies behind it
        p_ref, n_ref = reference_hit(shape, float(theta))
        np.testing.assert_allclose(p, p_ref, atol=POINT_TOL, err_msg=where)
        if n_ref is not None:
            np.testing.assert_allclose(n, n_ref, atol=NORMAL_TOL, err_msg=where)


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_impact_geometry_matches_lab(shape, strike_lab_module):
    # a lab extra: skipped, with the reason, where ../shared/lab is not beside the repository
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

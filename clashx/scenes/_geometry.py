"""Geometry of the strike scene (SCENE.md): block footprints, impact points, normals.

Everything here is in the block frame: origin at the footprint's reference
point raised to half height, x and y in the footprint's plane.  Functions on
strike parameters are written in `jax.numpy` for one strike and batch with
`jax.vmap`; the outline builders return numpy arrays for building models.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ..core import Array, Bool, Float, ScalarLike

SHAPES = ("semi-cylinder", "square", "triangle")
"""The strike lab's three block shapes (SCENE.md): every strike function takes one of these names."""

HEIGHT = 0.05  # block height (m)
RADIUS = 0.06  # semi-cylinder radius (m)
SQUARE_SIDE = 0.10  # square side (m)
TRIANGLE_SIDE = 0.12  # equilateral triangle side (m)
BLOCK_MASS = 0.25  # nominal block mass (kg)
STRIKER_HALF = 0.02  # striker half side (m)
STRIKER_MASS = 1.0  # striker mass (kg)
GAP = 0.01  # striker face to impact point at launch (m)

STRIKE_RANGES = {
    "theta": (math.pi / 12, 11 * math.pi / 12),
    "theta1": (-math.pi / 12, math.pi / 12),
    "v_pre": (0.2, 0.8),
}
STRIKE_NAMES = ("theta", "theta1", "v_pre")
STRIKE_LOW = np.array([STRIKE_RANGES[k][0] for k in STRIKE_NAMES])  # the ranges as (3,) bounds
STRIKE_HIGH = np.array([STRIKE_RANGES[k][1] for k in STRIKE_NAMES])
GRAVITY = 9.81  # m/s², MuJoCo's default, every scene's

# The semi-cylinder's arc: 48 segments (the lab's 49 points), modelled as 3 convex
# sectors of 16 segments each, because MJX caps a convex face at 20 vertices
# (a sector's flat faces have 18).  One 16-segment hull would tilt the surface
# normal by up to 5.6° from the radial strike normal, in a sawtooth over θ
# that the real block does not have.
ARC_SEGMENTS = 48
ARC_PIECES = 3


def check_shape(shape: str) -> str:
    """Return `shape` if it names a block of SCENE.md, else raise a ValueError naming the choices."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; expected one of {', '.join(SHAPES)}")
    return shape


def outline(shape: str, arc_segments: int = ARC_SEGMENTS) -> np.ndarray:
    """Counter-clockwise outline of the footprint in the block frame, (N, 2) metres.

    The semi-cylinder's arc is a polygon of `arc_segments` segments whose
    vertices lie on the circle (the model used by the simulator); the exact
    arc is used by `impact_geometry`.
    """
    check_shape(shape)
    if shape == "semi-cylinder":
        a = np.linspace(0.0, math.pi, arc_segments + 1)
        return np.stack([RADIUS * np.cos(a), RADIUS * np.sin(a)], 1)
    if shape == "square":
        h = SQUARE_SIDE / 2
        return np.array([[h, -h], [h, h], [-h, h], [-h, -h]])
    r = TRIANGLE_SIDE / math.sqrt(3)
    a = np.deg2rad([330.0, 90.0, 210.0])
    return np.stack([r * np.cos(a), r * np.sin(a)], 1)


def convex_pieces(shape: str) -> list[np.ndarray]:
    """The footprint as counter-clockwise convex polygons whose union it is, each (N_i, 2) metres.

    The square and the triangle are one piece; the semi-cylinder is `ARC_PIECES`
    sectors (pie slices from the frame origin) of `ARC_SEGMENTS / ARC_PIECES` segments.
    """
    if shape != "semi-cylinder":
        return [outline(shape)]
    ring = outline(shape)
    per = ARC_SEGMENTS // ARC_PIECES
    return [np.concatenate([np.zeros((1, 2)), ring[k * per : (k + 1) * per + 1]]) for k in range(ARC_PIECES)]


def polygon_area(poly: np.ndarray) -> float:
    """Area of a counter-clockwise polygon (shoelace), m²."""
    x, y = poly[:, 0], poly[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def footprint_com(shape: str) -> np.ndarray:
    """Centroid of the exact footprint in the block frame, (2,) metres."""
    check_shape(shape)
    if shape == "semi-cylinder":
        return np.array([0.0, 4 * RADIUS / (3 * math.pi)])
    return np.zeros(2)


def characteristic_length(shape: str) -> float:
    """The length r that turns the block's yaw rate into a speed (r·ωz), metres.

    The radius of gyration of the exact footprint about its centroid, so that
    ½ m (r ωz)² is the rotational kinetic energy: the fair weight of ωz in a
    velocity error.
    """
    check_shape(shape)
    if shape == "semi-cylinder":
        j_origin = RADIUS**2 / 2  # polar moment per unit area about the flat edge's midpoint
        return math.sqrt(j_origin - footprint_com(shape)[1] ** 2)
    if shape == "square":
        return math.sqrt(SQUARE_SIDE**2 / 6)
    return math.sqrt(TRIANGLE_SIDE**2 / 12)


def rot2(angle: ScalarLike) -> Float[Array, "2 2"]:
    """Planar rotation matrix by `angle` (rad), counter-clockwise."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.array([[c, -s], [s, c]])


def line_edge_hits(
    poly: Float[Array, "N 2"], origin: Float[Array, "2"], direction: Float[Array, "2"]
) -> tuple[Float[Array, "N"], Float[Array, "N"], Bool[Array, "N"], Float[Array, "N 2"]]:
    """Where the line origin + t·direction crosses each edge of a closed polygon (Cramer's rule).

    Edge i runs from poly[i] to poly[i+1]; it is met at t (along the line) and
    s ∈ [0, 1] (along the edge) when `ok` (the line is not parallel to it).

    Returns:
        (t, s, ok, edge): each (N,), and the edge vectors (N, 2).
    """
    a = poly - origin
    edge = jnp.roll(poly, -1, axis=0) - poly
    det = -direction[0] * edge[:, 1] + direction[1] * edge[:, 0]
    ok = jnp.abs(det) >= 1e-12
    safe = jnp.where(ok, det, 1.0)
    t = (-a[:, 0] * edge[:, 1] + a[:, 1] * edge[:, 0]) / safe
    s = (direction[0] * a[:, 1] - direction[1] * a[:, 0]) / safe
    return t, s, ok, edge


def impact_geometry(shape: str, theta: ScalarLike) -> tuple[Float[Array, "2"], Float[Array, "2"]]:
    """Impact point and outward unit normal for polar angle `theta` (SCENE.md, "A strike").

    The point is where the ray from the block frame's origin at `theta` leaves
    the exact footprint (the true circle for the semi-cylinder); the normal is
    the outline's outward normal there (radial on the arc).

    Args:
        shape: one of `SHAPES`.
        theta: polar angle in the block frame, rad, in [π/12, 11π/12].

    Returns:
        (point, normal): each shape (2,), block frame; metres and unit length.
    """
    check_shape(shape)
    ray = jnp.stack([jnp.cos(theta), jnp.sin(theta)])
    if shape == "semi-cylinder":
        return RADIUS * ray, ray
    t, s, ok, edge = line_edge_hits(jnp.asarray(outline(shape)), jnp.zeros(2, ray.dtype), ray)
    # At a vertex two edges hit; take the first, as the lab does (its tolerance is 1e-9 in
    # float64; in float32 the rounding of s alone is ~1e-7, so the tolerance follows the dtype).
    tol = max(1e-9, 16 * float(jnp.finfo(s.dtype).eps))
    hit = ok & (t > 0) & (s >= -tol) & (s <= 1 + tol)
    i = jnp.argmax(hit)
    normal = jnp.stack([edge[i, 1], -edge[i, 0]]) / jnp.linalg.norm(edge[i])
    return t[i] * ray, normal


def strike_direction(shape: str, theta: ScalarLike, theta1: ScalarLike) -> Float[Array, "2"]:
    """Unit direction of the striker's travel in the block frame: d = -R(θ1)·n."""
    _, normal = impact_geometry(shape, theta)
    return -(rot2(theta1) @ normal)


def striker_start(
    shape: str, strike: Float[Array, "3"]
) -> tuple[Float[Array, "2"], Float[Array, ""], Float[Array, "2"]]:
    """Launch pose and velocity of the striker for one strike, in the block frame.

    Args:
        shape: one of `SHAPES`.
        strike: (θ, θ1, v_pre) in rad, rad, m/s.

    Returns:
        (centre, yaw, velocity): the striker's centre (2,) in metres, placed
        GAP + STRIKER_HALF behind the impact point along the strike direction;
        its yaw (rad) with a face square to that direction; its velocity (2,)
        in m/s.
    """
    theta, theta1, v_pre = strike[0], strike[1], strike[2]
    point, _ = impact_geometry(shape, theta)
    d = strike_direction(shape, theta, theta1)
    centre = point - d * (GAP + STRIKER_HALF)
    return centre, jnp.arctan2(d[1], d[0]), v_pre * d

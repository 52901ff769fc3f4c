"""The strike as an instance of the one hybrid rule: its separation, the strike a touch is, and the state at release.

The hooks `StrikeScene` gives `clashx.hybrid` (SCENE.md's scene; the pair is the striker
and the block, the pair state the whole (qpos ‖ qvel) of the scene, 10 + 9):

- `separation`: the planar separating-axis distance between the striker's square and
  the block's footprint (both are vertical prisms at the same height);
- `strike_of_state` (`impact_input`): the strike (θ, θ1, v_pre) a pre-impact state is,
  read back from the striker's line of travel: the strike surrogate's input;
- `release_state` (`impact_output`): from the surrogate's block velocity at release, the
  state at the window's end: the block guarded (`guard`: the kinetic energy of block
  and striker may rise by at most ENERGY_SLACK, the striker keeping the momentum the
  block did not take), carried at that velocity through the window (a constant velocity
  in its own frame), and the striker pulled away by the arm (parked off the scene).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import mujoco
import numpy as np

from ..core import Array, Bool, Float
from . import _geometry as geo
from ._scene import ENERGY_SLACK

_STRIKER_Q = slice(7, 10)  # striker qpos: slide x, slide y, yaw (0 = parked off the scene)
_STRIKER_V = slice(6, 9)


class StrikeBodies(NamedTuple):
    """What the hooks need of the scene's bodies (static; nominal values of the compiled model).

    Attributes:
        shape: the block's shape.
        outline: the footprint, counter-clockwise, block frame (m), as a tuple of (x, y).
        block_mass, block_izz, block_com: the block's mass (kg), inertia about the vertical axis
            through its centre of mass (kg m²), centre of mass in its frame (m).
        striker_mass: kg.
        park: the striker body's reference position in the world (m): where it is parked.
    """

    shape: str
    outline: tuple[tuple[float, float], ...]
    block_mass: float
    block_izz: float
    block_com: tuple[float, float]
    striker_mass: float
    park: tuple[float, float]


def strike_bodies(shape: str, m: mujoco.MjModel) -> StrikeBodies:
    """`StrikeBodies` read off a compiled strike model (body 1 the block, body 2 the striker)."""
    rot9 = np.zeros(9)
    mujoco.mju_quat2Mat(rot9, m.body_iquat[1])
    rot = rot9.reshape(3, 3)
    inertia = rot @ np.diag(m.body_inertia[1]) @ rot.T
    return StrikeBodies(
        shape=shape,
        outline=tuple((float(x), float(y)) for x, y in geo.outline(shape)),
        block_mass=float(m.body_mass[1]),
        block_izz=float(inertia[2, 2]),
        block_com=(float(m.body_ipos[1][0]), float(m.body_ipos[1][1])),
        striker_mass=float(m.body_mass[2]),
        park=(float(m.body_pos[2, 0]), float(m.body_pos[2, 1])),
    )


def yaw_of(quat: Float[Array, "4"]) -> Float[Array, ""]:
    """Yaw (rad) of a scalar-first quaternion."""
    w, x, y, z = quat[0], quat[1], quat[2], quat[3]
    return jnp.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def block_pose(qpos: Float[Array, "nq"]) -> Float[Array, "3"]:
    """Block pose (x, y, yaw) in the world from the scene's qpos."""
    return jnp.stack([qpos[0], qpos[1], yaw_of(qpos[3:7])])


def parked(qpos: Float[Array, "10"], qvel: Float[Array, "9"]) -> tuple[Float[Array, "10"], Float[Array, "9"]]:
    """The state with the striker pulled away: parked off the scene, at rest."""
    return jnp.asarray(qpos).at[_STRIKER_Q].set(0.0), jnp.asarray(qvel).at[_STRIKER_V].set(0.0)


def parked_np(qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`parked` of a batch (..., 10), (..., 9) in NumPy, float64 (the MuJoCo C paths')."""
    q, v = np.array(qpos, np.float64), np.array(qvel, np.float64)
    q[..., _STRIKER_Q], v[..., _STRIKER_V] = 0.0, 0.0
    return q, v


def _striker_in_block(b: StrikeBodies, qpos: Float[Array, "10"], qvel: Float[Array, "9"]):
    """Striker centre, yaw and velocity relative to the block, in the block frame."""
    pose = block_pose(qpos)
    rot_t = geo.rot2(-pose[2])
    centre = rot_t @ (jnp.asarray(b.park, qpos.dtype) + qpos[7:9] - pose[:2])
    return centre, qpos[9] - pose[2], rot_t @ (qvel[6:8] - qvel[0:2])


def _square(centre, yaw) -> Float[Array, "4 2"]:
    h = geo.STRIKER_HALF
    corners = jnp.array([[h, -h], [h, h], [-h, h], [-h, -h]], dtype=centre.dtype)
    return centre + corners @ geo.rot2(yaw).T


def _edge_normals(poly: Float[Array, "N 2"]) -> Float[Array, "N 2"]:
    edge = jnp.roll(poly, -1, axis=0) - poly
    n = jnp.stack([edge[:, 1], -edge[:, 0]], axis=1)
    return n / jnp.maximum(jnp.linalg.norm(n, axis=1, keepdims=True), 1e-12)


def separation(b: StrikeBodies, qpos: Float[Array, "10"]) -> Float[Array, ""]:
    """Planar separating-axis distance between the striker's square and the block's footprint (m).

    Positive: the largest gap along any edge normal of either polygon (a lower
    bound on their distance); negative: they overlap, by the smallest
    penetration along those axes.  Both bodies are vertical prisms at the same
    height, so overlap in the plane is overlap in space while the block stands.
    """
    centre, yaw, _ = _striker_in_block(b, qpos, jnp.zeros(9, qpos.dtype))
    a, s = jnp.asarray(b.outline, qpos.dtype), _square(centre, yaw)
    axes = jnp.concatenate([_edge_normals(a), _edge_normals(s)])
    pa, ps = a @ axes.T, s @ axes.T
    gap = jnp.maximum(ps.min(0) - pa.max(0), pa.min(0) - ps.max(0))
    return gap.max()


def strike_of_state(b: StrikeBodies, qpos: Float[Array, "10"], qvel: Float[Array, "9"]) -> Float[Array, "3"]:
    """The strike (θ, θ1, v_pre) that a pre-impact configuration is, read back from the striker's line of travel.

    The impact point is where the line through the striker's centre along its
    velocity relative to the block enters the footprint (SCENE.md: the striker is
    launched with its centre on that line); θ is its polar angle, θ1 the signed
    angle from the inward normal there to the direction of travel, v_pre the
    striker's speed relative to the block.  The inverse of
    `clashx.scenes._strike.initial_state`.
    """
    centre, _, v = _striker_in_block(b, qpos, qvel)
    speed = jnp.linalg.norm(v)
    d = v / jnp.maximum(speed, 1e-9)
    if b.shape == "semi-cylinder":
        along = centre @ d
        disc = jnp.maximum(along * along - (centre @ centre - geo.RADIUS**2), 0.0)
        point = centre + (-along - jnp.sqrt(disc)) * d
    else:
        a = jnp.asarray(b.outline, qpos.dtype)
        t, s, ok, _ = geo.line_edge_hits(a, centre, d)
        entering = (d @ _edge_normals(a).T) < 0  # d · outward normal < 0
        ok = entering & ok & (s >= -1e-6) & (s <= 1 + 1e-6)
        point = centre + jnp.min(jnp.where(ok, t, jnp.inf)) * d
        point = jnp.where(jnp.isfinite(point), point, centre)
    theta = jnp.arctan2(point[1], point[0])
    _, normal = geo.impact_geometry(b.shape, theta)
    inward = -normal
    theta1 = jnp.arctan2(inward[0] * d[1] - inward[1] * d[0], inward @ d)
    return jnp.stack([theta, theta1, speed])


def _kinetic(b: StrikeBodies, yaw, block_v_world, block_w, striker_v):
    """Planar kinetic energy of block (velocity of its frame origin, yaw rate) and striker, J."""
    r = geo.rot2(yaw) @ jnp.asarray(b.block_com, block_v_world.dtype)
    v_com = block_v_world + block_w * jnp.stack([-r[1], r[0]])
    return 0.5 * (b.block_mass * v_com @ v_com + b.block_izz * block_w**2 + b.striker_mass * striker_v @ striker_v)


def guard(
    b: StrikeBodies, qpos: Float[Array, "10"], qvel: Float[Array, "9"], prediction: Float[Array, "3"]
) -> tuple[Float[Array, "3"], Bool[Array, ""]]:
    """The block's velocity at release (vx, vy, ωz, block frame) from the surrogate's, guarded; and whether clamped.

    The block's planar velocity change Δ = (predicted − current) is scaled by the
    largest s ∈ [0, 1] for which the kinetic energy of block and striker (the
    striker keeping the momentum the block did not take) is at most
    (1 + ENERGY_SLACK) times its pre-impact value (a quadratic in s).
    """
    pred = jnp.asarray(prediction, qpos.dtype)
    yaw = block_pose(qpos)[2]
    rot = geo.rot2(yaw)
    v0, w0, s0 = qvel[0:2], qvel[5], qvel[6:8]
    dv, dw = rot @ pred[:2] - v0, pred[2] - w0
    r = rot @ jnp.asarray(b.block_com, qpos.dtype)
    dv_com = dv + dw * jnp.stack([-r[1], r[0]])
    ratio = b.block_mass / b.striker_mass

    def energy(s):
        return _kinetic(b, yaw, v0 + s * dv, w0 + s * dw, s0 - ratio * s * dv_com)

    e0, e_half, e1 = energy(0.0), energy(0.5), energy(1.0)
    a = 2.0 * (e1 - 2.0 * e_half + e0)  # e(s) = a s² + c s + e0 through the three values
    c = e1 - e0 - a
    bound = (1.0 + ENERGY_SLACK) * e0
    root = (-c + jnp.sqrt(jnp.maximum(c * c - 4.0 * a * (e0 - bound), 0.0))) / (2.0 * jnp.maximum(a, 1e-12))
    clamped = e1 > bound
    s = jnp.where(clamped, jnp.clip(root, 0.0, 1.0), 1.0)
    return jnp.concatenate([rot.T @ (v0 + s * dv), (w0 + s * dw)[None]]), clamped


def release_state(b: StrikeBodies, window: float, pre: Float[Array, "19"], velocity: Float[Array, "3"]):
    """The scene's state at the window's end (10 + 9): the block carried at `velocity` (its own frame), the striker parked.

    A constant velocity (u, ω) in the block's frame moves it on an arc: yaw0 + ω T and
    p0 + R(yaw0) ∫₀ᵀ R(ω s) ds u, T = `window`.
    """
    qpos, qvel = jnp.asarray(pre[:10]), jnp.asarray(pre[10:])
    u, w = velocity[:2], velocity[2]
    yaw0 = block_pose(qpos)[2]
    wt = w * window
    small = jnp.abs(wt) < 1e-4
    safe = jnp.where(small, 1.0, w)
    sin_t = jnp.where(small, window * (1 - wt**2 / 6), jnp.sin(wt) / safe)  # ∫ cos(ω s) ds
    cos_t = jnp.where(small, window * wt / 2, (1 - jnp.cos(wt)) / safe)  # ∫ sin(ω s) ds
    arc = jnp.stack([jnp.stack([sin_t, -cos_t]), jnp.stack([cos_t, sin_t])])
    xy = qpos[0:2] + geo.rot2(yaw0) @ arc @ u
    half = 0.5 * wt
    turn = jnp.stack([jnp.cos(half), 0.0 * half, 0.0 * half, jnp.sin(half)])
    q0 = qpos[3:7]
    quat = jnp.stack([  # turn ⊗ q0: a rotation about the world's z
        turn[0] * q0[0] - turn[3] * q0[3],
        turn[0] * q0[1] - turn[3] * q0[2],
        turn[0] * q0[2] + turn[3] * q0[1],
        turn[0] * q0[3] + turn[3] * q0[0],
    ])  # fmt: skip
    q = qpos.at[0:2].set(xy).at[3:7].set(quat / jnp.linalg.norm(quat))
    v_world = geo.rot2(yaw0 + wt) @ u
    zero = jnp.zeros((), qvel.dtype)
    v = jnp.zeros_like(qvel).at[0:2].set(v_world).at[5].set(w + zero)
    q_out, v_out = parked(q, v)
    return jnp.concatenate([q_out, v_out])

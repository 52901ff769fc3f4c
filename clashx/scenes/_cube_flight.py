"""The cube's 13-number state and its exact free flight, shared by MJX, MuJoCo C and the real-data ingestion.

States as in the ContactNets files: `qw qx qy qz | x y z | wx wy wz (body frame) | vx vy vz (world)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..core import Array, Float, quat_exp, quat_mul
from . import _geometry as geo
from . import _mjcf

GRAVITY = geo.GRAVITY  # m/s^2, MuJoCo's default
HALF = _mjcf.CUBE_HALF


def state_to_qpos_qvel(state: Float[Array, "13"]) -> tuple[Float[Array, "7"], Float[Array, "6"]]:
    """Dataset state -> MuJoCo free-joint (qpos, qvel).

    qpos = (x, y, z, qw, qx, qy, qz); qvel = (linear velocity of the body origin
    in the world frame, angular velocity in the body frame).  The cube's body
    origin is its centre, so this is a reordering.
    """
    state = jnp.asarray(state)
    return jnp.concatenate([state[4:7], state[0:4]]), jnp.concatenate([state[10:13], state[7:10]])


def qpos_qvel_to_state(qpos: Float[Array, "7"], qvel: Float[Array, "6"]) -> Float[Array, "13"]:
    """MuJoCo free-joint (qpos, qvel) -> dataset state; the inverse of `state_to_qpos_qvel`."""
    qpos, qvel = jnp.asarray(qpos), jnp.asarray(qvel)
    return jnp.concatenate([qpos[3:7], qpos[0:3], qvel[3:6], qvel[0:3]])


def lowest_corner_z(state: Float[Array, "13"]) -> Float[Array, ""]:
    """Height (m) of the cube's lowest corner above z = 0."""
    q = state[0:4] / jnp.linalg.norm(state[0:4])
    w, x, y, z = q[0], q[1], q[2], q[3]
    row = jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])
    return state[6] - HALF * jnp.sum(jnp.abs(row))


def free_flight(state: Float[Array, "13"], tau: Float[Array, ""]) -> Float[Array, "13"]:
    """The state `tau` seconds after `state` in free flight.

    Ballistic centre under gravity; constant angular velocity, exact for a body
    with isotropic inertia such as the cube (no torque, so ω is constant in
    both frames): q(τ) = q ⊗ exp(ω_body τ).
    """
    g = jnp.array([0.0, 0.0, -GRAVITY])
    q = quat_mul(state[0:4], quat_exp(state[7:10] * tau))
    p = state[4:7] + state[10:13] * tau + 0.5 * g * tau**2
    v = state[10:13] + g * tau
    return jnp.concatenate([q, p, state[7:10], v])


def crossing_time(state: Float[Array, "13"], tau_max: Float[Array, ""], iters: int = 30) -> Float[Array, ""]:
    """Time (s) after `state` when its free flight puts the lowest corner at z = 0.

    Bisection on [0, tau_max], assuming the corner is above the table at 0 and
    below it at tau_max; returns tau_max if it never goes below.
    """

    def body(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        below = lowest_corner_z(free_flight(state, mid)) < 0
        return jnp.where(below, lo, mid), jnp.where(below, mid, hi)

    zero = jnp.zeros_like(jnp.asarray(tau_max))
    _, hi = jax.lax.fori_loop(0, iters, body, (zero, jnp.asarray(tau_max) + zero))
    return hi


MAX_FLIGHT_S = 0.5  # s: flights searched for a first contact (real tosses land within 0.25 s)
_GRID_STEP = 2.5e-4  # s, coarse crossing search before bisection


def flight_time(state0: Float[Array, "13"]) -> Float[Array, ""]:
    """First time (s) the free flight from `state0` puts a corner at z = 0; `MAX_FLIGHT_S` if none sooner.

    A grid of `_GRID_STEP` finds the first step below the table, bisection
    (`crossing_time`) refines it; a corner that dips under and comes back
    within one grid step is missed (a graze of < 0.1 mm).
    """
    grid = jnp.arange(0.0, MAX_FLIGHT_S, _GRID_STEP, dtype=state0.dtype)
    low = jax.vmap(lambda t: lowest_corner_z(free_flight(state0, t)))(grid)
    below = low < 0
    k = jnp.argmax(below)
    t_a = grid[jnp.maximum(k - 1, 0)]
    t = t_a + crossing_time(free_flight(state0, t_a), jnp.asarray(_GRID_STEP, state0.dtype))
    return jnp.where(below.any(), jnp.where(k > 0, t, 0.0), MAX_FLIGHT_S)


def interpolate_states(a: Float[Array, "13"], b: Float[Array, "13"], s: Float[Array, ""]) -> Float[Array, "13"]:
    """Linear interpolation between two nearby states (quaternion renormalised), s in [0, 1]."""
    b = jnp.asarray(b).at[0:4].multiply(jnp.where(jnp.dot(a[0:4], b[0:4]) < 0, -1.0, 1.0))
    out = jnp.asarray((1 - s) * a + s * b)
    return out.at[0:4].set(out[0:4] / jnp.linalg.norm(out[0:4]))

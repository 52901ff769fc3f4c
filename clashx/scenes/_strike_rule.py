"""The strike's rule, written once in JAX and shared by both engines: the event, the launch state, the release.

`clashx.scenes._strike` runs it on MJX (jit/vmap/grad); `clashx.scenes._strike_c`
calls the same functions, batched and compiled once per batch size, on numpy
arrays around MuJoCo C rollouts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import Array, Bool, Float
from . import _geometry as geo
from ._strike_impact import block_pose, yaw_of

if TYPE_CHECKING:
    from ._strike import StrikeScene

RELEASE_AFTER = 0.02  # s from first touch until the arm pulls the striker away
MAX_TIME = 4.0  # s after launch: the lab stops a strike here if the block still moves


class StrikeEvent(eqx.Module):
    """The outcome of one strike.

    Attributes:
        post_velocity: (vx, vy, ωz) of the block frame's origin in the block
            frame at release, m/s and rad/s; zeros if the striker missed.
        release_pose: block pose (x, y, yaw) in the world at release, m and rad
            (the pose at launch if the striker missed).
        t_touch: first touch, s after launch (NaN if the striker missed).
        t_release: t_touch + RELEASE_AFTER, s after launch: the contact window is [t_touch, t_release].
        touched: whether the striker touched the block.
        rest_pose: block pose (x, y, yaw) in the world at MAX_TIME, m and rad.
    """

    post_velocity: Float[Array, "3"]
    release_pose: Float[Array, "3"]
    t_touch: Float[Array, ""]
    t_release: Float[Array, ""]
    touched: Bool[Array, ""]
    rest_pose: Float[Array, "3"]


def block_velocity(qpos: Float[Array, "nq"], qvel: Float[Array, "nv"]) -> Float[Array, "3"]:
    """(vx, vy, ωz) of the block frame's origin in the block frame.

    MuJoCo's free joint gives the origin's linear velocity in the world frame
    and the angular velocity in the body frame.
    """
    yaw = yaw_of(qpos[3:7])
    v = geo.rot2(-yaw) @ qvel[0:2]
    return jnp.stack([v[0], v[1], qvel[5]])


def initial_state(sim: StrikeScene, strike: Float[Array, "3"]) -> tuple[Float[Array, "10"], Float[Array, "9"]]:
    """qpos and qvel at launch: the settled block, the striker placed and moving as SCENE.md says."""
    centre, s_yaw, vel = geo.striker_start(sim.shape, strike)
    pose = block_pose(sim.block_rest)
    rot = geo.rot2(pose[2])
    c_world = pose[:2] + rot @ centre
    v_world = rot @ vel
    park = jnp.asarray(sim.bodies.park)
    qpos = jnp.concatenate([sim.block_rest, c_world - park, (s_yaw + pose[2])[None]])
    qvel = jnp.concatenate([jnp.zeros(6), v_world, jnp.zeros(1)])
    return qpos, qvel


def release_rule(sim: StrikeScene, found, touch_k, depth, closing, q_a, v_a, q_b, v_b):
    """The event from the first touching step and the two states around release (both engines use this).

    The first collision pass that finds a striker-block contact runs on state
    `touch_k`; the contact began `depth / closing` earlier (the striker flies
    at constant velocity onto the resting block until then), which places the
    onset between steps.  Release is RELEASE_AFTER later, between states
    touch_k + n_window − 1 (`q_a`, `v_a`) and touch_k + n_window (`q_b`,
    `v_b`); the velocity there is interpolated linearly.  Resolving the onset
    below one step keeps the event a continuous function of the strike:
    otherwise a 1 ms jitter of the onset moves the release velocity by up to
    μ2·g·1 ms (1 cm/s at μ2 = 1).  `found` says whether any pass found a
    contact; a touch too late for its release to fall inside the contact
    phase counts as a miss (it cannot happen within SCENE.md's ranges).

    Returns:
        (touched, post_velocity, release_pose, t_touch, t_release): zeros, the
        pose at `q_b` and NaN times for a miss.
    """
    dt = sim.settings.dt_contact
    touched = found & (touch_k + sim.n_window <= sim.n_contact)
    tau = jnp.clip(depth / jnp.maximum(closing, 1e-6), 0.0, dt)
    t_touch = touch_k * dt - tau
    w = 1.0 - tau / dt
    post = (1.0 - w) * block_velocity(q_a, v_a) + w * block_velocity(q_b, v_b)
    pose_a, pose_b = jnp.asarray(block_pose(q_a)), block_pose(q_b)
    pose_a = pose_a.at[2].set(pose_b[2] + jnp.remainder(pose_a[2] - pose_b[2] + jnp.pi, 2 * jnp.pi) - jnp.pi)
    pose = (1.0 - w) * pose_a + w * pose_b
    return (
        touched,
        jnp.where(touched, post, 0.0),
        jnp.where(touched, pose, pose_b),
        jnp.where(touched, t_touch, jnp.nan),
        jnp.where(touched, t_touch + RELEASE_AFTER, jnp.nan),
    )


def strike_event(contact, rest_pose) -> StrikeEvent:
    """The event of a contact phase's result (MJX's `ContactResult` or C's `ContactRecord`) and a rest pose."""
    fields = ("post_velocity", "release_pose", "t_touch", "t_release", "touched")
    return StrikeEvent(**{f: getattr(contact, f) for f in fields}, rest_pose=rest_pose)


# The rule's functions, batched and compiled once per batch size, applied to numpy arrays.


@eqx.filter_jit
def initial_states_batch(sim: StrikeScene, strikes):
    """`initial_state` of each strike (n, 3): (qpos (n, nq), qvel (n, nv)), compiled once per batch size."""
    return jax.vmap(lambda s: initial_state(sim, s))(strikes)


@eqx.filter_jit
def release_rules(sim: StrikeScene, found, k, depth, closing, q_a, v_a, q_b, v_b):
    """`release_rule` of each world (leading axis), compiled once per batch size."""
    return jax.vmap(lambda *a: release_rule(sim, *a))(found, k, depth, closing, q_a, v_a, q_b, v_b)


block_poses_batch = jax.jit(jax.vmap(block_pose))  # `block_pose` of each qpos row (n, nq) -> (n, 3)

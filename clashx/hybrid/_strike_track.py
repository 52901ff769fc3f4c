"""The hybrid's prediction of a recorded track on MJX, and its loss: differentiable in the parameters.

The same prediction as `clashx.hybrid._strike_slide.hybrid_tracks_c` (the surrogate at the
impact, the slide after release), written in JAX for one strike: the
surrogate gives the release velocity and the window's displacement; MJX's
slide model (the strike scene without the striker pair, `dt_slide` steps)
carries the block from the origin; the local path is placed at the release
pose.  `track_loss` is the mean squared residual against a recording in
units of the motion-capture noise.

Derivatives: reverse mode through the surrogate; forward mode
(`jax.jacfwd`) through MJX's slide, whose constraint solver is a
`while_loop` that reverse mode cannot pass (mujoco#2259): one tangent per
parameter, fine for the strike's eight.  Run it in float64 (`jax.enable_x64`
and `clashx.core._mjx.as_float64(sim)`): float32 tangents through MJX's
solver are wrong (`as_float64`'s docstring).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import Array, Float, mjx
from ..scenes import RELEASE_AFTER, StrikeScene, yaw_of
from ..surrogate import StrikeSurrogate


def local_slide(
    sim: StrikeScene, velocity: Float[Array, "3"], params: Float[Array, "p"], n_steps: int
) -> Float[Array, "k 3"]:
    """Poses (x, y, yaw) at t = 0, dt, ..., n_steps·dt of a block released at the origin with `velocity` (MJX)."""
    model = sim.space.apply(sim.slide_model, sim.slide_rows, params)
    rest = jnp.asarray(sim.block_rest, velocity.dtype)
    qpos = jnp.concatenate([jnp.zeros(2, velocity.dtype), rest[2:3], jnp.array([1.0, 0.0, 0.0, 0.0]), jnp.zeros(3)])
    qvel = jnp.zeros(9, velocity.dtype).at[0:2].set(velocity[:2]).at[5].set(velocity[2])
    data = mjx.make_data(model).replace(qpos=qpos.astype(velocity.dtype), qvel=qvel)

    def pose(q):
        return jnp.stack([q[0], q[1], yaw_of(q[3:7])])

    def body(data, _):
        data = mjx.step(model, data)
        return data, pose(data.qpos)

    _, poses = jax.lax.scan(body, data, None, length=n_steps)
    poses = jnp.concatenate([pose(data.qpos)[None], poses])
    # unwrap the yaw (a block may spin past ±π)
    d = jnp.diff(poses[:, 2])
    d = d - 2 * jnp.pi * jnp.round(d / (2 * jnp.pi))
    return poses.at[1:, 2].set(poses[0, 2] + jnp.cumsum(d))


def _place(local, pose0):
    c, s = jnp.cos(pose0[2]), jnp.sin(pose0[2])
    return jnp.stack(
        [pose0[0] + c * local[..., 0] - s * local[..., 1], pose0[1] + s * local[..., 0] + c * local[..., 1],
         pose0[2] + local[..., 2]], -1,
    )  # fmt: skip


class Query(eqx.Module):
    """What a track is predicted for: one strike, where the block rested, when it was touched, when sampled.

    Attributes:
        strike: (θ, θ1, v_pre).
        start_pose: (x, y, yaw) of the block at launch, world.
        t_touch: the recorded first touch, s after launch.
        times: (T,) sample times, s after launch.
    """

    strike: Float[Array, "3"]
    start_pose: Float[Array, "3"]
    t_touch: Float[Array, ""]
    times: Float[Array, "T"]


def place_track(local: Float[Array, "k 3"], dt: float, release: Float[Array, "6"], q: Query) -> Float[Array, "T 3"]:
    """The hybrid's track rule, for both engines: the block rests at its start pose until the touch, moves
    linearly to the release pose (start ⊕ the window's displacement) through the window, then follows the
    slide `local` (poses every `dt` from release, block at the origin) placed at the release pose."""
    at_release = _place(release[3:], q.start_pose)
    t_release = q.t_touch + RELEASE_AFTER
    x = jnp.clip((q.times - t_release) / dt, 0.0, local.shape[0] - 1 - 1e-6)
    i = jnp.floor(x).astype(jnp.int32)
    w = (x - i)[:, None]
    after = _place((1 - w) * local[i] + w * local[i + 1], at_release)
    a = jnp.clip((q.times - q.t_touch) / RELEASE_AFTER, 0.0, 1.0)[:, None]
    during = (1 - a) * q.start_pose + a * at_release
    return jnp.where((q.times >= t_release)[:, None], after, during)


def track_from_release(
    sim: StrikeScene, release: Float[Array, "6"], params: Float[Array, "p"], q: Query, n_steps: int
) -> Float[Array, "T 3"]:
    """The block's pose at `q.times` given the release prediction (vx, vy, ωz, dx, dy, dyaw): `place_track`
    on MJX's slide (`n_steps` steps of dt_slide must cover the last time)."""
    local = local_slide(sim, release[:3], params, n_steps)
    return place_track(local, sim.settings.dt_slide, release, q)


def hybrid_track(
    sim: StrikeScene, model: StrikeSurrogate, params: Float[Array, "p"], q: Query, n_steps: int
) -> Float[Array, "T 3"]:
    """The block's predicted pose at `q.times`: at rest before the touch, the surrogate's release pose and
    velocity, MJX's slide after release (`n_steps` steps of dt_slide must cover the last time)."""
    return track_from_release(sim, model.release(q.strike, params), params, q, n_steps)


def pose_loss(
    pred: Float[Array, "T 3"], q: Query, recorded: Float[Array, "T 3"], noise: tuple[float, float], mask=None
) -> Float[Array, ""]:
    """Mean squared residual (predicted − recorded pose, over the noise std) of the samples outside the
    contact window (and inside `mask`, (T,) bools, when given)."""
    scale = jnp.array([1.0 / noise[0], 1.0 / noise[0], 1.0 / noise[1]], pred.dtype)
    fitted = (q.times < q.t_touch) | (q.times >= q.t_touch + RELEASE_AFTER)
    if mask is not None:
        fitted = fitted & mask
    r = (pred - recorded) * scale
    return jnp.sum(jnp.where(fitted[:, None], r**2, 0.0)) / jnp.maximum(jnp.sum(fitted) * 3, 1)


def track_loss(
    sim: StrikeScene,
    model: StrikeSurrogate,
    params: Float[Array, "p"],
    q: Query,
    recorded: Float[Array, "T 3"],
    noise: tuple[float, float],
    n_steps: int,
) -> Float[Array, ""]:
    """Mean squared residual (predicted − recorded pose, over the noise std) of one strike's track.

    Samples inside the contact window (between touch and release) are not
    fitted: the hybrid does not model the block's path there.
    """
    return pose_loss(hybrid_track(sim, model, params, q, n_steps), q, recorded, noise)

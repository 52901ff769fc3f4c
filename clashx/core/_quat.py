"""Quaternions (scalar first, MuJoCo's convention), written once for every scene and surrogate."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ._types import Array, Float


def quat_mul(a: Float[Array, "4"], b: Float[Array, "4"]) -> Float[Array, "4"]:
    """Hamilton product of scalar-first quaternions."""
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    return jnp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def quat_exp(rotvec: Float[Array, "3"]) -> Float[Array, "4"]:
    """Unit quaternion of a rotation vector (rad)."""
    theta = jnp.sqrt(jnp.sum(rotvec**2) + 1e-30)
    return jnp.concatenate([jnp.cos(theta / 2)[None], jnp.sin(theta / 2) / theta * rotvec])


def quat_log(q: Float[Array, "4"]) -> Float[Array, "3"]:
    """Rotation vector (rad) of a unit quaternion, the shorter way round; the inverse of `quat_exp`."""
    q = jnp.where(q[0] < 0, -q, q)
    s = jnp.sqrt(jnp.sum(q[1:] ** 2) + 1e-30)
    return 2 * jnp.arctan2(s, q[0]) / s * q[1:]


def quat_to_mat(q: Float[Array, "4"]) -> Float[Array, "3 3"]:
    """Rotation matrix (world from body) of a unit quaternion."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return jnp.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def quat_conj(q: Float[Array, "4"]) -> Float[Array, "4"]:
    """Inverse of a unit quaternion."""
    return q * jnp.array([1.0, -1.0, -1.0, -1.0], q.dtype)


# NumPy (float64) versions of the same, batched over leading axes: for host-side geometry that runs many small
# computations (track fitting, symmetric images), where routing them through JAX costs more than it computes.


def quat_mul_np(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`quat_mul` in NumPy, over the leading axes of `a` and `b` (..., 4)."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def quat_to_mat_np(q: np.ndarray) -> np.ndarray:
    """`quat_to_mat` in NumPy, over the leading axes of `q` (..., 4), which must be unit quaternions."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )

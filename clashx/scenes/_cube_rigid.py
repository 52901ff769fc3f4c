"""A second impact family for the cube toss: a rigid cube under an algebraic impulse law.

MuJoCo's contact is soft (a time constant and a damping ratio); the cube
surrogate distils it, and fitted to all 350 real first impacts it still misses
the state 27 ms later by a median 0.147 of the speed vector.  This family is
physically different: the cube is rigid, and each corner that touches the
table takes an impulse that sets its velocity after contact to

    u_n⁺ = −e_n u_n⁻   (Newton restitution on the normal),
    u_t⁺ = −e_t u_t⁻   (tangential restitution, Chatterjee & Ruina 1998),

with the tangential impulse clamped to Coulomb's cone μ p_n (stick, or slip),
and no restitution below `BOUNCE` (a resting or sliding corner is held at the
table).  The window (`WINDOW`, 27 ms) is stepped at `STEPS` steps with
`PASSES` sweeps of sequential impulses over the eight corners per step: the
normal first with its own effective mass and an accumulated impulse ≥ 0, then
the tangent with the 2 × 2 effective mass, its accumulated impulse inside the
cone (Catto's sequential impulses).  A fourth parameter scales the cube's
principal inertia (`CUBE_INERTIA`, dair_pll's): the mass distribution, which
MuJoCo's class holds fixed.

`rigid_cube_window(pre, params)` has the handler signature of the one hybrid
rule (`clashx.hybrid_tosses`: `(pre_state (13,), params) -> state WINDOW
later`), so it replaces the surrogate there.  States are in the toss layout
(`clashx.scenes._toss`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, ParamSpace, in_blocks, quat_exp, quat_mul, quat_to_mat
from ._mjcf import CUBE_HALF, CUBE_INERTIA, CUBE_MASS
from ._toss import CORNER_SIGNS, WINDOW

RIGID_NAMES = ("e_n", "e_t", "mu", "inertia")
RIGID_LOW = (0.0, -1.0, 0.02, 0.6)  # inertia: × CUBE_INERTIA
RIGID_HIGH = (1.0, 1.0, 1.5, 3.0)
STEPS = 54  # 0.5 ms steps over the window (0.25 ms changes the post-window ω by < 0.02 rad/s)
PASSES = 6  # sweeps over the corners per step (4 overshoot a flat landing's bounce by 4 %)
SLOP = 1e-4  # m: a corner this close to the table is in contact
BOUNCE = 0.05  # m/s: restitution acts on a corner approaching faster than this
_GRAVITY = (0.0, 0.0, -9.81)
_CORNERS = CUBE_HALF * CORNER_SIGNS


def _skew(r: Float[Array, "3"]) -> Float[Array, "3 3"]:
    return jnp.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])


def rigid_cube_window(pre: Float[Array, "13"], params: Float[Array, "4"]) -> Float[Array, "13"]:
    """The cube's state `WINDOW` after `pre` (13,) under the rigid impulse law (module docstring).

    Args:
        pre: the state at first contact, toss layout (q, x, ω body, v world).
        params: (e_n, e_t, μ, inertia scale), within `RIGID_LOW`/`RIGID_HIGH`.

    Returns:
        The state (13,) at the end of the window, same layout and dtype.
    """
    dtype = pre.dtype
    pre = pre.astype(jnp.float32)
    e_n, e_t, mu, inertia = params[0], params[1], params[2], params[3] * CUBE_INERTIA
    dt = WINDOW / STEPS
    corners, gravity = jnp.asarray(_CORNERS, jnp.float32), jnp.asarray(_GRAVITY, jnp.float32)
    q, x, v = pre[0:4], pre[4:7], pre[10:13]
    w = quat_to_mat(q) @ pre[7:10]  # world axes

    def step(carry, _):
        q, x, w, v = carry
        v = v + gravity * dt
        r_all = corners @ quat_to_mat(q).T  # (8, 3) corner offsets, world
        touching = x[2] + r_all[:, 2] <= SLOP
        u0 = v + jnp.cross(w, r_all)  # contact-point velocities at the step's start
        bounce = u0[:, 2] < -BOUNCE
        target = jnp.where(bounce[:, None], u0 * jnp.stack([-e_t, -e_t, -e_n]), 0.0)

        def corner(c, inner):
            w, v, acc = inner
            r = r_all[c]
            k_mat = jnp.eye(3) / CUBE_MASS - _skew(r) @ _skew(r) / inertia
            u = v + jnp.cross(w, r)
            pn = jnp.maximum(acc[c, 2] + (target[c, 2] - u[2]) / k_mat[2, 2], 0.0)
            dp = jnp.zeros(3).at[2].set(pn - acc[c, 2]) * touching[c]
            w, v = w + jnp.cross(r, dp) / inertia, v + dp / CUBE_MASS
            u = v + jnp.cross(w, r)
            pt = acc[c, :2] + jnp.linalg.solve(k_mat[:2, :2], target[c, :2] - u[:2])
            pt = pt * jnp.minimum(1.0, mu * pn / jnp.sqrt(jnp.sum(pt**2) + 1e-20))
            dp = jnp.concatenate([pt - acc[c, :2], jnp.zeros(1)]) * touching[c]
            new = jnp.where(touching[c], jnp.concatenate([pt, pn[None]]), 0.0)
            return w + jnp.cross(r, dp) / inertia, v + dp / CUBE_MASS, acc.at[c].set(new)

        def sweep(inner, _):
            return jax.lax.fori_loop(0, 8, corner, inner), None

        (w, v, _), _ = jax.lax.scan(sweep, (w, v, jnp.zeros((8, 3))), None, length=PASSES)
        x = x + v * dt
        q = quat_mul(quat_exp(w * dt), q)
        return (q / jnp.linalg.norm(q), x, w, v), None

    (q, x, w, v), _ = jax.lax.scan(step, (q, x, w, v), None, length=STEPS)
    return jnp.concatenate([q, x, quat_to_mat(q).T @ w, v]).astype(dtype)


def rigid_from_unit(u: Float[np.ndarray, "... 4"]) -> np.ndarray:
    """Rigid-law parameters from the unit box (linear in every one): NumPy (float64) in and out, or a JAX
    array in and out (traceable, for Jacobians in the box)."""
    low, high = np.asarray(RIGID_LOW), np.asarray(RIGID_HIGH)
    return low + (u if isinstance(u, jax.Array) else np.asarray(u, np.float64)) * (high - low)


def rigid_to_unit(params: Float[np.ndarray, "... 4"]) -> np.ndarray:
    """The inverse of `rigid_from_unit`."""
    low, high = np.asarray(RIGID_LOW), np.asarray(RIGID_HIGH)
    return ((params if isinstance(params, jax.Array) else np.asarray(params, np.float64)) - low) / (high - low)


def rigid_space() -> ParamSpace:
    """The rigid law's parameter box as a `ParamSpace`: uniform over `RIGID_LOW`-`RIGID_HIGH`, writing no MuJoCo
    field.  What a surrogate distilled from the law is conditioned on (`make_cube_surrogate(space=...)`,
    `bench/cube_rigid_distil.py`); its `from_unit` and `to_unit` match `rigid_from_unit` and `rigid_to_unit` to
    float32 rounding."""
    k = len(RIGID_NAMES)
    return ParamSpace(names=RIGID_NAMES, low=RIGID_LOW, high=RIGID_HIGH, targets=((),) * k, log_scale=(False,) * k)


_WINDOWS = jax.jit(jax.vmap(rigid_cube_window))


def rigid_windows(
    pre: Float[np.ndarray, "n 13"], params: Float[np.ndarray, "n 4"], *, block: int | None = None
) -> np.ndarray:
    """The rigid law's states `WINDOW` after n impacts `pre` (n, 13), each at its own parameters (n, 4), in float32
    blocks of the batching policy (`clashx.core.in_blocks`): the labels of a distillation set.  Returns (n, 13)."""
    pre, params = np.asarray(pre, np.float32), np.asarray(params, np.float32)
    if pre.ndim != 2 or pre.shape[1] != 13 or params.shape != (len(pre), len(RIGID_NAMES)):
        raise ValueError(f"rigid_windows: pre {pre.shape} must be (n, 13) and params {params.shape} (n, 4)")
    out = in_blocks(
        lambda a, b: _WINDOWS(jnp.asarray(a), jnp.asarray(b)), pre, params, world=4 * 13 * STEPS * 8, block=block
    )
    return np.asarray(out, np.float64)

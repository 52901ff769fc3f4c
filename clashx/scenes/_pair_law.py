"""A rigid impact law for any `PairScene`: the cube's algebraic impulse law (`_cube_rigid`) written for any pair.

The pair's bodies are rigid, and each point where they touch takes an impulse
that sets its relative velocity after contact to

    u_n⁺ = −e_n u_n⁻   (Newton restitution on the normal),
    u_t⁺ = −e_t u_t⁻   (tangential restitution, Chatterjee & Ruina 1998),

with the tangential impulse clamped to Coulomb's cone μ p_n (stick, or slip),
and no restitution below `BOUNCE` (a resting or sliding point is held at the
contact).  `PairLaw` steps the scene's impact window in K = ⌈window / substep⌉
substeps, each:

a) the smooth dynamics without contact: the pair's velocities += dt M⁻¹(passive − bias)
   (gravity, Coriolis and centrifugal forces, springs and damping), M the mass
   matrix restricted to the pair's dofs (MJX's `fwd_position` and `fwd_velocity`
   on the scene's model with its constraints disabled: joint limits and equality
   constraints are not part of the law);
b) contact candidates between the pair's geoms: for each row against a plane the
   other geom's candidate points (a box's 8 vertices, a mesh's vertices, a
   sphere's or an ellipsoid's support point along −n, a capsule's two end
   spheres' and a cylinder's two rim circles' support points) with their distance
   to the plane; for every other row MJX's collision contacts (`pair_only`'s
   model).  A candidate within `SLOP` of touching is active;
c) Catto's sequential impulses, `passes` sweeps over the candidates in order:
   the Jacobian J (3 × nv, contact frame: two tangents and the normal, which points
   towards the first pair body) of the pair's relative velocity at the point, the
   effective mass K = J M⁻¹ Jᵀ; the normal impulse accumulated and kept ≥ 0 with
   target velocity −e_n u_n⁻ where the point approached faster than `BOUNCE` at
   the substep's start (else 0), then the tangential impulse towards −e_t u_t⁻
   inside the cone μ p_n;
d) positions move on at the new velocities (`_pair_state.advance`).

A landing that touches edge- or corner-first and rotates onto other contacts
within the window takes each contact in turn, as the cube's law does; for a
free box on a plane it is `rigid_cube_window` (same substeps and passes, the
box's vertices in `CORNER_SIGNS` order).  `law(pre, params) -> post` has the
handler signature of the one hybrid rule.

Energy.  With 0 ≤ e_n ≤ 1 and 0 ≤ e_t ≤ 1 a window gains at most ~2 % of the
pre-impact kinetic energy (1.9 % at e_n = e_t = 1 on 256 tumbling cube landings:
the sweeps over corners that touch again).  With e_t < 0 the tangential target
u_t⁺ = |e_t| u_t⁻ is held against the slip that the normal impulse's coupling
takes away, and friction then does positive work: up to 1.2 × the kinetic energy
on the same landings at e_t ≈ −0.9 — `rigid_cube_window` gains exactly the same,
it is the law's, not this generalisation's.  So the law's space keeps e_t in [0, 1]
(the cube's law, fitted on real tosses before, keeps its [-1, 1]); the hybrid rule's
energy guard (`ImpactGate.energy_slack`) bounds what reaches a rollout.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..core import Array, Float, ParamSpace, mjx, short_repr
from . import _pair_state as ps
from ._pair import PairScene
from ._scene import AbstractHandler

LAW_NAMES = ("e_n", "e_t", "mu")
LAW_LOW = (0.0, 0.0, 0.02)  # e_t >= 0: below, the velocity-target law does positive work (module docstring)
LAW_HIGH = (1.0, 1.0, 1.5)
SLOP = 1e-4  # m: a candidate point this close to the partner is in contact (the cube's law's)
BOUNCE = 0.05  # m/s: restitution acts on a point approaching faster than this (the cube's law's)
_REG = 1e-6  # effective masses + this × their trace: a direction the joints cannot move (a planar ball's y)
# takes no impulse instead of a division by zero; 1e-6 moves a full-rank impulse by ~10 float32 ulps

_BOX, _MESH = int(mujoco.mjtGeom.mjGEOM_BOX), int(mujoco.mjtGeom.mjGEOM_MESH)
_SPHERE, _ELLIPSOID = int(mujoco.mjtGeom.mjGEOM_SPHERE), int(mujoco.mjtGeom.mjGEOM_ELLIPSOID)
_CAPSULE, _CYLINDER = int(mujoco.mjtGeom.mjGEOM_CAPSULE), int(mujoco.mjtGeom.mjGEOM_CYLINDER)
_BOX_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], np.float64)  # CORNER_SIGNS


def law_space() -> ParamSpace:
    """The law's parameter box as a `ParamSpace`: (e_n, e_t, μ) uniform over `LAW_LOW`-`LAW_HIGH`, writing no
    MuJoCo field (what `identify_pair_law` searches)."""
    k = len(LAW_NAMES)
    return ParamSpace(names=LAW_NAMES, low=LAW_LOW, high=LAW_HIGH, targets=((),) * k, log_scale=(False,) * k)


class _PlaneRow(eqx.Module):
    """One `<pair>` row against a plane: which geoms, and how the other geom's candidate points are found.

    Attributes:
        plane, other: the geom ids; sign: +1 where the plane is on the pair's second body.
        kind: the other geom's MuJoCo type; size: its geom_size (3,).
        verts: a box's or a mesh's vertices in the geom's frame (k, 3), m; None for the other kinds.
    """

    plane: int = eqx.field(static=True)
    other: int = eqx.field(static=True)
    sign: float = eqx.field(static=True)
    kind: int = eqx.field(static=True)
    size: tuple[float, float, float] = eqx.field(static=True)
    verts: Float[Array, "k 3"] | None

    @property
    def count(self) -> int:
        """Candidate points of this row."""
        if self.verts is not None:
            return int(self.verts.shape[0])
        return 2 if self.kind in (_CAPSULE, _CYLINDER) else 1

    def candidates(self, d: mjx.Data) -> tuple[Float[Array, "k 3"], Float[Array, "k 3"], Float[Array, " k"]]:
        """(points (k, 3), normals towards the first pair body (k, 3), distances to the plane (k,), m) at `d`."""
        n = d.geom_xmat[self.plane][:, 2]
        pos, mat = d.geom_xpos[self.other], d.geom_xmat[self.other]
        down = -n
        r = self.size[0]
        if self.verts is not None:
            pts = pos + self.verts.astype(pos.dtype) @ mat.T
        elif self.kind == _SPHERE:
            pts = (pos + r * down)[None]
        elif self.kind == _ELLIPSOID:
            s2 = jnp.asarray(np.square(self.size), pos.dtype)
            local = mat.T @ down
            p = s2 * local / jnp.sqrt(jnp.sum(s2 * local**2) + 1e-30)
            pts = (pos + mat @ p)[None]
        else:  # capsule: its end spheres; cylinder: its rim circles (the point of each farthest along −n)
            ends = pos + jnp.array([[1.0], [-1.0]], pos.dtype) * (self.size[1] * mat[:, 2])
            if self.kind == _CAPSULE:
                pts = ends + r * down
            else:
                radial = down - jnp.dot(down, mat[:, 2]) * mat[:, 2]
                pts = ends + r * radial / jnp.sqrt(jnp.sum(radial**2) + 1e-30)
        dist = (pts - d.geom_xpos[self.plane]) @ n
        return pts, jnp.broadcast_to(self.sign * n, pts.shape), dist


def _tangents(n: Float[Array, "3"]) -> Float[Array, "3 3"]:
    """Rows (t1, t2, n): an orthonormal contact frame; t1 is the world's x (or y, for n near x) on the contact plane."""
    ex = jnp.array([1.0, 0.0, 0.0], n.dtype) - n[0] * n
    ey = jnp.array([0.0, 1.0, 0.0], n.dtype) - n[1] * n
    t1 = jnp.where(jnp.sum(ex**2) > 0.25, ex, ey)
    t1 = t1 / jnp.linalg.norm(t1)
    return jnp.stack([t1, jnp.cross(n, t1), n])


def _inv2(k: Float[Array, "2 2"]) -> Float[Array, "2 2"]:
    det = k[0, 0] * k[1, 1] - k[0, 1] * k[1, 0]
    return jnp.array([[k[1, 1], -k[0, 1]], [-k[1, 0], k[0, 0]]]) / det


class PairLaw(AbstractHandler):
    """The rigid impulse law of a scene's pair (module docstring); build with `pair_law(scene)`.

    Call `law(pre, params)`: `pre` (d,) the pair state at the touch (qpos ‖ qvel of the
    pair's joints, `scene.pair_state`), `params` (3,) = (e_n, e_t, μ) within
    `LAW_LOW`-`LAW_HIGH`; returns the pair state (d,) `window` s later, in `pre`'s dtype.
    Pure JAX: jit, vmap and grad go through it.

    Attributes:
        scene: the scene (static: its speed scales score the law, `clashx.learn.identify_pair_law`).
        model: the scene's MJX model with its constraints disabled (the smooth dynamics, kinematics, Jacobians).
        only: the MJX model of the pair's rows that involve no plane (`pair_only`), or None where every row
            has a plane.
        only_body: per geom of `only`, its body (to orient MuJoCo's normals towards the first pair body).
        planes: the pair's rows against a plane.
        joints: the pair's coordinates.
        first: the first pair body's id.
        signs: per moving pair body (`joints.bodies`), +1 for the first pair body, −1 for the second.
        window: the impact window, s; steps: substeps over it; passes: sweeps of impulses per substep.
    """

    scene: PairScene = eqx.field(static=True)
    model: mjx.Model
    only: mjx.Model | None
    only_body: tuple[int, ...] = eqx.field(static=True)
    planes: tuple[_PlaneRow, ...]
    joints: ps.PairJoints = eqx.field(static=True)
    first: int = eqx.field(static=True)
    signs: tuple[float, ...] = eqx.field(static=True)
    window: float = eqx.field(static=True)
    steps: int = eqx.field(static=True)
    passes: int = eqx.field(static=True)

    @property
    def dt(self) -> float:
        """The substep, s (window / steps)."""
        return self.window / self.steps

    def __repr__(self) -> str:
        return short_repr(self)

    def _candidates(self, d: mjx.Data, qpos: Float[Array, " nq"]):
        """Every candidate contact point at `d`: (points (C, 3), unit normals (C, 3), distances (C,))."""
        parts = [row.candidates(d) for row in self.planes]
        if self.only is not None:
            m = self.only
            do = mjx.kinematics(m, mjx.make_data(m).replace(qpos=qpos))
            c = mjx.collision(m, do)._impl.contact  # every contact of this model is the pair's (`pair_only`)
            owner = jnp.asarray(self.only_body)[c.geom[:, 0]]
            flip = jnp.where(owner == self.first, -1.0, 1.0).astype(qpos.dtype)  # MuJoCo's runs geom1 -> geom2
            parts.append((c.pos, flip[:, None] * c.frame[:, 0, :], c.dist))
        return tuple(jnp.concatenate(x) for x in zip(*parts, strict=True))

    def _jacobian(self, d: mjx.Data, point: Float[Array, "3"], frame: Float[Array, "3 3"]) -> Float[Array, "3 nv"]:
        """The relative velocity of the first pair body against the second at `point` (contact frame, rows t1, t2, n)
        as a map of the pair's qvel."""
        va = np.asarray(self.joints.vadr, np.int64)
        jac = jnp.zeros((self.model.nv, 3), point.dtype)
        for b, s in zip(self.joints.bodies, self.signs, strict=True):
            jacp, _ = mjx.jac(self.model, d, point, b)
            jac = jac + s * jacp
        return frame @ jac[va].T

    def __call__(self, pre: Float[Array, " d"], params: Float[Array, "3"]) -> Float[Array, " d"]:
        m = self.model
        dtype = m.qpos0.dtype
        state = jnp.asarray(pre).astype(dtype)
        params = jnp.asarray(params).astype(dtype)
        e_n, e_t, mu = params[0], params[1], params[2]
        scale = jnp.stack([-e_t, -e_t, -e_n])
        dt = self.dt
        k = self.joints.nq
        va = np.asarray(self.joints.vadr, np.int64)
        d0 = mjx.make_data(m)

        def step(state, _):
            qpos, qvel = ps.with_pair_state(self.joints, m.qpos0, jnp.zeros(m.nv, dtype), state)
            d = mjx.fwd_velocity(m, mjx.fwd_position(m, d0.replace(qpos=qpos, qvel=qvel)))
            mass = mjx.full_m(m, d)[va][:, va]
            m_inv = jnp.linalg.inv(mass)
            qd = state[k:] + dt * (m_inv @ (d.qfrc_passive - d.qfrc_bias)[va])  # a) smooth dynamics
            points, normals, dist = self._candidates(d, qpos)  # b) at the substep's start
            frames = jax.vmap(_tangents)(normals)
            jac = jax.vmap(lambda p, f: self._jacobian(d, p, f))(points, frames)  # (C, 3, nv)
            w = jnp.einsum("ij,ckj->cik", m_inv, jac)  # M⁻¹ Jᵀ (C, nv, 3)
            kmat = jac @ w  # (C, 3, 3)
            reg = _REG * jnp.trace(kmat, axis1=1, axis2=2) + 1e-30
            inv_n = 1.0 / (kmat[:, 2, 2] + reg)
            inv_t = jax.vmap(_inv2)(kmat[:, :2, :2] + reg[:, None, None] * jnp.eye(2, dtype=dtype))
            on = dist <= SLOP
            u0 = jac @ qd
            bounce = u0[:, 2] < -BOUNCE
            target = jnp.where(bounce[:, None], u0 * scale, 0.0)

            def contact(c, inner):  # c) one candidate's normal, then tangential impulse
                qd, acc = inner
                u = jac[c] @ qd
                pn = jnp.maximum(acc[c, 2] + (target[c, 2] - u[2]) * inv_n[c], 0.0)
                qd = qd + w[c][:, 2] * ((pn - acc[c, 2]) * on[c])
                u = jac[c] @ qd
                pt = acc[c, :2] + inv_t[c] @ (target[c, :2] - u[:2])
                pt = pt * jnp.minimum(1.0, mu * pn / jnp.sqrt(jnp.sum(pt**2) + 1e-20))
                qd = qd + w[c][:, :2] @ ((pt - acc[c, :2]) * on[c])
                new = jnp.where(on[c], jnp.concatenate([pt, pn[None]]), 0.0)
                return qd, acc.at[c].set(new)

            def sweep(inner, _):
                return jax.lax.fori_loop(0, len(dist), contact, inner), None

            (qd, _), _ = jax.lax.scan(sweep, (qd, jnp.zeros((len(dist), 3), dtype)), None, length=self.passes)
            return ps.advance(self.joints, jnp.concatenate([state[:k], qd]), dt), None  # d)

        state, _ = jax.lax.scan(step, state, None, length=self.steps)
        return state.astype(jnp.asarray(pre).dtype)


def _plane_row(m: mujoco.MjModel, plane: int, other: int, sign: float) -> _PlaneRow:
    kind = int(m.geom_type[other])
    size = (float(m.geom_size[other][0]), float(m.geom_size[other][1]), float(m.geom_size[other][2]))
    verts = None
    if kind == _BOX:
        verts = jnp.asarray(_BOX_SIGNS * np.asarray(m.geom_size[other]), jnp.float32)
    elif kind == _MESH:
        mesh = int(m.geom_dataid[other])
        adr, num = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
        verts = jnp.asarray(m.mesh_vert[adr : adr + num], jnp.float32)
    return _PlaneRow(plane, other, float(sign), kind, size, verts)


def pair_law(scene: PairScene, *, substep: float = 5e-4, passes: int = 6) -> PairLaw:
    """The rigid impulse law of `scene`'s pair (a `PairScene`): a handler `law(pre (d,), params (3,)) -> post (d,)`.

    Args:
        scene: the scene; its MJCF, pair, window and contact rows are read once here.
        substep: the longest substep, s: the window is stepped in ⌈window / substep⌉ equal substeps
            (0.5 ms, the cube's law's: 0.25 ms moves a tumbling cube's post-window ω by < 0.02 rad/s).
        passes: sweeps of sequential impulses over the candidates per substep (the cube's law's 6).

    Returns:
        A `PairLaw`; its parameters are `law_space()`'s (e_n, e_t, μ).

    Raises:
        ValueError: naming the argument, for a substep or passes that is not positive.
    """
    if not (isinstance(substep, int | float) and math.isfinite(substep) and substep > 0):
        raise ValueError(f"pair_law: substep = {substep!r} must be a positive number of seconds")
    if not (isinstance(passes, int) and passes >= 1):
        raise ValueError(f"pair_law: passes = {passes!r} must be a positive whole number")
    window = float(scene.window)
    steps = max(1, math.ceil(window / substep - 1e-6))  # a substep that divides the window is not one step more
    full = scene.c_model()
    full.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    geometry = scene._geometry
    planes = tuple(_plane_row(full, p, o, s) for p, o, s in geometry.planes)
    only: mjx.Model | None = None
    only_body: tuple[int, ...] = ()
    if geometry.others:
        c_only = scene._models().only
        only, only_body = mjx.put_model(c_only), tuple(int(b) for b in c_only.geom_bodyid)
    joints = scene.joints
    first = int(scene._first)
    signs = tuple(1.0 if b == first else -1.0 for b in joints.bodies)
    return PairLaw(scene, mjx.put_model(full), only, only_body, planes, joints, first, signs, window, steps, passes)

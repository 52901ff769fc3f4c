"""Two impulse families for the strike besides MuJoCo's, written from the textbook (not the lab's simulator).

Both are planar: the striker (SCENE.md's 4 cm, 1 kg cube, no gravity, free in
the plane) and the block (its footprint, `mass`, its centre of mass offset by
`com_x`, `com_y` from the centroid, the uniform prism's radius of gyration).
The block slides on the ground under Coulomb friction `mu2` at points spread
evenly over its footprint (uniform pressure, which couples sliding and spin)
and torsional friction `torsion` (a lever, metres, as MuJoCo's condim-4
coefficient).  Contacts are found between the two convex outlines every step
(each body's vertices against the other's faces).  The outcome is SCENE.md's:
the block's (vx, vy, ωz) of its frame origin, block frame, 20 ms after the
first touch.

* `strike_rigid` (7 parameters): rigid bodies; where they touch the normal
  velocity reverses by Newton's restitution `e` and the tangential impulse
  stays inside Coulomb's cone `mu1`; points within `PATCH` of touching take an
  impact together; sequential impulses (velocity level, speculative contact).
* `strike_compliant` (8 parameters): where the outlines overlap by δ, a
  Hunt-Crossley normal force k δ^1.5 (1 + λ δ̇) (k = 10^`log10k` N/m^1.5,
  λ = 10^`log10lam` s/m; its damping at most what stops the approach in one
  step) and Coulomb friction `mu1` (regularised); explicit steps of `HC_DT`.
  The ground as above, as forces.

`STRIKE_FAMILIES[name]` = (outcome function, parameter names, low, high, nominal);
`family_outcomes(family, shape, strikes, params)` runs one compiled, vmapped
batch; `compliant_space()` is the compliant family's parameters as a
`ParamSpace`, what a surrogate distilled from it is conditioned on (the
shipped ones: `clashx.shipped_strike_surrogate(shape, family="compliant")`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, ParamSpace
from . import _geometry as geo
from ._spaces import strike_space
from ._strike_rule import RELEASE_AFTER

_SPACE = strike_space()  # the block's own priors are MuJoCo's eight's (mass, centre of mass, torsion)
MASS_RANGE, COM_RANGE, TORSION_RANGE = ((_SPACE.low[_SPACE.index(n)], _SPACE.high[_SPACE.index(n)])
                                        for n in ("mass", "com_x", "torsion"))  # fmt: skip
NOMINAL_MASS = float(_SPACE.vector()[_SPACE.index("mass")])

DT = 2.5e-4  # s, the law's step
ITERATIONS = 10  # sequential-impulse sweeps per step
GROUND_GRID = 5  # ground points: a GROUND_GRID x GROUND_GRID grid clipped to the footprint
BLOCK_CONTACTS = 4  # block vertices kept per step (the deepest) against the striker's faces
BAUMGARTE = 0.2  # share of a penetration pushed out per step
RESTITUTION_SPEED = 1e-3  # m/s: slower approaches do not bounce
PATCH = 2e-3  # m: points this close take the impact together (a face meeting a face at a slight tilt)
STRIKER_INERTIA = geo.STRIKER_MASS * (2 * geo.STRIKER_HALF) ** 2 / 6  # kg m², the cube about its vertical axis

RIGID_STRIKE_NAMES = ("mu1", "mu2", "e", "mass", "com_x", "com_y", "torsion")
RIGID_STRIKE_LOW = (0.05, 0.02, 0.0, MASS_RANGE[0], COM_RANGE[0], COM_RANGE[0], TORSION_RANGE[0])
RIGID_STRIKE_HIGH = (1.0, 1.0, 1.0, MASS_RANGE[1], COM_RANGE[1], COM_RANGE[1], TORSION_RANGE[1])
RIGID_NOMINAL = (0.5, 0.5, 0.5, NOMINAL_MASS, 0.0, 0.0, 0.0)
HC_DT = 5e-5  # s, the compliant law's step (explicit: its stiffest contact takes 20 steps or more)
SLIP = 1e-3  # m/s, regularisation of Coulomb's sign
SPIN_SLIP = 0.03  # rad/s, the same for the torsional friction
COMPLIANT_NAMES = ("mu1", "mu2", "log10k", "log10lam", "mass", "com_x", "com_y", "torsion")
COMPLIANT_LOW = (0.05, 0.02, 4.0, -1.0, MASS_RANGE[0], COM_RANGE[0], COM_RANGE[0], TORSION_RANGE[0])
COMPLIANT_HIGH = (1.0, 1.0, 7.0, 3.0, MASS_RANGE[1], COM_RANGE[1], COM_RANGE[1], TORSION_RANGE[1])
COMPLIANT_NOMINAL = (0.5, 0.5, 5.5, 1.0, NOMINAL_MASS, 0.0, 0.0, 0.0)


def _outward_normals(poly: np.ndarray) -> np.ndarray:
    edge = np.roll(poly, -1, axis=0) - poly
    return np.stack([edge[:, 1], -edge[:, 0]], 1) / np.linalg.norm(edge, axis=1, keepdims=True)


@functools.cache
def _shape_constants(shape: str) -> dict[str, np.ndarray]:
    """The outlines, their normals and the ground points of `shape`, block frame (metres)."""
    poly = geo.outline(shape)
    lo, hi = poly.min(0), poly.max(0)
    u = (np.arange(GROUND_GRID) + 0.5) / GROUND_GRID
    grid = np.stack(np.meshgrid(lo[0] + u * (hi[0] - lo[0]), lo[1] + u * (hi[1] - lo[1])), -1).reshape(-1, 2)
    inside = np.all(np.einsum("gnk,nk->gn", grid[:, None, :] - poly[None], _outward_normals(poly)) <= 0, axis=1)
    h = geo.STRIKER_HALF
    square = np.array([[h, -h], [h, h], [-h, h], [-h, -h]])
    return {
        "block": poly, "block_normals": _outward_normals(poly), "ground": grid[inside],
        "striker": square, "striker_normals": _outward_normals(square),
        "centroid": geo.footprint_com(shape), "gyration": np.asarray(geo.characteristic_length(shape)),
    }  # fmt: skip


def _cross(a, b):
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _perp(a):
    return jnp.stack([-a[..., 1], a[..., 0]], -1)


def _effective_mass(r_b, r_s, direction, inv_m):
    """Each contact's effective mass along `direction` (K, 2) for the pair, arms r_b and r_s (K, 2);
    inv_m = (1/m_block, 1/I_block, 1/m_striker, 1/I_striker)."""
    jb, js = _cross(r_b, direction), _cross(r_s, direction)
    return 1.0 / (inv_m[0] + jb**2 * inv_m[1] + inv_m[2] + js**2 * inv_m[3])


def _outcome(com, phi, vb, wb):
    """SCENE.md's outcome from the block's centre-of-mass motion: its frame origin's (vx, vy), block frame, and ωz."""
    rb = geo.rot2(phi)
    origin_velocity = vb + wb * _perp(-com @ rb.T)  # the frame origin sits at -com from the centre of mass
    return jnp.concatenate([rb.T @ origin_velocity, wb[None]])


def _depths(points, verts, normals):
    """Signed distance (max over faces) of `points` (P, 2) to a convex polygon, and the face normal it used."""
    d = jnp.einsum("fk,pfk->pf", normals, points[:, None, :] - verts[None])
    i = jnp.argmax(d, axis=1)
    return jnp.max(d, axis=1), normals[i]


def _time_of_impact(block, striker, direction):
    """How far (m) the striker, translating along `direction`, travels before its outline meets the block's."""
    far = jnp.asarray(1.0, block.dtype)

    def casts(points, poly, d):
        def one(p):
            t, s, ok, _ = geo.line_edge_hits(poly, p, d)
            hit = ok & (t >= -1e-6) & (s >= 0) & (s <= 1)
            return jnp.min(jnp.where(hit, t, far))

        return jax.vmap(one)(points)

    return jnp.minimum(jnp.min(casts(striker, block, direction)), jnp.min(casts(block, striker, -direction)))


class _Bodies(NamedTuple):
    """The two bodies of one strike at fixed parameters, about the block's centre of mass."""

    com: Array  # (2,) centre of mass, block frame
    inertia: Array  # block's, kg m²
    block: Array  # (N, 2) outline about the centre of mass
    block_normals: Array  # (N, 2)
    ground: Array  # (G, 2) ground points about the centre of mass
    striker: Array  # (4, 2) the striker's outline about its centre
    striker_normals: Array  # (4, 2)


def _bodies_and_start(shape, strike, mass, com_x, com_y):
    """The bodies, and the state at first touch: (block com xy, yaw, v xy, ω, striker centre xy, yaw, v xy, ω);
    the block frame is the world at touch."""
    k = _shape_constants(shape)
    f32 = jnp.float32
    com = jnp.asarray(k["centroid"], f32) + jnp.stack([com_x, com_y])
    bodies = _Bodies(
        com, mass * jnp.asarray(k["gyration"], f32) ** 2, jnp.asarray(k["block"], f32) - com,
        jnp.asarray(k["block_normals"], f32), jnp.asarray(k["ground"], f32) - com,
        jnp.asarray(k["striker"], f32), jnp.asarray(k["striker_normals"], f32),
    )  # fmt: skip
    centre, yaw, velocity = geo.striker_start(shape, strike)
    direction = velocity / strike[2]
    travel = _time_of_impact(jnp.asarray(k["block"], f32), centre + bodies.striker @ geo.rot2(yaw).T, direction)
    zero = jnp.zeros((), f32)
    return bodies, (com, zero, jnp.zeros(2, f32), zero, centre + direction * travel, yaw, velocity, zero)


def _contacts(bodies: _Bodies, xb, phi, xs, psi):
    """Candidate contacts: the striker's corners against the block's faces and the `BLOCK_CONTACTS` deepest
    block corners against the striker's; (signed distance, normal out of the block, arm from the block's
    centre of mass, arm from the striker's centre), world frame."""
    rb, rs = geo.rot2(phi), geo.rot2(psi)
    block_world, block_normals = xb + bodies.block @ rb.T, bodies.block_normals @ rb.T
    striker_world, striker_normals = xs + bodies.striker @ rs.T, bodies.striker_normals @ rs.T
    sd_a, n_a = _depths(striker_world, block_world, block_normals)
    sd_b, n_b = _depths(block_world, striker_world, striker_normals)
    keep = jnp.argsort(sd_b)[:BLOCK_CONTACTS]
    sd = jnp.concatenate([sd_a, sd_b[keep]])
    normal = jnp.concatenate([n_a, -n_b[keep]])
    point = jnp.concatenate([striker_world, block_world[keep]])
    return sd, normal, point - xb, point - xs


def strike_rigid(shape: str, strike: Float[Array, "3"], params: Float[Array, "7"]) -> Float[Array, "3"]:
    """The block's velocity (vx, vy, ωz) of its frame origin, block frame, `RELEASE_AFTER` after first touch.

    Args:
        shape: one of `geo.SHAPES`.
        strike: (θ, θ1, v_pre), SCENE.md's strike.
        params: the family's seven parameters, in `RIGID_STRIKE_NAMES`' order.
    """
    f32 = jnp.float32
    strike, params = jnp.asarray(strike, f32), jnp.asarray(params, f32)
    mu1, mu2, e, mass, com_x, com_y, torsion = (params[i] for i in range(7))
    bodies, state = _bodies_and_start(shape, strike, mass, com_x, com_y)
    inertia, ground = bodies.inertia, bodies.ground
    load = mass * geo.GRAVITY / ground.shape[0]  # normal force per ground point, N
    inv_m = jnp.stack([1 / mass, 1 / inertia, 1 / geo.STRIKER_MASS, 1 / STRIKER_INERTIA])

    def step(state, _):
        xb, phi, vb, wb, xs, psi, vs, ws = state
        rb = geo.rot2(phi)
        sd, normal, r_b, r_s = _contacts(bodies, xb, phi, xs, psi)
        tangent = _perp(normal)

        def rel(v, dirn, i):
            vb_, wb_, vs_, ws_ = v
            return jnp.dot(vs_ + ws_ * _perp(r_s[i]) - vb_ - wb_ * _perp(r_b[i]), dirn)

        def apply(v, dirn, i, lam):
            vb_, wb_, vs_, ws_ = v
            return (vb_ - dirn * lam * inv_m[0], wb_ - _cross(r_b[i], dirn) * lam * inv_m[1],
                    vs_ + dirn * lam * inv_m[2], ws_ + _cross(r_s[i], dirn) * lam * inv_m[3])  # fmt: skip

        v0 = (vb, wb, vs, ws)
        n_c = sd.shape[0]
        approach = jnp.stack([rel(v0, normal[i], i) for i in range(n_c)])
        bounce = jnp.where((approach < -RESTITUTION_SPEED) & (sd <= PATCH), -e * approach, 0.0)
        target = jnp.maximum(bounce, jnp.where(sd > 0, -sd / DT, -BAUMGARTE * sd / DT))
        m_n, m_t = _effective_mass(r_b, r_s, normal, inv_m), _effective_mass(r_b, r_s, tangent, inv_m)
        r_g = ground @ rb.T
        lim_g, lim_w = mu2 * load * DT, torsion * mass * geo.GRAVITY * DT
        kxx = inv_m[0] + r_g[:, 1] ** 2 * inv_m[1]
        kyy = inv_m[0] + r_g[:, 0] ** 2 * inv_m[1]
        kxy = -r_g[:, 0] * r_g[:, 1] * inv_m[1]
        det = kxx * kyy - kxy**2

        def sweep(_, carry):
            v, lam_n, lam_t, lam_g, lam_w_acc = carry
            for i in range(n_c):
                new = jnp.maximum(lam_n[i] + (target[i] - rel(v, normal[i], i)) * m_n[i], 0.0)
                v = apply(v, normal[i], i, new - lam_n[i])
                lam_n = lam_n.at[i].set(new)
                bound = mu1 * lam_n[i]
                new_t = jnp.clip(lam_t[i] - rel(v, tangent[i], i) * m_t[i], -bound, bound)
                v = apply(v, tangent[i], i, new_t - lam_t[i])
                lam_t = lam_t.at[i].set(new_t)
            vb_, wb_, vs_, ws_ = v
            for g in range(r_g.shape[0]):
                vp = vb_ + wb_ * _perp(r_g[g])
                impulse = -jnp.stack([kyy[g] * vp[0] - kxy[g] * vp[1], kxx[g] * vp[1] - kxy[g] * vp[0]]) / det[g]
                acc = lam_g[g] + impulse
                acc = acc * jnp.minimum(1.0, lim_g / jnp.maximum(jnp.linalg.norm(acc), 1e-12))
                d = acc - lam_g[g]
                vb_, wb_ = vb_ + d * inv_m[0], wb_ + _cross(r_g[g], d) * inv_m[1]
                lam_g = lam_g.at[g].set(acc)
            acc_w = jnp.clip(lam_w_acc - wb_ / inv_m[1], -lim_w, lim_w)
            wb_ = wb_ + (acc_w - lam_w_acc) * inv_m[1]
            return (vb_, wb_, vs_, ws_), lam_n, lam_t, lam_g, acc_w

        zeros = jnp.zeros(n_c, f32)
        v, *_ = jax.lax.fori_loop(
            0, ITERATIONS, sweep, (v0, zeros, zeros, jnp.zeros((r_g.shape[0], 2), f32), jnp.zeros((), f32))
        )
        vb, wb, vs, ws = v
        return (xb + vb * DT, phi + wb * DT, vb, wb, xs + vs * DT, psi + ws * DT, vs, ws), None

    (_, phi, vb, wb, *_), _ = jax.lax.scan(step, state, None, length=int(round(RELEASE_AFTER / DT)))
    return _outcome(bodies.com, phi, vb, wb)


def strike_compliant(shape: str, strike: Float[Array, "3"], params: Float[Array, "8"]) -> Float[Array, "3"]:
    """The compliant family's outcome: as `strike_rigid`, with Hunt-Crossley forces where the outlines overlap."""
    f32 = jnp.float32
    strike, params = jnp.asarray(strike, f32), jnp.asarray(params, f32)
    mu1, mu2, log10k, log10lam, mass, com_x, com_y, torsion = (params[i] for i in range(8))
    stiff, lam = 10.0**log10k, 10.0**log10lam
    bodies, state = _bodies_and_start(shape, strike, mass, com_x, com_y)
    inertia, ground = bodies.inertia, bodies.ground
    load = mass * geo.GRAVITY / ground.shape[0]
    inv_m = jnp.stack([1 / mass, 1 / inertia, 1 / geo.STRIKER_MASS, 1 / STRIKER_INERTIA])

    def step(state, _):
        xb, phi, vb, wb, xs, psi, vs, ws = state
        rb = geo.rot2(phi)
        sd, normal, r_b, r_s = _contacts(bodies, xb, phi, xs, psi)
        vrel = vs + ws * _perp(r_s) - vb - wb * _perp(r_b)  # striker relative to block at each point
        vn = jnp.sum(vrel * normal, -1)
        depth = jnp.maximum(-sd, 0.0)
        spring = stiff * depth**1.5
        meff = _effective_mass(r_b, r_s, normal, inv_m)
        # Hunt-Crossley's damping, at most what stops the normal approach in one step (an implicit damper's limit)
        damp = jnp.minimum(spring * lam, meff / HC_DT) * -vn
        fn = jnp.maximum(spring + damp, 0.0)
        vt = vrel - vn[:, None] * normal
        ft = -mu1 * fn[:, None] * vt / jnp.sqrt(jnp.sum(vt**2, -1, keepdims=True) + SLIP**2)
        f = fn[:, None] * normal + ft  # on the striker; the block feels -f
        r_g = ground @ rb.T
        vg = vb + wb * _perp(r_g)
        fg = -mu2 * load * vg / jnp.sqrt(jnp.sum(vg**2, -1, keepdims=True) + SLIP**2)
        force_b = -jnp.sum(f, 0) + jnp.sum(fg, 0)
        torque_b = (
            -jnp.sum(_cross(r_b, f))
            + jnp.sum(_cross(r_g, fg))
            - torsion * mass * geo.GRAVITY * wb / jnp.sqrt(wb**2 + SPIN_SLIP**2)
        )
        vb = vb + force_b / mass * HC_DT
        wb = wb + torque_b / inertia * HC_DT
        vs = vs + jnp.sum(f, 0) / geo.STRIKER_MASS * HC_DT
        ws = ws + jnp.sum(_cross(r_s, f)) / STRIKER_INERTIA * HC_DT
        return (xb + vb * HC_DT, phi + wb * HC_DT, vb, wb, xs + vs * HC_DT, psi + ws * HC_DT, vs, ws), None

    (_, phi, vb, wb, *_), _ = jax.lax.scan(step, state, None, length=int(round(RELEASE_AFTER / HC_DT)))
    return _outcome(bodies.com, phi, vb, wb)


STRIKE_FAMILIES = {
    "rigid": (strike_rigid, RIGID_STRIKE_NAMES, RIGID_STRIKE_LOW, RIGID_STRIKE_HIGH, RIGID_NOMINAL),
    "compliant": (strike_compliant, COMPLIANT_NAMES, COMPLIANT_LOW, COMPLIANT_HIGH, COMPLIANT_NOMINAL),
}


def family_outcomes(family: str, shape: str, strikes, params) -> np.ndarray:
    """The family's outcomes (n, 3) of strikes (n, 3) at parameters (n, p) or (p,), compiled once per shape."""
    names = STRIKE_FAMILIES[family][1]
    params = jnp.broadcast_to(jnp.asarray(params, jnp.float32), (len(strikes), len(names)))
    return np.asarray(_batch(family, shape)(jnp.asarray(strikes, jnp.float32), params))


def compliant_space() -> ParamSpace:
    """The compliant family's eight parameters as a `ParamSpace` (no MuJoCo targets: the law is not MuJoCo's)."""
    n = len(COMPLIANT_NAMES)
    return ParamSpace(
        names=COMPLIANT_NAMES, low=tuple(map(float, COMPLIANT_LOW)), high=tuple(map(float, COMPLIANT_HIGH)),
        targets=((),) * n, log_scale=(False,) * n, nominal=tuple(map(float, COMPLIANT_NOMINAL)),
    )  # fmt: skip


@functools.cache
def _batch(family: str, shape: str):
    return jax.jit(jax.vmap(functools.partial(STRIKE_FAMILIES[family][0], shape)))

"""A second impulse family for the strike, measured against MuJoCo's class (issue 26, item 1); not adopted.

    python bench/strike_rigid.py [--labs a,C,D] [--shapes ...] [--n 60] [--fit-seed 7] [--mujoco]
                                 [--generations 40] [--restarts 3] [--json OUT]

The family (`strike_rigid`, here, written from the textbook; not the lab's
simulator): the striker (SCENE.md's 4 cm, 1 kg cube, no gravity, free in the
plane) and the block (its footprint, `mass`, its centre of mass offset by
`com_x`, `com_y` from the centroid, the uniform prism's radius of gyration)
are rigid planar bodies.  Where they touch, the normal velocity reverses by
Newton's restitution `e` and the tangential impulse stays inside Coulomb's
cone `mu1`; points within `PATCH` of touching take an impact together (a face
meeting a face at a slight tilt).  The block slides on the ground under
Coulomb friction `mu2` at points spread evenly over its footprint (uniform
pressure, which couples sliding and spin) and torsional friction `torsion`
(a lever, metres, as MuJoCo's condim-4 coefficient).  Contacts are found
between the two convex outlines every step and resolved by sequential
impulses (velocity level, speculative contact).  The outcome is SCENE.md's:
the block's (vx, vy, ωz) of its frame origin, block frame, 20 ms after the
first touch.

Its ceiling, as bench/ceiling.py measures MuJoCo's: the family is fitted by
CMA-ES (`clashx.optimize.cmaes_in_box`, the baselines' objective: mean squared
relative error of the speed vector, flat prior) to the *true* velocities of
`--n` random lab strikes (`--fit-seed`): an oracle, for measuring the model
class only.  Scored at α = 0.1 on those strikes and on held-out strikes'
`post_velocity_true` (lab A: the shipped 200; labs C and D of
bench/correction.py: 100, seed 1), beside MuJoCo C's oracle on the same
strikes with the same search (`--mujoco`, bench/ceiling.py's `strike8`).
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from ceiling import alpha_of, oracle_fit
from cmaes import run_lab
from correction import lab_file, lab_test

from clashx.core import Array, Float, write_json
from clashx.events import relative_error
from clashx.optimize import cmaes_in_box
from clashx.scenes import geometry as geo
from clashx.scenes import make_strike_sim
from clashx.scenes._spaces import COM_RANGE, MASS_RANGE, TORSION_RANGE
from clashx.workflows import lab_truth

RELEASE_AFTER = 0.02  # s: the arm pulls the striker away this long after first touch (SCENE.md)
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


def _rot(angle):
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.array([[c, -s], [s, c]])


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


def strike_rigid(shape: str, strike: Float[Array, "3"], params: Float[Array, "7"]) -> Float[Array, "3"]:
    """The block's velocity (vx, vy, ωz) of its frame origin, block frame, `RELEASE_AFTER` after first touch.

    Args:
        shape: one of `geo.SHAPES`.
        strike: (θ, θ1, v_pre), SCENE.md's strike.
        params: the family's seven parameters, in `rigid_strike_space()`'s order.
    """
    k = _shape_constants(shape)
    f32 = jnp.float32
    strike, params = jnp.asarray(strike, f32), jnp.asarray(params, f32)
    mu1, mu2, e, mass, com_x, com_y, torsion = (params[i] for i in range(7))
    com = jnp.asarray(k["centroid"], f32) + jnp.stack([com_x, com_y])
    inertia = mass * jnp.asarray(k["gyration"], f32) ** 2
    block_local = jnp.asarray(k["block"], f32) - com  # outline about the centre of mass, block frame
    block_normals = jnp.asarray(k["block_normals"], f32)
    ground = jnp.asarray(k["ground"], f32) - com
    striker_local, striker_normals = jnp.asarray(k["striker"], f32), jnp.asarray(k["striker_normals"], f32)
    load = mass * geo.GRAVITY / ground.shape[0]  # normal force per ground point, N

    centre, yaw, velocity = geo.striker_start(shape, strike)
    direction = velocity / strike[2]
    striker_world0 = centre + striker_local @ _rot(yaw).T
    travel = _time_of_impact(jnp.asarray(k["block"], f32), striker_world0, direction)
    # state: block (com xy, yaw, v xy, ω), striker (centre xy, yaw, v xy, ω); the block frame is the world at touch
    state = (com, jnp.zeros((), f32), jnp.zeros(2, f32), jnp.zeros((), f32),
             centre + direction * travel, yaw, velocity, jnp.zeros((), f32))  # fmt: skip
    inv_m = jnp.stack([1 / mass, 1 / inertia, 1 / geo.STRIKER_MASS, 1 / STRIKER_INERTIA])

    def step(state, _):
        xb, phi, vb, wb, xs, psi, vs, ws = state
        rb, rs = _rot(phi), _rot(psi)
        vb_world, nb_world = xb + block_local @ rb.T, block_normals @ rb.T
        vs_world, ns_world = xs + striker_local @ rs.T, striker_normals @ rs.T
        # striker corners against the block's faces (normal out of the block), block corners against the striker's
        sd_a, n_a = _depths(vs_world, vb_world, nb_world)
        sd_b, n_b = _depths(vb_world, vs_world, ns_world)
        keep = jnp.argsort(sd_b)[:BLOCK_CONTACTS]
        sd = jnp.concatenate([sd_a, sd_b[keep]])
        normal = jnp.concatenate([n_a, -n_b[keep]])
        point = jnp.concatenate([vs_world, vb_world[keep]])
        r_b, r_s = point - xb, point - xs
        tangent = _perp(normal)

        def rel(v, dirn, i):
            vb_, wb_, vs_, ws_ = v
            return jnp.dot(vs_ + ws_ * _perp(r_s[i]) - vb_ - wb_ * _perp(r_b[i]), dirn)

        def meff(dirn, i):
            jb, js = _cross(r_b[i], dirn), _cross(r_s[i], dirn)
            return 1.0 / (inv_m[0] + jb**2 * inv_m[1] + inv_m[2] + js**2 * inv_m[3])

        def apply(v, dirn, i, lam):
            vb_, wb_, vs_, ws_ = v
            return (vb_ - dirn * lam * inv_m[0], wb_ - _cross(r_b[i], dirn) * lam * inv_m[1],
                    vs_ + dirn * lam * inv_m[2], ws_ + _cross(r_s[i], dirn) * lam * inv_m[3])  # fmt: skip

        v0 = (vb, wb, vs, ws)
        n_c = sd.shape[0]
        approach = jnp.stack([rel(v0, normal[i], i) for i in range(n_c)])
        bounce = jnp.where((approach < -RESTITUTION_SPEED) & (sd <= PATCH), -e * approach, 0.0)
        target = jnp.maximum(bounce, jnp.where(sd > 0, -sd / DT, -BAUMGARTE * sd / DT))
        m_n = jnp.stack([meff(normal[i], i) for i in range(n_c)])
        m_t = jnp.stack([meff(tangent[i], i) for i in range(n_c)])
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

    steps = int(round(RELEASE_AFTER / DT))
    (xb, phi, vb, wb, *_), _ = jax.lax.scan(step, state, None, length=steps)
    rb = _rot(phi)
    origin_velocity = vb + wb * _perp(-com @ rb.T)  # the frame origin sits at -com from the centre of mass
    return jnp.concatenate([rb.T @ origin_velocity, wb[None]])


def strike_rigid_batch(shape: str, strikes, params) -> Float[Array, "n 3"]:
    """`strike_rigid` over strikes (n, 3) and parameters (n, 7) or (7,), compiled once per shape."""
    params = jnp.broadcast_to(jnp.asarray(params, jnp.float32), (len(strikes), len(RIGID_STRIKE_NAMES)))
    return _batch(shape)(jnp.asarray(strikes, jnp.float32), params)


@functools.cache
def _batch(shape: str):
    return jax.jit(jax.vmap(functools.partial(strike_rigid, shape)))


def fit_rigid(shape, strikes, truth, *, key, generations, restarts):
    """CMA-ES over the rigid family's unit box: (params, loss)."""
    length = geo.characteristic_length(shape)
    n = len(strikes)
    lo, hi = np.asarray(RIGID_STRIKE_LOW), np.asarray(RIGID_STRIKE_HIGH)

    def params_of(u):
        return lo + np.asarray(u) * (hi - lo)

    def losses(us):
        p = params_of(us)
        s = np.tile(strikes, (len(us), 1))
        pr = np.repeat(p, n, axis=0)
        pred = np.asarray(strike_rigid_batch(shape, s, pr)).reshape(len(us), n, 3)
        err = np.asarray(relative_error(pred, truth[None], length))
        return np.mean(err**2, axis=1)

    u, loss, _ = cmaes_in_box(losses, np.full(len(RIGID_STRIKE_NAMES), 0.5), key=key, population=16,
                              generations=generations, std_init=0.25, restarts=restarts)  # fmt: skip
    return params_of(u), float(loss)


def alpha_rigid(shape, params, strikes, truth):
    pred = np.asarray(strike_rigid_batch(shape, strikes, params))
    return float(np.mean(np.asarray(relative_error(pred, truth, geo.characteristic_length(shape))) <= 0.1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labs", default="a,C,D")
    ap.add_argument("--shapes", default=",".join(geo.SHAPES))
    ap.add_argument("--n", type=int, default=60, help="strikes fitted (true labels)")
    ap.add_argument("--test-n", type=int, default=100)
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("--fit-seed", type=int, default=7)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--mujoco", action="store_true", help="MuJoCo C fitted the same way, beside it")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    key = jax.random.PRNGKey(0)
    with tempfile.TemporaryDirectory() as tmp:
        for lab in a.labs.split(","):
            path = lab_file(lab, tmp)
            for shape in a.shapes.split(","):
                rec = run_lab(shape, path, os.path.join(tmp, f"{lab}_{shape}_fit.npz"), n=a.n, seed=a.fit_seed)
                test = lab_test(shape, lab, tmp, a.test_n)
                s_test, v_test, _ = lab_truth(test, "test")
                s_fit, v_fit, _ = lab_truth(rec, "fit")
                t1 = time.perf_counter()
                p, loss = fit_rigid(shape, s_fit, v_fit, key=key, generations=a.generations, restarts=a.restarts)  # fmt: skip
                row = {"lab": lab, "shape": shape, "n_fit": len(s_fit), "rigid": {
                    "fit": alpha_rigid(shape, p, s_fit, v_fit), "held_out": alpha_rigid(shape, p, s_test, v_test),
                    "loss": loss, "seconds": time.perf_counter() - t1,
                    "params": dict(zip(RIGID_STRIKE_NAMES, p.tolist(), strict=True))}}  # fmt: skip
                if a.mujoco:
                    sim = make_strike_sim(shape)
                    t1 = time.perf_counter()
                    fit = oracle_fit(sim, s_fit, v_fit, key=key, generations=a.generations, restarts=a.restarts)
                    row["mujoco"] = {"fit": alpha_of(sim, fit.params, s_fit, v_fit, shape),
                                     "held_out": alpha_of(sim, fit.params, s_test, v_test, shape),
                                     "seconds": time.perf_counter() - t1,
                                     "params": dict(zip(sim.space.names, np.asarray(fit.params).tolist(), strict=True))}  # fmt: skip
                rows.append(row)
                cells = "   ".join(f"{m} fit {row[m]['fit']:.3f} held-out {row[m]['held_out']:.3f}"
                                   for m in ("rigid", "mujoco") if m in row)  # fmt: skip
                print(f"lab {lab} {shape:<14} {cells}   [{time.perf_counter() - t0:.0f} s]", flush=True)
                print(f"   rigid params {row['rigid']['params']}", flush=True)
    for m in ("rigid", "mujoco"):
        if m in rows[0]:
            print(f"mean over {len(rows)}: {m:<7} fit {np.mean([r[m]['fit'] for r in rows]):.3f}  "
                  f"held-out {np.mean([r[m]['held_out'] for r in rows]):.3f}")  # fmt: skip
    if a.json:
        write_json(a.json, {"rows": rows, "args": vars(a)})
        print(f"-> {a.json}")


if __name__ == "__main__":
    main()

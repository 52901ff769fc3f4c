"""The learned pair's contacts: made explicit `<pair>`s, and MuJoCo's own distance between the pair.

- `with_explicit_pairs`: the model with the pair's contacts made explicit
  `<pair>`s (a contact MuJoCo would generate from contype/conaffinity becomes a
  `<pair>` with the parameters MuJoCo's mixing rules give it), so the hybrid
  rule can switch exactly the pair's contacts off in one world and no other
  contact of the same geoms;
- `pair_only`: a model holding the pair's geoms and contacts alone;
- `pair_contact`: MuJoCo's own distance between the pair's geoms at a qpos, with
  the contact point and normal (MJX's collision functions, in JAX): the default
  separation and the contact frame of the default features (`_pair_state`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..core import Array, Float, mjx

SOFTMIN_M = 1e-3  # m: contacts within about this of the deepest one share the contact point and normal


def _mix(m: mujoco.MjModel, g1: int, g2: int) -> dict:
    """MuJoCo's parameters of a contact between geoms g1 and g2 generated from contype/conaffinity (mj_contactParam)."""
    if m.geom_priority[g1] != m.geom_priority[g2]:
        g = g1 if m.geom_priority[g1] > m.geom_priority[g2] else g2
        f = m.geom_friction[g]
        return {
            "condim": int(m.geom_condim[g]),
            "friction": [f[0], f[0], f[1], f[2], f[2]],
            "solref": list(m.geom_solref[g]),
            "solimp": list(m.geom_solimp[g]),
        }
    s1, s2 = float(m.geom_solmix[g1]), float(m.geom_solmix[g2])
    eps = mujoco.mjMINVAL
    mix = 0.5 if (s1 < eps and s2 < eps) else 0.0 if s1 < eps else 1.0 if s2 < eps else s1 / (s1 + s2)
    f = np.maximum(m.geom_friction[g1], m.geom_friction[g2])
    r1, r2 = m.geom_solref[g1], m.geom_solref[g2]
    solref = mix * r1 + (1 - mix) * r2 if (r1[0] > 0 and r2[0] > 0) else np.minimum(r1, r2)
    return {
        "condim": int(max(m.geom_condim[g1], m.geom_condim[g2])),
        "friction": [f[0], f[0], f[1], f[2], f[2]],
        "solref": list(solref),
        "solimp": list(mix * m.geom_solimp[g1] + (1 - mix) * m.geom_solimp[g2]),
    }


def with_explicit_pairs(spec: mujoco.MjSpec, pair_bodies: tuple[str, str]) -> mujoco.MjSpec:
    """Make every contact between the pair's bodies an explicit `<pair>` (changes and returns `spec`).

    Each geom combination that MuJoCo would collide from contype/conaffinity becomes a
    `<pair>` named "clashx_pair_<geom1>_<geom2>" with the parameters MuJoCo's mixing
    rules give it (`_mix`; margin and gap the larger of the two), and the two bodies
    are excluded from dynamic contacts: the same contacts, now one row each that the
    hybrid rule can switch off in one world.
    """
    m = spec.compile()
    ids = [0 if name == "world" else mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name) for name in pair_bodies]
    geoms = [np.flatnonzero(m.geom_bodyid == b) for b in ids]
    name = lambda g: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, int(g))  # noqa: E731
    added = False
    for g1 in geoms[0]:
        for g2 in geoms[1]:
            if not (m.geom_contype[g1] & m.geom_conaffinity[g2] or m.geom_contype[g2] & m.geom_conaffinity[g1]):
                continue
            if m.geom_type[g1] == m.geom_type[g2] == mujoco.mjtGeom.mjGEOM_PLANE:
                continue
            n1, n2 = name(g1), name(g2)
            if not n1 or not n2:
                raise ValueError(
                    f"the pair's geoms collide through contype/conaffinity but geom #{g1 if not n1 else g2} has no "
                    "name: give every geom of the pair a name (clashx makes their contacts explicit <pair>s)"
                )
            p = _mix(m, int(g1), int(g2))
            pr = spec.add_pair(geomname1=n1, geomname2=n2)
            pr.name = f"clashx_pair_{n1}_{n2}"
            pr.condim = p["condim"]
            pr.friction = np.asarray(p["friction"], np.float64)
            pr.solref = np.asarray(p["solref"], np.float64)
            pr.solimp = np.asarray(p["solimp"], np.float64)
            pr.margin = float(max(m.geom_margin[g1], m.geom_margin[g2]))
            pr.gap = float(max(m.geom_gap[g1], m.geom_gap[g2]))
            added = True
    if added:
        spec.add_exclude(bodyname1=pair_bodies[0], bodyname2=pair_bodies[1])
    return spec


def pair_rows(m: mujoco.MjModel, pair_bodies: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """The `<pair>` ids between the two bodies, and for each whether its geom1 is on the first body.

    The hybrid rule switches these rows off through an impact window; the flag orients
    MuJoCo's contact normal (geom1 → geom2) from the second body to the first.
    """
    rows, first = [], []
    b0, b1 = pair_bodies
    for i in range(m.npair):
        o1, o2 = int(m.geom_bodyid[m.pair_geom1[i]]), int(m.geom_bodyid[m.pair_geom2[i]])
        if {o1, o2} == {b0, b1}:
            rows.append(i)
            first.append(o1 == b0)
    return tuple(rows), tuple(first)


_PLANE = int(mujoco.mjtGeom.mjGEOM_PLANE)
_SUPPORTED = {
    int(mujoco.mjtGeom.mjGEOM_SPHERE),
    int(mujoco.mjtGeom.mjGEOM_CAPSULE),
    int(mujoco.mjtGeom.mjGEOM_ELLIPSOID),
    int(mujoco.mjtGeom.mjGEOM_CYLINDER),
    int(mujoco.mjtGeom.mjGEOM_BOX),
    int(mujoco.mjtGeom.mjGEOM_MESH),
}


class PairGeometry(NamedTuple):
    """The pair's `<pair>` rows split by how their distance is computed (static).

    Attributes:
        planes: (plane geom, other geom, sign) of each row against a plane: the other geom's
            support point along the plane's normal, exact whether apart or not; sign +1 where
            the plane is on the pair's second body (the normal then points to the first).
        others: (geom1, geom2, sign) of every other row: MJX's collision function for the two
            (exact for spheres and capsules, a separating-axis bound for boxes and meshes).
    """

    planes: tuple[tuple[int, int, float], ...]
    others: tuple[tuple[int, int, float], ...]
    first: int


def pair_geometry(m: mujoco.MjModel, rows: tuple[int, ...], first_body: int) -> PairGeometry:
    """Split the pair's rows (`pair_rows`) of `m`; a geom whose distance cannot be computed raises naming it."""
    planes, others = [], []
    for i in rows:
        g1, g2 = int(m.pair_geom1[i]), int(m.pair_geom2[i])
        if _PLANE in (int(m.geom_type[g1]), int(m.geom_type[g2])):
            plane, other = (g1, g2) if int(m.geom_type[g1]) == _PLANE else (g2, g1)
            if int(m.geom_type[other]) not in _SUPPORTED:
                name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, other)
                raise ValueError(f"geom {name!r} against a plane: clashx's separation handles sphere, capsule, "
                                 "ellipsoid, cylinder, box and mesh geoms; give the scene a separation(qpos)")  # fmt: skip
            planes.append((plane, other, 1.0 if int(m.geom_bodyid[other]) == first_body else -1.0))
        else:
            others.append((g1, g2, -1.0 if int(m.geom_bodyid[g1]) == first_body else 1.0))
    return PairGeometry(tuple(planes), tuple(others), first_body)


def pair_only(spec: mujoco.MjSpec, pair_bodies: tuple[str, str]) -> mujoco.MjModel:
    """The model whose collision pass finds the pair's contacts that involve no plane, and nothing else.

    `spec` must have gone through `with_explicit_pairs`; every other `<pair>` (and the
    pair's rows against a plane, which `pair_contact` computes itself) is deleted and
    every geom's contype and conaffinity cleared.  Geom and body ids are the full model's.
    The copy is for `pair_contact` only, never simulated.
    """
    spec = spec.copy()
    m = spec.compile()
    ids = {0 if name == "world" else mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name) for name in pair_bodies}
    owner = {g.name: int(m.geom_bodyid[i]) for i, g in enumerate(spec.geoms) if g.name}
    plane = {g.name for i, g in enumerate(spec.geoms) if g.name and int(m.geom_type[i]) == _PLANE}
    found = False
    for p in list(spec.pairs):
        ours = {owner.get(p.geomname1), owner.get(p.geomname2)} == ids
        found |= ours
        if not ours or p.geomname1 in plane or p.geomname2 in plane:
            spec.delete(p)
    if not found:
        raise ValueError(
            f"the pair {pair_bodies!r} has no contact in the MJCF: no <pair> and no contype/conaffinity match"
        )
    for g in spec.geoms:
        g.contype, g.conaffinity = 0, 0
    return spec.compile()


def _support(m: mujoco.MjModel, g: int, pos, mat, u) -> Float[Array, "3"]:
    """The point of geom `g` (at pos, mat) farthest along the unit direction `u` (world)."""
    kind, size = int(m.geom_type[g]), np.asarray(m.geom_size[g])
    local = mat.T @ u
    if kind == int(mujoco.mjtGeom.mjGEOM_SPHERE):
        p = size[0] * local
    elif kind == int(mujoco.mjtGeom.mjGEOM_CAPSULE):
        p = jnp.array([0.0, 0.0, size[1]]) * jnp.sign(local[2]) + size[0] * local
    elif kind == int(mujoco.mjtGeom.mjGEOM_ELLIPSOID):
        s2 = jnp.asarray(size**2) * local
        p = s2 / jnp.sqrt(jnp.sum(jnp.asarray(size**2) * local**2) + 1e-30)
    elif kind == int(mujoco.mjtGeom.mjGEOM_CYLINDER):
        radial = local.at[2].set(0.0)
        radial = radial / jnp.sqrt(jnp.sum(radial**2) + 1e-30)
        p = size[0] * radial + jnp.array([0.0, 0.0, size[1]]) * jnp.sign(local[2])
    elif kind == int(mujoco.mjtGeom.mjGEOM_BOX):
        p = jnp.asarray(size[:3]) * jnp.sign(local)
    else:  # a mesh: its (convex) vertices, in the geom's frame
        mesh = int(m.geom_dataid[g])
        adr, num = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
        vert = jnp.asarray(m.mesh_vert[adr : adr + num])
        p = vert[jnp.argmax(vert @ local)]
    return pos + mat @ p


class PairContact(NamedTuple):
    """Where the pair touches, or nearly: MuJoCo's own distance and contact frame at one qpos.

    Attributes:
        dist: the smallest signed distance between the pair's geoms (m; < 0 overlapping).
        point: the contact point (3,), world; contacts within ~SOFTMIN_M of the deepest are averaged.
        normal: the unit normal (3,), world, pointing from the pair's second body towards its first.
    """

    dist: Float[Array, ""]
    point: Float[Array, "3"]
    normal: Float[Array, "3"]


def pair_contact(model: mujoco.MjModel, geometry: PairGeometry, qpos: Float[Array, " nq"]) -> PairContact:
    """The distance, contact point and normal of the pair at `qpos` (JAX; `model`: `pair_only`'s).

    A row against a plane is the other geom's support point along the plane's normal
    (`_support`: exact apart and overlapping); any other row is MJX's collision function.
    Rows within ~SOFTMIN_M of the closest share the point and normal.
    """
    m = mjx.put_model(model)
    d = mjx.make_data(m).replace(qpos=jnp.asarray(qpos, m.qpos0.dtype))
    d = mjx.kinematics(m, d)
    dists, points, normals = [], [], []
    for plane, other, sign in geometry.planes:
        n = d.geom_xmat[plane][:, 2]
        tip = _support(model, other, d.geom_xpos[other], d.geom_xmat[other], -n)
        dists.append(jnp.dot(tip - d.geom_xpos[plane], n)[None])
        points.append(tip[None])
        normals.append((sign * n)[None])
    if geometry.others:  # every contact of this model is one of them (`pair_only`)
        c = mjx.collision(m, d)._impl.contact
        owner = jnp.asarray(model.geom_bodyid)[c.geom[:, 0]]
        flip = jnp.where(owner == geometry.first, -1.0, 1.0)  # MuJoCo's normal runs geom1 -> geom2
        dists.append(c.dist)
        points.append(c.pos)
        normals.append(flip[:, None] * c.frame[:, 0, :])
    dist, point, normal = (jnp.concatenate(x) for x in (dists, points, normals))
    near = jax.nn.softmax(-(dist - jnp.min(dist)) / SOFTMIN_M)
    n = jnp.sum(near[:, None] * normal, axis=0)
    return PairContact(jnp.min(dist), jnp.sum(near[:, None] * point, axis=0), n / jnp.linalg.norm(n))

"""The learned pair of any MJCF: its coordinates, how its state moves, and its contact frame.

Everything the hybrid rule (`clashx.hybrid`) and a scene's default features need
to know about the two bodies whose impact is learned, derived from the compiled
model once:

- `PairJoints`: where the pair's joints sit in (qpos, qvel).  Slide, hinge, ball
  and free joints; a partner may be the world body or any body without joints.
  The *pair state* is the pair's qpos entries followed by its qvel entries, in
  the model's order.  `interpolate` and `advance` move a pair state the way the
  joints move (quaternions renormalised, rotations integrated);
- the contact frame: the default features and targets of an impact, and the
  pair's energy and speed scales.

The pair's contacts themselves (made explicit, and MuJoCo's distance between
the pair) are in `_pair_contact`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..core import Array, Float, mjx, quat_conj, quat_exp, quat_log, quat_mul, quat_to_mat

_FREE, _BALL = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)
_SLIDE, _HINGE = int(mujoco.mjtJoint.mjJNT_SLIDE), int(mujoco.mjtJoint.mjJNT_HINGE)


class PairJoints(NamedTuple):
    """The learned pair's coordinates in a compiled model (static).

    Attributes:
        qadr, vadr: qpos and qvel addresses of the pair's joints, model order.
        bodies: the pair's moving bodies (those with joints), model order.
        body_q, body_v: per moving body, its (start, end) in the pair state's q and v parts.
        free: per free joint, (q offset, v offset) of its 7 / 6 entries in the q and v parts.
        ball: per ball joint, (q offset, v offset) of its 4 / 3 entries.
        scalar: per slide or hinge joint, (q offset, v offset).
        hinge: per scalar joint, whether it is a hinge (rad) or a slide (m).
        gravity: the world's gravity (3,), m/s².
        slide_gravity: per scalar joint, gravity along it (m/s²; 0 for a hinge): the slide's axis in
            the world, fixed where the joints before it on its body are slides.
    """

    qadr: tuple[int, ...]
    vadr: tuple[int, ...]
    bodies: tuple[int, ...]
    body_q: tuple[tuple[int, int], ...]
    body_v: tuple[tuple[int, int], ...]
    free: tuple[tuple[int, int], ...]
    ball: tuple[tuple[int, int], ...]
    scalar: tuple[tuple[int, int], ...]
    hinge: tuple[bool, ...]
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    slide_gravity: tuple[float, ...] = ()

    @property
    def nq(self) -> int:
        return len(self.qadr)

    @property
    def size(self) -> int:
        """The pair state's length, nq + nv of the pair."""
        return len(self.qadr) + len(self.vadr)


def body_id(m: mujoco.MjModel, scene: str, name: str) -> int:
    """The id of body `name` ("world" is 0), or a ValueError naming the scene and the bodies it has."""
    b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
    if b < 0:
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) or f"#{i}" for i in range(m.nbody)]
        where = f"scene {scene!r}: " if scene else ""
        raise ValueError(
            f"{where}pair body {name!r} is not in the MJCF (its bodies: {', '.join(names)}); "
            "set `pair` to two body names, 'world' for geoms of the worldbody"
        )
    return int(b)


def pair_joints(m: mujoco.MjModel, scene: str, pair: tuple[str, str]) -> PairJoints:
    """Resolve the pair's joints in `m`; a ValueError says what to change where the rule cannot read a body.

    A moving pair body must hang from the world through bodies without joints (its
    own joints then give its pose), and at least one of the two must move.
    """
    if len(pair) != 2 or pair[0] == pair[1]:
        raise ValueError(f"scene {scene!r}: pair {pair!r} must name two different bodies")
    ids = sorted({body_id(m, scene, name) for name in pair})
    qadr: list[int] = []
    vadr: list[int] = []
    bodies: list[int] = []
    body_q: list[tuple[int, int]] = []
    body_v: list[tuple[int, int]] = []
    free: list[tuple[int, int]] = []
    ball: list[tuple[int, int]] = []
    scalar: list[tuple[int, int]] = []
    hinge: list[bool] = []
    along: list[float] = []
    for b in ids:
        if m.body_jntnum[b] == 0:
            continue
        p = int(m.body_parentid[b])
        while p != 0:
            if m.body_jntnum[p] > 0:
                name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)
                parent = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, p)
                raise ValueError(
                    f"scene {scene!r}: pair body {name!r} hangs from body {parent!r}, which has joints; the pair "
                    "state holds the pair bodies' own joints only: make the pair body a child of the world "
                    "(give it the joints its parent had) or name the parent in `pair`"
                )
            p = int(m.body_parentid[p])
        q0, v0 = len(qadr), len(vadr)
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
            kind, qa, va = int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
            nq, nv = {_FREE: (7, 6), _BALL: (4, 3)}.get(kind, (1, 1))
            (free if kind == _FREE else ball if kind == _BALL else scalar).append((len(qadr), len(vadr)))
            if kind in (_SLIDE, _HINGE):
                hinge.append(kind == _HINGE)
                along.append(0.0 if kind == _HINGE else float(np.asarray(m.opt.gravity) @ _world_axis(m, b, j)))
            qadr += range(qa, qa + nq)
            vadr += range(va, va + nv)
        bodies.append(b)
        body_q.append((q0, len(qadr)))
        body_v.append((v0, len(vadr)))
    if not bodies:
        raise ValueError(f"scene {scene!r}: neither pair body {pair!r} has a joint; one of them must move")
    return PairJoints(
        tuple(qadr), tuple(vadr), tuple(bodies), tuple(body_q), tuple(body_v),
        tuple(free), tuple(ball), tuple(scalar), tuple(hinge),
        (float(m.opt.gravity[0]), float(m.opt.gravity[1]), float(m.opt.gravity[2])), tuple(along),
    )  # fmt: skip


def _world_axis(m: mujoco.MjModel, body: int, joint: int) -> np.ndarray:
    """A joint's axis in the world at the model's reference pose (its body's frames composed up to the world)."""
    rot = np.eye(3)
    b = body
    while b != 0:
        r = np.zeros(9)
        mujoco.mju_quat2Mat(r, m.body_quat[b])
        rot = r.reshape(3, 3) @ rot
        b = int(m.body_parentid[b])
    return rot @ m.jnt_axis[joint]


# --- pair states -------------------------------------------------------------------------------


def pair_state(joints: PairJoints, qpos, qvel):
    """The pair's (qpos ‖ qvel) entries (..., nq + nv): NumPy or JAX, batched or not."""
    xp = jnp if isinstance(qpos, jax.Array) or isinstance(qvel, jax.Array) else np
    qa, va = np.asarray(joints.qadr, np.int64), np.asarray(joints.vadr, np.int64)
    return xp.concatenate([qpos[..., qa], qvel[..., va]], axis=-1)


def with_pair_state(joints: PairJoints, qpos: Float[Array, " nq"], qvel: Float[Array, " nv"], state):
    """(qpos, qvel) of one world with the pair's entries set from `state` (JAX)."""
    qa, va = np.asarray(joints.qadr, np.int64), np.asarray(joints.vadr, np.int64)
    qpos, qvel, state = jnp.asarray(qpos), jnp.asarray(qvel), jnp.asarray(state)
    k = joints.nq
    return qpos.at[qa].set(state[:k].astype(qpos.dtype)), qvel.at[va].set(state[k:].astype(qvel.dtype))


def _quat_slots(joints: PairJoints) -> list[int]:
    return [q + 3 for q, _ in joints.free] + [q for q, _ in joints.ball]


def interpolate(joints: PairJoints, a: Float[Array, " d"], b: Float[Array, " d"], s) -> Float[Array, " d"]:
    """The pair state a fraction `s` ∈ [0, 1] of the way from `a` to `b` (nearby states; quaternions renormalised)."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    for o in _quat_slots(joints):
        b = b.at[o : o + 4].multiply(jnp.where(jnp.dot(a[o : o + 4], b[o : o + 4]) < 0, -1.0, 1.0))
    out = (1.0 - s) * a + s * b
    for o in _quat_slots(joints):
        out = out.at[o : o + 4].set(out[o : o + 4] / jnp.linalg.norm(out[o : o + 4]))
    return out


def coast(joints: PairJoints, state: Float[Array, " d"], tau) -> Float[Array, " d"]:
    """The pair state `tau` (< one step) later in free motion under gravity: `advance`, with gravity's
    ½ g τ² and g τ on free joints and along slides."""
    state = jnp.asarray(state)
    k = joints.nq
    g = jnp.asarray(joints.gravity, state.dtype)
    moved = jnp.asarray(advance(joints, state, tau))
    for (qo, vo), a in zip(joints.scalar, joints.slide_gravity, strict=True):
        moved = moved.at[qo].add(0.5 * a * tau**2).at[k + vo].add(a * tau)
    for qo, vo in joints.free:
        moved = moved.at[qo : qo + 3].add(0.5 * g * tau**2).at[k + vo : k + vo + 3].add(g * tau)
    return moved


def advance(joints: PairJoints, state: Float[Array, " d"], tau) -> Float[Array, " d"]:
    """The pair state moved on by `tau` seconds at its velocities (a part of one step: positions only).

    Slides and hinges by q̇ τ, free positions by v τ, quaternions by the body-frame
    angular velocity (q ⊗ exp(ω τ)).  Gravity's ½ g τ² over τ < one step is below 5 µm at 1 ms.
    """
    state = jnp.asarray(state)
    k = joints.nq
    q, v = state[:k], state[k:]
    for qo, vo in joints.scalar:
        q = q.at[qo].add(v[vo] * tau)
    for qo, vo in joints.free:
        q = q.at[qo : qo + 3].add(v[vo : vo + 3] * tau)
        quat = quat_mul(q[qo + 3 : qo + 7], quat_exp(v[vo + 3 : vo + 6] * tau))
        q = q.at[qo + 3 : qo + 7].set(quat / jnp.linalg.norm(quat))
    for qo, vo in joints.ball:
        quat = quat_mul(q[qo : qo + 4], quat_exp(v[vo : vo + 3] * tau))
        q = q.at[qo : qo + 4].set(quat / jnp.linalg.norm(quat))
    return jnp.concatenate([q, v])


# --- the contact frame: default features and targets ----------------------------------------------


def body_motions(
    model: mujoco.MjModel, joints: PairJoints, qpos: Float[Array, " nq"], qvel: Float[Array, " nv"]
) -> list[tuple[Float[Array, "3"], Float[Array, "3 3"], Float[Array, "3"], Float[Array, "3"]]]:
    """(origin, rotation world-from-body, origin velocity, angular velocity) of each moving pair body, world frame.

    MJX's kinematics and body Jacobians (`mjx.jac`) on `model` (any model of the
    scene's kinematic tree), so slide, hinge, ball and free joints are read alike.
    """
    m = mjx.put_model(model)
    d = mjx.make_data(m).replace(qpos=jnp.asarray(qpos, m.qpos0.dtype), qvel=jnp.asarray(qvel, m.qpos0.dtype))
    d = mjx.com_pos(m, mjx.kinematics(m, d))
    out = []
    for b in joints.bodies:
        jacp, jacr = mjx.jac(m, d, d.xpos[b], b)
        out.append((d.xpos[b], d.xmat[b], jacp.T @ d.qvel, jacr.T @ d.qvel))
    return out


def contact_axes(normal: Float[Array, "3"], v_rel: Float[Array, "3"], floor: float) -> Float[Array, "3 3"]:
    """World-from-contact-frame rotation: z the normal, x along the tangential relative velocity.

    Below `floor` m/s of tangential speed x turns smoothly to the world's x (or y, for a
    normal near x) projected onto the contact plane; the impact is the same seen from any
    x, so the choice only has to be consistent between the features and the targets.
    """
    n = normal
    u = v_rel - jnp.dot(v_rel, n) * n
    ex = jnp.array([1.0, 0.0, 0.0], n.dtype) - n[0] * n
    ey = jnp.array([0.0, 1.0, 0.0], n.dtype) - n[1] * n
    e = jnp.where(jnp.linalg.norm(ex) > 0.5, ex, ey)
    t1 = u + floor * e / jnp.linalg.norm(e)
    t1 = t1 / jnp.maximum(jnp.linalg.norm(t1), 1e-12)
    return jnp.stack([t1, jnp.cross(n, t1), n], axis=1)


def contact_features(joints: PairJoints, state, axes, point, v_rel, gravity, motions) -> Float[Array, " f"]:
    """The impact seen in its contact frame `axes` (world from frame), (15 · bodies + 6 + slides and hinges,).

    Per moving body: its orientation (the first two columns of Aᵀ R), its origin from
    the contact point, its origin's velocity and its angular velocity; then the relative
    velocity at the contact point and gravity's direction.  Invariant to where the
    impact happens and to its heading, so a table's impacts everywhere look alike.
    Slide and hinge joints, whose targets are in joint coordinates (`frame_targets`),
    add their velocities as they are, so that the network sees the direction they move in.
    """
    parts = []
    for x, rot, v, w in motions:
        parts += [(axes.T @ rot)[:, :2].ravel(), axes.T @ (x - point), axes.T @ v, axes.T @ w]
    g = gravity / jnp.maximum(jnp.linalg.norm(gravity), 1e-12)
    joint_v = jnp.stack([state[joints.nq + vo] for _, vo in joints.scalar]) if joints.scalar else jnp.zeros(0)
    return jnp.concatenate([*parts, axes.T @ v_rel, axes.T @ g, joint_v.astype(axes.dtype)])


def _free_parts(state, k: int, qo: int, vo: int):
    q, v = state[:k], state[k:]
    quat = q[qo + 3 : qo + 7] / jnp.linalg.norm(q[qo + 3 : qo + 7])
    return q[qo : qo + 3], quat, v[vo : vo + 3], quat_to_mat(quat) @ v[vo + 3 : vo + 6]


def frame_targets(joints: PairJoints, axes, pre: Float[Array, " d"], post: Float[Array, " d"]) -> Float[Array, " k"]:
    """What changes over an impact, per joint: a free joint in the contact frame, others in their coordinates.

    Free joint (12): Δv, Δω (world angular velocity), Δx of the body origin and the
    rotation vector of R_post R_preᵀ, each as Aᵀ(·).  Ball joint (6): the change of its
    local angular velocity and the local rotation vector of q_pre⁻¹ q_post.  Slide or
    hinge (2): the change of its position and velocity.
    """
    k = joints.nq
    out = []
    for qo, vo in joints.free:
        x0, q0, v0, w0 = _free_parts(pre, k, qo, vo)
        x1, q1, v1, w1 = _free_parts(post, k, qo, vo)
        rot = quat_log(quat_mul(q1, quat_conj(q0)))
        out += [axes.T @ (v1 - v0), axes.T @ (w1 - w0), axes.T @ (x1 - x0), axes.T @ rot]
    for qo, vo in joints.ball:
        q0 = pre[qo : qo + 4] / jnp.linalg.norm(pre[qo : qo + 4])
        q1 = post[qo : qo + 4] / jnp.linalg.norm(post[qo : qo + 4])
        out += [post[k + vo : k + vo + 3] - pre[k + vo : k + vo + 3], quat_log(quat_mul(quat_conj(q0), q1))]
    for qo, vo in joints.scalar:
        out.append(jnp.stack([post[qo] - pre[qo], post[k + vo] - pre[k + vo]]))
    return jnp.concatenate(out)


def post_from_frame_targets(joints: PairJoints, axes, pre: Float[Array, " d"], y: Float[Array, " k"]):
    """The post-window pair state from `pre` and `frame_targets`' values: their inverse."""
    k = joints.nq
    q, v = jnp.asarray(pre[:k]), jnp.asarray(pre[k:])
    i = 0
    for qo, vo in joints.free:
        x0, q0, v0, w0 = _free_parts(pre, k, qo, vo)
        dv, dw, dx, rot = (axes @ y[i + 3 * j : i + 3 * j + 3] for j in range(4))
        i += 12
        q1 = quat_mul(quat_exp(rot), q0)
        q1 = q1 / jnp.linalg.norm(q1)
        q = q.at[qo : qo + 3].set(x0 + dx).at[qo + 3 : qo + 7].set(q1)
        v = v.at[vo : vo + 3].set(v0 + dv).at[vo + 3 : vo + 6].set(quat_to_mat(q1).T @ (w0 + dw))
    for qo, vo in joints.ball:
        q0 = q[qo : qo + 4] / jnp.linalg.norm(q[qo : qo + 4])
        q1 = quat_mul(q0, quat_exp(y[i + 3 : i + 6]))
        q = q.at[qo : qo + 4].set(q1 / jnp.linalg.norm(q1))
        v = v.at[vo : vo + 3].add(y[i : i + 3])
        i += 6
    for qo, vo in joints.scalar:
        q = q.at[qo].add(y[i])
        v = v.at[vo].add(y[i + 1])
        i += 2
    return jnp.concatenate([q, v])


def speed_scales(model: mujoco.MjModel, joints: PairJoints) -> np.ndarray:
    """Per pair qvel entry, what turns it into a speed: 1 for a translation, the body's radius of gyration (m)
    for a rotation, so that a relative error weighs spin as it weighs in the body's kinetic energy."""
    scale = np.ones(len(joints.vadr))
    dof_body = model.dof_bodyid
    for i, va in enumerate(joints.vadr):
        j = model.dof_jntid[va]
        kind = int(model.jnt_type[j])
        rotational = kind in (_HINGE, _BALL) or (kind == _FREE and va - model.jnt_dofadr[j] >= 3)
        if rotational:
            b = dof_body[va]
            scale[i] = float(np.sqrt(np.sum(model.body_inertia[b]) / (2.0 * max(model.body_mass[b], 1e-12))))
    return scale


def pair_energy(model: mujoco.MjModel, joints: PairJoints, qpos, qvel) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """(kinetic, gravitational potential) energy of the pair's moving bodies at one world's state, J.

    Each body's ½ m |v_com|² + ½ ωᵀ I ω and −m g · com (MJX's kinematics, body Jacobians at
    the centre of mass); the potential's zero is the world origin.
    """
    m = mjx.put_model(model)
    d = mjx.make_data(m).replace(qpos=jnp.asarray(qpos, m.qpos0.dtype), qvel=jnp.asarray(qvel, m.qpos0.dtype))
    d = mjx.com_pos(m, mjx.kinematics(m, d))
    g = jnp.asarray(model.opt.gravity, d.qpos.dtype)
    kinetic = potential = jnp.zeros((), d.qpos.dtype)
    for b in joints.bodies:
        jacp, jacr = mjx.jac(m, d, d.xipos[b], b)
        v, w = jacp.T @ d.qvel, jacr.T @ d.qvel
        inertia = d.ximat[b] @ jnp.diag(jnp.asarray(model.body_inertia[b], d.qpos.dtype)) @ d.ximat[b].T
        mass = float(model.body_mass[b])
        kinetic = kinetic + 0.5 * mass * v @ v + 0.5 * w @ inertia @ w
        potential = potential - mass * g @ d.xipos[b]
    return kinetic, potential


def separation_gradient(model: mujoco.MjModel, joints: PairJoints, first_body: int, qpos, point, normal):
    """d(distance)/d(pair dofs) at `qpos`, (nv of the pair,): the contact point's motion along the normal.

    Each moving body's translational Jacobian at `point` projected on `normal` (which points
    towards `first_body`), with the sign of the side the body is on.
    """
    m = mjx.put_model(model)
    d = mjx.make_data(m).replace(qpos=jnp.asarray(qpos, m.qpos0.dtype))
    d = mjx.com_pos(m, mjx.kinematics(m, d))
    g = jnp.zeros(m.nv, d.qpos.dtype)
    for b in joints.bodies:
        jacp, _ = mjx.jac(m, d, jnp.asarray(point, d.qpos.dtype), b)
        g = g + (1.0 if b == first_body else -1.0) * (jacp @ jnp.asarray(normal, d.qpos.dtype))
    return g[np.asarray(joints.vadr, np.int64)]

"""A free body's symmetries: more training impacts from the ones simulated, each seen as its images.

A box landing on a table lands the same way turned 180° about any of its axes,
and the same way seen in a mirror: the same impact, with other coordinates.  A
scene that declares its body's symmetries (`PairScene.body_symmetries`,
`PairScene.mirror`) has each training impact used as all its images
(`clashx.learn.pretrain_pair`), so the surrogate learns the law once for all of
them instead of once per orientation.

- A body rotation `s` (a unit quaternion in the body's frame) that maps the
  body's shape and mass onto themselves: the orientation becomes q ⊗ s and the
  body-frame spin Rₛᵀ ω; position and velocity stay.
- A mirror: the world reflected through its xz plane (y → −y; the partner and
  gravity must look the same in it, as a flat floor does) together with a body
  reflection P (a diagonal of ±1 with an odd number of −1) that maps the body
  onto itself: the orientation becomes M R P, the body-frame spin −P ω.

Exact for the physics, so MuJoCo's own impacts of the images are the images of
its impacts (`tests/test_pair_symmetry.py` checks this in MuJoCo C).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mujoco
import numpy as np

from ..core import quat_mul_np, quat_to_mat_np

if TYPE_CHECKING:
    from ._pair import PairScene

_M = np.diag([1.0, -1.0, 1.0])  # the world's mirror: y -> -y


def _quat_mat(q: np.ndarray) -> np.ndarray:
    return quat_to_mat_np(q / np.linalg.norm(q, axis=-1, keepdims=True))


def _mat_quat(r: np.ndarray) -> np.ndarray:
    out = np.empty(r.shape[:-2] + (4,))
    for i, m in enumerate(r.reshape(-1, 9)):
        mujoco.mju_mat2Quat(out.reshape(-1, 4)[i], m)
    return out


def check_symmetries(scene: PairScene) -> None:
    """Raise a ValueError naming the attribute when `scene`'s declared symmetries cannot be used."""
    sym, mirror = tuple(scene.body_symmetries), scene.mirror
    if not sym and mirror is None:
        return
    j = scene.joints
    if len(j.free) != 1 or j.ball or j.scalar:
        raise ValueError(
            f"scene {scene.name!r}: body_symmetries and mirror apply to a pair with one free body and no other "
            "joints; remove them from the scene"
        )
    for s in sym:
        q = np.asarray(s, float)
        if q.shape != (4,) or not np.isclose(np.linalg.norm(q), 1.0, atol=1e-6):
            raise ValueError(
                f"scene {scene.name!r}: body_symmetries holds {s!r}; each must be a unit quaternion (w, x, y, z)"
            )
    if mirror is not None:
        p = np.asarray(mirror, float)
        if p.shape != (3,) or not set(p.tolist()) <= {-1.0, 1.0} or np.prod(p) != -1.0:
            raise ValueError(
                f"scene {scene.name!r}: mirror = {mirror!r}; it must be the body's reflection as three signs with "
                "an odd number of -1, e.g. (1, -1, 1) for a box mirrored through its xz plane"
            )


def _rotate(state: np.ndarray, qo: int, vo: int, s: np.ndarray) -> np.ndarray:
    out = state.copy()
    out[:, qo + 3 : qo + 7] = quat_mul_np(state[:, qo + 3 : qo + 7], s)
    out[:, vo + 3 : vo + 6] = state[:, vo + 3 : vo + 6] @ _quat_mat(s)  # Rₛᵀ ω, row by row
    return out


def _reflect(state: np.ndarray, qo: int, vo: int, p: np.ndarray) -> np.ndarray:
    out = state.copy()
    out[:, qo : qo + 3] = state[:, qo : qo + 3] @ _M
    out[:, qo + 3 : qo + 7] = _mat_quat(_M @ _quat_mat(state[:, qo + 3 : qo + 7]) * p)  # M R P
    out[:, vo : vo + 3] = state[:, vo : vo + 3] @ _M
    out[:, vo + 3 : vo + 6] = -state[:, vo + 3 : vo + 6] * p
    return out


def symmetric_images(scene: PairScene, pre: np.ndarray, post: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every image of a batch of impacts under the scene's declared symmetries.

    Args:
        scene: a `PairScene` with `body_symmetries` and/or `mirror` set (none set: the impacts as given).
        pre, post: (n, d) pair states before and after the impacts.

    Returns:
        (pre, post) of shape (k·n, d): the impacts first, then each image in turn, k = (1 + rotations) · (2 if
        mirrored else 1).  Each post's quaternion keeps its pre's hemisphere, so orientation changes stay small.
    """
    check_symmetries(scene)
    pre, post = np.asarray(pre, np.float64), np.asarray(post, np.float64)
    if not scene.body_symmetries and scene.mirror is None:
        return pre, post
    (qo, vo_rel), nq = scene.joints.free[0], len(scene.joints.qadr)
    vo = nq + vo_rel
    pres, posts = [pre], [post]
    for s in scene.body_symmetries:
        q = np.asarray(s, float)
        pres.append(_rotate(pre, qo, vo, q))
        posts.append(_rotate(post, qo, vo, q))
    if scene.mirror is not None:
        p = np.asarray(scene.mirror, float)
        for a, b in zip(list(pres), list(posts), strict=True):
            ra, rb = _reflect(a, qo, vo, p), _reflect(b, qo, vo, p)
            same = np.sign(np.sum(a[:, qo + 3 : qo + 7] * b[:, qo + 3 : qo + 7], 1))
            now = np.sign(np.sum(ra[:, qo + 3 : qo + 7] * rb[:, qo + 3 : qo + 7], 1))
            rb[:, qo + 3 : qo + 7] *= np.where(same * now < 0, -1.0, 1.0)[:, None]
            pres.append(ra)
            posts.append(rb)
    return np.concatenate(pres), np.concatenate(posts)

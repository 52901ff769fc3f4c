"""The cube-table impact surrogate: (pre-impact state, contact parameters) → state after the impact window.

The cube toss's counterpart of `clashx.surrogate._strike_surrogate` (CLASH's distilled model,
He et al. 2026).  One impact is the first-impact event of
`clashx.scenes._toss`: `pre_state` at first contact (a corner at z = 0) and
`post_state` `WINDOW` = 4 frames (27 ms) later.

The impact frame
----------------
Gravity and the table are invariant under rotations about z and under
translations along the table, so the network sees the impact in the *aligned
frame*: world axes turned about z by the heading ψ of the pre-impact
horizontal velocity (x along it, z up).  The cube's 24 rotational symmetries
map it onto itself, so its body axes are relabelled (`CUBE_GROUP`) to the
labelling whose aligned orientation is nearest the identity
(max trace(R_aligned · g)): equal impacts give equal inputs however the
tracker labelled the body.  Inputs, (14 + p,):

    (R_aligned · g (9), ω aligned / 10 rad/s (3), (|v_h| − 1) / 0.5 (1), v_z / 2 (1),
     2 · unit(params) − 1 (p))

(|v_h| in m/s; the aligned velocity's y component is 0 by construction).
Outputs, all in the aligned frame and so free of the body's labelling, (12,):

    (Δp (m), v after (m/s), ω after (rad/s, world axes), rotation vector of R_post R_preᵀ (rad))

    output = out_mean + out_std ⊙ MLP(inputs)

`out_mean`/`out_std` normalise the targets and live in the model with the
parameter space; saved as equinox leaves beside a JSON of metadata
(`cube_surrogate.eqx`, `cube_surrogate.json`).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core import (
    Array,
    Float,
    ParamSpace,
    PRNGKeyArray,
    check_space,
    load_model_leaves,
    quat_conj,
    quat_exp,
    quat_log,
    quat_mul,
    quat_to_mat,
    read_model_meta,
    save_model,
)
from ..events import data_path, versions
from ..scenes import WINDOW, cube_space
from ._base import TargetSurrogate, init_network

MODEL_FILE = "cube_surrogate.eqx"
META_FILE = "cube_surrogate.json"
FORMAT = "clashx.cube_surrogate/1"
N_STATE_FEATURES = 14  # the parameters add space.size more
N_OUT = 12
_META_KEYS = ("format", "window_s", "param_space", "width", "depth")
_RETRAIN = "retrain it (bench/cube_pretrain.py)"


def _cube_group() -> np.ndarray:
    """The 24 proper rotations that map the cube onto itself: signed permutation matrices of det +1, (24, 3, 3)."""
    mats = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((-1.0, 1.0), repeat=3):
            m = np.zeros((3, 3))
            m[np.arange(3), perm] = signs
            if np.linalg.det(m) > 0:
                mats.append(m)
    return np.asarray(mats)


CUBE_GROUP = _cube_group()


def _rot_z(psi: Float[Array, ""]) -> Float[Array, "3 3"]:
    c, s = jnp.cos(psi), jnp.sin(psi)
    z, o = jnp.zeros_like(c), jnp.ones_like(c)
    return jnp.stack([jnp.stack([c, -s, z]), jnp.stack([s, c, z]), jnp.stack([z, z, o])])


def heading(state: Float[Array, "13"]) -> Float[Array, ""]:
    """Heading ψ (rad) of the horizontal velocity of `state`, the aligned frame's x axis."""
    return jnp.arctan2(state[11], state[10] + 1e-12)


def impact_features(pre: Float[Array, "13"]) -> Float[Array, "14"]:
    """The state part of the network's input for one pre-impact state (module docstring), (14,)."""
    rz_t = _rot_z(heading(pre)).T  # aligned from world
    r_a = rz_t @ quat_to_mat(pre[0:4] / jnp.linalg.norm(pre[0:4]))  # aligned from body
    group = jnp.asarray(CUBE_GROUP, pre.dtype)
    scores = jnp.einsum("ij,gji->g", r_a, group)  # trace(R_a g) for every relabelling g
    r_c = r_a @ group[jnp.argmax(scores)]
    w_a = r_a @ pre[7:10]
    v_a = rz_t @ pre[10:13]
    vh = jnp.sqrt(v_a[0] ** 2 + v_a[1] ** 2)
    return jnp.concatenate([r_c.ravel(), w_a / 10.0, jnp.stack([(vh - 1.0) / 0.5, v_a[2] / 2.0])])


def impact_targets(pre: Float[Array, "13"], post: Float[Array, "13"]) -> Float[Array, "12"]:
    """What the network predicts for one impact, in the aligned frame (module docstring), (12,)."""
    rz_t = _rot_z(heading(pre)).T
    q_pre = pre[0:4] / jnp.linalg.norm(pre[0:4])
    q_post = post[0:4] / jnp.linalg.norm(post[0:4])
    w_world = quat_to_mat(q_post) @ post[7:10]
    rot = quat_log(quat_mul(q_post, quat_conj(q_pre)))
    return jnp.concatenate([rz_t @ (post[4:7] - pre[4:7]), rz_t @ post[10:13], rz_t @ w_world, rz_t @ rot])


def post_from_targets(pre: Float[Array, "13"], y: Float[Array, "12"]) -> Float[Array, "13"]:
    """The post-window state from `pre` and aligned-frame targets; the inverse of `impact_targets`."""
    rz = _rot_z(heading(pre))
    q_pre = pre[0:4] / jnp.linalg.norm(pre[0:4])
    q_post = quat_mul(quat_exp(rz @ y[9:12]), q_pre)
    q_post = q_post / jnp.linalg.norm(q_post)
    w_body = quat_to_mat(q_post).T @ (rz @ y[6:9])
    return jnp.concatenate([q_post, pre[4:7] + rz @ y[0:3], w_body, rz @ y[3:6]])


class CubeSurrogate(TargetSurrogate):
    """State after the impact window of one cube-table impact under given contact parameters.

    Call as `model(pre_state, params)`: pre_state (13,) at first contact in
    the dataset layout (`clashx.scenes._toss`), params in `model.space.names` order,
    physical units.  Returns the state (13,) `WINDOW` later.  Batch with `jax.vmap`.
    """

    def features(self, pre: Float[Array, "13"], params: Float[Array, "p"]) -> Float[Array, "f"]:
        """The network's input (14 + p,)."""
        unit = 2.0 * self.space.to_unit(params) - 1.0
        return jnp.concatenate([impact_features(pre), unit.astype(pre.dtype)])

    def post_from_targets(self, pre: Float[Array, "13"], y: Float[Array, "12"]) -> Float[Array, "13"]:
        """The state `WINDOW` after first contact from aligned-frame targets (`post_from_targets` of the module)."""
        return post_from_targets(pre, y)


def make_cube_surrogate(
    *,
    key: PRNGKeyArray,
    space: ParamSpace | None = None,
    width: int = 160,
    depth: int = 3,
    out_mean=None,
    out_std=None,
) -> CubeSurrogate:
    """A freshly initialised cube surrogate (weights from `key`).

    Args:
        key: PRNG key of the initial weights.
        space: the contact parameters it is conditioned on (default `cube_space()`).
        width, depth: hidden width and number of hidden layers of the MLP.
        out_mean, out_std: target normalisers (12,); default 0 and 1.
    """
    space = space or cube_space()
    net = init_network(N_STATE_FEATURES + space.size, N_OUT, width, depth, key=key, out_mean=out_mean, out_std=out_std)
    return CubeSurrogate(space=space, **net)


def describe_cube_surrogate(model: CubeSurrogate) -> dict[str, Any]:
    """The metadata that must match for a checkpoint to be used with a parameter space."""
    return {
        "scene": "cube-toss",
        "param_space": model.space.describe(),
        "width": model.width,
        "depth": model.depth,
        "window_s": WINDOW,
        "format": FORMAT,
    }


def save_cube_surrogate(run_dir: str | os.PathLike, model: CubeSurrogate, extra: dict | None = None) -> None:
    """Write `model` to `run_dir` (weights and metadata, each file atomically)."""

    meta = describe_cube_surrogate(model) | {"versions": versions()} | (extra or {})
    save_model(run_dir, model, meta, MODEL_FILE, META_FILE)


def load_cube_surrogate(run_dir: str | os.PathLike, *, space: ParamSpace | None = None) -> CubeSurrogate:
    """Load a cube surrogate saved by `save_cube_surrogate` (e.g. the shipped one, `shipped_cube_surrogate`).

    Raises:
        FileNotFoundError: no cube surrogate in `run_dir`.
        ValueError: the checkpoint is of another format, window or parameter space, or a
            file of it is corrupt or does not match the other (names the file and the fix).
    """
    run_dir = os.fspath(run_dir)
    meta, meta_path = read_model_meta(
        run_dir, META_FILE, "pretrain a cube surrogate (bench/cube_pretrain.py)", keys=_META_KEYS, retrain=_RETRAIN
    )
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT!r}; retrain the surrogate")
    if abs(meta["window_s"] - WINDOW) > 1e-9:
        raise ValueError(f"{meta_path}: trained for a {meta['window_s']} s window, clashx uses {WINDOW} s")
    check_space(run_dir, meta, space)

    def skeleton() -> CubeSurrogate:
        saved = ParamSpace.from_description(meta["param_space"])
        return make_cube_surrogate(
            key=jax.random.PRNGKey(0), space=saved, width=int(meta["width"]), depth=int(meta["depth"])
        )

    return load_model_leaves(run_dir, MODEL_FILE, META_FILE, skeleton, _RETRAIN)


def shipped_cube_surrogate() -> CubeSurrogate:
    """The cube surrogate shipped in `clashx/data/cube_surrogate/` (how it was made: its README.md)."""

    return load_cube_surrogate(data_path("cube_surrogate/" + META_FILE).parent, space=cube_space())

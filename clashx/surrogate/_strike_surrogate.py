"""The parameter-conditioned collision surrogate: (strike, parameters) → the block's state at release.

CLASH's distilled model (He et al. 2026).  An Equinox MLP maps
features of one strike and the contact parameters to the block's velocity per
unit strike speed, so the network learns the shape of the outcome and the
physics' near-proportionality to v_pre comes for free.  The strike enters
through its geometry, what an impulse acts on: the impact point p, the outward
normal n, the strike direction d (all in the block frame, SCENE.md) and the
lever arm (p − c) × d about the footprint's centroid c.  An impulse J along d
changes the velocity by J d / m and the yaw rate by J (p − c) × d / I, so
these features make the outcome nearly linear in the inputs, and the kinks of
p(θ) at a polygon's corners come from geometry, not from the network:

    features = (p / r, n, d, (p − c) × d / r, θ1 / θ1_max, (v_pre − v̄) / v_s, 2·unit(params) − 1)
    (velocity, displacement) = v_pre · (mean + std ⊙ MLP(features))

The six outputs are the block's velocity at release (vx, vy, ωz, block frame:
the collision event) and its displacement over the contact window (dx, dy in
the block's frame at launch, dyaw): where the slide that a track records
starts from.
`mean`/`std` normalise the targets and live in the model, with the shape and
the parameter space, so a saved surrogate carries everything it needs.
Saved as equinox leaves (`surrogate.eqx`) beside a JSON of metadata
(`surrogate.json`); loading it for another shape or parameter space raises.
"""

from __future__ import annotations

import math
import os
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import Array, Float, ParamSpace, PRNGKeyArray, check_space, load_model_leaves, read_model_meta, save_model
from ..events import VELOCITY_FLOOR, data_path, speed_residuals, versions
from ..scenes import compliant_space, strike_space
from ..scenes import geometry as geo
from ._base import MLP, AbstractSurrogate, init_network

_N_STRIKE_FEATURES = 9  # the parameters add space.size more
N_OUT = 6  # velocity at release (3) and displacement over the window (3)
FORMAT = "clashx.surrogate/3"  # /2: velocity only, over (μ1, μ2, e1)
MODEL_FILE = "surrogate.eqx"
META_FILE = "surrogate.json"
_META_KEYS = ("format", "scene", "shape", "param_space", "width", "depth")
_RETRAIN = "re-run `clashx pretrain` (or `clashx finetune`) into a fresh --out"

_THETA1_MAX = geo.STRIKE_RANGES["theta1"][1]
_V_MID = 0.5 * sum(geo.STRIKE_RANGES["v_pre"])
_V_HALF = 0.5 * (geo.STRIKE_RANGES["v_pre"][1] - geo.STRIKE_RANGES["v_pre"][0])


class StrikeSurrogate(AbstractSurrogate):
    """Post-impact velocity (vx, vy, ωz; block frame) of one strike under given parameters.

    Call as `model(strike, params)`: strike (θ, θ1, v_pre) in rad, rad, m/s;
    params in the order of `model.space.names`, physical units.  Returns (3,)
    in m/s, m/s, rad/s.  Batch with `jax.vmap` (or `clashx.predict`).
    `model.release(strike, params)` also gives the window's displacement.
    """

    mlp: MLP
    out_mean: Float[Array, "6"]
    out_std: Float[Array, "6"]
    shape: str = eqx.field(static=True)
    space: ParamSpace
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)

    def features(self, strike: Float[Array, "3"], params: Float[Array, "p"]) -> Float[Array, "f"]:
        """The network's input for one strike and parameter set (module docstring): (9 + p,)."""
        theta, theta1, v_pre = strike[0], strike[1], strike[2]
        point, normal = geo.impact_geometry(self.shape, theta)
        d = geo.strike_direction(self.shape, theta, theta1)
        r = geo.characteristic_length(self.shape)
        arm = point - jnp.asarray(geo.footprint_com(self.shape), point.dtype)
        lever = (arm[0] * d[1] - arm[1] * d[0]) / r
        unit = 2.0 * self.space.to_unit(params) - 1.0
        scalars = jnp.stack([lever, theta1 / _THETA1_MAX, (v_pre - _V_MID) / _V_HALF])
        return jnp.concatenate([point / r, normal, d, scalars, unit])

    def release(self, strike: Float[Array, "3"], params: Float[Array, "p"]) -> Float[Array, "6"]:
        """(vx, vy, ωz) at release, block frame (m/s, rad/s), and (dx, dy, dyaw) over the window (m, rad)."""
        y = self.mlp(jnp.asarray(self.features(strike, params)))
        return strike[2] * (self.out_mean + self.out_std * y)

    def __call__(self, strike: Float[Array, "3"], params: Float[Array, "p"]) -> Float[Array, "3"]:
        return self.release(strike, params)[:3]

    def example_residuals(
        self, strike: Float[Array, "3"], velocity: Float[Array, "3"], params: Float[Array, "p"], reference=None
    ) -> Float[Array, "3"]:
        """Relative speed-vector residual of one real strike's velocity (`speed_residuals`, floored)."""
        return speed_residuals(self(strike, params), velocity, geo.characteristic_length(self.shape), VELOCITY_FLOOR)


def make_strike_surrogate(
    shape: str,
    *,
    key: PRNGKeyArray,
    space: ParamSpace | None = None,
    width: int = 256,
    depth: int = 4,
    out_mean=None,
    out_std=None,
) -> StrikeSurrogate:
    """A freshly initialised surrogate for `shape` (weights from `key`).

    Args:
        shape: block shape.
        key: PRNG key of the initial weights.
        space: the contact parameters it is conditioned on (default `strike_space()`).
        width, depth: hidden width and number of hidden layers of the MLP.
        out_mean, out_std: target normalisers per unit v_pre (6,): velocity and displacement; default 0 and 1.
    """
    geo.check_shape(shape)
    space = space or strike_space(len(geo.convex_pieces(shape)))
    net = init_network(
        _N_STRIKE_FEATURES + space.size, N_OUT, width, depth, key=key, out_mean=out_mean, out_std=out_std
    )
    return StrikeSurrogate(shape=shape, space=space, **net)


_MIRRORED_PARAMS = ("com_x",)  # parameters whose sign flips in the mirror image


def mirror(strikes: Float[Array, "n 3"], outcomes: Float[Array, "n k"], params=None, space: ParamSpace | None = None):
    """The mirror images of strikes and outcomes about the block's y axis (every SCENE.md shape is symmetric).

    θ → π − θ, θ1 → −θ1; (vx, vy, ωz) → (−vx, vy, −ωz), and the same for the
    displacement (dx, dy, dyaw) if `outcomes` has six columns; with `params`
    (and their `space`), a centre-of-mass offset com_x → −com_x.

    Returns:
        (strikes, outcomes), or (strikes, outcomes, params) when params are given.
    """
    s = jnp.asarray(strikes) * jnp.array([-1.0, -1.0, 1.0]) + jnp.array([math.pi, 0.0, 0.0])
    outcomes = jnp.asarray(outcomes)
    flip = jnp.tile(jnp.array([-1.0, 1.0, -1.0]), outcomes.shape[-1] // 3)
    if params is None:
        return s, outcomes * flip
    if space is None:
        raise ValueError("mirror: params were given without their space; pass space= too")
    sign = jnp.array([-1.0 if n in _MIRRORED_PARAMS else 1.0 for n in space.names])
    return s, outcomes * flip, jnp.asarray(params) * sign


def describe(model: StrikeSurrogate) -> dict[str, Any]:
    """The metadata that must match for a checkpoint to be used with a scene and parameter space."""
    return {
        "scene": "strike",
        "shape": model.shape,
        "param_space": model.space.describe(),
        "width": model.width,
        "depth": model.depth,
        "format": FORMAT,
    }


def save_strike_surrogate(run_dir: str | os.PathLike, model: StrikeSurrogate, extra: dict | None = None) -> None:
    """Write `model` to `run_dir` (weights and metadata, each file atomically)."""

    save_model(run_dir, model, describe(model) | {"versions": versions()} | (extra or {}), MODEL_FILE, META_FILE)


def load_strike_surrogate(
    run_dir: str | os.PathLike, *, shape: str | None = None, space: ParamSpace | None = None
) -> StrikeSurrogate:
    """Load a surrogate saved by `save_strike_surrogate` (or `clashx pretrain` / `finetune`).

    Args:
        run_dir: the run folder.
        shape, space: if given, the checkpoint must be for this shape and parameter space.

    Raises:
        FileNotFoundError: no surrogate in `run_dir`.
        ValueError: the checkpoint is for another scene, shape or parameter space, or a
            file of it is corrupt or does not match the other (names the file and the fix).
    """
    run_dir = os.fspath(run_dir)
    meta, meta_path = read_model_meta(
        run_dir, META_FILE, "is this a run folder written by `clashx pretrain`?", keys=_META_KEYS, retrain=_RETRAIN
    )
    if meta.get("format") == "clashx.surrogate/2":
        raise ValueError(
            f"{meta_path}: a surrogate of an older clashx (velocity only, over mu1, mu2, e1); this clashx "
            f"conditions on {', '.join(strike_space().names)} and predicts the window's displacement too. "
            "Retrain it: `clashx generate --scene strike --shape S --n 100000 --no-rest --out sim.npz` "
            "then `clashx pretrain --data sim.npz --out RUN`, or use the shipped one (`clashx.shipped_strike_surrogate(shape)`)"
        )
    if meta.get("format") != FORMAT or meta.get("scene") != "strike":
        raise ValueError(
            f"{meta_path}: not a strike surrogate (format {meta.get('format')!r}, scene {meta.get('scene')!r})"
        )
    if shape is not None and meta["shape"] != shape:
        raise ValueError(
            f"{run_dir}: the surrogate is for the {meta['shape']!r} block, not {shape!r}; pretrain one for {shape!r}"
        )
    check_space(run_dir, meta, space)

    def skeleton() -> StrikeSurrogate:
        saved = ParamSpace.from_description(meta["param_space"])
        return make_strike_surrogate(
            meta["shape"], key=jax.random.PRNGKey(0), space=saved, width=int(meta["width"]), depth=int(meta["depth"])
        )

    return load_model_leaves(run_dir, MODEL_FILE, META_FILE, skeleton, _RETRAIN)


def velocity_loss(
    pred: Float[Array, "n 3"], true: Float[Array, "n 3"], length: float, floor: float = VELOCITY_FLOOR
) -> Float[Array, ""]:
    """Mean squared relative error of the speed vectors (the α-accuracy metric's quantity, squared).

    ‖Δu‖² / (‖u‖² + floor²) per event, averaged, with u = (vx, vy, length·ωz);
    `length` is the shape's `characteristic_length` (m); `floor` (m/s) keeps
    events with a near-still block from dominating.
    """
    return jnp.mean(jnp.sum(speed_residuals(pred, true, length, floor) ** 2, -1))


DISPLACEMENT_FLOOR = 4e-4  # m: the window's displacement of a block at velocity_loss's 0.02 m/s floor


def release_loss(
    pred: Float[Array, "n 6"], true: Float[Array, "n 6"], length: float, displacement_weight: float = 1.0
) -> Float[Array, ""]:
    """`velocity_loss` on the velocities plus the same relative error of the window's displacements.

    The displacement (dx, dy, length·dyaw) enters as ‖Δd‖² / (‖d‖² + floor²);
    events whose true displacement is unknown (NaN, e.g. older files) count
    with their velocity only.
    """
    vel = velocity_loss(pred[:, :3], true[:, :3], length)
    known = jnp.all(jnp.isfinite(true[:, 3:]), -1)
    d_true = jnp.where(known[:, None], true[:, 3:], 0.0)
    per = jnp.sum(speed_residuals(pred[:, 3:], d_true, length, DISPLACEMENT_FLOOR) ** 2, -1)
    disp = jnp.sum(jnp.where(known, per, 0.0)) / jnp.maximum(jnp.sum(known), 1)
    return vel + displacement_weight * disp


def window_displacement(
    start_pose: Float[Array, "... 3"], release_pose: Float[Array, "... 3"]
) -> Float[Array, "... 3"]:
    """(dx, dy, dyaw) of the block from `start_pose` to `release_pose` (world poses), in the start pose's frame."""
    start_pose, release_pose = jnp.asarray(start_pose), jnp.asarray(release_pose)
    c, s = jnp.cos(start_pose[..., 2]), jnp.sin(start_pose[..., 2])
    dx, dy = release_pose[..., 0] - start_pose[..., 0], release_pose[..., 1] - start_pose[..., 1]
    dyaw = jnp.remainder(release_pose[..., 2] - start_pose[..., 2] + jnp.pi, 2 * jnp.pi) - jnp.pi
    return jnp.stack([c * dx + s * dy, -s * dx + c * dy, dyaw], -1)


SHIPPED_FAMILIES = {"mujoco": "strike_surrogate", "compliant": "strike_surrogate_compliant"}


def shipped_strike_surrogate(shape: str, family: str = "mujoco") -> StrikeSurrogate:
    """The pretrained surrogate of `shape` shipped with clashx (how each was made: its folder's README.md).

    Args:
        shape: block shape.
        family: the impulse model it was distilled from: "mujoco" (MuJoCo C, `clashx.strike_space()`'s eight
            parameters; `clashx/data/strike_surrogate/`) or "compliant" (`clashx.scenes.STRIKE_FAMILIES`'
            Hunt-Crossley law, `clashx.scenes.compliant_space()`; `clashx/data/strike_surrogate_compliant/`).
    """
    geo.check_shape(shape)
    if family not in SHIPPED_FAMILIES:
        raise ValueError(f"family {family!r}: the shipped surrogates are {', '.join(map(repr, SHIPPED_FAMILIES))}")
    return load_strike_surrogate(data_path(f"{SHIPPED_FAMILIES[family]}/{shape}/{META_FILE}").parent, shape=shape)


def surrogate_family(model: AbstractSurrogate) -> str:
    """The impulse family a strike surrogate was distilled from, read off its parameter space: "compliant" for
    `clashx.scenes.compliant_space()`'s, else "mujoco" (MuJoCo's knobs, the shipped space or one of yours)."""
    return "compliant" if tuple(model.space.names) == tuple(compliant_space().names) else "mujoco"


def load_or_shipped(
    run_dir: str | os.PathLike | None, shape: str | None, family: str | None = "mujoco"
) -> StrikeSurrogate:
    """`load_strike_surrogate(run_dir)` if a run folder is given (it must be of `family`; None: any), else the shipped
    surrogate of `shape` and `family` (None: "mujoco")."""
    if run_dir:
        model = load_strike_surrogate(run_dir, shape=shape)
        if family is not None and surrogate_family(model) != family:
            raise ValueError(
                f"{run_dir}: a surrogate of the {surrogate_family(model)} family (parameters "
                f"{', '.join(model.space.names)}) where the {family} family's is needed (`--family`, or the parameter "
                f'file\'s "family"); pass a run folder of the {family} family, or drop --model for the shipped one'
            )
        return model
    if shape is None:
        raise ValueError("no surrogate given: pass --model RUN (or the shape, to use the shipped one)")
    return shipped_strike_surrogate(shape, family or "mujoco")

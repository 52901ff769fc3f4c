r"""A scene of your own: `PairScene`, any two bodies of an MJCF that collide, through the whole pipeline.

Subclass `PairScene` in one short file and give:

| what | type | meaning |
|---|---|---|
| `name`, `pair` | class attributes | the scene's name; the two bodies (MJCF names, "world" for the worldbody) whose impact is learned |
| `window`, `approach` | class attributes, s | the impact window; how long after launch generation waits for a touch |
| `mjcf()` | str | the full-contact scene (the pair collides through `<pair>`s or contype/conaffinity) |
| `make_space()` | `ParamSpace` | the physics identified, and where it is written in the model |
| `sample_launch(n, key)` | (qpos (n, nq), qvel (n, nv)) | launch states with the pair apart, over the prior |

and, where the defaults do not fit:

| what | default |
|---|---|
| `min_apart`, `min_closing`, `max_impacts` | 5 ms apart, closing at 0.05 m/s, every impact: which touch is an impact (`ImpactGate`) |
| `body_symmetries`, `mirror` | none: a free body's rotations (body-frame unit quaternions) and reflection (three signs) that map it onto itself; pretraining then also learns from each impact's images (`symmetric_images`) |
| `rest_speed` | 1e-3: every \|qvel\| below it (m/s, rad/s) and out of any window: at rest |
| `separation(qpos)` | MuJoCo's own distance between the pair's geoms (MJX's collision functions, in JAX) |
| `features(pre)` | the impact in the contact frame (`contact_features`) |
| `targets(pre, post)` / `post_from_targets(pre, y)` | free bodies: changes of velocity, angular velocity, position and orientation in the contact frame; slide, hinge: the change of the joints' state |

The pair's joints may be slide, hinge, ball or free joints; a partner may be the
world body or a body without joints.  Its contacts with the partner stay in the
engine's model (an impact switches them off for its window only), made explicit
`<pair>`s when the MJCF gives them through contype/conaffinity.

An event starts at launch, runs the full-contact model until the first impact
(`touches`, the hybrid's own test), and records the pair state at the crossing
(`pre_state`, interpolated between the two steps around it) and `window` later
(`post_state`, interpolated likewise).
"""

from __future__ import annotations

import abc
import copy
import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..core import Array, Float, Layout, ParamSpace, PRNGKeyArray, in_blocks, mjx, model_world_bytes, resolve_engine
from ..core import batch as _batch
from . import _pair_contact as pc
from . import _pair_state as ps
from ._pair_symmetry import check_symmetries
from ._scene import APART_CAP, ENERGY_SLACK, AbstractImpactScene, ImpactGate, crossing, touches

SCHEMA = "pair"  # the event files' scene of every PairScene
TANGENT_FLOOR = 1e-3  # m/s: below this tangential speed the contact frame's first axis turns to the world's x


class _Models(eqx.Module):
    """The compiled models of one MJCF and pair (cached per MJCF text)."""

    full: mujoco.MjModel = eqx.field(static=True)  # the pair's contacts as explicit <pair>s
    bare: mujoco.MjModel = eqx.field(static=True)  # without them (a pair that never rests on each other)
    only: mujoco.MjModel = eqx.field(static=True)  # the pair's contacts alone: MuJoCo's distance


@functools.lru_cache(maxsize=16)
def _compile(xml: str, pair: tuple[str, str]) -> _Models:
    spec = mujoco.MjSpec.from_string(xml)
    plain = spec.compile()
    for body in pair:  # named before anything is built from them
        ps.body_id(plain, "", body)
    spec = pc.with_explicit_pairs(spec, pair)
    full = spec.compile()
    only = pc.pair_only(spec, pair)
    bare_spec = spec.copy()
    ids = {0 if b == "world" else mujoco.mj_name2id(full, mujoco.mjtObj.mjOBJ_BODY, b) for b in pair}
    owner = {g.name: int(full.geom_bodyid[i]) for i, g in enumerate(spec.geoms) if g.name}
    for p in list(bare_spec.pairs):
        if {owner.get(p.geomname1), owner.get(p.geomname2)} == ids:
            bare_spec.delete(p)
    bare = bare_spec.compile()
    if bare.npair == 0 and not np.any(bare.geom_contype[:, None] & bare.geom_conaffinity[None, :]):
        # No contact can arise, so the cone changes nothing; MJX 3.17's elliptic solver fails without contacts.
        bare.opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    return _Models(full, bare, only)


class PairScene(AbstractImpactScene):
    """The base class of a user's scene: two bodies of an MJCF whose impact clashx learns (see the module doc).

    Class attributes to set: `name`, `pair`, `window` (s), `approach` (s).  Methods to give:
    `mjcf`, `make_space`, `sample_launch`.  Everything else has a default (module doc).
    """

    name: ClassVar[str]
    pair: ClassVar[tuple[str, str]]
    window: ClassVar[float]  # type: ignore[misc]  # a class attribute here, a property of the strike
    approach: ClassVar[float]
    min_apart: ClassVar[float] = 0.005  # s apart before a touch is an impact
    min_closing: ClassVar[float] = 0.05  # m/s: slower touches stay with the engine
    max_impacts: ClassVar[int | None] = None
    rest_speed: ClassVar[float] = 1e-3  # every |qvel| below this: at rest (rollouts stop early)
    energy_slack: ClassVar[float | None] = ENERGY_SLACK  # the energy guard (ImpactGate.energy_slack)
    check_refire: ClassVar[bool] = True  # bounces as fast as the last impact fall back (ImpactGate)
    engine_contact: ClassVar[bool] = True  # the engine keeps the pair's contacts between impacts
    # A free body's symmetries (`clashx.scenes.symmetric_images`): each training impact is also used as its images.
    body_symmetries: ClassVar[tuple[tuple[float, float, float, float], ...]] = ()  # body-frame unit quaternions
    mirror: ClassVar[tuple[float, float, float] | None] = None  # the body's reflection through the world's xz plane

    @property
    def schema(self) -> str:
        return SCHEMA

    space: ParamSpace
    _dt: float = eqx.field(static=True)  # the MJCF's timestep, s
    _joints: ps.PairJoints = eqx.field(static=True)
    _switch: tuple[int, ...] = eqx.field(static=True)  # the pair's <pair> rows
    _first: int = eqx.field(static=True)  # the first pair body's id (the contact normal points to it)
    _geometry: pc.PairGeometry = eqx.field(static=True)  # how the pair's distance is computed

    def __init__(self):
        for attr in ("name", "pair", "window", "approach"):
            if not hasattr(type(self), attr):
                raise ValueError(
                    f"scene {type(self).__name__}: set the class attribute `{attr}` (README: Your own scene)"
                )
        for attr in ("window", "approach", "min_apart", "rest_speed"):
            value = getattr(type(self), attr)
            if not (isinstance(value, int | float) and np.isfinite(value) and value > 0):
                raise ValueError(f"scene {self.name!r}: `{attr}` = {value!r} must be a positive number of seconds")
        self.space = self.make_space()
        if not isinstance(self.space, ParamSpace):
            raise ValueError(f"scene {self.name!r}: make_space() must return a clashx.ParamSpace")
        try:
            models = _compile(self.mjcf(), tuple(self.pair))
        except ValueError as e:
            raise ValueError(f"scene {self.name!r}: {e}") from None
        m = models.full
        self._dt = float(m.opt.timestep)
        self._joints = ps.pair_joints(m, self.name, tuple(self.pair))
        self._first = ps.body_id(m, self.name, self.pair[0])
        rows, _ = pc.pair_rows(m, tuple(ps.body_id(m, self.name, b) for b in self.pair))
        self._switch = rows if self.engine_contact else ()
        try:
            self._geometry = pc.pair_geometry(m, rows, self._first)
        except ValueError as e:
            raise ValueError(f"scene {self.name!r}: {e}") from None
        self.space.rows(m)  # a target the model lacks fails here, naming it
        self._check_hooks()
        check_symmetries(self)

    def _check_hooks(self) -> None:
        """The user's hooks give one number per call (separation) and a flat vector (features): checked at load."""
        q0 = jnp.asarray(self.c_model().qpos0)
        try:
            sep = jax.eval_shape(self.separation, q0)
            pre = jax.ShapeDtypeStruct((self._joints.size,), jnp.float32)
            feats = jax.eval_shape(self.features, pre)
            tg = jax.eval_shape(self.targets, pre, pre)
        except Exception as e:  # a user's hook that cannot be traced: say which scene and hook
            raise ValueError(
                f"scene {self.name!r}: its hooks fail on a pair state of size {self._joints.size}: {e}"
            ) from e
        if sep.shape != ():
            raise ValueError(f"scene {self.name!r}: separation(qpos) must return one number, got shape {sep.shape}")
        for what, out in (("features(pre)", feats), ("targets(pre, post)", tg)):
            if len(out.shape) != 1:
                raise ValueError(f"scene {self.name!r}: {what} must return a flat vector, got shape {out.shape}")

    @abc.abstractmethod
    def make_space(self) -> ParamSpace:
        """The physics identified in this scene (`ParamSpace`) and where it is written in the MJCF."""

    @abc.abstractmethod
    def sample_launch(self, n: int, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
        """`n` launch states (qpos (n, nq), qvel (n, nv)) over the scene's prior, before the pair touches."""

    # --- derived from the MJCF -------------------------------------------------------------------

    def _models(self) -> _Models:
        return _compile(self.mjcf(), tuple(self.pair))

    def c_model(self, hybrid: bool = False) -> mujoco.MjModel:
        """A fresh compiled MuJoCo model: full contact, or (`hybrid`) the engine's model of the hybrid."""
        m = self._models().bare if hybrid and not self.engine_contact else self._models().full
        return self.space.prepare(copy.copy(m))

    def rows(self, hybrid: bool = False) -> Layout:
        """Where `space` writes in `c_model(hybrid)`."""
        return self.space.rows(self.c_model(hybrid), strict=not (hybrid and not self.engine_contact))

    @property
    def joints(self) -> ps.PairJoints:
        return self._joints

    @property
    def dt(self) -> float:
        return self._dt

    @property
    def gate(self) -> ImpactGate:
        return ImpactGate(
            window=float(self.window),
            min_apart=float(self.min_apart),
            min_closing=float(self.min_closing),
            max_impacts=self.max_impacts,
            rest_speed=float(self.rest_speed),
            energy_slack=self.energy_slack,
            check_refire=self.check_refire,
        )

    def hybrid_c_model(self) -> mujoco.MjModel:
        return self.c_model(hybrid=True)

    def hybrid_rows(self) -> Layout:
        return self.rows(hybrid=True)

    @property
    def switch_rows(self) -> tuple[int, ...]:
        return self._switch

    @property
    def n_window(self) -> int:
        return max(1, round(self.window / self.dt))

    @property
    def n_approach(self) -> int:
        return max(1, round(self.approach / self.dt))

    def pair_index(self) -> tuple[np.ndarray, np.ndarray]:
        """The qpos and qvel addresses of the pair's joints."""
        return np.asarray(self._joints.qadr, np.int64), np.asarray(self._joints.vadr, np.int64)

    # --- the defaults: MuJoCo's distance and the contact frame -------------------------------------

    def contact(self, qpos: Float[Array, " nq"]) -> pc.PairContact:
        """MuJoCo's own distance, contact point and normal (towards `pair[0]`) between the pair at `qpos`."""
        return pc.pair_contact(self._models().only, self._geometry, qpos)

    def separation(self, qpos: Float[Array, " nq"]) -> Float[Array, ""]:
        """The pair's signed gap (m) at `qpos`: MuJoCo's own distance between its geoms (override for a cheaper one)."""
        return self.contact(qpos).dist

    def _full_state(self, pre: Float[Array, " d"]):
        m = self._models().full
        return self.with_pair_state(jnp.asarray(m.qpos0, pre.dtype), jnp.zeros(m.nv, pre.dtype), pre)

    def contact_frame(
        self, pre: Float[Array, " d"]
    ) -> tuple[Float[Array, "3 3"], Float[Array, "3"], Float[Array, "3"]]:
        """The contact frame of a pre-impact pair state: (R world-from-frame, contact point, relative velocity there).

        The frame's z is the contact normal (towards `pair[0]`), its x the direction of the
        tangential relative velocity at the contact point (`pair[0]` against `pair[1]`),
        turning to the world's x projected on the contact plane below TANGENT_FLOOR.
        """
        qpos, qvel = self._full_state(pre)
        c = self.contact(qpos)
        motion = ps.body_motions(self._models().only, self._joints, qpos, qvel)
        v_rel = jnp.zeros(3, pre.dtype)
        for b, (x, _, v, w) in zip(self._joints.bodies, motion, strict=True):
            v_rel = v_rel + (1.0 if b == self._first else -1.0) * (v + jnp.cross(w, c.point - x))
        return ps.contact_axes(c.normal, v_rel, TANGENT_FLOOR), c.point, v_rel

    def features(self, pre: Float[Array, " d"]) -> Float[Array, " f"]:
        """The handler's input from a pre-impact pair state: the impact in its contact frame (`ps.contact_features`)."""
        axes, point, v_rel = self.contact_frame(pre)
        qpos, qvel = self._full_state(pre)
        motion = ps.body_motions(self._models().only, self._joints, qpos, qvel)
        g = jnp.asarray(self._models().full.opt.gravity, pre.dtype)
        return ps.contact_features(self._joints, pre, axes, point, v_rel, g, motion)

    def targets(self, pre: Float[Array, " d"], post: Float[Array, " d"]) -> Float[Array, " k"]:
        """What the handler predicts of an impact: free bodies in the contact frame, other joints their change."""
        axes, _, _ = self.contact_frame(pre)
        return ps.frame_targets(self._joints, axes, pre, post)

    def post_from_targets(self, pre: Float[Array, " d"], y: Float[Array, " k"]) -> Float[Array, " d"]:
        """The post-window pair state from a pre-impact state and predicted `targets` (their inverse)."""
        axes, _, _ = self.contact_frame(pre)
        return ps.post_from_frame_targets(self._joints, axes, pre, y)

    def settle(self, state: Float[Array, " d"]) -> Float[Array, " d"]:
        """A predicted post-window state that overlaps the partner, moved out along the contact normal to touching.

        The smallest change of the pair's coordinates that closes MuJoCo's distance (its gradient
        through the body Jacobians at the contact point); the velocities are kept.  An overlap of a
        few millimetres, a small error of the handler's position, would otherwise be sprung apart
        by the soft contact as a bounce the impact never had.
        """
        qpos, qvel = self._full_state(state)
        c = self.contact(qpos)
        g = ps.separation_gradient(self._models().only, self._joints, self._first, qpos, c.point, c.normal)
        step = jnp.maximum(-c.dist, 0.0) * g / jnp.maximum(g @ g, 1e-12)
        nq = self._joints.nq
        moved = self.advance(jnp.concatenate([state[:nq], step.astype(state.dtype)]), 1.0)
        return jnp.concatenate([moved[:nq], state[nq:]])

    def speed_vector(self, state):
        """The pair's velocities with rotations scaled to speeds (ω · the body's radius of gyration), (..., nv)."""
        scale = ps.speed_scales(self._models().full, self._joints)
        return np.asarray(state)[..., self._joints.nq :] * scale

    # --- AbstractImpactScene ---------------------------------------------------------------------

    def sample_inputs(self, n: int, *, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
        """`n` launch states (qpos ‖ qvel, (n, nq + nv)) and `n` parameter draws from `space`'s prior."""
        k_state, k_params = jax.random.split(key)
        qpos, qvel = self.sample_launch(n, k_state)
        qpos, qvel = np.asarray(qpos, np.float64), np.asarray(qvel, np.float64)
        m = self.c_model()
        if qpos.shape != (n, m.nq) or qvel.shape != (n, m.nv):
            raise ValueError(
                f"scene {self.name!r}: sample_launch({n}, key) gave qpos {qpos.shape} and qvel {qvel.shape}; "
                f"expected ({n}, {m.nq}) and ({n}, {m.nv})"
            )
        bad = ~(np.isfinite(qpos).all(1) & np.isfinite(qvel).all(1))
        if bad.any():
            raise ValueError(f"scene {self.name!r}: sample_launch gave a non-finite state in row {int(np.argmax(bad))}")
        launch = np.concatenate([qpos, qvel], axis=1)
        return launch, np.asarray(self.space.sample(n, key=k_params), np.float64)

    def simulate_events(self, inputs: np.ndarray, params: np.ndarray, *, engine: str, to_rest: bool = True) -> dict:
        """From launch states: full contact to the first impact, then `window` on; `pre_state` / `post_state` of the pair.

        Args:
            inputs: (n, nq + nv) launch states, from `sample_inputs`.
            params: (n, p) values of `space`.
            engine: "c" (MuJoCo C), "mjx" or "auto".
            to_rest: unused (a pair event ends at the window's end).

        Returns:
            Event arrays of the "pair" schema (`clashx.events`); a world with no impact within
            `approach` has `touched` False and NaN states.
        """
        engine = resolve_engine(engine, cpu="c", accelerator="mjx")
        nq = self.c_model().nq
        qpos, qvel = np.asarray(inputs[:, :nq], np.float64), np.asarray(inputs[:, nq:], np.float64)
        traj_q, traj_v = roll(self, params, qpos, qvel, self.n_approach, engine=engine)
        all_q = np.concatenate([qpos[:, None], traj_q], axis=1)  # state j at index j
        all_v = np.concatenate([qvel[:, None], traj_v], axis=1)
        hit, frac = first_impacts(self, jnp.asarray(all_q))
        touched = np.asarray(hit) >= 0
        if not touched.any():
            raise ValueError(
                f"scene {self.name!r}: none of {len(qpos)} launches from sample_launch has an impact within "
                f"approach = {self.approach} s (the pair apart for min_apart = {self.min_apart} s, then touching "
                f"at min_closing = {self.min_closing} m/s or faster): check that sample_launch sends the pair "
                "at each other, and lengthen approach"
            )
        k = np.maximum(np.asarray(hit), 1)  # the first overlapping state; k - 1 is the last one apart
        frac = np.asarray(frac)
        rows = np.arange(len(qpos))
        states = self.pair_state(all_q, all_v)
        pre = np.asarray(jax.vmap(self.interpolate)(states[rows, k - 1], states[rows, k], frac))
        t_pre = (k - 1 + frac) * self.dt
        # on from state k: the window ends n steps and a fraction later
        lag = (1.0 - frac) * self.dt  # from the crossing to state k
        n_on = int(np.ceil((self.window + self.dt) / self.dt)) + 1
        post_q, post_v = roll(self, params, all_q[rows, k], all_v[rows, k], n_on, engine=engine)
        after = self.pair_state(np.concatenate([all_q[rows, k][:, None], post_q], 1),
                                np.concatenate([all_v[rows, k][:, None], post_v], 1))  # fmt: skip
        u = (self.window - lag) / self.dt  # steps after state k
        lo = np.clip(np.floor(u).astype(int), 0, n_on - 1)
        post = np.asarray(jax.vmap(self.interpolate)(after[rows, lo], after[rows, lo + 1], u - lo))
        nan = np.where(touched[:, None], 0.0, np.nan)
        return {
            "scene": SCHEMA,
            "shape": self.name,
            "source": "mujoco-c" if engine == "c" else "mjx",
            "launch": inputs,
            "pre_state": pre + nan,
            "post_state": post + nan,
            "t_impact": np.where(touched, t_pre, np.nan),
            "touched": touched,
            "params": params,
        }

    def describe(self) -> dict[str, Any]:
        """What a generated file and a saved surrogate record about the scene."""
        return {
            "scene": SCHEMA,
            "pair_scene": self.name,
            "scene_class": scene_spec(type(self)),
            "pair": list(self.pair),
            "param_space": self.space.describe(),
            "window_s": self.window,
            "approach_s": self.approach,
            "gate": {"min_apart_s": self.min_apart, "min_closing_m_s": self.min_closing},
            "timestep": self.dt,
            "mjcf_sha256": hashlib.sha256(self.mjcf().encode()).hexdigest(),
        }


@eqx.filter_jit
def first_impacts(scene: AbstractImpactScene, qpos: Float[Array, "n t nq"]):
    """The first impact (`touches`) of each world along recorded states: (index of the first overlapping state
    or -1, the crossing's fraction of the step before it).  Launch states count as apart for `min_apart`."""

    def one(qs):
        seps = jax.vmap(scene.separation)(qs)

        def count(apart, sep):  # consecutive states apart up to and including this one
            apart = jnp.where(sep > 0, jnp.minimum(apart + 1, APART_CAP), 0)
            return apart, apart

        _, apart = jax.lax.scan(count, jnp.asarray(APART_CAP - 1), seps)  # launch: apart for long
        t = jnp.arange(1, qs.shape[0]) * scene.dt
        hit = touches(scene.gate, scene.dt, seps[:-1], seps[1:], apart[:-1], 0, t)
        k = jnp.where(hit.any(), jnp.argmax(hit) + 1, -1)
        j = jnp.maximum(k, 1)
        return k, crossing(seps[j - 1], seps[j])

    return jax.vmap(one)(qpos)


# --- engines ---------------------------------------------------------------------------------------


@eqx.filter_jit
def separations(scene: PairScene, qpos: Float[Array, "n t nq"]) -> Float[Array, "n t"]:
    """`scene.separation` of every world (n) at every recorded step (t)."""
    return jax.vmap(jax.vmap(scene.separation))(qpos)


def roll(scene: PairScene, params, qpos, qvel, n_steps: int, *, engine: str) -> tuple[np.ndarray, np.ndarray]:
    """Step every world `n_steps` times from (qpos, qvel) with its own parameters; the states after each step.

    Args:
        scene: the scene.
        params: (n, p) values of `scene.space`.
        qpos, qvel: (n, nq), (n, nv) start states.
        n_steps: steps at the scene's timestep.
        engine: "c" (`mujoco.batch` on all cores) or "mjx" (jit + vmap); the full-contact model.

    Returns:
        (qpos (n, n_steps, nq), qvel (n, n_steps, nv)), float64.
    """
    params = np.asarray(params, np.float64)
    if engine == "c":
        batch = _batch.make_batch(scene.c_model(), scene.space, scene.rows(), params, nsim=len(params))
        rec = _batch.rollout(batch, qpos, qvel, n_steps, record=("qpos", "qvel"))
        return rec["qpos"], rec["qvel"]
    if engine != "mjx":
        raise ValueError(f"engine {engine!r}: expected 'c' or 'mjx'")
    m = scene.c_model()
    model, space, rows = mjx.put_model(m), scene.space, scene.rows()
    q, v = in_blocks(  # the batching policy's blocks (one vmap on an accelerator)
        lambda p, q, v: _roll_mjx(model, space, rows, jnp.asarray(p), jnp.asarray(q), jnp.asarray(v), n_steps),
        params, np.asarray(qpos), np.asarray(qvel),
        world=model_world_bytes(m, recorded=4 * n_steps * (m.nq + m.nv)),
    )  # fmt: skip
    return np.asarray(q, np.float64), np.asarray(v, np.float64)


@functools.partial(jax.jit, static_argnames=("space", "rows", "n_steps"))
def _roll_mjx(model, space: ParamSpace, rows: Layout, params, qpos, qvel, n_steps: int):
    def one(p, q, v):
        m = space.apply(model, rows, p.astype(model.opt.timestep.dtype))
        d = mjx.make_data(m).replace(qpos=q.astype(m.qpos0.dtype), qvel=v.astype(m.qpos0.dtype))

        def body(d, _):
            d = mjx.step(m, d)
            return d, (d.qpos, d.qvel)

        return jax.lax.scan(body, d, None, length=n_steps)[1]

    return jax.vmap(one)(params, qpos, qvel)


# --- naming a scene on the command line ------------------------------------------------------------


def scene_spec(cls: type) -> str:
    """How to name `cls` on the command line: "module:Class", or "path/to/file.py:Class" for a file's class."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if path and (cls.__module__ == "__main__" or cls.__module__.startswith("clashx_scene_")):
        return f"{os.path.abspath(str(path))}:{cls.__qualname__}"
    return f"{cls.__module__}:{cls.__qualname__}"


def load_scene(spec: str) -> PairScene:
    """The scene named by `spec`: "my_module:MyScene" (importable) or "path/to/file.py:MyScene", instantiated.

    Raises:
        ValueError: naming the module, file or class that could not be found and the fix.
    """
    where, sep, cls_name = spec.rpartition(":")
    if not sep or not where or not cls_name:
        raise ValueError(f"--scene {spec!r}: expected MODULE:CLASS or path/to/file.py:CLASS")
    if where.endswith(".py"):
        if not os.path.exists(where):
            raise ValueError(f"--scene {spec!r}: no file {where}")
        name = "clashx_scene_" + hashlib.sha256(os.path.abspath(where).encode()).hexdigest()[:12]
        module = sys.modules.get(name)
        if module is None:
            loader = importlib.util.spec_from_file_location(name, where)
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            sys.modules[name] = module
            try:
                loader.loader.exec_module(module)
            except Exception as e:  # the user's file: a SyntaxError, an import inside it, anything it raises
                del sys.modules[name]
                raise ValueError(f"--scene {spec!r}: {where} failed to load: {_user_error(e)}; fix the file") from None
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise ValueError(
                f"--scene {spec!r}: cannot import {where!r} ({e}); run from its folder, add it to PYTHONPATH, "
                "or give the file: path/to/file.py:CLASS"
            ) from None
        except Exception as e:
            raise ValueError(f"--scene {spec!r}: module {where} failed to load: {_user_error(e)}; fix it") from None
    cls = getattr(module, cls_name, None)
    if not (inspect.isclass(cls) and issubclass(cls, PairScene)):
        raise ValueError(f"--scene {spec!r}: {where} has no PairScene subclass named {cls_name!r}")
    try:
        return cls()
    except ValueError as e:  # the checks PairScene makes at load name the scene and the fix
        raise ValueError(f"--scene {spec!r}: {e}") from None
    except Exception as e:  # the scene's own __init__
        raise ValueError(f"--scene {spec!r}: {cls_name}() raised {_user_error(e)}") from None


def _user_error(e: Exception) -> str:
    """A user code's exception as one line: its kind, message and, for a SyntaxError, the line."""
    if isinstance(e, SyntaxError):
        return f"SyntaxError at line {e.lineno}: {e.msg}"
    return f"{type(e).__name__}: {e}"

"""A scene of your own: `PairScene`, any two bodies of an MJCF that collide, through the whole pipeline.

Subclass `PairScene` in one short file and give:

| what | type | meaning |
|---|---|---|
| `name`, `pair` | class attributes | the scene's name; the two bodies (MJCF names) whose impact is learned |
| `window`, `approach` | class attributes, s | the impact window; how long after launch a touch may come |
| `mjcf()` | str | the full-contact scene (the pair collides through `<pair>`s or contype/conaffinity) |
| `make_space()` | `ParamSpace` | the physics identified, and where it is written in the model |
| `sample_launch(n, key)` | (qpos (n, nq), qvel (n, nv)) | launch states before the pair touches, over the prior |
| `separation(qpos)` | JAX scalar, m | signed gap of the pair (< 0: overlapping) |
| `features(pre)` | JAX (f,) | the handler's input: a pre-impact pair state in a canonical frame |

The pair's state is its joints' (qpos, qvel), `pair_state`; its joints must be
slide or hinge joints (a free joint's quaternion needs `targets` and
`post_from_targets` of one's own).  The handler predicts `targets(pre, post)`,
by default the change of the pair state over the window.

Everything else is derived here: the pair's coordinates, the hybrid model (the
full model less the pair's contacts), and a batch of events on MuJoCo C or MJX.
An event starts at launch, runs the full-contact model until the touch (the
rule `onset`, the hybrid's own), and records the pair state there (`pre_state`)
and `window` later (`post_state`).
"""

from __future__ import annotations

import abc
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

from ..core import _batch
from ..core._engine import resolve_engine
from ..core._mjx import mjx
from ..core._params import Layout, ParamSpace
from ..core._types import Array, Bool, Float, PRNGKeyArray
from ._scene import AbstractImpactScene

# A touch is a step after which the pair overlaps while it closed in by at least this speed over the step:
# a resting contact (a paddle pressed against a puck) is no impact.
CLOSING_SPEED = 0.01  # m/s
SCHEMA = "pair"  # the event files' scene of every PairScene


def onset(sep_before: Float[Array, "..."], sep: Float[Array, "..."], dt: float) -> Bool[Array, "..."]:
    """The touch rule of generation and of the hybrid: overlapping now, and closing at ≥ CLOSING_SPEED over the step."""
    return (sep <= 0.0) & (sep_before - sep >= CLOSING_SPEED * dt)


@functools.lru_cache(maxsize=16)
def _compile(xml: str, pair: tuple[str, str], hybrid: bool) -> mujoco.MjModel:
    spec = mujoco.MjSpec.from_string(xml)
    if hybrid:  # the pair never touches in the hybrid model: its impacts are the handler's
        bodies = set(pair)
        owner = {g.name: g.parent.name for g in spec.geoms if g.name}
        for p in list(spec.pairs):
            if {owner.get(p.geomname1), owner.get(p.geomname2)} == bodies:
                spec.delete(p)
        spec.add_exclude(bodyname1=pair[0], bodyname2=pair[1])
    m = spec.compile()
    if hybrid and m.npair == 0 and not np.any(m.geom_contype[:, None] & m.geom_conaffinity[None, :]):
        # No contact can arise, so the cone changes nothing; MJX 3.17's elliptic solver fails without contacts.
        m.opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    return m


class PairScene(AbstractImpactScene):
    """The base class of a user's scene: two bodies of an MJCF whose impact clashx learns (see the module doc).

    Class attributes to set: `name`, `pair`, `window` (s), `approach` (s).  Methods to give:
    `mjcf`, `make_space`, `sample_launch`, `separation`, `features`.
    """

    name: ClassVar[str]
    pair: ClassVar[tuple[str, str]]
    window: ClassVar[float]  # type: ignore[misc]  # a class attribute here, a property of the strike
    approach: ClassVar[float]
    rest_speed: ClassVar[float] = 1e-3  # every |qvel| below this: at rest (rollouts stop early)

    @property
    def schema(self) -> str:
        return SCHEMA

    space: ParamSpace
    dt: float = eqx.field(static=True)  # the MJCF's timestep, s
    qadr: tuple[int, ...] = eqx.field(static=True)  # qpos addresses of the pair's joints
    vadr: tuple[int, ...] = eqx.field(static=True)  # their qvel addresses

    def __init__(self):
        self.space = self.make_space()
        m = self.c_model()
        self.dt = float(m.opt.timestep)
        self.qadr, self.vadr = _pair_joints(m, self.name, self.pair)

    @abc.abstractmethod
    def make_space(self) -> ParamSpace:
        """The physics identified in this scene (`ParamSpace`) and where it is written in the MJCF."""

    @abc.abstractmethod
    def sample_launch(self, n: int, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
        """`n` launch states (qpos (n, nq), qvel (n, nv)) over the scene's prior, before the pair touches."""

    @abc.abstractmethod
    def separation(self, qpos: Float[Array, " nq"]) -> Float[Array, ""]:
        """The pair's signed gap (m) at `qpos`, in JAX: > 0 apart, ≤ 0 overlapping."""

    @abc.abstractmethod
    def features(self, pre: Float[Array, " d"]) -> Float[Array, " f"]:
        """The handler's input from a pre-impact pair state (`pair_state`), in JAX, in a canonical frame."""

    # --- derived from the MJCF -------------------------------------------------------------------

    def c_model(self, hybrid: bool = False) -> mujoco.MjModel:
        """The compiled MuJoCo model: full contact, or (`hybrid`) without the pair's contacts."""
        return self.space.prepare(_compile(self.mjcf(), tuple(self.pair), hybrid))

    def rows(self, hybrid: bool = False) -> Layout:
        """Where `space` writes in `c_model(hybrid)` (the hybrid model lacks the pair's `<pair>` rows)."""
        return self.space.rows(self.c_model(hybrid), strict=not hybrid)

    @property
    def n_window(self) -> int:
        return max(1, round(self.window / self.dt))

    @property
    def n_approach(self) -> int:
        return max(1, round(self.approach / self.dt))

    def pair_index(self) -> tuple[np.ndarray, np.ndarray]:
        """The qpos and qvel addresses of the pair's joints (slide or hinge)."""
        return np.asarray(self.qadr, np.int64), np.asarray(self.vadr, np.int64)

    def pair_state(self, qpos, qvel):
        """The pair's (qpos, qvel) entries, concatenated: (..., d).  NumPy or JAX, batched or not."""
        qadr, vadr = self.pair_index()
        xp = jnp if isinstance(qpos, jax.Array) else np
        return xp.concatenate([qpos[..., qadr], qvel[..., vadr]], axis=-1)

    def with_pair_state(self, qpos: Float[Array, " nq"], qvel: Float[Array, " nv"], state: Float[Array, " d"]):
        """(qpos, qvel) of one world with the pair's entries replaced by `state` (JAX)."""
        qadr, vadr = self.pair_index()
        k = len(qadr)
        qpos, qvel, state = jnp.asarray(qpos), jnp.asarray(qvel), jnp.asarray(state)
        return qpos.at[qadr].set(state[:k].astype(qpos.dtype)), qvel.at[vadr].set(state[k:].astype(qvel.dtype))

    def targets(self, pre: Float[Array, " d"], post: Float[Array, " d"]) -> Float[Array, " k"]:
        """What the handler predicts of an impact (default: the change of the pair state over the window)."""
        return post - pre

    def post_from_targets(self, pre: Float[Array, " d"], y: Float[Array, " k"]) -> Float[Array, " d"]:
        """The post-window pair state from a pre-impact state and predicted `targets` (their inverse)."""
        return pre + y

    # --- AbstractImpactScene ---------------------------------------------------------------------

    def sample_inputs(self, n: int, *, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
        """`n` launch states (qpos ‖ qvel, (n, nq + nv)) and `n` parameter draws from `space`'s prior."""
        k_state, k_params = jax.random.split(key)
        qpos, qvel = self.sample_launch(n, k_state)
        launch = np.concatenate([np.asarray(qpos, np.float64), np.asarray(qvel, np.float64)], axis=1)
        return launch, np.asarray(self.space.sample(n, key=k_params), np.float64)

    def simulate_events(self, inputs: np.ndarray, params: np.ndarray, *, engine: str, to_rest: bool = True) -> dict:
        """From launch states: full contact to the touch, then `window` on; `pre_state` / `post_state` of the pair.

        Args:
            inputs: (n, nq + nv) launch states, from `sample_inputs`.
            params: (n, p) values of `space`.
            engine: "c" (MuJoCo C), "mjx" or "auto".
            to_rest: unused (a pair event ends at the window's end).

        Returns:
            Event arrays of the "pair" schema (`clashx.events`); a world with no touch within
            `approach` has `touched` False and NaN states.
        """
        engine = resolve_engine(engine, cpu="c", accelerator="mjx")
        nq = self.c_model().nq
        qpos, qvel = np.asarray(inputs[:, :nq], np.float64), np.asarray(inputs[:, nq:], np.float64)
        traj_q, traj_v = roll(self, params, qpos, qvel, self.n_approach, engine=engine)
        seps = np.asarray(separations(self, jnp.asarray(np.concatenate([qpos[:, None], traj_q], axis=1))))
        hits = np.asarray(onset(seps[:, :-1], seps[:, 1:], self.dt))
        touched = np.asarray(hits.any(axis=1))
        k = np.argmax(hits, axis=1)
        rows = np.arange(len(qpos))
        pre_q, pre_v = traj_q[rows, k], traj_v[rows, k]
        post_q, post_v = roll(self, params, pre_q, pre_v, self.n_window, engine=engine)
        pre = self.pair_state(pre_q, pre_v)
        post = self.pair_state(post_q[:, -1], post_v[:, -1])
        nan = np.where(touched[:, None], 0.0, np.nan)
        return {
            "scene": SCHEMA,
            "shape": self.name,
            "source": "mujoco-c" if engine == "c" else "mjx",
            "launch": inputs,
            "pre_state": pre + nan,
            "post_state": post + nan,
            "t_impact": np.where(touched, (k + 1) * self.dt, np.nan),
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
            "timestep": self.dt,
            "mjcf_sha256": hashlib.sha256(self.mjcf().encode()).hexdigest(),
        }


def _pair_joints(m: mujoco.MjModel, scene: str, pair: tuple[str, str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The qpos and qvel addresses of the pair's joints; a ball or free joint is refused."""
    qadr, vadr = [], []
    for body in pair:
        b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body)
        if b < 0:
            raise ValueError(f"scene {scene!r}: pair body {body!r} is not in the MJCF")
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
            if int(m.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_SLIDE), int(mujoco.mjtJoint.mjJNT_HINGE)):
                raise ValueError(
                    f"scene {scene!r}: body {body!r} has a ball or free joint; PairScene's pair state "
                    "handles slide and hinge joints (override pair_state, with_pair_state and targets)"
                )
            qadr.append(int(m.jnt_qposadr[j]))
            vadr.append(int(m.jnt_dofadr[j]))
    return tuple(qadr), tuple(vadr)


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
    model = mjx.put_model(scene.c_model())
    q, v = _roll_mjx(
        model, scene.space, scene.rows(), jnp.asarray(params), jnp.asarray(qpos), jnp.asarray(qvel), n_steps
    )
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
            loader.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise ValueError(
                f"--scene {spec!r}: cannot import {where!r} ({e}); run from its folder, add it to PYTHONPATH, "
                "or give the file: path/to/file.py:CLASS"
            ) from None
    cls = getattr(module, cls_name, None)
    if not (inspect.isclass(cls) and issubclass(cls, PairScene)):
        raise ValueError(f"--scene {spec!r}: {where} has no PairScene subclass named {cls_name!r}")
    return cls()

"""What an impact scene is to the pipeline: `AbstractImpactScene`, with the strike, the cube toss and yours as instances.

A scene holds its MJCF, the two bodies of the learned pair, the `ParamSpace` it is
identified in, the prior over pre-impact inputs, the impact window, and how a batch
of its collisions is simulated into events.  Generation (`clashx.generate`) runs any
scene through this interface and nothing else (`clashx.scenes.make_scene` names them).

The same interface carries the hooks of the one hybrid rule (`clashx.hybrid`): the
pair's coordinates (`joints`), its separation, the gate that says which touch is an
impact (`ImpactGate`), the engine's model, and how the scene's surrogate reads a
pre-impact pair state and writes the post-window one (`impact_input`,
`impact_output`).  The touch test and the crossing are written here once
(`touches`, `crossing`): generation and the hybrid use the same ones.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import equinox as eqx
import jax.numpy as jnp
import mujoco
import numpy as np

from ..core import Array, Bool, Float, Layout, ParamSpace, PRNGKeyArray, model_world_bytes, short_repr
from . import _pair_state as ps

APART_CAP = 1 << 30  # steps: the apart counter saturates here
ENERGY_SLACK = 0.02  # share of the pre-impact kinetic energy a prediction may add (the energy guards' default)


class ImpactGate(NamedTuple):
    """Which touch of the pair is an impact (the handler's), and when a world is done; static settings.

    Attributes:
        window: the impact window (s): the handler predicts the pair's state this long after the touch.
        min_apart: s the pair must have been apart (separation > 0) before a touch counts: a flight
            or separation; a pair resting, rolling or chattering on each other stays with the engine.
        min_closing: m/s the separation must close at over the touching step: slower approaches
            stay with the engine.
        max_impacts: impacts per world at most (None: every one).
        until: s after launch past which no touch is an impact (None: any time).
        rest_speed: a world out of any window with every |qvel| below this is at rest (rollouts stop).
        energy_slack: the handler's post-window state may hold at most this share of the pre-impact
            kinetic energy more mechanical energy than the pre-impact state; a prediction above it has
            its velocities scaled down to the bound (counted, `RuleState.clamped`).  None: no guard
            (a scene whose `impact_output` guards its own, the strike).
        check_refire: a touch closing as fast as the last impact the handler took (its normal kinetic energy
            within `ENERGY_SLACK` of that impact's) is a re-fired impact: a body bouncing on its partner closes
            slower at every bounce, and one that does not is being kept bouncing by its handler (e.g. a near-elastic low-speed bounce of a weak model, which
            fired up to 44 impacts per world on the README's ball).  The engine's contact takes it (counted;
            where rotation feeds the normal motion, as a box tumbling onto another corner, the engine then
            takes a legitimate impact, which costs nothing in accuracy).
    """

    window: float
    min_apart: float = 0.005
    min_closing: float = 0.05
    max_impacts: int | None = None
    until: float | None = None
    rest_speed: float = 1e-3
    energy_slack: float | None = ENERGY_SLACK
    check_refire: bool = False


def touches(gate: ImpactGate, dt: float, sep_before, sep, apart_before, impacts_before, time) -> Bool[Array, "..."]:
    """The touch test of generation and of the hybrid (elementwise, JAX): is the step that ends at `time` an impact?

    The pair overlaps now (`sep` ≤ 0) after at least `gate.min_apart` apart
    (`apart_before` steps with separation > 0, the last of them the state
    before the step, `sep_before`), closing at `gate.min_closing` or more over
    the step, with fewer than `gate.max_impacts` impacts so far and (with
    `gate.until`) no later than that after launch.
    """
    n_apart = max(1, int(round(gate.min_apart / dt)))
    hit = (sep <= 0.0) & (apart_before >= n_apart) & (sep_before - sep >= gate.min_closing * dt)
    if gate.max_impacts is not None:
        hit = hit & (impacts_before < gate.max_impacts)
    if gate.until is not None:
        hit = hit & (time <= gate.until + 0.5 * dt)
    return hit


def crossing(sep_before, sep) -> Float[Array, "..."]:
    """Where in the step the separation crossed zero, as a fraction in [0, 1] (linear between the two states)."""
    gap = sep_before - sep
    return jnp.clip(sep_before / jnp.where(gap > 0, gap, 1.0), 0.0, 1.0)


class AbstractHandler(eqx.Module):
    """An impact handler of the hybrid rule: `handler(x, params)` is the pair's state a window after the touch.

    `x` is the scene's `impact_input` of the pre-impact pair state, `params` the handler's parameters.  The
    surrogates (`clashx.surrogate.AbstractSurrogate`), a scene's rigid law (`PairLaw`) and the families'
    average are handlers; so is any plain function with that signature, which the rule trusts everywhere.
    """

    @abc.abstractmethod
    def __call__(self, x, params: Float[Array, " p"]):
        """The handler's prediction for one impact."""

    def in_domain(self, x, params: Float[Array, " p"]) -> Bool[Array, ""]:
        """Whether the handler knows inputs like `x` (the hybrid rule hands an impact outside them to the
        engine's contact).  Default: every input."""
        return jnp.array(True)

    @property
    def checks_post(self) -> bool:
        """Whether `plausible` tests anything (static: the rule skips computing what it needs otherwise)."""
        return False

    def plausible(self, sep: Float[Array, ""], closing: Float[Array, ""]) -> Bool[Array, ""]:
        """Whether a predicted window's end, the pair's separation `sep` (m; < 0 overlapping) and its closing
        speed `closing` (m/s; > 0 approaching), is one the handler's own impacts can end in.  Default: any."""
        return jnp.array(True)


class AbstractImpactScene(eqx.Module):
    """An impact scene: MJCF, learned pair, parameter space, prior over pre-impact inputs, window, events.

    Attributes:
        name: the scene's name in event files and on the command line (`--scene`).
        pair: the two bodies whose impact the surrogate learns (MJCF names).
        space: the physical parameters identified in this scene.
    """

    name: eqx.AbstractClassVar[str]
    pair: eqx.AbstractClassVar[tuple[str, str]]
    space: eqx.AbstractVar[ParamSpace]

    @property
    def schema(self) -> str:
        """The event files' scene (`clashx.events.SCHEMAS`) this scene writes: its name, unless it says otherwise."""
        return self.name

    @property
    @abc.abstractmethod
    def window(self) -> float:
        """The impact window (s): the surrogate predicts the pair's state this long after first contact."""

    @abc.abstractmethod
    def mjcf(self) -> str:
        """The scene's MJCF (nominal parameters)."""

    @abc.abstractmethod
    def sample_inputs(self, n: int, *, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
        """`n` pre-impact inputs drawn from the scene's prior and `n` parameter draws from `space`'s prior."""

    @abc.abstractmethod
    def simulate_events(self, inputs: np.ndarray, params: np.ndarray, *, engine: str, to_rest: bool = True) -> dict:
        """Simulate a batch on `engine` ("c" or "mjx") into event arrays of the scene's schema (`clashx.events`)."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """What a generated file records about the scene: ranges, parameter space, solver, window."""

    # --- the hybrid rule's hooks (clashx.hybrid) -----------------------------------------------

    @property
    @abc.abstractmethod
    def joints(self) -> ps.PairJoints:
        """Where the pair's joints sit in (qpos, qvel): the pair state's layout."""

    @property
    @abc.abstractmethod
    def gate(self) -> ImpactGate:
        """Which touch is an impact, the window, when a world rests."""

    @property
    @abc.abstractmethod
    def dt(self) -> float:
        """The engine's timestep in the hybrid (s)."""

    @abc.abstractmethod
    def hybrid_c_model(self) -> mujoco.MjModel:
        """The MuJoCo model the engine steps in a hybrid rollout (a fresh copy, nominal parameters)."""

    @abc.abstractmethod
    def hybrid_rows(self) -> Layout:
        """Where `space` writes in `hybrid_c_model()`."""

    @property
    @abc.abstractmethod
    def switch_rows(self) -> tuple[int, ...]:
        """The `<pair>` rows of the learned pair in `hybrid_c_model()`, switched off through an impact window."""

    @abc.abstractmethod
    def separation(self, qpos: Float[Array, " nq"]) -> Float[Array, ""]:
        """The pair's signed gap (m) at `qpos`, in JAX: > 0 apart, ≤ 0 overlapping."""

    def world_bytes(self) -> int:
        """One world's footprint in a vmapped MJX batch, for the batching policy (`clashx.core.block_size`)."""
        return model_world_bytes(self.hybrid_c_model())

    def lite(self) -> AbstractImpactScene:
        """This scene without what the rule's hooks never read (MJX models): cheap to hand to a jitted function
        call after call (the CPU fallback's; equinox flattens every argument on every call)."""
        return self

    def impact_input(self, pre: Float[Array, " d"]):
        """What the scene's surrogate takes of a pre-impact pair state (default: the pair state itself)."""
        return pre

    def impact_output(self, pre: Float[Array, " d"], prediction) -> Float[Array, " d"]:
        """The pair state at the window's end from the surrogate's prediction (default: the prediction is it)."""
        return jnp.asarray(prediction)

    def settle(self, state: Float[Array, " d"]) -> Float[Array, " d"]:
        """The post-window pair state the engine resumes from (default: as predicted).

        A scene may move a predicted state that overlaps its partner back out to touching
        (`PairScene`: MuJoCo's soft contact would otherwise spring an overlap apart, energy
        the handler never predicted).
        """
        return state

    def flight(self, state: Float[Array, " d"], tau):
        """The pair state `tau` after `state` while the pair flies apart, exactly; None (the default): the engine's.

        A scene whose flight has a closed form (the cube: ballistic, torque-free with isotropic
        inertia) gives it here; the rule then sees the exact flight instead of the engine's
        integration of it, which drifts by ½ g dt t (semi-implicit Euler).
        """
        return None

    def pair_state(self, qpos, qvel):
        """The pair's (qpos ‖ qvel) entries (..., d): NumPy or JAX, batched or not."""
        return ps.pair_state(self.joints, qpos, qvel)

    def with_pair_state(self, qpos: Float[Array, " nq"], qvel: Float[Array, " nv"], state: Float[Array, " d"]):
        """(qpos, qvel) of one world with the pair's entries set from `state` (JAX)."""
        return ps.with_pair_state(self.joints, qpos, qvel, state)

    def interpolate(self, a: Float[Array, " d"], b: Float[Array, " d"], s) -> Float[Array, " d"]:
        """The pair state a fraction `s` of the way from `a` to `b`."""
        return ps.interpolate(self.joints, a, b, s)

    def advance(self, state: Float[Array, " d"], tau) -> Float[Array, " d"]:
        """The pair state moved on by `tau` (< one step) at its velocities."""
        return ps.advance(self.joints, state, tau)

    def coast(self, state: Float[Array, " d"], tau) -> Float[Array, " d"]:
        """The pair state `tau` (< one step) later in flight: the exact `flight` where the scene has it, else
        free motion under gravity (`_pair_state.coast`): a window's end between two steps."""
        flown = self.flight(state, tau)
        return ps.coast(self.joints, state, tau) if flown is None else flown

    def energy(self, state: Float[Array, " d"]) -> tuple[Float[Array, ""], Float[Array, ""]]:
        """(kinetic, potential) energy of the pair's moving bodies in a pair state (J; the energy guard's)."""
        m = self.hybrid_c_model()
        qpos, qvel = self.with_pair_state(jnp.asarray(m.qpos0, state.dtype), jnp.zeros(m.nv, state.dtype), state)
        return ps.pair_energy(m, self.joints, qpos, qvel)

    def __repr__(self) -> str:
        return short_repr(self)


def limit_energy(scene: AbstractImpactScene, pre: Float[Array, " d"], post: Float[Array, " d"]):
    """The energy guard (`ImpactGate.energy_slack`): `post` with its velocities scaled down so that its
    mechanical energy is at most the pre-impact one plus the slack's share of the kinetic; and whether it was.
    """
    slack = scene.gate.energy_slack
    if slack is None:
        return post, jnp.array(False)
    k0, u0 = scene.energy(pre)
    k1, u1 = scene.energy(post)
    room = k0 + u0 + slack * k0 - u1
    over = k1 > room
    scale = jnp.sqrt(jnp.clip(room, 0.0, None) / jnp.where(over, k1, 1.0))
    nq = scene.joints.nq
    return jnp.asarray(post).at[nq:].multiply(jnp.where(over, scale, 1.0)), over

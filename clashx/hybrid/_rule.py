"""The one hybrid rule: the learned handler takes the pair's impacts, the engine everything else, in any scene.

CLASH's hybridisation (He et al. 2026): the stiff contact of an impact is replaced
by one prediction.  The rule is written once, in JAX, on one world's
(qpos, qvel, time), and runs before every engine step: inside MJX's step
(`hybrid_step(system, state) -> state`, jit, vmap, `jax.jacfwd` and `jax.grad`
through a scan) and between MuJoCo C steps (`rollouts_c`, the CPU fallback).
It serves every scene through the hooks of `clashx.scenes.AbstractImpactScene`:

1. *the engine*: the pair's contacts stay in the engine's model, so resting,
   rolling, sliding, slow approaches and chatter are the engine's;
2. *an impact* (`clashx.scenes.touches`, generation's own test): after the
   last step the pair overlaps (`scene.separation` ≤ 0), having been apart for
   the scene's `gate.min_apart` and closing at `gate.min_closing` or more.  The
   pre-impact state is the pair state at the crossing, interpolated within the
   step (the step before it had no pair contact to act);
3. *the window*: the handler maps that state to the pair's state
   `gate.window` later (`scene.impact_output(pre, handler(scene.impact_input(pre), params))`);
   the pair's `<pair>` rows (`scene.switch_rows`) are switched off in this
   world alone (their margin set to OFF_MARGIN: MuJoCo C generates no contact,
   MJX's rows stay inactive) and the engine runs on;
4. *the end of the window*: at the first step at or after it the pair takes
   the predicted state (moved on by the part of a step past the window's end),
   its contacts come back, and the rule re-arms once the pair has been apart again.

In a batch (`rollouts`) the handler is evaluated only where a world touches
(`sparse_predict`): under `vmap` alone it would run on every world at every step.

Within a window the pair's own state is not the engine's business: it is
reported as the interpolation between the pre- and post-impact states
(`observe`), and set at the window's end.  A scene whose pair never rests on
each other (the strike: its arm retracts after the impact) may leave the pair's
contacts out of the engine's model altogether (`switch_rows` empty).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco.batch
import numpy as np

from ..core import Array, Bool, Float, Int, mjx, short_repr
from ..core import batch as _batch
from ..scenes import (
    APART_CAP,
    ENERGY_SLACK,
    AbstractHandler,
    AbstractImpactScene,
    PairScene,
    crossing,
    limit_energy,
    touches,
)

Handler = Callable  # (scene.impact_input(pre), params) -> the scene's prediction (e.g. a surrogate)
FREE, WINDOW = 0, 1
OFF_MARGIN = -1e3  # m: a pair row with this margin generates no contact (C) and stays inactive (MJX)
SEGMENT = 64  # MuJoCo C steps per segment of the CPU fallback (each world stops early at its own next event)


class RuleState(eqx.Module):
    """The rule's memory of one world.

    Attributes:
        phase: FREE (0) or WINDOW (1).
        apart: consecutive states with the pair apart, up to the current one (saturates).
        sep: the separation of the current state (the one the engine steps from next), m.
        last: the pair state of the current state (the crossing's start).
        pre, post: the pair states at the last impact's crossing and predicted a window later.
        t_pre, t_end: that crossing's time and the window's end, s.
        f0, t0: the pair state where its current flight began, and when (a scene with a `flight` hook).
        impacts: impacts so far.
        clamped: impacts whose prediction the energy guard scaled down (`ImpactGate.energy_slack`).
        nonfinite: touches whose prediction was not finite, left to the engine's contact.
        outside: touches whose input lay outside what the handler was trained on (`AbstractSurrogate.in_domain`),
            left to the engine's contact.
        implausible: touches whose (guarded) prediction left the pair deeper inside each other, or closing
            faster, at the window's end than any impact the handler was trained on (`AbstractHandler.plausible`),
            left to the engine.
        refired: touches closing as fast as the last impact the handler took, within `ENERGY_SLACK` of its
            normal kinetic energy (`ImpactGate.check_refire`), left to the engine.
        closing: the closing speed of the last impact the handler took (m/s, over its touching step; +inf before).
        t_first: the first impact's crossing time (s; NaN before).
    """

    phase: Int[Array, ""]
    apart: Int[Array, ""]
    sep: Float[Array, ""]
    last: Float[Array, " d"]
    pre: Float[Array, " d"]
    post: Float[Array, " d"]
    t_pre: Float[Array, ""]
    t_end: Float[Array, ""]
    f0: Float[Array, " d"]
    t0: Float[Array, ""]
    impacts: Int[Array, ""]
    clamped: Int[Array, ""]
    nonfinite: Int[Array, ""]
    outside: Int[Array, ""]
    implausible: Int[Array, ""]
    refired: Int[Array, ""]
    closing: Float[Array, ""]
    t_first: Float[Array, ""]

    def __repr__(self) -> str:
        return short_repr(self)


class HybridSystem(eqx.Module):
    """One world's hybrid system: what `hybrid_step` needs besides the state.  Build with `hybrid_system`.

    Attributes:
        scene: the scene (its hooks).
        model: the engine's MJX model (`scene.hybrid_c_model()`) with this world's parameters written in.
        handler: the impact handler, `(scene.impact_input(pre), params) -> prediction`, e.g. a surrogate.
        params: the handler's parameters (the model's may differ: `hybrid_system(engine_params=...)`).
    """

    scene: AbstractImpactScene
    model: mjx.Model
    handler: Handler
    params: Float[Array, " p"]

    def __repr__(self) -> str:
        return short_repr(self)


class HybridState(eqx.Module):
    """What evolves in a hybrid rollout of one world: the MJX data and the rule's memory."""

    data: mjx.Data
    rule: RuleState

    def __repr__(self) -> str:
        return short_repr(self)


class Rollouts(eqx.Module):
    """The end of a batch of n hybrid rollouts: `rollouts` (MJX) and `rollouts_c` (MuJoCo C) both return one.

    Attributes:
        qpos, qvel: (n, nq), (n, nv) each world's state at its end.
        rule: the rule's memory of each world at its end (`RuleState`, batched); its counts are also
            here as `impacts`, `clamped`, `nonfinite` (per world) and `t_first` (s; NaN without an impact).
        steps: (n,) steps each world took (MJX: every world the same count).
        frames: (n, f, d) the pair state each world showed every `record_every` steps from launch
            (`observe`); f = 0 unless recorded.
        data: MJX only: the final `mjx.Data` of each world (None from `rollouts_c`).
    """

    qpos: Float[Array, "n nq"]
    qvel: Float[Array, "n nv"]
    rule: RuleState
    steps: Int[Array, " n"]
    frames: Float[Array, "n f d"]
    data: mjx.Data | None = None

    @property
    def impacts(self) -> Int[Array, " n"]:
        """Impacts each world sent to the handler."""
        return self.rule.impacts

    @property
    def clamped(self) -> Int[Array, " n"]:
        """Predictions the energy guard scaled down, per world."""
        return self.rule.clamped

    @property
    def nonfinite(self) -> Int[Array, " n"]:
        """Touches whose prediction was not finite (left to the engine), per world."""
        return self.rule.nonfinite

    @property
    def fallbacks(self) -> Int[Array, " n"]:
        """Touches per world the rule left to the engine's contact: not finite, outside the handler's training
        inputs, or implausible (`RuleState`)."""
        return self.rule.nonfinite + self.rule.outside + self.rule.implausible + self.rule.refired

    @property
    def t_first(self) -> Float[Array, " n"]:
        """Each world's first impact (s after launch; NaN without one)."""
        return self.rule.t_first

    def __repr__(self) -> str:
        return short_repr(self)


def hybrid_system(scene: AbstractImpactScene, handler: Handler, params, *, engine_params=None) -> HybridSystem:
    """The hybrid system of one world of `scene` (vmap it over a batch of parameters).

    Args:
        scene: any scene with the rule's hooks (the strike, the cube toss, a `PairScene`).
        handler: the impact handler (e.g. the scene's surrogate).
        params: (p,) the handler's parameters, `scene.space` order.
        engine_params: (p,) written into the engine's model (default `params`).
    """
    base = mjx.put_model(scene.hybrid_c_model())
    params = jnp.asarray(params)
    ep = params if engine_params is None else jnp.asarray(engine_params)
    model = scene.space.apply(base, scene.hybrid_rows(), ep.astype(base.opt.timestep.dtype))
    return HybridSystem(scene, model, handler, params)


def init_rule(scene: AbstractImpactScene, qpos, qvel, time=0.0) -> RuleState:
    """The rule's memory at launch: free, apart for long if the pair is apart, no impact yet."""
    qpos, qvel = jnp.asarray(qpos), jnp.asarray(qvel)
    sep = scene.separation(qpos)
    now = scene.pair_state(qpos, qvel)
    f = jnp.asarray(time, now.dtype)
    zero = jnp.array(0)
    apart = jnp.where(sep > 0, APART_CAP - 1, 0)
    nan = jnp.full((), jnp.nan, now.dtype)
    inf = jnp.full((), jnp.inf, now.dtype)
    return RuleState(
        jnp.array(FREE), apart, sep, now, now, now, f, f, now, f, zero, zero, zero, zero, zero, zero, inf, nan
    )


def init_state(system: HybridSystem, qpos: Float[Array, " nq"], qvel: Float[Array, " nv"]) -> HybridState:
    """The launch state of one world."""
    m = system.model
    data = mjx.make_data(m).replace(qpos=jnp.asarray(qpos, m.qpos0.dtype), qvel=jnp.asarray(qvel, m.qpos0.dtype))
    return HybridState(data, init_rule(system.scene, data.qpos, data.qvel))


def predict(scene: AbstractImpactScene, handler: Handler, pre, params) -> Float[Array, " d"]:
    """The handler's pair state a window after the pre-impact pair state `pre` (one world)."""
    return jnp.asarray(scene.impact_output(pre, handler(scene.impact_input(pre), params)), pre.dtype)


def impact_pre(scene: AbstractImpactScene, rule: RuleState, qpos, qvel, time):
    """(whether an impact begins at this state, the pair state the handler is shown): the crossing's
    interpolated state where one begins, the last impact's pre-impact state elsewhere."""
    now, sep = seen(scene, rule, qpos, qvel, time)
    touch, _, _ = watch(scene, rule, sep, time)
    return touch, _pre(scene, rule, now, sep, touch)


def _pre(scene: AbstractImpactScene, rule: RuleState, now, sep, touch):
    return jnp.where(touch, scene.interpolate(rule.last, now, crossing(rule.sep, sep)), rule.pre)


def apply_rule(
    scene: AbstractImpactScene, handler: Handler, params, rule: RuleState, qpos, qvel, time, *, post=None
) -> tuple[RuleState, Float[Array, " nq"], Float[Array, " nv"], Bool[Array, ""]]:
    """The rule on one world's state after a step (module doc, 2-4); before the engine's next step.

    Args:
        post: the handler's prediction from this state's `impact_pre`, when the caller has it (a
            batch evaluates the handler only where a world touches: `sparse_predict`); default:
            evaluated here, on the last impact's state off an impact (its value is discarded, its
            gradients stay finite).

    Returns:
        (the rule's new memory, the (qpos, qvel) to step from, whether the rule acted: an impact
        began or a window ended).
    """
    gate, dt = scene.gate, scene.dt
    now, sep = seen(scene, rule, qpos, qvel, time)
    touch, ending, apart = watch(scene, rule, sep, time)
    frac = crossing(rule.sep, sep)
    pre = _pre(scene, rule, now, sep, touch)
    post = predict(scene, handler, pre, params) if post is None else jnp.asarray(post, now.dtype)
    post, clamped = limit_energy(scene, pre, post)
    # the fallback: a prediction that is not finite, from an input the handler never saw, or that leaves the pair
    # inside each other or still closing, is not set; the engine's contact takes that impact (each counted)
    finite = jnp.all(jnp.isfinite(post))
    known = in_domain(handler, scene.impact_input(pre), params)
    plausible = _plausible(scene, handler, post, qpos, qvel)
    closing = (rule.sep - sep) / dt
    # a bounce that kept all but ENERGY_SLACK of the last one's normal kinetic energy has not dissipated: re-fired
    fresh = ~(closing**2 >= (1.0 - ENERGY_SLACK) * rule.closing**2) if gate.check_refire else jnp.array(True)
    ok = finite & known & plausible & fresh
    hit = touch & ok
    apart = jnp.where(touch & ~ok, 0, apart)
    t_pre = jnp.where(hit, time - (1.0 - frac) * dt, rule.t_pre)
    landed = scene.settle(scene.coast(rule.post, time - rule.t_end))
    q_set, v_set = scene.with_pair_state(qpos, qvel, landed)
    qpos, qvel = jnp.where(ending, q_set, qpos), jnp.where(ending, v_set, qvel)
    f0, t0 = rule.f0, rule.t0
    if _has_flight(scene):  # a flight starts where the pair parts, or at a window's end with the pair apart
        parts = (rule.phase == FREE) & (rule.apart == 0) & (sep > 0)
        away = scene.separation(q_set) > 0
        apart = jnp.where(ending & away, 1, apart)
        f0 = jnp.where(parts, now, jnp.where(ending, landed, f0))
        t0 = jnp.where(parts | ending, time, t0)
    new = RuleState(
        phase=jnp.where(hit, WINDOW, jnp.where(ending, FREE, rule.phase)),
        apart=apart,
        sep=sep,
        last=jnp.where(ending, scene.pair_state(qpos, qvel), now),
        pre=pre,
        post=jnp.where(hit, post, rule.post),
        t_pre=t_pre,
        t_end=jnp.where(hit, t_pre + gate.window, rule.t_end),
        f0=f0,
        t0=t0,
        impacts=rule.impacts + hit,
        clamped=rule.clamped + (hit & clamped),
        nonfinite=rule.nonfinite + (touch & ~finite),
        outside=rule.outside + (touch & finite & ~known),
        implausible=rule.implausible + (touch & finite & known & ~plausible),
        refired=rule.refired + (touch & finite & known & plausible & ~fresh),
        closing=jnp.where(hit, closing, rule.closing),
        t_first=jnp.where(hit & (rule.impacts == 0), t_pre, rule.t_first),
    )
    return new, qpos, qvel, touch | ending


def in_domain(handler: Handler, x, params) -> Bool[Array, ""]:
    """Whether `handler` knows inputs like `x`: its own test (`AbstractHandler.in_domain`, a surrogate's training
    ranges); a plain function takes every input."""
    if isinstance(handler, AbstractHandler):
        return handler.in_domain(x, params)
    return jnp.array(True)


def _plausible(scene: AbstractImpactScene, handler: Handler, post, qpos, qvel) -> Bool[Array, ""]:
    """Whether the pair state `post` a handler predicted for a window's end is one its impacts can end in: its
    separation and closing speed (over the next step of its flight, `scene.coast`) judged by the handler
    (`AbstractHandler.plausible`: a surrogate, against the deepest and fastest-closing window ends of the
    impacts it was trained on); a handler that does not judge is believed."""
    if not (isinstance(handler, AbstractHandler) and handler.checks_post):
        return jnp.array(True)
    sep = scene.separation(scene.with_pair_state(qpos, qvel, post)[0])
    later = scene.separation(scene.with_pair_state(qpos, qvel, scene.coast(post, scene.dt))[0])
    return handler.plausible(sep, (sep - later) / scene.dt)


def _has_flight(scene: AbstractImpactScene) -> bool:
    return type(scene).flight is not AbstractImpactScene.flight


def seen(scene: AbstractImpactScene, rule: RuleState, qpos, qvel, time):
    """The pair state the rule sees and its separation: the engine's, or, for a scene with a `flight`
    hook, while the pair flies, the exact flight from where it began (the engine's own integration of
    the flight is not used: semi-implicit Euler drifts by ½ g dt t)."""
    now = scene.pair_state(qpos, qvel)
    if not _has_flight(scene):
        return now, scene.separation(qpos)
    flying = (rule.phase == FREE) & (rule.apart >= 1)
    now = jnp.where(flying, scene.flight(rule.f0, time - rule.t0), now)
    return now, scene.separation(scene.with_pair_state(qpos, qvel, now)[0])


def watch(scene: AbstractImpactScene, rule: RuleState, sep, time):
    """The rule's test of one state: (an impact begins, the window ends, the apart counter after it).

    `apply_rule` acts on it; the CPU fallback runs it alone over a segment's steps to find
    each world's next action without evaluating the handler at every step.
    """
    gate, dt = scene.gate, scene.dt
    hit = (rule.phase == FREE) & touches(gate, dt, rule.sep, sep, rule.apart, rule.impacts, time)
    ending = (rule.phase == WINDOW) & (time >= rule.t_end - 1e-6 * dt)
    apart = jnp.where(hit | ending | (sep <= 0), 0, jnp.minimum(rule.apart + 1, APART_CAP))
    return hit, ending, apart


def switched(model: mjx.Model, rows: tuple[int, ...], off: Bool[Array, ""]) -> mjx.Model:
    """The engine's model with the pair's `<pair>` rows switched off (margin OFF_MARGIN) where `off`."""
    if not rows:
        return model
    idx = jnp.asarray(rows)
    margin = model.pair_margin.at[idx].set(jnp.where(off, OFF_MARGIN, model.pair_margin[idx]))
    return model.replace(pair_margin=margin)


def hybrid_step(system: HybridSystem, state: HybridState, *, post=None) -> HybridState:
    """One hybrid step of one world: the rule, then `mjx.step` of the engine's model.  vmap over worlds.

    Args:
        system: from `hybrid_system`.
        state: from `init_state`, or the last step.
        post: the handler's prediction at this state, when the caller has it (`apply_rule`).

    Returns:
        The state one step (`scene.dt`) later.
    """
    scene, d = system.scene, state.data
    rule, qpos, qvel, _ = apply_rule(
        scene, system.handler, system.params, state.rule, d.qpos, d.qvel, d.time, post=post
    )
    model = switched(system.model, scene.switch_rows, rule.phase == WINDOW)
    return HybridState(mjx.step(model, d.replace(qpos=qpos, qvel=qvel)), rule)


def observe(scene: AbstractImpactScene, rule: RuleState, qpos, qvel, time) -> Float[Array, " d"]:
    """The pair state a world shows: the engine's (or its exact flight, `seen`), or within a window the
    interpolation from pre to post."""
    s = jnp.clip((time - rule.t_pre) / scene.gate.window, 0.0, 1.0)
    late = jnp.maximum(time - rule.t_end, 0.0)  # past the window's end, before the rule has set the state
    inside = jnp.where(late > 0, scene.coast(rule.post, late), scene.interpolate(rule.pre, rule.post, s))
    now = scene.pair_state(qpos, qvel)
    if _has_flight(scene):
        flying = (rule.phase == FREE) & (rule.apart >= 1)
        now = jnp.where(flying, scene.flight(rule.f0, time - rule.t0), now)
    return jnp.where(rule.phase == WINDOW, inside, now)


def resting(scene: AbstractImpactScene, phase, qvel) -> Bool[Array, "..."]:
    """The rest rule of both engines: out of any window and every |qvel| below `scene.gate.rest_speed`."""
    return (phase == FREE) & (jnp.max(jnp.abs(qvel), axis=-1) < scene.gate.rest_speed)


# --- MJX: a batch of rollouts ----------------------------------------------------------------------


def _batched(scene: AbstractImpactScene, handler: Handler, params, engine_params):
    base = mjx.put_model(scene.hybrid_c_model())
    dtype = base.opt.timestep.dtype
    params = jnp.asarray(params, dtype)
    ep = params if engine_params is None else jnp.asarray(engine_params, dtype)
    ep = jnp.broadcast_to(ep, params.shape[:-1] + (scene.space.size,))  # the handler's count may differ (the rigid law)
    models = scene.space.batch_model(base, scene.hybrid_rows(), ep)  # written fields batched only
    axes = scene.space.in_axes(base)

    def system(m, p):
        return HybridSystem(scene, m, handler, p)

    return models, axes, params, system


def rollouts(
    scene: AbstractImpactScene,
    handler: Handler,
    params,
    qpos,
    qvel,
    n_steps: int,
    *,
    engine_params=None,
    until_rest: bool = False,
    record_every: int = 0,
    sparse: bool = True,
) -> Rollouts:
    """A batch of hybrid rollouts on MJX: (n, p) parameters, (n, nq) / (n, nv) launch states, `n_steps` at most.

    Args:
        engine_params: (n, q) of `scene.space`, written into the engine's model (default `params`, when
            the handler's parameters are the engine's, as a distilled surrogate's).
        until_rest: stop once every world rests (`resting`; a while-loop: forward-mode derivatives
            only); False: a scan of exactly `n_steps` (every derivative).
        record_every: with k > 0, also return what each world shows (`observe`) every k steps,
            from launch: (n, n_steps // k, d); needs `until_rest=False`.
        sparse: evaluate the handler only where a world touches (`sparse_predict`); False: on every
            world at every step, its value kept at impacts (the same values; for a caller that vmaps
            this function, under which the per-step switch would run all its branches).

    Returns:
        `Rollouts`: each world's final state and rule memory, the steps taken and, with
        `record_every`, the frames (else none: f = 0); `data` holds the final `mjx.Data`.
    """
    models, axes, params, system = _batched(scene, handler, params, engine_params)
    states = jax.vmap(lambda m, p, q, v: init_state(system(m, p), q, v), in_axes=(axes, 0, 0, 0))(
        models, params, jnp.asarray(qpos), jnp.asarray(qvel)
    )
    one = jax.vmap(lambda m, p, s, po: hybrid_step(system(m, p), s, post=po), in_axes=(axes, 0, 0, 0))
    shown_pre = jax.vmap(lambda s: impact_pre(scene, s.rule, s.data.qpos, s.data.qvel, s.data.time))

    def step(models, params, s):  # the handler only where a world touches (`sparse_predict`), then each world's step
        if not sparse:
            return one(models, params, s, None)
        touch, pre = shown_pre(s)
        return one(models, params, s, sparse_predict(scene, handler, params, touch, pre, s.rule.post))

    if record_every:
        if until_rest:
            raise ValueError("rollouts: record_every needs until_rest=False (a fixed number of steps)")
        view = jax.vmap(lambda s: observe(scene, s.rule, s.data.qpos, s.data.qvel, s.data.time))

        def frame(s, _):
            shown = view(s)
            s, _ = jax.lax.scan(lambda c, _: (step(models, params, c), None), s, None, length=record_every)
            return s, shown

        states, shown = jax.lax.scan(frame, states, None, length=n_steps // record_every)
        return _ended(states, jnp.array(n_steps), jnp.swapaxes(shown, 0, 1))
    if not until_rest:
        states, _ = jax.lax.scan(lambda s, _: (step(models, params, s), None), states, None, length=n_steps)
        return _ended(states, jnp.array(n_steps))

    def go_on(carry):
        s, k = carry
        return (k < n_steps) & ~jnp.all(resting(scene, s.rule.phase, s.data.qvel))

    states, k = jax.lax.while_loop(go_on, lambda c: (step(models, params, c[0]), c[1] + 1), (states, jnp.array(0)))
    return _ended(states, k)


def _ended(states: HybridState, steps, frames=None) -> Rollouts:
    """`Rollouts` of a batch of final states: every world took `steps`."""
    n = states.data.qpos.shape[0]
    if frames is None:
        frames = jnp.zeros((n, 0, states.rule.last.shape[-1]), states.rule.last.dtype)
    return Rollouts(states.data.qpos, states.data.qvel, states.rule, jnp.broadcast_to(steps, (n,)), frames, states.data)


def sparse_predict(scene: AbstractImpactScene, handler: Handler, params, touch, pre, idle) -> Float[Array, "n d"]:
    """The handler's predictions for a batch of worlds at one step, evaluated only where one touches.

    Under `vmap` a handler inside the per-world rule runs on every world at every step;
    impacts are rare, so the batch evaluates it (`lax.switch`) not at all when no world
    touches, on `sparse_block(n)` gathered worlds when few do, and on every world when
    more do.  Jit, grad and jacfwd go through.

    Args:
        params: (n, p) the handler's parameters; touch: (n,) whether each world's impact begins;
        pre: (n, d) each world's `impact_pre` state; idle: (n, d) the value where a world does not touch.

    Returns:
        (n, d): `predict` where `touch`, `idle` elsewhere.
    """
    n, k = touch.shape[0], sparse_block(touch.shape[0])
    every = jax.vmap(lambda x, p: predict(scene, handler, x, p))

    def some():
        idx = jnp.nonzero(touch, size=k, fill_value=n)[0]  # n past the end: dropped by the scatter
        at = jnp.minimum(idx, n - 1)
        return idle.at[idx].set(every(pre[at], params[at]).astype(idle.dtype), mode="drop")

    def all_():
        return jnp.where(touch[:, None], every(pre, params).astype(idle.dtype), idle)

    count = jnp.sum(touch)
    return jax.lax.switch(jnp.where(count == 0, 0, jnp.where(count <= k, 1, 2)), (lambda: idle, some, all_))


def sparse_block(n: int) -> int:
    """Worlds `sparse_predict` gathers when few of `n` touch at once (above it, all are evaluated)."""
    return min(n, max(4, -(-n // 16)))


# --- MuJoCo C: the same rule between steps ----------------------------------------------------------


@eqx.filter_jit
def _init_rules(scene: AbstractImpactScene, qpos, qvel):
    return jax.vmap(lambda q, v: init_rule(scene, q, v))(qpos, qvel)


@eqx.filter_jit
def _scan_rules(
    scene: AbstractImpactScene, handler: Handler, params, rule: RuleState, qpos, qvel, time, left, active, at_rest
):
    """The rule over each world's recorded steps (n, K, ...) up to its first action, rest (`at_rest`) or limit.

    `watch` runs over the steps (the separations all at once), `apply_rule` once per
    world, where it stops.  Returns per world: the index it stopped at (K - 1 if it went
    through), the rule's memory and the (qpos, qvel) after the rule there, whether it
    acted there, and whether the world is done.
    """
    flight = _has_flight(scene)
    if flight:  # what the rule sees depends on where the flight began: step by step
        seps: jax.Array = jnp.zeros(qpos.shape[:2], qpos.dtype)
        nows: jax.Array = jnp.zeros(qpos.shape[:2] + rule.last.shape[-1:], qpos.dtype)
    else:  # the engine's states: every separation at once
        seps = jnp.asarray(jax.vmap(jax.vmap(scene.separation))(qpos))
        nows = jnp.asarray(jax.vmap(jax.vmap(scene.pair_state))(qpos, qvel))

    def world(p, r, qs, vs, ts, ss, ns, lim):
        k = qs.shape[0]

        def body(r, x):
            sep, now, q, v, t, j = x
            if flight:
                now, sep = seen(scene, r, q, v, t)
            hit, ending, apart = watch(scene, r, sep, t)
            stop = hit | ending | (j + 1 >= lim)
            if at_rest:
                stop = stop | resting(scene, r.phase, v)
            moved = eqx.tree_at(lambda m: (m.apart, m.sep, m.last), r, (apart, sep, now))
            if flight:
                parts = (r.phase == FREE) & (r.apart == 0) & (sep > 0)
                moved = eqx.tree_at(
                    lambda m: (m.f0, m.t0), moved, (jnp.where(parts, now, r.f0), jnp.where(parts, t, r.t0))
                )
            return moved, (stop, r)

        _, (stop, before) = jax.lax.scan(body, r, (ss, ns, qs, vs, ts, jnp.arange(k)))
        e = jnp.where(stop.any(), jnp.argmax(stop), k - 1)
        at = jax.tree.map(lambda a: a[e], before)  # the memory just before step e
        new, q2, v2, acted = apply_rule(scene, handler, p, at, qs[e], vs[e], ts[e])
        done = e + 1 >= lim
        if at_rest:
            done = done | resting(scene, new.phase, v2)
        return new, e, q2, v2, acted, done

    new, e, q2, v2, acted, done = jax.vmap(world)(params, rule, qpos, qvel, time, seps, nows, left)
    return _keep_idle(active, new, rule), e, q2, v2, acted, done


def _keep_idle(active, new: RuleState, old: RuleState) -> RuleState:
    """The rule's memory of every world: `new` where active, `old` where the world is done."""
    return jax.tree.map(lambda a, b: jnp.where(active.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)


def rollouts_c(
    scene: AbstractImpactScene,
    handler: Handler,
    params,
    qpos,
    qvel,
    n_steps: int,
    *,
    engine_params=None,
    until_rest: bool = True,
    segment: int = SEGMENT,
    nthread: int = 0,
    batch: mujoco.batch.Batch | None = None,
) -> Rollouts:
    """The CPU fallback of `rollouts`: the same rule between MuJoCo C steps (`mujoco.batch`), no gradients.

    Each world runs on its own clock: the engine steps every unfinished world `segment` steps,
    the rule runs over the recorded steps (`_scan_rules`), and a world whose rule acted (an
    impact began or a window ended) is put back to that step, its pair switched and (at a
    window's end) set; the others go on from where the engine left them.  Worlds stop at rest
    (with `until_rest`) or after `n_steps`.  Step for step the rule sees what MJX's
    `hybrid_step` would.

    Args:
        params: (n, p) the handler's parameters; `engine_params` (n, p) the engine's (default the same).
        qpos, qvel: (n, nq), (n, nv) launch states.
        n_steps: steps at most.
        until_rest: stop a world once it rests (`resting`).
        segment: engine steps between two passes of the rule.
        nthread: MuJoCo C threads (0: all CPUs).
        batch: a `mujoco.batch.Batch` of `scene.hybrid_c_model()` with the engine's parameters
            written in, to run in (default a new one; a caller that goes on in it after, as the
            strike's slide does, saves building one).

    Returns:
        `Rollouts` (as NumPy): each world's (qpos, qvel) and rule memory at its end, the steps it took;
        no frames, no `data`.
    """
    params = np.asarray(params, np.float64)
    n = len(params)
    segment = max(1, min(segment, n_steps))
    ep = (
        params
        if engine_params is None
        else np.broadcast_to(np.asarray(engine_params, np.float64), (n, scene.space.size))
    )
    if batch is None:
        batch = _batch.make_batch(scene.hybrid_c_model(), scene.space, scene.hybrid_rows(), ep, nsim=n, nthread=nthread)
    scene = scene.lite()  # handed to the jitted rule once per segment: without MJX models to flatten
    rows = list(scene.switch_rows)
    margin = batch.expand("pair_margin") if rows else None
    base = margin[:, rows].copy() if margin is not None else np.zeros((n, 0))
    q, v = np.array(qpos, np.float64), np.array(qvel, np.float64)
    qadr = np.asarray(scene.joints.qadr, np.int64)
    vadr = np.asarray(scene.joints.vadr, np.int64)
    _batch.reset(batch, q, v)
    rule = _init_rules(scene, jnp.asarray(q), jnp.asarray(v))
    pj = jnp.asarray(params)
    steps = np.zeros(n, np.int64)
    active = np.ones(n, bool)
    t = np.zeros(n)
    while active.any():
        ids = np.flatnonzero(active)
        rec = batch.rollout(segment, ids=ids, record=("qpos", "qvel", "qacc_warmstart"))
        rec["time"] = t[ids][:, None] + scene.dt * np.arange(1, segment + 1)
        # every world goes through the scan (one compile); a finished one sees its last state and is ignored
        qs = np.repeat(q[:, None], segment, 1)
        vs = np.repeat(v[:, None], segment, 1)
        ts = np.repeat(t[:, None], segment, 1)
        qs[ids], vs[ids], ts[ids] = rec["qpos"], rec["qvel"], rec["time"]
        left = np.where(active, n_steps - steps, 1)
        rule, stop, q2, v2, acted, done = _scan_rules(
            scene, handler, pj, rule, jnp.asarray(qs), jnp.asarray(vs), jnp.asarray(ts), jnp.asarray(left),
            jnp.asarray(active), until_rest,
        )  # fmt: skip
        stop, acted, done = (np.asarray(a)[ids] for a in (stop, acted, done))
        phase = np.asarray(rule.phase)[ids]
        j = np.arange(len(ids))
        # the state there in float64, the pair's entries set by the rule where a window ended
        qn, vn = rec["qpos"][j, stop].copy(), rec["qvel"][j, stop].copy()
        ended = acted & (phase == FREE)
        if ended.any():
            qn[np.ix_(ended, qadr)] = np.asarray(q2, np.float64)[ids[ended]][:, qadr]
            vn[np.ix_(ended, vadr)] = np.asarray(v2, np.float64)[ids[ended]][:, vadr]
        steps[ids] += stop + 1
        q[ids], v[ids], t[ids] = qn, vn, rec["time"][j, stop]
        back = acted & ~done
        if back.any():  # put those worlds back to the step where the rule acted
            w = ids[back]
            batch.bind("qpos")[w] = qn[back]
            batch.bind("qvel")[w] = vn[back]
            batch.bind("time")[w] = rec["time"][j[back], stop[back]]
            batch.bind("qacc_warmstart")[w] = rec["qacc_warmstart"][j[back], stop[back]]
            if margin is not None:
                off = phase[back] == WINDOW
                margin[np.ix_(w, rows)] = np.where(off[:, None], OFF_MARGIN, base[w])
        active[ids[done]] = False
    rule = jax.tree.map(np.asarray, rule)
    return Rollouts(q, v, rule, steps, np.zeros((n, 0, rule.last.shape[-1])))


def full_rollouts_c(scene: PairScene, params, qpos, qvel, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference: full-contact MuJoCo C (`scene.c_model()`) for `n_steps` from launch; the final (qpos, qvel)."""
    batch = _batch.make_batch(
        scene.c_model(), scene.space, scene.rows(), np.asarray(params, np.float64), nsim=len(params)
    )
    rec = _batch.rollout(batch, np.asarray(qpos), np.asarray(qvel), n_steps, record=("qpos", "qvel"))
    return rec["qpos"][:, -1], rec["qvel"][:, -1]

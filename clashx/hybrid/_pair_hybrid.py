"""The hybrid step of any `PairScene`: `hybrid_pair_step(system, state) -> state`, in the brax/MJX style.

The system is one pytree (`PairSystem`: the scene, the hybrid MJX model with
this world's parameters, the handler and the parameters); the state carries the
MJX data and the rule's memory (`PairState`).  One rule, written once in JAX on a
world's (qpos, qvel), runs before every engine step, on MJX and on MuJoCo C:

1. *touch* (`clashx.scenes._pair.onset`, the rule generation uses too): the pair
   overlaps (`scene.separation` ≤ 0) and closed in by at least CLOSING_SPEED over
   the last step.  Any impact, not only the first: after one, the rule re-arms as
   soon as the pair is apart again.  The hybrid model has no pair contacts at all,
   so the engine never pushes the pair apart itself;
2. *impact*: the handler maps the pair state at the touch to the pair state a
   window later (`PairSurrogate`, or any `(pre, params) -> post`);
3. *window*: for the window's steps the pair moves from the one to the other at
   the mean velocity (the rest of the world is the engine's), then takes the
   predicted state exactly;
4. everything else is the engine's.

`pair_rollouts` runs a batch on MJX (scan: jit, vmap, jacfwd and grad; or a
while-loop that stops once every world is at rest); `pair_rollouts_c` runs the
same jitted rule between MuJoCo C steps (`mujoco.batch`), the CPU fallback, and
stops early too.  `full_rollouts_c` is the full-contact reference.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import _batch
from ..core._mjx import mjx
from ..core._types import Array, Bool, Float, Int
from ..scenes._pair import PairScene, onset

PairHandler = Callable[[Float[Array, " d"], Float[Array, " p"]], Float[Array, " d"]]
FREE, WINDOW = 0, 1


class PairSystem(eqx.Module):
    """One world's hybrid system: what `hybrid_pair_step` needs besides the state.  Build with `pair_system`.

    Attributes:
        scene: the scene.
        model: the hybrid MJX model (no pair contacts) with `params` written in.
        handler: `(pre, params) -> post` pair states, e.g. a `PairSurrogate`.
        params: this world's parameters, `scene.space` order.
    """

    scene: PairScene
    model: mjx.Model
    handler: PairHandler
    params: Float[Array, " p"]


class PairState(eqx.Module):
    """What evolves in a hybrid rollout of one world.

    Attributes:
        data: the MJX data (None in the C fallback, whose state lives in MuJoCo C).
        phase: FREE (0) or WINDOW (1).
        armed: an impact may start (the pair has been apart since the last one).
        sep: the pair's separation before the last step (m).
        left: steps of the current window still to go.
        pre, post: the pair states at the last touch and predicted a window later.
        impacts: impacts so far.
        t_first: time of the first touch (s; NaN before).
    """

    data: mjx.Data | None
    phase: Int[Array, ""]
    armed: Bool[Array, ""]
    sep: Float[Array, ""]
    left: Int[Array, ""]
    pre: Float[Array, " d"]
    post: Float[Array, " d"]
    impacts: Int[Array, ""]
    t_first: Float[Array, ""]


def pair_system(scene: PairScene, handler: PairHandler, params: Float[Array, " p"]) -> PairSystem:
    """The hybrid system of one world of `scene` with `params` (vmap it over a batch of parameters)."""
    base = mjx.put_model(scene.c_model(hybrid=True))
    params = jnp.asarray(params)
    model = scene.space.apply(base, scene.rows(hybrid=True), params.astype(base.opt.timestep.dtype))
    return PairSystem(scene, model, handler, params)


def init_pair_state(system: PairSystem, qpos: Float[Array, " nq"], qvel: Float[Array, " nv"]) -> PairState:
    """The launch state of one world."""
    m = system.model
    data = mjx.make_data(m).replace(qpos=jnp.asarray(qpos, m.qpos0.dtype), qvel=jnp.asarray(qvel, m.qpos0.dtype))
    return _memory(system.scene.separation(data.qpos), system.scene.pair_state(data.qpos, data.qvel), data)


def apply_pair_rule(
    scene: PairScene, handler: PairHandler, params, state: PairState, qpos, qvel, time
) -> tuple[PairState, Float[Array, " nq"], Float[Array, " nv"]]:
    """The rule on one world's (qpos, qvel) after a step: touch → handler, window, release; before the next step.

    Returns the rule's new memory (its `data` untouched) and the (qpos, qvel) to step from.
    """
    dt, n = scene.dt, scene.n_window
    sep = scene.separation(qpos)
    hit = (state.phase == FREE) & state.armed & onset(state.sep, sep, dt)
    now = scene.pair_state(qpos, qvel)
    # off a touch the handler sees the last touch's state (finite gradients; its value is discarded)
    post = jnp.where(hit, jnp.asarray(handler(jnp.where(hit, now, state.pre), params), now.dtype), state.post)
    pre = jnp.where(hit, now, state.pre)
    left = jnp.where(hit, n, state.left - (state.phase == WINDOW))
    phase = jnp.where(hit, WINDOW, state.phase)
    k = len(scene.pair_index()[0])
    frac = 1.0 - left / n
    moving = pre[:k] + frac * (post[:k] - pre[:k])
    carried = jnp.concatenate([moving, (post[:k] - pre[:k]) / (n * dt)])
    done = (phase == WINDOW) & (left <= 0)
    in_window = phase == WINDOW
    target = jnp.where(done, post, carried)
    q_set, v_set = scene.with_pair_state(qpos, qvel, target)
    qpos, qvel = jnp.where(in_window, q_set, qpos), jnp.where(in_window, v_set, qvel)
    phase = jnp.where(done, FREE, phase)
    new = PairState(
        data=state.data,
        phase=phase,
        armed=jnp.where(hit, False, state.armed | ((phase == FREE) & (sep > 0))),
        sep=sep,
        left=jnp.maximum(left, 0),
        pre=pre,
        post=post,
        impacts=state.impacts + hit,
        t_first=jnp.where(hit & (state.impacts == 0), time, state.t_first),
    )
    return new, qpos, qvel


def hybrid_pair_step(system: PairSystem, state: PairState) -> PairState:
    """One hybrid step of one world: the rule, then `mjx.step` of the hybrid model.  vmap over worlds."""
    d = state.data
    assert d is not None, "an MJX hybrid state holds MJX data (init_pair_state)"
    new, qpos, qvel = apply_pair_rule(system.scene, system.handler, system.params, state, d.qpos, d.qvel, d.time)
    return eqx.tree_at(lambda s: s.data, new, mjx.step(system.model, d.replace(qpos=qpos, qvel=qvel)))


def resting(scene: PairScene, phase: Int[Array, "..."], qvel: Float[Array, "... nv"]) -> Bool[Array, "..."]:
    """The rest rule of both engines: out of any window and every velocity below `scene.rest_speed`."""
    return (phase == FREE) & (jnp.max(jnp.abs(qvel), axis=-1) < scene.rest_speed)


def at_rest(scene: PairScene, state: PairState) -> Bool[Array, ""]:
    """Whether an MJX world is done (`resting`)."""
    assert state.data is not None
    return resting(scene, state.phase, state.data.qvel)


def pair_rollouts(
    scene: PairScene, handler: PairHandler, params, qpos, qvel, n_steps: int, *, until_rest: bool = False
) -> tuple[PairState, Int[Array, ""]]:
    """A batch of hybrid rollouts on MJX: (n, p) parameters, (n, nq) / (n, nv) launch states, `n_steps` at most.

    Args:
        until_rest: stop once every world is at rest (`at_rest`; a while-loop: forward-mode
            derivatives only); False: a scan of exactly `n_steps` (every derivative).

    Returns:
        (the final `PairState`s, batched; the number of steps taken).
    """
    base = mjx.put_model(scene.c_model(hybrid=True))
    params = jnp.asarray(params, base.opt.timestep.dtype)
    models = scene.space.batch_model(base, scene.rows(hybrid=True), params)  # written fields batched only
    axes = scene.space.in_axes(base)

    def system(m, p):
        return PairSystem(scene, m, handler, p)

    states = jax.vmap(lambda m, p, q, v: init_pair_state(system(m, p), q, v), in_axes=(axes, 0, 0, 0))(
        models, params, jnp.asarray(qpos), jnp.asarray(qvel)
    )
    step = jax.vmap(lambda m, p, s: hybrid_pair_step(system(m, p), s), in_axes=(axes, 0, 0))
    if not until_rest:
        states, _ = jax.lax.scan(lambda s, _: (step(models, params, s), None), states, None, length=n_steps)
        return states, jnp.array(n_steps)

    def go_on(carry):
        s, k = carry
        return (k < n_steps) & ~jnp.all(jax.vmap(lambda w: at_rest(scene, w))(s))

    return jax.lax.while_loop(go_on, lambda c: (step(models, params, c[0]), c[1] + 1), (states, jnp.array(0)))


def _rules(scene: PairScene, handler: PairHandler, params, state: PairState, qpos, qvel, time):
    """`apply_pair_rule` on every world of a batch, and whether each then rests (`resting`)."""
    new, q, v = jax.vmap(lambda p, s, a, b, t: apply_pair_rule(scene, handler, p, s, a, b, t))(
        params, state, qpos, qvel, time
    )
    return new, q, v, resting(scene, new.phase, v)


_rule_batch = eqx.filter_jit(_rules)


@eqx.filter_jit
def _segment(scene: PairScene, handler: PairHandler, params, state: PairState, qpos, qvel, t0):
    """The rule over k recorded steps (n, k, ...) as it runs step by step: per step, whether a world
    touches and whether every world rests, and the rule's memory before that step (stacked)."""

    def body(s, x):
        q, v, t = x
        new, _, _, rest = _rules(scene, handler, params, s, q, v, jnp.full(q.shape[0], t))
        return new, (s, jnp.any(new.impacts > s.impacts), jnp.all(rest))

    k = qpos.shape[1]
    times = t0 + scene.dt * jnp.arange(1, k + 1)
    _, out = jax.lax.scan(body, state, (jnp.swapaxes(qpos, 0, 1), jnp.swapaxes(qvel, 0, 1), times))
    return out


def pair_rollouts_c(
    scene: PairScene, handler: PairHandler, params, qpos, qvel, n_steps: int, *, segment: int = 100
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The CPU fallback of `pair_rollouts(..., until_rest=True)`: the same rule between MuJoCo C steps.

    While no world is in a window the engine runs `segment` steps at a time and the
    rule runs over the recorded steps at once
    (`_segment`: the same rule, scanned); at the first step that needs the rule, the batch is put back
    to that step (state and solver warm start) and goes on a step at a time until
    every window is over: the same steps as going one at a time all along, about 4x
    faster on the example scene, where the C engine's own time is then most of the cost.

    Returns:
        (qpos (n, nq), qvel (n, nv), {"impacts", "t_first", "steps"}) at the end: once every
        world is at rest, or after `n_steps`.
    """
    params = np.asarray(params, np.float64)
    n = len(params)
    batch = _batch.make_batch(scene.c_model(hybrid=True), scene.space, scene.rows(hybrid=True), params, nsim=n)
    q, v = np.array(qpos, np.float64), np.array(qvel, np.float64)
    pre = np.asarray(scene.pair_state(q, v))
    seps = jax.vmap(scene.separation)(jnp.asarray(q))
    state = jax.vmap(_memory)(seps, jnp.asarray(pre))
    _batch.reset(batch, q, v)
    taken, record, dt = 0, ("qpos", "qvel", "qacc_warmstart"), scene.dt
    while taken < n_steps:
        t = jnp.full(n, taken * dt)
        was = np.asarray(state.phase) == WINDOW
        state, qj, vj, rest = _rule_batch(scene, handler, jnp.asarray(params), state, jnp.asarray(q), jnp.asarray(v), t)
        if taken > 0 and bool(np.all(rest)):
            break
        ruled = was | (np.asarray(state.phase) == WINDOW)  # the worlds whose state the rule set (others keep float64)
        if ruled.any():
            batch.bind("qpos")[ruled] = np.asarray(qj, np.float64)[ruled]
            batch.bind("qvel")[ruled] = np.asarray(vj, np.float64)[ruled]
        free = not np.any(np.asarray(state.phase) == WINDOW)
        rec = _batch.advance(batch, segment if free else 1, record=record)  # one segment length: one compile
        k, stop = rec["qpos"].shape[1], 0
        if free:  # the first recorded step the rule acts on, and its memory there
            before, hit, rest = _segment(
                scene,
                handler,
                jnp.asarray(params),
                state,
                jnp.asarray(rec["qpos"]),
                jnp.asarray(rec["qvel"]),
                taken * dt,
            )
            flagged = np.flatnonzero(np.asarray(hit) | np.asarray(rest))
            stop = min(int(flagged[0]) if len(flagged) else k - 1, n_steps - taken - 1)
            state = jax.tree.map(lambda a, j=stop: a[j], before)
        q, v = rec["qpos"][:, stop], rec["qvel"][:, stop]
        taken += stop + 1
        if stop < k - 1:  # the batch ran past the step that needs the rule: put it back there
            _batch.reset(batch, q, v, time=taken * dt, warmstart=rec["qacc_warmstart"][:, stop])
    info = {"impacts": np.asarray(state.impacts), "t_first": np.asarray(state.t_first), "steps": np.array(taken)}
    return q, v, info


def _memory(sep: Float[Array, ""], pre: Float[Array, " d"], data: mjx.Data | None = None) -> PairState:
    """The rule's memory at launch: free, armed, no impact yet (`data` None: the C fallback's)."""
    zero = jnp.array(0)
    return PairState(data, jnp.array(FREE), jnp.array(True), sep, zero, pre, pre, zero, jnp.array(jnp.nan, pre.dtype))


def full_rollouts_c(scene: PairScene, params, qpos, qvel, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference: full-contact MuJoCo C for `n_steps` from launch; the final (qpos, qvel)."""
    batch = _batch.make_batch(
        scene.c_model(), scene.space, scene.rows(), np.asarray(params, np.float64), nsim=len(params)
    )
    rec = _batch.rollout(batch, np.asarray(qpos), np.asarray(qvel), n_steps, record=("qpos", "qvel"))
    return rec["qpos"][:, -1], rec["qvel"][:, -1]

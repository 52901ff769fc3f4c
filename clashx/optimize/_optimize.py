"""Model-based strike optimisation: CMA-ES (evosax) over batched rollouts (CLASH's model-based optimisation, its Tables IV and V).

A strike (θ, θ1, v_pre) is searched in the unit cube of its ranges (SCENE.md
Table II).  A candidate is clipped into the cube before it is simulated, and its
fitness is the final pose error plus the squared distance it was clipped by
(which keeps the search inside the ranges):

    fitness = ‖p_xy − g_xy‖ + w · |wrap(p_yaw − g_yaw)| + ‖u − clip(u)‖²

with w = `MBOConfig.yaw_weight` (m per rad).  Poses are in the frame of the
block's start pose, so one simulated scene serves every start on flat ground.

Two drivers share the fitness and the CMA-ES state, both for many targets at
once (the CMA-ES states vmapped over targets, each generation's targets ×
population rollouts one batch; one target is the case t = 1):

* `optimize_many_jit`: ask → evaluate → tell for all generations in one jitted
  `lax.scan` (the evaluator must be a JAX function: the MJX hybrid, MJX);
* `optimize_many_host`: jitted ask and tell around an evaluator on the host
  (numpy: the MuJoCo C engines, the CPU hybrid fallback).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from evosax.algorithms import CMA_ES

from .. import hybrid as _hybrid
from ..core import (
    Array,
    Float,
    ParameterError,
    PRNGKeyArray,
    block_size,
    cmaes_in_box,
    map_batched,
    on_host,
    resolve_engine,
    short_repr,
)
from ..hybrid import Handler, StrikeHybrid, strike_rollout
from ..scenes import (
    SolverSettings,
    StrikeScene,
    make_strike_scene,
    simulate_strike,
    simulate_strikes_c,
    strike_world_bytes,
)
from ..scenes import geometry as geo
from ..surrogate import shipped_strike_surrogate

_LOW = jnp.asarray(geo.STRIKE_LOW)
_HIGH = jnp.asarray(geo.STRIKE_HIGH)


class MBOConfig(eqx.Module):
    """CMA-ES settings of a strike search.

    Attributes:
        population: candidates per generation.
        generations: generations (population × generations rollouts in all).
        std_init: initial step size, in units of the strike ranges.
        yaw_weight: metres of position error one radian of yaw error costs (0.035 m/rad:
            about the blocks' radius of gyration, so a turn costs what it moves a corner).
    """

    population: int = eqx.field(static=True, default=16)
    generations: int = eqx.field(static=True, default=20)
    std_init: float = eqx.field(static=True, default=0.25)
    yaw_weight: float = eqx.field(static=True, default=0.035)

    def check(self) -> MBOConfig:
        """Raise a ValueError naming the setting if one is out of range."""
        if self.population < 4:
            raise ValueError(f"population must be at least 4 (CMA-ES needs a few candidates), got {self.population}")
        if self.generations < 1:
            raise ValueError(f"generations must be at least 1, got {self.generations}")
        if not self.std_init > 0:
            raise ValueError(f"std_init must be positive, got {self.std_init}")
        return self


class MBOResult(eqx.Module):
    """The outcome of one strike search.

    Attributes:
        strike: the best strike seen (θ, θ1, v_pre).
        rest_pose: its predicted rest pose, in the start pose's frame (x, y, yaw).
        fitness: its fitness.
        history: best fitness per generation, (generations,).
    """

    strike: Float[Array, "3"]
    rest_pose: Float[Array, "3"]
    fitness: Float[Array, ""]
    history: Float[Array, "g"]

    def __repr__(self) -> str:
        return short_repr(self)


def strikes_of_unit(u: Float[Array, "n 3"]) -> Float[Array, "n 3"]:
    """Strikes from points of the unit cube (clipped into it) over SCENE.md's ranges."""
    return _LOW + jnp.clip(u, 0.0, 1.0) * (_HIGH - _LOW)


def clip_to_ranges(strikes) -> np.ndarray:
    """Strikes as float64, clipped into SCENE.md's ranges (float32 rounding can step 1e-8 outside them)."""
    return np.clip(np.asarray(strikes, np.float64), geo.STRIKE_LOW, geo.STRIKE_HIGH)


def wrap(angle):
    """Angle wrapped into (-π, π]."""
    return jnp.arctan2(jnp.sin(angle), jnp.cos(angle))


def pose_error(
    pose: Float[Array, "... 3"], target: Float[Array, "3"]
) -> tuple[Float[Array, "..."], Float[Array, "..."]]:
    """(position error in m, |yaw error| in rad) of poses against target poses (broadcast)."""
    pose, target = jnp.asarray(pose), jnp.asarray(target)
    return jnp.linalg.norm(pose[..., :2] - target[..., :2], axis=-1), jnp.abs(wrap(pose[..., 2] - target[..., 2]))


def to_start_frame(pose: Float[Array, "3"], start: Float[Array, "3"]) -> Float[Array, "3"]:
    """A world pose expressed in the frame of the block's start pose."""
    pose, start = jnp.asarray(pose, jnp.float32), jnp.asarray(start, jnp.float32)
    xy = geo.rot2(-start[2]) @ (pose[:2] - start[:2])
    return jnp.concatenate([xy, wrap(pose[2] - start[2])[None]])


def to_world(pose: Float[Array, "3"], start: Float[Array, "3"]) -> Float[Array, "3"]:
    """A pose in the start pose's frame expressed in the world (inverse of `to_start_frame`)."""
    pose, start = jnp.asarray(pose, jnp.float32), jnp.asarray(start, jnp.float32)
    xy = start[:2] + geo.rot2(start[2]) @ pose[:2]
    return jnp.concatenate([xy, wrap(pose[2] + start[2])[None]])


def fitness(u: Float[Array, "n 3"], poses: Float[Array, "n 3"], target: Float[Array, "3"], config: MBOConfig):
    """The CMA-ES fitness of candidates `u` whose rollouts ended at `poses` (module docstring)."""
    pos, yaw = pose_error(poses, target)
    clip = jnp.sum((u - jnp.clip(u, 0.0, 1.0)) ** 2, axis=-1)
    f = pos + config.yaw_weight * yaw + clip
    return jnp.where(jnp.isfinite(f), f, 1e3)


def _strategy(config: MBOConfig):
    es = CMA_ES(population_size=config.population, solution=jnp.zeros(3))
    return es, es.default_params.replace(std_init=config.std_init)


def _init(config: MBOConfig, key):
    es, p = _strategy(config)
    return es.init(key, jnp.full(3, 0.5), p)


def _ask(config: MBOConfig, state, key):
    es, p = _strategy(config)
    return es.ask(key, state, p)


def _tell(config: MBOConfig, state, pop, fit, key):
    es, p = _strategy(config)
    state, _ = es.tell(key, pop, fit, state, p)
    return state


def _keep_best(best, pop, poses, fit):
    i = jnp.argmin(fit)
    better = fit[i] < best[2]
    return tuple(jnp.where(better, new, old) for new, old in zip((pop[i], poses[i], fit[i]), best))


def _result(best, history) -> MBOResult:
    u, pose, f = best
    return MBOResult(strike=strikes_of_unit(u[None])[0], rest_pose=pose, fitness=f, history=history)


def _first(tree):
    return jax.tree.map(lambda x: x[0], tree)


# The searches of many targets share one CMA-ES rule, vmapped over targets: target i's search
# splits keys[i] exactly as a search of that target alone would, so its candidates are the same.


def _start(config: MBOConfig, keys):
    """Per target: (CMA-ES state, the best so far) and the generations' keys (generations, targets, 2)."""
    k_init, rest = jax.vmap(lambda k: tuple(jax.random.split(k)))(keys)
    state = jax.vmap(lambda k: _init(config, k))(k_init)
    gens = jnp.swapaxes(jax.vmap(lambda k: jax.random.split(k, config.generations))(rest), 0, 1)
    t = keys.shape[0]
    best = (jnp.full((t, 3), 0.5), jnp.zeros((t, 3)), jnp.full(t, jnp.inf))
    return state, best, gens


def _ask_all(config: MBOConfig, state, keys):
    """Every target's candidates (targets, population, 3), the ask and tell keys, the asked state."""
    k_ask, k_tell = jax.vmap(lambda k: tuple(jax.random.split(k)))(keys)
    pop, state = jax.vmap(lambda s, k: _ask(config, s, k))(state, k_ask)
    return pop, state, k_tell


def _tell_all(config: MBOConfig, state, best, pop, poses, targets, k_tell):
    """Fitness, tell and best-so-far of every target: poses (targets, population, 3)."""
    fit = jax.vmap(lambda u, p, g: fitness(u, p, g, config))(pop, poses, targets)
    state = jax.vmap(lambda s, u, f, k: _tell(config, s, u, f, k))(state, pop, fit, k_tell)
    return state, jax.vmap(_keep_best)(best, pop, poses, fit)


@eqx.filter_jit
def optimize_many_jit(
    evaluate: Callable[[Float[Array, "n 3"]], Float[Array, "n 3"]],
    targets: Float[Array, "t 3"],
    config: MBOConfig,
    *,
    keys: PRNGKeyArray,
) -> MBOResult:
    """CMA-ES for many targets at once, every generation's ask, rollouts and tell in one jitted scan.

    The CMA-ES states are vmapped over targets; each generation evaluates
    targets × population strikes as one batch (`evaluate` splits it as the
    batching policy says: one vmap on an accelerator).  Target i's search is the
    one `optimize_jit(evaluate, targets[i], config, key=keys[i])` runs.

    Args:
        evaluate: strikes (n, 3) → rest poses (n, 3) in the start frame; a JAX function
            (e.g. a `HybridEvaluator`), closed over its model.
        targets: (t, 3) target poses in their start frames (x, y, yaw).
        config: population, generations, step size, yaw weight.
        keys: (t, 2) PRNG keys, one per target.

    Returns:
        An `MBOResult` whose fields have a leading axis of t targets.
    """
    targets = jnp.asarray(targets, jnp.float32)
    t, p = targets.shape[0], config.population
    state, best, gens = _start(config, keys)

    def generation(carry, k):
        state, best = carry
        pop, state, k_tell = _ask_all(config, state, k)
        poses = jnp.asarray(evaluate(strikes_of_unit(pop.reshape(t * p, 3))), jnp.float32).reshape(t, p, 3)
        state, best = _tell_all(config, state, best, pop, poses, targets, k_tell)
        return (state, best), best[2]

    (_, best), history = jax.lax.scan(generation, (state, best), gens)
    return jax.vmap(_result)(best, history.T)


def optimize_jit(
    evaluate: Callable[[Float[Array, "n 3"]], Float[Array, "n 3"]],
    target: Float[Array, "3"],
    config: MBOConfig,
    *,
    key: PRNGKeyArray,
) -> MBOResult:
    """CMA-ES for one target over a JAX evaluator (`optimize_many_jit` with one target).

    Args:
        evaluate: strikes (population, 3) → rest poses (population, 3) in the start frame;
            a JAX function (e.g. `jax.vmap` of `clashx.strike_rollout`), closed over its model.
        target: the target pose in the start frame (x, y, yaw).
        config: population, generations, step size, yaw weight.
        key: PRNG key (same key, same search).

    Returns:
        An `MBOResult`.
    """
    return _first(optimize_many_jit(evaluate, jnp.asarray(target)[None], config, keys=jnp.asarray(key)[None]))


_start_j = eqx.filter_jit(_start)
_ask_all_j = eqx.filter_jit(_ask_all)
_tell_all_j = eqx.filter_jit(_tell_all)


def optimize_many_host(
    evaluate: Callable[[np.ndarray], np.ndarray],
    targets: Float[Array, "t 3"],
    config: MBOConfig,
    *,
    keys: PRNGKeyArray,
    progress: Callable[[int, int], None] | None = None,
) -> MBOResult:
    """CMA-ES for many targets over a host evaluator (numpy in, numpy out: MuJoCo C, the CPU hybrid).

    The same searches as `optimize_many_jit` (same keys, same candidates while the
    evaluators agree): ask and tell are jitted and vmapped over targets, and each
    generation hands the evaluator targets × population strikes at once (MuJoCo C
    splits them over its threads).  `progress(done, total)` is called after each generation.
    """
    targets = jnp.asarray(targets, jnp.float32)
    t, p = targets.shape[0], config.population
    with on_host():  # ask and tell on the CPU: the same searches on a laptop and a GPU machine
        state, best, gens = _start_j(config, jnp.asarray(keys))
    history = []
    for g, k in enumerate(gens):
        with on_host():
            pop, state, k_tell = _ask_all_j(config, state, k)
        strikes = np.asarray(strikes_of_unit(pop.reshape(t * p, 3)), np.float64)
        poses = np.asarray(evaluate(strikes), np.float32).reshape(t, p, 3)
        with on_host():
            state, best = _tell_all_j(config, state, best, pop, jnp.asarray(poses), targets, k_tell)
        history.append(best[2])
        if progress is not None:
            progress(g + 1, config.generations)
    return jax.vmap(_result)(best, jnp.stack(history, 1))


def optimize_host(
    evaluate: Callable[[np.ndarray], np.ndarray],
    target: Float[Array, "3"],
    config: MBOConfig,
    *,
    key: PRNGKeyArray,
    progress: Callable[[int, int], None] | None = None,
) -> MBOResult:
    """CMA-ES for one target over a host evaluator (`optimize_many_host` with one target)."""
    keys = jnp.asarray(key)[None]
    return _first(optimize_many_host(evaluate, jnp.asarray(target)[None], config, keys=keys, progress=progress))


def describe(result: MBOResult, start, target) -> dict:
    """A JSON-ready summary of a search: the strike, the predicted rest pose (world) and its errors."""
    rest = np.asarray(to_world(result.rest_pose, jnp.asarray(start)), float)
    pos, yaw = pose_error(jnp.asarray(rest), jnp.asarray(target, jnp.float32))
    return {
        "strike": dict(zip(geo.STRIKE_NAMES, clip_to_ranges(result.strike).tolist(), strict=True)),
        "predicted_rest_pose": rest.tolist(),
        "predicted_pos_err_m": float(pos),
        "predicted_ori_err_rad": float(yaw),
        "fitness": float(result.fitness),
        "history": np.asarray(result.history, float).tolist(),
        "start": [float(v) for v in start],
        "target": [float(v) for v in target],
    }


# --- evaluators: strikes → rest poses, one per engine --------------------------------------------

ENGINES = ("mjx-hybrid", "cpu-hybrid", "mujoco-c", "mjx", "mujoco-c-two-phase")


class HybridEvaluator(eqx.Module):
    """Rest poses of strikes in the MJX hybrid (a pytree, so one compile serves every target)."""

    hs: StrikeHybrid
    handler: Handler
    params: Float[Array, "p"]

    def __call__(self, strikes: Float[Array, "n 3"]) -> Float[Array, "n 3"]:
        # the batching policy's blocks, chosen when traced (one vmap on an accelerator)
        b = block_size(strikes.shape[0], world=strike_world_bytes(self.hs.sim))
        return map_batched(
            lambda s: strike_rollout(self.hs, self.handler, s, self.params).rest_pose, strikes, batch_size=b
        )


class MJXEvaluator(eqx.Module):
    """Rest poses of strikes in MJX with full contact (the scene's two models and timesteps)."""

    sim: StrikeScene
    params: Float[Array, "p"]

    def __call__(self, strikes: Float[Array, "n 3"]) -> Float[Array, "n 3"]:
        b = block_size(strikes.shape[0], world=strike_world_bytes(self.sim))
        return map_batched(lambda s: simulate_strike(self.sim, s, self.params).rest_pose, strikes, batch_size=b)


def cached_scene(sims: dict, shape: str, dt_slide: float):
    """The strike scene of `shape` with slide step `dt_slide`, built once per `sims` cache."""

    k = (shape, dt_slide)
    if k not in sims:
        sims[k] = make_strike_scene(shape, SolverSettings(dt_slide=dt_slide))
    return sims[k]


def cached_hybrid(sims: dict, shape: str):
    """The hybrid scene of `shape` (on the default strike scene), built once per `sims` cache."""

    k = (shape, "hybrid")
    if k not in sims:
        sims[k] = _hybrid.make_strike_hybrid(shape, sim=cached_scene(sims, shape, SolverSettings().dt_slide))
    return sims[k]


def make_evaluator(engine: str, shape: str, params, *, handler=None, sims: dict | None = None):
    """The rest-pose evaluator of one engine, with (jit-able, host) flag.

    Engines: "auto" (the hybrid: "mjx-hybrid" on a GPU, "cpu-hybrid" elsewhere, as on the command
    line); "mjx-hybrid" and "cpu-hybrid" (the surrogate `handler` at the impact, MJX / MuJoCo C for
    the rest, 4 ms then 8 ms steps; no handler: the shipped surrogate of `shape`); "mujoco-c" and
    "mjx" (full contact at the 1 ms step the striker-block pair needs, for the whole strike);
    "mujoco-c-two-phase" (full contact at 1 ms until release, then 4 ms: what `clashx generate`
    simulates).  `sims` caches the scenes across calls (`cached_scene`, `cached_hybrid`).
    """

    engine = resolve_engine(engine, cpu="cpu-hybrid", accelerator="mjx-hybrid")
    if engine not in ENGINES:
        raise ParameterError("engine", engine, f"expected auto or one of {', '.join(ENGINES)}")
    sims = {} if sims is None else sims
    params = np.asarray(params, np.float64)
    if engine in ("mjx-hybrid", "cpu-hybrid"):
        handler = shipped_strike_surrogate(shape) if handler is None else handler
        hs = cached_hybrid(sims, shape)
        if engine == "mjx-hybrid":
            return HybridEvaluator(hs, handler, jnp.asarray(params, jnp.float32)), True
        return (lambda s: _hybrid.strike_rollouts_c(hs, handler, s, params).rest_pose), False
    dt = SolverSettings().dt_contact if engine in ("mujoco-c", "mjx") else SolverSettings().dt_slide
    sim = cached_scene(sims, shape, dt)
    if engine == "mjx":
        return MJXEvaluator(sim, jnp.asarray(params, jnp.float32)), True
    return (lambda s: simulate_strikes_c(sim, s, np.broadcast_to(params, (len(s), len(params)))).rest_pose), False


def _searches(engine, shape, params, starts, targets, config: MBOConfig, keys, handler, sims, progress) -> MBOResult:
    config.check()
    evaluate, jittable = make_evaluator(engine, shape, params, handler=handler, sims=sims)
    goals = jax.vmap(to_start_frame)(jnp.asarray(targets, jnp.float32), jnp.asarray(starts, jnp.float32))
    if jittable:
        return optimize_many_jit(evaluate, goals, config, keys=keys)
    return optimize_many_host(evaluate, goals, config, keys=keys, progress=progress)


def optimize_strike(
    engine: str, shape: str, params, start, target, config: MBOConfig, *, key, handler=None, sims=None, progress=None
) -> MBOResult:
    """Find the strike that brings the block from `start` to `target` (world poses x, y, yaw) on one engine.

    Args:
        engine: "auto" (the hybrid on this device), "cpu-hybrid", "mjx-hybrid", "mujoco-c", "mjx" or
            "mujoco-c-two-phase" (`make_evaluator`).
        shape: the block's shape.
        params: (p,) the scene's parameters (e.g. identified, `clashx.fit_recording(...).params`).
        start, target: (3,) world poses (x, y, yaw) in m, m, rad.
        config: the CMA-ES search (`MBOConfig`).
        key: PRNG key of the search.
        handler: the impact handler of the hybrid engines (default: the shipped surrogate of `shape`).

    Returns:
        An `MBOResult` whose rest pose is in the start pose's frame (`to_world` maps it back).
    """
    starts, targets = jnp.asarray(start)[None], jnp.asarray(target)[None]
    keys = jnp.asarray(key)[None]
    return _first(_searches(engine, shape, params, starts, targets, config, keys, handler, sims, progress))


def optimize_strikes(
    engine: str,
    shape: str,
    params,
    starts: Float[Array, "t 3"],
    targets: Float[Array, "t 3"],
    config: MBOConfig,
    *,
    key: PRNGKeyArray,
    handler=None,
    sims=None,
    progress=None,
) -> MBOResult:
    """`optimize` for t (start, target) pairs at once: one CMA-ES state per target, vmapped, and each
    generation's t × population rollouts in one batch (one vmap on an accelerator; MuJoCo C's threads).

    Target i is searched with key `jax.random.split(key, t)[i]`: the same strikes as
    `optimize_strike(..., start=starts[i], target=targets[i], key=jax.random.split(key, t)[i])`.

    Returns:
        An `MBOResult` with a leading axis of t; rest poses are in each start pose's frame.
    """
    starts, targets = jnp.atleast_2d(jnp.asarray(starts)), jnp.atleast_2d(jnp.asarray(targets))
    if starts.shape != targets.shape or starts.shape[-1] != 3:
        raise ValueError(f"starts {starts.shape} and targets {targets.shape}: need the same (t, 3) poses")
    keys = jax.random.split(key, targets.shape[0])
    return _searches(engine, shape, params, starts, targets, config, keys, handler, sims, progress)


def identify_from_rest(
    rest_of: Callable[[np.ndarray, np.ndarray], np.ndarray],
    space,
    params0,
    strikes: Float[np.ndarray, "n 3"],
    rest: Float[np.ndarray, "n 3"],
    *,
    key: PRNGKeyArray,
    population: int = 16,
    generations: int = 15,
    std_init: float = 0.15,
    yaw_weight: float = 0.035,
    free: tuple[str, ...] | None = None,
) -> tuple[np.ndarray, float]:
    """Parameters refit on observed rest poses, by CMA-ES from a first estimate.

    The second stage of identification for tasks that end at rest
    (`cmaes_in_box` over the unit cube of the prior, started at `params0`):
    the loss is the mean over the fit strikes of ‖Δxy‖ + yaw_weight·|Δyaw|
    between simulated and observed rest poses.

    Args:
        rest_of: (strikes (k, 3), params (k, p)) → rest poses (k, 3) in the start frame, on the host
            (e.g. `clashx.strike_rollouts_c(...).rest_pose`, or MuJoCo C).
        space: the `ParamSpace` of the parameters.
        params0: the first estimate (p,), e.g. from the post-impact velocities.
        strikes, rest: (n, 3) fit strikes and their observed rest poses (start frame).
        key: PRNG key.
        population, generations, std_init: CMA-ES settings (step size in units of the prior's ranges).
        yaw_weight: metres per radian of yaw error.
        free: names of the parameters refit (default: all); the others keep `params0`.

    Returns:
        (params, loss): the best candidate seen (the start counts) and its loss (m).
    """
    strikes = np.asarray(strikes, np.float64)
    rest_j = jnp.asarray(rest, jnp.float32)
    n = len(strikes)
    cols = [space.index(name) for name in (free if free is not None else space.names)]
    u_all = np.clip(np.asarray(space.to_unit(jnp.asarray(params0, jnp.float32)), np.float64), 0.0, 1.0)

    def full(u: np.ndarray) -> np.ndarray:
        out = np.tile(u_all, (len(u), 1))
        out[:, cols] = u
        return out

    def losses(u: np.ndarray) -> np.ndarray:
        phys = np.asarray(space.from_unit(jnp.asarray(full(u))), np.float64)
        poses = np.asarray(rest_of(np.tile(strikes, (len(u), 1)), np.repeat(phys, n, axis=0))).reshape(len(u), n, 3)
        pos, yaw = pose_error(jnp.asarray(poses, jnp.float32), rest_j[None])
        return np.asarray(jnp.mean(pos + yaw_weight * yaw, axis=1))

    u0 = u_all[cols]
    u, loss, _ = cmaes_in_box(
        losses,
        u0,
        key=key,
        population=population,
        generations=generations,
        std_init=std_init,
        best=(u0, float(losses(u0[None])[0])),
    )
    return np.asarray(space.from_unit(jnp.asarray(full(np.asarray(u)[None])[0], jnp.float32)), np.float64), loss

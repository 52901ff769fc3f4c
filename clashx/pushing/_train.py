"""Policies for sequential pushing: trained with brax's PPO, saved without pickles, reloaded to the same actions.

`train_policy` runs `brax.training.agents.ppo.train` on a `PushEnv` (no RL
algorithm is written here) and returns a `Policy`: the network's settings and
its parameters (observation normaliser and policy network), with the learning
curve brax's evaluations measured.  `save_policy` writes `policy.npz` (the
parameters' leaves, in pytree order) and `policy.json` (settings, route,
simulator, curve, cost); `load_policy` rebuilds the network from the settings
and puts the leaves back, so a reloaded policy gives the same actions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from brax.training.acme import running_statistics, specs
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.ppo import train as ppo

from ..core import write_json
from ._env import OBS_SIZE, PushEnv


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """brax PPO's settings for one route (the same for every simulator, so policies compare).

    Attributes:
        timesteps: environment steps (strikes) in all.
        num_envs: episodes run in parallel.
        hidden: the policy network's hidden layer sizes (the value network: twice as wide).
        learning_rate, entropy_cost, discounting, unroll_length, batch_size, num_minibatches,
            num_updates_per_batch: brax PPO's arguments of those names.
        evals: evaluations along training (the learning curve's points).
        seed: PRNG seed of the training run.
    """

    timesteps: int = 3_000_000
    num_envs: int = 512
    hidden: tuple[int, ...] = (64, 64)
    learning_rate: float = 1e-3
    entropy_cost: float = 1e-3
    discounting: float = 0.95
    unroll_length: int = 10
    batch_size: int = 256
    num_minibatches: int = 8
    num_updates_per_batch: int = 4
    evals: int = 10
    seed: int = 0

    def total_steps(self) -> int:
        """The environment steps brax PPO will run: `timesteps` rounded up to whole training steps per evaluation."""
        per_update = self.batch_size * self.unroll_length * self.num_minibatches
        evals = max(self.evals - 1, 1)
        return evals * per_update * math.ceil(self.timesteps / (evals * per_update))

    def check(self) -> PPOConfig:
        """Raise a ValueError naming the setting if one is out of range."""
        if self.timesteps < 1:
            raise ValueError(f"--timesteps must be positive, got {self.timesteps}")
        if (self.batch_size * self.num_minibatches) % self.num_envs:
            raise ValueError(
                f"batch_size × num_minibatches ({self.batch_size * self.num_minibatches}) must be a multiple of "
                f"num_envs ({self.num_envs}) for brax PPO"
            )
        if self.evals < 1:
            raise ValueError(f"evals must be at least 1, got {self.evals}")
        return self


@functools.lru_cache(maxsize=8)
def _networks(config: PPOConfig):
    # cached, and brax builds example arrays while making them: concrete even when first made inside a jit
    with jax.ensure_compile_time_eval():
        return _make_networks(config)


def _make_networks(config: PPOConfig):
    return ppo_networks.make_ppo_networks(
        OBS_SIZE,
        3,
        preprocess_observations_fn=running_statistics.normalize,
        policy_hidden_layer_sizes=config.hidden,
        value_hidden_layer_sizes=tuple(2 * h for h in config.hidden),
    )


@dataclasses.dataclass(frozen=True)
class Policy:
    """A trained pushing policy.

    Attributes:
        config: the PPO settings it was trained with (the network's shape among them).
        params: (normaliser state, policy network parameters), brax's pytrees.
        route: the route number.
        simulator: "mujoco" or "clashx".
        curve: [(environment steps, mean episode return)] from brax's evaluations.
        info: training cost and anything else recorded (JSON-able).
    """

    config: PPOConfig
    params: Any
    route: int
    simulator: str
    curve: list[tuple[int, float]]
    info: dict[str, Any]

    def act(self, obs):
        """The deterministic action (the policy's mode) for observation(s) `obs` (…, 13), in [-1, 1]³."""
        return _actor(self.config)(self.params, jnp.asarray(obs, jnp.float32))


@functools.lru_cache(maxsize=8)
def _actor(config: PPOConfig):
    networks = _networks(config)

    @jax.jit
    def act(params, obs):
        logits = networks.policy_network.apply(params[0], params[1], obs)
        return networks.parametric_action_distribution.mode(logits)

    return act


@contextlib.contextmanager
def _brax_on_jax_0_10():
    """brax 0.14 calls `jax.device_put_replicated`, which JAX 0.10 keeps (`jax._src.api`) but no longer exports.

    For the call only, the name is bound to JAX's own function (nothing is reimplemented); a brax that no
    longer needs it leaves `jax` untouched.
    """
    from jax._src import api

    missing = "device_put_replicated" not in jax.__dict__
    if missing:
        jax.device_put_replicated = api.device_put_replicated  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if missing:
            del jax.device_put_replicated  # type: ignore[attr-defined]


def train_policy(
    env: PushEnv, config: PPOConfig, *, progress: Callable[[int, dict[str, float]], None] | None = None
) -> Policy:
    """Train a policy on `env` with brax PPO.

    Args:
        env: the route and simulator.
        config: PPO's settings.
        progress: called after each evaluation with (steps, {"return", "success", "reached"}).

    Returns:
        The `Policy`, with its curve and cost (`info`: steps, wall seconds, seconds spent compiling before the
        first evaluation, and the last evaluation's success rate and sub-goals per episode in the simulator).
    """
    config.check()
    curve: list[tuple[int, float]] = []
    t0 = time.perf_counter()
    first: list[float] = []
    last: dict[str, float] = {}

    def on_eval(steps, metrics):
        if not first:
            first.append(time.perf_counter() - t0)
        ret = float(metrics.get("eval/episode_reward", np.nan))
        curve.append((int(steps), ret))
        last["success"] = float(metrics.get("eval/episode_success", np.nan))
        last["reached"] = float(metrics.get("eval/episode_reached", np.nan))
        if progress is not None:
            progress(
                int(steps),
                {
                    "return": ret,
                    "success": float(metrics.get("eval/episode_success", np.nan)),
                    "reached": float(metrics.get("eval/episode_reached", np.nan)),
                },
            )

    with _brax_on_jax_0_10():
        _, params, _ = _run_ppo(env, config, on_eval)
    wall = time.perf_counter() - t0
    info = {
        "env_steps": int(curve[-1][0]) if curve else 0,  # what ran: --timesteps rounded up to whole PPO updates
        "timesteps_requested": config.timesteps,
        "wall_s": wall,
        "first_eval_s": first[0] if first else 0,
        "sim_success": last.get("success", float("nan")),  # brax's last evaluation, in the training simulator
        "sim_reached": last.get("reached", float("nan")),
    }
    return Policy(config, (params[0], params[1]), env.route.number, env.backend, curve, info)


def _run_ppo(env: PushEnv, config: PPOConfig, on_eval):
    return ppo.train(
        environment=env,
        num_timesteps=config.timesteps,
        episode_length=env.route.budget,
        num_envs=config.num_envs,
        learning_rate=config.learning_rate,
        entropy_cost=config.entropy_cost,
        discounting=config.discounting,
        unroll_length=config.unroll_length,
        batch_size=config.batch_size,
        num_minibatches=config.num_minibatches,
        num_updates_per_batch=config.num_updates_per_batch,
        num_evals=config.evals,
        num_eval_envs=128,
        normalize_observations=True,
        network_factory=functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=config.hidden,
            value_hidden_layer_sizes=tuple(2 * h for h in config.hidden),
        ),
        seed=config.seed,
        progress_fn=on_eval,
    )


def _template(config: PPOConfig):
    nets = _networks(config)
    normalizer = running_statistics.init_state(specs.Array((OBS_SIZE,), jnp.dtype("float32")))
    return (normalizer, nets.policy_network.init(jax.random.PRNGKey(0)))


def save_policy(policy: Policy, out: str) -> None:
    """Write `out/policy.npz` (parameter leaves) and `out/policy.json` (settings, route, simulator, curve, cost)."""
    os.makedirs(out, exist_ok=True)
    leaves = jax.tree.leaves(policy.params)
    arrays: dict[str, Any] = {f"leaf_{i:03d}": np.asarray(x) for i, x in enumerate(leaves)}
    bad = [k for k, x in arrays.items() if np.issubdtype(x.dtype, np.inexact) and not np.isfinite(x).all()]
    if bad:
        raise ValueError(f"{out}: the trained policy has non-finite weights ({bad[:3]}); nothing was written")
    tmp = os.path.join(out, "policy.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, os.path.join(out, "policy.npz"))
    meta = {
        "route": policy.route,
        "simulator": policy.simulator,
        "config": dataclasses.asdict(policy.config),
        "curve": [list(p) for p in policy.curve],
        "info": policy.info,
    }
    write_json(os.path.join(out, "policy.json"), meta)


def load_policy(path: str) -> Policy:
    """Read a policy written by `save_policy` (a folder holding policy.npz and policy.json)."""
    meta_path, npz_path = os.path.join(path, "policy.json"), os.path.join(path, "policy.npz")
    for p in (meta_path, npz_path):
        if not os.path.exists(p):
            raise ValueError(f"{path}: no {os.path.basename(p)} here (write a policy with `clashx train-policy`)")
    with open(meta_path) as f:
        meta = json.load(f)
    raw = dict(meta["config"])
    raw["hidden"] = tuple(raw["hidden"])
    config = PPOConfig(**raw)
    template = _template(config)
    with np.load(npz_path, allow_pickle=False) as z:
        leaves = [z[k] for k in sorted(z.files)]
    want = jax.tree.leaves(template)
    if len(leaves) != len(want) or any(a.shape != np.shape(b) for a, b in zip(leaves, want)):
        raise ValueError(f"{npz_path}: its arrays do not fit the network of {meta_path} (a file from another version?)")
    params = jax.tree.unflatten(jax.tree.structure(template), [jnp.asarray(x) for x in leaves])
    curve = [(int(s), float(r)) for s, r in meta["curve"]]
    return Policy(config, params, int(meta["route"]), str(meta["simulator"]), curve, meta["info"])

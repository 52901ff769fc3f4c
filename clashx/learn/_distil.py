"""Distilling the simulator again where it is used: the surrogate refined around identified parameters.

Pretraining spreads the surrogate's capacity over the whole prior of eight
parameters; once the parameters are identified, only their neighbourhood
matters.  `distil_locally` simulates fresh strikes (MuJoCo C on a CPU, MJX in
one vmap on an accelerator: `LocalDistilConfig.engine`) with
parameters drawn close to the identified ones (a Gaussian of `spread` of each
prior range, clipped to the prior) and takes Adam steps on all weights
against them (velocity and window displacement, `release_loss`), so the
surrogate's own error where it is used shrinks to what it can learn from a
few thousand strikes.  Nothing real enters: this is the distillation step
again, local.

Measured on lab A's square (ten fit strikes, 200 test strikes): the
surrogate at the identified parameters scored α = 0.1 accuracy 0.66 against
the lab, MuJoCo C at the same parameters 0.715, the locally distilled
surrogate 0.735 (4096 strikes, 600 steps, 19 s on 2 cores).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..core import PRNGKeyArray, Result, resolve_engine
from ..events import sample_strikes
from ..scenes import StrikeScene, block_pose, simulate_strikes_c, simulate_strikes_mjx
from ..scenes import geometry as geo
from ..surrogate import StrikeSurrogate, release_loss, window_displacement


@dataclasses.dataclass(frozen=True)
class LocalDistilConfig:
    """How `distil_locally` refines.

    Attributes:
        n: strikes simulated (uniform over SCENE.md's strike ranges).
        spread: σ of the parameters around the identified ones, in units of each prior range.
        steps: Adam steps; batch: strikes per step; lr: learning rate.
        engine: where the fresh strikes are simulated: "c" (MuJoCo C on every core), "mjx" (one
            vmap on the JAX device, as the batching policy allows) or "auto" ("c" where JAX has only
            a CPU or TPU, "mjx" on a GPU: `clashx.core.resolve_engine`); the report names the one that ran.
    """

    n: int = 4096
    spread: float = 0.05
    steps: int = 600
    batch: int = 512
    lr: float = 3e-4
    engine: str = "auto"

    def __post_init__(self):
        if self.engine not in ("auto", "c", "mjx"):
            raise ValueError(f"local distillation engine {self.engine!r}: expected auto, c or mjx")
        if self.n < 16 or self.steps < 0 or self.batch < 1 or not self.lr > 0 or not self.spread >= 0:
            raise ValueError(f"local distillation needs n >= 16, steps >= 0, batch >= 1, lr > 0, spread >= 0: {self}")


def local_data(sim: StrikeScene, params: np.ndarray, *, key: PRNGKeyArray, config: LocalDistilConfig):
    """(strikes, parameters, outcomes (n, 6)) of strikes simulated around `params` (touched ones), on
    `config.engine` (MuJoCo C, or MJX in one vmap on an accelerator)."""
    k_s, k_p = jax.random.split(key)
    space = sim.space
    strikes = np.asarray(sample_strikes(config.n, key=k_s), np.float64)
    u0 = np.asarray(space.to_unit(jnp.asarray(params)), np.float64)
    u = np.clip(u0 + config.spread * np.asarray(jax.random.normal(k_p, (config.n, space.size))), 0.0, 1.0)
    p = np.asarray(space.from_unit(jnp.asarray(u)), np.float64)
    if resolve_engine(config.engine, cpu="c", accelerator="mjx") == "mjx":
        ev = jax.tree.map(np.asarray, simulate_strikes_mjx(sim, jnp.asarray(strikes), jnp.asarray(p), to_rest=False))
    else:
        ev = simulate_strikes_c(sim, strikes, p, to_rest=False)
    ok = np.asarray(ev.touched)
    start = np.broadcast_to(np.asarray(block_pose(sim.block_rest), np.float64), (int(ok.sum()), 3))
    disp = np.asarray(window_displacement(start, np.asarray(ev.release_pose, np.float64)[ok]), np.float64)
    post = np.asarray(ev.post_velocity, np.float64)[ok]
    return strikes[ok], p[ok], np.concatenate([post, disp], 1)


@dataclasses.dataclass(frozen=True, repr=False)
class DistilResult(Result):
    """What `distil_locally` returns.

    Attributes:
        model: the refined surrogate.
        strikes: MuJoCo strikes simulated around the parameters.
        engine: the engine that simulated them.
        loss_before, loss_after: the release loss on those strikes before and after.
        simulate_s, train_s: the time spent simulating and training (s).
        config: the settings, as JSON.
    """

    model: StrikeSurrogate
    strikes: int
    engine: str
    loss_before: float
    loss_after: float
    simulate_s: float
    train_s: float
    config: dict[str, Any]


def distil_locally(
    model: StrikeSurrogate,
    sim: StrikeScene,
    params: np.ndarray,
    *,
    key: PRNGKeyArray,
    config: LocalDistilConfig | None = None,
) -> DistilResult:
    """The surrogate refined on MuJoCo C strikes around `params` (module docstring).

    Returns:
        A `DistilResult`: the refined model, its loss before and after on the local strikes, the timings.
    """
    config = config or LocalDistilConfig()
    k_data, k_steps = jax.random.split(key)
    t0 = time.perf_counter()
    strikes, p, out = local_data(sim, params, key=k_data, config=config)
    t_sim = time.perf_counter() - t0
    s, p, out = jnp.asarray(strikes, jnp.float32), jnp.asarray(p, jnp.float32), jnp.asarray(out, jnp.float32)
    length = geo.characteristic_length(model.shape)
    t0 = time.perf_counter()
    tuned, before, after = _train(model, s, p, out, k_steps, config, length)
    return DistilResult(
        tuned, int(len(strikes)), resolve_engine(config.engine, cpu="c", accelerator="mjx"), float(before),
        float(after), t_sim, time.perf_counter() - t0, dataclasses.asdict(config),
    )  # fmt: skip


@eqx.filter_jit
def _train(model, strikes, params, outcomes, key, config: LocalDistilConfig, length: float):
    weights, static = eqx.partition(model, eqx.is_inexact_array)
    opt = optax.adam(config.lr)

    def loss(w, idx):
        m = eqx.combine(w, static)
        return release_loss(jax.vmap(m.release)(strikes[idx], params[idx]), outcomes[idx], length)

    def body(carry, k):
        w, state = carry
        idx = jax.random.randint(k, (config.batch,), 0, strikes.shape[0])
        g = jax.grad(loss)(w, idx)
        upd, state = opt.update(g, state, w)
        return (optax.apply_updates(w, upd), state), None

    every = jnp.arange(strikes.shape[0])
    before = loss(weights, every)
    (weights, _), _ = jax.lax.scan(body, (weights, opt.init(weights)), jax.random.split(key, config.steps))
    return eqx.combine(weights, static), before, loss(weights, every)

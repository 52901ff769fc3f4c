"""`clashx train-policy`: a sequential-pushing policy trained with brax PPO in MuJoCo or in clashx's hybrid.

The route's simulator is tabulated once (`clashx.pushing.build_table`: MuJoCo C
or the CPU hybrid at the identified parameters, and at `draws - 1` draws around
them for domain randomisation); the table is kept in the output folder and
reused when the command is run again with the same inputs.  The policy
(`policy.npz`, `policy.json`) and its learning curve (`curve.png`) go beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ..core import check_output
from ..pushing import (
    GRID,
    SHAPE,
    SIMULATORS,
    Policy,
    PPOConfig,
    PushEnv,
    StrikeTable,
    build_table,
    load_table,
    param_draws,
    route,
    save_policy,
    save_table,
    simulator,
    train_policy,
)
from ..scenes import strike_space
from ..surrogate import load_or_shipped
from ._progress import ProgressBar
from ._strike_workflow import read_param_file, read_param_std


def tabulate(
    sim: str,
    params: np.ndarray,
    std: np.ndarray | None,
    draws: int,
    *,
    handler=None,
    model_name: str = "",
    seed: int = 0,
    cache: str | None = None,
    sims: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> StrikeTable:
    """The simulator's strike table at `params` (and `draws - 1` draws of N(params, std)); reused from `cache` if it matches."""

    space = strike_space()
    if draws > 1 and std is None:
        raise ValueError("domain randomisation needs the parameters' σ ('std' in PARAMS.json); or use --draws 1")
    key_meta = {
        "simulator": sim,
        "params": np.round(params, 9).tolist(),
        "std": None if std is None else np.round(std, 9).tolist(),
        "draws": draws,
        "model": model_name,
        "seed": seed,
        "grid": list(GRID),
    }
    digest = hashlib.sha256(json.dumps(key_meta, sort_keys=True).encode()).hexdigest()[:16]
    if cache and os.path.exists(cache):
        table, meta = load_table(cache)
        if meta.get("digest") == digest:
            return table
    all_params = (
        param_draws(params, std, space.low, space.high, draws, key=jax.random.PRNGKey(seed))
        if draws > 1
        else np.asarray(params, np.float64)[None]
    )
    rest_of = simulator(sim, handler=handler, sims=sims)
    table = build_table(rest_of, all_params, sim, progress=progress)
    if cache:
        save_table(table, cache, key_meta | {"digest": digest})
    return table


def plot_curve(policy: Policy, path: str) -> None:
    """The learning curve (mean episode return against environment steps) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, ret = zip(*policy.curve, strict=True) if policy.curve else ((), ())
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(np.asarray(steps) / 1e6, ret, marker="o")
    ax.set_xlabel("environment steps (strikes), millions")
    ax.set_ylabel("mean episode return")
    ax.set_title(f"route {policy.route}, trained in {policy.simulator}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=120)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)


def run_train_policy(
    route_number: int,
    sim: str,
    model_dir: str | None,
    params_path: str,
    out: str,
    config: PPOConfig,
    *,
    draws: int = 8,
    progress: Callable[[str, int, int, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Tabulate the simulator, train the route's policy and write it to `out` (folder); returns a summary.

    `progress(stage, done, total, info)` is called while tabulating ("table") and training ("train").
    """

    r = route(route_number)
    if sim not in SIMULATORS:
        raise ValueError(f"--sim {sim!r}: expected one of {', '.join(SIMULATORS)}")
    if sim == "mujoco" and model_dir:
        raise ValueError("--model is the clashx surrogate; --sim mujoco uses none (drop --model)")
    if draws < 1:
        raise ValueError(f"--draws must be at least 1, got {draws}")
    config.check()
    space = strike_space()
    params = read_param_file(params_path, space, {"shape": SHAPE})  # the routes push the semi-cylinder
    std = read_param_std(params_path, space.names, "or train with --draws 1") if draws > 1 else None
    handler = load_or_shipped(model_dir, SHAPE) if sim == "clashx" else None
    os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    table = tabulate(
        sim,
        params,
        std,
        draws,
        handler=handler,
        model_name=os.path.abspath(model_dir) if model_dir else ("shipped" if handler is not None else ""),
        seed=config.seed,
        cache=os.path.join(out, "table.npz"),
        progress=None if progress is None else (lambda d, n: progress("table", d, n, {})),
    )
    table_s = time.perf_counter() - t0
    env = PushEnv(r, table, randomize=draws > 1)
    policy = train_policy(
        env,
        config,
        progress=None if progress is None else (lambda s, m: progress("train", s, config.total_steps(), m)),
    )
    policy = dataclasses.replace(policy, info=policy.info | {"table_s": table_s, "draws": table.draws})
    save_policy(policy, out)
    plot_curve(policy, os.path.join(out, "curve.png"))
    return {
        "route": route_number,
        "simulator": sim,
        "out": os.path.abspath(out),
        "env_steps": policy.info["env_steps"],
        "train_s": policy.info["wall_s"],
        "table_s": table_s,
        "final_return": policy.curve[-1][1] if policy.curve else float("nan"),
    }


def cmd_train_policy(a: argparse.Namespace) -> int:
    """Train and save a policy, with a progress bar over the table and the training steps."""

    check_output(a.out, "--out", folder=True)
    config = PPOConfig(timesteps=a.timesteps, seed=a.seed).check()
    if config.total_steps() != config.timesteps:
        print(
            f"note: brax PPO trains in whole updates: --timesteps {config.timesteps:,} runs {config.total_steps():,} "
            "strikes (policy.json records both)"
        )
    with ProgressBar("table", "draw") as table_bar, ProgressBar("train", "step") as train_bar:

        def progress(stage, done, total, info):
            if stage == "table":
                table_bar(done, total)
            else:
                post = {k: f"{v:.2f}" for k, v in info.items()}
                train_bar(min(done, total), total, post)

        r = run_train_policy(a.route, a.sim, a.model, a.params, a.out, config, draws=a.draws, progress=progress)
    print(
        f"route {r['route']} in {r['simulator']}: {r['env_steps']} strikes in {r['train_s']:.0f} s "
        f"(+ {r['table_s']:.0f} s tabulating), final mean return {r['final_return']:.2f} -> {r['out']}"
    )
    return 0

"""Throughput of every engine at every batch size: contact-phase collisions/s and rest poses/s, compile apart.

    python bench/throughput.py [--shape square] [--max-batch 256] [--targets 8] [--generate-n N]
                               [--epochs 20] [--sizes 16,64] [--engines E,..]
                               [--parts engines,cmaes,pipeline] [--json OUT]

For each batch size from 16 up to `--max-batch` (×4 steps; default 256 on a CPU,
65536 on an accelerator), on the same seeded strikes and the prior's nominal
parameters:

* contact phase (the collision event, no slide): MJX as clashx runs it
  (`simulate_strikes_mjx`, blocks the batching policy picks: the whole batch on
  an accelerator, 256 on a CPU), MJX in fixed blocks of 256 (what clashx did
  before the policy), MJX as one `jax.vmap` over the whole batch, and MuJoCo C
  on all cores (`simulate_strikes_c`);
* rest poses (one CMA-ES generation's work), through `clashx.optimize.make_evaluator`:
  mjx-hybrid, mjx (full contact), cpu-hybrid, mujoco-c (full contact at 1 ms) and
  mujoco-c-two-phase (1 ms until release, then 4 ms).

* CMA-ES (`--targets` targets, population 16, `--generations`): one target
  at a time (`clashx.optimize.optimize`) against all targets at once
  (`optimize_strikes`: one batch of targets × population per generation), on the
  cpu-hybrid and mjx-hybrid engines;
* `clashx generate` of `--generate-n` strikes (engine auto) and `--epochs`
  epochs of pretraining on them.

The first call of each JAX function at each size is timed apart as compile
time; the run time is the best of `--repeats` calls after it.  The JSON holds
the device, the jax / mujoco / mujoco-mjx versions and every figure.  Engines
whose call at a size would exceed `--budget` seconds (extrapolated from the
size before) are skipped with the reason.  Issue 25 asks for these figures on
a GPU; the defaults run on 2 CPU cores in about 10 minutes (generate 5,000
strikes on a CPU, 100,000 on an accelerator).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from importlib import metadata

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import clashx
from clashx.events import GenerateConfig, generate
from clashx.learn import PretrainConfig, pretrain
from clashx.optimize import MBOConfig, cached_hybrid, make_evaluator, optimize_strike, optimize_strikes
from clashx.scenes import make_strike_scene, sample_strikes, simulate_strike, simulate_strikes_c, simulate_strikes_mjx

REST_ENGINES = ("mjx-hybrid", "mjx", "cpu-hybrid", "mujoco-c", "mujoco-c-two-phase")
CONTACT_ENGINES = ("mjx-policy", "mjx-blocks-256", "mjx-one-vmap", "mujoco-c")


def _timed(fn, repeats: int) -> tuple[float, float]:
    """(first call s, best later call s) of `fn()` (results blocked until ready)."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return first, float(best)


def _contact_fn(engine: str, sim, strikes: np.ndarray, params: np.ndarray):
    """A zero-argument call simulating the contact phase of every strike on `engine`."""
    if engine == "mujoco-c":
        return lambda: simulate_strikes_c(sim, strikes, params, to_rest=False).post_velocity
    s, p = jnp.asarray(strikes), jnp.asarray(params)
    if engine == "mjx-policy":
        return lambda: simulate_strikes_mjx(sim, s, p, to_rest=False).post_velocity
    if engine == "mjx-blocks-256":
        return lambda: simulate_strikes_mjx(sim, s, p, to_rest=False, block=256).post_velocity
    one = eqx.filter_jit(lambda sim, s, p: jax.vmap(lambda a, b: simulate_strike(sim, a, b, to_rest=False))(s, p))
    return lambda: one(sim, s, p).post_velocity


def _rest_fn(engine: str, shape: str, params: np.ndarray, strikes: np.ndarray, handler, sims: dict):
    """A zero-argument call computing the rest pose of every strike on `engine` (`make_evaluator`)."""
    evaluate, jitted = make_evaluator(engine, shape, params, handler=handler, sims=sims)
    if jitted:
        call = eqx.filter_jit(lambda ev, s: ev(s))
        s = jnp.asarray(strikes, jnp.float32)
        return lambda: call(evaluate, s)
    return lambda: evaluate(np.asarray(strikes, np.float64))


def cmaes(shape: str, n_targets: int, generations: int, seed: int, report=print) -> list[dict]:
    """CMA-ES over `n_targets` reachable targets, one at a time and all at once, on both hybrid engines."""
    sim = make_strike_scene(shape)
    params = np.asarray(sim.space.vector(), np.float64)
    handler = clashx.shipped_strike_surrogate(shape)
    sims: dict = {}
    hs = cached_hybrid(sims, shape)
    aims = np.asarray(sample_strikes(n_targets, key=jax.random.PRNGKey(seed + 1)), np.float64)
    targets = np.asarray(clashx.strike_rollouts_c(hs, handler, aims, params).rest_pose)  # reachable
    config = MBOConfig(population=16, generations=generations)
    keys = jax.random.split(jax.random.PRNGKey(seed), n_targets)
    starts = np.zeros((n_targets, 3))
    rows = []
    for engine in ("cpu-hybrid", "mjx-hybrid"):
        kw = dict(handler=handler, sims=sims)

        def one_by_one(engine=engine, kw=kw):
            return [
                optimize_strike(engine, shape, params, starts[i], targets[i], config, key=keys[i], **kw)
                for i in range(n_targets)
            ]

        def together(engine=engine, kw=kw):
            return optimize_strikes(engine, shape, params, starts, targets, config, key=jax.random.PRNGKey(seed), **kw)

        row = {"kind": "cmaes", "engine": engine, "targets": n_targets, "population": 16, "generations": generations}
        for mode, job in (("one_by_one", one_by_one), ("together", together)):
            first, best = _timed(job, 1)
            row[mode] = {"run_s": best, "compile_s": max(first - best, 0.0)}
        row["ratio"] = row["one_by_one"]["run_s"] / row["together"]["run_s"]
        rows.append(row)
        report(
            f"cmaes    {engine:20s} {n_targets} targets  one by one {row['one_by_one']['run_s']:.2f} s   "
            f"together {row['together']['run_s']:.2f} s   ({row['ratio']:.2f}x)"
        )
    return rows


def pipeline(shape: str, n: int, epochs: int, seed: int, report=print) -> dict:
    """Wall-clock of `clashx generate` (n strikes, engine auto) and of `epochs` epochs of pretraining on them."""
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "sim.npz")
        t0 = time.perf_counter()
        result = generate(GenerateConfig(scene="strike", shape=shape, n=n, seed=seed, out=data))
        t_gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        pretrain(PretrainConfig(data=data, epochs=epochs, seed=seed))
        t_pre = time.perf_counter() - t0
    engine = result.engine
    report(f"generate {engine:20s} n={n:6d}  {n / t_gen:10.1f} /s   ({t_gen:.1f} s)")
    report(f"pretrain {'':20s} {epochs} epochs on {n}: {t_pre:.1f} s ({t_pre / epochs:.2f} s per epoch)")
    return {"generate": {"n": n, "engine": engine, "s": t_gen}, "pretrain": {"epochs": epochs, "s": t_pre}}


def run(
    shape: str,
    max_batch: int,
    repeats: int,
    budget: float,
    seed: int,
    report=print,
    *,
    sizes: tuple[int, ...] = (16, 64, 256, 1024, 4096, 16384, 65536),
    engines: tuple[str, ...] = CONTACT_ENGINES + REST_ENGINES,
) -> dict:
    """Every engine (of `engines`) at batch sizes `sizes` up to `max_batch`; returns the figures (module docs)."""
    sim = make_strike_scene(shape)
    params = np.asarray(sim.space.vector(), np.float64)
    handler = clashx.shipped_strike_surrogate(shape)
    sizes = tuple(n for n in sizes if n <= max_batch)
    all_strikes = np.asarray(sample_strikes(max(sizes), key=jax.random.PRNGKey(seed)), np.float64)
    sims: dict = {}
    rows = []
    last: dict[tuple[str, str], float] = {}  # (kind, engine) -> s per strike at the previous size
    for n in sizes:
        strikes = all_strikes[:n]
        batch_params = np.broadcast_to(params, (n, len(params))).copy()
        kinds = [("contact", e) for e in CONTACT_ENGINES] + [("rest", e) for e in REST_ENGINES]
        for kind, engine in [(k, e) for k, e in kinds if e in engines]:
            per = last.get((kind, engine))
            if per is not None and per * n * (1 + repeats) > budget:
                rows.append({"kind": kind, "engine": engine, "n": n, "skipped": f"over --budget {budget:g} s"})
                report(f"{kind:8s} {engine:20s} n={n:6d}  skipped (about {per * n:.0f} s a call)")
                continue
            if kind == "contact":
                call = _contact_fn(engine, sim, strikes, batch_params)
            else:
                call = _rest_fn(engine, shape, params, strikes, handler, sims)
            first, best = _timed(call, repeats)
            last[(kind, engine)] = best / n
            row = {"kind": kind, "engine": engine, "n": n, "run_s": best, "first_call_s": first,
                   "compile_s": max(first - best, 0.0), "per_s": n / best}  # fmt: skip
            rows.append(row)
            report(
                f"{kind:8s} {engine:20s} n={n:6d}  {n / best:10.1f} /s   (run {best:.3f} s, compile {row['compile_s']:.1f} s)"
            )
    versions = {pkg: metadata.version(pkg) for pkg in ("jax", "jaxlib", "mujoco", "mujoco-mjx", "equinox")}
    return {
        "shape": shape,
        "device": str(jax.devices()[0]),
        "backend": jax.default_backend(),
        "device_count": jax.device_count(),
        "cpu": platform.processor() or platform.machine(),
        "versions": versions,
        "repeats": repeats,
        "rows": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="square", choices=("semi-cylinder", "square", "triangle"))
    ap.add_argument("--max-batch", type=int, help="largest batch (default 256 on a CPU, 65536 on an accelerator)")
    ap.add_argument("--repeats", type=int, default=2, help="timed calls after the first (default 2)")
    ap.add_argument("--budget", type=float, default=120.0, help="skip a call expected to take longer (s)")
    ap.add_argument("--targets", type=int, help="CMA-ES targets (default 8 on a CPU, 64 on an accelerator)")
    ap.add_argument("--generations", type=int, default=5, help="CMA-ES generations (default 5)")
    ap.add_argument("--generate-n", type=int, help="strikes to generate (default 5000 on a CPU, 100000 otherwise)")
    ap.add_argument("--epochs", type=int, default=20, help="pretraining epochs on them (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", help="batch sizes, comma-separated (default 16, 64, ... up to --max-batch)")
    ap.add_argument("--engines", help="engines of the engines part, comma-separated (default all)")
    ap.add_argument("--parts", default="engines,cmaes,pipeline", help="which parts, comma-separated (default all)")
    ap.add_argument("--json", help="write the figures here (rewritten after each part)")
    a = ap.parse_args()
    parts = [p for p in a.parts.split(",") if p]
    unknown = sorted(set(parts) - {"engines", "cmaes", "pipeline"})
    if unknown:
        ap.error(f"--parts: unknown {', '.join(unknown)}; choose from engines, cmaes, pipeline")
    known = CONTACT_ENGINES + REST_ENGINES
    engines = tuple(a.engines.split(",")) if a.engines else known
    if set(engines) - set(known):
        ap.error(f"--engines: unknown {', '.join(sorted(set(engines) - set(known)))}; choose from {', '.join(known)}")
    try:
        sizes = tuple(int(n) for n in a.sizes.split(",")) if a.sizes else (16, 64, 256, 1024, 4096, 16384, 65536)
    except ValueError:
        ap.error(f"--sizes {a.sizes!r}: give whole numbers separated by commas, e.g. 1024,4096")
    cpu = jax.default_backend() == "cpu"
    max_batch = a.max_batch or (256 if cpu else 65536)
    result: dict = {"device": str(jax.devices()[0]), "backend": jax.default_backend()}

    def save() -> None:
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=1)
            print(f"-> {a.json}", flush=True)

    for part in parts:  # in the order given, the JSON rewritten after each
        if part == "engines":
            result.update(run(a.shape, max_batch, a.repeats, a.budget, a.seed, sizes=sizes, engines=engines))
        elif part == "cmaes":
            result["cmaes"] = cmaes(a.shape, a.targets or (8 if cpu else 64), a.generations, a.seed)
        else:
            result["pipeline"] = pipeline(a.shape, a.generate_n or (5000 if cpu else 100_000), a.epochs, a.seed)
        save()


if __name__ == "__main__":
    main()

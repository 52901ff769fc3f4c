"""Throughput of every engine at every batch size: contact-phase collisions/s and rest poses/s, compile apart.

    python bench/throughput.py [--shape square] [--max-batch 256] [--json OUT]

For each batch size from 16 up to `--max-batch` (×4 steps; default 256 on a CPU,
65536 on an accelerator), on the same seeded strikes and the prior's nominal
parameters:

* contact phase (the collision event, no slide): MJX as clashx runs it today
  (`simulate_strikes_mjx`, blocks of `MJX_BLOCK` worlds), MJX as one `jax.vmap`
  over the whole batch, and MuJoCo C on all cores (`simulate_strikes_c`);
* rest poses (one CMA-ES generation's work), through `clashx.optimize.make_evaluator`:
  mjx-hybrid, mjx (full contact), cpu-hybrid, mujoco-c (full contact at 1 ms) and
  mujoco-c-two-phase (1 ms until release, then 4 ms).

The first call of each JAX function at each size is timed apart as compile
time; the run time is the best of `--repeats` calls after it.  The JSON holds
the device, the jax / mujoco / mujoco-mjx versions and every figure.  Engines
whose call at a size would exceed `--budget` seconds (extrapolated from the
size before) are skipped with the reason.  Issue 25 asks for these figures on
a GPU; the defaults run on 2 CPU cores in about 10 minutes.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from importlib import metadata

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import clashx
from clashx.optimize import make_evaluator
from clashx.scenes import make_strike_sim, sample_strikes, simulate_strike, simulate_strikes_c, simulate_strikes_mjx

REST_ENGINES = ("mjx-hybrid", "mjx", "cpu-hybrid", "mujoco-c", "mujoco-c-two-phase")
CONTACT_ENGINES = ("mjx-blocks", "mjx-one-vmap", "mujoco-c")


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
    if engine == "mjx-blocks":
        return lambda: simulate_strikes_mjx(sim, s, p, to_rest=False).post_velocity
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


def run(shape: str, max_batch: int, repeats: int, budget: float, seed: int, report=print) -> dict:
    """Every engine at batch sizes 16, 64, ... up to `max_batch`; returns the figures (module docs)."""
    sim = make_strike_sim(shape)
    params = np.asarray(sim.space.vector(), np.float64)
    handler = clashx.shipped_surrogate(shape)
    sizes = [n for n in (16, 64, 256, 1024, 4096, 16384, 65536) if n <= max_batch]
    all_strikes = np.asarray(sample_strikes(max(sizes), key=jax.random.PRNGKey(seed)), np.float64)
    sims: dict = {}
    rows = []
    last: dict[tuple[str, str], float] = {}  # (kind, engine) -> s per strike at the previous size
    for n in sizes:
        strikes = all_strikes[:n]
        batch_params = np.broadcast_to(params, (n, len(params))).copy()
        for kind, engine in [("contact", e) for e in CONTACT_ENGINES] + [("rest", e) for e in REST_ENGINES]:
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
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    max_batch = a.max_batch or (256 if jax.default_backend() == "cpu" else 65536)
    result = run(a.shape, max_batch, a.repeats, a.budget, a.seed)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"-> {a.json}")


if __name__ == "__main__":
    main()

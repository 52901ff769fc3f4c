"""Collisions per second: MJX (jit + vmap) against MuJoCo C on all cores, on the same strikes, in one run.

    python bench/generate.py --shape semi-cylinder --n 1024 [--no-rest] [--json OUT]

Both engines simulate the same sampled strikes and parameters (seeded) with the
same rule (clashx.scenes._strike); MJX's compile time is reported apart from its run
time; the ratio is MJX run time over MuJoCo C time (> 1: C is faster).  Also
prints how well the two agree (α = 0.1 accuracy of MJX against C).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from clashx.events import relative_error, sample_strikes
from clashx.scenes import geometry as geo
from clashx.scenes import make_strike_scene, simulate_strikes_c, simulate_strikes_mjx


def compare_engines(shape: str, n: int, seed: int, *, to_rest: bool = True, repeats: int = 1) -> dict:
    """Simulate `n` prior strikes of `shape` on MJX and on MuJoCo C; timings (best of `repeats`) and agreement.

    MJX's compile time is kept apart from its run time.
    """
    sim = make_strike_scene(shape)
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    strikes = np.asarray(sample_strikes(n, key=k1), np.float64)
    params = np.asarray(sim.space.sample(n, key=k2), np.float64)
    s, p = jnp.asarray(strikes), jnp.asarray(params)
    t0 = time.perf_counter()
    compiled = simulate_strikes_mjx.lower(sim, s, p, to_rest=to_rest).compile()
    t_compile = time.perf_counter() - t0

    def best(fn):
        times, out = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = jax.block_until_ready(fn())
            times.append(time.perf_counter() - t0)
        return min(times), out

    t_mjx, ev_mjx = best(lambda: compiled(sim, s, p, to_rest=to_rest))
    simulate_strikes_c(sim, strikes, params, to_rest=to_rest)  # warm-up: its JAX helpers compile once
    t_c, ev_c = best(lambda: simulate_strikes_c(sim, strikes, params, to_rest=to_rest))
    length = geo.characteristic_length(shape)
    ok = np.asarray(ev_mjx.touched) & ev_c.touched
    err = np.asarray(relative_error(np.asarray(ev_mjx.post_velocity)[ok], ev_c.post_velocity[ok], length))
    rest = np.linalg.norm(np.asarray(ev_mjx.rest_pose)[ok, :2] - ev_c.rest_pose[ok, :2], axis=1)
    return {
        "shape": shape,
        "n": n,
        "to_rest": to_rest,
        "mjx_compile_s": t_compile,
        "mjx_run_s": t_mjx,
        "c_run_s": t_c,
        "mjx_ms_per_strike": 1e3 * t_mjx / n,
        "c_ms_per_strike": 1e3 * t_c / n,
        "agree_alpha_0.1": float(np.mean(err <= 0.1)),
        "median_rel_err": float(np.median(err)),
        "rest_pos_diff_mm": 1e3 * float(np.median(rest)) if to_rest else float("nan"),
    }


def run(shape: str, n: int, to_rest: bool, seed: int, repeats: int) -> dict:
    r = compare_engines(shape, n, seed, to_rest=to_rest, repeats=repeats)
    return r | {
        "device": f"{jax.default_backend()}: {jax.devices()[0].device_kind}",
        "cpu_cores": os.cpu_count(),
        "mjx_collisions_per_s": n / r["mjx_run_s"],
        "c_collisions_per_s": n / r["c_run_s"],
        "ratio_mjx_over_c_time": r["mjx_run_s"] / r["c_run_s"],
        "mjx_vs_c_alpha_0.1": r["agree_alpha_0.1"],
        "mjx_vs_c_median_rel_err": r["median_rel_err"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="semi-cylinder", choices=geo.SHAPES)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--no-rest", action="store_true", help="contact phase only (the collision event)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1, help="timed runs per engine (the best is kept)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    r = run(a.shape, a.n, not a.no_rest, a.seed, a.repeats)
    print(
        f"{r['n']} {r['shape']} strikes{' to rest' if r['to_rest'] else ' (contact phase)'} on {r['device']}, {r['cpu_cores']} cores"
    )
    print(
        f"  MJX  compile {r['mjx_compile_s']:7.1f} s   run {r['mjx_run_s']:7.2f} s   {r['mjx_collisions_per_s']:8.1f} collisions/s"
    )
    print(f"  C                        run {r['c_run_s']:7.2f} s   {r['c_collisions_per_s']:8.1f} collisions/s")
    print(f"  time ratio MJX / C: {r['ratio_mjx_over_c_time']:.2f}")
    print(
        f"  MJX vs C agreement: α=0.1 accuracy {r['mjx_vs_c_alpha_0.1']:.3f}, median relative error {r['mjx_vs_c_median_rel_err']:.3f}"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)


if __name__ == "__main__":
    main()

"""Collisions per second: MJX (jit + vmap) against MuJoCo C on all cores, on the same strikes, in one run.

    python bench/generate.py --shape semi-cylinder --n 1024 [--no-rest] [--json OUT]

Both engines simulate the same sampled strikes and parameters (seeded) with the
same rule (clashx._strike); MJX's compile time is reported apart from its run
time; the ratio is MJX run time over MuJoCo C time (> 1: C is faster).  Also
prints how well the two agree (α = 0.1 accuracy of MJX against C).
"""

from __future__ import annotations

import argparse
import json
import os

import jax

from clashx import _geometry as geo
from clashx._demo import compare_engines


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

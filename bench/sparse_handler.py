"""What evaluating the handler only where a world touches saves in a batch of MJX hybrid rollouts.

    python bench/sparse_handler.py [--tosses 80] [--frames 150] [--repeats 2] [--handlers surrogate,rigid] [--json OUT]

Impacts are rare: a cube toss lands three or four times in a second of MJX steps.
Under `vmap` a handler inside the per-world rule would run on every world at every
step and keep its value at impacts only; `clashx.hybrid.rollouts` instead evaluates
it in the batch (`sparse_predict`): not at all at a step where no world touches, on
a gathered few where few do.  This script times the same `hybrid_tosses` (real
launch states of the ContactNets cube, every landing through the handler) both
ways in one run, for the shipped cube surrogate and for the rigid impulse law
(`rigid_cube_window`, 54 sequential-impulse steps per call), and compares the
frames: per toss, the largest difference, and how many tosses went their own
way (a landing a step earlier or later: a toss is chaotic, so a float32 rounding
difference in the handler's batch, e.g. a matrix product's order, can do it).  Times are per call after a compiled warm-up (the best of
`--repeats`); the ratio is dense / sparse.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from clashx.core import write_json
from clashx.events import data_path, ingest_cube_tosses
from clashx.hybrid import hybrid_tosses
from clashx.scenes import make_toss_scene, rigid_cube_window
from clashx.surrogate import shipped_cube_surrogate

RIGID_PARAMS = (0.4, 0.6, 0.3, 1.5)  # e_n, e_t, μ, inertia scale: inside the fitted range (README)
APART = 1e-3  # a toss whose frames differ by more (m, quaternion, m/s, rad/s) anywhere went its own way


def _time(fn, repeats: int) -> tuple[float, np.ndarray]:
    out = fn()  # compile
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tosses", type=int, default=80)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--handlers", default="surrogate,rigid", help="comma-separated: surrogate, rigid")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    ev = ingest_cube_tosses(data_path("contactnets_cube/tosses.npz"), impacts="all")
    states = ev["initial_state"][ev["impact"] == 0][: args.tosses]
    sim = make_toss_scene()
    surrogate = shipped_cube_surrogate()
    p_mjx = sim.space.vector()
    cases = {
        "surrogate": (surrogate, p_mjx, None),
        "rigid": (rigid_cube_window, np.asarray(RIGID_PARAMS), p_mjx),
    }
    cases = {k: cases[k] for k in args.handlers.split(",")}
    rows = {}
    print(f"{len(states)} tosses, {args.frames} frames ({args.frames * sim.substeps} MJX steps), {jax.devices()[0]}")
    print(
        f"{'handler':<16} {'dense s':>9} {'sparse s':>9} {'ratio':>7} {'landings/toss':>14} {'median |Δ|':>12} "
        f"apart (|Δ| > {APART:g})"
    )
    for name, (handler, params, rest) in cases.items():
        out = {}
        for mode in ("dense", "sparse"):
            out[mode] = _time(
                lambda h=handler, p=params, r=rest, m=mode: hybrid_tosses(
                    sim, h, states, p, args.frames, rest_params=r, every_impact=True,
                    sparse=m == "sparse",
                ),
                args.repeats,
            )  # fmt: skip
        (t_d, (fr_d, st)), (t_s, (fr_s, _)) = out["dense"], out["sparse"]
        per_toss = np.nanmax(np.abs(fr_d - fr_s), axis=(1, 2))
        apart = int(np.sum(per_toss > APART))
        landings = float(np.mean(st))
        rows[name] = {
            "dense_s": t_d, "sparse_s": t_s, "ratio": t_d / t_s, "landings": landings,
            "median_diff": float(np.median(per_toss)), "tosses_apart": apart,
        }  # fmt: skip
        print(
            f"{name:<16} {t_d:9.2f} {t_s:9.2f} {t_d / t_s:6.2f}x {landings:14.2f} {np.median(per_toss):12.1e} "
            f"{apart:4d}/{len(per_toss)}"
        )
    if args.json:
        write_json(args.json, {"tosses": len(states), "frames": args.frames, "device": str(jax.devices()[0]), **rows})


if __name__ == "__main__":
    main()

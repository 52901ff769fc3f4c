"""Chosen against random real strikes: accuracy against the number of lab strikes used (issue 12, the RSR loop).

    python bench/next_strikes.py --shape square [--lab ../shared/lab/lab_a.json] [--budget 20] [--repeats 5]
                                 [--criteria random,robust,d-optimal,predictive,disagreement]
                                 [--mbo-targets 20] [--mbo-at 3,5,8,10,15,20] [--json OUT] [--plot OUT.png]

For every criterion and repeat, `clashx.workflows._next_strikes.strike_loop`
starts from `--start` (3) random strikes (the same ones for every criterion of a repeat),
then plans, runs the planned strikes in the lab (`strike_lab.py --reset-each`,
via bench/cmaes.py's `run_lab`) and identifies from all tracks so far (the
two-stage fit without re-distillation or fine-tuning), at 3, 5, 8, 10, 15 and
20 strikes.  At each count the identified surrogate predicts 200 test strikes
(`strike_lab.py --random 200 --seed 1 --reset-each` in the same lab), scored
against their `post_velocity_true` (scoring only) at α = 0.1.

The MBO error: at the counts in `--mbo-at`, CMA-ES over CPU-hybrid rollouts of the
identified surrogate (bench/cmaes.py's `mbo`, velocities only: no refit on rest
poses) chooses a strike for each of `--mbo-targets` targets (the rest poses of
random lab strikes, seed 100, so every target is reachable); the chosen strikes
run in the lab and the error is the median distance of the block's rest position
from its target.  About 1 s of CMA-ES per target on 2 cores.

Reported: mean ± std over repeats per criterion and count (accuracy), the median
over repeats of each repeat's median MBO error, and the time per criterion.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import numpy as np
from cmaes import LAB_DIR, mbo, run_lab  # bench/cmaes.py: strike_lab.py in a subprocess

from clashx.core import write_json
from clashx.events import alpha_accuracy
from clashx.optimize import MBOConfig, to_start_frame
from clashx.scenes import geometry as geo
from clashx.scenes import make_strike_sim
from clashx.surrogate import load_or_shipped, predict
from clashx.workflows import CHECKPOINTS, strike_loop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, choices=geo.SHAPES)
    ap.add_argument("--lab", default=str(LAB_DIR / "lab_a.json"), help="lab parameter file passed to strike_lab.py")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--criteria", default="random,robust,d-optimal,predictive,disagreement")
    ap.add_argument("--mbo-targets", type=int, default=20, help="MBO targets per count (0: no MBO error)")
    ap.add_argument("--mbo-at", default=",".join(map(str, CHECKPOINTS)), help="counts at which to measure MBO")
    ap.add_argument("--mbo-generations", type=int, default=20, help="CMA-ES generations per target (population 16)")
    ap.add_argument("--model", help="run folder of a surrogate (default: the shipped one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=3, help="random strikes before the first plan (2 or 3)")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    a = ap.parse_args()
    checkpoints = sorted({a.start} | {c for c in CHECKPOINTS if a.start <= c <= a.budget})
    model = load_or_shipped(a.model, a.shape)
    sim = make_strike_sim(a.shape, space=model.space)
    length = geo.characteristic_length(a.shape)
    tmp = tempfile.mkdtemp(prefix="next_strikes_")
    test = run_lab(a.shape, a.lab, os.path.join(tmp, "test.npz"), n=200, seed=1)
    ok = test["touched"].astype(bool)
    mbo_at = {int(c) for c in a.mbo_at.split(",") if c} if a.mbo_targets > 0 else set()
    if mbo_at:
        rec = run_lab(a.shape, a.lab, os.path.join(tmp, "targets.npz"), n=a.mbo_targets, seed=100)
        hit = rec["touched"].astype(bool)
        targets = np.stack(
            [np.asarray(to_start_frame(r, s)) for r, s in zip(rec["final_pose"][hit], rec["start_pose"][hit])]
        )
    config = MBOConfig(generations=a.mbo_generations).check()
    sims: dict = {}
    calls = [0]

    def lab(strikes):
        calls[0] += 1
        return run_lab(a.shape, a.lab, os.path.join(tmp, f"run{calls[0]}.npz"), strikes=strikes)

    def mbo_error(model, params, seed) -> float:
        strikes = mbo(a.shape, "clashx", params, model, targets, config, sims, seed=seed)
        rec = lab(strikes)
        final = np.stack([np.asarray(to_start_frame(r, s)) for r, s in zip(rec["final_pose"], rec["start_pose"])])
        return float(np.median(np.linalg.norm(final[:, :2] - targets[:, :2], axis=1)))

    curves: dict[str, dict[str, list[float]]] = {}
    errors: dict[str, dict[str, list[float]]] = {}
    times: dict[str, float] = {}
    for criterion in a.criteria.split(","):
        acc: dict[str, list[float]] = {str(c): [] for c in checkpoints}
        err: dict[str, list[float]] = {str(c): [] for c in checkpoints if c in mbo_at}
        t0 = time.perf_counter()
        for r in range(a.repeats):
            key = jax.random.PRNGKey(1000 * a.seed + r)
            for cp in strike_loop(
                model, sim, lab, key=key, criterion=criterion, start=a.start, checkpoints=checkpoints
            ):
                pred = np.asarray(predict(cp["model"], test["strike"][ok], cp["params"]))
                acc[str(cp["n"])].append(alpha_accuracy(pred, test["post_velocity_true"][ok], length, 0.1))
                if cp["n"] in mbo_at:
                    err[str(cp["n"])].append(mbo_error(cp["model"], cp["params"], 1000 * a.seed + r))
            print(
                f"{criterion} repeat {r}: "
                + ", ".join(f"{n}: {v[-1]:.3f}" for n, v in acc.items())
                + "".join(f", MBO {n}: {1000 * v[-1]:.1f} mm" for n, v in err.items()),
                flush=True,
            )
        times[criterion] = time.perf_counter() - t0
        curves[criterion], errors[criterion] = acc, err
    out = {
        "shape": a.shape,
        "lab": os.path.basename(a.lab),
        "repeats": a.repeats,
        "curves": {
            c: {
                n: {"acc_mean": float(np.mean(v)), "acc_std": float(np.std(v)), "acc": v}
                | ({"mbo_m_median": float(np.median(errors[c][n])), "mbo_m": errors[c][n]} if n in errors[c] else {})
                for n, v in acc.items()
            }
            for c, acc in curves.items()
        },
        "time_s": times,
    }
    print(f"{a.shape}, lab {out['lab']}: α = 0.1 accuracy on {int(ok.sum())} test strikes, mean ± std over {a.repeats}")
    print("strikes  " + "  ".join(f"{c:>16}" for c in curves))
    for n in map(str, checkpoints):
        print(
            f"{n:>7}  "
            + "  ".join(f"{np.mean(curves[c][n]):.3f} ± {np.std(curves[c][n]):.3f}".rjust(16) for c in curves)
        )
    if mbo_at:
        print(f"MBO error (median over {len(targets)} targets, median over repeats), mm")
        for n in sorted(mbo_at & set(checkpoints)):
            print(f"{n:>7}  " + "  ".join(f"{1000 * np.median(errors[c][str(n)]):.1f}".rjust(16) for c in curves))
    if a.json:
        write_json(a.json, out)
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2 if mbo_at else 1, figsize=(11 if mbo_at else 6, 4), squeeze=False)
        ax = axes[0, 0]
        for c, acc in curves.items():
            m = np.array([np.mean(acc[str(n)]) for n in checkpoints])
            s = np.array([np.std(acc[str(n)]) for n in checkpoints])
            ax.plot(checkpoints, m, marker="o", label=c)
            ax.fill_between(checkpoints, m - s, m + s, alpha=0.2)
        ax.set_xlabel("real strikes used")
        ax.set_ylabel("α = 0.1 accuracy (200 test strikes)")
        ax.set_title(f"{a.shape}: chosen against random strikes")
        ax.legend()
        if mbo_at:
            ax = axes[0, 1]
            for c, err in errors.items():
                ns = [n for n in checkpoints if str(n) in err]
                ax.plot(ns, [1000 * np.median(err[str(n)]) for n in ns], marker="o", label=c)
            ax.set_xlabel("real strikes used")
            ax.set_ylabel(f"MBO position error, mm (median, {len(targets)} targets)")
            ax.set_title("strikes chosen by CMA-ES, run in the lab")
            ax.legend()
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)


if __name__ == "__main__":
    main()

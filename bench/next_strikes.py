"""Chosen against random real strikes: accuracy against the number of lab strikes used (issues 12 and 29, the RSR loop).

    python bench/next_strikes.py [--shapes square,triangle,semi-cylinder] [--labs a,C,D] [--budget 20]
                                 [--repeats 5] [--criteria random,infogap,coverage,robust,d-optimal,predictive,disagreement]
                                 [--mbo-targets 20] [--mbo-at 10] [--seed 7] [--json OUT] [--plot OUT.png]

Labs: "a" is lab A (`../shared/lab/lab_a.json`); "a@S" is lab A's parameters
with its motion-capture noise drawn from seed S; "C" and "D" are labs of our
own (`bench/correction.py`'s OWN_LABS).  No lab's parameters reach the method:
it sees recordings only.

For every lab, shape, criterion and repeat, `clashx.workflows.strike_loop`
spends the budget: `--start` (3) random strikes (the same for every criterion of a
repeat), then plan → run in the lab (`strike_lab.py --reset-each`, via
bench/cmaes.py's `run_lab`) → identify from all tracks so far (the two-stage fit
without re-distillation or fine-tuning), at 3, 5, 8, 10, 15 and 20 strikes.  At
each count the identified surrogate predicts 200 test strikes (`strike_lab.py
--random 200 --seed 1 --reset-each` in the same lab), scored against their
`post_velocity_true` (scoring only) at α = 0.1.  Repeat r of every criterion
uses the key `1000 * seed + r`, and every criterion is scored on the same test
strikes, so criterion and random pair up by repeat.

Printed per lab and shape, random's row first: mean ± std over repeats; and for
each criterion against random, the paired difference (mean over repeats ± its
standard error) at every count, with "5 vs random 10": the criterion's accuracy
at 5 strikes against random's at 10.

The MBO error: at the counts in `--mbo-at`, CMA-ES over CPU-hybrid rollouts of the
identified surrogate (bench/cmaes.py's `mbo`, velocities only: no refit on rest
poses) chooses a strike for each of `--mbo-targets` targets (the rest poses of
random lab strikes, seed 100, so every target is reachable); the chosen strikes
run in the lab and the error is the median distance of the block's rest position
from its target, then the median over repeats.  About 1 s of CMA-ES per target on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import jax
import numpy as np
from cmaes import LAB_DIR, mbo, run_lab  # bench/cmaes.py: strike_lab.py in a subprocess
from correction import OWN_LABS, lab_file  # bench/correction.py: the labs of our own

from clashx.core import write_json
from clashx.events import alpha_accuracy
from clashx.optimize import CRITERIA, MBOConfig, to_start_frame
from clashx.scenes import geometry as geo
from clashx.scenes import make_strike_scene
from clashx.surrogate import load_or_shipped, predict
from clashx.workflows import CHECKPOINTS, strike_loop


def lab_path(spec: str, tmp: str) -> str:
    """The parameter file of lab `spec`: "a", "a@SEED" (lab A, its noise from SEED) or one of OWN_LABS."""
    if spec.startswith("a@"):
        with open(LAB_DIR / "lab_a.json") as f:
            params = json.load(f)
        path = os.path.join(tmp, f"lab_{spec}.json")
        with open(path, "w") as f:
            json.dump(params | {"seed": int(spec[2:])}, f)
        return path
    if spec != "a" and spec not in OWN_LABS:
        raise SystemExit(f"--labs: {spec!r} is not a lab; expected a, a@SEED or one of {', '.join(OWN_LABS)}")
    return lab_file(spec, tmp)


def paired(crit: list[float], rand: list[float]) -> tuple[float, float]:
    """Mean and standard error of the per-repeat difference criterion − random."""
    d = np.asarray(crit) - np.asarray(rand)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")


def run_one(a, shape: str, lab: str, tmp: str) -> dict:
    """Every criterion's loop on one lab and shape: accuracy and MBO error per count, per repeat."""
    checkpoints = sorted({a.start} | {c for c in CHECKPOINTS if a.start <= c <= a.budget})
    model = load_or_shipped(a.model, shape)
    sim = make_strike_scene(shape, space=model.space)
    length = geo.characteristic_length(shape)
    path = lab_path(lab, tmp)
    test = run_lab(shape, path, os.path.join(tmp, f"{lab}_{shape}_test.npz"), n=200, seed=1)
    ok = test["touched"].astype(bool)
    mbo_at = {int(c) for c in a.mbo_at.split(",") if c} & set(checkpoints) if a.mbo_targets > 0 else set()
    if mbo_at:
        rec = run_lab(shape, path, os.path.join(tmp, f"{lab}_{shape}_targets.npz"), n=a.mbo_targets, seed=100)
        hit = rec["touched"].astype(bool)
        targets = np.stack(
            [np.asarray(to_start_frame(r, s)) for r, s in zip(rec["final_pose"][hit], rec["start_pose"][hit])]
        )
    config = MBOConfig(generations=a.mbo_generations).check()
    sims: dict = {}
    calls = [0]

    def run(strikes):
        calls[0] += 1
        return run_lab(shape, path, os.path.join(tmp, f"{lab}_{shape}_run{calls[0]}.npz"), strikes=strikes)

    def mbo_error(model, params, seed) -> float:
        strikes = mbo(shape, "clashx", params, model, targets, config, sims, seed=seed)
        rec = run(strikes)
        final = np.stack([np.asarray(to_start_frame(r, s)) for r, s in zip(rec["final_pose"], rec["start_pose"])])
        return float(np.median(np.linalg.norm(final[:, :2] - targets[:, :2], axis=1)))

    out: dict = {"shape": shape, "lab": lab, "test_strikes": int(ok.sum()), "criteria": {}}
    for criterion in a.criteria:
        acc: dict[str, list[float]] = {str(c): [] for c in checkpoints}
        err: dict[str, list[float]] = {str(c): [] for c in sorted(mbo_at)}
        held: dict[str, list] = {str(c): [] for c in checkpoints}
        modes: list[list[str]] = []
        t0 = time.perf_counter()
        for r in range(a.repeats):
            key = jax.random.PRNGKey(1000 * a.seed + r)
            loop = strike_loop(model, sim, run, key=key, criterion=criterion, start=a.start, checkpoints=checkpoints)
            for cp in loop:
                pred = np.asarray(predict(cp["model"], test["strike"][ok], cp["params"]))
                acc[str(cp["n"])].append(alpha_accuracy(pred, test["post_velocity_true"][ok], length, 0.1))
                held[str(cp["n"])].append(cp["error"])
                if cp["n"] in mbo_at:
                    err[str(cp["n"])].append(mbo_error(cp["model"], cp["params"], 1000 * a.seed + r))
            modes.append(loop[-1]["modes"])
            print(
                f"{lab} {shape} {criterion} repeat {r}: "
                + ", ".join(f"{n}: {v[-1]:.3f}" for n, v in acc.items())
                + "".join(f", MBO {n}: {1000 * v[-1]:.1f} mm" for n, v in err.items())
                + f" (plans: {'/'.join(loop[-1]['modes'])})",
                flush=True,
            )
        out["criteria"][criterion] = {
            "acc": acc,
            "mbo_m": err,
            "heldout_error": held,
            "modes": modes,
            "time_s": time.perf_counter() - t0,
        }
    return out


def report(res: dict) -> list[str]:
    """The printed table of one lab and shape: random first, then each criterion with its paired difference."""
    crit = res["criteria"]
    counts = list(next(iter(crit.values()))["acc"])
    lines = [f"{res['shape']}, lab {res['lab']}: α = 0.1 accuracy on {res['test_strikes']} test strikes"]
    lines.append("strikes  " + "  ".join(f"{c:>16}" for c in crit))
    for n in counts:
        cells = [f"{np.mean(crit[c]['acc'][n]):.3f} ± {np.std(crit[c]['acc'][n]):.3f}".rjust(16) for c in crit]
        lines.append(f"{n:>7}  " + "  ".join(cells))
    if "random" in crit:
        rand = crit["random"]["acc"]
        for c in crit:
            if c == "random":
                continue
            diffs = [paired(crit[c]["acc"][n], rand[n]) for n in counts]
            lines.append(
                f"{c} − random, paired (mean ± se): "
                + ", ".join(f"{n}: {m:+.3f} ± {s:.3f}" for n, (m, s) in zip(counts, diffs))
            )
            if "5" in crit[c]["acc"] and "10" in rand:
                m5, r10 = np.mean(crit[c]["acc"]["5"]), np.mean(rand["10"])
                lines.append(
                    f"{c}: 5 strikes {m5:.3f} against random's 10 {r10:.3f} ({'reached' if m5 >= r10 else 'not reached'})"
                )
    for n in next(iter(crit.values()))["mbo_m"]:
        lines.append(
            f"MBO error at {n} (median over repeats of each repeat's median), mm: "
            + ", ".join(f"{c} {1000 * np.median(crit[c]['mbo_m'][n]):.1f}" for c in crit)
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(geo.SHAPES))
    ap.add_argument("--labs", default="a", help="a, a@SEED, or labs of our own (C, D), comma-separated")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--criteria", default="random,infogap")
    ap.add_argument("--mbo-targets", type=int, default=20, help="MBO targets per count (0: no MBO error)")
    ap.add_argument("--mbo-at", default="10", help="counts at which to measure MBO")
    ap.add_argument("--mbo-generations", type=int, default=20, help="CMA-ES generations per target (population 16)")
    ap.add_argument("--model", help="run folder of a surrogate (default: the shipped one)")
    ap.add_argument("--seed", type=int, default=7, help="repeat r uses the key 1000 * seed + r")
    ap.add_argument("--start", type=int, default=3, help="strikes before the first fit")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    a = ap.parse_args()
    criteria = [c for c in a.criteria.split(",") if c]
    bad = [c for c in criteria if c not in CRITERIA]
    if bad:
        raise SystemExit(f"--criteria: {', '.join(bad)} unknown; expected some of {', '.join(CRITERIA)}")
    a.criteria = sorted(dict.fromkeys(criteria), key=lambda c: c != "random")  # random's row first
    shapes = [s for s in a.shapes.split(",") if s]
    if any(s not in geo.SHAPES for s in shapes):
        raise SystemExit(f"--shapes {a.shapes}: expected some of {', '.join(geo.SHAPES)}")
    tmp = tempfile.mkdtemp(prefix="next_strikes_")
    results = []
    for lab in a.labs.split(","):
        for shape in shapes:
            results.append(run_one(a, shape, lab, tmp))
            print("\n".join(report(results[-1])), flush=True)
            if a.json:  # after every lab and shape, so a long run keeps what it measured
                write_json(a.json, {"repeats": a.repeats, "seed": a.seed, "budget": a.budget, "results": results})
    print("\n" + "\n\n".join("\n".join(report(r)) for r in results))
    if a.plot:
        plot(results, a.plot)


def plot(results: list[dict], path: str) -> None:
    """One panel per lab and shape: mean accuracy ± std against strikes used, per criterion."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6), squeeze=False)
    for ax, res in zip(axes[0], results):
        for c, v in res["criteria"].items():
            ns = [int(n) for n in v["acc"]]
            m = np.array([np.mean(v["acc"][str(n)]) for n in ns])
            s = np.array([np.std(v["acc"][str(n)]) for n in ns])
            ax.plot(ns, m, marker="o", label=c)
            ax.fill_between(ns, m - s, m + s, alpha=0.2)
        ax.set_title(f"{res['shape']}, lab {res['lab']}")
        ax.set_xlabel("real strikes used")
        ax.set_ylabel("α = 0.1 accuracy")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()

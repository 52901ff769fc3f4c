"""`bench/accuracy.py` runs pooled over seeds and labs: mean and range per method, clashx against MuJoCo's best.

    python bench/accuracy_seeds.py FILE [FILE ...] [--method clashx_families] [--json OUT]

Each FILE is an `accuracy.py` output, named ..._LABSEED_SHAPE.json (its
`details.seeds` holds one row set per seed, keys `details.seed`, +1, ...) or
..._LABSEED_SHAPE.log (a run that printed its table but wrote no JSON: the
table's α = 0.1 column, one seed, `--log-seed`).  Runs of the same lab and
shape are pooled, so a run with `--seed 0` and one with `--seed 1 --seeds 2`
make three seeds.

For every run, "MuJoCo's best" is the highest α = 0.1 among the MuJoCo-side
fits *of that run* (`accuracy.MUJOCO_FITS` present in it, picked on the test
set: in the baseline's favour), and `--method` minus it is that run's margin.
Printed:

* per lab and shape: each method's α = 0.1 as mean (min - max) over seeds,
  MuJoCo's best of each run the same way, and the margin;
* per shape, over labs: the mean of the labs' mean margins (the issue's "+0.10
  on each shape, mean over the labs") and in how many labs the method's mean
  reaches `--target` (its "≥ 0.80 on each shape in at least half of the labs").
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict

import numpy as np
from accuracy import MUJOCO_FITS  # bench/accuracy.py

from clashx.core import write_json

NAME = re.compile(r"_([A-Za-z]+\d+)_(semi-cylinder|square|triangle)\.(json|log)$")
ROW = re.compile(r"^(\w+)\s+([\d.]+)%\s+([\d.]+)%\s+([\d.]+)%")


def read_runs(path: str, log_seed: int) -> list[tuple[int, dict[str, float]]]:
    """[(seed, {method: α = 0.1})] of one accuracy.py output (module docstring)."""
    if path.endswith(".json"):
        with open(path) as f:
            d = json.load(f)["details"]
        return [(d["seed"] + k, {m: r["alpha_0.1"] for m, r in rows.items()}) for k, rows in enumerate(d["seeds"])]
    rows: dict[str, float] = {}
    with open(path) as f:
        for line in f:
            m = ROW.match(line)
            if m and m.group(1) not in rows:  # the first table only
                rows[m.group(1)] = float(m.group(3)) / 100.0
    if not rows:
        raise SystemExit(f"bench/accuracy_seeds.py: {path}: no accuracy table in the log")
    return [(log_seed, rows)]


def pool(files: list[str], log_seed: int) -> dict[tuple[str, str], dict[int, dict[str, float]]]:
    """{(lab, shape): {seed: {method: α}}}; a seed met twice for one cell is refused."""
    cells: dict[tuple[str, str], dict[int, dict[str, float]]] = defaultdict(dict)
    for path in files:
        m = NAME.search(path)
        if not m:
            raise SystemExit(f"bench/accuracy_seeds.py: {path}: expected a name ending _LABSEED_SHAPE.json or .log")
        for seed, rows in read_runs(path, log_seed):
            cell = (m.group(1), m.group(2))
            if seed in cells[cell]:
                raise SystemExit(f"bench/accuracy_seeds.py: {path}: seed {seed} of {cell} is in another file too")
            cells[cell][seed] = rows
    return dict(cells)


def summarise(cells, method: str, target: float) -> dict:
    """Per cell: every method's and MuJoCo's best's α over seeds and `method`'s margin; per shape over labs."""
    out: dict = {"cells": {}, "shapes": {}}
    for (lab, shape), runs in sorted(cells.items()):
        seeds = sorted(runs)
        methods = sorted({m for r in runs.values() for m in r})
        best = [max(runs[s][m] for m in MUJOCO_FITS if m in runs[s]) for s in seeds]
        best_is = [max((m for m in MUJOCO_FITS if m in runs[s]), key=lambda m: runs[s][m]) for s in seeds]
        cell = {
            "seeds": seeds,
            "alpha": {m: [runs[s].get(m, np.nan) for s in seeds] for m in methods},
            "mujoco_best": best,
            "mujoco_best_is": best_is,
        }
        if method in methods:
            cell["margin"] = [runs[s][method] - b for s, b in zip(seeds, best)]
        out["cells"][f"{lab}/{shape}"] = cell
    for shape in sorted({k.split("/")[1] for k in out["cells"]}):
        labs = {k: c for k, c in out["cells"].items() if k.endswith("/" + shape) and "margin" in c}
        if labs:
            out["shapes"][shape] = {
                "labs": len(labs),
                "mean_margin": float(np.mean([np.mean(c["margin"]) for c in labs.values()])),
                "mean_alpha": float(np.mean([np.mean(c["alpha"][method]) for c in labs.values()])),
                "mean_mujoco_best": float(np.mean([np.mean(c["mujoco_best"]) for c in labs.values()])),
                "labs_at_target": int(sum(np.mean(c["alpha"][method]) >= target for c in labs.values())),
            }
    return out


def _lab_order(lab: str) -> tuple[str, int]:
    return lab.rstrip("0123456789").lower(), int(lab[len(lab.rstrip("0123456789")) :] or 0)


def _seen(cells: dict, m: str) -> int:
    """The most seeds `m` has in any of `cells`."""
    return max(int(np.sum(np.isfinite(np.asarray(c["alpha"].get(m, [np.nan]), float)))) for c in cells.values())


def markdown(s: dict, method: str) -> str:
    """One table per shape: a row per method (MuJoCo's best of each run and `method`'s margin last), a column per
    lab, each cell the mean (range) over seeds, and the labs' mean.  A method run with one seed only where the
    others ran with several (a first run with every method, then more seeds of some) is left out."""
    out = []
    for shape in sorted({k.split("/")[1] for k in s["cells"]}):
        cells = {k.split("/")[0]: c for k, c in s["cells"].items() if k.endswith("/" + shape)}
        labs = sorted(cells, key=_lab_order)
        several = any(len(c["seeds"]) > 1 for c in cells.values())

        methods = sorted({m for c in cells.values() for m in c["alpha"]}, key=lambda m: (m == method, m))
        rows = [
            (m, [c["alpha"].get(m) for c in cells.values()], "") for m in methods if _seen(cells, m) > 1 or not several
        ]
        rows += [("MuJoCo's best of the run", [c["mujoco_best"] for c in cells.values()], "")]
        rows += [(f"{method} − MuJoCo's best", [c.get("margin") for c in cells.values()], "+")]
        seeds = "/".join(str(len(cells[lab]["seeds"])) for lab in labs)
        out += [f"**{shape}** (seeds per lab: {seeds})", "", "| method | " + " | ".join(labs) + " | mean of labs |"]
        out += ["|---" * (len(labs) + 2) + "|"]
        for name, vals, sign in rows:
            by_lab = dict(zip(cells, vals))
            v = [np.asarray(by_lab[lab] if by_lab[lab] is not None else [np.nan], float) for lab in labs]
            ok = [bool(np.isfinite(x).any()) for x in v]
            cols = [_fmt(x[np.isfinite(x)], sign) if k else "–" for x, k in zip(v, ok)]
            mean = f"{np.mean([np.nanmean(x) for x in v]):{sign}.3f}" if all(ok) else "–"
            out.append(f"| {name} | " + " | ".join(cols) + f" | {mean} |")
        out.append("")
    return "\n".join(out)


def summary_markdown(s: dict, method: str) -> str:
    """One table, a column per shape: each method's mean over labs of its per-lab mean over seeds, and in
    brackets its seed-to-seed spread (the mean over labs of each lab's max - min)."""
    shapes = sorted({k.split("/")[1] for k in s["cells"]})
    per = {sh: {k.split("/")[0]: c for k, c in s["cells"].items() if k.endswith("/" + sh)} for sh in shapes}
    several = any(len(c["seeds"]) > 1 for c in s["cells"].values())
    methods = sorted({m for c in s["cells"].values() for m in c["alpha"]}, key=lambda m: (m == method, m))
    methods = [m for m in methods if not several or min(_seen(per[sh], m) for sh in shapes) > 1]
    rows = [(m, lambda c, m=m: c["alpha"].get(m), "") for m in methods]
    rows += [("MuJoCo's best of the run", lambda c: c["mujoco_best"], "")]
    rows += [(f"{method} − MuJoCo's best", lambda c: c.get("margin"), "+")]
    out = ["| method | " + " | ".join(shapes) + " |", "|---" * (len(shapes) + 1) + "|"]
    for name, get, sign in rows:
        cols = []
        for sh in shapes:
            vals = [np.asarray(get(c) if get(c) is not None else [np.nan], float) for c in per[sh].values()]
            vals = [v[np.isfinite(v)] for v in vals]
            if any(len(v) == 0 for v in vals):
                cols.append("–")
                continue
            spread = np.mean([v.max() - v.min() for v in vals])
            cols.append(f"{np.mean([v.mean() for v in vals]):{sign}.3f} (±{spread / 2:.3f})")
        out.append(f"| {name} | " + " | ".join(cols) + " |")
    return "\n".join(out) + "\n"


def _fmt(v, sign: str = "") -> str:
    v = np.asarray(v, float)
    if len(v) == 1:
        return f"{v[0]:{sign}.3f}"
    return f"{np.nanmean(v):{sign}.3f} ({np.nanmin(v):{sign}.3f} to {np.nanmax(v):{sign}.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--method", default="clashx_families", help="the method set against MuJoCo's best")
    ap.add_argument("--target", type=float, default=0.80, help="α = 0.1 a lab's mean should reach")
    ap.add_argument("--log-seed", type=int, default=0, help="the seed of a .log run (accuracy.py's --seed)")
    ap.add_argument("--json")
    ap.add_argument("--markdown", help="write the tables (one per shape) here")
    a = ap.parse_args()
    s = summarise(pool(a.files, a.log_seed), a.method, a.target)
    for key, c in s["cells"].items():
        print(f"{key}: seeds {c['seeds']}")
        for m, v in c["alpha"].items():
            print(f"  {m:<22} {_fmt(v)}")
        print(f"  {'MuJoCo best of run':<22} {_fmt(c['mujoco_best'])}  ({', '.join(c['mujoco_best_is'])})")
        if "margin" in c:
            print(f"  {a.method} - best{'':<5} {_fmt(c['margin'])}")
    print(f"\n{a.method} over labs (each lab: its seeds' mean):")
    for shape, r in s["shapes"].items():
        print(f"  {shape:<14} α {r['mean_alpha']:.3f}, MuJoCo's best {r['mean_mujoco_best']:.3f}, margin "
              f"{r['mean_margin']:+.3f}; ≥ {a.target:.2f} in {r['labs_at_target']} of {r['labs']} labs")  # fmt: skip
    if a.json:
        write_json(a.json, s)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(summary_markdown(s, a.method) + "\n" + markdown(s, a.method))


if __name__ == "__main__":
    main()

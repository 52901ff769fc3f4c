"""Write docs/results.md from the JSON (and printed tables) the benches left under bench/results/.

    python docs/gen_results.py          # rewrite docs/results.md
    python docs/gen_results.py --check  # exit 1 if docs/results.md differs from what this would write

Every table names its machine (the results folder: cpu2 = a 2-core CPU, tpu_v5e = a TPU v5e machine's host;
plus the `device` a JSON records), its date (a JSON's `date`, else the git commit date of its files) and the
command that made it (a JSON's `command`, `config` or `args`, else the commands in its folder's README.md, else
the bench script's name).  A file that cannot be read is skipped with a line on stderr; a section whose files
are all missing is left out.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from statistics import mean

from results_lib import (
    MACHINES,
    OUT,
    RESULTS,
    ROOT,
    SHAPES,
    SHORT_SHAPES,
    finite,
    lab_name,
    load,
    natural,
    num,
    parse_rows,
    provenance,
    rel,
    script_of,
    shallow,
    signed,
    table,
    warn,
)

METHODS = {
    "clashx_families": "**clashx, both families averaged** (`clashx_families`)",
    "clashx": "clashx, MuJoCo's family, fine-tuned (`clashx`)",
    "clashx_identified": "clashx, MuJoCo's family, identified (`clashx_identified`)",
    "mujoco_identified": "MuJoCo C, 8 parameters by CMA-ES (`mujoco_identified`)",
    "mujoco_identified_3": "MuJoCo C, μ1 μ2 e1 by CMA-ES (`mujoco_identified_3`)",
    "mjx_identified": "MJX, 8 parameters by gradient (`mjx_identified`)",
    "mujoco_sysid_tracks": "MuJoCo C, `mujoco.sysid` on the tracks",
    "residual": "MuJoCo CMA-ES + residual MLP",
    "nn_no_pretrain": "MLP on the ten strikes alone",
    "mujoco_nominal": "MuJoCo at its default parameters",
}
CUBE_METHODS = {
    "mujoco_nominal": "MuJoCo, nominal",
    "mujoco_identified": "MuJoCo, `mujoco.sysid`",
    "mjx_identified": "MJX, identified by gradient",
    "clashx_first": "clashx, first impact only",
    "clashx": "clashx (MuJoCo's family)",
    "clashx_mean": "clashx, posterior mean of 8",
    "clashx_rigid": "clashx_rigid (rigid impulse law)",
    "clashx_rigid_mean": "clashx_rigid, posterior mean of 8",
    "clashx_families": "**clashx_families** (both averaged)",
    "clashx_families_mean": "clashx_families, posterior means averaged",
}


def pooled_accuracy(folder: str, title: str, blurb: str, also: tuple[str, ...] = ()) -> str | None:
    """A `bench/accuracy_seeds.py` summary: every method's α = 0.1 per shape, with the spread over labs and keys.

    `also`: globs (under bench/results/) of the runs pooled from elsewhere, for the provenance line.
    """
    path = RESULTS / folder / "summary.json"
    summary = load(path) if path.exists() else None
    if not isinstance(summary, dict) or "cells" not in summary:
        return None
    cells: dict[str, dict[str, dict]] = defaultdict(dict)  # shape -> lab -> cell
    for name, cell in summary["cells"].items():
        lab, shape = name.split("/")
        cells[shape][lab_name(lab)] = cell
    shapes = [s for s in SHAPES if s in cells]

    def complete(method: str) -> bool:  # finite on at least half the keys of every lab-seed
        return all(
            2 * len(finite(c["alpha"].get(method))) >= len(c["seeds"]) for s in shapes for c in cells[s].values()
        )

    def stat(values_of, sign: bool = False) -> list[str]:
        out = []
        for s in shapes:
            per_lab = [v for v in (finite(values_of(c)) for c in cells[s].values()) if v]
            m = mean(mean(v) for v in per_lab)
            half = mean((max(v) - min(v)) / 2 for v in per_lab)
            spread = f" (±{half:.3f})" if max(len(v) for v in per_lab) > 1 else ""
            out.append((signed(m) if sign else num(m)) + spread)
        return out

    methods = [m for m in METHODS if complete(m)]
    rows = [[METHODS[m], *stat(lambda c, m=m: c["alpha"].get(m))] for m in methods]
    rows.append(["MuJoCo's best fit of each run (picked on the test set)", *stat(lambda c: c["mujoco_best"])])
    rows.append(["**clashx_families − MuJoCo's best**", *(f"**{v}**" for v in stat(lambda c: c["margin"], sign=True))])
    labs = sorted({lab for s in shapes for lab in cells[s]}, key=natural)
    keys = max(len(c["seeds"]) for s in shapes for c in cells[s].values())
    spread = []
    for s in shapes:
        per = {lab: mean(finite(c["margin"])) for lab, c in cells[s].items()}
        fam = {lab: mean(finite(c["alpha"].get("clashx_families"))) for lab, c in cells[s].items()}
        worst, best = min(per, key=per.get), max(per, key=per.get)
        below = sorted((lab for lab, v in per.items() if v < -0.005), key=natural)
        spread.append(
            [
                s,
                f"{signed(per[worst])} ({worst}) to {signed(per[best])} ({best})",
                f"{len(below)} of {len(per)}" + (f" ({', '.join(below)})" if below else ""),
                f"{sum(v >= 0.8 for v in fam.values())} of {len(fam)}",
            ]
        )
    files = [path] + sorted((RESULTS / folder).rglob("accuracy_*.json"))
    files += sorted(f for pattern in also for f in RESULTS.glob(pattern))
    return (
        f"### {title}\n\n{blurb}  Lab-seeds: {', '.join(labs)}; {keys} PRNG key{'s' if keys > 1 else ''} per fit.  "
        "Each cell: the mean over the lab-seeds of each one's mean over the keys"
        + ("; ± half the key-to-key range, averaged over the lab-seeds" if keys > 1 else "")
        + ".\n\n"
        + table(["method", *shapes], rows)
        + "\nThe margin per lab-seed (its mean over the keys):\n\n"
        + table(
            [
                "shape",
                "margin, worst to best lab-seed",
                "lab-seeds below MuJoCo's best",
                "lab-seeds where clashx_families reaches 0.80",
            ],
            spread,
        )
        + "\n"
        + provenance(files, [load(f) if f.suffix == ".json" else None for f in files])
    )


def strikes_needed() -> str | None:
    path = RESULTS / "tpu_v5e" / "fit_strikes" / "rows.txt"
    if not path.exists():
        return None
    groups: dict[tuple[int, str, str], list[dict]] = defaultdict(list)  # (N, lab, shape) -> windows
    for (n, _offset, lab, shape), (alpha, *_) in parse_rows(path):
        groups[(int(n), lab, SHORT_SHAPES.get(shape, shape))].append(alpha)
    rows = []
    for n in sorted({k[0] for k in groups}):
        labs = sorted({k[1] for k in groups if k[0] == n}, key=str.upper)
        windows = max(len(v) for k, v in groups.items() if k[0] == n)
        for family, name in (("mujoco", "MuJoCo's"), ("compliant", "compliant"), ("mean", "**both averaged**")):
            cells = []
            for s in SHAPES:
                per_lab = [mean(w[family] for w in groups[(n, lab, s)]) for lab in labs if groups.get((n, lab, s))]
                cells.append(num(mean(per_lab)) if per_lab else "–")
            rows.append([str(n), ", ".join(map(lab_name, labs)), str(windows), name, *cells])
    return (
        "### How many strikes the fit needs\n\nBoth families identified (no fine-tuning) from N strikes of each "
        "lab's *test* recording (windows of its first half) and scored at α = 0.1 on its second half.  Each cell: "
        "the mean over the labs of each lab's mean over its windows.\n\n"
        + table(["strikes", "labs", "windows", "family", *SHAPES], rows)
        + "\n"
        + provenance([path, path.parent / "README.md"], [])
    )


def search_budget() -> str | None:
    path = RESULTS / "tpu_v5e" / "search_budget" / "rows.txt"
    if not path.exists():
        return None
    by: dict[str, list[dict]] = defaultdict(list)
    for (budget, *_), (alpha, *_) in parse_rows(path):
        by[budget].append(alpha)
    rows = [
        [
            b.replace("x", " starts × ") + " trials",
            str(len(v)),
            *(num(mean(a[k] for a in v)) for k in ("mujoco", "compliant", "mean")),
        ]
        for b, v in sorted(by.items(), key=lambda kv: int(kv[0].split("x")[0]))
    ]
    return (
        "### Is it the search\n\nThe identification's Levenberg-Marquardt search at the library's budget and at "
        "8× the starts and 3.3× the trials; α = 0.1 on each lab's test strikes, mean over the fits (lab A fit "
        "seeds 2, 12, 22, 32; labs C and D seed 2; three shapes).\n\n"
        + table(["search", "fits", "MuJoCo's family", "compliant family", "both averaged"], rows)
        + "\n"
        + provenance([path, path.parent / "README.md"], [])
    )


def finetune() -> str | None:
    path = RESULTS / "tpu_v5e" / "finetune_strikes" / "rows.txt"
    if not path.exists():
        return None
    rows, counts = [], defaultdict(lambda: [0, 0, 0, 0])  # few/many strikes -> fits, engaged, helped, lowered
    for head, (alpha, steps, *_) in parse_rows(path):
        n, what = (
            (int(head[0]), f"{head[0]} (window {head[1]})") if len(head) == 4 else (10, f"10 (fit seed {head[0]})")
        )
        lab, shape = head[-2], SHORT_SHAPES.get(head[-1], head[-1])
        group = "10-20" if n <= 20 else "50-100"
        engaged = {f: k for f, k in steps.items() if k > 0}
        counts[group][0] += len(steps)
        for f in engaged:
            change = alpha[f] - alpha[f"{f}_identified"]
            counts[group][1] += 1
            counts[group][2] += change > 0.005
            counts[group][3] += change < -0.005
        if engaged:
            rows.append(
                [
                    n,
                    len(head),
                    what,
                    f"{lab_name(lab)}, {shape}",
                    ", ".join(f"{f}: {k}" for f, k in engaged.items()),
                    ", ".join(f"{alpha[f + '_identified']:.2f} → {alpha[f]:.2f}" for f in engaged),
                    f"{alpha['mean_identified']:.2f} → {alpha['mean']:.2f}",
                ]
            )
    summary = "; ".join(
        f"from {g} strikes it took steps in {c[1]} of {c[0]} family fits, raised {c[2]} and lowered {c[3]}"
        for g, c in sorted(counts.items())
    )
    return (
        "### When fine-tuning engages\n\nEach family identified and then fine-tuned with the library's default "
        "gate (cross-validation over whole strikes, a step count accepted at two standard errors), on windows of "
        "each lab's test recording and on the ten-strike fit recordings.  Every fit where it took a step "
        "(α = 0.1 before → after):\n\n"
        + table(
            ["fit strikes", "lab, shape", "family: steps", "family", "both averaged"],
            [r[2:] for r in sorted(rows, key=lambda r: (r[0], -r[1]))],
        )
        + f"\nIn all: {summary}.\n\n"
        + provenance([path, path.parent / "README.md"], [])
    )


LABEL_RUNS = [  # (file under bench/results/cpu2/, how the ten labels were used)
    ("compliant_surrogate_fit_30_sigma.json", "read off the tracks, weighed equally"),
    ("compliant_surrogate_fit_true_labels.json", "the strikes' *true* velocities (a diagnostic)"),
    ("compliant_surrogate_fit_a2_a12_C2_D2.json", "read off the tracks, weighed equally"),
    ("compliant_surrogate_fit_min_samples_12.json", "only strikes with 12 slide samples or more"),
    ("compliant_surrogate_fit_robust_0.1.json", "all, under a Cauchy loss of scale 0.1"),
    ("compliant_surrogate_fit_label_weights_dev.json", "**each weighed by its track's σ** (the default)"),
    ("compliant_surrogate_fit_fresh_22_32.json", "read off the tracks, weighed equally"),
    ("compliant_surrogate_fit_label_weights_fresh.json", "**each weighed by its track's σ** (the default)"),
]


def label_cost() -> str | None:
    rows, files, data = [], [], []
    for name, how in LABEL_RUNS:
        path = RESULTS / "cpu2" / name
        d = load(path) if path.exists() else None
        if not isinstance(d, dict) or not d.get("rows"):
            continue
        files.append(path)
        data.append(d)
        fits = d["rows"]
        labs = sorted({f"{lab_name(r['lab'])}{r['seed']}" for r in fits}, key=natural)
        avg = [num(mean(r["mean"] for r in fits if r["shape"] == s)) for s in SHAPES]
        fam = [num(mean(r[k] for r in fits)) for k in ("mujoco", "compliant")]
        rows.append([f"{len(fits)} ({', '.join(labs)})", how, " / ".join(avg), *fam])
    if not rows:
        return None
    return (
        "### What the labels cost\n\nBoth families identified from ten strikes (no fine-tuning; "
        "`bench/compliant_surrogate.py fit`), α = 0.1 on each lab's test strikes.  The same fits with the "
        "labels used in different ways.\n\n"
        + table(
            [
                "fits (lab, fit seed)",
                "the ten labels",
                "both averaged: semi-cylinder / square / triangle",
                "MuJoCo's family",
                "compliant family",
            ],
            rows,
        )
        + "\n"
        + provenance(files, data)
    )


def ceilings() -> str | None:
    rigid_path = RESULTS / "cpu2" / "strike_families_rigid.json"
    comp_path = RESULTS / "cpu2" / "strike_families_compliant_ceiling.json"
    rigid = load(rigid_path) if rigid_path.exists() else None
    comp = load(comp_path) if comp_path.exists() else None
    if not isinstance(rigid, dict) or not isinstance(comp, list):
        return None
    held = {(r["lab"], r["shape"]): r["held_out"] for r in comp}
    rows = []
    for r in rigid["rows"]:
        key = (r["lab"], r["shape"])
        rows.append(
            [
                f"{r['lab'].upper()}, {r['shape']}",
                num(r["mujoco"]["held_out"]),
                num(r["rigid"]["held_out"]),
                num(held[key]) if key in held else "–",
            ]
        )
    means = [mean(float(x) for x in col if x != "–") for col in list(zip(*rows))[1:]]
    rows.append(["**mean**", *(f"**{num(m)}**" for m in means)])
    return (
        "### Impact family ceilings\n\nAn oracle, to measure the model classes only: each fitted by CMA-ES "
        "to the *true* velocities of 60 test strikes, α = 0.1 on the held-out ones.\n\n"
        + table(["lab, shape", "MuJoCo C (8 parameters)", "rigid law (7)", "compliant law (8)"], rows)
        + "\n"
        + provenance([rigid_path, comp_path], [rigid, comp])
    )


# ---------------------------------------------------------------------------------------------- the cube


def cube_tosses(prefix: str, title: str, blurb: str) -> str | None:
    files = sorted((RESULTS / "cpu2").glob(f"{prefix}_s*.json"))
    runs = {f: load(f) for f in files}
    runs = {f: d for f, d in runs.items() if isinstance(d, dict)}
    if not runs:
        return None
    seeds = {f: d.get("_meta", {}).get("config", {}).get("seed", f.stem.rsplit("_s", 1)[-1]) for f, d in runs.items()}
    methods = [m for m in CUBE_METHODS if any(m in d for d in runs.values())]
    rows = []
    for m in methods:
        cells = []
        for d in runs.values():
            r = d.get(m)
            cells.append(
                "–"
                if r is None
                else f"{r['pos_err_pct_width_mean']:.1f} / {r['rest_err_pct_width_mean']:.1f}"
                f" / {r['rot_err_deg_mean']:.1f} ({r['alpha_accuracy']:.2f})"
            )
        rows.append([CUBE_METHODS[m], *cells])
    horizons = []
    for m in methods:
        cells = []
        for d in runs.values():
            h = d.get(m, {}).get("horizons", {})
            cells.append(
                " / ".join(f"{h[k]['pos_err_pct_width_mean']:.1f}" for k in ("40", "80", "whole") if k in h) or "–"
            )
        horizons.append([CUBE_METHODS[m], *cells])
    fit_s = []
    for m in methods:
        times = [d[m]["fit_s"] for d in runs.values() if m in d and "fit_s" in d[m]]
        if times and max(times) > 0 and not m.endswith("_mean"):
            fit_s.append(f"{CUBE_METHODS[m]} {min(times):.0f}-{max(times):.0f} s")
    n_eval = {d.get("_meta", {}).get("n_eval") for d in runs.values()}
    head = ["method", *(f"seed {s}" for s in seeds.values())]
    return (
        f"### {title}\n\n{blurb}  Evaluated tosses per seed: {', '.join(map(str, sorted(n_eval - {None})))}.  "
        "Each cell: position error / error at rest (% of the cube's width, mean over the tosses' frames) / "
        "rotation error (°), and in brackets the first impact's α = 0.1.\n\n"
        + table(head, rows)
        + "\nPosition error (% of the width) over the first 40 and 80 frames and the whole toss:\n\n"
        + table(head, horizons)
        + (f"\nFit time over the seeds (clashx_families: both families' fits): {'; '.join(fit_s)}.\n" if fit_s else "")
        + "\n"
        + provenance(list(runs), list(runs.values()))
    )


def cube_first_impact() -> str | None:
    path = RESULTS / "cpu2" / "cube_rigid_distil.json"
    d = load(path) if path.exists() else None
    if not isinstance(d, dict) or "seeds" not in d:
        return None
    seeds = sorted(d["seeds"], key=int)
    names = [k for k, v in d["seeds"][seeds[0]].items() if isinstance(v, dict) and "median_rel_err" in v]
    rows = [
        [n, *(f"{d['seeds'][s][n]['median_rel_err']:.3f} ({d['seeds'][s][n]['alpha_0.1']:.2f})" for s in seeds)]
        for n in names
    ]
    return (
        "### First impact\n\nMedian relative error of the speed vector 27 ms after the first contact "
        "(α = 0.1 in brackets) on the 340 evaluated tosses: the rigid law (four parameters, its inertia free) "
        "identified by CMA-ES, distilled into a surrogate, and MuJoCo's shipped surrogate.\n\n"
        + table(["impact model", *(f"seed {s}" for s in seeds)], rows)
        + "\n"
        + provenance([path], [d])
    )


# ---------------------------------------------------------------------------------------------- speed


def throughput() -> str | None:
    path = RESULTS / "tpu_v5e" / "part2.json"
    d = load(path) if path.exists() else None
    if not isinstance(d, dict) or "rows" not in d:
        return None
    sizes = sorted({r["n"] for r in d["rows"]})
    by: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    for r in d["rows"]:
        by[(r["kind"], r["engine"])][r["n"]] = f"{r['per_s']:,.0f}" if "per_s" in r else "skipped"
    rows = [
        [f"{'collisions' if k == 'contact' else 'rest poses'}: {e}", *(v.get(n, "–") for n in sizes)]
        for (k, e), v in by.items()
    ]
    cma = [
        [
            c["engine"],
            str(c["targets"]),
            f"{c['one_by_one']['run_s']:.2f} s",
            f"{c['together']['run_s']:.2f} s",
            f"{c['ratio']:.1f}×",
        ]
        for c in d.get("cmaes", [])
    ]
    return (
        "### Engines\n\nPer second, compile apart, the square block at nominal parameters.  `mjx-policy`: MJX "
        "batched as `clashx.core.block_size` says (one vmap on the chip); `mujoco-c`: MuJoCo C on the host's "
        "cores; `cpu-hybrid`, `mjx-hybrid`: the hybrid rule on MuJoCo C and on MJX "
        f"(versions: {', '.join(f'{k} {v}' for k, v in d.get('versions', {}).items())}).\n\n"
        + table(["per second, batch of", *(f"{n:,}" for n in sizes)], rows)
        + "\nCMA-ES over the hybrid, 16 × 5 generations per target, one target at a time against all at once:\n\n"
        + table(["engine", "targets", "one by one", "together", "ratio"], cma)
        + "\n"
        + provenance([path], [d])
    )


def pipeline() -> str | None:
    files = sorted((RESULTS / "tpu_v5e").glob("pipeline_*.json"))
    data = [load(f) for f in files]
    rows = []
    for f, d in zip(files, data):
        if not isinstance(d, dict) or "pipeline" not in d:
            continue
        p = d["pipeline"]
        loop = "one Python step per minibatch (before)" if "before" in f.stem else "one compiled call per epoch"
        rows.append(
            [
                d.get("backend", "?"),
                loop,
                f"{p['generate']['n']:,} ({p['generate']['engine']}): {p['generate']['s']:.1f} s",
                f"{p['pretrain']['epochs']}: {p['pretrain']['s']:.1f} s",
            ]
        )
    if not rows:
        return None
    return (
        "### Generation and pretraining\n\n`clashx generate` of 100,000 strikes, then 20 pretraining epochs on "
        "them, on the chip and on its host's CPU (`JAX_PLATFORMS=cpu`).\n\n"
        + table(["JAX backend", "training loop", "generate: strikes (engine)", "pretrain: epochs"], rows)
        + "\n"
        + provenance(files, data)
    )


def sparse_handler() -> str | None:
    files = sorted(RESULTS.glob("*/sparse_handler_*.json"))
    data = [load(f) for f in files]
    rows = []
    for f, d in zip(files, data):
        if not isinstance(d, dict):
            continue
        cells = [
            f"{d[k]['dense_s']:.2f} → {d[k]['sparse_s']:.2f} s ({d[k]['ratio']:.1f}×)" if k in d else "–"
            for k in ("rigid", "surrogate")
        ]
        rows.append([MACHINES.get(f.parent.name, f.parent.name), f"{d['tosses']} × {d['frames']}", *cells])
    if not rows:
        return None
    return (
        "### Sparse handler\n\nReal cube launches, every landing through the handler, the handler evaluated on "
        "every world at every step (dense) against only where a world touches (sparse).\n\n"
        + table(["machine", "tosses × frames", "rigid law (54 impulse steps)", "cube surrogate (an MLP)"], rows)
        + "\n"
        + provenance(files, data)
    )


HANDLERS = {
    "surrogate": "surrogate (MuJoCo's family, `clashx.PairSurrogate`)",
    "law": "rigid law (`clashx.scenes.pair_law`)",
    "average": "both averaged (`clashx.learn.PairFamilies`)",
    "perfect": "perfect handler: MuJoCo over the window (`clashx.hybrid.engine_window`)",
    "surrogate_at_truth": "diagnostic: the surrogate at the lab's *true* parameters",
    "no_impact": "no impact (post = pre): the floor",
}


def own_scenes() -> str | None:
    files = sorted(RESULTS.glob("*/own_scene_*.json"))
    data = [load(f) for f in files]
    parts = []
    for f, d in zip(files, data):
        if not isinstance(d, dict) or "held_out" not in d:
            continue
        held, roll = d["held_out"], d.get("rollout", {})
        rows = []
        for key, name in HANDLERS.items():
            h = held.get(key)
            r = roll.get(key)
            if h is None and r is None:
                continue  # a row this run did not measure
            body = next(iter(r["bodies"].values())) if r else None
            rows.append([
                name,
                num(h["alpha_0.1"], 2) if h else "–",
                f"{100 * h['median_rel_err']:.1f} %" if h else "–",
                f"{100 * body['median_rel_err']:.1f} % / {100 * body['p90_rel_err']:.1f} %" if body else "–",
                f"{r['impacts_max']} ({r['worlds_over_bounces']})" if r else "–",
                str(r["fallbacks"]) if r else "–",
                f"{r['time_s']:.2f} s" if r else "–",
            ])  # fmt: skip
        distil = d.get("distil", {})
        seen = f" (each also as its {distil['images'] - 1} symmetric images)" if distil.get("images", 1) > 1 else ""
        how = (f"{distil['n_train']} impacts{seen}, {distil['width']} × {distil['depth']}, {distil['epochs']} epochs: "
               f"{num(distil['validation']['alpha_0.1'], 2)} of held-out simulated impacts within α = 0.1"
               if distil else "a surrogate trained before")  # fmt: skip
        ident = d["identified"]
        names = ident["names"]
        fit = "; ".join(
            f"{fam}: " + ", ".join(f"{n} {v:.3g}" for n, v in zip(names[fam], ident[fam], strict=True))
            for fam in ("surrogate", "law")
        )
        parts.append(
            f"### {f.stem.removeprefix('own_scene_')}\n\nScene `{d['scene']}`; surrogate: {how}.  Stand-in lab at {d['lab']} (the scene's space); identified "
            f"from its first 10 impacts: {fit}.  Held out: {held['n']} impacts of the same lab.  Rollouts: launches "
            f"the model never saw, to rest, against full-contact MuJoCo C at the surrogate's identified parameters "
            f"({d['full_contact_s']:.2f} s; {d['full_contact_bounces_mean']:.2f} bounces per world).\n\n"
            + table(
                [
                    "handler",
                    "within α = 0.1",
                    "median error",
                    "rollout: median / p90 of travel",
                    "impacts per world, max (worlds over bounces + 1)",
                    "left to MuJoCo",
                    "rollout time",
                ],
                rows,
            )  # fmt: skip
            + "\n"
            + provenance([f], [d])
        )
    if not parts:
        return None
    return (
        "## Your own scene\n\n`bench/own_scene_families.py`: the README's walk-through with every handler the rule "
        "can run, on scenes nothing was tuned on.\n\n" + "\n".join(parts)
    )


STRIKE_METHODS = {
    "mujoco_nominal": "MuJoCo C at its defaults",
    "mujoco_identified": "MuJoCo C identified (velocities, then the rest poses)",
    "clashx": "clashx: the surrogate",
    "clashx_families": "clashx: both families averaged (`FamilyFit.handler`)",
    "mujoco_identified_velocity": "MuJoCo C identified, velocities only",
    "clashx_velocity": "clashx: the surrogate, velocities only",
}


def model_based_strikes() -> str | None:
    files = sorted(RESULTS.glob("*/cmaes_*.json"))
    data = [load(f) for f in files]
    rows = []
    for d in data:
        if not isinstance(d, dict) or "mbo" not in d:
            continue
        lab = str(d.get("lab", "?")).rsplit("/", 1)[-1].removesuffix(".json")
        for shape, methods in d["mbo"].items():
            for key, name in STRIKE_METHODS.items():
                if key in methods:
                    m = methods[key]
                    rows.append([lab, shape, name, f"{1000 * m['pos_err_m_median']:.1f} mm",
                                 f"{m['ori_err_rad_median']:.3f} rad"])  # fmt: skip
    if not rows:
        return None
    return (
        "## Model-based strikes\n\n`bench/cmaes.py`: each method identifies from ten recorded strikes of the lab, "
        "CMA-ES (16 × 20) picks the strike that sends the block to each of 20 targets through the method's model, "
        "and the strike runs in the lab; the error is the lab block's final pose against the target (medians over "
        "targets).  Lab A is the strike lab's, own_b one of ours.\n\n"
        + table(["lab", "shape", "method", "position error", "yaw error"], rows)
        + "\n"
        + provenance(files, data)
        + "\n```bash\npython bench/cmaes.py --shape square --targets 20 --no-timing [--lab bench/labs/own_b.json]\n```\n"
    )


# ---------------------------------------------------------------------------------------------- the page


def missing() -> str:
    """The bench scripts none of whose results are under bench/results/."""
    covered = {script_of(f) for f in RESULTS.rglob("*") if f.is_file()}
    for readme in RESULTS.rglob("README*.md"):
        covered |= set(re.findall(r"bench/(\w+)\.py", readme.read_text()))
    absent = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem not in covered)
    if not absent:
        return ""
    return (
        "## Not yet here\n\nThese benches have left no results under `bench/results/`: "
        + ", ".join(f"`bench/{s}.py`" for s in absent)
        + ".  Where the topic pages quote their numbers (gradients in [Physics](physics.md), pushing in "
        "[Concepts](concepts.md), the next strikes in [Command line](cli.md#plan)), those come from the runs' printed output, not from files here.\n"
    )


SECTIONS = [
    "## Strike accuracy\n\nα-accuracy (`clashx.alpha_accuracy`): the "
    "share of test strikes whose predicted post-impact velocity (vx, vy, r·ωz) is within α = 0.1 of the lab's "
    "true one.  Every method sees the same ten recorded strikes (their tracks) of one lab and seed, and is scored "
    "on that lab's test strikes.  Lab A is the strike lab's; labs C and D are two of our own "
    "(`bench/correction.py`'s `OWN_LABS`).  \"MuJoCo's best fit\" is the best of MuJoCo's four fits in each "
    "run, picked on the test set, so it flatters MuJoCo.\n",
    lambda: pooled_accuracy(
        "tpu_v5e/accuracy_weighted_fresh_keys",
        "Fresh fit seeds with label weights",
        "Fit seeds 22 and 32 of labs A, C and D, never used to choose anything; each label weighed by its "
        "track's σ in clashx's fits and in the MuJoCo-side fits alike.",
        also=("tpu_v5e/accuracy_weighted_fresh/accuracy_*.json", "cpu2/accuracy_weighted_keys_semi/accuracy_*.json"),
    ),
    lambda: pooled_accuracy(
        "cpu2/accuracy_weighted_dev_d2",
        "Dev fits with label weights",
        "Lab A's fit seeds 2 and 12 and labs C and D's seed 2: the fits the defaults were chosen on.",
        also=("tpu_v5e/accuracy_weighted_dev/accuracy_*.json",),
    ),
    lambda: pooled_accuracy(
        "cpu2/accuracy_seeds",
        "Dev fits with equal label weights",
        "The same four lab-seeds with every fit weighing the labels equally, as before 2026-12-07 (key 0 of labs C and D ran without "
        "`mujoco.sysid`).",
        also=("cpu2/accuracy_families_a*_*.json",),
    ),
    "## What limits the strike fit\n",
    strikes_needed,
    search_budget,
    finetune,
    label_cost,
    ceilings,
    "## Cube tosses\n\nTen of the 350 real ContactNets tosses are drawn (the seed) to fit on; every "
    "method rolls the other 340 out from their initial states, every landing after a free flight through the "
    "impact model.  Published for comparison (Acosta et al. 2022, over their own horizon): Drake 13.5 % and "
    "16.5°, Bullet 14.9 % and 16.5°, MuJoCo 25.1 % and 21.7°.\n",
    lambda: cube_tosses("cube_toss_families", "Whole tosses", "`bench/cube_toss.py` with both impact families."),
    lambda: cube_tosses(
        "cube_toss_posterior_mean",
        "Posterior averaging",
        "`--posterior-samples 8`: each toss rolled out 8 times per family with the impact parameters drawn from "
        "the fit's Laplace posterior, the members averaged frame by frame.",
    ),
    cube_first_impact,
    own_scenes,
    model_based_strikes,
    "## Speed\n",
    throughput,
    pipeline,
    sparse_handler,
]


def render() -> str:
    parts = ["# Results\n\nGenerated by `python docs/gen_results.py` from bench/results/; do not edit by hand.\n"]
    for section in SECTIONS:
        text = section() if callable(section) else section
        if text:
            parts.append(text)
    parts.append(missing())
    return "\n".join(p.rstrip("\n") + "\n" for p in parts if p)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/results.md is not up to date")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if shallow():  # a shallow clone dates every file by its one commit: compare all but the dates
            warn("a shallow git clone: the tables' dates are not checked")
            current, text = (re.sub(r"\*Date:\*[^*]*\.  ", "*Date:* ?.  ", t) for t in (current, text))
        if current != text:
            print(f"{rel(OUT)} is out of date: run `python docs/gen_results.py` and commit it", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {rel(OUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

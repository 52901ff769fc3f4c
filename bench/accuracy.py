"""α-accuracy of post-impact velocity prediction on lab strikes, every method in one run (CLASH Table III).

    python bench/accuracy.py --shape square [--fit FIT.npz] [--test TEST.npz] [--model RUN] [--methods a,b]
                             [--seed 0] [--seeds 1] [--ceiling 60] [--json OUT] [--plot OUT.png]

FIT and TEST are strike-lab recordings (default: the shipped lab-A ones,
`clashx.lab_recording(shape, "fit" | "test")`; 10 and 200 strikes).  Every
method sees FIT only (its tracks, or the velocities ingested from them); it
predicts TEST's post-impact velocities, scored against TEST's
`post_velocity_true` (scoring only) at α = 0.05, 0.1, 0.2, plus the median
relative error.  clashx's predictions carry a σ each (`clashx.learn.strike_predictive`,
from the fit strikes only); its calibration on TEST is printed (coverage of the
50 % and 90 % ellipsoids, and the rank correlation of σ and error).  The methods are `clashx.workflows._strike_compare`'s (its docstring
has the table); `clashx` is clashx's full pipeline.  In the table,
`mujoco_identified` is MuJoCo C identified by CMA-ES with clashx's own
objective (labels, ground friction from the slides, priors).  In the JSON,
`mujoco_identified` is MuJoCo's *best* identification of this run: the
highest α = 0.1 accuracy among the MuJoCo-side fits (CMA-ES on 8 or 3
parameters, `mujoco.sysid` on the tracks, MJX by gradient), picked on the
test set itself, so in the baseline's favour; `details.mujoco_identified_is`
names it and `mujoco_cmaes` keeps the CMA-ES row.  `--model` defaults to the
shipped surrogate of the shape.

With `--seeds K` every method runs K times (PRNG keys seed, seed+1, ...:
CMA-ES, multistart LM and clashx's own fit are stochastic) and a second table
gives each method's α = 0.1 as the mean and the range over the K runs; the
JSON's `seeds` holds every run's scores.  The main table, the comparison with
MuJoCo's best and the plots are those of the first run.

The ceiling rows (`--ceiling N`, 0: none) bound what MuJoCo's model class can
do on this lab: MuJoCo C's eight parameters fitted by CMA-ES (3 restarts, 40
generations) to the *true* velocities of the first N test strikes
(`bench/ceiling.py`'s oracle), scored on those N (in-sample) and on the other
test strikes (held out); and the same for the compliant family's law
(`clashx.scenes.STRIKE_FAMILIES`, `bench/strike_families.py`), which
`clashx_families` identifies through its surrogate.  An oracle, not a method: no method may beat it by
reading the truth, and a method that comes close to it is limited by the
model class, one far below it by what ten noisy strikes can tell.

Times are wall-clock seconds on this machine, the first call's compilation
included; the "vs MuJoCo's best" column is a method's α = 0.1 accuracy
minus the best MuJoCo-side fit's, measured in the same run.  `--plot` writes the
α-curves of every method and, beside them (OUT-track.png), test strike 0's
recorded track against MuJoCo identified's and clashx's.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np
from ceiling import test_set_ceiling  # bench/ceiling.py: the oracle fit
from strike_families import test_set_ceiling_family  # bench/strike_families.py: the same for the compliant family

from clashx.core import write_json
from clashx.events import alpha_curve, lab_recording, read_npz
from clashx.scenes import geometry as geo
from clashx.surrogate import load_or_shipped
from clashx.workflows import (
    ALL_METHODS,
    CompareConfig,
    compare,
    plot_alpha_curves,
    plot_tracks,
    table,
    track_comparison,
)

# MuJoCo-side identifications; the JSON's `mujoco_identified` is the best of them in this run
MUJOCO_FITS = ("mujoco_identified", "mujoco_identified_3", "mujoco_sysid_tracks", "mjx_identified")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, choices=geo.SHAPES)
    ap.add_argument("--fit", help="strike-lab recording to fit on (default: the shipped lab-A fit recording)")
    ap.add_argument("--test", help="strike-lab recording to score on, with post_velocity_true (default: shipped)")
    ap.add_argument("--model", help="run folder of a pretrained surrogate (default: the shipped one)")
    ap.add_argument("--methods", default=",".join(ALL_METHODS), help="comma-separated (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1, help="runs per method, keys seed, seed+1, ... (mean and range)")
    ap.add_argument("--ceiling", type=int, default=60, help="test strikes the oracle ceiling is fitted to (0: none)")
    ap.add_argument("--json", help="write {method: α=0.1 accuracy, 'details': {...}} here")
    ap.add_argument("--plot", help="α-curves PNG (and OUT-track.png: a test strike's track per method)")
    a = ap.parse_args()
    fit_path = a.fit or str(lab_recording(a.shape, "fit"))
    test_path = a.test or str(lab_recording(a.shape, "test"))
    try:
        fit, test = read_npz(fit_path, "strike recording"), read_npz(test_path, "strike recording")
        for name, path, rec in (("--fit", fit_path, fit), ("--test", test_path, test)):
            if str(rec.get("shape")) != a.shape:
                raise ValueError(f"{name} {path}: strikes on the {str(rec.get('shape'))!r} block, not {a.shape!r}")
        model = load_or_shipped(a.model, a.shape)
        config = CompareConfig(methods=tuple(m.strip() for m in a.methods.split(",") if m.strip()))
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"bench/accuracy.py: {e}") from None
    t0 = time.perf_counter()
    result = compare(
        model, fit, test, key=jax.random.PRNGKey(a.seed), config=config, fit_name=fit_path, test_name=test_path,
        log=lambda m: print(f"[{time.perf_counter() - t0:6.1f} s] {m}", flush=True),
    )  # fmt: skip
    print(table(result))
    runs = [result["rows"]]
    for k in range(1, a.seeds):
        again = compare(model, fit, test, key=jax.random.PRNGKey(a.seed + k), config=config,
                        fit_name=fit_path, test_name=test_path, log=lambda m: None)  # fmt: skip
        runs.append(again["rows"])
        print(f"[{time.perf_counter() - t0:6.1f} s] seed {a.seed + k} done", flush=True)
    if a.seeds > 1:
        print(f"α = 0.1 over {a.seeds} seeds: mean (min - max)")
        for name in result["rows"]:
            v = np.array([r[name]["alpha_0.1"] for r in runs])
            print(f"  {name:<22} {v.mean():.3f} ({v.min():.3f} - {v.max():.3f})")
    rows = result["rows"]
    mujoco_fits = [m for m in MUJOCO_FITS if m in rows]
    best = max(mujoco_fits, key=lambda m: rows[m]["alpha_0.1"]) if mujoco_fits else None
    if best is not None:
        ref = rows[best]["alpha_0.1"]
        for name, r in rows.items():
            print(f"  {name:<22} vs MuJoCo's best ({best}): {r['alpha_0.1'] - ref:+.3f}")
    for name, d in result["details"].items():
        if "sigma" in d:  # clashx's σ per test strike, from the fit strikes only (clashx.learn.strike_predictive)
            c = d["sigma"]
            print(f"  {name:<22} σ per strike: median σ {c['sigma_rel_median']:.3f} / median error "
                  f"{c['err_rel_median']:.3f}; inside the 50 % / 90 % ellipsoid {c['coverage_50']:.2f} / "
                  f"{c['coverage_90']:.2f} (calibrated: 0.50 / 0.90); Spearman σ-error {c['spearman']:.2f}")  # fmt: skip
    ceiling = None
    if a.ceiling > 0:
        try:
            ceiling = test_set_ceiling(a.shape, test, n=a.ceiling, key=jax.random.PRNGKey(a.seed))
        except ValueError as e:
            raise SystemExit(f"bench/accuracy.py: --ceiling {a.ceiling}: {e}") from None
        print(f"  ceiling (oracle: MuJoCo C fitted to the true velocities of {ceiling['n_fit']} test strikes): "
              f"α = 0.1 {ceiling['in_sample']:.3f} on them, {ceiling['held_out']:.3f} on the other "
              f"{ceiling['n_held_out']}   [{time.perf_counter() - t0:6.1f} s]")  # fmt: skip
        ceiling["compliant"] = test_set_ceiling_family("compliant", a.shape, test, n=a.ceiling,
                                                       key=jax.random.PRNGKey(a.seed))  # fmt: skip
        c = ceiling["compliant"]
        print(f"  ceiling (oracle: the compliant family fitted the same way): α = 0.1 {c['in_sample']:.3f} on them, "
              f"{c['held_out']:.3f} on the other {c['n_held_out']}   [{time.perf_counter() - t0:6.1f} s]")  # fmt: skip
    device = f"{jax.default_backend()}: {jax.devices()[0].device_kind}, {os.cpu_count()} CPU cores"
    print(f"device {device}; wall time {time.perf_counter() - t0:.0f} s")
    if a.plot:
        length = geo.characteristic_length(a.shape)
        curves = {n: alpha_curve(p, result["truth"], length) for n, p in result["predictions"].items()}
        plot_alpha_curves(curves, a.plot, title=f"{a.shape}: {os.path.basename(test_path)}")
        track_png = os.path.splitext(a.plot)[0] + "-track.png"
        plot_tracks(track_comparison(result, test, 0), track_png, title=f"{a.shape}: test strike 0")
        print(f"-> {a.plot}, {track_png}")
    if a.json:
        details = {n: {"scores": rows[n]} | d for n, d in result["details"].items()}
        out = {n: r["alpha_0.1"] for n, r in rows.items()}
        if "mujoco_identified" in out:
            out["mujoco_cmaes"] = out["mujoco_identified"]
        if best is not None:
            out["mujoco_identified"] = rows[best]["alpha_0.1"]
        out["details"] = json.loads(json.dumps(details, default=float)) | {
            "shape": a.shape, "fit": fit_path, "test": test_path, "n_fit": result["n_fit"],
            "n_test": result["n_test"], "device": device, "seed": a.seed,
            "mujoco_identified_is": best, "lab_fit": json.loads(json.dumps(result["lab_fit"], default=float)),
            "seeds": [{n: r[n] for n in r} for r in runs], "ceiling": ceiling,
        }  # fmt: skip
        write_json(a.json, out)
        print(f"-> {a.json}")


if __name__ == "__main__":
    main()

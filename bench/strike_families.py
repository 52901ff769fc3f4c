"""The strike's other impulse families against MuJoCo's class: ceilings, and ten-strike fits (issue 26, item 1).

    python bench/strike_families.py [--family compliant|rigid] [--labels true|tracks] [--labs a:7,C:7,D:7]
                                    [--shapes ...] [--n 60] [--mujoco] [--generations 40] [--restarts 3]
                                    [--json OUT]

The families are clashx.scenes's (`STRIKE_FAMILIES`, clashx/scenes/_strike_laws.py): `rigid` (Newton restitution and
Coulomb friction between rigid planar bodies) and `compliant` (Hunt-Crossley
forces).  A family is fitted by CMA-ES (`clashx.optimize.cmaes_in_box`, the
baselines' objective: mean squared relative error of the speed vector) and
scored at α = 0.1 on held-out strikes' `post_velocity_true` (lab A: the
shipped 200; labs C and D of bench/correction.py: 100, seed 1).  `--labs`
lists LAB:FIT_SEED.

* `--labels true`: the ceiling.  Fitted to the *true* velocities of `--n`
  random strikes (flat prior): an oracle, for measuring the model class only,
  as bench/ceiling.py does for MuJoCo (`--mujoco`: its `strike8` oracle on the
  same strikes, the same search).
* `--labels tracks`: a method.  Ten strikes, their velocities ingested from
  the tracks (`fit_events`), clashx's objective: μ2 held at what the slides
  give (`ground_friction`), a Gaussian prior of one prior range around the
  nominal block on mass, centre of mass and torsion (`LabFitConfig.prior_std`),
  3 restarts.  `--mujoco`: MuJoCo C by the same CMA-ES and objective
  (`identify_cmaes`, as bench/cmaes.py's `mujoco_identified`).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import numpy as np
from ceiling import alpha_of, held_out_ceiling, oracle_fit
from cmaes import fit_events, run_lab
from correction import lab_file, lab_test

from clashx.baselines import identify_cmaes
from clashx.core import write_json
from clashx.events import alpha_accuracy, ingest_strike_lab, relative_error, speed_vector
from clashx.learn import LabFitConfig, ground_friction
from clashx.optimize import cmaes_in_box
from clashx.scenes import STRIKE_FAMILIES as FAMILIES
from clashx.scenes import family_outcomes as outcomes
from clashx.scenes import geometry as geo
from clashx.scenes import make_strike_scene
from clashx.workflows import lab_truth

NONFINITE_LOSS = 1e3  # the loss of a candidate whose outcome is not finite


def fit_family(family, shape, strikes, truth, *, key, generations, restarts, mu2=None, scale="relative", robust=0.0):
    """CMA-ES over the family's unit box: (params, loss).  With `mu2`, clashx's objective (μ2 held there,
    a prior of one range around the nominal block on mass, centre of mass and torsion); else a flat prior.
    `scale`: each strike's speed error over its own true speed ("relative", the baselines') or over the
    median true speed of the fit strikes ("median": a slow strike's label noise weighs no more than a fast one's).
    `robust` > 0: each strike's squared error e² enters as robust² log(1 + e² / robust²) (Cauchy)."""
    _, names, low, high, nominal = FAMILIES[family]
    lo, hi = np.asarray(low), np.asarray(high)
    n, length = len(strikes), geo.characteristic_length(shape)
    base = np.asarray(nominal, np.float64)
    inv_std = np.zeros(len(names))
    if mu2 is not None:
        base[names.index("mu2")] = np.clip(mu2, lo[names.index("mu2")], hi[names.index("mu2")])
        config = LabFitConfig()
        for name, std in (dict(config.prior_std) | {"mu2": config.stage1_slide_std}).items():
            if name in names:
                inv_std[names.index(name)] = 1.0 / std
    base_u = (base - lo) / (hi - lo)
    typical = float(np.median(np.linalg.norm(np.asarray(speed_vector(truth, length)), axis=-1)))

    def losses(us):
        us = np.asarray(us)
        p = lo + us * (hi - lo)
        pred = outcomes(family, shape, np.tile(strikes, (len(us), 1)), np.repeat(p, n, axis=0)).reshape(len(us), n, 3)
        if scale == "relative":
            e2 = np.asarray(relative_error(pred, truth[None], length)) ** 2
            fit = np.mean(robust**2 * np.log1p(e2 / robust**2) if robust > 0 else e2, axis=1)
        else:
            res = np.asarray(speed_vector(pred, length)) - np.asarray(speed_vector(truth, length))[None]
            fit = np.mean(np.sum(res**2, axis=-1), axis=1) / typical**2
        fit = np.nan_to_num(fit, nan=NONFINITE_LOSS, posinf=NONFINITE_LOSS)
        return fit + np.sum(((us - base_u) * inv_std) ** 2, axis=1) / n

    start = base_u if mu2 is not None else np.full(len(names), 0.5)
    u, loss, _ = cmaes_in_box(losses, start, key=key, population=16, generations=generations, std_init=0.25,
                              restarts=restarts)  # fmt: skip
    return lo + u * (hi - lo), float(loss)


def test_set_ceiling_family(family: str, shape: str, test: dict, *, n: int = 60, key, generations: int = 40,
                            restarts: int = 3) -> dict:  # fmt: skip
    """The family's ceiling on a test recording, as `bench/ceiling.py`'s `test_set_ceiling` is MuJoCo's (the same
    `held_out_ceiling`): fitted by CMA-ES (flat prior) to the true labels of its first `n` strikes."""
    return held_out_ceiling(
        test, n,
        lambda s, v: fit_family(family, shape, s, v, key=key, generations=generations, restarts=restarts)[0],
        lambda p, s, v: alpha(family, shape, p, s, v), FAMILIES[family][1],
    )  # fmt: skip


def alpha(family, shape, params, strikes, truth) -> float:
    """α = 0.1 accuracy of the family at `params` against true velocities."""
    return float(alpha_accuracy(outcomes(family, shape, strikes, params), truth, geo.characteristic_length(shape)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=tuple(FAMILIES), default="compliant")
    ap.add_argument("--labels", choices=("true", "tracks"), default="true")
    ap.add_argument("--labs", default="a:7,C:7,D:7", help="LAB:FIT_SEED,... (a: lab A; C, D: bench/correction.py's)")
    ap.add_argument("--shapes", default=",".join(geo.SHAPES))
    ap.add_argument("--n", type=int, default=60, help="strikes fitted with --labels true (tracks: 10)")
    ap.add_argument("--test-n", type=int, default=100)
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument(
        "--scale",
        choices=("relative", "median"),
        default="relative",
        help="the family's fit loss: error over each strike's speed, or over the fit strikes' median",
    )
    ap.add_argument("--robust", type=float, default=0.0, help="Cauchy scale of the family's relative errors (0: none)")
    ap.add_argument("--mujoco", action="store_true", help="MuJoCo C fitted the same way, beside it")
    ap.add_argument("--json")
    a = ap.parse_args()
    names = FAMILIES[a.family][1]
    rows, skipped = [], []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for item in a.labs.split(","):
            lab, seed = item.split(":")
            path = lab_file(lab, tmp)
            for shape in a.shapes.split(","):
                n = a.n if a.labels == "true" else 10
                rec = run_lab(shape, path, os.path.join(tmp, f"{lab}{seed}_{shape}_fit.npz"), n=n, seed=int(seed))
                s_test, v_test, _ = lab_truth(lab_test(shape, lab, tmp, a.test_n), "test")
                key = jax.random.PRNGKey(0 if a.labels == "true" else int(seed))
                mu2 = None
                if a.labels == "true":
                    s_fit, v_fit, _ = lab_truth(rec, "fit")
                else:
                    try:
                        s_fit, v_fit, _ = fit_events(rec, shape)
                        mu2 = ground_friction(ingest_strike_lab(rec, "fit recording"))[0]
                    except ValueError as e:  # too few measured slides to read the ground from: reported, skipped
                        print(f"lab {lab} seed {seed} {shape:<14} skipped: {e}", flush=True)
                        skipped.append({"lab": lab, "seed": int(seed), "shape": shape, "reason": str(e)})
                        continue
                t1 = time.perf_counter()
                p, loss = fit_family(a.family, shape, s_fit, v_fit, key=key, generations=a.generations,
                                     restarts=a.restarts, mu2=mu2, scale=a.scale, robust=a.robust)  # fmt: skip
                row = {"lab": lab, "seed": int(seed), "shape": shape, "n_fit": len(s_fit), a.family: {
                    "held_out": alpha(a.family, shape, p, s_test, v_test), "loss": loss,
                    "seconds": time.perf_counter() - t1, "params": dict(zip(names, p.tolist(), strict=True))}}  # fmt: skip
                if a.labels == "true":
                    row[a.family]["fit"] = alpha(a.family, shape, p, s_fit, v_fit)
                if a.mujoco:
                    sim = make_strike_scene(shape)
                    t1 = time.perf_counter()
                    if a.labels == "true":
                        fit = oracle_fit(sim, s_fit, v_fit, key=key, generations=a.generations, restarts=a.restarts)
                    else:
                        config = LabFitConfig()
                        fit = identify_cmaes(sim, s_fit, v_fit, key=key, population=16, generations=a.generations,
                                             base=sim.space.vector(mu2=float(np.clip(mu2, sim.space.low[1], sim.space.high[1]))),
                                             prior_std=dict(config.prior_std) | {"mu2": config.stage1_slide_std},
                                             restarts=a.restarts)  # fmt: skip
                    row["mujoco"] = {"held_out": alpha_of(sim, fit.params, s_test, v_test, shape),
                                     "seconds": time.perf_counter() - t1,
                                     "params": dict(zip(sim.space.names, np.asarray(fit.params).tolist(), strict=True))}  # fmt: skip
                    if a.labels == "true":
                        row["mujoco"]["fit"] = alpha_of(sim, fit.params, s_fit, v_fit, shape)
                rows.append(row)
                cells = "   ".join(
                    f"{m}" + (f" fit {row[m]['fit']:.3f}" if "fit" in row[m] else "") + f" held-out {row[m]['held_out']:.3f}"
                    for m in (a.family, "mujoco") if m in row
                )  # fmt: skip
                print(f"lab {lab} seed {seed} {shape:<14} {cells}   [{time.perf_counter() - t0:.0f} s]", flush=True)
                print(f"   {a.family} params {row[a.family]['params']}", flush=True)
    if not rows:
        raise SystemExit(f"no fit succeeded ({len(skipped)} skipped, reasons above)")
    for m in (a.family, "mujoco"):
        if m in rows[0]:
            fit = f"fit {np.mean([r[m]['fit'] for r in rows]):.3f}  " if "fit" in rows[0][m] else ""
            print(f"mean over {len(rows)}: {m:<9} {fit}held-out {np.mean([r[m]['held_out'] for r in rows]):.3f}")
    if a.json:
        write_json(a.json, {"rows": rows, "skipped": skipped, "args": vars(a)})
        print(f"-> {a.json}")


if __name__ == "__main__":
    main()

"""The compliant impulse family distilled and identified the CLASH way, beside clashx's MuJoCo surrogate (issue 26).

    python bench/compliant_surrogate.py distil --out DIR [--shapes ...] [--n 200000] [--epochs 80]
    python bench/compliant_surrogate.py fit [--models DIR] [--labs a:2,a:12,C:2,D:2] [--cache DIR] [--json OUT]
                                            [--key 0] [--n-starts 12] [--iterations 30] [--true-labels]
                                            [--robust C] [--min-samples N] [--label-weights]

`distil` simulates `--n` strikes per shape with `clashx.scenes`' compliant
family (`family_outcomes("compliant", ...)`) (Hunt-Crossley normal force, Coulomb friction; 8 parameters
drawn uniformly from its box, SCENE.md's strike ranges) and pretrains a
`clashx.StrikeSurrogate` on them with `clashx.pretrain` (the same recipe as the
shipped MuJoCo surrogates: width 256, depth 4, mirror images), writing
DIR/SHAPE/ (how the shipped `clashx.shipped_strike_surrogate(shape, "compliant")`
were made).  The law gives the velocity at release only, so the window's
displacement is unknown (NaN) and the surrogate learns the velocity alone.

`fit` runs, for each lab and shape, `clashx.fit_families`: clashx's two-stage
identification (`clashx.fit_recording`: labels from the ten tracks, μ2 from
the slides, the block's priors; here without fine-tuning) once per family on
the same recording:

* `mujoco`: the shipped surrogate (MuJoCo's eight parameters) with local
  re-distillation, clashx's "identified only";
* `compliant`: the compliant surrogate (`--models`, default the shipped one), the block's mass, centre of mass,
  torsion and the stiffness log10k under the same one-range Gaussian prior
  as MuJoCo's time constant, friction and damping free (no local
  re-distillation: that step simulates MuJoCo).

`--n-starts` and `--iterations` set both families' search (`LabFitConfig`;
the defaults are the library's), and each row keeps each family's objective at
its optimum (`objective`), so that a longer search can be judged by what it
finds on the fit strikes alone.  `--fit-strikes N` fits on the first N strikes of the
test recording (from `--fit-offset K` on) instead and scores on its second half: how far more strikes than
ten would carry each family.  `--true-labels` (a diagnostic: it reads the scoring field) identifies both
families from the fit strikes' true velocities instead of the tracks' (μ2 still from the slides): what
better labels could bring.  Two ways of using the tracks' labels differently, tried on the dev fits and not
adopted (README): `--robust C` (both families' identification under a Cauchy loss of scale C,
`LabFitConfig.robust`) and `--min-samples N` (identify from the strikes whose slide has at least N samples
before its fitted stop, at least five strikes; μ2 still from all slides).  By default (the library's,
`LabFitConfig.label_weights`) the joint identification weighs each label by 1 / (stage 1's fit loss + σ²), σ
its release speed's relative spread read off its own track (`clashx.events.track_label_sigma`);
`--no-label-weights` weighs them equally (the results files before 2026-12-07's default).  It scores on the lab's test strikes at α = 0.1 against their true
velocities (scoring only):

* `compliant` through its surrogate, and `compliant_law`: the law itself at
  the identified parameters (what the surrogate's own error costs);
* `mix`: w · mujoco + (1 − w) · compliant, w on a grid of 0, 0.1, ..., 1
  chosen by the ten fit strikes' loss (the same relative speed residuals the
  identification minimises), and `mean`: w = 1/2 fixed, `FamilyFit.predict`;
* with `--combinations`, tried 2026-12-07, not adopted (README): `precision` and `precision_param`, per test strike the two
  families weighed by their own covariances (`precision_weighted`); `posterior_mean` (and per family),
  each family's prediction averaged over 64 draws of its parameters' Laplace posterior (`posterior_mean`; the
  results files of 2026-12-07 drew both families' draws from one seed, now one each);

and the σ per test strike (`predictive_calibration`: coverage of the 50 % and
90 % ellipsoids, Spearman of σ and error) of MuJoCo's fit alone
(`strike_predictive`) and of the average (`FamilyFit.predictive`, the two
families' mixture).

Recordings are run in the strike lab (`bench/cmaes.py`'s `run_lab`; labs C
and D are `bench/correction.py`'s `OWN_LABS`) and kept in `--cache` as
fit_LABSEED_SHAPE.npz and test_LAB_SHAPE.npz.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time

import jax
import numpy as np
from cmaes import run_lab  # bench/cmaes.py: strike_lab.py in a subprocess
from correction import lab_file, lab_test  # bench/correction.py: labs C and D, test recordings

import clashx
from clashx.core import write_json
from clashx.events import (
    alpha_accuracy,
    recording_slides,
    sample_strikes,
    save_events,
    speed_residuals,
    speed_vector,
)
from clashx.learn import (
    FamilyFit,
    LabFitConfig,
    PretrainConfig,
    family_average,
    fit_family,
    predictive_calibration,
    pretrain,
)
from clashx.scenes import RELEASE_AFTER, compliant_space, family_outcomes
from clashx.scenes import geometry as geo
from clashx.workflows import lab_truth, slice_recording

CHUNK = 8192  # strikes simulated per compiled call
ALPHA = 0.1
MIX_GRID = np.linspace(0.0, 1.0, 11)
POSTERIOR_DRAWS = 64


def distil(shape: str, out: str, *, n: int, epochs: int, seed: int) -> dict:
    """Simulate `n` compliant strikes of `shape` into OUT/gen_SHAPE.npz and pretrain OUT/SHAPE on them."""
    os.makedirs(out, exist_ok=True)
    space = compliant_space()
    data = os.path.join(out, f"gen_{shape}.npz")
    t0 = time.perf_counter()
    if not os.path.exists(data):
        k_s, k_p = jax.random.split(jax.random.PRNGKey(seed))
        strikes = np.asarray(sample_strikes(n, key=k_s), np.float64)
        params = np.asarray(space.sample(n, key=k_p), np.float64)
        vel = np.concatenate(
            [
                family_outcomes("compliant", shape, strikes[i : i + CHUNK], params[i : i + CHUNK])
                for i in range(0, n, CHUNK)
            ]
        ).astype(np.float64)
        ok = np.isfinite(vel).all(1)
        zeros = np.zeros((n, 3))
        save_events(data, {
            "scene": "strike", "shape": shape, "source": "clashx.scenes compliant law",
            "strike": strikes, "params": params, "post_velocity": np.where(ok[:, None], vel, np.nan),
            "t_touch": np.zeros(n), "t_release": np.full(n, RELEASE_AFTER), "touched": ok,
            "start_pose": zeros, "rest_pose": zeros,
            "meta": json.dumps({"param_space": space.describe(), "seed": seed, "family": "compliant"}),
        })  # fmt: skip
        print(f"{shape}: {n} strikes simulated in {time.perf_counter() - t0:.0f} s ({int((~ok).sum())} not finite)")
    t1 = time.perf_counter()
    result = pretrain(PretrainConfig(data=data, out=os.path.join(out, shape), epochs=epochs, seed=seed))
    result.save(os.path.join(out, shape))
    val = result.validation
    print(f"{shape}: pretrained in {time.perf_counter() - t1:.0f} s; held-out α=0.1 {val['alpha_0.1']:.3f}, "
          f"median error {val['median_rel_err']:.3f}", flush=True)  # fmt: skip
    return {"shape": shape, "simulate_s": t1 - t0, "pretrain_s": time.perf_counter() - t1, "validation": val}


def recordings(lab: str, seed: int, shape: str, cache: str, test_n: int) -> tuple[dict, dict]:
    """(ten-strike fit recording, test recording) of `lab`, from `cache` or run in the strike lab into it."""
    os.makedirs(cache, exist_ok=True)
    fit_path = os.path.join(cache, f"fit_{lab}{seed}_{shape}.npz")
    test_path = os.path.join(cache, f"test_{lab}_{shape}.npz")
    fit = (
        dict(np.load(fit_path))
        if os.path.exists(fit_path)
        else run_lab(shape, lab_file(lab, cache), fit_path, n=10, seed=seed)
    )
    if os.path.exists(test_path):
        return fit, dict(np.load(test_path))
    test = lab_test(shape, lab, cache, test_n)
    np.savez(test_path, **test)
    return fit, test


def slide_samples(recording: dict) -> np.ndarray:
    """Each strike's samples of free slide before its fitted stop (0 for a miss): how well its track measures it."""
    sl = recording_slides(recording)
    out = np.zeros(len(recording["touched"]), int)
    out[sl.rows] = [fit.slide_samples for fit in sl.fits]
    return out


def fit_one(
    shape: str,
    fit_rec: dict,
    test_rec: dict,
    models: dict,
    where: str,
    config: LabFitConfig,
    key: int = 0,
    *,
    min_samples: int = 0,
    true_labels: bool = False,
    combinations: bool = False,
) -> dict:
    """Both families' identifications on one recording and their scores on the test strikes (module docstring)."""
    s_test, truth, _ = lab_truth(test_rec, "test")
    length = geo.characteristic_length(shape)
    t0 = time.perf_counter()
    rows = None
    if min_samples:  # the strikes whose slide has at least min_samples samples, at least five
        n_s = slide_samples(fit_rec)
        rows = np.flatnonzero(n_s >= min_samples)
        rows = rows if len(rows) >= 5 else np.argsort(-n_s)[:5]
    extra = {"labels": fit_rec["post_velocity_true"] if true_labels else None}  # a diagnostic: the scoring field
    fam = FamilyFit.equal({
        name: fit_family(fit_rec, name, key=jax.random.PRNGKey(key), shape=shape, where=where, rows=rows,
                         model=(models or {}).get(name), config=config, **extra)
        for name in ("mujoco", "compliant")
    })  # fmt: skip
    mj, hc = fam.fits["mujoco"], fam.fits["compliant"]
    s_fit, y_fit = mj.events["strike"][mj.rows], mj.events["post_velocity"][mj.rows]
    pred = {name: {part: np.asarray(clashx.predict(f.model, s, f.params), np.float64) for part, s in
                   (("fit", s_fit), ("test", s_test))} for name, f in fam.fits.items()}  # fmt: skip

    def fit_loss(w):
        y = w * pred["mujoco"]["fit"] + (1 - w) * pred["compliant"]["fit"]
        return float(np.mean(np.sum(np.asarray(speed_residuals(y, y_fit, length)) ** 2, -1)))

    w = float(MIX_GRID[np.argmin([fit_loss(v) for v in MIX_GRID])])
    tuned = {  # with --finetune: each family's surrogate before its fine-tuning, and the steps taken
        f"{name}_identified": np.asarray(clashx.predict(f.identified_model, s_test, f.params), np.float64)
        for name, f in fam.fits.items()
        if f.report["finetune"].get("steps", 0) and f.identified_model is not None
    }
    tests = tuned | {
        "mujoco": pred["mujoco"]["test"],
        "compliant": pred["compliant"]["test"],
        "compliant_law": family_outcomes("compliant", shape, s_test, hc.params),
        "mix": w * pred["mujoco"]["test"] + (1 - w) * pred["compliant"]["test"],
        "mean": sum(w_f * pred[name]["test"] for name, w_f in fam.weights.items()),  # FamilyFit.predict
    }
    if tuned:
        before = {name: (f.model if f.identified_model is None else f.identified_model, f.params)
                  for name, f in fam.fits.items()}  # fmt: skip
        tests["mean_identified"] = family_average(before, fam.weights, s_test)
    row = {name: alpha_accuracy(p, truth, length, ALPHA) for name, p in tests.items()}
    u_true = np.asarray(speed_vector(truth, length))
    both = fam.predictive(s_test)
    sigma = {
        "mujoco": predictive_calibration(both["families"]["mujoco"], u_true),
        "mean": predictive_calibration(both.as_dict(), u_true),
    }
    if combinations:  # the per-strike weightings tried and not adopted (module docstring)
        for name, u in precision_weighted(both["families"]).items():  # per strike, by each family's own σ
            row[name] = alpha_accuracy(u / np.array([1.0, 1.0, length]), truth, length, ALPHA)
        post = {n: posterior_mean(f, both["families"][n]["param_cov_unit"], s_test, key + i)
                for i, (n, f) in enumerate(fam.fits.items())}  # fmt: skip
        mean_post = sum(w_f * post[n] for n, w_f in fam.weights.items())
        row["posterior_mean"] = alpha_accuracy(mean_post, truth, length, ALPHA)
        row["posterior_mean_mujoco"] = alpha_accuracy(post["mujoco"], truth, length, ALPHA)
        row["posterior_mean_compliant"] = alpha_accuracy(post["compliant"], truth, length, ALPHA)
    return row | {
        "sigma": sigma,
        "mix_w": w, "fit_loss_mujoco": fit_loss(1.0), "fit_loss_compliant": fit_loss(0.0),
        "objective": {name: f.report["joint"]["loss"] for name, f in fam.fits.items()},
        "fit_rows": len(mj.rows),
        "finetune_steps": {name: f.report["finetune"].get("steps", 0) for name, f in fam.fits.items()},
        "params_compliant": dict(zip(hc.model.space.names, map(float, hc.params))),
        "mujoco_s": mj.report["times"]["total_s"], "compliant_s": hc.report["times"]["total_s"],
        "total_s": time.perf_counter() - t0,
    }  # fmt: skip


def precision_weighted(parts: dict) -> dict:
    """Per test strike, the families' speed vectors weighed by their own covariances (`strike_predictive`):
    "precision": the product of their Gaussians, (Σ C_f⁻¹)⁻¹ Σ C_f⁻¹ m_f; "precision_param": the same with only
    the parameters' posterior J Σ Jᵀ plus the families' common noise (their mean τ²), so that the weights follow
    where each family's parameters are loose, not which fitted the ten labels better."""
    names = list(parts)
    out = {}
    for label, covs in (
        ("precision", [parts[n]["cov"] for n in names]),
        ("precision_param", _param_covs(parts, names)),
    ):
        prec = [np.linalg.inv(c) for c in covs]
        total = np.linalg.inv(sum(prec))
        out[label] = np.einsum("nij,nj->ni", total, sum(np.einsum("nij,nj->ni", p, parts[n]["pred"])
                                                        for p, n in zip(prec, names)))  # fmt: skip
    return out


def posterior_mean(fit, cov_unit: np.ndarray, strikes: np.ndarray, key: int, n: int = POSTERIOR_DRAWS) -> np.ndarray:
    """A family's prediction averaged over `n` draws of its parameters' Laplace posterior (`strike_predictive`'s,
    in the unit box, draws clipped to it) instead of at the fitted parameters."""
    space = fit.model.space
    u_hat = np.asarray(space.to_unit(jax.numpy.asarray(fit.params)), np.float64)
    draws = np.random.default_rng(key).multivariate_normal(u_hat, cov_unit, size=n, method="eigh")
    draws = np.clip(draws, 0.0, 1.0)
    preds = [np.asarray(clashx.predict(fit.model, strikes, np.asarray(space.from_unit(jax.numpy.asarray(u)))),
                        np.float64) for u in draws]  # fmt: skip
    return np.mean(preds, axis=0)


def _param_covs(parts: dict, names: list) -> list:
    """Each family's covariance with its own noise term replaced by the families' mean noise."""
    tau2 = np.mean([parts[n]["tau"] ** 2 for n in names], 0)
    out = []
    for n in names:
        scale2 = np.sum(parts[n]["pred"] ** 2, -1)[:, None, None]
        own = parts[n]["tau"] ** 2 * np.eye(3) * scale2
        out.append(parts[n]["cov"] - own + tau2 * np.eye(3) * scale2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("distil")
    d.add_argument("--out", required=True)
    d.add_argument("--shapes", default=",".join(geo.SHAPES))
    d.add_argument("--n", type=int, default=200_000)
    d.add_argument("--epochs", type=int, default=80)
    d.add_argument("--seed", type=int, default=0)
    f = sub.add_parser("fit")
    f.add_argument("--models", help="distil's --out: one surrogate folder per shape (default: the shipped ones)")
    f.add_argument("--labs", default="a:2,a:12,C:2,D:2", help="LAB:FIT_SEED,... (a: lab A; C, D: OWN_LABS)")
    f.add_argument("--shapes", default=",".join(geo.SHAPES))
    f.add_argument(
        "--cache", default=os.path.join(tempfile.gettempdir(), "clashx_recordings"), help="recordings kept between runs"
    )
    f.add_argument("--test-n", type=int, default=100, help="test strikes of labs C and D (lab A: the shipped 200)")
    f.add_argument("--key", type=int, default=0, help="PRNG key of the identifications")
    f.add_argument("--n-starts", type=int, default=LabFitConfig.n_starts, help="identification starts per family")
    f.add_argument("--iterations", type=int, default=LabFitConfig.iterations, help="Levenberg-Marquardt trials")
    f.add_argument(
        "--fit-strikes",
        type=int,
        help="fit on the first N strikes of the test recording instead of the ten-strike one, and score on its "
        "second half (N at most half of it): how accuracy grows with the strikes identified from",
    )
    f.add_argument("--finetune", action="store_true", help="fine-tune each family (the library's FinetuneConfig)")
    f.add_argument("--fit-offset", type=int, default=0, help="with --fit-strikes: fit on strikes K..K+N-1")
    f.add_argument(
        "--true-labels",
        action="store_true",
        help="a diagnostic: identify from the fit strikes' true velocities (the scoring field) instead of the tracks'",
    )
    f.add_argument(
        "--robust",
        type=float,
        default=LabFitConfig.robust,
        help="Cauchy scale of both families' identification loss (LabFitConfig.robust; 0: least squares)",
    )
    f.add_argument(
        "--min-samples",
        type=int,
        default=0,
        help="identify from the strikes whose slide has at least this many samples (at least 5 strikes)",
    )
    f.add_argument(
        "--no-label-weights",
        action="store_true",
        help="weigh the fit strikes' labels equally, not by their tracks' σ (LabFitConfig.label_weights)",
    )
    f.add_argument("--combinations", action="store_true", help="also the per-strike family weightings not adopted")
    f.add_argument("--json")
    a = ap.parse_args()
    if a.cmd == "distil":
        rows = [distil(s, a.out, n=a.n, epochs=a.epochs, seed=a.seed) for s in a.shapes.split(",")]
        write_json(os.path.join(a.out, "distil.json"), rows)
        return
    config = LabFitConfig(
        n_starts=a.n_starts, iterations=a.iterations, robust=a.robust, label_weights=not a.no_label_weights
    )
    config = config if a.finetune else dataclasses.replace(config, finetune=None)
    rows: list[dict] = []
    skipped: list[dict] = []
    for item in a.labs.split(","):
        lab, seed = item.split(":")
        for shape in a.shapes.split(","):
            fit_rec, test_rec = recordings(lab, int(seed), shape, a.cache, a.test_n)
            if a.fit_strikes:
                half = (len(test_rec["offsets"]) - 1) // 2
                if a.fit_offset + a.fit_strikes > half:
                    raise SystemExit(
                        f"--fit-offset {a.fit_offset} --fit-strikes {a.fit_strikes}: the fit strikes must lie in the "
                        f"first half of lab {lab}'s {2 * half} test strikes"
                    )
                fit_rec = slice_recording(test_rec, a.fit_offset, a.fit_offset + a.fit_strikes)
                test_rec = slice_recording(test_rec, half, 2 * half)
            models = (
                {"compliant": clashx.load_strike_surrogate(os.path.join(a.models, shape), shape=shape)}
                if a.models
                else None
            )
            row = {
                "lab": lab,
                "seed": int(seed),
                "shape": shape,
                "fit_strikes": a.fit_strikes or 10,
                "fit_offset": a.fit_offset,
                "true_labels": a.true_labels,
                "robust": a.robust,
                "min_samples": a.min_samples,
                "label_weights": not a.no_label_weights,
            }
            try:
                row |= fit_one(
                    shape, fit_rec, test_rec, models, f"lab {lab} seed {seed} {shape}", config, a.key,
                    min_samples=a.min_samples, true_labels=a.true_labels, combinations=a.combinations,
                )  # fmt: skip
            except ValueError as e:  # e.g. too few measured slides to read the ground from: reported, skipped
                print(f"lab {lab} seed {seed} {shape} skipped: {e}", flush=True)
                skipped.append(row | {"reason": str(e)})
                continue
            rows.append(row)
            print(json.dumps(row), flush=True)
    names = ("mujoco", "compliant", "compliant_law", "mix", "mean")
    if a.combinations:
        names += ("precision", "precision_param", "posterior_mean", "posterior_mean_mujoco", "posterior_mean_compliant")
    print(f"\nα = {ALPHA} on the test strikes, mean over {len(rows)} fits ({len(skipped)} skipped), by shape:")
    shapes = sorted({r["shape"] for r in rows})
    print(f"  {'':<24} " + " ".join(f"{s:>13}" for s in shapes) + "      all")
    for name in names:
        by = [np.mean([r[name] for r in rows if r["shape"] == s]) for s in shapes]
        print(f"  {name:<24} " + " ".join(f"{v:>13.3f}" for v in by) + f" {np.mean([r[name] for r in rows]):>8.3f}")
    for name in ("mujoco", "mean"):
        c = {k: np.mean([r["sigma"][name][k] for r in rows]) for k in ("coverage_50", "coverage_90", "spearman")}
        print(f"  σ of {name:<8} inside the 50 % / 90 % ellipsoid {c['coverage_50']:.2f} / {c['coverage_90']:.2f} "
              f"(calibrated 0.50 / 0.90), Spearman σ-error {c['spearman']:.2f}")  # fmt: skip
    if a.json:
        write_json(
            a.json, {"rows": rows, "skipped": skipped, "mean": {n: float(np.mean([r[n] for r in rows])) for n in names}}
        )


if __name__ == "__main__":
    main()

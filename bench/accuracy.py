"""α-accuracy of post-impact velocity prediction on lab strikes, every method in one run (CLASH Table III, one shape).

    python bench/accuracy.py --shape square --fit fit_square.npz --test test_square.npz [--model RUN] [--seed 0] [--json OUT]

FIT and TEST are `strike_lab.py` recordings.  FIT (~10 strikes) is ingested
with `clashx._ingest.ingest_strike_file`: the methods fit the velocities
estimated from the noisy tracks, never the lab's `post_velocity_true`.  Every
method then predicts the TEST strikes' post-impact velocity, scored against
TEST's `post_velocity_true` (scoring only) with `clashx._metrics.alpha_accuracy`
at α = 0.05, 0.1, 0.2, plus the median relative error.  Methods
(`clashx._baselines`):

  mujoco_nominal     MuJoCo C, MuJoCo's default μ1 = μ2 = 1, e1 = 1
  mujoco_identified  MuJoCo C, (μ1, μ2, e1) by CMA-ES (population 16, 30 generations)
  mjx_identified     MJX (float64), (μ1, μ2, e1) by Levenberg-Marquardt on forward-mode Jacobians (3 starts × 12 trials)
  nn_no_pretrain     an MLP trained on the fit strikes only
  residual           mujoco_identified + an MLP residual trained on the fit strikes
  clashx_identified  the pretrained surrogate (--model) at parameters identified through it
  clashx             the same, fine-tuned on the fit strikes

Times are wall-clock seconds on this machine (shared CPUs: compare within a
run); MJX's compile time is reported apart from its fitting time.  The
"vs nominal" column is a method's median relative error over nominal MuJoCo's,
measured in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from clashx import _baselines as bl
from clashx import _geometry as geo
from clashx import _metrics, _strike

ALPHAS = (0.05, 0.1, 0.2)
CORE_MODULES = ("clashx._surrogate", "clashx._identify", "clashx._finetune")


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What to benchmark: the shape, the two recordings, the pretrained surrogate (optional), the seed."""

    shape: str
    fit: str
    test: str
    model: str | None = None
    seed: int = 0


def load_fit(path: str, shape: str) -> tuple[np.ndarray, np.ndarray]:
    """Strikes and track-estimated velocities of the touched strikes of a fit recording (ingested)."""
    from clashx._ingest import ingest_strike_file

    ev = ingest_strike_file(path)
    if str(ev["shape"]) != shape:
        raise SystemExit(f"--fit {path}: strikes on the {str(ev['shape'])!r} block, not --shape {shape!r}")
    ok = ev["touched"] & np.isfinite(ev["post_velocity"]).all(1)
    return ev["strike"][ok], ev["post_velocity"][ok]


def load_test(path: str, shape: str) -> tuple[np.ndarray, np.ndarray]:
    """Strikes and the lab's true post-impact velocities (scoring only) of the touched strikes of a test recording."""
    if not os.path.exists(path):
        raise SystemExit(f"--test {path}: no such file")
    with np.load(path, allow_pickle=False) as z:
        if "post_velocity_true" not in z.files:
            raise SystemExit(f"--test {path}: no 'post_velocity_true' to score against; record it with strike_lab.py")
        if str(z["shape"]) != shape:
            raise SystemExit(f"--test {path}: strikes on the {str(z['shape'])!r} block, not --shape {shape!r}")
        strikes, true, touched = z["strike"], z["post_velocity_true"], z["touched"].astype(bool)
    ok = touched & np.isfinite(true).all(1)
    return strikes[ok], true[ok]


def score(pred: np.ndarray, true: np.ndarray, length: float) -> dict:
    """α-accuracies and the median relative error of predictions."""
    err = np.asarray(_metrics.relative_error(pred, true, length))
    out = {f"alpha_{a}": _metrics.alpha_accuracy(pred, true, length, a) for a in ALPHAS}
    return out | {"median_rel_err": float(np.median(err))}


def _named(sim: _strike.StrikeSim, params) -> dict:
    return {n: float(v) for n, v in zip(sim.space.names, np.asarray(params))}


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    return out, time.perf_counter() - t0


def simulator_methods(sim, fit_s, fit_v, test_s, *, key) -> dict:
    """The nominal and identified simulators and the MLPs: {method: (test predictions, details)}."""
    length = geo.characteristic_length(sim.shape)
    k_cma, k_mjx, k_nn, k_res = jax.random.split(key, 4)
    out = {}

    nominal = np.asarray(bl.NOMINAL_PARAMS)
    pred, t_pred = _timed(bl.predict_c, sim, test_s, nominal)
    out["mujoco_nominal"] = (pred, {"params": _named(sim, nominal), "predict_s": t_pred})

    cma, t_fit = _timed(bl.identify_cmaes, sim, fit_s, fit_v, key=k_cma, population=16, generations=30)
    pred_cma, t_pred = _timed(bl.predict_c, sim, test_s, cma.params)
    out["mujoco_identified"] = (
        pred_cma,
        {
            "params": _named(sim, cma.params),
            "fit_loss": cma.loss,
            "population": 16,
            "generations": cma.iterations,
            "simulated_strikes": cma.evaluations,
            "fit_s": t_fit,
            "predict_s": t_pred,
        },
    )

    # MJX runs in float64 (forward-mode tangents are wrong in float32; `bl.as_float64`).  The first
    # call compiles the one function that Levenberg-Marquardt calls, timed apart.
    with jax.enable_x64(True):
        args = bl.as_float64(sim), jnp.asarray(fit_s), jnp.asarray(sim.space.from_unit(jnp.full(3, 0.5)))
        _, t_compile = _timed(bl.mjx_velocity_jacobian, *args)
    lm, t_fit = _timed(bl.identify_mjx, sim, fit_s, fit_v, key=k_mjx, starts=3, iterations=12)
    _, t_predict_compile = _timed(bl.predict_mjx, sim, test_s, lm.params)  # compile + run
    pred_mjx, t_pred = _timed(bl.predict_mjx, sim, test_s, lm.params)
    out["mjx_identified"] = (
        np.asarray(pred_mjx, np.float64),
        {
            "params": _named(sim, lm.params),
            "fit_loss": lm.loss,
            "start_losses": lm.start_losses.tolist(),
            "starts": 3,
            "trials": lm.iterations,
            "compile_s": t_compile,
            "fit_s": t_fit,
            "predict_compile_and_run_s": t_predict_compile,
            "predict_s": t_pred,
        },
    )

    # The MLPs' weight decay is chosen by 5-fold cross-validation within the fit strikes.
    rms = float(np.sqrt(np.mean(np.sum(np.asarray(_metrics.speed_vector(fit_v, length)) ** 2, -1))))
    k_nn_cv, k_nn = jax.random.split(k_nn)
    t0 = time.perf_counter()
    wd, cv = bl.choose_weight_decay(fit_s, fit_v, length, key=k_nn_cv)
    config = bl.MLPConfig(weight_decay=wd)
    mlp = bl.train_velocity_mlp(fit_s, fit_v, length, key=k_nn, config=config)
    t_fit = time.perf_counter() - t0
    pred_nn, t_pred = _timed(bl.predict_mlp, mlp, test_s)
    train_err = float(np.median(_metrics.relative_error(bl.predict_mlp(mlp, fit_s), fit_v, length)))
    out["nn_no_pretrain"] = (
        pred_nn,
        {"config": _cfg(config), "cv_loss": cv.tolist(), "fit_median_rel_err": train_err, "fit_s": t_fit}
        | {"predict_s": t_pred},
    )

    base_fit = bl.predict_c(sim, fit_s, cma.params)
    k_res_cv, k_res = jax.random.split(k_res)
    t0 = time.perf_counter()
    wd, cv = bl.choose_weight_decay(fit_s, fit_v - base_fit, length, key=k_res_cv, scale=rms)
    config = bl.MLPConfig(weight_decay=wd)
    res = bl.train_velocity_mlp(fit_s, fit_v - base_fit, length, key=k_res, scale=rms, config=config)
    t_fit = time.perf_counter() - t0
    pred_res = pred_cma + bl.predict_mlp(res, test_s)
    train_err = float(np.median(_metrics.relative_error(base_fit + bl.predict_mlp(res, fit_s), fit_v, length)))
    out["residual"] = (
        pred_res,
        {"base": "mujoco_identified", "config": _cfg(config), "cv_loss": cv.tolist()}
        | {"fit_median_rel_err": train_err, "fit_s": t_fit + out["mujoco_identified"][1]["fit_s"]},
    )
    return out


def _cfg(config) -> dict:
    return {f: getattr(config, f) for f in ("width", "depth", "steps", "learning_rate", "weight_decay")}


def core_available() -> bool:
    """Whether the CLASH core (surrogate, identification, fine-tuning) is in this checkout."""
    return all(importlib.util.find_spec(m) is not None for m in CORE_MODULES)


def clashx_methods(run_dir: str, shape: str, fit_s, fit_v, test_s, *, key) -> dict:
    """CLASH: identify through the pretrained surrogate, then fine-tune it: {method: (test predictions, details)}."""
    from clashx._finetune import finetune
    from clashx._identify import identify
    from clashx._surrogate import load_surrogate, predict

    k_id, k_ft = jax.random.split(key)
    try:
        model = load_surrogate(run_dir, shape=shape)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"--model {run_dir}: {e}") from None
    res, t_id = _timed(identify, model, fit_s, fit_v, key=k_id)
    pred, t_pred = _timed(predict, model, jnp.asarray(test_s, jnp.float32), res.params)
    params = {n: float(v) for n, v in zip(model.space.names, np.asarray(res.params))}
    std = {n: float(v) for n, v in zip(model.space.names, np.asarray(res.std))}
    out = {
        "clashx_identified": (
            np.asarray(pred, np.float64),
            {"params": params, "std": std, "fit_loss": float(res.loss), "fit_s": t_id, "predict_s": t_pred},
        )
    }
    (tuned, report), t_ft = _timed(finetune, model, fit_s, fit_v, res.params, key=k_ft)
    pred, t_pred = _timed(predict, tuned, jnp.asarray(test_s, jnp.float32), res.params)
    out["clashx"] = (
        np.asarray(pred, np.float64),
        {
            "params": params,
            "finetune_steps": report["steps"],
            "finetune_reason": report["reason"],
            "fit_s": t_id + t_ft,
            "predict_s": t_pred,
        },
    )
    return out


def run(config: BenchConfig) -> dict:
    """Fit every method on FIT, score it on TEST; returns {"rows": {method: scores}, "details": ..., "notes": [...]}."""
    geo.check_shape(config.shape)
    fit_s, fit_v = load_fit(config.fit, config.shape)
    test_s, true = load_test(config.test, config.shape)
    length = geo.characteristic_length(config.shape)
    key_sim, key_core = jax.random.split(jax.random.PRNGKey(config.seed))
    sim = _strike.make_strike_sim(config.shape)
    methods = simulator_methods(sim, fit_s, fit_v, test_s, key=key_sim)
    notes = []
    if config.model is None:
        notes.append("clashx rows skipped: no --model RUN given")
    elif not core_available():
        notes.append(f"clashx rows skipped: {', '.join(CORE_MODULES)} not in this checkout yet")
    else:
        methods |= clashx_methods(config.model, config.shape, fit_s, fit_v, test_s, key=key_core)
    rows = {name: score(pred, true, length) for name, (pred, _) in methods.items()}
    nominal_err = rows["mujoco_nominal"]["median_rel_err"]
    for r in rows.values():
        r["err_vs_nominal"] = r["median_rel_err"] / max(nominal_err, 1e-12)
    return {
        "shape": config.shape,
        "n_fit": int(len(fit_s)),
        "n_test": int(len(test_s)),
        "device": f"{jax.default_backend()}: {jax.devices()[0].device_kind}, {os.cpu_count()} CPU cores",
        "seed": config.seed,
        "rows": rows,
        "details": {name: d for name, (_, d) in methods.items()},
        "notes": notes,
    }


def table(result: dict) -> str:
    """The rows of CLASH's Table III for one shape: methods × α-accuracies (%), median error, time."""
    head = f"{'method':<18} " + " ".join(f"{'α=' + str(a):>7}" for a in ALPHAS)
    head += f" {'median err':>10} {'vs nominal':>10} {'fit s':>7}"
    lines = [
        f"{result['shape']}: {result['n_fit']} fit strikes (track-estimated), {result['n_test']} test strikes; {result['device']}",
        head,
        "-" * len(head),
    ]
    for name, r in result["rows"].items():
        fit_s = result["details"][name].get("fit_s")
        t = f"{fit_s:7.1f}" if fit_s is not None else f"{'-':>7}"
        acc = " ".join(f"{100 * r[f'alpha_{a}']:6.1f}%" for a in ALPHAS)
        lines.append(f"{name:<18} {acc} {100 * r['median_rel_err']:9.1f}% {r['err_vs_nominal']:10.2f} {t}")
    return "\n".join(lines + result["notes"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True, choices=geo.SHAPES)
    ap.add_argument("--fit", required=True, help="strike-lab recording to fit on (~10 strikes)")
    ap.add_argument("--test", required=True, help="strike-lab recording to score on (with post_velocity_true)")
    ap.add_argument("--model", help="run folder of a pretrained surrogate (clashx pretrain) for the clashx rows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write {method: α=0.1 accuracy, 'details': {...}} here")
    a = ap.parse_args()
    result = run(BenchConfig(shape=a.shape, fit=a.fit, test=a.test, model=a.model, seed=a.seed))
    print(table(result))
    if a.json:
        d = result["details"]
        for name, r in result["rows"].items():
            d[name] = {"scores": r} | d[name]
        out = {name: r["alpha_0.1"] for name, r in result["rows"].items()}
        out["details"] = d | {k: result[k] for k in ("shape", "n_fit", "n_test", "device", "seed", "notes")}
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

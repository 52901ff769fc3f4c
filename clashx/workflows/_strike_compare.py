"""Every strike method fitted on one recording and scored on another: α-accuracy (CLASH Table III).

`compare(...)` is what `clashx demo` and `bench/accuracy.py` run.  Every
method sees the FIT recording only (its tracks, or the velocities ingested
from them); every method predicts the TEST recording's post-impact
velocities, scored against its `post_velocity_true` (read in `lab_truth`
only: a field for scoring, never learned from).  Every MuJoCo-side fit to the
ingested velocities (CMA-ES, MJX, the residual baseline's base) weighs them as
clashx's joint identification does (`LabFitConfig.label_weights`): the same
objective.  The MLPs and `mujoco_sysid_tracks` (the tracks) are unweighted.

| method | fitted on the fit recording | predicts with |
|---|---|---|
| `mujoco_nominal` | nothing: MuJoCo's defaults (μ = 1, damping ratio 1), the block as drawn | MuJoCo C |
| `mujoco_identified` | all 8 parameters by CMA-ES on the ingested velocities, μ2 from the slides, clashx's priors and label weights: clashx's objective on MuJoCo itself | MuJoCo C |
| `mujoco_identified_3` | μ1, μ2, e1 by CMA-ES on the velocities (CLASH's baseline) | MuJoCo C |
| `mujoco_sysid_tracks` | all 8 by `mujoco.sysid` on the tracks (`clashx.baselines._strike_sysid`) | MuJoCo C |
| `mjx_identified` | all 8 by Levenberg-Marquardt through MJX on the velocities (forward mode) | MJX |
| `nn_no_pretrain` | an MLP on the ten velocities | the MLP |
| `residual` | `mujoco_identified` + an MLP on its residuals | both |
| `clashx_identified` | two-stage identification through the surrogate (`clashx.learn._lab_fit`) | the surrogate |
| `clashx` | the same, then CV fine-tuning | the fine-tuned surrogate |
| `clashx_families` | `clashx`, and the same identification through the compliant family's surrogate (`clashx.fit_families`) | the two surrogates' average |
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..baselines import (
    CONTACT_NAMES,
    MLPConfig,
    choose_weight_decay,
    identify_cmaes,
    identify_mjx,
    identify_tracks_sysid,
    nominal_params,
    predict_c,
    predict_mjx,
    predict_mlp,
    train_velocity_mlp,
)
from ..events import relative_error, speed_vector
from ..hybrid import hybrid_tracks_c, strike_tracks_c
from ..learn import (
    FamilyFit,
    LabFitConfig,
    fit_family,
    fit_recording,
    predictive_calibration,
    strike_predictive,
)
from ..scenes import geometry as geo
from ..scenes import make_strike_scene
from ..surrogate import StrikeSurrogate, predict

ALPHAS = (0.05, 0.1, 0.2)
DEMO_METHODS = ("mujoco_nominal", "mujoco_identified", "clashx_identified", "clashx", "clashx_families")
ALL_METHODS = (
    "mujoco_nominal",
    "mujoco_identified",
    "mujoco_identified_3",
    "mujoco_sysid_tracks",
    "mjx_identified",
    "nn_no_pretrain",
    "residual",
    "clashx_identified",
    "clashx",
    "clashx_families",
)


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    """Which methods, and the baselines' budgets.

    Attributes:
        methods: names from `ALL_METHODS`.
        cma_population, cma_generations: the CMA-ES baselines' search.
        cma_restarts: independent CMA-ES searches per baseline fit, one batch per generation, the best by
            fit loss kept: over four keys one search scored α = 0.1 from 0.30 to 0.58 on lab A's
            semi-cylinder (the fit loss picks the good ones), so one would make the baseline a lottery.
        sysid_starts, sysid_iters: `mujoco.sysid` on the tracks.
        lab_fit: clashx's pipeline settings.
    """

    methods: tuple[str, ...] = ALL_METHODS
    cma_population: int = 16
    cma_generations: int = 60
    cma_restarts: int = 3
    sysid_starts: int = 3
    sysid_iters: int = 12
    lab_fit: LabFitConfig = LabFitConfig()

    def __post_init__(self):
        unknown = [m for m in self.methods if m not in ALL_METHODS]
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(ALL_METHODS)}")


def lab_truth(test: dict[str, Any], where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(strikes, true post-impact velocities, rows) of the touched strikes of a lab recording (scoring only)."""
    if "post_velocity_true" not in test:
        raise ValueError(f"{where}: no 'post_velocity_true' to score against; record the test set with strike_lab.py")
    touched = np.asarray(test["touched"]).astype(bool)
    true = np.asarray(test["post_velocity_true"], np.float64)
    rows = np.flatnonzero(touched & np.isfinite(true).all(1))
    if len(rows) == 0:
        raise ValueError(f"{where}: no touched strike to score")
    return np.asarray(test["strike"], np.float64)[rows], true[rows], rows


def score(pred: np.ndarray, true: np.ndarray, length: float) -> dict[str, float]:
    """α-accuracies at `ALPHAS` and the median relative error of predictions (n, 3) against the truth."""
    err = np.asarray(relative_error(pred, true, length))
    return {f"alpha_{a}": float(np.mean(err <= a)) for a in ALPHAS} | {"median_rel_err": float(np.median(err))}


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    return out, time.perf_counter() - t0


def _named(space, values) -> dict[str, float]:
    return {n: float(v) for n, v in zip(space.names, np.asarray(values))}


def compare(
    model: StrikeSurrogate,
    fit: dict[str, Any],
    test: dict[str, Any],
    *,
    key,
    config: CompareConfig | None = None,
    fit_name: str = "fit",
    test_name: str = "test",
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Fit every method on the `fit` recording and score it on the `test` recording.

    Args:
        model: the pretrained surrogate of the recordings' shape.
        fit, test: recordings' arrays (`clashx.events._ingest_strike` format; the test one with `post_velocity_true`).
        key: PRNG key (every method's draws).
        config: methods and budgets.
        fit_name, test_name: the recordings' names, for messages.
        log: called with a line per finished method (progress).

    Returns:
        {"shape", "n_fit", "n_test", "rows": {method: scores}, "details": {method: {...}},
        "predictions": {method: (n_test, 3)}, "params": {method: (p,) or None}, "lab_fit": clashx's report}.
    """
    config = config or CompareConfig()
    shape = model.shape
    sim = make_strike_scene(shape, space=model.space)
    space = sim.space
    length = geo.characteristic_length(shape)
    test_s, true, _ = lab_truth(test, test_name)
    keys = dict(zip(ALL_METHODS, jax.random.split(key, len(ALL_METHODS))))
    preds, details, params = {}, {}, {}

    lab, t_clashx = _timed(fit_recording, model, sim, fit, where=fit_name, key=keys["clashx"], config=config.lab_fit)
    fit_s, labels = lab.events["strike"][lab.rows], lab.events["post_velocity"][lab.rows]
    mu2 = lab.report["ground"]["mu2"]
    prior = dict(config.lab_fit.prior_std) | {"mu2": config.lab_fit.stage1_slide_std}
    base = space.vector(mu2=float(np.clip(mu2, space.low[space.index("mu2")], space.high[space.index("mu2")])))
    # clashx's weight per label (`LabFitConfig.label_weights`): every MuJoCo-side fit to the labels takes the same
    w = lab.report["joint"]["label_weights"]
    w = None if w is None else np.asarray(w, np.float64)
    cma = dict(population=config.cma_population, generations=config.cma_generations, restarts=config.cma_restarts,
               weights=w)  # fmt: skip

    def add(name, pred, p, **info):
        preds[name] = np.asarray(pred, np.float64)
        params[name] = None if p is None else np.asarray(p, np.float64)
        details[name] = info | ({} if p is None else {"params": _named(space, p)})
        log(f"{name}: α=0.1 accuracy {score(preds[name], true, length)['alpha_0.1']:.3f}")

    for name in config.methods:
        if name == "mujoco_nominal":
            p = nominal_params(sim)
            add(name, predict_c(sim, test_s, p), p, fit_s=0.0)
        elif name == "mujoco_identified":
            r, t = _timed(identify_cmaes, sim, fit_s, labels, key=keys[name], base=base, prior_std=prior, **cma)
            add(name, predict_c(sim, test_s, r.params), r.params, fit_s=t, fit_loss=r.loss, simulated=r.evaluations)
        elif name == "mujoco_identified_3":
            r, t = _timed(identify_cmaes, sim, fit_s, labels, key=keys[name], free=CONTACT_NAMES, **cma)
            add(name, predict_c(sim, test_s, r.params), r.params, fit_s=t, fit_loss=r.loss, simulated=r.evaluations)
        elif name == "mujoco_sysid_tracks":
            r, t = _timed(
                identify_tracks_sysid, sim, fit, rows=lab.rows, key=keys[name], starts=config.sysid_starts,
                max_iters=config.sysid_iters,
            )  # fmt: skip
            add(name, predict_c(sim, test_s, r.params), r.params, fit_s=t, fit_loss=r.loss, simulated=r.evaluations)
        elif name == "mjx_identified":
            r, t = _timed(
                identify_mjx, sim, fit_s, labels, key=keys[name], base=base, starts=2, iterations=10, weights=w
            )
            add(name, predict_mjx(sim, test_s, r.params), r.params, fit_s=t, fit_loss=r.loss)
        elif name in ("nn_no_pretrain", "residual"):
            pred, p, info = _mlp_method(name, sim, fit_s, labels, test_s, base, prior, keys[name], cma, length)
            add(name, pred, p, **info)
        elif name == "clashx_identified":
            p = lab.params
            add(name, predict(model, jnp.asarray(test_s, jnp.float32), jnp.asarray(p, jnp.float32)), p,
                fit_s=lab.report["times"]["ingest_s"] + lab.report["times"]["identify_s"],
                std=_named(space, lab.std), sigma=_sigma(lab, test_s, true, length, model))  # fmt: skip
        elif name == "clashx":
            p = lab.params
            add(name, predict(lab.model, jnp.asarray(test_s, jnp.float32), jnp.asarray(p, jnp.float32)), p,
                fit_s=t_clashx, finetune_steps=lab.report["finetune"]["steps"],
                finetune_reason=lab.report["finetune"]["reason"],
                sigma=_sigma(lab, test_s, true, length, None))  # fmt: skip
        elif name == "clashx_families":  # clashx's own fit (`lab`) is the MuJoCo family's
            hc, t = _timed(fit_family, fit, "compliant", key=keys["clashx"], shape=shape, where=fit_name,
                           config=config.lab_fit)  # fmt: skip
            both = FamilyFit.equal({"mujoco": lab, "compliant": hc})
            add(name, both.predict(test_s), None, fit_s=t_clashx + t, compliant_params=_named(hc.model.space, hc.params),
                compliant_finetune_steps=hc.report["finetune"]["steps"])  # fmt: skip
    rows = {name: score(pred, true, length) for name, pred in preds.items()}
    return {
        "shape": shape,
        "n_fit": int(len(lab.rows)),
        "n_test": int(len(true)),
        "rows": rows,
        "details": details,
        "predictions": preds,
        "params": params,
        "truth": true,
        "lab_fit": lab.report,
        "fit_model": lab.model,
    }


def _sigma(lab, test_s, true, length, model) -> dict[str, float]:
    """The calibration of clashx's σ per test strike (`strike_predictive`, from the fit strikes only) against the
    test strikes' true speed vectors (scoring only)."""
    pred = strike_predictive(lab, test_s, model=model)
    return predictive_calibration(pred, np.asarray(speed_vector(true, length))) | {
        "tau": [float(t) for t in pred["tau"]]
    }


def _mlp_method(name, sim, fit_s, labels, test_s, base, prior, key, cma, length):
    """The MLP baselines: on the velocities alone, or on top of `mujoco_identified` (weight decay by CV)."""
    k_cv, k_fit, k_id = jax.random.split(key, 3)
    rms = float(np.sqrt(np.mean(np.sum(np.asarray(speed_vector(labels, length)) ** 2, -1))))
    t0 = time.perf_counter()
    if name == "nn_no_pretrain":
        target, base_test, p = labels, 0.0, None
    else:
        r = identify_cmaes(sim, fit_s, labels, key=k_id, base=base, prior_std=prior, **cma)
        p = r.params
        target = labels - predict_c(sim, fit_s, p)
        base_test = predict_c(sim, test_s, p)
    wd, _ = choose_weight_decay(fit_s, target, length, key=k_cv, scale=rms)
    mlp = train_velocity_mlp(fit_s, target, length, key=k_fit, scale=rms, config=MLPConfig(weight_decay=wd))
    return base_test + predict_mlp(mlp, test_s), p, {"fit_s": time.perf_counter() - t0, "weight_decay": wd}


def track_comparison(result: dict[str, Any], test: dict[str, Any], row: int, methods=("mujoco_identified", "clashx")):
    """One test strike's recorded track and each method's predicted one ({name: (n, 3) poses}) for a plot.

    MuJoCo methods: the whole strike on MuJoCo C (`strike_tracks_c`); clashx: the surrogate at the
    impact, MuJoCo C's slide after (`hybrid_tracks_c`) from the recorded touch time.
    """
    shape = result["shape"]
    model = result["fit_model"]
    sim = make_strike_scene(shape, space=model.space)
    off = np.asarray(test["offsets"])
    t = np.asarray(test["t"], np.float64)[off[row] : off[row + 1]]
    recorded = np.asarray(test["block_pose"], np.float64)[off[row] : off[row + 1]]
    strike, start = np.asarray(test["strike"], np.float64)[row], recorded[0]
    out = {"recorded": recorded}
    for name in methods:
        p = result["params"].get(name)
        if p is None:
            continue
        if name.startswith("clashx"):
            m = model if name == "clashx" else result.get("base_model", model)
            touch = np.asarray(test["t_first_touch"], np.float64)[row : row + 1]
            out[name] = hybrid_tracks_c(sim, m, strike[None], p, start[None], touch, [t])[0]
        else:
            out[name] = strike_tracks_c(sim, strike[None], p, [t], start[None])[0]
    return out


def table(result: dict[str, Any]) -> str:
    """The rows of CLASH's Table III for one shape: methods × α-accuracies (%), median error, fit time."""
    head = f"{'method':<22}" + "".join(f"{'α=' + str(a):>9}" for a in ALPHAS) + f"{'median err':>12}{'fit s':>8}"
    lines = [f"{result['shape']}: {result['n_fit']} fit strikes (tracks), {result['n_test']} test strikes", head]
    lines.append("-" * len(head))
    for name, r in result["rows"].items():
        t = result["details"][name].get("fit_s")
        acc = "".join(f"{100 * r[f'alpha_{a}']:8.1f}%" for a in ALPHAS)
        lines.append(f"{name:<22}{acc}{100 * r['median_rel_err']:11.1f}%{t:8.1f}")
    return "\n".join(lines)

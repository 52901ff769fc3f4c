"""The whole pipeline on recorded cube tosses: fit on a few, roll out the others, score every method.

`run_cube_toss(config)` is what `bench/cube_toss.py` and `clashx demo` call.
Every method rolls each evaluation toss out from the same initial state (the
ingested free-flight fit of its flight, `clashx.events._ingest_cube`) over its
recorded frames and is scored by `clashx.baselines._cube_fit.trajectory_errors`:

| method | fitted on the fit tosses | rollout |
|---|---|---|
| `mujoco_nominal` | nothing: μ 0.15 (dair_pll), MuJoCo's default solref (0.02 s, 1) | MuJoCo C |
| `mujoco_identified` | (μ, time constant, damping ratio) by `mujoco.sysid` on the trajectories | MuJoCo C |
| `mjx_identified` | the same three by Levenberg-Marquardt through MJX (forward mode, float64) | MJX |
| `clashx` | impact parameters through the surrogate from every impact of the fit tosses (`impacts="all"`), then its CV fine-tuning on them; MJX's parameters between impacts by Levenberg-Marquardt through MJX from the surrogate's first post-impact states, starting at the impact's | hybrid, every landing after a free flight through the surrogate (`hybrid_toss_every`) |
| `clashx_first` | the same fit | hybrid, the first impact only through the surrogate (`hybrid_toss`) |
| `clashx_rigid` | the second impact family, the rigid impulse law (`clashx.scenes.rigid_cube_window`: restitution e_n, e_t, Coulomb μ, the cube's inertia), by CMA-ES on every impact of the fit tosses (`identify_rigid_impacts`); MJX's parameters between impacts as `clashx`'s, through this handler | hybrid, every landing after a free flight through the rigid law |
| `clashx_families` | `clashx`'s and `clashx_rigid`'s fits | the two rollouts averaged frame by frame (`average_states`: positions and velocities averaged, quaternions sign-aligned, averaged and normalised), as `clashx.fit_families` averages the strike's two families |
| `clashx_mean`, `clashx_rigid_mean`, `clashx_families_mean` (with `posterior_samples` > 0) | `clashx`'s and `clashx_rigid`'s fits | each family's predictive mean: `posterior_samples` rollouts per toss with the impact parameters drawn from the fit's Laplace posterior, averaged frame by frame (`clashx.workflows._cube_ensemble`); the two families' means averaged as `clashx_families` |
| `oracle_first_post` | clashx's fit | not a method but a bound: clashx's every-impact rollout started from each evaluated toss's *measured* state at the end of its first impact window (free flight before it): what clashx would score with a perfect first impact |

Post-impact α-accuracy: the state WINDOW after the first impact, as the
speed vector u = (v, r ω) (v the centre's velocity, ω the angular velocity in
world axes, r = √(I/m) the cube's radius of gyration); a prediction is within
α if ‖u_pred − u_real‖ ≤ α ‖u_real‖.  Simulators' post-impact states are their
first-impact events on MuJoCo C (`simulate_tosses_c`; MJX's agree to 1e-6 m).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..baselines import (
    HORIZONS,
    fit_between_impacts,
    identify_rigid_impacts,
    identify_sysid,
    identify_trajectory_mjx,
    impact_calibration,
    impact_posts,
    impact_predictive,
    impact_speed_errors,
    rollout_c,
    trajectory_errors,
)
from ..core import Result, in_blocks, model_world_bytes, write_json
from ..events import Events, ingest_cube_tosses, load_cube_tracks
from ..hybrid import hybrid_tosses, rest_rollout
from ..learn import finetune_cube, identify_cube
from ..scenes import (
    CUBE_FRICTION,
    FRAME_DT,
    RIGID_NAMES,
    WINDOW,
    make_toss_scene,
    rigid_cube_window,
    rigid_from_unit,
    rigid_to_unit,
    simulate_tosses_c,
)
from ..surrogate import load_cube_surrogate, shipped_cube_surrogate
from ._cube_ensemble import ensemble_tosses, mean_states

METHODS = (
    "mujoco_nominal", "mujoco_identified", "mjx_identified", "clashx", "clashx_first", "clashx_rigid", "clashx_families",
    "oracle_first_post",
)  # fmt: skip
NOMINAL = (CUBE_FRICTION, 0.02, 1.0)  # dair_pll's friction; MuJoCo's default solref (time constant, damping ratio)
ALPHAS = (0.1, 0.2)
# Published (Acosta, Yang & Posa, RA-L 2022): mean position error % width, rotation error deg.
PUBLISHED = {"drake": (13.5, 16.5), "bullet": (14.9, 16.5), "mujoco": (25.1, 21.7)}


@dataclasses.dataclass(frozen=True)
class CubeTossConfig:
    """What to run.

    Attributes:
        tosses: cube-toss file the fit tosses are drawn from (and, without `eval`, evaluated on).
        eval: optional file whose every toss is evaluated instead.
        fit: tosses drawn for fitting.
        seed: which tosses are drawn, and the fitters' keys.
        surrogate: run folder of a pretrained cube surrogate; None: the shipped one.
        max_eval: evaluate at most this many tosses (0: all), the first in file order after the fit ones leave.
        mjx_starts, mjx_iterations: Levenberg-Marquardt through MJX (both MJX fits); `mjx_identified` from
            the prior's centre and `mjx_starts - 1` random starts.
        rest_starts: starts of clashx's (and clashx_rigid's) Levenberg-Marquardt fit of MJX's parameters
            after the impacts: the first from the impact's identified parameters, the others random (on seeds
            0-2 a second start won on the fit tosses 2 times in 6, and cost 20-25 s).  0: none, the CMA-ES
            refit starts at the impact's parameters (faster; on seed 1 it ended 0.8-3.6 points worse on
            the evaluated tosses, at the same cost on the fit tosses: README, "Time").
        sysid_iters: `mujoco.sysid` iterations per start.
        rest_generations, rest_population, rest_std: CMA-ES refit of clashx's MJX parameters between impacts through
            the every-impact hybrid on the fit tosses (`fit_between_impacts`); 0 generations keeps the
            Levenberg-Marquardt fit (which `clashx_first` always uses).
        rigid_joint: clashx_rigid's CMA-ES refit searches the rigid law's four parameters jointly with MJX's
            three on the whole fit tosses (`fit_between_impacts(impact_box=...)`), from the impacts' fit.
        rigid_inertia: clashx_rigid's MJX (between impacts) runs a cube whose inertia is the rigid law's
            fit (`make_toss_scene(inertia_scale=...)`) instead of the drawing's.
        methods: which of `METHODS` to run (default: all).
        posterior_samples: members per toss of the posterior-mean rollouts (`clashx.workflows._cube_ensemble`;
            needs `clashx_rigid` among `methods`): with n > 0, `clashx` and `clashx_rigid` are also rolled out
            n times with their impact parameters drawn from their Laplace posterior and averaged frame by frame
            (`clashx_mean`, `clashx_rigid_mean`, and the two averaged, `clashx_families_mean`; their α columns
            are their fitted handlers' first impacts, as `clashx`'s and `clashx_rigid`'s); 0: none.
        posterior_noise: the members also draw the impact's noise (τ per speed component, one draw per member
            held over its landings); needs `posterior_samples`.
    """

    tosses: str
    eval: str | None = None
    fit: int = 10
    seed: int = 0
    surrogate: str | None = None
    max_eval: int = 0
    mjx_starts: int = 2
    rest_starts: int = 1
    mjx_iterations: int = 6
    sysid_iters: int = 30
    rest_generations: int = 6
    rest_population: int = 8
    rest_std: float = 0.1
    rigid_joint: bool = False
    rigid_inertia: bool = False
    methods: tuple[str, ...] = METHODS
    posterior_samples: int = 0
    posterior_noise: bool = False

    def __post_init__(self):
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown cube method(s) {unknown}; choose from {', '.join(METHODS)}")
        if "clashx_families" in self.methods and "clashx_rigid" not in self.methods:
            raise ValueError(
                "--methods: clashx_families averages clashx's and clashx_rigid's rollouts; add clashx_rigid"
            )
        if self.fit < 2:
            raise ValueError(f"--fit {self.fit}: at least 2 tosses are needed (fine-tuning cross-validates)")
        if self.mjx_starts < 1:
            raise ValueError(f"mjx_starts = {self.mjx_starts}: at least 1 start is needed")
        if self.rest_starts < 0:
            raise ValueError(f"rest_starts = {self.rest_starts}: 0 (no Levenberg-Marquardt) or more starts")
        if self.posterior_samples < 0:
            raise ValueError(f"--posterior-samples {self.posterior_samples}: 0 (none) or more members per toss")
        if self.posterior_samples and "clashx_rigid" not in self.methods:
            raise ValueError("--posterior-samples: the posterior-mean rollouts need clashx_rigid among --methods")
        if self.posterior_noise and not self.posterior_samples:
            raise ValueError("--posterior-noise draws the members' noise: it needs --posterior-samples N > 0")


def alpha_accuracies(pred_post: np.ndarray, real_post: np.ndarray) -> dict:
    """Post-impact α-accuracy at each of `ALPHAS` (module docstring), and the median relative error."""
    err = impact_speed_errors(pred_post, real_post)
    return {f"alpha_{a}": float(np.mean(err <= a)) for a in ALPHAS} | {"median_rel_err": float(np.median(err))}


def _load(path: str) -> tuple[dict, list[np.ndarray], Events]:
    """(first-impact events, one per toss; their tracks; every impact's events, `impact` numbering them)."""
    every = ingest_cube_tosses(path, impacts="all")
    ev = _take(every, np.flatnonzero(every["impact"] == 0))
    data = load_cube_tracks(path)
    rows = {int(t): i for i, t in enumerate(data.toss_ids)}
    return ev, [data.tracks[rows[int(t)]] for t in ev["toss_id"]], every


def _take(ev: Mapping[str, Any], idx: np.ndarray) -> dict:
    return {
        k: v[idx] for k, v in ev.items() if isinstance(v, np.ndarray) and v.ndim >= 1 and len(v) == len(ev["toss_id"])
    }


@dataclasses.dataclass(frozen=True, repr=False)
class CubeTossResult(Result):
    """What `run_cube_toss` returns: each method's errors on the evaluated tosses and what it fitted.

    Attributes:
        methods: per method (`METHODS`), its record: the rollouts' position error in % of the cube's width
            ("pos_pct_mean", "pos_pct_std", per horizon "pos_pct_H_mean"), rotation error in degrees
            ("rot_deg_mean", ...), the first impact's α-accuracies ("alpha_0.1", "alpha_0.2") and median
            relative error, the fitted "params", "fit_s", and per method its extras ("sigma", "finetune", ...).
        fit_toss_ids: the tosses fitted on.
        n_eval: tosses evaluated.
        timing_s: seconds per stage.
        config: the `CubeTossConfig`, as JSON.
        published: the published numbers it is compared with.
        tracks: four real tosses' tracks ("real") and their ids ("toss_ids"), for plots.
        sim_tracks: the same four tosses as each method rolled them out, for plots.
    """

    methods: dict[str, dict[str, Any]]
    fit_toss_ids: list[int]
    n_eval: int
    timing_s: dict[str, float]
    config: dict[str, Any]
    published: dict[str, Any]
    tracks: dict[str, Any]
    sim_tracks: dict[str, np.ndarray]

    def to_dict(self) -> dict[str, Any]:
        """The `--json` content (`json_summary`)."""
        return json_summary(self)


def run_cube_toss(config: CubeTossConfig, *, log=print) -> CubeTossResult:
    """Fit every method on `config.fit` recorded tosses and score it on the others (module docstring).

    Returns:
        A `CubeTossResult`: per method its errors, α-accuracies, fitted parameters and fit time.
    """
    t_all = time.perf_counter()
    ev, tracks, every = _load(config.tosses)
    n = len(ev["toss_id"])
    if n < config.fit + (0 if config.eval else 1):
        raise ValueError(f"{config.tosses}: {n} usable tosses, too few to fit on {config.fit} and evaluate on the rest")
    rng = np.random.default_rng(config.seed)
    fit_idx = np.sort(rng.choice(n, config.fit, replace=False))
    fit, fit_tracks = _take(ev, fit_idx), [tracks[i] for i in fit_idx]
    fit_all = _take(every, np.flatnonzero(np.isin(every["toss_id"], fit["toss_id"])))
    if config.eval:
        ev_e, tracks_e, every_e = _load(config.eval)
        eval_idx = np.arange(len(ev_e["toss_id"]))
    else:
        ev_e, tracks_e, every_e = ev, tracks, every
        eval_idx = np.setdiff1d(np.arange(n), fit_idx)
    if config.max_eval:
        eval_idx = eval_idx[: config.max_eval]
    evs, real = _take(ev_e, eval_idx), [tracks_e[i] for i in eval_idx]
    n_frames = max(len(t) for t in real)
    n_eval = len(eval_idx)
    log(
        f"cube tosses: fit on {config.fit} (toss ids {fit['toss_id'].tolist()}; {len(fit_all['toss_id'])} impacts"
        f" after a free flight), evaluate on {n_eval}"
    )
    sim = make_toss_scene()
    key = jax.random.PRNGKey(config.seed)
    k_id, k_ft, k_mjx, k_rest, k_between = jax.random.split(key, 5)
    results, timing = {}, {}

    def event_post(params):
        return simulate_tosses_c(sim, evs["initial_state"], np.tile(params, (n_eval, 1))).post_state

    def record(name, params, tracks_sim, post, t_fit, extra=None):
        results[name] = (
            trajectory_errors(tracks_sim, real)
            | alpha_accuracies(post, evs["post_state"])
            | {"params": np.asarray(params, np.float64).tolist(), "fit_s": t_fit}
            | (extra or {})
        )
        r = results[name]
        log(
            f"  {name:<20} pos {r['pos_pct_mean']:5.1f} ± {r['pos_pct_std']:4.1f} % width, rest {r['rest_pct_mean']:5.1f} %,"
            f" rot {r['rot_deg_mean']:5.1f} ± {r['rot_deg_std']:4.1f} deg, α0.1 {r['alpha_0.1']:.2f}"
        )

    # MuJoCo, nominal
    p = np.asarray(NOMINAL)
    record("mujoco_nominal", p, rollout_c(sim, evs["initial_state"], p, n_frames), event_post(p), 0.0)

    # MuJoCo, identified by mujoco.sysid
    log(f"  mujoco_identified: mujoco.sysid on the {config.fit} fit trajectories …")
    t0 = time.perf_counter()
    p, _ = identify_sysid(sim, fit["initial_state"], fit_tracks, max_iters=config.sysid_iters)
    t_fit = time.perf_counter() - t0
    record("mujoco_identified", p, rollout_c(sim, evs["initial_state"], p, n_frames), event_post(p), t_fit)

    # MJX, identified by gradient (Levenberg-Marquardt on forward-mode Jacobians)
    tracks_mjx = None
    if "mjx_identified" in config.methods:
        t0 = time.perf_counter()
        p, _ = identify_trajectory_mjx(
            sim,
            fit["initial_state"],
            np.zeros(config.fit),
            fit_tracks,
            key=k_mjx,
            n_starts=config.mjx_starts,
            iterations=config.mjx_iterations,
        )
        t_fit = time.perf_counter() - t0
        tracks_mjx = _mjx_rollouts(sim, evs["initial_state"], p, n_frames)
        record("mjx_identified", p, tracks_mjx, event_post(p), t_fit)

    # clashx: surrogate impacts (identified, fine-tuned on every impact of the fit tosses) + MJX between them
    log(
        f"  clashx: impact parameters through the cube surrogate from {len(fit_all['toss_id'])} impacts, then CV fine-tuning …"
    )
    t0 = time.perf_counter()
    surrogate = load_cube_surrogate(config.surrogate) if config.surrogate else shipped_cube_surrogate()
    p_imp, _ = identify_cube(surrogate, fit_all["pre_state"], fit_all["post_state"], key=k_id)
    ft = finetune_cube(surrogate, fit_all["pre_state"], fit_all["post_state"], p_imp, key=k_ft)
    tuned, report = ft.model, ft.to_dict()
    post_fit = impact_posts(tuned, fit["pre_state"], p_imp)[0]
    log(f"  clashx: fine-tuning {report['steps']} steps")
    p_lm = _rest_lm(sim, post_fit, fit, fit_tracks, p_imp, k_rest, config, log)
    p_rest, rest_fit = p_lm, {"lm": p_lm.tolist()}
    if config.rest_generations:
        log(
            f"  clashx: MJX's parameters between impacts refit through the every-impact hybrid (CMA-ES,"
            f" {config.rest_generations} × {config.rest_population}) …"
        )
        p_rest, cost, history = fit_between_impacts(
            sim,
            tuned,
            fit["initial_state"],
            p_imp,
            fit_tracks,
            p_lm,
            key=k_between,
            population=config.rest_population,
            generations=config.rest_generations,
            std_init=config.rest_std,
        )
        rest_fit |= {"cmaes": p_rest.tolist(), "cost": cost, "history": history.tolist()}
    t_fit = time.perf_counter() - t0
    log(f"  clashx: rolling {n_eval} tosses out through the hybrid, every impact through the surrogate …")
    t0 = time.perf_counter()
    tracks_cx, fired = hybrid_tosses(
        sim, tuned, evs["initial_state"], p_imp, n_frames, rest_params=p_rest, every_impact=True
    )
    timing["clashx_rollout_s"] = time.perf_counter() - t0
    post_cx = impact_posts(tuned, evs["pre_state"], p_imp)[0]
    landings = {"fired": float(np.mean(fired))} | {
        "real_impacts_per_toss": float(np.mean(np.isin(every_e["toss_id"], evs["toss_id"]).sum() / n_eval)),
    }
    log("  clashx: landings per toss " + ", ".join(f"{k} {v:.2f}" for k, v in landings.items()))
    extra = {
        "rest_params": p_rest.tolist(),
        "rest_fit": rest_fit,
        "finetune": report,
        "landings_per_toss": landings,
        "n_fit_impacts": len(fit_all["toss_id"]),
    }
    u_cx = surrogate.space.to_unit(jnp.asarray(p_imp))
    extra["sigma"], pred_cx = _sigma(tuned, surrogate.space.from_unit, u_cx, fit_all, evs, log, surrogate)
    record("clashx", p_imp, tracks_cx, post_cx, t_fit, extra)
    k_mean = jax.random.fold_in(key, 11)  # clashx's members; fold_in(k_mean, 1) the rigid family's
    if config.posterior_samples:
        t0 = time.perf_counter()
        mean_cx = ensemble_tosses(
            sim, tuned, surrogate.space.from_unit, np.asarray(u_cx), pred_cx, evs["initial_state"], n_frames,
            rest_params=p_rest, samples=config.posterior_samples, key=k_mean, noise=config.posterior_noise,
        )  # fmt: skip
        timing["clashx_mean_rollout_s"] = time.perf_counter() - t0
        record("clashx_mean", p_imp, mean_cx, post_cx, results["clashx"]["fit_s"])
    if "clashx_first" in config.methods:
        t0 = time.perf_counter()
        tracks_first = hybrid_tosses(sim, tuned, evs["initial_state"], p_imp, n_frames, rest_params=p_lm).frames
        timing["clashx_first_rollout_s"] = time.perf_counter() - t0
        record("clashx_first", p_imp, tracks_first, post_cx, t_fit, {"rest_params": p_lm.tolist()})
    if "clashx_rigid" in config.methods:
        log(f"  clashx_rigid: the rigid impulse law from {len(fit_all['toss_id'])} impacts (CMA-ES) …")
        t0 = time.perf_counter()
        k_rig, k_rig_rest, k_rig_between = jax.random.split(jax.random.fold_in(key, 7), 3)
        p_rig, rig_loss = identify_rigid_impacts(fit_all["pre_state"], fit_all["post_state"], key=k_rig)
        post_rig = impact_posts(rigid_cube_window, fit["pre_state"], p_rig)[0]
        sim_r = make_toss_scene(sim.settings, inertia_scale=float(p_rig[3])) if config.rigid_inertia else sim
        p_rig_lm = _rest_lm(sim_r, post_rig, fit, fit_tracks, p_imp, k_rig_rest, config, log)
        p_rig_rest = p_rig_lm
        if config.rest_generations:
            box = (rigid_from_unit, rigid_to_unit) if config.rigid_joint else None
            p_both, _, _ = fit_between_impacts(
                sim_r, rigid_cube_window, fit["initial_state"], p_rig, fit_tracks, p_rig_lm, key=k_rig_between,
                population=config.rest_population, generations=config.rest_generations, std_init=config.rest_std,
                impact_box=box,
            )  # fmt: skip
            p_rig, p_rig_rest = (p_both[: len(p_rig)], p_both[len(p_rig) :]) if config.rigid_joint else (p_rig, p_both)
        t_fit = time.perf_counter() - t0
        tracks_rig = hybrid_tosses(
            sim_r, rigid_cube_window, evs["initial_state"], p_rig, n_frames, rest_params=p_rig_rest, every_impact=True
        ).frames
        extra = {"rest_params": p_rig_rest.tolist(), "rigid_fit_loss": rig_loss, "rigid_names": list(RIGID_NAMES)}
        u_rig = rigid_to_unit(p_rig)
        extra["sigma"], pred_rig = _sigma(rigid_cube_window, rigid_from_unit, u_rig, fit_all, evs, log)
        post_rig_eval = impact_posts(rigid_cube_window, evs["pre_state"], p_rig)[0]
        record("clashx_rigid", p_rig, tracks_rig, post_rig_eval, t_fit, extra)
        if config.posterior_samples:
            t0 = time.perf_counter()
            mean_rig = ensemble_tosses(
                sim_r, rigid_cube_window, rigid_from_unit, np.asarray(u_rig), pred_rig, evs["initial_state"],
                n_frames, rest_params=p_rig_rest, samples=config.posterior_samples, key=jax.random.fold_in(k_mean, 1),
                noise=config.posterior_noise,
            )  # fmt: skip
            timing["clashx_rigid_mean_rollout_s"] = time.perf_counter() - t0
            record("clashx_rigid_mean", p_rig, mean_rig, post_rig_eval, t_fit)
            record(
                "clashx_families_mean", p_imp, average_states(mean_cx, mean_rig),
                average_states(post_cx, post_rig_eval), t_fit + results["clashx"]["fit_s"],
            )  # fmt: skip
        if "clashx_families" in config.methods:  # the two families' rollouts, no fit or rollout of its own
            record(
                "clashx_families", p_imp, average_states(tracks_cx, tracks_rig), average_states(post_cx, post_rig_eval),
                t_fit + results["clashx"]["fit_s"],
            )  # fmt: skip
    if "oracle_first_post" in config.methods:
        from_post = hybrid_tosses(
            sim, tuned, evs["post_state"], p_imp, n_frames, rest_params=p_rest, every_impact=True
        ).frames
        tracks_or = _after_first_window(tracks_cx, from_post, evs["t_impact"] + WINDOW)
        record("oracle_first_post", p_imp, tracks_or, evs["post_state"], t_fit, {"rest_params": p_rest.tolist()})

    timing["total_s"] = time.perf_counter() - t_all
    return CubeTossResult(
        methods=results,
        fit_toss_ids=fit["toss_id"].tolist(),
        n_eval=n_eval,
        timing_s=timing,
        config=dataclasses.asdict(config),
        published=PUBLISHED,
        tracks={"real": real[:4], "toss_ids": evs["toss_id"][:4].tolist()},
        sim_tracks={
            "mujoco_nominal": rollout_c(sim, evs["initial_state"][:4], np.asarray(NOMINAL), n_frames),
            "mujoco_identified": rollout_c(
                sim, evs["initial_state"][:4], np.asarray(results["mujoco_identified"]["params"]), n_frames
            ),
            "clashx": tracks_cx[:4],
        }
        | ({} if tracks_mjx is None else {"mjx_identified": tracks_mjx[:4]}),
    )


def average_states(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The mean of two cube states (..., 13), `mean_states` of the pair (the chordal mean of the rotations)."""
    return mean_states(np.stack([np.asarray(a, np.float64), np.asarray(b, np.float64)]))


def _sigma(impact, from_unit, u_hat, fit_all: dict, evs: dict, log, noise_from=None) -> tuple[dict, dict]:
    """The handler's σ per evaluated toss on its first impact (`impact_predictive`, from the fit impacts only;
    the noise from `noise_from`'s residuals, the model before fine-tuning), how well it describes the
    measured post-window states (`impact_calibration`), and `impact_predictive`'s dict (its posterior)."""
    pred = impact_predictive(
        impact, from_unit, np.asarray(u_hat), fit_all["pre_state"], fit_all["post_state"], evs["pre_state"],
        noise_from=noise_from,
    )  # fmt: skip
    cal = impact_calibration(pred, evs["post_state"])
    log(
        f"    σ per toss (first impact): median {cal['sigma_rel_median']:.3f} of the speed against a median error of"
        f" {cal['err_rel_median']:.3f}; inside the 50 % / 90 % ellipsoid {cal['coverage_50']:.2f} / {cal['coverage_90']:.2f};"
        f" σ-error rank correlation {cal['spearman']:.2f}"
    )
    return cal | {"sigma_rel": pred["sigma_rel"].tolist(), "tau": pred["tau"].tolist()}, pred


def _rest_lm(sim, post_fit, fit, fit_tracks, init, key, config: CubeTossConfig, log) -> np.ndarray:
    """MJX's parameters after the impacts by Levenberg-Marquardt from the handler's post-impact states of the fit
    tosses, the first start at `init` (the impact's parameters); `config.rest_starts` = 0: `init` itself."""
    if config.rest_starts == 0:
        return np.asarray(init, np.float64)
    log("  MJX's post-impact parameters by Levenberg-Marquardt …")
    p, _ = identify_trajectory_mjx(
        sim, post_fit, fit["t_impact"] + WINDOW, fit_tracks, key=key, n_starts=config.rest_starts,
        iterations=config.mjx_iterations, init=init,
    )  # fmt: skip
    return p


def _after_first_window(tracks: np.ndarray, from_post: np.ndarray, t_post: np.ndarray) -> np.ndarray:
    """`tracks` (n, F, 13) with every frame at or after `t_post[i]` taken from `from_post[i]`, a rollout started
    at `t_post[i]` (its frame j at t_post + j / 148 s), interpolated onto the frame grid."""
    out = tracks.copy()
    n_frames = tracks.shape[1]
    t = np.arange(n_frames) * FRAME_DT
    for i in range(len(tracks)):
        u = (t - t_post[i]) / FRAME_DT
        after = u >= 0
        lo = np.minimum(np.floor(u[after]).astype(int), n_frames - 2)
        s = np.clip(u[after] - lo, 0.0, 1.0)
        mix = (1 - s)[:, None] * from_post[i, lo] + s[:, None] * from_post[i, lo + 1]
        mix[:, :4] /= np.linalg.norm(mix[:, :4], axis=1, keepdims=True)
        out[i, after] = mix
    return out


def _mjx_rollouts(sim, states0: np.ndarray, params: np.ndarray, n_frames: int) -> np.ndarray:
    """Plain MJX rollouts from t = 0 (`rest_rollout`), jit + vmap in blocks of the batching policy: (n, n_frames, 13)."""
    fn = _mjx_rollout_fn(n_frames)
    p = jnp.asarray(params, jnp.float32)
    world = model_world_bytes(sim.model, recorded=n_frames * 13 * 4)
    out = in_blocks(lambda s: fn(sim, jnp.asarray(s), p), np.asarray(states0, np.float32), world=world)
    return out.astype(np.float64)


_ROLLOUT_FNS: dict[int, object] = {}


def _mjx_rollout_fn(n_frames: int):
    if n_frames not in _ROLLOUT_FNS:

        @eqx.filter_jit
        def fn(sim, states, params):
            return jax.vmap(lambda s: rest_rollout(sim, s, jnp.zeros((), s.dtype), params, n_frames))(states)

        _ROLLOUT_FNS[n_frames] = fn
    return _ROLLOUT_FNS[n_frames]


def summary_table(result: CubeTossResult) -> str:
    """The bench's table as text: every method's errors beside the published ones."""
    w = max(19, 1 + max(len(name) for name in result.methods))
    head = f"{'method':<{w}}{'pos % width':>16}{'at rest %':>14}{'rot deg':>16}{'α0.1':>7}{'α0.2':>7}"
    lines = [head, "-" * len(head)]
    for name, r in result.methods.items():
        lines.append(
            f"{name:<{w}}{r['pos_pct_mean']:>8.1f} ± {r['pos_pct_std']:<5.1f}{r['rest_pct_mean']:>8.1f} ± {r['rest_pct_std']:<4.0f}"
            f"{r['rot_deg_mean']:>8.1f} ± {r['rot_deg_std']:<5.1f}{r['alpha_0.1']:>7.2f}{r['alpha_0.2']:>7.2f}"
        )
    lines.append("by horizon, mean over tosses (frames from the first; whole: every recorded frame):")
    cols = [str(h) for h in HORIZONS] + ["whole"]
    lines.append(
        f"{'method':<{w}}"
        + "".join(f"{'pos % @' + c:>14}" for c in cols)
        + "".join(f"{'rot° @' + c:>13}" for c in cols)
    )
    for name, r in result.methods.items():
        by_pos = [r[f"pos_pct_{h}_mean"] for h in HORIZONS] + [r["pos_pct_mean"]]
        by_rot = [r[f"rot_deg_{h}_mean"] for h in HORIZONS] + [r["rot_deg_mean"]]
        lines.append(f"{name:<{w}}" + "".join(f"{v:>14.1f}" for v in by_pos) + "".join(f"{v:>13.1f}" for v in by_rot))
    sig = [(name, r["sigma"]) for name, r in result.methods.items() if "sigma" in r]
    if sig:
        lines.append(
            "σ per toss on the first impact (from the fit impacts): median σ / median error, in the 50 % / 90 % ellipsoid:"
        )
        for name, c in sig:
            lines.append(
                f"  {name:<17}{c['sigma_rel_median']:>8.3f} / {c['err_rel_median']:.3f}{c['coverage_50']:>10.2f} / "
                f"{c['coverage_90']:.2f}   (σ-error rank correlation {c['spearman']:.2f})"
            )
    lines.append("published (Acosta et al. 2022, tuned, all tosses):")
    for name, (pos, rot) in PUBLISHED.items():
        lines.append(f"  {name:<17}{pos:>8.1f}{'':<22}{rot:>8.1f}")
    return "\n".join(lines)


def json_summary(result: CubeTossResult) -> dict:
    """The `--json` content: per method the required keys and the rest of its record."""
    out = {}
    for name, r in result.methods.items():
        out[name] = {
            "pos_err_pct_width_mean": r["pos_pct_mean"],
            "pos_err_pct_width_std": r["pos_pct_std"],
            "rest_err_pct_width_mean": r["rest_pct_mean"],
            "rot_err_deg_mean": r["rot_deg_mean"],
            "rot_err_deg_std": r["rot_deg_std"],
            "alpha_accuracy": r["alpha_0.1"],
            "alpha_accuracy_0.2": r["alpha_0.2"],
            "post_median_rel_err": r["median_rel_err"],
            "horizons": {
                str(h): {"pos_err_pct_width_mean": r[f"pos_pct_{h}_mean"], "rot_err_deg_mean": r[f"rot_deg_{h}_mean"]}
                for h in HORIZONS
            }
            | {"whole": {"pos_err_pct_width_mean": r["pos_pct_mean"], "rot_err_deg_mean": r["rot_deg_mean"]}},
            "params": r["params"],
            "fit_s": r["fit_s"],
        } | {
            k: r[k]
            for k in ("rest_params", "finetune", "landings_per_toss", "n_fit_impacts", "rest_fit", "sigma")
            if k in r
        }
    return out | {
        "_meta": {
            "n_eval": result.n_eval,
            "fit_toss_ids": result.fit_toss_ids,
            "timing_s": result.timing_s,
            "config": result.config,
            "alpha": 0.1,
        }
    }


def save_json(path: str, result: CubeTossResult) -> None:
    """Write `json_summary(result)` to `path`."""
    write_json(path, json_summary(result))

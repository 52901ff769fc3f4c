"""CMA-ES strike optimisation: engine timings (CLASH Table V) and lab errors of model-based strikes (Table IV).

    python bench/cmaes.py [--shape S] [--lab PATH] [--fit FIT.npz] [--models DIR] [--targets 40]
                          [--population 16] [--generations 20] [--timing-shape square] [--seed 0] [--json OUT]

Timing: the same CMA-ES job (population, generations, seed, targets), one target at a time and all
targets at once (`clashx.optimize.optimize_strikes`: the CMA-ES states vmapped over targets, each
generation's targets × population rollouts one batch), on
  mujoco_c    MuJoCo C, full contact at the 1 ms step the striker-block pair needs, for the whole strike
  mjx_full    MJX, the same
  mjx_hybrid  MJX, the surrogate at the impact, 4 ms steps (one jit: ask, rollouts, tell)
  cpu_hybrid  MuJoCo C, the same hybrid rule (the CPU fallback)
and, for reference, mujoco_c_two_phase: full contact at 1 ms until release, 4 ms after (what `clashx
generate` runs).  MJX compile time is reported apart (a first job compiles; the timed jobs reuse it).

Lab errors: for each shape, ten fit strikes (`--fit`; the shipped lab-A recording made by
`strike_lab.py --random 10 --seed 2 --reset-each`; on another `--lab` that command is run) are
ingested (velocities and rest poses from the noisy tracks, never `post_velocity_true`).  Targets are
the rest poses of `--targets` random lab strikes (seed 100), so every target is reachable in the lab.
Methods:
  mujoco_nominal     MuJoCo C at its defaults (μ = 1, damping ratio 1), CMA-ES over full-contact rollouts
  mujoco_identified  MuJoCo C, all 8 parameters by CMA-ES on the fit velocities with clashx's objective
                     (ground friction from the slides, the same priors), then the slide's parameters
                     refit on the fit rest poses
  clashx             the surrogate (shipped, or --models DIR/SHAPE), two-stage identification on the fit
                     tracks and fine-tuning (`clashx.learn._lab_fit`), then the same refit through CPU-hybrid
                     rollouts; CMA-ES over CPU-hybrid rollouts
  clashx_families    both impulse families identified on the same tracks (`clashx.fit_families`) and averaged
                     as the hybrid's handler (`FamilyFit.handler`: MuJoCo's family at the refit parameters,
                     the compliant one held at its own), the same refit and CMA-ES
Both refits are the same (`clashx.optimize._optimize.identify_from_rest`: CMA-ES, 16 × 15, mu2, torsion and the
centre of mass, from the velocity fit).
  mujoco_identified_velocity, clashx_velocity   the same without the refit (velocities only, as in CLASH)
The strikes each method chooses run in the lab (block reset to the start each time); the error is the
lab's final pose against the target: position (m) and |yaw| (rad), medians over targets.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from clashx import hybrid as _hybrid
from clashx.baselines import identify_cmaes, nominal_params
from clashx.core import write_json
from clashx.events import ingest_strike_lab, lab_recording, read_npz
from clashx.learn import LabFitConfig, fit_families, fit_recording
from clashx.optimize import (
    MBOConfig,
    cached_hybrid,
    clip_to_ranges,
    identify_from_rest,
    optimize_strike,
    optimize_strikes,
    to_start_frame,
    wrap,
)
from clashx.scenes import geometry as geo
from clashx.scenes import simulate_strikes_c
from clashx.surrogate import load_or_shipped

LAB_DIR = Path(__file__).resolve().parents[2] / "shared" / "lab"
MBO_METHODS = (
    "mujoco_nominal", "mujoco_identified", "clashx", "clashx_families", "mujoco_identified_velocity", "clashx_velocity",
)  # fmt: skip
TIMING = ("mujoco_c", "mjx_full", "mjx_hybrid", "cpu_hybrid", "mujoco_c_two_phase")
ENGINE_OF = {
    "mujoco_c": "mujoco-c",
    "mjx_full": "mjx",
    "mjx_hybrid": "mjx-hybrid",
    "cpu_hybrid": "cpu-hybrid",
    "mujoco_c_two_phase": "mujoco-c-two-phase",
}


def run_lab(shape: str, lab: str, out: str, *, strikes: np.ndarray | None = None, n: int = 0, seed: int = 0) -> dict:
    """Run strikes in `strike_lab.py` (block reset to the origin before each); return its recording."""
    script = LAB_DIR / "strike_lab.py"
    if not script.exists():
        raise SystemExit(f"{script}: the strike lab is not here (bench/cmaes.py needs ../shared/lab)")
    cmd = [sys.executable, str(script), "--shape", shape, "--lab", lab, "--reset-each", "--out", out]
    if strikes is not None:
        table = out + ".csv"
        with open(table, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["theta", "theta1", "v_pre"])
            w.writerows(np.asarray(strikes, float).tolist())
        cmd += ["--strikes", table]
    else:
        cmd += ["--random", str(n), "--seed", str(seed)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    with np.load(out, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def fit_events(rec: dict, shape: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Strikes, track-estimated velocities and rest poses (in the start frame) of the touched fit strikes."""
    ev = ingest_strike_lab(rec, "fit recording")
    if str(ev["shape"]) != shape:
        raise SystemExit(f"--fit: strikes on the {str(ev['shape'])!r} block, not {shape!r}")
    ok = ev["touched"] & np.isfinite(ev["post_velocity"]).all(1) & np.isfinite(ev["rest_pose"]).all(1)
    rest = np.stack([np.asarray(to_start_frame(r, s)) for r, s in zip(ev["rest_pose"][ok], ev["start_pose"][ok])])
    return ev["strike"][ok], ev["post_velocity"][ok], rest


SLIDE_REFIT = ("mu2", "torsion", "com_x", "com_y")  # what ten rest poses inform: the slide's parameters


def identify_methods(
    shape: str, rec: dict, models: str | None, sims: dict, *, seed: int, yaw_weight: float = 0.035
) -> dict:
    """{method: (params, handler or None, details)} for the MBO methods.

    clashx: its two-stage pipeline on the fit tracks (`clashx.learn._lab_fit`), fine-tuned; MuJoCo identified:
    CMA-ES on MuJoCo C with clashx's objective (the same labels, ground friction and priors).  Both then
    refit the slide's parameters on the fit strikes' rest poses (`identify_from_rest`, the same CMA-ES, the same
    `yaw_weight`: metres of rest-pose error one radian of yaw costs).
    """
    hs = cached_hybrid(sims, shape)  # the scenes the CMA-ES evaluators use too
    sim = hs.sim
    strikes, vel, rest = fit_events(rec, shape)
    key = jax.random.PRNGKey(seed)
    out = {"mujoco_nominal": (nominal_params(sim), None, {})}
    model = load_or_shipped(os.path.join(models, shape) if models else None, shape)

    t0 = time.perf_counter()
    lab = fit_recording(model, sim, rec, where="fit recording", key=key)
    tuned = lab.model

    def rest_h(s, p):
        return _hybrid.strike_rollouts_c(hs, tuned, s, p).rest_pose

    p_h, loss_h = identify_from_rest(
        rest_h, sim.space, lab.params, strikes, rest, key=key, free=SLIDE_REFIT, yaw_weight=yaw_weight
    )
    out["clashx_velocity"] = (lab.params, tuned, {"params": lab.params.tolist()})
    out["clashx"] = (
        p_h,
        tuned,
        {
            "velocity_fit": lab.params.tolist(),
            "params": p_h.tolist(),
            "std": lab.std.tolist(),
            "rest_fit_loss_m": loss_h,
            "finetune_steps": int(lab.report["finetune"]["steps"]),
            "fit_s": time.perf_counter() - t0,
        },
    )

    # both families averaged (`clashx.fit_families`) as the hybrid's handler, the same rest-pose refit
    t0 = time.perf_counter()
    fam = fit_families(rec, shape, key=key, where="fit recording", models={"mujoco": model})
    h_f = fam.handler()

    def rest_f(s, p):
        return _hybrid.strike_rollouts_c(hs, h_f, s, p).rest_pose

    mj = fam.fits["mujoco"]
    p_f, loss_f = identify_from_rest(
        rest_f, sim.space, mj.params, strikes, rest, key=key, free=SLIDE_REFIT, yaw_weight=yaw_weight
    )
    out["clashx_families"] = (
        p_f, h_f,
        {"velocity_fit": mj.params.tolist(), "params": p_f.tolist(), "rest_fit_loss_m": loss_f,
         "weights": dict(fam.weights), "fit_s": time.perf_counter() - t0},
    )  # fmt: skip

    t0 = time.perf_counter()
    config = LabFitConfig()
    mu2 = float(np.clip(lab.report["ground"]["mu2"], sim.space.low[1], sim.space.high[1]))
    prior = dict(config.prior_std) | {"mu2": config.stage1_slide_std}
    cma = identify_cmaes(  # three restarts: one search's luck moved α = 0.1 by up to 0.28 (README)
        sim, strikes, vel, key=key, population=16, generations=30, base=sim.space.vector(mu2=mu2), prior_std=prior,
        restarts=3,
    )  # fmt: skip

    def rest_c(s, p):
        return simulate_strikes_c(sim, s, p).rest_pose

    p_c, loss_c = identify_from_rest(
        rest_c, sim.space, cma.params, strikes, rest, key=key, free=SLIDE_REFIT, yaw_weight=yaw_weight
    )
    out["mujoco_identified_velocity"] = (np.asarray(cma.params), None, {"params": cma.params.tolist()})
    out["mujoco_identified"] = (
        p_c,
        None,
        {"velocity_fit": cma.params.tolist(), "params": p_c.tolist(), "rest_fit_loss_m": loss_c,
         "fit_s": time.perf_counter() - t0},
    )  # fmt: skip
    return out


def clamped_count(shape, handler, strikes, params, sims) -> int:
    """How many of the chosen strikes' impacts the hybrid's energy guard clamped."""
    return int(_hybrid.strike_rollouts_c(cached_hybrid(sims, shape), handler, strikes, params).clamped.sum())


def mbo(shape, method, params, handler, targets, config, sims, *, seed) -> np.ndarray:
    """The strikes CMA-ES chooses for each target (start at the origin), all targets searched at once."""
    engine = "cpu-hybrid" if method.startswith("clashx") else "mujoco-c-two-phase"
    starts = np.zeros((len(targets), 3))
    key = jax.random.PRNGKey(seed)
    r = optimize_strikes(engine, shape, params, starts, targets, config, key=key, handler=handler, sims=sims)
    return clip_to_ranges(r.strike)


def timing(shape, params, handler, targets, config, sims, *, seed) -> dict:
    """Wall-clock of the same CMA-ES job on every engine, one target at a time and all targets at once
    (`optimize_strikes`: targets × population rollouts per batch); compile measured apart (first call)."""
    out = {}
    keys = jax.random.split(jax.random.PRNGKey(seed), len(targets))
    for name in TIMING:
        engine = ENGINE_OF[name]
        h = handler if "hybrid" in name else None
        kw = dict(handler=h, sims=sims)

        def one_by_one(ts, engine=engine, kw=kw):
            for t, k in zip(ts, keys):
                jax.block_until_ready(optimize_strike(engine, shape, params, np.zeros(3), t, config, key=k, **kw))

        def together(ts, engine=engine, kw=kw):
            starts = np.zeros((len(ts), 3))
            jax.block_until_ready(optimize_strikes(engine, shape, params, starts, ts, config, key=keys[0], **kw))

        row = {}
        for mode, job in (("one_by_one", one_by_one), ("together", together)):
            t0 = time.perf_counter()
            job(targets[:1] if mode == "one_by_one" else targets)  # compiles MJX (and builds scenes); timed apart
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            job(targets)
            row[mode] = {"run_s": time.perf_counter() - t0, "first_call_s": first}
        out[name] = row["one_by_one"] | {"together": row["together"]}
        r1, r2 = row["one_by_one"]["run_s"], row["together"]["run_s"]
        print(
            f"  {name:<20} one by one {r1:8.2f} s   together {r2:8.2f} s ({r1 / r2:.2f}x)   "
            f"(first calls {row['one_by_one']['first_call_s']:.1f} s, {row['together']['first_call_s']:.1f} s)",
            flush=True,
        )
    return out


def plot_mbo(result: dict, path: str) -> None:
    """Targets (black crosses) and the lab block's final positions for each method, one panel per shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(result["details"])
    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 5), squeeze=False)
    colours = {"mujoco_nominal": "tab:grey", "mujoco_identified": "tab:blue", "clashx": "tab:red"}
    for ax, shape in zip(axes[0], shapes):
        d = result["details"][shape]
        t = 100 * np.asarray(d["targets"])
        for method, colour in colours.items():
            f = 100 * np.asarray(d[method]["lab_final_pose"])
            for a_, b_ in zip(t, f):
                ax.plot([a_[0], b_[0]], [a_[1], b_[1]], color=colour, lw=0.8, alpha=0.6)
            err = 1000 * result["mbo"][shape][method]["pos_err_m_median"]
            ax.scatter(f[:, 0], f[:, 1], s=12, color=colour, label=f"{method} (median {err:.1f} mm)")
        ax.scatter(t[:, 0], t[:, 1], marker="x", color="black", s=30, label="target")
        ax.scatter([0], [0], marker="s", color="black", s=40, label="start")
        ax.set_title(shape)
        ax.set_xlabel("x (cm)")
        ax.set_ylabel("y (cm)")
        ax.set_aspect("equal")
        ax.legend(fontsize=7)
    fig.suptitle("Model-based strikes in the lab: where the block ended, against the target")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=geo.SHAPES, help="one shape (default: all three)")
    ap.add_argument("--lab", default=str(LAB_DIR / "lab_a.json"), help="lab parameter file passed to strike_lab.py")
    ap.add_argument(
        "--fit",
        help="strike-lab recording to identify from (one shape); default: the shipped lab-A fit recording "
        "(lab A), else 10 random strikes run in --lab",
    )
    ap.add_argument(
        "--models", help="folder of pretrained surrogates, one run folder per shape (default: the shipped ones)"
    )
    ap.add_argument("--targets", type=int, default=40)
    ap.add_argument("--population", type=int, default=16)
    ap.add_argument("--generations", type=int, default=20)
    ap.add_argument(
        "--timing-shape", choices=geo.SHAPES, help="shape of the timing job (default: --shape, else square)"
    )
    ap.add_argument("--timing-targets", type=int, default=8)
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plot", help="PNG: per shape, the targets and where each method's strikes left the lab block")
    a = ap.parse_args()
    if a.fit and not a.shape:
        ap.error("--fit names one shape's strikes: give --shape too")
    shapes = [a.shape] if a.shape else list(geo.SHAPES)
    a.timing_shape = a.timing_shape or a.shape or "square"
    if not a.no_timing and a.timing_shape not in shapes:
        ap.error(f"--timing-shape {a.timing_shape} must be among the shapes run ({', '.join(shapes)})")
    config = MBOConfig(population=a.population, generations=a.generations).check()
    sims: dict = {}
    result: dict = {
        "device": jax.devices()[0].device_kind,
        "lab": a.lab,
        "population": a.population,
        "generations": a.generations,
        "targets": a.targets,
        "seed": a.seed,
        "mbo": {},
        "details": {},
    }
    work = tempfile.mkdtemp(prefix="clashx-cmaes-")
    identified: dict = {}
    all_targets: dict = {}
    for shape in shapes:
        t0 = time.perf_counter()
        if a.fit:
            fit = read_npz(a.fit, "strike recording")
        elif os.path.abspath(a.lab) == os.path.abspath(LAB_DIR / "lab_a.json"):
            fit = read_npz(lab_recording(shape, "fit"), "strike recording")  # made by exactly that command
        else:
            fit = run_lab(shape, a.lab, os.path.join(work, f"fit_{shape}.npz"), n=10, seed=2)
        rec = run_lab(shape, a.lab, os.path.join(work, f"targets_{shape}.npz"), n=a.targets, seed=100)
        ok = rec["touched"].astype(bool)
        targets = np.stack(
            [np.asarray(to_start_frame(r, s)) for r, s in zip(rec["final_pose"][ok], rec["start_pose"][ok])]
        )
        methods = identify_methods(shape, fit, a.models, sims, seed=a.seed)
        identified[shape], all_targets[shape] = methods, targets
        result["mbo"][shape] = {}
        result["details"][shape] = {"n_targets": len(targets), "targets": targets.tolist()}
        for method in MBO_METHODS:
            params, handler, info = methods[method]
            t1 = time.perf_counter()
            strikes = mbo(shape, method, params, handler, targets, config, sims, seed=a.seed)
            t_opt = time.perf_counter() - t1
            lab = run_lab(shape, a.lab, os.path.join(work, f"mbo_{shape}_{method}.npz"), strikes=strikes)
            final = np.stack([np.asarray(to_start_frame(r, s)) for r, s in zip(lab["final_pose"], lab["start_pose"])])
            pos = np.linalg.norm(final[:, :2] - targets[:, :2], axis=1)
            yaw = np.abs(np.asarray(wrap(final[:, 2] - targets[:, 2])))
            result["mbo"][shape][method] = {
                "pos_err_m_median": float(np.median(pos)),
                "ori_err_rad_median": float(np.median(yaw)),
            }
            result["details"][shape][method] = info | {
                "pos_err_m": pos.tolist(),
                "lab_final_pose": final.tolist(),
                "impacts_clamped": clamped_count(shape, handler, strikes, params, sims)
                if handler is not None
                else None,
                "strikes": strikes.tolist(),
                "ori_err_rad": yaw.tolist(),
                "pos_err_m_mean": float(pos.mean()),
                "optimize_s": t_opt,
            }
            print(
                f"{shape:<14} {method:<18} pos {1000 * np.median(pos):6.1f} mm  ori {np.median(yaw):.3f} rad  ({t_opt:.0f} s CMA-ES)",
                flush=True,
            )
        result["details"][shape]["total_s"] = time.perf_counter() - t0
    if not a.no_timing:
        shape = a.timing_shape
        print(
            f"timing: {shape}, population {a.population} × {a.generations} generations × {a.timing_targets} targets",
            flush=True,
        )
        params, handler, _ = identified[shape]["clashx"]
        targets = all_targets[shape][: a.timing_targets]
        t = timing(shape, params, handler, targets, config, sims, seed=a.seed)
        result["time_s"] = {k: v["run_s"] for k, v in t.items()}
        result["timing"] = {"shape": shape, "targets": a.timing_targets, "engines": t}
        ts = result["time_s"]
        result["time_together_s"] = {k: v["together"]["run_s"] for k, v in t.items()}
        result["ratios"] = {
            **{f"{k} one_by_one/together": ts[k] / result["time_together_s"][k] for k in ts},
            "cpu_hybrid/mujoco_c": ts["cpu_hybrid"] / ts["mujoco_c"],
            "mjx_hybrid/mjx_full": ts["mjx_hybrid"] / ts["mjx_full"],
            "cpu_hybrid/mujoco_c_two_phase": ts["cpu_hybrid"] / ts["mujoco_c_two_phase"],
        }
        for k, v in result["ratios"].items():
            print(f"  {k:<32} {v:.3f}")
    if a.plot:
        plot_mbo(result, a.plot)
        print(f"-> {a.plot}")
    if a.json:
        write_json(a.json, result)
        print(f"-> {a.json}")


if __name__ == "__main__":
    main()

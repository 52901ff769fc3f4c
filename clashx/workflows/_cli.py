"""The `clashx` command line: flags are parsed into a typed config and handed to one library function."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

from ..core import check_output, command_line
from ..events import GenerateConfig, generate, ingest_cube_tosses, ingest_strike_file, n_events, read_npz, save_events
from ..hybrid import ingest_by_simulation
from ..learn import FinetuneConfig, PretrainConfig, pretrain, pretrain_pair
from ..optimize import CRITERIA, MBOConfig
from ..scenes import geometry as geo
from ..scenes import load_scene, make_scene
from ._boundary import LEARNING_RATE, POSITIVE, POSITIVE_FLOAT, number_arg, run_guarded, seed_arg
from ._demo import run_demo
from ._identify_cmd import run_identify
from ._optimize_cmd import parse_pose, read_targets, run_optimize
from ._pair_workflow import cmd_pair
from ._plan_cmd import cmd_plan
from ._progress import ProgressBar
from ._push_cmd import cmd_train_policy
from ._strike_workflow import (
    FAMILY_CHOICES,
    OUTSIDE,
    label_sigma_summary,
    read_param_file,
    run_evaluate,
    run_finetune,
    run_predict,
    warn_outside,
    write_json,
)

POSE_FLAGS = ("--start", "--target")
SCENE_HELP = "MODULE:CLASS or path/to/file.py:CLASS of a clashx.PairScene (README: Your own scene)"


def _scene_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scene", help=f"your own scene, {SCENE_HELP}; default: the strike")


def _cmd_generate(a: argparse.Namespace) -> int:

    check_output(a.out, "--out", suffix=".npz")
    fixed: tuple[float, ...] = ()
    if a.params:
        space = make_scene(a.scene, a.shape or "").space
        fixed = tuple(read_param_file(a.params, space).tolist())
    config = GenerateConfig(
        scene=a.scene,
        shape=a.shape if a.scene == "strike" else "",
        n=a.n,
        seed=a.seed,
        out=a.out,
        chunk_size=a.chunk_size,
        engine=a.engine,
        to_rest=not a.no_rest,
        params=fixed,
    )
    t0 = time.perf_counter()
    with ProgressBar(f"generate {a.scene} {config.shape}".strip(), "events") as bar:
        result = generate(config, progress=bar, report=bar.write)
    engine = result.engine
    print(f"{config.n} {a.scene} events -> {a.out} ({time.perf_counter() - t0:.1f} s, engine {engine})")
    return 0


def _cmd_ingest(a: argparse.Namespace) -> int:

    check_output(a.out, "--out", suffix=".npz")
    events: Mapping[str, Any]
    if a.source == "strike-lab" and a.method == "sim":
        events = ingest_by_simulation(read_npz(a.input, "strike recording"), a.input)
    elif a.source == "strike-lab":
        events = ingest_strike_file(a.input)
    else:
        events = ingest_cube_tosses(a.input, impacts=a.impacts)
    save_events(a.out, events)
    print(f"{n_events(events)} {events['scene']} events from {a.input} -> {a.out}")
    if (line := label_sigma_summary(events)) is not None:
        print(line)
    return 0


def _cmd_pretrain(a: argparse.Namespace) -> int:

    check_output(a.out, "--out", folder=True, run=True)
    if a.json:
        check_output(a.json, "--json")
    config = PretrainConfig(
        data=a.data, out=a.out, epochs=a.epochs, batch_size=a.batch_size, lr=a.lr,
        width=a.width, depth=a.depth, val_fraction=a.val_fraction, seed=a.seed,
    )  # fmt: skip
    with ProgressBar("pretrain", "epoch") as bar:

        def progress(done, total, m):
            val = {"val_acc": f"{m['val_alpha_0.1']:.3f}"} if "val_alpha_0.1" in m else {"val": f"{m['val_loss']:.4f}"}
            bar(done, total, {"loss": f"{m['train_loss']:.4f}"} | val)

        if a.scene:
            result = pretrain_pair(load_scene(a.scene), config, progress=progress, report=bar.write)
        else:
            result = pretrain(config, progress=progress, report=bar.write)
    result.save(a.out)
    v = result.validation
    print(
        f"validation ({v['n']} simulated {'impacts' if a.scene else 'events'}): α=0.1 accuracy {v['alpha_0.1']:.3f}, median relative error {v['median_rel_err']:.4f}"
    )
    print(f"model -> {a.out}")
    if a.json:
        write_json(a.json, result.to_dict())
    return 0


def _cmd_identify(a: argparse.Namespace) -> int:
    if a.scene:
        if a.family == "compliant" or a.equal_label_weights:
            flag = f"--family {a.family}" if a.family == "compliant" else "--equal-label-weights"
            raise ValueError(
                f"{flag} is for the strike; a scene's families are mujoco (its surrogate) and rigid (its rigid "
                f"impulse law), or both (drop {flag.split()[0]}, or pass --family rigid or both)"
            )
        return _cmd_pair(a)
    if a.family == "rigid":
        raise ValueError("--family rigid is a scene's rigid law (with --scene); the strike's are mujoco and compliant")

    check_output(a.out, "--out")
    r = run_identify(
        a.model, a.real, a.select, a.out, family=a.family, seed=a.seed, n_starts=a.starts, outside=a.outside,
        report=_stderr, label_weights=not a.equal_label_weights,
    )  # fmt: skip
    warn_outside(r["outside_training_ranges"], len(r["rows"]), "strikes")
    for family, fit in (r["families"] if "families" in r else {r["family"]: r}).items():
        print(f"{family} family" + (f" (weight {r['weights'][family]:g})" if "weights" in r else ""))
        if "stages" in fit:
            g = fit["stages"]["ground"]
            print(f"ground (slides): mu2 = {g['mu2']:.4f} ± {g['mu2_std']:.4f} ({g['from']})")
        for name in fit["params"]:
            print(f"{name:>10} = {fit['params'][name]:.4f} ± {fit['std'][name]:.4f}")
        print(f"fit loss {fit['loss']:.5f}")
    print(f"labels weighed: {r['label_weights']}")
    print(f"{len(r['rows'])} strikes, {r['time_s']:.1f} s -> {a.out}")
    return 0


def _cmd_finetune(a: argparse.Namespace) -> int:
    if a.scene:
        return _cmd_pair(a)

    check_output(a.out, "--out", folder=True, run=True)
    config = FinetuneConfig(lr=a.lr, max_steps=a.max_steps, folds=a.folds, pull=a.pull, scope=a.scope)
    r = run_finetune(a.model, a.real, a.select, a.params, a.out, seed=a.seed, config=config)
    print(f"{r['steps']} steps; {r['reason']}; {r['time_s']:.1f} s -> {a.out}")
    return 0


def _cmd_evaluate(a: argparse.Namespace) -> int:
    if a.scene:
        return _cmd_pair(a)

    plot = a.plot or (os.path.splitext(a.json)[0] + ".png" if a.json else None)
    for path, flag in ((a.json, "--json"), (plot, "--plot" if a.plot else "--json (its .png)")):
        if path:
            check_output(path, flag)
    r = run_evaluate(a.model, a.real, a.alpha, params_path=a.params, select=a.select, plot=plot, outside=a.outside)
    warn_outside(r["outside_training_ranges"], r["n_events"], "events")
    print(
        f"α={a.alpha}: accuracy {r['alpha_accuracy']:.3f} on {r['n_events']} events (median relative error {r['median_rel_err']:.3f})"
    )
    if plot:
        print(f"α-curve -> {plot}")
    if a.json:
        write_json(a.json, r)
    return 0


def _outside_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--outside",
        type=number_arg(float, 0.0),
        default=OUTSIDE,
        help="strikes outside the ranges the model was trained on are counted in a warning; one further out than "
        f"this many range widths is an error (default {OUTSIDE})",
    )


def _cmd_pair(a: argparse.Namespace) -> int:

    return cmd_pair(a)


def _cmd_train_policy(a: argparse.Namespace) -> int:

    return cmd_train_policy(a)


def _cmd_plan(a: argparse.Namespace) -> int:

    return cmd_plan(a)


def _cmd_predict(a: argparse.Namespace) -> int:
    if a.scene:
        return _cmd_pair(a)

    check_output(a.out, "--out", suffix=".npz")
    r = run_predict(a.model, a.params, a.events, a.out, outside=a.outside)
    warn_outside(r["outside_training_ranges"], r["n"], "events")
    print(f"{r['n']} predictions -> {a.out}")
    return 0


def _cmd_optimize(a: argparse.Namespace) -> int:

    if a.json:
        check_output(a.json, "--json")
    config = MBOConfig(population=a.population, generations=a.generations).check()
    start = parse_pose(a.start, "--start")
    if a.targets:
        starts, targets = read_targets(a.targets, start)
        where = f"--targets {a.targets}"
    else:
        starts, targets, where = start[None], parse_pose(a.target, "--target")[None], "--target"
    for flag, pose in (("--start", start), ("--target", targets[0])):
        if not a.targets and abs(pose[2]) > math.pi:
            wrapped = math.remainder(pose[2], 2 * math.pi)
            print(f"note: {flag} yaw {pose[2]:g} rad is the orientation {wrapped:.4f} rad (yaw is compared modulo 2π)")
    label = f"CMA-ES {a.shape}" + (f", {len(targets)} targets" if len(targets) > 1 else "")
    with ProgressBar(label, "gen") as bar:
        r = run_optimize(
            a.model, a.params, a.shape, starts, targets, config, engine=a.engine, seed=a.seed, progress=bar, where=where
        )
    for i, out in enumerate(r["searches"]):
        s = out["strike"]
        x, y, yaw = out["predicted_rest_pose"]
        head = f"target {i + 1}: " if len(targets) > 1 else ""
        print(
            f"{head}strike: theta = {s['theta']:.4f} rad, theta1 = {s['theta1']:.4f} rad, v_pre = {s['v_pre']:.4f} m/s"
        )
        print(
            f"{' ' * len(head)}predicted rest pose: x = {x:.4f} m, y = {y:.4f} m, yaw = {yaw:.4f} rad "
            f"(off the target by {1000 * out['predicted_pos_err_m']:.1f} mm, {out['predicted_ori_err_rad']:.3f} rad)"
        )
        if out["impact_clamped"]:
            print(
                f"{' ' * len(head)}note: the energy guard clamped the surrogate's prediction for this strike "
                "(kinetic energy would have risen)"
            )
    print(f"{len(targets)} search(es) together in {r['time_s']:.1f} s on {r['engine']}")
    if a.json:
        write_json(a.json, r)
        print(f"-> {a.json}")
    return 0


def _cmd_demo(a: argparse.Namespace) -> int:

    shapes = tuple(s.strip() for s in a.shapes.split(",") if s.strip())
    if not shapes:
        raise ValueError(f"--shapes {a.shapes!r} names no block shape; give some of {','.join(geo.SHAPES)}")
    for shape in shapes:
        geo.check_shape(shape)
    check_output(a.out, "--out", folder=True)
    return run_demo(out=a.out, shapes=shapes, seed=a.seed, cube=not a.no_cube)


def _real_data_args(p: argparse.ArgumentParser, real_help: str, select_help: str) -> None:
    """--model, --real and --select, as identify and finetune take them."""
    p.add_argument("--model", help="run folder of a surrogate (default: the one shipped for the data's block shape)")
    p.add_argument("--real", required=True, help=real_help)
    p.add_argument("--select", help=f"{select_help} (default: every touched strike)")


def _engine_flag(p: argparse.ArgumentParser, cpu: str, accelerator: str, detail: str) -> None:
    """`--engine auto|CPU|ACCELERATOR` (auto resolves to `accelerator` on a GPU, else `cpu`: `core._engine`) and
    `--block-size` (overrides the batching policy, `clashx.core.block_size`)."""
    p.add_argument(
        "--engine",
        choices=("auto", cpu, accelerator),
        default="auto",
        help=f"auto (default): {accelerator} on a GPU, {cpu} on a CPU or TPU (MJX measured slower there); {detail}. "
        "The engine that ran is printed",
    )
    p.add_argument(
        "--block-size",
        type=POSITIVE,
        default=None,
        help="worlds per vmapped MJX batch (default: the batching policy's: the whole batch on a GPU/TPU within "
        "half its memory, 256 on a CPU); lower it if a GPU runs out of memory",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `clashx` command."""
    ap = argparse.ArgumentParser(prog="clashx", description="Collision learning for robot simulators (CLASH).")
    sub = ap.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="simulate collisions over the prior and write an event file")
    g.add_argument("--scene", required=True, help=f"strike, cube-toss, or your own: {SCENE_HELP}")
    g.add_argument("--shape", choices=geo.SHAPES, help="block shape (strike scene)")
    g.add_argument("--n", type=POSITIVE, required=True, help="number of events")
    g.add_argument("--seed", type=seed_arg, default=0)
    g.add_argument("--out", required=True, help="output event file (.npz); OUT.parts/ holds chunks until done")
    g.add_argument("--chunk-size", type=POSITIVE, default=1024, help="events per saved chunk (default 1024)")
    _engine_flag(
        g, "c", "mjx", "c: MuJoCo C on all CPU cores; mjx: jit+vmap on the JAX device; kept in the file's metadata"
    )
    g.add_argument("--no-rest", action="store_true", help="skip the slide to rest (rest_pose = pose at release)")
    g.add_argument("--params", help="PARAMS.json: simulate every event with these values (default: prior draws)")
    g.set_defaults(func=_cmd_generate)

    i = sub.add_parser("ingest", help="turn recordings (strike lab, cube tosses) into an event file")
    i.add_argument("--source", required=True, choices=("strike-lab", "cube-toss"))
    i.add_argument("--input", required=True, help="recording file (.npz)")
    i.add_argument("--out", required=True, help="output event file (.npz)")
    i.add_argument(
        "--method",
        choices=("stop-time", "sim"),
        default="stop-time",
        help="strike lab: how velocities are read off the slides: stop-time (default: a slide model per strike "
        "with a file-level prior; the more accurate on lab A) or sim (MuJoCo C's slide, parameters shared by the file)",
    )
    i.add_argument(
        "--impacts",
        choices=("all", "first"),
        default="all",
        help="cube tosses: every impact after a free flight (the first and each bounce's landing; default) or the first only",
    )
    i.set_defaults(func=_cmd_ingest)

    p = sub.add_parser("pretrain", help="train the surrogate on generated collisions")
    p.add_argument("--data", required=True, help="event file from `clashx generate --scene strike`")
    p.add_argument("--out", required=True, help="run folder (resumes a killed run with the same flags)")
    p.add_argument("--epochs", type=POSITIVE, default=30)
    p.add_argument("--batch-size", type=POSITIVE, default=1024)
    p.add_argument("--lr", type=LEARNING_RATE, default=2e-3)
    p.add_argument("--width", type=POSITIVE, default=256)
    p.add_argument("--depth", type=POSITIVE, default=4)
    p.add_argument("--val-fraction", type=number_arg(float, 0.0, 0.5, low_open=True), default=0.05)
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument("--json", help="write the validation metrics here")
    _scene_flag(p)
    p.set_defaults(func=_cmd_pretrain)

    q = sub.add_parser(
        "identify",
        help="the parameters from real strikes: a recording's tracks (two stages) or an event file, through the surrogate",
    )
    _real_data_args(
        q, "strike recording (tracks) or event file (e.g. from `clashx ingest`)", "rows to fit on: 0:10 or 0,4,9"
    )
    q.add_argument("--out", required=True, help="PARAMS.json to write")
    q.add_argument(
        "--starts", type=number_arg(int, 1, 4096), default=16, help="starting points optimised together (default 16)"
    )
    q.add_argument(
        "--family",
        choices=FAMILY_CHOICES,
        default="mujoco",
        help="impulse family: mujoco (MuJoCo's knobs), compliant (the strike's Hunt-Crossley law), rigid (a scene's "
        "rigid impulse law, with --scene), or both, whose predictions `evaluate` and `predict` then average (on "
        "the strike lab the most accurate; on your scene, measured in docs/own_scene.md)",
    )
    q.add_argument("--seed", type=seed_arg, default=0)
    q.add_argument(
        "--equal-label-weights",
        action="store_true",
        help="weigh the strikes' labels equally, not each by its track's σ (the default on a recording and on "
        "the event file `clashx ingest --source strike-lab` made of one)",
    )
    _outside_flag(q)
    _scene_flag(q)
    q.set_defaults(func=_cmd_identify)

    f = sub.add_parser(
        "finetune",
        help="fine-tune the surrogate on real strikes (recording or events), early-stopped by cross-validation",
    )
    _real_data_args(f, "strike recording (tracks) or event file", "rows to fine-tune on")
    f.add_argument("--params", required=True, help="PARAMS.json from `clashx identify`")
    f.add_argument("--out", required=True, help="run folder of the fine-tuned surrogate")
    f.add_argument("--lr", type=LEARNING_RATE, default=3e-4)
    f.add_argument("--max-steps", type=number_arg(int, 0), default=200)
    f.add_argument("--folds", type=number_arg(int, 2, what=" (and at most the number of events)"), default=5)
    f.add_argument(
        "--pull", type=number_arg(float, 0.0), default=1e-3, help="weight of the L2 pull toward the pretrained weights"
    )
    f.add_argument(
        "--scope",
        choices=("head", "affine", "all"),
        default="head",
        help="which weights move (default head: the last layer and the output scales)",
    )
    f.add_argument("--seed", type=seed_arg, default=0)
    _scene_flag(f)
    f.set_defaults(func=_cmd_finetune)

    e = sub.add_parser("evaluate", help="α-accuracy of a surrogate on events, with the α-curve as a PNG")
    e.add_argument("--model", help="run folder of a surrogate (default: the one shipped for the data's block shape)")
    e.add_argument("--real", required=True)
    e.add_argument("--params", help="PARAMS.json (default: the parameters a fine-tuned run was trained with)")
    e.add_argument("--select", help="rows to score (default: all)")
    e.add_argument(
        "--alpha",
        type=number_arg(float, 0.0, 1.0, low_open=True, what=" (a relative error: 0.1 is 10 %)"),
        default=0.1,
        help="score the fraction of events predicted within α relative error, 0 < α <= 1 (default 0.1)",
    )
    e.add_argument("--json", help="write the result here (and the α-curve beside it as .png)")
    e.add_argument("--plot", help="α-curve PNG path")
    _outside_flag(e)
    _scene_flag(e)
    e.set_defaults(func=_cmd_evaluate)

    h = sub.add_parser(
        "rollout", help="your scene's hybrid against full-contact MuJoCo C, from launches the model never saw"
    )
    h.add_argument("--scene", required=True, help=SCENE_HELP)
    h.add_argument("--model", required=True, help="run folder of `clashx pretrain --scene` (or finetune)")
    h.add_argument("--params", help="PARAMS.json (default: parameters drawn from the prior, one per world)")
    h.add_argument("--n", type=POSITIVE, default=64, help="worlds (default 64)")
    h.add_argument(
        "--seed", type=seed_arg, default=1, help="seed of the launches (default 1; generation's default is 0)"
    )
    h.add_argument(
        "--seconds", type=POSITIVE_FLOAT, default=2.0, help="at most this long; stops once every world rests"
    )
    _engine_flag(h, "cpu-hybrid", "mjx-hybrid", "cpu-hybrid: the rule between MuJoCo C steps; mjx-hybrid: one jit")
    h.add_argument(
        "--family",
        choices=("mujoco", "rigid", "both"),
        default="mujoco",
        help="the handler: mujoco (the surrogate, default: the more accurate on the free box, docs/own_scene.md), "
        "rigid (the rigid impulse law) or both averaged; rigid and both need --params from `clashx identify "
        "--scene S --family both`",
    )
    h.add_argument("--json", help="write the scores and timings here")
    h.set_defaults(func=_cmd_pair)

    r = sub.add_parser("predict", help="per-event predictions of a surrogate (row order of EVENTS)")
    r.add_argument("--model", help="run folder of a surrogate (default: the one shipped for the data's block shape)")
    r.add_argument("--params", help="PARAMS.json (default: a fine-tuned run's own)")
    r.add_argument("--events", required=True)
    r.add_argument(
        "--out",
        required=True,
        help="PRED.npz: post_velocity (n, 3), strike, params (strike); post_state (n, d), params (--scene)",
    )
    _outside_flag(r)
    _scene_flag(r)
    r.set_defaults(func=_cmd_predict)

    o = sub.add_parser(
        "optimize", help="the strike that brings the block to a target pose (CMA-ES over hybrid rollouts)"
    )
    o.add_argument("--model", help="run folder of a (fine-tuned) surrogate (default: the one shipped for --shape)")
    o.add_argument("--params", help="PARAMS.json (default: a fine-tuned run's own parameters)")
    o.add_argument("--shape", required=True, choices=geo.SHAPES)
    o.add_argument("--start", default="0,0,0", help="block start pose x,y,yaw (m, m, rad), e.g. -0.1,0,0")
    goal = o.add_mutually_exclusive_group(required=True)
    goal.add_argument("--target", help="target pose x,y,yaw (m, m, rad), e.g. 0.2,-0.05,0.3")
    goal.add_argument(
        "--targets",
        help="TARGETS.csv: one search per row, all at once (one batch per generation); header "
        "target_x,target_y,target_yaw and optionally start_x,start_y,start_yaw (else --start)",
    )
    o.add_argument("--population", type=number_arg(int, 2), default=16)
    o.add_argument("--generations", type=POSITIVE, default=20)
    _engine_flag(
        o,
        "cpu-hybrid",
        "mjx-hybrid",
        "cpu-hybrid: the rule on MuJoCo C (fastest on a CPU); mjx-hybrid: on MJX, one jit",
    )
    o.add_argument("--seed", type=seed_arg, default=0)
    o.add_argument("--json", help="write the strike, predicted rest pose and search history here")
    o.set_defaults(func=_cmd_optimize)

    n = sub.add_parser("plan", help="the next strikes to run in the lab, chosen by what they will teach (CSV)")
    n.add_argument("--shape", required=True, choices=geo.SHAPES)
    n.add_argument("--model", help="run folder of a surrogate (default: the one shipped for --shape)")
    n.add_argument("--params", help="PARAMS.json of `clashx identify` (values and std; default: the prior)")
    n.add_argument("--done", help="recording or event file of strikes already run and not in PARAMS.json's std")
    n.add_argument(
        "--ran",
        help="recording or event file of the strikes PARAMS.json was identified from (robust: the design covers "
        "around them, and their labels give the model's error)",
    )
    n.add_argument("--k", type=POSITIVE, default=5, help="strikes to propose (default 5)")
    n.add_argument(
        "--criterion",
        choices=CRITERIA,
        default="infogap",
        help="infogap (default): cover the strikes to be predicted while the model's error on held-out strikes "
        "(--done's labels) is unknown or beyond the label noise, else robust; coverage: the design closest to "
        "the strikes to be predicted; robust: predictive plus coverage weighted by the model's error; d-optimal: "
        "largest expected shrinkage of the parameters' posterior; predictive: of the predictions' variance over "
        "random strikes; disagreement: largest spread of the prediction over posterior draws; random: the baseline",
    )
    n.add_argument(
        "--need",
        help="CSV (header theta,theta1,v_pre) of the strikes the simulator will be used on, e.g. a task's: "
        "infogap, coverage and robust cover them (default: strikes uniform over the lab's ranges)",
    )
    n.add_argument("--candidates", type=POSITIVE, default=2048, help="candidate strikes over the lab's ranges")
    n.add_argument("--seed", type=seed_arg, default=0)
    n.add_argument("--out", required=True, help="NEXT.csv (header theta,theta1,v_pre) for strike_lab.py --strikes")
    n.add_argument("--json", help="write the plan (strikes, scores, σ before and after) here")
    n.set_defaults(func=_cmd_plan)

    t = sub.add_parser(
        "train-policy", help="a sequential-pushing policy (ROUTES.md) trained with brax PPO in MuJoCo or clashx"
    )
    t.add_argument("--route", type=int, required=True, choices=(1, 2, 3))
    t.add_argument("--sim", required=True, choices=("mujoco", "clashx"), help="the simulator trained in")
    t.add_argument("--model", help="--sim clashx: run folder of the semi-cylinder surrogate (default: the shipped one)")
    t.add_argument("--params", required=True, help="PARAMS.json (`clashx identify`): the values, and 'std' for --draws")
    t.add_argument("--out", required=True, help="POLICY folder: policy.npz, policy.json, curve.png, table.npz")
    t.add_argument("--timesteps", type=POSITIVE, default=3_000_000, help="strikes simulated in training (default 3e6)")
    t.add_argument(
        "--draws",
        type=POSITIVE,
        default=8,
        help="parameter draws for domain randomisation, the identified values ± their σ (default 8; 1: none)",
    )
    t.add_argument("--seed", type=seed_arg, default=0)
    t.set_defaults(func=_cmd_train_policy)

    d = sub.add_parser("demo", help="the main job end to end on shipped data, at a size for a laptop (~3 min)")
    d.add_argument("--out", default="clashx-demo", help="folder for the PNGs and summary.json (default clashx-demo)")
    d.add_argument("--shapes", default=",".join(geo.SHAPES), help="block shapes, comma-separated (default: all three)")
    d.add_argument("--seed", type=seed_arg, default=0)
    d.add_argument("--no-cube", action="store_true", help="skip the real cube tosses")
    d.set_defaults(func=_cmd_demo)
    return ap


def _join_pose_values(argv: list[str]) -> list[str]:
    """`--target -0.1,0,0` as `--target=-0.1,0,0`: argparse would take a value starting with "-" for a flag."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in POSE_FLAGS and i + 1 < len(argv) and re.match(r"-[0-9.]", argv[i + 1]):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `clashx` console script."""
    parser = build_parser()
    try:
        a = _parse(parser, _join_pose_values(sys.argv[1:] if argv is None else list(argv)))
    except SystemExit as e:  # argparse has printed the usage and the flag's error (or --help)
        return int(e.code or 0) if isinstance(e.code, int) or e.code is None else 2
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    use_compilation_cache()
    return run_guarded(a, command_line(argv))


def use_compilation_cache(env=os.environ) -> str | None:
    """Keep JAX's compiled programs between runs (JAX's persistent compilation cache); returns its folder.

    The folder is `$JAX_COMPILATION_CACHE_DIR` where set (JAX reads it itself), else
    `$XDG_CACHE_HOME/clashx/jax` (`~/.cache/clashx/jax`).  `CLASHX_COMPILATION_CACHE=0` turns it off
    (returns None).  A rerun then skips XLA's compiles, not JAX's tracing (measured on the cube pipeline's
    clashx fit with the same cache: 68 s cold, 44 s on a rerun, 2 CPU cores).
    """
    if env.get("CLASHX_COMPILATION_CACHE", "1") == "0":
        return None
    if env.get("JAX_COMPILATION_CACHE_DIR"):
        return env["JAX_COMPILATION_CACHE_DIR"]
    import jax

    root = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(root, "clashx", "jax")
    jax.config.update("jax_compilation_cache_dir", folder)
    return folder


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The parsed flags, with the checks that span flags; a bad one exits 2 through `parser.error`."""
    a = parser.parse_args(argv)
    given = [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]
    twice = sorted({f for f in given if given.count(f) > 1})
    if twice:
        parser.error(f"argument {twice[0]}: given more than once; pass it once")
    if a.command == "generate" and a.scene == "strike" and not a.shape:
        parser.error("generate --scene strike needs --shape")
    if getattr(a, "select", None) is not None and not a.select.strip():
        parser.error("argument --select: empty; give rows like 0:10 or 0,3,7, or leave the flag out for all")
    if getattr(a, "json", None) and not a.json.endswith(".json"):
        parser.error(f"argument --json: {a.json!r} does not end in .json; use {a.json}.json")
    return a


if __name__ == "__main__":
    sys.exit(main())

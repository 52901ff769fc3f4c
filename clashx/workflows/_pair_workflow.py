"""The command line on a user's scene (`--scene MODULE:CLASS`): pretrain, identify, fine-tune, evaluate, rollout.

`clashx generate --scene MODULE:CLASS` needs nothing here (generation runs any
scene).  Each `run_pair_*` takes paths and plain values, reads and checks the
inputs, calls the functional core (`clashx.learn._pair_learn`,
`clashx.hybrid`) and writes its outputs atomically; the `cmd_*`
functions print.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..core import ParameterError, check_output, in_blocks, model_world_bytes, resolve_engine, write_json
from ..events import atomic_savez, load_events
from ..hybrid import SEGMENT, Rollouts, full_rollouts_c, rollouts, rollouts_c
from ..learn import (
    FinetuneConfig,
    PairFamilies,
    PairScores,
    finetune_pair,
    identify_pair,
    identify_pair_law,
    load_pair_events,
    pair_features,
    pair_scores,
    predict_pair,
    velocity_errors,
)
from ..scenes import LAW_NAMES, PairScene, law_space, load_scene, pair_law, roll, separations
from ..surrogate import PairSurrogate, load_pair_surrogate, predict, save_pair_surrogate
from ._strike_workflow import OUTSIDE, count_outside_ranges, parse_select, read_params, warn_outside


def _scene_and_model(spec: str, model_dir: str | None) -> tuple[PairScene, PairSurrogate]:
    scene = load_scene(spec)
    if not model_dir:
        raise ValueError(f"--scene {spec}: pass --model RUN (a folder from `clashx pretrain --scene {spec}`)")
    return scene, load_pair_surrogate(model_dir, scene)


def _events(path: str, scene: PairScene, select: str | None) -> dict:
    """The touched events of `path`, or those `--select` names (file rows; a row without a touch is an error)."""
    return load_pair_events(path, scene, select=(lambda n: parse_select(select, n, path)) if select else None)


def _feature_ranges(model_dir: str | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(low, high) of the features a pair model was trained on (`clashx pretrain --scene` records them), or None."""
    path = os.path.join(str(model_dir), "model.json")
    if not model_dir or not os.path.exists(path):
        return None
    with open(path) as f:
        ranges = json.load(f).get("input_ranges")
    if not isinstance(ranges, dict) or "low" not in ranges:
        return None
    return np.asarray(ranges["low"], np.float64), np.asarray(ranges["high"], np.float64)


def _count_outside(scene: PairScene, model_dir: str | None, data: dict, where: str, outside: float) -> int:
    """Impacts whose features lie outside the model's training ranges (`count_outside_ranges`); 0 if unrecorded."""
    ranges = _feature_ranges(model_dir)
    if ranges is None:
        return 0
    feats = pair_features(scene, data["pre"])
    if feats.shape[1] != len(ranges[0]):
        return 0
    names = tuple(f"feature {j} of the pre-impact state" for j in range(feats.shape[1]))
    return count_outside_ranges(feats, *ranges, names, ("",) * len(names), data["rows"], where, outside)


def _predictions(
    model: PairSurrogate, data: dict, params_path: str | None, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """(parameters, post-window states) of the impacts in `data`: at PARAMS.json's values, else the events' own
    (simulated events); a non-finite prediction is a ValueError naming its row (nothing is written)."""
    if params_path:
        params = np.broadcast_to(read_params(params_path, model), data["params"].shape)
    elif np.isfinite(data["params"]).all():
        params = data["params"]
    else:
        raise ValueError(f"{where}: the events' parameters are unknown (real impacts); pass --params PARAMS.json")
    pred = np.asarray(predict_pair(model, data["pre"], params), np.float64)
    if not np.isfinite(pred).all():
        row = int(data["rows"][np.argmax(~np.isfinite(pred).all(1))])
        raise ValueError(
            f"{where}: the model's prediction for row {row} is not finite; nothing was written. "
            "Check that row's pre_state and the parameters, or retrain the model"
        )
    return params, pred


def run_pair_identify(
    spec: str,
    model_dir: str | None,
    real: str,
    select: str | None,
    out: str,
    *,
    seed: int,
    n_starts: int,
    outside: float = OUTSIDE,
    family: str = "mujoco",
) -> dict:
    """`clashx identify --scene`: the parameters from observed impacts through the surrogate; writes PARAMS.json.

    With `family` "rigid" or "both" the scene's rigid law is identified on the same impacts too
    (`clashx.learn.identify_pair_law`), under PARAMS.json's "families"; the surrogate's parameters stay the
    scene's MuJoCo parameters, which the engine runs between impacts whichever family takes them."""
    scene, model = _scene_and_model(spec, model_dir)
    data = _events(real, scene, select)
    n_outside = _count_outside(scene, model_dir, data, real, outside)
    t0 = time.perf_counter()
    res = jax.block_until_ready(
        identify_pair(model, data["pre"], data["post"], key=jax.random.PRNGKey(seed), n_starts=n_starts)
    )
    names = scene.space.names
    result = {
        "scene": scene.name,
        "params": dict(zip(names, np.asarray(res.params, float).tolist(), strict=True)),
        "std": dict(zip(names, np.asarray(res.std, float).tolist(), strict=True)),
        "loss": float(res.loss),
        "events": os.path.abspath(real),
        "rows": data["rows"].tolist(),
        "model": os.path.abspath(str(model_dir)),
        "outside_training_ranges": n_outside,
        "time_s": time.perf_counter() - t0,
        "family": family,
    }
    if family in ("rigid", "both"):
        t1 = time.perf_counter()
        fit = identify_pair_law(pair_law(scene), data["pre"], data["post"], key=jax.random.PRNGKey(seed))
        result["families"] = {
            "rigid": {
                "params": dict(zip(LAW_NAMES, np.asarray(fit.params, float).tolist(), strict=True)),
                "loss": float(fit.loss),  # the mean relative error of the post-window velocities
                "time_s": time.perf_counter() - t1,
            }
        }
    if not (np.isfinite(res.params).all() and np.isfinite(res.loss)):
        raise ValueError(f"{real}: the fit did not converge (non-finite parameters or loss); nothing was written")
    write_json(out, result)
    return result


def run_pair_finetune(
    spec: str,
    model_dir: str | None,
    real: str,
    select: str | None,
    params_path: str,
    out: str,
    *,
    seed: int,
    config: FinetuneConfig,
) -> dict:
    """`clashx finetune --scene`: fine-tune on observed impacts at PARAMS, early-stopped by CV; writes the run folder."""
    scene, model = _scene_and_model(spec, model_dir)
    params = read_params(params_path, model)
    data = _events(real, scene, select)
    t0 = time.perf_counter()
    ft = finetune_pair(model, data["pre"], data["post"], params, key=jax.random.PRNGKey(seed), config=config)
    tuned, report = ft.model, ft.to_dict()
    report |= {"time_s": time.perf_counter() - t0, "events": os.path.abspath(real), "rows": data["rows"].tolist()}
    named = dict(zip(scene.space.names, params.tolist(), strict=True))
    ranges = _feature_ranges(model_dir)
    extra = {"finetune": report, "params": named, "base_model": os.path.abspath(str(model_dir))}
    if ranges is not None:
        extra["input_ranges"] = {"low": ranges[0].tolist(), "high": ranges[1].tolist()}
    save_pair_surrogate(out, tuned, extra=extra)
    return report


def run_pair_evaluate(
    spec: str,
    model_dir: str | None,
    real: str,
    params_path: str | None,
    select: str | None,
    alpha: float,
    outside: float = OUTSIDE,
) -> dict:
    """`clashx evaluate --scene`: α-accuracy of the post-window velocities; with the events' own parameters by default."""
    scene, model = _scene_and_model(spec, model_dir)
    data = _events(real, scene, select)
    n_outside = _count_outside(scene, model_dir, data, real, outside)
    params, _ = _predictions(model, data, params_path, real)
    scores = pair_scores(model, data["pre"], data["post"], params, alpha=alpha)
    head = {"scene": scene.name, "alpha": alpha, "alpha_accuracy": scores.accuracy}
    out = head | scores.to_dict() | {"outside_training_ranges": n_outside}
    law_params = read_law_params(params_path) if params_path else None
    if law_params is not None:  # every family the file holds, side by side
        law = pair_law(scene)
        both = PairFamilies(model, law)
        p_both = np.concatenate([np.broadcast_to(params, (len(data["pre"]), scene.space.size)),
                                 np.tile(law_params, (len(data["pre"]), 1))], 1)  # fmt: skip
        rows = {"mujoco": scores}
        for name, handler, p in (("rigid", law, np.tile(law_params, (len(data["pre"]), 1))), ("both", both, p_both)):
            err = velocity_errors(scene, np.asarray(predict(handler, data["pre"], p), np.float64), data["post"])
            rows[name] = PairScores(alpha, float(np.mean(err <= alpha)), float(np.median(err)),
                                    scores.median_rel_err_no_impact, int(len(err)))  # fmt: skip
        out["families"] = {name: r.to_dict() for name, r in rows.items()}
    return out


def run_pair_predict(
    spec: str, model_dir: str | None, params_path: str | None, events: str, out: str, *, outside: float = OUTSIDE
) -> dict:
    """`clashx predict --scene`: the post-window pair state of every touched event (NaN rows: no touch); writes PRED.npz.

    Without `params_path` the events' own parameters are used (simulated events).
    """
    scene, model = _scene_and_model(spec, model_dir)
    data = _events(events, scene, None)
    n_outside = _count_outside(scene, model_dir, data, events, outside)
    params, pred = _predictions(model, data, params_path, events)
    n = len(load_events(events)["touched"])
    post = np.full((n, pred.shape[1]), np.nan)
    post[data["rows"]] = pred
    full = np.full((n, params.shape[1]), np.nan)
    full[data["rows"]] = params
    atomic_savez(out, {"post_state": post, "params": full, "names": np.array(scene.space.names)})
    return {"n": len(data["rows"]), "outside_training_ranges": n_outside}


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    """`clashx rollout --scene`: hybrid rollouts against full-contact MuJoCo C on launches the model never saw."""

    n: int = 64
    seed: int = 1
    seconds: float = 2.0
    engine: str = "auto"
    family: str = "mujoco"

    def __post_init__(self):
        if self.n < 1 or not self.seconds > 0:
            raise ValueError(f"--n {self.n} / --seconds {self.seconds}: need at least one world and a positive time")
        if self.family not in ("mujoco", "rigid", "both"):
            raise ParameterError("family", self.family, "a scene's families are mujoco, rigid and both")


CAUSE_SHARE = 0.1  # touches left to the engine above this share: the rollout names the model as the cause
CAUSE_ALPHA = 0.5  # a model below this validation accuracy at α = 0.1 is named as the cause


def run_pair_rollout(spec: str, model_dir: str | None, params_path: str | None, config: RolloutConfig) -> dict:
    """Hybrid rollouts (surrogate impacts, engine elsewhere) and the full-contact C reference from the same launches.

    The launches and, without `params_path`, the parameters are drawn from the scene's prior
    with `config.seed`; both rollouts run until every world is at rest or `config.seconds`.
    Scores each body of the pair by its final position error relative to its travel.
    """
    scene, model = _scene_and_model(spec, model_dir)
    if config.seconds < scene.dt:
        raise ValueError(f"--seconds {config.seconds:g}: shorter than one step of the scene ({scene.dt:g} s)")
    engine = resolve_engine(config.engine, cpu="cpu-hybrid", accelerator="mjx-hybrid")
    launch, params = scene.sample_inputs(config.n, key=jax.random.PRNGKey(config.seed))
    if params_path:
        params = np.broadcast_to(read_params(params_path, model), params.shape)
    handler, handler_params = _family_handler(scene, model, params, params_path, config.family)
    nq = scene.c_model().nq
    q0, v0 = launch[:, :nq], launch[:, nq:]
    n_steps = round(config.seconds / scene.dt)

    def hybrid(steps: int, until_rest: bool = True):
        if engine == "cpu-hybrid":
            ended = rollouts_c(
                scene, handler, handler_params, q0, v0, steps, until_rest=until_rest, engine_params=params
            )
            return ended.qpos, _counts(ended)
        return in_blocks(  # the batching policy's blocks (one vmap on an accelerator)
            lambda hp, p, q, v: _hybrid_block(scene, handler, hp, p, q, v, steps, until_rest),
            handler_params, params, q0, v0, world=model_world_bytes(scene.c_model()),
        )  # fmt: skip

    if engine not in ("cpu-hybrid", "mjx-hybrid"):
        raise ValueError(f"--engine {engine!r}: expected auto, cpu-hybrid or mjx-hybrid")
    t0 = time.perf_counter()  # compiling: one segment of the C fallback, or a whole first MJX run
    hybrid(SEGMENT if engine == "cpu-hybrid" else n_steps)
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    qh, info = hybrid(n_steps)
    t_hybrid = time.perf_counter() - t0
    impacts, steps = info["impacts"], int(info["steps"].max())
    diverged = ~np.isfinite(qh).all(1)
    if diverged.all():
        raise ValueError(
            f"--model {model_dir}: every hybrid world ended with a non-finite state; check the model "
            "(`clashx evaluate --scene`) and the parameters"
        )
    t0 = time.perf_counter()
    qf, _ = full_rollouts_c(scene, params, q0, v0, n_steps)
    t_full = time.perf_counter() - t0
    bounces = full_contact_bounces(scene, params, q0, v0, n_steps)
    m = scene.c_model()
    start, end_h, end_f = (_positions(m, q) for q in (q0, qh, qf))
    bodies = {}
    ok = ~diverged  # a diverged world is counted apart, never scored or called at rest
    for b in scene.joints.bodies:
        travel = np.linalg.norm(end_f[ok, b] - start[ok, b], axis=1)
        err = np.linalg.norm(end_h[ok, b] - end_f[ok, b], axis=1)
        rel = err / np.maximum(travel, 1e-3)
        bodies[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)] = {
            "median_err_m": float(np.median(err)),
            "median_rel_err": float(np.median(rel)),
            "p90_rel_err": float(np.percentile(rel, 90)),
            "median_travel_m": float(np.median(travel)),
            "lowest_z_hybrid_m": float(end_h[ok, b, 2].min()),
            "lowest_z_full_m": float(end_f[:, b, 2].min()),
        }
    return {
        "scene": scene.name,
        "engine": engine,
        "family": config.family,
        "n": config.n,
        "seed": config.seed,
        "impacts": np.bincount(np.asarray(impacts, int)).tolist(),
        "steps_run": steps,
        "steps_max": n_steps,
        "time_hybrid_s": t_hybrid,
        "time_compile_s": t_compile,
        "clamped": int(np.sum(info["clamped"])),  # impacts whose prediction the energy guard scaled down
        "nonfinite": int(np.sum(info["nonfinite"])),  # touches left to the engine: a non-finite prediction
        # touches left to the engine's contact (`clashx.hybrid.RuleState`): outside the training inputs, an
        # implausible prediction (overlapping or still closing), a re-fired bounce
        "fallback": {k: int(np.sum(info[k])) for k in ("outside", "implausible", "refired", "nonfinite")},
        "full_contact_bounces": np.bincount(bounces).tolist(),  # the gate's impacts in full contact, per world
        "worlds_over_bounces": int(np.sum(np.asarray(impacts) > bounces + 1)),  # handler impacts > bounces + 1
        "model_validation_alpha": _validation_alpha(model_dir),
        "at_rest": bool(steps < n_steps and not diverged.any()),
        "diverged_worlds": int(diverged.sum()),  # non-finite final states: left out of the scores
        "time_full_c_s": t_full,
        "final_position": bodies,  # of each moving pair body's origin, relative to its full-contact travel
    }


@eqx.filter_jit
def _hybrid_block(scene: PairScene, handler, handler_params, params, qpos, qvel, steps: int, until_rest: bool):
    """One block of `run_pair_rollout`'s MJX hybrid rollouts: final qpos and the rule's counts per world."""
    ended = rollouts(scene, handler, handler_params, qpos, qvel, steps, until_rest=until_rest, engine_params=params)
    return ended.qpos, _counts(ended)


def read_law_params(path: str) -> np.ndarray | None:
    """The rigid law's (e_n, e_t, μ) from a PARAMS.json of `clashx identify --scene S --family rigid|both`, or None."""
    with open(path, encoding="utf-8-sig") as f:
        raw = json.load(f)
    law = raw.get("families", {}).get("rigid") if isinstance(raw, dict) else None
    if not isinstance(law, dict):
        return None
    values = law.get("params", {})
    try:
        out = np.array([float(values[n]) for n in LAW_NAMES])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{path}: 'families.rigid.params' needs {', '.join(LAW_NAMES)}; re-run `clashx identify "
                         "--scene S --family both`") from None  # fmt: skip
    return law_space().check(out[None], what=f"{path}: the rigid law's parameters")[0]


def _family_handler(scene: PairScene, model: PairSurrogate, params, params_path: str | None, family: str):
    """The handler of `family` and its parameters per world: the surrogate at `params`, the rigid law at
    PARAMS.json's law parameters, or their average (`PairFamilies`, the two parameter vectors joined)."""
    if family == "mujoco":
        return model, params
    law_params = read_law_params(params_path) if params_path else None
    if law_params is None:
        raise ValueError(
            f"--family {family} needs --params PARAMS.json from `clashx identify --scene S --family both` (the rigid "
            "law's identified parameters)"
        )
    laws = np.tile(law_params, (len(params), 1))
    if family == "rigid":
        return pair_law(scene), laws
    return PairFamilies(model, pair_law(scene)), np.concatenate([params, laws], 1)


def _counts(ended: Rollouts) -> dict:
    """The rule's counts per world from a batch of rollouts."""
    r = ended.rule
    names = ("impacts", "clamped", "nonfinite", "outside", "implausible", "refired")
    return {k: getattr(r, k) for k in names} | {"steps": ended.steps}


def full_contact_bounces(scene: PairScene, params, qpos, qvel, n_steps: int) -> np.ndarray:
    """How many of the scene's impacts (`clashx.scenes.touches`, the hybrid's own test) each world has in
    full-contact MuJoCo C from the same launches: the bounces a handler should take, per world (n,)."""
    q, _ = roll(scene, params, qpos, qvel, n_steps, engine="c")
    seps = np.asarray(separations(scene, jnp.asarray(q)))
    sep0 = np.asarray(jax.vmap(scene.separation)(jnp.asarray(qpos)))
    gate, dt = scene.gate, scene.dt
    n_apart = max(1, int(round(gate.min_apart / dt)))
    count = np.zeros(len(q), int)
    apart = np.where(sep0 > 0, n_apart, 0)
    before = sep0
    for k in range(seps.shape[1]):
        sep = seps[:, k]
        hit = (sep <= 0) & (apart >= n_apart) & (before - sep >= gate.min_closing * dt)
        if gate.max_impacts is not None:
            hit &= count < gate.max_impacts
        count += hit
        apart = np.where(hit | (sep <= 0), 0, apart + 1)
        before = sep
    return count


def _validation_alpha(model_dir: str | None) -> float | None:
    """The model's share of held-out simulated impacts within α = 0.1 (its folder's record), if known."""
    try:
        with open(os.path.join(str(model_dir), "model.json")) as f:
            return float(json.load(f)["validation"]["alpha_0.1"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


def rollout_diagnosis(r: dict) -> list[str]:
    """Lines for the user when the rollouts say the model, not the rule, is at fault: impacts left to the engine,
    or worlds firing more impacts through the handler than full contact has bounces."""
    fb = r["fallback"]
    touches = int(np.dot(np.arange(len(r["impacts"])), r["impacts"])) + sum(fb.values())
    lines = []
    if sum(fb.values()):
        lines.append(
            f"{sum(fb.values())} of {touches} touches were left to MuJoCo's contact: {fb['outside']} outside the "
            f"model's training inputs, {fb['implausible']} predicted deeper or closing faster than any training window ended, {fb['refired']} "
            f"re-fired bounces, {fb['nonfinite']} not finite"
        )
    worse = r["worlds_over_bounces"]
    if worse:
        lines.append(f"{worse} of {r['n']} worlds fired more impacts through the handler than full contact has "
                     "bounces, plus one")  # fmt: skip
    share = sum(fb.values()) / max(touches, 1)
    alpha = r["model_validation_alpha"]
    if worse or share >= CAUSE_SHARE or (alpha is not None and alpha < CAUSE_ALPHA):
        known = f"its validation accuracy at α = 0.1 is {alpha:.2f}; " if alpha is not None else ""
        lines.append(
            f"the model, not the rule, is the likely cause: {known}train it on more impacts (`clashx generate "
            "--n`) or a wider network (`clashx pretrain --width`), and check it with `clashx evaluate --scene`"
        )
    return lines


def _positions(m: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    """World positions (n, bodies, 3) of every body at each qpos row (MuJoCo's kinematics)."""
    d = mujoco.MjData(m)
    out = np.empty((len(qpos), m.nbody, 3))
    for i, q in enumerate(qpos):
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        out[i] = d.xpos
    return out


# --- printing -------------------------------------------------------------------------------------


def cmd_pair(a: argparse.Namespace) -> int:
    """The `--scene MODULE:CLASS` branch of identify, finetune, evaluate, predict and rollout."""
    if a.command == "identify":
        check_output(a.out, "--out")
        r = run_pair_identify(
            a.scene, a.model, a.real, a.select, a.out, seed=a.seed, n_starts=a.starts, outside=a.outside,
            family=a.family,
        )  # fmt: skip
        warn_outside(r["outside_training_ranges"], len(r["rows"]), "impacts")
        for name in r["params"]:
            print(f"{name:>10} = {r['params'][name]:.4f} ± {r['std'][name]:.4f}")
        print(f"fit loss {r['loss']:.5f} on {len(r['rows'])} impacts, {r['time_s']:.1f} s -> {a.out}")
        if "families" in r:
            law = r["families"]["rigid"]
            print("rigid law: " + ", ".join(f"{n} = {v:.4f}" for n, v in law["params"].items())
                  + f"; mean relative error {law['loss']:.4f}, {law['time_s']:.1f} s")  # fmt: skip
    elif a.command == "finetune":
        check_output(a.out, "--out", folder=True, run=True)
        config = FinetuneConfig(lr=a.lr, max_steps=a.max_steps, folds=a.folds, pull=a.pull, scope=a.scope)
        r = run_pair_finetune(a.scene, a.model, a.real, a.select, a.params, a.out, seed=a.seed, config=config)
        print(f"{r['steps']} steps; {r['reason']}; {r['time_s']:.1f} s -> {a.out}")
    elif a.command == "predict":
        check_output(a.out, "--out", suffix=".npz")
        r = run_pair_predict(a.scene, a.model, a.params, a.events, a.out, outside=a.outside)
        warn_outside(r["outside_training_ranges"], r["n"], "impacts")
        print(f"{r['n']} predictions (touched events) -> {a.out}")
    elif a.command == "evaluate":
        if a.json:
            check_output(a.json, "--json")
        r = run_pair_evaluate(a.scene, a.model, a.real, a.params, a.select, a.alpha, a.outside)
        warn_outside(r["outside_training_ranges"], r["n"], "impacts")
        print(
            f"α={a.alpha}: accuracy {r['alpha_accuracy']:.3f} on {r['n']} impacts (median relative error {r['median_rel_err']:.3f})"
        )
        for name, row in r.get("families", {}).items():
            print(
                f"  {name:>7}: accuracy {row[f'alpha_{a.alpha}']:.3f}, median relative error {row['median_rel_err']:.3f}"
            )
        if a.json:
            write_json(a.json, r)
    else:
        if a.json:
            check_output(a.json, "--json")
        r = run_pair_rollout(
            a.scene,
            a.model,
            a.params,
            RolloutConfig(n=a.n, seed=a.seed, seconds=a.seconds, engine=a.engine, family=a.family),
        )
        rest = "every world at rest" if r["at_rest"] else "not every world at rest"
        lines = [f"{r['n']} worlds, impacts per world {r['impacts']} (index = count); "
                 f"{r['steps_run']} of {r['steps_max']} steps ({rest}); guard-clamped {r['clamped']}, "
                 f"non-finite {r['nonfinite']}"]  # fmt: skip
        if r["diverged_worlds"]:
            lines.append(f"warning: {r['diverged_worlds']} worlds ended non-finite; they are left out of the scores")
        lines += rollout_diagnosis(r)
        lines += [
            f"{body}: final position vs full-contact C: median {1000 * s['median_err_m']:.1f} mm, "
            f"{100 * s['median_rel_err']:.1f} % of its travel (p90 {100 * s['p90_rel_err']:.1f} %); lowest end "
            f"height {1000 * s['lowest_z_hybrid_m']:.1f} mm (full contact {1000 * s['lowest_z_full_m']:.1f} mm)"
            for body, s in r["final_position"].items()
        ]
        lines.append(
            f"hybrid ({r['engine']}) {r['time_hybrid_s']:.2f} s (compiling {r['time_compile_s']:.1f} s apart), "
            f"full-contact C {r['time_full_c_s']:.2f} s: {r['time_hybrid_s'] / r['time_full_c_s']:.1f}x"
        )
        print("\n".join(lines))
        if a.json:
            write_json(a.json, r)
    return 0

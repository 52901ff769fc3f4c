"""Your own scene's families side by side: the surrogate, the rigid law, their average and the perfect handler.

    python bench/own_scene_families.py --scene examples/free_box.py:FreeBox --lab 0.5,0.005,0.8 \
        [--n-train 60000] [--width 512] [--depth 4] [--epochs 40] [--launches 128] [--seed 0] [--json OUT]

The README's "Your own scene" walk-through, with every handler the rule can run:

1. distil: `--n-train` impacts over the scene's prior (full-contact MuJoCo C), and a surrogate trained on them;
2. a stand-in lab: 200 impacts at the `--lab` parameters (MuJoCo C, its own seed) that nothing is tuned on; the
   first 10 are the fit impacts, the other 190 held out;
3. identify each family on the 10: the surrogate's parameters (`clashx.identify_pair`, the scene's MuJoCo
   parameters) and the rigid law's (`clashx.learn.identify_pair_law`: e_n, e_t, μ);
4. score on the 190: the share within α = 0.1 of the post-window velocities (`velocity_errors`) and the median
   error, for the surrogate, the law, their average (`clashx.learn.PairFamilies`), the perfect handler
   (`clashx.hybrid.engine_window`: MuJoCo itself over the window at the surrogate's parameters: what the
   identification alone costs) and "no impact"; and the surrogate at the lab's true parameters (what the
   surrogate alone costs, a diagnostic no method could run);
5. roll out `--launches` held-out launches to rest (2 s at most) through the hybrid rule's C fallback with each
   handler, and full-contact MuJoCo C at the surrogate's parameters from the same launches: each moving body's
   final position error relative to its travel (median, p90), impacts through the handler per world against
   full contact's bounces, touches left to the engine, and wall time against full contact's.

Writes the numbers (and the machine, date and command) to `--json` (default bench/results/cpu2/own_scene_SCENE.json).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import jax
import mujoco
import numpy as np

import clashx
from clashx.core import write_json
from clashx.hybrid import engine_window
from clashx.learn import PairFamilies, identify_pair_law, velocity_errors
from clashx.scenes import pair_law
from clashx.workflows import full_contact_bounces

ALPHA = 0.1
N_FIT, N_LAB = 10, 200
SECONDS = 2.0


def _scores(scene, post_pred: np.ndarray, post_true: np.ndarray) -> dict:
    err = velocity_errors(scene, post_pred, post_true)
    return {"alpha_0.1": float(np.mean(err <= ALPHA)), "median_rel_err": float(np.median(err))}


def _predict(handler, pre: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Post-window states of `pre` (n, d) under `handler` at one parameter vector."""
    f = jax.jit(jax.vmap(lambda x: handler(x, jax.numpy.asarray(params, jax.numpy.float32))))
    return np.asarray(f(jax.numpy.asarray(pre, jax.numpy.float32)), np.float64)


def _rollout(scene, handler, hp, ep, q0, v0, n_steps, q_full, bounces) -> dict:
    """The hybrid's C fallback with `handler` (its parameters `hp`, the engine's `ep`) against full contact."""
    n = len(q0)
    hp, ep = np.tile(hp, (n, 1)), np.tile(ep, (n, 1))
    t0 = time.perf_counter()
    clashx.rollouts_c(scene, handler, hp, q0, v0, 64, engine_params=ep)  # compile
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = clashx.rollouts_c(scene, handler, hp, q0, v0, n_steps, engine_params=ep)
    t_run = time.perf_counter() - t0
    m = scene.c_model()
    out = {"time_s": t_run, "compile_s": t_compile, "impacts_max": int(r.impacts.max()),
           "impacts_mean": float(r.impacts.mean()), "fallbacks": int(r.fallbacks.sum()),
           "worlds_over_bounces": int(np.sum(r.impacts > bounces + 1)), "bodies": {}}  # fmt: skip
    d = mujoco.MjData(m)

    def positions(q):
        pos = []
        for qq in q:
            d.qpos[:] = qq
            mujoco.mj_kinematics(m, d)
            pos.append(d.xpos.copy())
        return np.asarray(pos)

    start, end_h, end_f = positions(q0), positions(r.qpos), positions(q_full)
    for b in scene.joints.bodies:
        travel = np.linalg.norm(end_f[:, b] - start[:, b], axis=1)
        rel = np.linalg.norm(end_h[:, b] - end_f[:, b], axis=1) / np.maximum(travel, 1e-3)
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)
        out["bodies"][name] = {"median_rel_err": float(np.median(rel)), "p90_rel_err": float(np.percentile(rel, 90)),
                               "lowest_z_m": float(end_h[:, b, 2].min())}  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scene", default="examples/free_box.py:FreeBox")
    ap.add_argument("--lab", default="0.5,0.005,0.8", help="the stand-in lab's parameters, the scene's space order")
    ap.add_argument("--n-train", type=int, default=60000)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--launches", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--data", help="simulated impacts to train on (a `clashx generate --scene` file; default: generate them)"
    )
    ap.add_argument("--model", help="a trained surrogate folder to reuse (skips the distillation)")
    ap.add_argument("--json")
    a = ap.parse_args()
    scene = clashx.load_scene(a.scene)
    lab = np.array([float(x) for x in a.lab.split(",")])
    scene.space.check(lab[None], what="--lab")
    out: dict = {"machine": f"{platform.machine()} {os.cpu_count()} CPU cores ({jax.default_backend()})",
                 "date": datetime.date.today().isoformat(), "command": " ".join(["python", *sys.argv]),
                 "scene": scene.name, "lab": lab.tolist()}  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="clashx-families-"))
    t0 = time.perf_counter()
    if a.model:  # a surrogate trained before (by this script or `clashx pretrain --scene`): its folder says how
        model = clashx.load_surrogate(a.model, scene)
        with open(os.path.join(a.model, "model.json")) as f:
            meta = json.load(f)
        cfg = meta.get("pretrain", {})
        data = cfg.get("data")
        n_train = clashx.load_events(data).n if isinstance(data, str) and os.path.exists(data) else None
        out["distil"] = {"n_train": n_train, "width": cfg.get("width"),
                         "depth": cfg.get("depth"), "epochs": cfg.get("epochs"), "validation": meta["validation"],
                         "images": meta.get("images", 1), "reused": a.model}  # fmt: skip
    else:
        data = a.data or str(work / "train.npz")
        if not a.data:
            clashx.generate(clashx.GenerateConfig(scene=scene, n=a.n_train, seed=a.seed, out=data))
        n_train = clashx.load_events(data).n
        t_gen = time.perf_counter() - t0
        cfg = clashx.PretrainConfig(data=data, epochs=a.epochs, batch_size=a.batch_size,
                                    width=a.width, depth=a.depth, seed=a.seed)  # fmt: skip
        res = clashx.pretrain_pair(
            scene, cfg, progress=lambda e, n, m: print(f"epoch {e}/{n} {m['val_loss']:.4f}", flush=True)
        )
        res.save(work / "model")
        model = res.model
        out["distil"] = {"n_train": n_train, "generate_s": t_gen, "pretrain_s": time.perf_counter() - t0 - t_gen,
                         "validation": res.validation, "width": a.width, "depth": a.depth, "epochs": a.epochs,
                         "images": res.metadata["images"]}  # fmt: skip
        print("validation", res.validation, flush=True)
    lab_file = work / "lab.npz"
    clashx.generate(
        clashx.GenerateConfig(scene=scene, n=N_LAB * 2, seed=a.seed + 1000, params=tuple(lab), out=str(lab_file))
    )
    ev = clashx.load_events(lab_file)
    t = ev["touched"]
    pre, post = ev["pre_state"][t][:N_LAB], ev["post_state"][t][:N_LAB]
    fit_pre, fit_post, test_pre, test_post = pre[:N_FIT], post[:N_FIT], pre[N_FIT:], post[N_FIT:]
    key = jax.random.PRNGKey(a.seed)
    t0 = time.perf_counter()
    p_s = np.asarray(clashx.identify_pair(model, fit_pre, fit_post, key=key).params, np.float64)
    t_s = time.perf_counter() - t0
    law = pair_law(scene)
    t0 = time.perf_counter()
    lawfit = identify_pair_law(law, fit_pre, fit_post, key=key)
    t_l = time.perf_counter() - t0
    p_l = np.asarray(lawfit.params, np.float64)
    both = PairFamilies(model, law)
    p_b = np.concatenate([p_s, p_l])
    perfect = engine_window(scene)
    out["identified"] = {"surrogate": p_s.tolist(), "law": p_l.tolist(), "surrogate_s": t_s, "law_s": t_l,
                         "names": {"surrogate": list(scene.space.names), "law": ["e_n", "e_t", "mu"]}}  # fmt: skip
    print("identified", out["identified"], flush=True)
    handlers = {"surrogate": (model, p_s), "law": (law, p_l), "average": (both, p_b), "perfect": (perfect, p_s)}
    out["held_out"] = {name: _scores(scene, _predict(h, test_pre, p), test_post) for name, (h, p) in handlers.items()}
    out["held_out"]["surrogate_at_truth"] = _scores(scene, _predict(model, test_pre, lab), test_post)  # its own error
    out["held_out"]["no_impact"] = _scores(scene, test_pre, test_post)
    out["held_out"]["n"] = int(len(test_pre))
    print("held out", out["held_out"], flush=True)
    q0, v0 = scene.sample_launch(a.launches, jax.random.PRNGKey(a.seed + 2000))
    q0, v0 = np.asarray(q0, np.float64), np.asarray(v0, np.float64)
    n_steps = round(SECONDS / scene.dt)
    ep = np.tile(p_s, (a.launches, 1))
    t0 = time.perf_counter()
    q_full, _ = clashx.full_rollouts_c(scene, ep, q0, v0, n_steps)
    out["full_contact_s"] = time.perf_counter() - t0
    bounces = full_contact_bounces(scene, ep, q0, v0, n_steps)
    out["full_contact_bounces_mean"] = float(bounces.mean())
    out["rollout"] = {}
    for name, (h, p) in handlers.items():
        out["rollout"][name] = _rollout(scene, h, p, p_s, q0, v0, n_steps, q_full, bounces)
        print(name, out["rollout"][name], flush=True)
    path = a.json or str(Path(__file__).parent / "results" / "cpu2" / f"own_scene_{scene.name}.json")
    write_json(path, out)
    print("->", path)


if __name__ == "__main__":
    main()

"""The rigid impact family, distilled: a cube surrogate conditioned on the rigid law's parameters (issue 26, item 1).

    python bench/cube_rigid_distil.py [--work DIR] [--n 65536,196608] [--epochs 150] [--width 256] [--depth 4]
                                      [--seeds 0,1,2] [--fit 10] [--json OUT]

The shipped cube surrogate distils MuJoCo's soft contact (its parameters:
μ, time constant, damping ratio).  `bench/cube_rigid.py` found a physically
different family that fits the real first impacts better: a rigid cube under
an algebraic impulse law (`clashx.scenes.rigid_cube_window`: e_n, e_t, μ and
the cube's inertia).  This script distils that family the way the shipped
surrogate was made, and asks whether the distilled model keeps what the law
has, and whether CLASH's fine-tuning step then adds to it:

1. pre-impact states: `clashx generate --scene cube-toss --engine c` (MuJoCo's
   landings of thrown and bouncing cubes; one file per `--n`, seeds 5, 6, ...);
2. labels: each state's window under the rigid law, at parameters drawn
   uniformly from the law's box (`rigid_space`, `rigid_windows`): the
   post-window states are the law's, the pre-window states MuJoCo's;
3. `pretrain_cube` on them (`--epochs`, an MLP `--width` × `--depth`);
4. on the shipped tosses, each `--seeds` draw of `--fit` tosses as in
   `bench/cube_toss.py`, first impacts of the other tosses, median relative
   error of the speed vector (v, r ω) and α = 0.1:

   * `law, CMA-ES`                  the rigid law itself (`identify_rigid_impacts`);
   * `distilled, at the law's fit`  the distilled model at those parameters (its
                                    `distillation gap` against the law, on the real pre-states, beside);
   * `distilled, LM`                identified through the distilled model (`identify_cube`: multistart
                                    Levenberg-Marquardt on the window's normalised targets);
   * `distilled, CMA-ES`            the law's search and objective (mean relative speed error) through it;
   * `distilled, CMA-ES + fine-tuning`   CLASH's cross-validated fine-tuning (`finetune_cube`) at those
                                    parameters, and the steps it took;
   * `MuJoCo surrogate, LM`         the shipped surrogate, identified as clashx does.

Every step is resumable: `generate` and `pretrain_cube` pick up where they
stopped, and a labelled file is reused when its source and seed match.  On 2
CPU cores the defaults took 12 min 43 s (generation 4 min, labels 2.5, 150
epochs 5.5, the scoring 1.5; `bench/results/cpu2/cube_rigid_distil.*`).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

from clashx.baselines import identify_handler_impacts, identify_rigid_impacts, impact_posts, impact_speed_errors
from clashx.core import write_json
from clashx.events import (
    EventFileError,
    GenerateConfig,
    data_path,
    generate,
    ingest_cube_tosses,
    load_events,
    save_events,
)
from clashx.learn import cube_pretrain_config, finetune_cube, identify_cube, pretrain_cube
from clashx.scenes import rigid_cube_window, rigid_from_unit, rigid_space, rigid_windows
from clashx.surrogate import load_cube_surrogate, shipped_cube_surrogate

FAMILY = "rigid impulse law (clashx.scenes.rigid_cube_window) on MuJoCo's pre-impact states"


def _take(ev: dict, idx: np.ndarray) -> dict:
    return {
        k: (v[idx] if isinstance(v, np.ndarray) and v.ndim and len(v) == len(ev["toss_id"]) else v)
        for k, v in ev.items()
    }


def label(src: str, out: str, seed: int) -> str:
    """`src`'s pre-impact states labelled by the rigid law at parameters drawn from its box (seed `seed`), written
    to `out` (reused when it holds these labels of this source)."""
    space = rigid_space()
    ev = load_events(src, scene="cube-toss")
    labels = {"source": os.path.abspath(src), "source_config": ev["meta"].get("config"), "seed": seed, "family": FAMILY}
    try:
        if load_events(out, scene="cube-toss")["meta"].get("labels") == labels:
            return out
    except EventFileError:  # absent, damaged or another file: label again
        pass
    n = len(ev["pre_state"])
    params = rigid_from_unit(np.asarray(jax.random.uniform(jax.random.PRNGKey(seed), (n, len(space.names)))))
    t0 = time.perf_counter()
    ev |= {"post_state": rigid_windows(ev["pre_state"], params), "params": params}
    ev["meta"] |= {"param_space": space.describe(), "labels": labels}
    save_events(out, ev)
    print(f"labelled {n} impacts by the rigid law -> {out} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="rigid_distil", help="folder for the generated, labelled and trained files")
    ap.add_argument("--n", default="65536,196608", help="generated pre-impact states per file, comma-separated")
    ap.add_argument("--epochs", type=int, default=150)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--fit", type=int, default=10, help="tosses drawn for fitting")
    ap.add_argument("--json")
    a = ap.parse_args()
    t0 = time.perf_counter()
    os.makedirs(a.work, exist_ok=True)
    labelled = []
    for i, n in enumerate(int(v) for v in a.n.split(",")):
        src = os.path.join(a.work, f"mujoco_{i}.npz")
        generate(GenerateConfig(scene="cube-toss", engine="c", n=n, seed=5 + i, out=src))
        labelled.append(label(src, os.path.join(a.work, f"rigid_{i}.npz"), seed=11 + i))
    run = os.path.join(a.work, "surrogate")
    config = cube_pretrain_config(tuple(labelled), run, epochs=a.epochs, width=a.width, depth=a.depth)

    def progress(epoch: int, total: int, m: dict) -> None:
        if epoch % 10 == 0 or epoch == total:
            print(
                f"epoch {epoch}/{total}: train {m['train_loss']:.4f} val {m['val_loss']:.4f} ({m['elapsed_s']:.0f} s)"
            )

    trained = pretrain_cube(config, progress=progress, report=print)
    trained.save(run)
    distilled = load_cube_surrogate(run)
    print(f"distilled: validation {json.dumps(trained.validation)}   [{time.perf_counter() - t0:.0f} s]")

    every = ingest_cube_tosses(data_path("contactnets_cube/tosses.npz"), impacts="all")
    first = _take(every, np.flatnonzero(every["impact"] == 0))
    n_first = len(first["toss_id"])
    mujoco = shipped_cube_surrogate()
    out: dict = {"validation": trained.validation, "config": vars(a), "seeds": {}}
    for seed in (int(s) for s in a.seeds.split(",")):
        fit_idx = np.sort(np.random.default_rng(seed).choice(n_first, a.fit, replace=False))
        ev = _take(first, np.setdiff1d(np.arange(n_first), fit_idx))
        fit = _take(every, np.flatnonzero(np.isin(every["toss_id"], first["toss_id"][fit_idx])))
        k_lm, k_ft, k_cma = jax.random.split(jax.random.PRNGKey(seed), 3)
        pre, post = fit["pre_state"], fit["post_state"]
        p_law, _ = identify_rigid_impacts(pre, post, key=k_cma)
        p_lm, _ = identify_cube(distilled, pre, post, key=k_lm)
        p_cma, _ = identify_handler_impacts(distilled, rigid_from_unit, len(p_law), pre, post, key=k_cma)
        ft = finetune_cube(distilled, pre, post, p_cma, key=k_ft)
        tuned, report = ft.model, ft.to_dict()
        p_mj, _ = identify_cube(mujoco, pre, post, key=k_lm)
        preds = {
            "law, CMA-ES": impact_posts(rigid_cube_window, ev["pre_state"], p_law)[0],
            "distilled, at the law's fit": impact_posts(distilled, ev["pre_state"], p_law)[0],
            "distilled, LM": impact_posts(distilled, ev["pre_state"], p_lm)[0],
            "distilled, CMA-ES": impact_posts(distilled, ev["pre_state"], p_cma)[0],
            "distilled, CMA-ES + fine-tuning": impact_posts(tuned, ev["pre_state"], p_cma)[0],
            "MuJoCo surrogate, LM": impact_posts(mujoco, ev["pre_state"], p_mj)[0],
        }
        res = {}
        for name, p in preds.items():
            e = impact_speed_errors(p, ev["post_state"])
            res[name] = {"median_rel_err": float(np.median(e)), "alpha_0.1": float(np.mean(e <= 0.1))}
        gap = impact_speed_errors(preds["distilled, at the law's fit"], preds["law, CMA-ES"])
        res["distillation_gap_median"] = float(np.median(gap))
        res["finetune_steps"] = int(report["steps"])
        res["params"] = {"law": p_law.tolist(), "distilled_lm": p_lm.tolist(), "distilled_cmaes": p_cma.tolist()}
        out["seeds"][seed] = res
        print(f"seed {seed}: {len(pre)} fit impacts, {len(ev['toss_id'])} scored first impacts; distillation gap"
              f" {res['distillation_gap_median']:.3f}; fine-tuning {report['steps']} steps")  # fmt: skip
        for name in preds:
            print(f"  {name:<34} median {res[name]['median_rel_err']:.3f}   α0.1 {res[name]['alpha_0.1']:.2f}")
    out["elapsed_s"] = time.perf_counter() - t0
    print(f"[{out['elapsed_s']:.0f} s]")
    if a.json:
        write_json(a.json, out)


if __name__ == "__main__":
    main()

"""`clashx plan`: the next strikes to run in the lab, chosen by what they will teach; a CSV `strike_lab.py --strikes` reads."""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ..core import check_output, same_path, write_json, write_text
from ..optimize import LABEL_NOISE, PlanConfig, model_error, plan
from ..surrogate import load_or_shipped
from ._strike_workflow import load_real, read_param_std, read_params


def run_plan(
    model_dir: str | None,
    shape: str,
    params_path: str | None,
    done: str | None,
    out: str,
    config: PlanConfig,
    ran: str | None = None,
) -> dict:
    """Propose `config.k` strikes and write them to `out` (CSV, header theta,theta1,v_pre); returns the plan.

    The parameters and their σ come from PARAMS.json (`clashx identify`), or are the
    prior's centre and spread when it is not given.  `done`: a recording or event file
    of strikes run but not in PARAMS.json's σ; their information is counted in.  `ran`: the
    strikes PARAMS.json was identified from.  The labels of both give "robust" its model error.
    """
    model = load_or_shipped(model_dir, shape)
    std = None
    if params_path:
        params = read_params(params_path, model)
        std = read_param_std(params_path, model.space.names, "or drop 'std'")
    else:
        params = np.asarray(model.space.vector(), np.float64)
    loaded = {name: load_real(path, None, shape)[:2] for name, path in (("ran", ran), ("done", done)) if path}
    error = None
    if loaded:
        strikes, labels = (np.concatenate(a) for a in zip(*loaded.values(), strict=True))
        error = model_error(model, strikes, labels, params)
    t0 = time.perf_counter()
    r = plan(
        model,
        params,
        std=std,
        done=loaded["done"][0] if "done" in loaded else None,
        ran=loaded["ran"][0] if "ran" in loaded else None,
        error=error,
        config=config,
    )
    r["model_error"] = error
    r["time_s"] = time.perf_counter() - t0
    lines = ["theta,theta1,v_pre"] + [",".join(f"{v:.6f}" for v in s) for s in r["strikes"]]
    write_text(out, "\n".join(lines) + "\n")
    return r | {"strikes": np.asarray(r["strikes"]).tolist(), "shape": shape, "out": os.path.abspath(out)}


def cmd_plan(a: argparse.Namespace) -> int:
    """Print what `clashx plan` chose and how much each parameter's σ is expected to shrink."""
    check_output(a.out, "--out", suffix=".csv")
    if a.json:
        check_output(a.json, "--json")
    if a.done and a.ran and same_path(a.done, a.ran):
        raise ValueError(f"--done and --ran are the same file {a.done!r}: its strikes would count twice; pass it once")
    config = PlanConfig(k=a.k, criterion=a.criterion, candidates=a.candidates, seed=a.seed)
    r = run_plan(a.model, a.shape, a.params, a.done, a.out, config, ran=a.ran)
    for s in r["strikes"]:
        print(f"theta = {s[0]:.4f} rad, theta1 = {s[1]:.4f} rad, v_pre = {s[2]:.4f} m/s")
    shrink = ", ".join(f"{n} {r['std_before'][n]:.4g} -> {r['std_after'][n]:.4g}" for n in r["std_before"])
    print(f"expected σ after these strikes ({r['criterion']}): {shrink}")
    if r["criterion"] == "robust":
        told = "assumed as large as the label noise" if r["model_error"] is None else "from the strikes' labels"
        err = r["model_error"] if r["model_error"] is not None else 3 * LABEL_NOISE**2
        print(f"model error beyond the label noise: {100 * np.sqrt(err):.1f} % RMS ({told})")
    print(f"{len(r['strikes'])} strikes -> {a.out} ({r['time_s']:.1f} s); run them: strike_lab.py --strikes {a.out}")
    if a.json:
        write_json(a.json, r)
    return 0

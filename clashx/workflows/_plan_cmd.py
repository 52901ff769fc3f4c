"""`clashx plan`: the next strikes to run in the lab, chosen by what they will teach; a CSV `strike_lab.py --strikes` reads."""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ..core import check_output, same_path, write_json, write_text
from ..optimize import LABEL_NOISE, MISSPECIFIED, PlanConfig, error_terms, model_error, plan, pooled_error
from ..scenes import geometry as geo
from ..surrogate import load_or_shipped
from ._csv import read_columns
from ._strike_workflow import load_real, read_param_std, read_params

NEED_CRITERIA = ("infogap", "coverage", "robust")  # the criteria that cover the strikes to be predicted


def run_plan(
    model_dir: str | None,
    shape: str,
    params_path: str | None,
    done: str | None,
    out: str,
    config: PlanConfig,
    ran: str | None = None,
    need: str | None = None,
) -> dict:
    """Propose `config.k` strikes and write them to `out` (CSV, header theta,theta1,v_pre); returns the plan.

    The parameters and their σ come from PARAMS.json (`clashx identify`), or are the
    prior's centre and spread when it is not given.  `done`: a recording or event file
    of strikes run but not in PARAMS.json's σ; their information is counted in.  `ran`: the
    strikes PARAMS.json was identified from.  The model error: from `done`'s labels (held out
    from PARAMS.json's fit: the upper bound, mean + 2 standard errors) when given; else from
    `ran`'s (fitted to, so biased low: "robust" uses it, "infogap" only when it already
    exceeds the label noise).  `need`: a CSV of the
    strikes to cover (`read_need`).
    """
    if need and config.criterion not in NEED_CRITERIA:
        raise ValueError(
            f"--need: --criterion {config.criterion} does not cover strikes; use one of {', '.join(NEED_CRITERIA)}"
        )
    wanted = read_need(need) if need else None
    model = load_or_shipped(model_dir, shape)
    std = None
    if params_path:
        params = read_params(params_path, model)
        std = read_param_std(params_path, model.space.names, "or drop 'std'")
    else:
        params = np.asarray(model.space.vector(), np.float64)
    loaded = {name: load_real(path, None, shape)[:2] for name, path in (("ran", ran), ("done", done)) if path}
    errors = {"ran": model_error(model, *loaded["ran"], params)} if "ran" in loaded else {}
    if "done" in loaded:  # held out: its upper bound, as the loop uses (`strike_loop`)
        errors["done"] = pooled_error(*error_terms(model, *loaded["done"], params), upper=True)
    error = errors.get("done", errors.get("ran"))
    if config.criterion == "infogap" and "done" not in errors and error is not None and error <= MISSPECIFIED:
        error = None  # within the label noise only on the strikes it was fitted to: not evidence enough
    t0 = time.perf_counter()
    r = plan(
        model,
        params,
        std=std,
        done=loaded["done"][0] if "done" in loaded else None,
        ran=loaded["ran"][0] if "ran" in loaded else None,
        error=error,
        need=wanted,
        config=config,
    )
    r["model_error"] = error
    r["model_errors"] = errors  # what each file's labels measured (done: held out, its upper bound)
    r["model_error_from"] = "done" if "done" in errors else "ran" if error is not None else None
    r["time_s"] = time.perf_counter() - t0
    lines = ["theta,theta1,v_pre"] + [",".join(f"{v:.6f}" for v in s) for s in r["strikes"]]
    write_text(out, "\n".join(lines) + "\n")
    return r | {"strikes": np.asarray(r["strikes"]).tolist(), "shape": shape, "out": os.path.abspath(out)}


def read_need(path: str) -> np.ndarray:
    """The strikes (n, 3) of a `--need` CSV (header theta,theta1,v_pre), each inside the lab's ranges.

    Raises:
        ValueError: naming the file, line and column of a bad cell or a strike out of range.
    """
    need, _, lines = read_columns(path, "--need", ("theta", "theta1", "v_pre"), what="strike")
    for line, s in zip(lines, need, strict=True):
        for j, name in enumerate(("theta", "theta1", "v_pre")):
            if not geo.STRIKE_LOW[j] - 1e-9 <= s[j] <= geo.STRIKE_HIGH[j] + 1e-9:
                raise ValueError(
                    f"--need {path} line {line}, {name}: {s[j]:g} is outside the lab's range "
                    f"[{geo.STRIKE_LOW[j]:g}, {geo.STRIKE_HIGH[j]:g}]"
                )
    return need


def cmd_plan(a: argparse.Namespace) -> int:
    """Print what `clashx plan` chose and how much each parameter's σ is expected to shrink."""
    check_output(a.out, "--out", suffix=".csv")
    if a.json:
        check_output(a.json, "--json")
    if a.done and a.ran and same_path(a.done, a.ran):
        raise ValueError(f"--done and --ran are the same file {a.done!r}: its strikes would count twice; pass it once")
    config = PlanConfig(k=a.k, criterion=a.criterion, candidates=a.candidates, seed=a.seed)
    r = run_plan(a.model, a.shape, a.params, a.done, a.out, config, ran=a.ran, need=a.need)
    for s in r["strikes"]:
        print(f"theta = {s[0]:.4f} rad, theta1 = {s[1]:.4f} rad, v_pre = {s[2]:.4f} m/s")
    shrink = ", ".join(f"{n} {r['std_before'][n]:.4g} -> {r['std_after'][n]:.4g}" for n in r["std_before"])
    print(f"expected σ after these strikes ({r['criterion']}): {shrink}")
    told = {"done": "held out: --done's labels", "ran": "fitted to: --ran's labels", None: None}[r["model_error_from"]]
    if r["criterion"] == "infogap":
        why = (
            "unknown (no held-out labels: pass --done)"
            if told is None
            else f"{100 * np.sqrt(r['model_error']):.1f} % RMS ({told})"
        )
        print(f"model error beyond the label noise: {why}; planned as {r['mode']}")
    elif r["criterion"] == "robust":
        err = r["model_error"] if r["model_error"] is not None else 3 * LABEL_NOISE**2
        print(
            f"model error beyond the label noise: {100 * np.sqrt(err):.1f} % RMS ({told or 'assumed as large as the label noise'})"
        )
    print(f"{len(r['strikes'])} strikes -> {a.out} ({r['time_s']:.1f} s); run them: strike_lab.py --strikes {a.out}")
    if a.json:
        write_json(a.json, r)
    return 0

"""File-level steps behind the CLI: reading event files, recordings and PARAMS.json; fine-tune, evaluate and
predict from them (`clashx identify`: `clashx.workflows._identify_cmd`).

`--real` takes either an event file (`clashx ingest`, `clashx generate`, yours)
or a strike recording (the lab's tracks, `clashx.events._ingest_strike` format): a
recording is ingested on the fly, and `clashx identify` then runs the whole
two-stage identification on its tracks (`clashx.learn._lab_fit`).  Without
`--model`, the surrogate shipped for the data's block shape is used.

Each function takes paths and plain values, reads and validates the inputs
(errors name the file, row and fix), calls the functional core, and writes
its outputs atomically.  Printing stays in the CLI.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..core import ParamSpace
from ..core import write_json as write_json
from ..events import (
    alpha_curve,
    atomic_savez,
    events_from_arrays,
    events_label_sigma,
    holds_tracks,
    ingest_strike_lab,
    load_events,
    n_events,
    read_npz,
    relative_error,
)
from ..learn import (
    FAMILIES,
    FinetuneConfig,
    family_average,
    finetune,
)
from ..scenes import geometry as geo
from ..surrogate import (
    AbstractSurrogate,
    StrikeSurrogate,
    load_or_shipped,
    save_strike_surrogate,
    shipped_strike_surrogate,
    surrogate_family,
)
from ._plots import plot_alpha_curves


def parse_select(text: str, n: int, where: str) -> np.ndarray:
    """Rows named by `text`: "a:b" (a slice, Python style), "a:b:s", or "i,j,k"; checked against n rows.

    Unlike Python slicing, a slice whose bounds run past the end of the file is
    an error, not silently shortened: `--select 0:50` on 12 events names 50 rows.
    """
    try:
        if ":" in text:
            parts = [int(p) if p.strip() else None for p in text.split(":")]
            if len(parts) > 3:
                raise ValueError
            rows = np.arange(n)[slice(*parts)]
        else:
            rows = np.array([int(p) for p in text.split(",")], dtype=np.int64)
    except ValueError:
        raise ValueError(f"--select {text!r}: expected a slice like 0:10 or a list like 0,3,7") from None
    except OverflowError:
        raise ValueError(f"--select {text!r}: a row past the end of {where}, which has {n} events") from None
    if ":" in text:
        past = [b for b in parts[:2] if b is not None and not -n <= b <= n]
        if past:
            raise ValueError(
                f"--select {text!r} runs past the end of {where}, which has {n} events (rows 0 to {n - 1}); "
                f"use e.g. --select 0:{n}"
            )
    if len(np.unique(rows)) != len(rows):
        raise ValueError(f"--select {text!r} names a row twice")
    if len(rows) == 0:
        raise ValueError(f"--select {text!r} names no rows of {where} ({n} events)")
    bad = rows[(rows < 0) | (rows >= n)]
    if len(bad):
        raise ValueError(f"--select {text!r}: row {int(bad[0])} is outside {where}, which has {n} events")
    return rows


OUTSIDE = 0.5  # default --outside: inputs more range widths than this beyond the training ranges are an error


def input_ranges(model_dir: str | None) -> dict[str, tuple[float, float]]:
    """The strike ranges a surrogate was trained on: its folder's `input_ranges` (`clashx pretrain` records
    them), else the prior every generated strike is drawn from (`geometry.STRIKE_RANGES`, SCENE.md)."""
    meta_path = os.path.join(model_dir, "surrogate.json") if model_dir else ""
    if meta_path and os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        ranges = meta.get("input_ranges") if isinstance(meta, dict) else None
        if isinstance(ranges, dict) and all(k in ranges for k in geo.STRIKE_NAMES):
            return {k: (float(ranges[k][0]), float(ranges[k][1])) for k in geo.STRIKE_NAMES}
    return dict(geo.STRIKE_RANGES)


def count_outside(
    strikes: np.ndarray, ranges: dict[str, tuple[float, float]], rows: np.ndarray, where: str, outside: float
) -> int:
    """How many strikes lie outside the training `ranges`; a ValueError for one beyond them by > `outside` widths.

    Args:
        strikes: (n, 3) θ, θ1, v_pre.
        ranges: name -> (low, high) of the training strikes.
        rows: the strikes' row numbers in `where` (for the message).
        where: the file they come from.
        outside: how far past a range, in range widths, a strike may lie before it is refused.
    """
    lo = np.array([ranges[k][0] for k in geo.STRIKE_NAMES])
    hi = np.array([ranges[k][1] for k in geo.STRIKE_NAMES])
    units = tuple("m/s" if k == "v_pre" else "rad" for k in geo.STRIKE_NAMES)
    return count_outside_ranges(strikes, lo, hi, geo.STRIKE_NAMES, units, rows, where, outside)


def count_outside_ranges(
    x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    names: tuple[str, ...],
    units: tuple[str, ...],
    rows: np.ndarray,
    where: str,
    outside: float,
) -> int:
    """Rows of `x` (n, k) outside [lo, hi] (the model's training ranges), counted; one past them by more than
    `outside` range widths is a ValueError naming `where`, its row, the input, its value and the range."""
    x = np.asarray(x, np.float64)
    excess = np.maximum(np.maximum(lo - x, x - hi), 0.0) / np.maximum(hi - lo, 1e-9)
    far = excess > outside
    if far.any():
        i, j = np.argwhere(far)[0]
        unit = f" {units[j]}" if units[j] else ""
        raise ValueError(
            f"{where}: row {int(rows[i])} has {names[j]} = {x[i, j]:g}{unit}, {excess[i, j]:.3g} range widths "
            f"outside what the model was trained on ({lo[j]:g} to {hi[j]:g}{unit}; {int(far.any(1).sum())} such "
            f"rows). Its prediction there would be a guess: check the units, or pass "
            f"--outside {float(np.ceil(excess[far].max())):.3g} to go on anyway"
        )
    return int((excess > 0).any(1).sum())


def warn_outside(count: int, n: int, what: str) -> None:
    """A warning line (stderr) when some inputs lie outside the ranges the model was trained on."""
    if count:
        print(
            f"warning: {count} of {n} {what} lie outside the ranges the model was trained on; its predictions "
            "there are extrapolations (see --outside)",
            file=sys.stderr,
        )


def read_real(path: str) -> tuple[Mapping[str, Any], dict[str, np.ndarray] | None]:
    """(strike events, the recording or None) of `path`: an event file as it is, a recording ingested.

    A recording's labels are ingested without their σ (`ingest_strike_lab(label_sigma=False)`): the commands
    that read them here do not weigh them, and `clashx identify` fits a recording from its tracks
    (`clashx.learn.fit_recording`, which reads the σ itself).
    """
    raw = read_npz(path, ".npz event file or strike recording")
    if holds_tracks(raw):
        return ingest_strike_lab(raw, where=path, label_sigma=False), raw
    return events_from_arrays(raw, path, scene="strike"), None


def data_shape(path: str) -> str:
    """The block shape of a strike event file or recording; a ValueError naming the file for anything else."""
    raw = read_npz(path, ".npz event file or strike recording")
    scene = str(raw.get("scene", "strike"))
    if scene != "strike":
        fix = (
            "use `--scene MODULE:CLASS` for your own scene's events"
            if scene == "pair"
            else "the cube has its own bench"
        )
        raise ValueError(f"{path}: holds {scene!r} events; this command takes strike events or recordings ({fix})")
    shape = str(raw.get("shape", ""))
    if shape not in geo.SHAPES:
        what = "no 'shape' key" if "shape" not in raw else f"'shape' is {shape!r}"
        raise ValueError(
            f"{path}: not a strike event file or recording ({what}; expected one of {', '.join(geo.SHAPES)}). "
            "Make one with `clashx generate --scene strike` or `clashx ingest --source strike-lab`"
        )
    return shape


class RealStrikes(NamedTuple):
    """The selected touched strikes of an event file or recording (`load_real`).

    Attributes:
        strikes: (n, 3) θ, θ1, v_pre.
        velocities: (n, 3) observed post-impact velocities.
        rows: (n,) their rows in the file.
        label_sigma: (n,) each label's relative track σ (`clashx.events.events_label_sigma`); NaN where the file
            gives none, and always for a recording (`read_real`).
        recording: the recording's arrays, or None for an event file.
    """

    strikes: np.ndarray
    velocities: np.ndarray
    rows: np.ndarray
    label_sigma: np.ndarray
    recording: dict[str, np.ndarray] | None


def load_real(path: str, select: str | None, shape: str) -> RealStrikes:
    """The selected touched events of an event file or recording (all of them without `select`)."""
    ev, raw = read_real(path)
    if str(ev["shape"]) != shape:
        raise ValueError(f"{path}: events of the {str(ev['shape'])!r} block; the model is for {shape!r}")
    usable = ev["touched"]  # a touched row has a finite velocity (`validate_events`)
    if not select:  # every event with a velocity
        rows = np.flatnonzero(usable)
        if len(rows) == 0:
            raise ValueError(f"{path}: no event has a post-impact velocity")
    else:
        rows = parse_select(select, n_events(ev), path)
        missed = rows[~usable[rows]]
        if len(missed):
            raise ValueError(
                f"{path}: row {int(missed[0])} has no post-impact velocity (the striker missed); leave it out of "
                "--select"
            )
    return RealStrikes(ev["strike"][rows], ev["post_velocity"][rows], rows, events_label_sigma(ev)[rows], raw)


LOOSE_LABEL = 0.1  # `label_sigma_summary` lists the strikes whose label's σ is above this (display only)


def label_sigma_summary(events: Mapping[str, Any]) -> str | None:
    """A line on how well a strike event file's tracks measured its labels (`clashx ingest` prints it), or None
    for a file whose labels carry no track σ: the median σ and the rows above `LOOSE_LABEL`, which `clashx
    identify` weighs less."""
    sigma = events_label_sigma(events) if str(events["scene"]) == "strike" else None
    if sigma is None or not np.isfinite(sigma).any():
        return None
    loose = np.flatnonzero(sigma > LOOSE_LABEL)
    rows = ", ".join(map(str, loose[:10])) + (", ..." if len(loose) > 10 else "")
    return f"labels' σ read off the tracks: median {np.nanmedian(sigma):.1%}, {len(loose)} above {LOOSE_LABEL:.0%}" + (
        f" (rows {rows}; clashx identify weighs them less)" if len(loose) else ""
    )


def read_params(path: str, model: AbstractSurrogate) -> np.ndarray:
    """Parameters from a PARAMS.json (written by `clashx identify`), in the model's order, checked against its prior.

    A file identified for another block shape, scene or impulse family than the model's is refused.
    """
    scene = getattr(getattr(model, "scene", None), "name", None)
    family = surrogate_family(model) if isinstance(model, StrikeSurrogate) else None
    return read_param_file(
        path, model.space, {"shape": getattr(model, "shape", None), "scene": scene, "family": family}
    )


def read_param_std(path: str, names, fix: str) -> np.ndarray | None:
    """The one-sigma values of PARAMS.json's "std" (`clashx identify` writes it) in `names`' order, or None.

    A "std" that lacks a name is an error; `fix` ends its message (what else the user may do).
    """
    with open(path) as f:
        raw = json.load(f)
    std = raw.get("std") if isinstance(raw, dict) else None
    if not isinstance(std, dict):
        return None
    missing = [n for n in names if n not in std]
    if missing:
        raise ValueError(f"{path}: 'std' lacks {missing}; re-run `clashx identify`, {fix}")
    numeric = [isinstance(std[n], (int, float)) and not isinstance(std[n], bool) for n in names]
    out = np.array([float(std[n]) if ok else np.nan for n, ok in zip(names, numeric, strict=True)])
    bad = ~(np.isfinite(out) & (out > 0))
    if bad.any():
        name = names[int(np.argmax(bad))]
        raise ValueError(
            f"{path}: 'std' of {name} is {std[name]!r}; a σ is a finite number > 0. Re-run `clashx identify`, {fix}"
        )
    return out


class DuplicateKey(ValueError):
    """A JSON object names a key twice (json keeps the last silently)."""


def _no_duplicates(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    for k in keys:
        if keys.count(k) > 1:
            raise DuplicateKey(k)
    return dict(pairs)


def read_param_file(
    path: str, space: ParamSpace, own: dict[str, str | None] | None = None, *, family: str | None = None
) -> np.ndarray:
    """Parameter values of `space` from a PARAMS.json, in its order, checked against its prior.

    The file holds {"params": {name: value}} (other top-level keys are kept
    for the record) or the names at its top level; a name the model does not
    know is an error (a misspelling would otherwise be ignored).  A file of
    several impulse families (`clashx identify --family both`: {"families":
    {family: {"params": ...}}}) is read one `family` at a time.
    """
    try:
        with open(path) as f:
            raw = json.load(f, object_pairs_hook=_no_duplicates)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such parameter file (write one with `clashx identify`)") from None
    except DuplicateKey as e:
        raise ValueError(f"{path}: the key {e.args[0]!r} appears twice; keep one") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    names = list(space.names)
    example = json.dumps({"params": dict.fromkeys(names, 0.5)})
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object like {example}")
    for key, what in (("shape", "block"), ("scene", "scene")):
        mine = (own or {}).get(key)
        if key in raw and mine is not None and raw[key] != mine:
            raise ValueError(f"{path}: parameters identified for the {raw[key]!r} {what}; the model is for {mine!r}")
    if family is not None:
        block = raw.get("families", {}).get(family) if isinstance(raw.get("families"), dict) else None
        if not isinstance(block, dict):
            raise ValueError(
                f"{path}: no 'families' entry for {family!r}; write one with `clashx identify --family both`"
            )
        raw = block
    elif "families" in raw and "params" not in raw:  # a scene's file keeps its surrogate's at the top level
        raise ValueError(
            f"{path}: parameters of several impulse families (`clashx identify --family both`); `clashx evaluate` "
            "and `clashx predict` take it, this command one family's: identify with --family mujoco"
        )
    elif raw.get("family") not in (None, (own or {}).get("family")) and (own or {}).get("family") is not None:
        mine = (own or {})["family"]
        raise ValueError(
            f"{path}: parameters identified in the {raw['family']!r} impulse family; the model is of the {mine!r} "
            f"one: identify with --family {mine}, or pass a --model of the {raw['family']!r} family"
        )
    meta = ("shape", "scene", "family")
    values = raw["params"] if "params" in raw else {k: v for k, v in raw.items() if k not in meta}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: 'params' is {values!r}; expected an object like {example}")
    missing = [n for n in names if n not in values]
    unknown = [k for k in values if k not in names]
    problems = [f"unknown parameter(s) {unknown}"] * bool(unknown) + [f"missing parameter(s) {missing}"] * bool(missing)
    if problems:
        raise ValueError(f"{path}: {'; '.join(problems)}; the model expects exactly {names}")
    bad = [n for n in names if isinstance(values[n], bool) or not isinstance(values[n], (int, float))]
    if bad:
        raise ValueError(
            f"{path}: parameter {bad[0]!r} is {values[bad[0]]!r}; values must be numbers (not strings, true/false or null)"
        )
    p = np.array([float(values[n]) for n in names])
    return space.check(p, what=path)


# `clashx identify --family`: one impulse family, or each with equal weights; the strike's are mujoco and compliant,
# a scene's mujoco (its surrogate) and rigid (its rigid law, `clashx.scenes.pair_law`)
FAMILY_CHOICES = (*FAMILIES, "rigid", "both")


def model_for(model_dir: str | None, real: str, family: str = "mujoco") -> StrikeSurrogate:
    return load_or_shipped(model_dir, data_shape(real), family)


def model_name(model_dir: str | None, model: StrikeSurrogate) -> str:
    return os.path.abspath(model_dir) if model_dir else f"shipped ({model.shape}, {surrogate_family(model)})"


def run_finetune(
    model_dir: str | None,
    real: str,
    select: str | None,
    params_path: str,
    out: str,
    *,
    seed: int = 0,
    config: FinetuneConfig | None = None,
) -> dict:
    """`clashx finetune`: fine-tune on the selected strikes (events or a recording's) at the given parameters.

    Writes the run folder `out`; cross-validation holds out whole strikes.
    """
    model = model_for(model_dir, real)
    params = read_params(params_path, model)
    strikes, vel, rows, *_ = load_real(real, select, model.shape)
    t0 = time.perf_counter()
    config = config or FinetuneConfig()
    ft = finetune(model, strikes, vel, jnp.asarray(params), key=jax.random.PRNGKey(seed), config=config)
    tuned, report = ft.model, ft.to_dict()
    report |= {"time_s": time.perf_counter() - t0, "events": os.path.abspath(real), "rows": rows.tolist()}
    save_strike_surrogate(
        out, tuned,
        extra={"finetune": report, "base_model": model_name(model_dir, model),
               "params": dict(zip(model.space.names, params.tolist(), strict=True)),
               "input_ranges": input_ranges(model_dir)},
    )  # fmt: skip
    return report


def _params_for(model_dir: str | None, model: StrikeSurrogate, params_path: str | None) -> np.ndarray:
    if params_path:
        return read_params(params_path, model)
    if not model_dir:
        raise ValueError("the shipped surrogate holds no identified parameters; pass --params PARAMS.json")
    with open(os.path.join(model_dir, "surrogate.json")) as f:
        meta = json.load(f)
    if "params" not in meta:
        raise ValueError(f"{model_dir}: the model holds no identified parameters; pass --params PARAMS.json")
    return read_params(os.path.join(model_dir, "surrogate.json"), model)


def _read_family(params_path: str | None) -> tuple[str | None, dict[str, float] | None]:
    """(the "family" a PARAMS.json names, or None: no file or none named; a `--family both` file's weights, checked)."""
    if not params_path:
        return None, None
    try:
        with open(params_path) as f:
            raw = json.load(f)
    except (OSError, ValueError):
        return None, None  # read_param_file names the problem
    family = raw.get("family") if isinstance(raw, dict) else None
    if family is not None and family not in FAMILY_CHOICES:
        raise ValueError(
            f"{params_path}: 'family' is {family!r}; expected one of {', '.join(FAMILY_CHOICES)} "
            "(as `clashx identify --family` writes it)"
        )
    if family == "both":
        weights = raw.get("weights")
        ok = isinstance(weights, dict) and set(weights) == set(FAMILIES)
        ok = ok and all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in weights.values())
        if not ok or not math.isclose(sum(weights.values()), 1.0, rel_tol=1e-6):
            raise ValueError(
                f"{params_path}: 'weights' is {weights!r}; expected a weight >= 0 per family "
                f"({', '.join(FAMILIES)}) summing to 1, as `clashx identify --family both` writes them"
            )
        return family, {k: float(v) for k, v in weights.items()}
    return family, None


def _predictor(model_dir: str | None, params_path: str | None, shape: str) -> tuple[Callable, dict]:
    """(strikes (n, 3) -> post-impact velocities (n, 3), {"family", "params"[, "weights"]}) of evaluate and predict:
    one surrogate at its parameters, or (a `--family both` file) each family's shipped one, weighted."""
    family, weights = _read_family(params_path)
    if weights is not None:  # a --family both file
        if model_dir:
            raise ValueError(
                f"--model with {params_path}: its families were identified through the shipped surrogates; drop --model"
            )
        models = {f: shipped_strike_surrogate(shape, f) for f in FAMILIES}
        members = {
            f: (m, read_param_file(str(params_path), m.space, {"shape": shape}, family=f)) for f, m in models.items()
        }
        named = {f: dict(zip(m.space.names, p.tolist(), strict=True)) for f, (m, p) in members.items()}
        info = {"family": "both", "params": named, "weights": weights}
    else:
        model = load_or_shipped(model_dir, shape, family)
        family = surrogate_family(model)
        members, weights = {family: (model, _params_for(model_dir, model, params_path))}, {family: 1.0}
        info = {"family": family, "params": dict(zip(model.space.names, members[family][1].tolist(), strict=True))}
    return (lambda strikes: family_average(members, weights, strikes)), info


def run_evaluate(
    model_dir: str | None,
    real: str,
    alpha: float,
    *,
    params_path: str | None = None,
    select: str | None = None,
    plot: str | None = None,
    outside: float = OUTSIDE,
) -> dict:
    """`clashx evaluate`: α-accuracy of the model's predictions against the events' velocities (+ α-curve PNG).

    With a PARAMS.json of `clashx identify --family both`, the prediction is the families' weighted average.
    """
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"--alpha {alpha}: expected a positive relative error bound, e.g. 0.1 (10 %)")
    shape = data_shape(real)
    fn, info = _predictor(model_dir, params_path, shape)
    strikes, vel, rows, *_ = load_real(real, select, shape)
    n_outside = count_outside(strikes, input_ranges(model_dir), rows, real, outside)
    pred = fn(strikes)
    if not np.isfinite(pred).all():
        row = int(rows[np.argmax(~np.isfinite(pred).all(1))])
        raise ValueError(f"{real}: the model's prediction for row {row} is not finite; check it and the parameters")
    length = geo.characteristic_length(shape)
    err = np.asarray(relative_error(pred, vel, length))
    result = {
        "shape": shape,
        "alpha": alpha,
        "alpha_accuracy": float(np.mean(err <= alpha)),
        "median_rel_err": float(np.median(err)),
        "n_events": int(len(rows)),
        "outside_training_ranges": n_outside,
        "metric": f"‖Δ(vx, vy, r·ωz)‖ ≤ α‖(vx, vy, r·ωz)‖, r = {length:.4f} m",
    } | info
    if plot:
        alphas, acc = alpha_curve(pred, vel, length)
        plot_alpha_curves(
            {os.path.basename(os.path.normpath(model_dir or "shipped")): (alphas, acc)},
            plot,
            title=f"{shape}: {real}",
        )
        result["plot"] = plot
    return result


def run_predict(
    model_dir: str | None, params_path: str | None, events: str, out: str, *, outside: float = OUTSIDE
) -> dict:
    """`clashx predict`: per-event predictions in the row order of EVENTS (missed strikes get NaN).

    With a PARAMS.json of `clashx identify --family both`, the families' weighted average (PRED.npz then holds
    params_FAMILY and names_FAMILY per family).

    Returns {"n": rows written, "outside_training_ranges": touched strikes outside the model's training ranges}.
    """
    shape = data_shape(events)
    fn, info = _predictor(model_dir, params_path, shape)
    ev = load_events(events, scene="strike")
    touched = np.flatnonzero(ev["touched"])
    n_outside = count_outside(ev["strike"][touched], input_ranges(model_dir), touched, events, outside)
    pred = fn(ev["strike"])
    pred[~ev["touched"]] = np.nan  # a missed strike has no post-impact velocity
    bad = ev["touched"] & ~np.isfinite(pred).all(1)
    if bad.any():
        raise ValueError(
            f"{events}: the model's prediction for row {int(np.argmax(bad))} is not finite ({int(bad.sum())} rows); "
            "nothing was written. Check those strikes and the parameters, or retrain the model"
        )
    if info["family"] == "both":
        named = {f"{part}_{f}": v for f, p in info["params"].items()
                 for part, v in (("params", np.array(list(p.values()))), ("names", np.array(list(p))))}  # fmt: skip
    else:
        named = {"params": np.array(list(info["params"].values())), "names": np.array(list(info["params"]))}
    atomic_savez(out, {"post_velocity": pred, "strike": ev["strike"], "family": np.array(info["family"])} | named)
    return {"n": len(pred), "outside_training_ranges": n_outside}

"""`clashx optimize`: poses and target files from the command line, the reach check, and the CMA-ES searches
over hybrid rollouts for every (start, target) at once (`clashx.optimize.optimize_strikes`)."""

from __future__ import annotations

import time

import jax
import numpy as np

from ..core import resolve_engine
from ..hybrid import strike_rollouts_c
from ..optimize import cached_hybrid, clip_to_ranges, describe, optimize_strikes
from ..scenes import MAX_TIME
from ..scenes import geometry as geo
from ..surrogate import load_or_shipped
from ._csv import read_columns
from ._strike_workflow import _params_for, model_name


def parse_pose(text: str, flag: str) -> np.ndarray:
    """A pose 'x,y,yaw' (m, m, rad) from a flag, or a ValueError naming the flag and the fix."""
    try:
        vals = [float(v) for v in text.split(",")]
    except ValueError:
        vals = []
    if len(vals) != 3:
        raise ValueError(f"{flag} {text!r}: expected three numbers x,y,yaw (metres, metres, radians), e.g. 0,0,0")
    if not np.all(np.isfinite(vals)):
        raise ValueError(f"{flag} {text!r}: every number must be finite (no nan or inf)")
    return np.asarray(vals, np.float64)


# How far any strike can push a block, to refuse a target out of reach before a search that cannot
# succeed.  Generous on purpose: the fastest strike is 0.8 m/s (SCENE.md) and simulated blocks leave
# at up to 1.7 m/s, so 3x the strike speed bounds the block's; it then slides until MAX_TIME at most,
# decelerated by at least the floor's friction mu2 * g, and REACH_SLACK covers turning about a corner
# and soft contacts (simulated: 4.9 m at mu2 = 0.02, 0.64 m at mu2 = 0.3; bounds 10.1 m and 1.5 m).
MAX_BLOCK_SPEED = 3.0 * geo.STRIKE_RANGES["v_pre"][1]  # m/s
REACH_SLACK = 0.5  # m


def max_reach(mu_floor: float | None) -> float:
    """An upper bound (m) on how far a strike moves the block, for floor friction `mu_floor` (None: unknown)."""

    reach = MAX_BLOCK_SPEED * MAX_TIME
    if mu_floor is not None and mu_floor > 0:
        reach = min(reach, MAX_BLOCK_SPEED**2 / (2 * mu_floor * geo.GRAVITY))
    return reach + REACH_SLACK


def check_reach(start: np.ndarray, target: np.ndarray, params: dict[str, float], where: str = "--target") -> None:
    """Raise a ValueError naming `where` (--target, or a row of --targets) if the target lies farther from
    the start than any strike can push the block."""
    distance = float(np.hypot(*(np.asarray(target[:2]) - np.asarray(start[:2]))))
    reach = max_reach(params.get("mu2"))
    if distance > reach:
        raise ValueError(
            f"{where} {target[0]:g},{target[1]:g}: {distance:.2f} m from "
            f"{'--start' if where == '--target' else 'its start'} {start[0]:g},{start[1]:g}, "
            f"but no strike moves the block more than {reach:.2f} m (floor friction mu2 = {params.get('mu2')}); "
            "choose a nearer target (metres, not millimetres)"
        )


TARGET_COLUMNS = ("target_x", "target_y", "target_yaw")
START_COLUMNS = ("start_x", "start_y", "start_yaw")


def read_targets(path: str, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts (t, 3), targets (t, 3)) from a CSV with a header: target_x, target_y, target_yaw (m, m, rad),
    and optionally start_x, start_y, start_yaw (default: `start`, the --start pose, for every row).

    Raises:
        ValueError: naming the file, and the row or column, for anything else.
    """
    targets, starts, _ = read_columns(path, "--targets", TARGET_COLUMNS, START_COLUMNS, what="target")
    if starts is None:
        starts = np.tile(np.asarray(start, np.float64), (len(targets), 1))
    return starts, targets


def run_optimize(
    model_dir: str | None,
    params_path: str | None,
    shape: str,
    starts: np.ndarray,
    targets: np.ndarray,
    config,
    *,
    engine: str = "auto",
    seed: int = 0,
    progress=None,
    where: str = "--target",
) -> dict:
    """`clashx optimize`: for each (start, target) row, the strike that brings the block from the start to the
    target, by CMA-ES over hybrid rollouts; all targets searched at once (`clashx.optimize.optimize_strikes`:
    the CMA-ES states vmapped over targets, each generation's targets × population rollouts one batch).

    `engine` is "cpu-hybrid", "mjx-hybrid" or "auto" (`clashx.core._engine.resolve_engine`:
    the MJX hybrid on a GPU, else the CPU hybrid); the result names the engine that ran.  Target i
    is searched with key `jax.random.split(PRNGKey(seed), t)[i]`.

    Returns:
        {"searches": one `describe` per row (with the chosen strike's post-impact velocity and
        whether the energy guard clamped it), and the run's settings}.
    """
    geo.check_shape(shape)
    starts, targets = np.atleast_2d(np.asarray(starts, np.float64)), np.atleast_2d(np.asarray(targets, np.float64))
    engine = resolve_engine(engine, cpu="cpu-hybrid", accelerator="mjx-hybrid")
    model = load_or_shipped(model_dir, shape)
    if model.shape != shape:
        raise ValueError(f"{model_dir}: the surrogate is for the {model.shape!r} block, not --shape {shape!r}")
    params = _params_for(model_dir, model, params_path)
    named = dict(zip(model.space.names, params.tolist(), strict=True))
    for i, (start, target) in enumerate(zip(starts, targets, strict=True)):
        check_reach(start, target, named, where if len(targets) == 1 else f"{where} line {i + 2}, target")
    t0 = time.perf_counter()
    sims: dict = {}
    key = jax.random.PRNGKey(seed)
    res = optimize_strikes(
        engine, shape, params, starts, targets, config, key=key, handler=model, sims=sims, progress=progress
    )
    res = jax.block_until_ready(res)
    elapsed = time.perf_counter() - t0
    searches = [describe(jax.tree.map(lambda x, i=i: x[i], res), starts[i], targets[i]) for i in range(len(targets))]
    for out in searches:
        if not np.isfinite(out["predicted_rest_pose"]).all():
            raise ValueError(
                f"the search ended on a non-finite rest pose ({out['predicted_rest_pose']}); check --params "
                f"({params_path or 'the parameters in the model folder'}) and the model (`clashx evaluate`)"
            )
    # the chosen strikes once more on the CPU hybrid: what the handler predicted and whether the
    # energy guard had to clamp it (never silent)
    check = strike_rollouts_c(cached_hybrid(sims, shape), model, clip_to_ranges(res.strike), params)
    for i, out in enumerate(searches):
        out["post_velocity"] = np.asarray(check.post_velocity[i], float).tolist()
        out["impact_clamped"] = bool(check.clamped[i])
    return dict(
        searches=searches,
        shape=shape,
        engine=engine,
        model=model_name(model_dir, model),
        params=dict(zip(model.space.names, np.asarray(params, float).tolist(), strict=True)),
        population=config.population,
        generations=config.generations,
        targets=len(targets),
        seed=seed,
        time_s=elapsed,
    )

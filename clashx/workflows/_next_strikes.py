"""The RSR loop's data collection: a few random strikes, then plan → run in the lab → identify, to a budget.

`strike_loop` takes the lab as a function (`run_lab(strikes) -> recording`), so
any lab passes through it: the strike lab (`bench/next_strikes.py` wraps
`strike_lab.Lab`), a real rig's driver, or a simulator standing in for one.  It
never sees the lab's parameters, only the recordings it returns.

Each planned batch is predicted by the fit before it ran, so its residuals are
held out; pooled over every batch, their upper bound (`pooled_error(upper=True)`:
the mean plus two standard errors) is the model error the criteria plan from.
"infogap" trusts the surrogate's parameters only once that bound is within the
label noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from ..core import PRNGKeyArray
from ..learn import LabFitConfig, fit_recording
from ..optimize import PlanConfig, error_terms, plan, pooled_error
from ..scenes import StrikeScene, sample_strikes
from ..surrogate import StrikeSurrogate

CHECKPOINTS = (3, 5, 8, 10, 15, 20)
# Identification inside the loop: the two-stage fit without local re-distillation and fine-tuning
# (they cost ~10 s a fit and neither changes which strikes are informative).
LOOP_FIT = LabFitConfig(local=None, finetune=None, slides_required=False)
_PER_STRIKE = ("strike", "start_pose", "final_pose", "post_velocity_true", "t_first_touch", "touched")
_PER_SAMPLE = ("t", "block_pose", "striker_xy")  # ragged: strike i owns samples offsets[i]:offsets[i+1]


def concat_recordings(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One strike recording from several (strike_lab.py's packed format: ragged tracks with offsets)."""
    out = dict(parts[0])
    lens = [int(np.asarray(p["offsets"])[-1]) for p in parts]
    shifts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    out["offsets"] = np.concatenate(
        [[0]] + [np.asarray(p["offsets"])[1:] + s for p, s in zip(parts, shifts, strict=True)]
    ).astype(np.int64)
    for k in (*_PER_SAMPLE, *_PER_STRIKE):
        if k in parts[0]:
            out[k] = np.concatenate([np.asarray(p[k]) for p in parts])
    return out


def slice_recording(recording: dict[str, Any], lo: int, hi: int) -> dict[str, Any]:
    """Strikes lo..hi-1 of a strike recording as a recording of their own (`concat_recordings`' inverse)."""
    off = np.asarray(recording["offsets"])
    if not 0 <= lo < hi <= len(off) - 1:
        raise ValueError(f"strikes {lo}..{hi - 1}: the recording has {len(off) - 1}")
    out = dict(recording)
    out["offsets"] = (off[lo : hi + 1] - off[lo]).astype(np.int64)
    for k in _PER_SAMPLE:
        if k in recording:
            out[k] = np.asarray(recording[k])[off[lo] : off[hi]]
    for k in _PER_STRIKE:
        if k in recording:
            out[k] = np.asarray(recording[k])[lo:hi]
    return out


def strike_loop(
    model: StrikeSurrogate,
    sim: StrikeScene,
    run_lab: Callable[[np.ndarray], dict[str, Any]],
    *,
    key: PRNGKeyArray,
    criterion: str = "infogap",
    start: int = 3,
    checkpoints: Sequence[int] = CHECKPOINTS,
    fit_config: LabFitConfig = LOOP_FIT,
    report: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Spend a strike budget (the last checkpoint) the way `criterion` chooses, identifying at every checkpoint.

    The first `start` strikes are random for every criterion: the same ones for
    each criterion given the same key.  (Planned from the prior instead, the
    "infogap" loop's first three strikes were the ranges' centre and its
    neighbours, a face-centre strike that says little about the striker's
    friction; at 3 strikes that lost 0.08-0.29 of α-accuracy to random strikes
    on 4 of 9 lab-shape pairs, `bench/next_strikes.py --seed 7`.)

    Args:
        model: the shape's surrogate; sim: its strike scene.
        run_lab: runs strikes (k, 3) in the lab, the block put back at its start before each,
            and returns their recording.
        key: PRNG key of the starting strikes, the candidates and the fits.
        criterion: `clashx plan`'s criterion.
        start: random strikes before the first fit (the first checkpoint must be ≥ start).
        checkpoints: strike counts at which to identify (and report); the last is the budget.
        fit_config: `fit_recording`'s settings.

    Returns:
        One dict per checkpoint: "n", "params", "std", "model" (the fit's surrogate), "strikes" so
        far, "error" (the held-out model error's upper bound so far, None before the first planned batch) and
        "modes" (what each plan planned with).
    """
    checkpoints = sorted(int(c) for c in checkpoints)
    if not checkpoints or checkpoints[0] < start or start < 1:
        raise ValueError(f"checkpoints {checkpoints} must all be ≥ start ({start}) ≥ 1")
    k_start, k_loop = jax.random.split(key)
    strikes = np.asarray(sample_strikes(start, key=k_start), np.float64)
    modes = ["random"]
    parts = [run_lab(strikes)]
    out: list[dict[str, Any]] = []
    held: list[tuple[np.ndarray, np.ndarray]] = []  # each planned batch's error terms against the fit before it
    error: float | None = None
    step, previous = 0, None
    while True:
        recording = concat_recordings(parts)
        fit = fit_recording(
            model, sim, recording, where="lab", key=jax.random.fold_in(k_loop, 2 * step), config=fit_config
        )
        n = len(strikes)
        if previous is not None:
            prev_fit, prev_n = previous
            new = fit.rows[fit.rows >= prev_n]
            if len(new):
                held.append(
                    error_terms(
                        prev_fit.model, fit.events["strike"][new], fit.events["post_velocity"][new], prev_fit.params
                    )
                )
                pooled = [np.concatenate(t) for t in zip(*held, strict=True)]
                error = pooled_error(*pooled, upper=True) if len(pooled[0]) >= 2 else None  # one strike: no spread
        if n in checkpoints:
            out.append(
                {
                    "n": n,
                    "params": fit.params,
                    "std": fit.std,
                    "model": fit.model,
                    "strikes": strikes.copy(),
                    "error": error,
                    "modes": list(modes),
                }
            )
            if report is not None:
                report(f"{criterion}: {n} strikes identified")
        later = [c for c in checkpoints if c > n]
        if not later:
            return out
        config = PlanConfig(
            k=later[0] - n,
            criterion=criterion,
            seed=int(jax.random.randint(jax.random.fold_in(k_loop, 2 * step + 1), (), 0, 2**30)),
        )
        proposal = plan(fit.model, fit.params, std=fit.std, ran=strikes, error=error, config=config)
        nxt = np.asarray(proposal["strikes"], np.float64)
        modes.append(proposal["mode"])
        parts.append(run_lab(nxt))
        previous = (fit, n)
        strikes = np.concatenate([strikes, nxt])
        step += 1

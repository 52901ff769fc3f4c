"""`clashx identify` on strikes: one impulse family or both, from an event file or a recording (the file-level
step; `clashx.workflows._strike_workflow` reads the inputs, `clashx.learn` identifies)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import jax
import numpy as np

from ..core import PRNGKeyArray, write_json
from ..learn import FAMILIES, LabFitConfig, family_config, fit_family, identify, misfit_weights
from ..surrogate import StrikeSurrogate
from ._strike_workflow import (
    FAMILY_CHOICES,
    OUTSIDE,
    RealStrikes,
    count_outside,
    input_ranges,
    load_real,
    model_for,
    model_name,
)


def _identify_one(
    model: StrikeSurrogate,
    family: str,
    real: str,
    data: RealStrikes,
    *,
    sigma: np.ndarray | None,
    key: PRNGKeyArray,
    n_starts: int,
    label_weights: bool,
) -> dict:
    """One family's identification: {params, std, loss[, stages | label_weighting]} (names to values).

    A recording is fitted from its tracks (`clashx.learn.fit_family`, its labels weighed by their σ unless
    `label_weights` is False).  An event file's labels are fitted as they are; with `sigma` (each selected
    label's track σ; None: equal weights) the fit is weighed as a recording's joint stage is
    (`clashx.learn.misfit_weights`): an equal-weight fit gives the misfit, then the fit with each label weighed
    by 1 / (misfit + σ²).
    """
    if data.recording is not None:
        config = LabFitConfig(n_starts=n_starts, finetune=None, label_weights=label_weights)
        fit = fit_family(data.recording, family, key=key, model=model, where=real, rows=data.rows, config=config)
        params, std, loss = fit.params, fit.std, fit.report["joint"]["loss"]
        extra = {"stages": {k: fit.report[k] for k in ("ground", "stage1", "joint", "times")}}
    else:
        prior = dict(family_config(family).prior_std)

        def fit_events(weights=None):
            return jax.block_until_ready(identify(model, data.strikes, data.velocities, key=key, n_starts=n_starts,
                                                  prior_std=prior, weights=weights))  # fmt: skip

        res, extra = fit_events(), {}
        if sigma is not None:
            misfit = float(res.loss)
            w = misfit_weights(misfit, sigma)
            res = fit_events(w)
            extra = {"label_weighting": {"misfit": misfit, "weights": (w / w.mean()).tolist()}}
        params, std, loss = np.asarray(res.params), np.asarray(res.std), float(res.loss)
    if not (np.isfinite(params).all() and np.isfinite(loss)):
        raise ValueError(
            f"{real}: the {family} family's fit did not converge (non-finite parameters or loss); nothing was written"
        )
    names = model.space.names
    out = {
        "params": dict(zip(names, np.asarray(params, float).tolist(), strict=True)),
        "std": dict(zip(names, np.asarray(std, float).tolist(), strict=True)),
        "loss": float(loss),
    }
    return out | extra


def run_identify(
    model_dir: str | None,
    real: str,
    select: str | None,
    out: str,
    *,
    family: str = "mujoco",
    seed: int = 0,
    n_starts: int = 16,
    outside: float = OUTSIDE,
    report: Callable[[str], None] | None = None,
    label_weights: bool = True,
) -> dict:
    """`clashx identify`: fit the parameters on the selected strikes, write PARAMS.json; returns its content.

    On an event file: `clashx.identify` on its velocities (all parameters,
    the family's priors, `clashx.learn.family_config`).  On a recording: the
    two-stage identification of `clashx.learn._lab_fit` on its tracks (ground
    from the slides, impact through the surrogate, joint refinement), in
    `family` (`clashx.learn.fit_family`).  `family="both"` identifies each of
    `clashx.learn.FAMILIES` through its shipped surrogate and writes them all,
    with equal weights (`clashx.fit_families`' average): `clashx evaluate` and
    `clashx predict` then average the families' predictions.  Each label is weighed by its
    track's σ unless `label_weights` is False: on a recording as `LabFitConfig.label_weights` does, on an event
    file ingested from one by the σ it carries (`clashx.events.events_label_sigma`; `_identify_one`).  Selected
    rows without a track σ (simulated events, yours, `--method sim`'s) are weighed equally, and
    `label_weights=False` on them is refused as a flag that does nothing; a selection that mixes rows with and
    without one is refused (a label without σ would count as exact), naming the rows.
    """
    if n_starts < 1:
        raise ValueError(f"--starts {n_starts}: need at least one starting point (default 16)")
    if family not in FAMILY_CHOICES:
        raise ValueError(f"--family {family!r}: expected one of {', '.join(FAMILY_CHOICES)}")
    if family == "both" and model_dir:
        raise ValueError(
            "--model with --family both: each family is identified through its shipped surrogate; identify one "
            "family at a time (--family mujoco or compliant) to use your own run folder"
        )
    families = FAMILIES if family == "both" else (family,)
    models = {f: model_for(model_dir, real, f) for f in families}
    shape = next(iter(models.values())).shape
    data = load_real(real, select, shape)
    strikes, rows, recording = data.strikes, data.rows, data.recording is not None
    known = np.isfinite(data.label_sigma)
    if not recording and known.any() and not known.all() and label_weights:
        raise ValueError(
            f"{real}: rows {rows[~known].tolist()[:5]} carry no label σ while the other selected rows do (a label "
            "without one would count as exact); --select rows that all carry one, or pass --equal-label-weights"
        )
    if not recording and not known.any() and not label_weights:
        raise ValueError(
            f"--equal-label-weights: the selected rows of {real} carry no track σ (post_velocity_std from "
            "`clashx ingest --source strike-lab`), so their labels are weighed equally already; drop the flag"
        )
    weigh = label_weights and (recording or known.all())
    n_outside = count_outside(strikes, input_ranges(model_dir), rows, real, outside)
    size = max(m.space.size for m in models.values())
    if 3 * len(rows) < size and report is not None:
        report(
            f"warning: {len(rows)} strike(s) give {3 * len(rows)} numbers for {size} parameters; "
            "most stay at their prior (see the σ); fit on more strikes"
        )
    t0 = time.perf_counter()
    key = jax.random.PRNGKey(seed)
    sigma = data.label_sigma if weigh and not recording else None
    fits = {
        f: _identify_one(m, f, real, data, sigma=sigma, key=key, n_starts=n_starts, label_weights=label_weights)
        | {"model": model_name(model_dir, m)}
        for f, m in models.items()
    }
    record = {
        "shape": shape,
        "family": family,
        "events": os.path.abspath(real),
        "rows": rows.tolist(),
        "seed": seed,
        "n_starts": n_starts,
        "label_weights": "track sigma" if weigh else "equal",
        "outside_training_ranges": n_outside,
        "time_s": time.perf_counter() - t0,
    }
    if family == "both":
        record |= {"weights": dict.fromkeys(families, 1.0 / len(families)), "families": fits}
    else:
        record |= fits[family]
    write_json(out, record)
    return record

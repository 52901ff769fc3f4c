"""How well each strike's track measures its post-impact velocity: a σ per label, from the track alone.

`ingest_strike_lab` reads a strike's velocity at release off its slide (the
stop-time slide fit, `clashx.events._ingest_strike`).  A short slide (a slow
strike: a few samples before the block stops) leaves the stop time, and with
it the release speed, loosely determined.  `release_speed_sigma` reads that
looseness: the slide model's cost over a grid of stop times and veers (in
units of the recording's pooled position noise, the file's prior terms
included), taken as a posterior (exp(−cost/2), uniform in the stop time),
gives the release speed's spread; with the linear least-squares variance at
each grid point (at most what the deceleration bound leaves the speed),
relative to the posterior's mean speed, that is the σ.

Measured on 1,500 strikes of labs A, C and D (`bench/label_errors.py`,
against `post_velocity_true`, which this module never reads): the error of
(vx, vy) over σ has a median of 1.17-1.21, 72-75 % of the errors lie within
2 σ (heavier tails than a Gaussian's), and σ ranks the errors with a
Spearman correlation of 0.53-0.67; the fifth of the labels with the largest σ
have a median error of 0.12-0.13, four to six times the better half's.
The σ covers the translation (vx, vy) only; the spin's is not modelled.

Ingestion stores it with each label (`label_std`: the event file's
`post_velocity_std`, its meta marked `"label_sigma": TRACK_SIGMA`), and
`events_label_sigma` reads it back, for `clashx.fit_recording` and `clashx
identify` to weigh the labels by (`clashx.learn.misfit_weights`);
`clashx.events.track_label_sigma` gives it from a recording directly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core import Float
from ._slide_model import MAX_DECELERATION, MAX_VEER, STOP_RANGE, SlidePrior, Slides, project, slide_basis

GRID_STOPS, GRID_VEERS = 200, 31  # the posterior's grid: stop times (log-spaced over the fit's range) × veers


def release_speed_sigma(
    t: np.ndarray, pose: np.ndarray, t_release: float, *, point, noise, prior: SlidePrior, yaw0: float
) -> float:
    """The relative σ of one slide's release speed from its track (module docstring).

    Args:
        t, pose: the strike's track (as `fit_slide` takes them).
        t_release: its release instant, s.
        point: the block-frame point the slide model follows (the centre of mass).
        noise: (position m, yaw rad) of the samples.
        prior: the file's `SlidePrior` (its deceleration and veer terms enter the cost as in `fit_slide`).
        yaw0: the block's yaw at release (`SlideFit.yaw`), which the veer prior needs.
    """
    after = t >= t_release - 1e-9
    tau, yaw = t[after] - t_release, np.unwrap(pose[after, 2])
    cos, sin = np.cos(yaw), np.sin(yaw)
    z = pose[after, 0] + cos * point[0] - sin * point[1] + 1j * (pose[after, 1] + sin * point[0] + cos * point[1])
    log_stop, veer = np.meshgrid(
        np.linspace(math.log(STOP_RANGE[0]), math.log(STOP_RANGE[1]), GRID_STOPS),
        np.linspace(-MAX_VEER, MAX_VEER, GRID_VEERS),
        indexing="ij",
    )
    stop = np.exp(log_stop)
    basis = slide_basis(tau, stop, veer)
    c, _, sse = project(z, basis, stop, MAX_DECELERATION)
    cost = sse / noise[0] ** 2
    if prior.deceleration is not None:
        mean, sd = prior.deceleration
        cost = cost + ((np.abs(c) / stop - mean) / sd) ** 2
    if prior.veer is not None:
        r0, r1, r2, sd = prior.veer
        beta = np.angle(c) - yaw0
        cost = cost + ((veer - r0 - r1 * np.sin(2 * beta) - r2 * np.cos(2 * beta)) / sd) ** 2
    w = np.exp(-(cost - cost.min()) / 2) * stop  # the grid is uniform in log T: × T for uniform in T
    w /= w.sum()
    c_mean = np.sum(w * c)
    centred = basis - basis.mean(-1, keepdims=True)
    # the least-squares variance, at most what the deceleration bound leaves c (|c| ≤ MAX_DECELERATION · T)
    linear = np.minimum(
        noise[0] ** 2 / np.maximum(np.sum(np.abs(centred) ** 2, -1), 1e-300), (MAX_DECELERATION * stop) ** 2
    )
    spread = np.abs(c - c_mean) ** 2 + linear
    speed = float(np.sum(w * np.abs(c)))
    return math.sqrt(float(np.sum(w * spread))) / max(speed, 1e-9)


def slides_label_sigma(slides: Slides) -> Float[np.ndarray, "n"]:
    """Each strike's label's relative σ (n,) from its fitted slide (`release_speed_sigma`; NaN for a miss)."""
    out = np.full(len(slides.t_release), np.nan)
    for i, fit in zip(slides.rows, slides.fits, strict=True):
        t, pose = slides.tracks[i]
        out[i] = release_speed_sigma(
            t, pose, slides.t_release[i], point=slides.point, noise=slides.noise, prior=slides.prior, yaw0=fit.yaw
        )
    return out


TRACK_SIGMA = "relative σ of each label's release speed, read off its track (clashx.events._label_sigma)"


def label_std(post_velocity: Float[np.ndarray, "n 3"], sigma: Float[np.ndarray, "n"]) -> Float[np.ndarray, "n 3"]:
    """`post_velocity_std` (n, 3) of labels whose release speed has relative σ `sigma`.

    σ ‖(vx, vy)‖ / √2 on each of vx and vy (the spread is the speed vector's, shared by its two components), NaN
    for ωz (not modelled) and wherever σ or the label is unknown; ingestion marks the file's meta with
    `"label_sigma": TRACK_SIGMA`, and `events_label_sigma` reads σ back.
    """
    speed = np.linalg.norm(np.asarray(post_velocity, np.float64)[:, :2], axis=1)
    std = np.asarray(sigma, np.float64) * speed / math.sqrt(2.0)
    return np.stack([std, std, np.full_like(std, np.nan)], axis=1)


def events_label_sigma(events: Mapping[str, Any]) -> Float[np.ndarray, "n"]:
    """Each label's relative σ (n,) as stop-time ingestion stored it (`label_std`).

    ‖std(vx, vy)‖ / ‖(vx, vy)‖; NaN where the file gives no track σ: a miss, a label replaced by one measured
    otherwise, a zero speed, and every row of a file whose meta lacks `"label_sigma": TRACK_SIGMA` (simulated
    events, yours, or `clashx ingest --method sim`, whose `post_velocity_std` is MuJoCo's fit's, not a track σ).
    """
    n = len(events["post_velocity"])
    meta = events.get("meta", {})  # parsed by `load_events`, a JSON string in a dict `validate_events` returns
    meta = meta if isinstance(meta, dict) else json.loads(str(meta) or "{}")
    if not isinstance(meta, dict) or meta.get("label_sigma") != TRACK_SIGMA:
        return np.full(n, np.nan)
    std = np.asarray(events["post_velocity_std"], np.float64)[:, :2]
    speed = np.linalg.norm(np.asarray(events["post_velocity"], np.float64)[:, :2], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(speed > 0, np.linalg.norm(std, axis=1) / speed, np.nan)

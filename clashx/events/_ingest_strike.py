"""Strike-lab ingestion: motion-capture tracks of strikes → strike event files.

`ingest_strike_file(path)` reads a recording, validates it and returns a strike
event dict of the `clashx.events._events` format (scene "strike"); the caller writes
it with `clashx.events._events.save_events`, which is atomic.  The post-impact
velocity of every touched strike is estimated from the block's track after the
arm pulls the striker away (`estimate_post_velocity`); the lab's noise-free
`post_velocity_true`, when present, is never read.

Recording format (yours or `strike_lab.py`'s)
---------------------------------------------
A numpy `.npz` (no pickles) holding N strikes whose motion-capture tracks are
concatenated (T samples in all); strike i owns samples `offsets[i]:offsets[i+1]`.
SI units, world frame, time 0 = the striker's launch (SCENE.md).

| key | shape | meaning | needed |
|---|---|---|---|
| offsets | (N+1,) int | 0, ..., T: strictly increasing sample offsets | yes |
| t | (T,) | sample times, s after launch; increasing within each strike | yes |
| block_pose | (T, 3) | x, y (m), yaw (rad) of the block frame's origin | yes |
| strike | (N, 3) | θ, θ1 (rad), v_pre (m/s), within SCENE.md's ranges | yes |
| touched | (N,) bool | the striker touched the block | yes |
| t_first_touch | (N,) | first touch, s after launch; NaN for a miss | yes |
| shape | () str | "semi-cylinder", "square" or "triangle" | yes |
| striker_xy | (T, 2) | the striker's x, y (m) | optional |
| start_pose | (N, 3) | block pose at launch, used only if no sample precedes the touch | optional |
| final_pose | (N, 3) | the lab's final pose (not used) | optional |
| mocap_hz | () | capture rate, Hz (kept in meta) | optional |
| lab | () str | the lab's or rig's name (kept in meta) | optional |
| post_velocity_true | (N, 3) | scoring only; never read | optional |

Each touched strike needs at least `MIN_SLIDE_SAMPLES` samples at or after its
release (`t_first_touch` + `RELEASE_AFTER`); keep recording until the block has
rested for a few samples, since `rest_pose` is the mean of the last
`REST_SAMPLES` samples.  `start_pose` is the mean of the samples before first
touch (less `TOUCH_GUARD`: contact can begin at a margin before the recorded
touch) that stay within the noise of the first one.  The noise itself is
estimated from those samples (median absolute difference of consecutive
samples; `NOISE` when there are fewer than 20).  A miss (`touched` false)
becomes a row with NaN post-velocity, `t_touch` and `t_release`.  Pass
`source="user"` to `ingest_strike_lab` for your own rig.

How the velocity is estimated
-----------------------------
Samples between touch and release are in contact and are not used.  From the
release on, the block slides freely and stops.  The fit models the path of the
block's nominal centre of mass (where ground friction acts) as a planar slide
whose speed falls linearly to zero at a stop time T (Coulomb friction:
constant deceleration a) while the friction may pull at a constant angle to the
velocity (lateral to tangential deceleration ratio ρ, "veer"); with
z = x + iy and τ the time since release,

    ż(τ) = c (1 − τ/T)^(1 − iρ)  for τ < T, 0 after,
    z(τ) = z0 + c T (1 − (1 − τ/T)^(2 − iρ)) / (2 − iρ),

(ρ = 0: the constant-deceleration quadratic, held at rest after T), and the
yaw as a spin decelerating uniformly to rest at its own stop time Tr,
ψ(τ) = ψ0 + ω0 (τ − τ²/(2 Tr)) before Tr.  For fixed (T, ρ) and Tr the models
are linear in (z0, c) and (ψ0, ω0), so they are fitted by least squares over a
refined grid of the stop times and the veer (variable projection); the stopped
samples then pin the rest pose instead of biasing a free quadratic, and a
slide of a few samples stays bounded by `MAX_DECELERATION`.  The velocity of
the block frame's origin follows from c and ω0 (rigid body), turned into the
block frame by the fitted yaw at release.

Short slides carry little information, so `ingest_strike_lab` fits every
strike of a file twice: first alone, then with a `SlidePrior` pooled from the
file's well-measured strikes (one table, one block: the deceleration a, the
veer as a function of the heading in the block frame, and the spin
deceleration as α0 + κ|ω|/speed, torsional friction plus the spin-slide
coupling of distributed Coulomb friction; Goyal, Ruina & Papadopoulos, 1991).
Nothing is taken from the lab's parameter file.

On lab A's 200-strike files the median relative error (`clashx.events._metrics`)
of the ingested velocities is 4.2 % (square), 4.5 % (semi-cylinder) and 4.0 %
(triangle), 90th percentiles 13-17 %.  What remains is mostly motion-capture
noise on slow strikes (a block at 0.1 m/s slides 2 mm, four noise std) and,
for the semi-cylinder, a path that curves less regularly than the model.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from ..scenes import footprint_com
from ._events import EventFileError, Events, read_npz, validate_events
from ._ingest_checks import MIN_SLIDE_SAMPLES as MIN_SLIDE_SAMPLES
from ._ingest_checks import RELEASE_AFTER as RELEASE_AFTER
from ._ingest_checks import REQUIRED_KEYS as REQUIRED_KEYS
from ._ingest_checks import check_recording
from ._label_sigma import TRACK_SIGMA, label_std, slides_label_sigma
from ._slide_model import MAX_DECELERATION as MAX_DECELERATION
from ._slide_model import MAX_SPIN_DECELERATION as MAX_SPIN_DECELERATION
from ._slide_model import MAX_VEER as MAX_VEER
from ._slide_model import (
    MIN_POOLED,
    MIN_POOLED_VEER_LAW,
    REST_SAMPLES,
    STOP_RANGE,
    TOUCH_GUARD,
    grid_search,
    project,
    slide_basis,
    spin_basis,
)
from ._slide_model import NOISE as NOISE
from ._slide_model import WELL_MEASURED_SAMPLES as WELL_MEASURED_SAMPLES
from ._slide_model import SlideFit as SlideFit
from ._slide_model import SlidePrior as SlidePrior
from ._slide_model import Slides as Slides


def _fit_spin(tau, yaw, sigma, prior_spin, speed):
    """Fit ψ(τ); returns (ω0, ψ0, Tr)."""

    def cost(stop, _):
        w, psi0, sse = project(yaw, spin_basis(tau, stop), stop, MAX_SPIN_DECELERATION)
        j = sse / sigma**2
        if prior_spin is not None and speed is not None:
            a0, kappa, sd, cov = prior_spin
            x = np.abs(w) / max(speed, 1e-3)
            var = sd**2 + cov[0, 0] + 2 * cov[0, 1] * x + cov[1, 1] * x * x
            j = j + (np.abs(w) / stop - a0 - kappa * x) ** 2 / var
        return j, (w, psi0)

    stop, _, w, psi0 = grid_search(cost, np.linspace(*np.log(STOP_RANGE), 80), np.zeros(1))
    return float(w), float(psi0), float(stop)


def _fit_path(tau, z, sigma, prior: SlidePrior | None, yaw0: float):
    """Fit z(τ); returns (c, T, ρ)."""

    def cost(stop, veer):
        c, _, sse = project(z, slide_basis(tau, stop, veer), stop, MAX_DECELERATION)
        j = sse / sigma**2
        if prior is not None and prior.deceleration is not None:
            mean, sd = prior.deceleration
            j = j + ((np.abs(c) / stop - mean) / sd) ** 2
        if prior is not None and prior.veer is not None:
            r0, r1, r2, sd = prior.veer
            beta = np.angle(c) - yaw0
            j = j + ((veer - r0 - r1 * np.sin(2 * beta) - r2 * np.cos(2 * beta)) / sd) ** 2
        return j, (c,)

    stop, veer, c = grid_search(
        cost, np.linspace(np.log(STOP_RANGE[0]), np.log(STOP_RANGE[1]), 48), np.linspace(-MAX_VEER, MAX_VEER, 25)
    )
    return complex(c), float(stop), float(veer)


def fit_slide(
    t: np.ndarray,
    pose: np.ndarray,
    t_release: float,
    *,
    point=(0.0, 0.0),
    noise=NOISE,
    prior: SlidePrior | None = None,
) -> SlideFit:
    """Fit the free slide after release (module docs) and return its parameters.

    Args:
        t: (n,) sample times, s, increasing.
        pose: (n, 3) x, y (m), yaw (rad) of the block frame's origin, world.
        t_release: the release instant, s; samples before it are not used.
        point: (2,) block-frame point whose path is modelled, m: the centre of mass.
        noise: (position m, yaw rad) standard deviations of the samples.
        prior: pooled file-level knowledge (`slide_prior`), or None.

    Returns:
        A `SlideFit`; its `velocity` is what `estimate_post_velocity` returns.

    Raises:
        ValueError: on non-finite input or fewer than `MIN_SLIDE_SAMPLES` samples after release.
    """
    t = np.asarray(t, dtype=np.float64)
    pose = np.asarray(pose, dtype=np.float64)
    if t.ndim != 1 or pose.shape != (len(t), 3):
        raise ValueError(f"t must be (n,) and pose (n, 3); got {t.shape} and {pose.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(pose)) and math.isfinite(t_release)):
        raise ValueError("t, pose and t_release must be finite")
    after = t >= t_release - 1e-9
    if after.sum() < MIN_SLIDE_SAMPLES:
        raise ValueError(f"{int(after.sum())} samples at or after release; need at least {MIN_SLIDE_SAMPLES}")
    tau = t[after] - t_release
    yaw = np.unwrap(pose[after, 2])
    sig_p, sig_y = float(noise[0]), float(noise[1])
    px, py = float(point[0]), float(point[1])
    cos, sin = np.cos(yaw), np.sin(yaw)
    z = pose[after, 0] + cos * px - sin * py + 1j * (pose[after, 1] + sin * px + cos * py)
    # The veer prior needs the yaw at release, the spin prior the speed: fit the spin once
    # without its prior, the path, then the spin again.
    rate, yaw0, spin_stop = _fit_spin(tau, yaw, sig_y, None, None)
    c, stop, veer = _fit_path(tau, z, sig_p, prior, yaw0)
    if prior is not None and prior.spin is not None:
        rate, yaw0, spin_stop = _fit_spin(tau, yaw, sig_y, prior.spin, abs(c))
    # Rigid body: the origin moves with the point plus ω × (origin − point).
    r = -complex(math.cos(yaw0) * px - math.sin(yaw0) * py, math.sin(yaw0) * px + math.cos(yaw0) * py)
    v_origin = (c + 1j * rate * r) * complex(math.cos(yaw0), -math.sin(yaw0))
    return SlideFit(
        velocity=np.array([v_origin.real, v_origin.imag, rate]),
        yaw=yaw0,
        speed=abs(c),
        heading=math.atan2(c.imag, c.real),
        stop_time=stop,
        veer=veer,
        rate=rate,
        spin_stop_time=spin_stop,
        slide_samples=int(np.sum(tau < stop)),
        spin_samples=int(np.sum(tau < spin_stop)),
    )


def estimate_post_velocity(
    t: np.ndarray,
    pose: np.ndarray,
    t_release: float,
    *,
    point=(0.0, 0.0),
    noise=NOISE,
    prior: SlidePrior | None = None,
) -> np.ndarray:
    """Post-impact velocity of the block at release, estimated from its noisy track after release.

    Fits the stop-time slide model of the module docs to the samples at or
    after `t_release` and evaluates its velocity at `t_release`.

    Args:
        t: (n,) sample times, s, increasing (120 Hz in the lab).
        pose: (n, 3) x, y (m), yaw (rad) of the block frame's origin, world frame.
        t_release: the instant the striker is pulled away, s (first touch + 0.02 s).
        point: (2,) block-frame point whose path follows the friction model, m;
            pass the centre of mass (`footprint_com(shape)`); the default is the origin.
        noise: (position m, yaw rad) standard deviations of the samples; they
            weigh the data against `prior`.
        prior: a `SlidePrior` pooled over strikes on the same table, or None.

    Returns:
        (3,) vx, vy (m/s) of the block frame's origin and ωz (rad/s), in the
        block frame at release (world velocity turned by −yaw).

    Example::

        v = estimate_post_velocity(t, pose, t_touch + 0.02, point=footprint_com("square"))
    """
    return fit_slide(t, pose, t_release, point=point, noise=noise, prior=prior).velocity


# -- pooling across strikes ------------------------------------------------------------------------


def _robust_lstsq(x: np.ndarray, y: np.ndarray, floor: float):
    """Least squares with 3-sigma trimming; returns (coef, residual std, coef covariance)."""
    keep = np.ones(len(y), bool)
    for _ in range(4):
        coef = np.linalg.lstsq(x[keep], y[keep], rcond=None)[0]
        r = y - x @ coef
        s = max(1.4826 * float(np.median(np.abs(r[keep]))), floor)
        keep = np.abs(r) <= 3.0 * s
    coef = np.linalg.lstsq(x[keep], y[keep], rcond=None)[0]
    r = y[keep] - x[keep] @ coef
    s = max(1.4826 * float(np.median(np.abs(r))), floor)
    cov = s**2 * np.linalg.pinv(x[keep].T @ x[keep])
    return coef, s, cov


def slide_prior(fits: list[SlideFit], noise=NOISE) -> SlidePrior:
    """Pool what strikes on one table share from their individual fits (module docs).

    A strike counts for the deceleration and veer if its slide spans at least
    `WELL_MEASURED_SAMPLES` samples, for the spin if its spin spans at least 4
    samples and turns by at least 10 yaw-noise standard deviations.  A term is
    None when fewer than `MIN_POOLED` strikes count.

    Args:
        fits: `fit_slide` results without a prior, one per touched strike.
        noise: (position m, yaw rad) standard deviations of the samples.

    Returns:
        A `SlidePrior`.
    """
    slides = [f for f in fits if f.slide_samples >= WELL_MEASURED_SAMPLES and f.stop_time < STOP_RANGE[1] / 2]
    deceleration = veer = spin = None
    if len(slides) >= MIN_POOLED:
        a = np.array([f.deceleration for f in slides])
        med = float(np.median(a))
        deceleration = (med, max(1.4826 * float(np.median(np.abs(a - med))), 0.03 * med))
        rho = np.array([f.veer for f in slides])
        if len(slides) >= MIN_POOLED_VEER_LAW:
            beta = np.array([f.block_heading for f in slides])
            basis = np.stack([np.ones_like(beta), np.sin(2 * beta), np.cos(2 * beta)], 1)
            coef, s, _ = _robust_lstsq(basis, rho, 0.02)
        else:
            (r0,), s, _ = _robust_lstsq(np.ones((len(rho), 1)), rho, 0.02)
            coef = np.array([r0, 0.0, 0.0])
        veer = (float(coef[0]), float(coef[1]), float(coef[2]), s)
    spins = [
        f
        for f in fits
        if f.spin_samples >= 4
        and f.spin_stop_time < STOP_RANGE[1] / 2
        and abs(f.rate) * f.spin_stop_time / 2 >= 10 * noise[1]
        and f.speed > 0
    ]
    if len(spins) >= MIN_POOLED:
        alpha = np.array([f.spin_deceleration for f in spins])
        x = np.array([abs(f.rate) / f.speed for f in spins])
        floor = 0.1 * float(np.median(alpha))
        coef, s, cov = _robust_lstsq(np.stack([np.ones_like(x), x], 1), alpha, floor)
        # Noise in ω enters both α and x and fakes a slope: keep the coupling term only when
        # it is clearly resolved (lab A: t ≥ 13 where it is real, ≤ 6 where it is not).
        if coef[1] < 8.0 * math.sqrt(cov[1, 1]):
            coef, s, cov1 = _robust_lstsq(np.ones((len(x), 1)), alpha, floor)
            coef, cov = np.array([coef[0], 0.0]), np.array([[cov1[0, 0], 0.0], [0.0, 0.0]])
        spin = (float(coef[0]), float(coef[1]), s, cov)
    return SlidePrior(deceleration, veer, spin)


# -- validation and ingestion ------------------------------------------------------------------------


def _wrap(angle: float) -> float:
    return float((angle + math.pi) % (2 * math.pi) - math.pi)


def _mean_pose(pose: np.ndarray) -> np.ndarray:
    yaw = np.unwrap(pose[:, 2])
    return np.array([pose[:, 0].mean(), pose[:, 1].mean(), _wrap(float(yaw.mean()))])


def _at_rest_before(t: np.ndarray, pose: np.ndarray, t_touch: float) -> np.ndarray:
    """Samples before first touch (all of a miss's): the block rests there, unless pushed early."""
    return pose[t < t_touch - TOUCH_GUARD] if math.isfinite(t_touch) else pose


def pooled_noise(tracks, touches) -> tuple[float, float]:
    """Noise std from consecutive differences of the samples before first touch; NOISE if too few.

    Uses the median absolute difference, so a block already nudged before the
    recorded touch does not inflate it.
    """
    dp: list[np.ndarray] = []
    dy: list[np.ndarray] = []
    for (t, pose), tt in zip(tracks, touches, strict=True):
        d = np.diff(_at_rest_before(t, pose, tt), axis=0)
        dp.append(d[:, :2].ravel())
        dy.append((d[:, 2] + math.pi) % (2 * math.pi) - math.pi)
    dps, dys = np.concatenate(dp), np.concatenate(dy)
    if len(dys) < 20:
        return NOISE
    scale = 1.4826 / math.sqrt(2.0)  # median |difference| of N(0, 2σ²) → σ
    return max(scale * float(np.median(np.abs(dps))), 1e-5), max(scale * float(np.median(np.abs(dys))), 1e-4)


def start_pose_before_touch(t: np.ndarray, pose: np.ndarray, t_touch: float, noise) -> np.ndarray | None:
    """Mean of the leading samples that stay within the noise of the first one, before first touch."""
    before = _at_rest_before(t, pose, t_touch)
    if not len(before):
        return None
    dev = np.abs(before - before[0])
    dev[:, 2] = np.abs((before[:, 2] - before[0, 2] + math.pi) % (2 * math.pi) - math.pi)
    tol = 6.0 * math.sqrt(2.0) * np.array([noise[0], noise[0], noise[1]])
    moved = np.any(dev > tol, axis=1)
    return _mean_pose(before[: int(np.argmax(moved)) if moved.any() else len(before)])


def recording_slides(raw: dict[str, Any], where: str = "recording") -> Slides:
    """The slide fits of a recording's touched strikes (`ingest_strike_lab`'s: pooled noise, prior, centre of mass)."""
    shape, off = check_recording(raw, where)
    touched = np.asarray(raw["touched"]).astype(bool)
    t_touch = np.where(touched, np.asarray(raw["t_first_touch"], np.float64), np.nan)
    t_all, pose_all = np.asarray(raw["t"], np.float64), np.asarray(raw["block_pose"], np.float64)
    tracks = [(t_all[a:b], pose_all[a:b]) for a, b in zip(off[:-1], off[1:], strict=True)]
    noise, point = pooled_noise(tracks, t_touch), footprint_com(shape)
    rows = np.flatnonzero(touched)
    t_release = t_touch + RELEASE_AFTER
    prior = slide_prior([fit_slide(*tracks[i], t_release[i], point=point, noise=noise) for i in rows], noise)
    fits = [fit_slide(*tracks[i], t_release[i], point=point, noise=noise, prior=prior) for i in rows]
    return Slides(shape, rows, fits, tracks, t_release, noise, point, prior)


def ingest_strike_lab(
    raw: dict[str, Any], where: str, *, source: str = "strike-lab", label_sigma: bool = True
) -> dict[str, np.ndarray]:
    """Turn a strike recording (the lab's npz contents, module docs) into a strike event dict.

    Args:
        raw: the recording's arrays by key (module docs); `post_velocity_true` is ignored.
        where: the recording's name (its path) for error messages.
        source: the event file's `source` ("strike-lab"; "user" for your own rig).
        label_sigma: read each label's σ off its track into `post_velocity_std` (as long again as the slide
            fits: 1.5 s against 1.1 s for 200 strikes); False for a caller that never weighs the labels (the
            column stays unknown, NaN).

    Returns:
        A validated strike event dict (`clashx.events._events` format, N rows): params
        NaN, post_velocity estimated from the track, post_velocity_std its σ read
        off the same track (`clashx.events._label_sigma.label_std`: vx and vy, NaN
        for ωz), t_touch the recorded first touch, t_release = t_touch + 0.02 s,
        start_pose the mean pose before the touch, rest_pose the mean of the last
        `REST_SAMPLES` samples; misses have NaN post_velocity, post_velocity_std,
        t_touch and t_release.  Write it with `save_events`.

    Raises:
        EventFileError: naming `where`, the strike (row) and the fix, for any bad input.
    """
    slides = recording_slides(raw, where)  # checks the recording (check_recording) first
    shape, n, noise, point, prior = slides.shape, len(slides.tracks), slides.noise, slides.point, slides.prior
    touched = np.asarray(raw["touched"]).astype(bool)
    if not touched.any():
        raise EventFileError(
            f"{where}: the striker missed the block in all {n} strike(s) ('touched' is false throughout), so there "
            "is no impact to ingest; check the recording (shape, start pose) or record strikes that hit the block"
        )
    t_touch = np.where(touched, np.asarray(raw["t_first_touch"], dtype=np.float64), np.nan)
    given_start = np.asarray(raw["start_pose"], dtype=np.float64) if "start_pose" in raw else None

    start_pose = np.empty((n, 3))
    rest_pose = np.empty((n, 3))
    for i, (t, pose) in enumerate(slides.tracks):
        tracked = start_pose_before_touch(t, pose, t_touch[i], noise)
        if tracked is not None:
            start_pose[i] = tracked
        else:  # touched before the first sample: a real rig has only the track
            start_pose[i] = given_start[i] if given_start is not None else pose[0]
        rest_pose[i] = _mean_pose(pose[-REST_SAMPLES:])

    post_velocity = np.full((n, 3), np.nan)
    for i, fit in zip(slides.rows, slides.fits, strict=True):
        post_velocity[i] = fit.velocity  # estimate_post_velocity's, with the file's prior

    meta = {
        "lab": str(np.asarray(raw["lab"])) if "lab" in raw else "",
        "mocap_hz": float(np.asarray(raw["mocap_hz"])) if "mocap_hz" in raw else None,
        "release_after_s": RELEASE_AFTER,
        "estimator": "stop-time slide fit with pooled prior (clashx.events._ingest_strike)",
        "noise": list(noise),
        "fit_point": point.tolist(),
        "label_sigma": TRACK_SIGMA if label_sigma else None,
        "prior": {
            "deceleration": prior.deceleration,
            "veer": prior.veer,
            "spin": None if prior.spin is None else list(prior.spin[:3]),
        },
    }
    events = {
        "scene": "strike",
        "shape": shape,
        "source": source,
        "strike": np.asarray(raw["strike"], dtype=np.float64),
        "params": np.full((n, 3), np.nan),
        "post_velocity": post_velocity,
        "t_touch": t_touch,
        "t_release": t_touch + RELEASE_AFTER,
        "touched": touched,
        "start_pose": start_pose,
        "rest_pose": rest_pose,
        "meta": json.dumps(meta),
    }
    if label_sigma:  # else validate_events leaves the optional column unknown
        events["post_velocity_std"] = label_std(post_velocity, slides_label_sigma(slides))
    return validate_events(events, where=where)


def track_label_sigma(raw: dict[str, Any], where: str = "recording") -> np.ndarray:
    """(N,) each strike's label's relative σ read off its track (NaN for a miss): `fit_recording`'s `label_sigma`,
    as `ingest_strike_lab` stores it in `post_velocity_std` (`clashx.events._label_sigma`).

    Args:
        raw: a strike recording's arrays (module docs).
        where: its name for messages.

    Example:
        >>> sigma = track_label_sigma(read_npz("lab_a_square_fit.npz", "fit"))
    """
    return slides_label_sigma(recording_slides(raw, where))


def ingest_strike_file(path: str | os.PathLike) -> Events:
    """Load a strike recording (`.npz`, module docs), validate it and return its strike event dict.

    Args:
        path: the recording, e.g. the output of `strike_lab.py --out`.

    Returns:
        The strike `Events` of `ingest_strike_lab`; write them with `clashx.save_events`.

    Raises:
        EventFileError: for a missing or unreadable file and for any bad content (names file, strike and fix).
    """
    path = os.fspath(path)
    raw = read_npz(path, ".npz strike recording")
    return Events.from_arrays(ingest_strike_lab(raw, where=path), where=path)

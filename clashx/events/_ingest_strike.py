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
from typing import Any, NamedTuple

import numpy as np

from ..scenes import footprint_com
from ._events import EventFileError, read_npz, validate_events
from ._ingest_checks import MIN_SLIDE_SAMPLES as MIN_SLIDE_SAMPLES
from ._ingest_checks import RELEASE_AFTER as RELEASE_AFTER
from ._ingest_checks import REQUIRED_KEYS as REQUIRED_KEYS
from ._ingest_checks import check_recording

NOISE = (5e-4, 4e-3)  # default motion-capture noise std: position (m), yaw (rad) (SCENE.md)
REST_SAMPLES = 5  # last samples averaged into the rest pose
TOUCH_GUARD = 0.01  # s: samples this close before first touch may already move (contact begins at a margin)
MAX_DECELERATION = 15.0  # m/s², bound on the slide's deceleration: μ2 ≤ 1 gives 9.81
MAX_SPIN_DECELERATION = 500.0  # rad/s², bound on the spin's deceleration
MAX_VEER = 1.5  # bound on |ρ|: friction at most atan(1.5) ≈ 56° off the velocity
MIN_POOLED = 3  # well-measured strikes needed to pool a prior term
MIN_POOLED_VEER_LAW = 15  # ... and to resolve how the veer depends on the heading
WELL_MEASURED_SAMPLES = 12  # slide (or spin) samples that make a strike well measured
_STOP_RANGE = (1 / 480, 10.0)  # s, range of stop times searched


class SlidePrior(NamedTuple):
    """What one table and one block share across strikes, pooled by `slide_prior`.

    Any term may be None (not pooled: too few well-measured strikes).
    """

    deceleration: tuple[float, float] | None  # (mean, std) of the slide's deceleration a, m/s²
    veer: tuple[float, float, float, float] | None  # ρ = r0 + r1 sin 2β + r2 cos 2β; (r0, r1, r2, std)
    spin: tuple[float, float, float, np.ndarray] | None  # α = α0 + κ x, x = |ω|/speed; (α0, κ, std, 2×2 cov)


class SlideFit(NamedTuple):
    """One strike's fitted slide after release (see module docs for the model)."""

    velocity: np.ndarray  # (3,) vx, vy (m/s), ωz (rad/s) of the block frame's origin, block frame, at release
    yaw: float  # ψ0, yaw at release, rad (unwrapped)
    speed: float  # |c|, speed of the fitted point at release, m/s
    heading: float  # arg c, world direction of that velocity, rad
    stop_time: float  # T, s after release
    veer: float  # ρ, lateral over tangential deceleration
    rate: float  # ω0, rad/s
    spin_stop_time: float  # Tr, s after release
    slide_samples: int  # samples in [0, T)
    spin_samples: int  # samples in [0, Tr)

    @property
    def deceleration(self) -> float:
        """Tangential deceleration |c|/T of the fitted point, m/s²."""
        return self.speed / self.stop_time

    @property
    def spin_deceleration(self) -> float:
        """|ω0|/Tr, rad/s²."""
        return abs(self.rate) / self.spin_stop_time

    @property
    def block_heading(self) -> float:
        """β: direction of the fitted point's velocity in the block frame, rad."""
        return self.heading - self.yaw


# -- the slide model ----------------------------------------------------------------------------


def _slide_basis(tau: np.ndarray, stop: np.ndarray, veer: np.ndarray) -> np.ndarray:
    """z(τ) − z0 per unit c for each (T, ρ): shape stop.shape + tau.shape, complex."""
    stop, veer = stop[..., None], veer[..., None]
    x = np.minimum(tau / stop, 1.0)
    e = 2.0 - 1j * veer
    moving = x < 1.0
    power = np.where(moving, np.exp(e * np.log1p(-np.where(moving, x, 0.0))), 0.0)
    return stop * (1.0 - power) / e


def _spin_basis(tau: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """ψ(τ) − ψ0 per unit ω0 for each Tr: τ' − τ'²/(2 Tr), τ' = min(τ, Tr)."""
    stop = stop[..., None]
    s = np.minimum(tau, stop)
    return s - s * s / (2.0 * stop)


def _project(y: np.ndarray, basis: np.ndarray, stop: np.ndarray, bound: float):
    """Least squares y ≈ y0 + c·basis for each grid point, with |c| ≤ bound·stop.

    Returns (c, y0, sse), each of the grid's shape.
    """
    bm = basis.mean(-1, keepdims=True)
    bc = basis - bm
    yc = y - y.mean()
    den = np.maximum(np.sum(np.abs(bc) ** 2, -1), 1e-300)
    c = np.sum(np.conj(bc) * yc, -1) / den
    # A stop time too short for the motion would need an impossible deceleration.
    c = c * np.minimum(1.0, bound * stop / np.maximum(np.abs(c), 1e-300))
    y0 = y.mean() - c * bm[..., 0]
    r = y - y0[..., None] - c[..., None] * basis
    return c, y0, np.sum(np.abs(r) ** 2, -1)


def _search(cost_fn, log_stop: np.ndarray, veer: np.ndarray, zooms: int = 4):
    """Minimise cost_fn(stop, veer) -> (cost, extras) over a grid, then zoom around the best point."""
    for _ in range(zooms + 1):
        ls, vv = np.meshgrid(log_stop, veer, indexing="ij")
        cost, extras = cost_fn(np.exp(ls), vv)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        best = (np.exp(ls[i, j]), vv[i, j]) + tuple(x[i, j] for x in extras)
        d_ls = log_stop[1] - log_stop[0]
        log_stop = np.linspace(log_stop[i] - d_ls, log_stop[i] + d_ls, 9)
        if len(veer) > 1:
            d_v = veer[1] - veer[0]
            veer = np.linspace(veer[j] - d_v, veer[j] + d_v, 9)
    return best


def _fit_spin(tau, yaw, sigma, prior_spin, speed):
    """Fit ψ(τ); returns (ω0, ψ0, Tr)."""

    def cost(stop, _):
        w, psi0, sse = _project(yaw, _spin_basis(tau, stop), stop, MAX_SPIN_DECELERATION)
        j = sse / sigma**2
        if prior_spin is not None and speed is not None:
            a0, kappa, sd, cov = prior_spin
            x = np.abs(w) / max(speed, 1e-3)
            var = sd**2 + cov[0, 0] + 2 * cov[0, 1] * x + cov[1, 1] * x * x
            j = j + (np.abs(w) / stop - a0 - kappa * x) ** 2 / var
        return j, (w, psi0)

    stop, _, w, psi0 = _search(cost, np.linspace(*np.log(_STOP_RANGE), 80), np.zeros(1))
    return float(w), float(psi0), float(stop)


def _fit_path(tau, z, sigma, prior: SlidePrior | None, yaw0: float):
    """Fit z(τ); returns (c, T, ρ)."""

    def cost(stop, veer):
        c, _, sse = _project(z, _slide_basis(tau, stop, veer), stop, MAX_DECELERATION)
        j = sse / sigma**2
        if prior is not None and prior.deceleration is not None:
            mean, sd = prior.deceleration
            j = j + ((np.abs(c) / stop - mean) / sd) ** 2
        if prior is not None and prior.veer is not None:
            r0, r1, r2, sd = prior.veer
            beta = np.angle(c) - yaw0
            j = j + ((veer - r0 - r1 * np.sin(2 * beta) - r2 * np.cos(2 * beta)) / sd) ** 2
        return j, (c,)

    stop, veer, c = _search(
        cost, np.linspace(np.log(_STOP_RANGE[0]), np.log(_STOP_RANGE[1]), 48), np.linspace(-MAX_VEER, MAX_VEER, 25)
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
    slides = [f for f in fits if f.slide_samples >= WELL_MEASURED_SAMPLES and f.stop_time < _STOP_RANGE[1] / 2]
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
        and f.spin_stop_time < _STOP_RANGE[1] / 2
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


class Slides(NamedTuple):
    """Every touched strike's slide fit in a recording, as `ingest_strike_lab` fits it.

    Attributes:
        shape: the block's shape.
        rows: the touched strikes.
        fits: their `SlideFit`s (with the file's pooled prior).
        tracks: (t, pose) per strike of the recording.
        t_release: release instant per strike, s (NaN for a miss).
        noise: the pooled (position m, yaw rad) noise.
        point: the footprint's centre of mass, whose path the slide model follows.
        prior: the file's `SlidePrior`.
    """

    shape: str
    rows: np.ndarray
    fits: list[SlideFit]
    tracks: list[tuple[np.ndarray, np.ndarray]]
    t_release: np.ndarray
    noise: tuple[float, float]
    point: np.ndarray
    prior: SlidePrior


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


def ingest_strike_lab(raw: dict[str, Any], where: str, *, source: str = "strike-lab") -> dict[str, np.ndarray]:
    """Turn a strike recording (the lab's npz contents, module docs) into a strike event dict.

    Args:
        raw: the recording's arrays by key (module docs); `post_velocity_true` is ignored.
        where: the recording's name (its path) for error messages.
        source: the event file's `source` ("strike-lab"; "user" for your own rig).

    Returns:
        A validated strike event dict (`clashx.events._events` format, N rows): params
        NaN, post_velocity estimated from the track, t_touch the recorded first
        touch, t_release = t_touch + 0.02 s, start_pose the mean pose before the
        touch, rest_pose the mean of the last `REST_SAMPLES` samples; misses
        have NaN post_velocity, t_touch and t_release.  Write it with `save_events`.

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
    return validate_events(events, where=where)


def ingest_strike_file(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Load a strike recording (`.npz`, module docs), validate it and return its strike event dict.

    Args:
        path: the recording, e.g. the output of `strike_lab.py --out`.

    Returns:
        The event dict of `ingest_strike_lab`; write it with `clashx.events._events.save_events`.

    Raises:
        EventFileError: for a missing or unreadable file and for any bad content (names file, strike and fix).
    """
    path = os.fspath(path)
    raw = read_npz(path, ".npz strike recording")
    return ingest_strike_lab(raw, where=path)

"""The stop-time slide model's pieces (`clashx.events._ingest_strike` fits it, `clashx.events._label_sigma` reads
each label's σ off it): its constants and bounds, the fitted quantities, the path bases and their least squares."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

NOISE = (5e-4, 4e-3)  # default motion-capture noise std: position (m), yaw (rad) (SCENE.md)
REST_SAMPLES = 5  # last samples averaged into the rest pose
TOUCH_GUARD = 0.01  # s: samples this close before first touch may already move (contact begins at a margin)
MAX_DECELERATION = 15.0  # m/s², bound on the slide's deceleration: μ2 ≤ 1 gives 9.81
MAX_SPIN_DECELERATION = 500.0  # rad/s², bound on the spin's deceleration
MAX_VEER = 1.5  # bound on |ρ|: friction at most atan(1.5) ≈ 56° off the velocity
MIN_POOLED = 3  # well-measured strikes needed to pool a prior term
MIN_POOLED_VEER_LAW = 15  # ... and to resolve how the veer depends on the heading
WELL_MEASURED_SAMPLES = 12  # slide (or spin) samples that make a strike well measured
STOP_RANGE = (1 / 480, 10.0)  # s, range of stop times searched


class SlidePrior(NamedTuple):
    """What one table and one block share across strikes, pooled by `slide_prior`.

    Any term may be None (not pooled: too few well-measured strikes).
    """

    deceleration: tuple[float, float] | None  # (mean, std) of the slide's deceleration a, m/s²
    veer: tuple[float, float, float, float] | None  # ρ = r0 + r1 sin 2β + r2 cos 2β; (r0, r1, r2, std)
    spin: tuple[float, float, float, np.ndarray] | None  # α = α0 + κ x, x = |ω|/speed; (α0, κ, std, 2×2 cov)


class SlideFit(NamedTuple):
    """One strike's fitted slide after release (the model: `clashx.events._ingest_strike`'s module docs)."""

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


def slide_basis(tau: np.ndarray, stop: np.ndarray, veer: np.ndarray) -> np.ndarray:
    """z(τ) − z0 per unit c for each (T, ρ): shape stop.shape + tau.shape, complex."""
    stop, veer = stop[..., None], veer[..., None]
    x = np.minimum(tau / stop, 1.0)
    e = 2.0 - 1j * veer
    moving = x < 1.0
    power = np.where(moving, np.exp(e * np.log1p(-np.where(moving, x, 0.0))), 0.0)
    return stop * (1.0 - power) / e


def spin_basis(tau: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """ψ(τ) − ψ0 per unit ω0 for each Tr: τ' − τ'²/(2 Tr), τ' = min(τ, Tr)."""
    stop = stop[..., None]
    s = np.minimum(tau, stop)
    return s - s * s / (2.0 * stop)


def project(y: np.ndarray, basis: np.ndarray, stop: np.ndarray, bound: float):
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


def grid_search(cost_fn, log_stop: np.ndarray, veer: np.ndarray, zooms: int = 4):
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

"""The table's spin law, pooled jointly over every strike of a recording.

A block sliding and spinning on a table loses its spin at a rate that one table
and one block share across strikes: α = α0 + κ x, x = |ω|/speed (torsional
friction plus the spin-slide coupling of distributed Coulomb friction; Goyal,
Ruina & Papadopoulos, 1991).  Pooling that law from each strike's own fit
(`clashx.events._ingest_strike.slide_prior`) needs several strikes whose spin is
well measured on its own; a file of ten strikes often has fewer, and then the
spin of every strike is fitted alone.

`spin_law` instead scores each candidate law (α0, κ) on *all* strikes at once:
for every strike the law fixes the spin's stop time as a function of its rate,
ψ(τ) = ψ0 + ω (τ' − τ'²/(2 Tr)), τ' = min(τ, Tr), Tr = |ω|/α, so the strike's
best fit under the law is a one-dimensional search (closed form in ψ0 and ω
for each Tr on a grid).  The law's score is the sum over strikes of the rise of
their χ² above their free fits, each through a Cauchy loss so that one strike
the law does not describe (a rocking block, a mis-recorded touch) cannot carry
the table.  Strikes that barely turn rise by nothing and do not vote.
"""

from __future__ import annotations

import numpy as np

STOP_GRID = np.exp(np.linspace(np.log(1 / 480), np.log(10.0), 240))  # s, spin stop times searched
ALPHA0_GRID = np.concatenate([[0.0], np.exp(np.linspace(np.log(1.0), np.log(500.0), 96))])  # rad/s²
KAPPA_GRID = np.concatenate([[0.0], np.exp(np.linspace(np.log(0.1), np.log(30.0), 60))])  # m/s² (α per |ω|/speed)
CAUCHY = 3.0  # χ² rise (in σ units, squared) where a strike's vote starts to saturate
KEEP_COUPLING = 9.0  # total score drop that keeps κ > 0 over the pure torsional law (a 3σ improvement)
MAX_RATE = 200.0  # rad/s, spins beyond this are not candidates


def _fit_under_law(tau: np.ndarray, y: np.ndarray, stop: np.ndarray, a0: np.ndarray, k: np.ndarray, speed: float):
    """Sum of squares of the centred yaw `y` under each law (α0, κ) with the spin stopping at `stop` (broadcast)."""
    # |ω| = (α0 + κ|ω|/v) Tr  ⇒  |ω| = α0 Tr / (1 − κ Tr / v); no finite rate where κ Tr ≥ v.
    den = 1.0 - k * stop / max(speed, 1e-6)
    w = np.where(den > 0, a0 * stop / np.where(den > 0, den, 1.0), np.inf)
    ok = w <= MAX_RATE
    w = np.where(ok, w, 0.0)
    s = np.minimum(tau, stop[..., None])
    b = s - s * s / (2.0 * stop[..., None])
    b = b - b.mean(-1, keepdims=True)
    syb, sbb = np.abs(b @ y), np.einsum("...n,...n->...", b, b)
    sse = y @ y - 2.0 * w * syb + w * w * sbb
    return np.where(ok, sse, np.inf)


def strike_scores(tau: np.ndarray, yaw: np.ndarray, sigma: float, speed: float) -> np.ndarray:
    """χ² rise of one strike's spin fit under each law of the grid over its free fit: (len α0, len κ).

    Under a law the only free shape parameter is the stop time Tr (the rate follows
    from it): it is searched on `STOP_GRID`, then refined continuously (golden
    section in log Tr between the grid neighbours of the best point), since the rate
    it implies must be resolved far finer than a grid step.

    Args:
        tau: (n,) s since release.
        yaw: (n,) unwrapped yaw, rad.
        sigma: yaw noise std, rad.
        speed: the strike's fitted slide speed at release, m/s (x = |ω|/speed).
    """
    y = yaw - yaw.mean()
    s = np.minimum(tau[None, :], STOP_GRID[:, None])
    b = s - s * s / (2.0 * STOP_GRID[:, None])
    b = b - b.mean(1, keepdims=True)
    syb, sbb = b @ y, np.einsum("rn,rn->r", b, b)
    free = y @ y - np.max(np.where(sbb > 0, syb**2 / np.maximum(sbb, 1e-300), 0.0))
    a0, k = np.meshgrid(ALPHA0_GRID, KAPPA_GRID, indexing="ij")
    den = 1.0 - k[..., None] * STOP_GRID / max(speed, 1e-6)
    w = np.where(den > 0, a0[..., None] * STOP_GRID / np.where(den > 0, den, 1.0), np.inf)
    ok = w <= MAX_RATE
    w = np.where(ok, w, 0.0)
    grid = np.where(ok, y @ y - 2.0 * w * np.abs(syb) + w * w * sbb, np.inf)  # (α0, κ, Tr)
    r = np.argmin(grid, axis=-1)
    step = np.log(STOP_GRID[1] / STOP_GRID[0])
    lo, hi = np.log(STOP_GRID[r]) - step, np.log(STOP_GRID[r]) + step
    g = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(16):  # golden section: the bracket shrinks to 1e-3 of a grid step
        m1, m2 = hi - g * (hi - lo), lo + g * (hi - lo)
        left = _fit_under_law(tau, y, np.exp(m1), a0, k, speed) <= _fit_under_law(tau, y, np.exp(m2), a0, k, speed)
        lo, hi = np.where(left, lo, m1), np.where(left, m2, hi)
    best = np.minimum(grid.min(-1), _fit_under_law(tau, y, np.exp((lo + hi) / 2), a0, k, speed))
    best = np.minimum(best, y @ y)  # ω = 0 (no spin) is always a fit of every law
    return np.maximum(best - free, 0.0) / sigma**2


def spin_law(strikes: list[tuple[np.ndarray, np.ndarray, float]], sigma: float) -> tuple[float, float]:
    """The spin law (α0, κ) that best fits all strikes at once (module docs).

    Args:
        strikes: per strike (τ since release (n,), unwrapped yaw (n,), fitted slide speed m/s).
        sigma: yaw noise std, rad.

    Returns:
        (α0 rad/s², κ m/s²): κ is 0 unless the coupling lowers the total score
        by at least `KEEP_COUPLING`.
    """
    total = np.zeros((len(ALPHA0_GRID), len(KAPPA_GRID)))
    for tau, yaw, speed in strikes:
        rise = strike_scores(tau, yaw, sigma, speed)
        total += CAUCHY**2 * np.log1p(rise / CAUCHY**2)
    i0 = int(np.argmin(total[:, 0]))
    i, j = np.unravel_index(int(np.argmin(total)), total.shape)
    if j == 0 or total[i0, 0] - total[i, j] < KEEP_COUPLING:
        return float(ALPHA0_GRID[i0]), 0.0
    return float(ALPHA0_GRID[i]), float(KAPPA_GRID[j])

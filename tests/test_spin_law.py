"""The table's spin law fitted jointly over strikes (`clashx.events._spin_law`), on closed-form yaw tracks."""

from __future__ import annotations

import numpy as np

from clashx.events._spin_law import spin_law, strike_scores

HZ = 120.0
YAW_NOISE = 4e-3  # rad, the lab's motion-capture yaw noise (SCENE.md)
LAW_TOL = 0.12  # relative error of the recovered law's α (grid step 10 %, ten noisy strikes)
NO_SPIN_RISE = 16.0  # χ² rise any law may cost a strike that does not spin (noise only; ≈ 4σ)


def yaw_track(rate: float, alpha: float, rng, n: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """(τ, yaw) of a spin that slows at `alpha` rad/s² from `rate` rad/s, sampled at 120 Hz with noise."""
    tau = np.arange(n) / HZ
    stop = abs(rate) / alpha if alpha > 0 else np.inf
    s = np.minimum(tau, stop)
    yaw = 0.3 + rate * (s - s * s / (2 * stop)) if rate and np.isfinite(stop) else 0.3 + rate * tau
    return tau, yaw + rng.normal(0.0, YAW_NOISE, n)


def torsional_strikes(alpha: float, seed: int, count: int = 10):
    rng = np.random.default_rng(seed)
    rates = rng.uniform(1.0, 8.0, count) * rng.choice([-1.0, 1.0], count)
    return [(*yaw_track(w, alpha, rng), 0.3) for w in rates]


def test_torsional_law_recovered_from_short_spins():
    # α = 90 rad/s²: a spin of 1-8 rad/s stops within 1-11 samples, too few to measure most alone.
    for seed in range(3):
        a0, kappa = spin_law(torsional_strikes(90.0, seed), YAW_NOISE)
        assert kappa == 0.0
        assert abs(a0 / 90.0 - 1.0) < LAW_TOL, a0


def test_coupled_law_recovered():
    rng = np.random.default_rng(5)
    strikes, x = [], []
    for _ in range(12):
        w = rng.uniform(2.0, 12.0) * rng.choice([-1.0, 1.0])
        v = rng.uniform(0.2, 0.6)
        x.append(abs(w) / v)
        strikes.append((*yaw_track(w, 5.0 + 4.0 * x[-1], rng), v))
    a0, kappa = spin_law(strikes, YAW_NOISE)
    assert kappa > 0.0
    law, truth = a0 + kappa * np.array(x), 5.0 + 4.0 * np.array(x)
    assert np.all(np.abs(law / truth - 1.0) < 2 * LAW_TOL), (a0, kappa)


def test_one_odd_strike_does_not_carry_the_law():
    strikes = torsional_strikes(90.0, 7)
    strikes[0] = (*yaw_track(15.0, 15.0, np.random.default_rng(0)), 0.3)  # a spin ten times more persistent
    a0, _ = spin_law(strikes, YAW_NOISE)
    assert abs(a0 / 90.0 - 1.0) < LAW_TOL, a0


def test_a_strike_without_spin_does_not_vote():
    tau, yaw = yaw_track(0.0, 90.0, np.random.default_rng(1))
    assert strike_scores(tau, yaw, YAW_NOISE, 0.3).max() < NO_SPIN_RISE
    # ... while a measured spin rejects laws far from its own.
    tau, yaw = yaw_track(6.0, 90.0, np.random.default_rng(1))
    assert strike_scores(tau, yaw, YAW_NOISE, 0.3)[:, 0].max() > 100 * NO_SPIN_RISE

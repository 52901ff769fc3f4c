"""mujoco.sysid on recorded strike tracks (clashx.baselines._strike_sysid): recovery from synthetic recordings, bad input."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from clashx.baselines._strike_sysid import identify_tracks_sysid
from clashx.events._generate import sample_strikes
from clashx.events._tracks import read_tracks
from clashx.hybrid._strike_slide import strike_tracks_c
from clashx.scenes._strike_c import contact_phase_c

SHAPE = "square"
# The identified ones, off the prior's nominal (0.5, 0, 0).  Mass is not among them: on 0.3 s tracks it
# trades against μ2 along a valley (a lighter block leaves faster, a rougher ground stops it sooner) whose
# floor jumps with MuJoCo's contacts, and from the nominal the fit ends 25-80 % of its range off.
TRUTH = {"mu2": 0.3, "com_x": 0.004, "torsion": 0.01}
KNOWN = {"mass": 0.28}  # off its nominal 0.25 too, given to the fit as `base`
NOISE = (5e-4, 4e-3)  # mocap std: position (m), yaw (rad), as the lab's
HZ = 120.0
DURATION = 0.3  # s of track per strike (the lab's fit tracks are 0.19-0.35 s)
# 6 strikes, one start (the nominal) of 12 iterations: each free parameter within 5 % of its prior range
# of the truth, and the fit explains the tracks to the noise (mean squared residual in noise units ≈ 1).
# Measured: seed 4 0.3 % (loss 1.01), seed 5 6 %; seed 3's strikes trap the nominal start (loss 17) and
# need the random starts (3 starts: 0.6 %, loss 0.96), at twice the time.
UNIT_TOL = 0.05
LOSS_TOL = 1.3


def synthetic_recording(sim, params, n: int, *, seed: int) -> dict:
    """A recording (the lab's npz format) of n strikes simulated at `params`, with mocap-level noise."""
    strikes = np.asarray(sample_strikes(n, key=jax.random.PRNGKey(seed)), np.float64)
    rng = np.random.default_rng(seed)
    start = np.c_[rng.uniform(-0.2, 0.2, (n, 2)), rng.uniform(-np.pi, np.pi, n)]
    times = [np.arange(0.0, DURATION, 1 / HZ) for _ in range(n)]
    tracks = strike_tracks_c(sim, strikes, params, times, start)
    pose = np.concatenate(tracks)
    pose += rng.normal(size=pose.shape) * np.array([NOISE[0], NOISE[0], NOISE[1]])
    pose[:, 2] = (pose[:, 2] + np.pi) % (2 * np.pi) - np.pi  # a recorder wraps the yaw
    touch = contact_phase_c(sim, strikes, np.broadcast_to(params, (n, len(params))))
    return {
        "offsets": np.r_[0, np.cumsum([len(t) for t in times])],
        "t": np.concatenate(times),
        "block_pose": pose,
        "strike": strikes,
        "start_pose": start,
        "touched": np.asarray(touch.touched, bool),
        "t_first_touch": np.asarray(touch.t_touch, np.float64),
        "shape": np.asarray(SHAPE),
    }


def test_recovers_free_parameters_from_noisy_tracks(strike_sims):
    sim = strike_sims(SHAPE)
    truth = sim.space.vector(**TRUTH, **KNOWN)
    rec = synthetic_recording(sim, truth, 6, seed=4)
    assert rec["touched"].all()
    res = identify_tracks_sysid(
        sim, rec, starts=1, key=jax.random.PRNGKey(0), max_iters=12, free=tuple(TRUTH), base=sim.space.vector(**KNOWN)
    )
    unit = np.asarray(sim.space.to_unit(res.params)) - np.asarray(sim.space.to_unit(truth))
    cols = [sim.space.index(k) for k in TRUTH]
    assert np.all(np.abs(unit[cols]) < UNIT_TOL), dict(zip(TRUTH, res.params[cols]))
    others = [j for j in range(sim.space.size) if j not in cols]
    np.testing.assert_allclose(res.params[others], truth[others], rtol=1e-6)  # held at `base`
    assert res.loss < LOSS_TOL
    assert res.start_losses.shape == (1,) and res.start_losses[0] == res.loss
    assert res.evaluations > 0 and res.iterations > 0


def test_best_of_several_starts(strike_sims):
    """The nominal start, then random ones; the reported loss is the least of the starts'."""
    sim = strike_sims(SHAPE)
    rec = synthetic_recording(sim, sim.space.vector(mu2=0.4), 2, seed=5)
    res = identify_tracks_sysid(sim, rec, starts=2, key=jax.random.PRNGKey(1), max_iters=2, free=("mu2",))
    assert res.start_losses.shape == (2,)
    assert res.loss == pytest.approx(float(res.start_losses.min()))


def test_no_touched_strike_raises(strike_sims):
    sim = strike_sims(SHAPE)
    rec = synthetic_recording(sim, sim.space.vector(), 2, seed=7)
    rec["touched"] = np.zeros(2, bool)
    rec["t_first_touch"] = np.full(2, np.nan)
    with pytest.raises(ValueError, match="touched"):
        identify_tracks_sysid(sim, rec, key=jax.random.PRNGKey(0))
    full = synthetic_recording(sim, sim.space.vector(), 2, seed=7)
    full["touched"] = np.array([False, True])
    with pytest.raises(ValueError, match="rows"):
        identify_tracks_sysid(sim, full, rows=[0], key=jax.random.PRNGKey(0))


def test_start_pose_from_the_samples_without_a_recorded_one(strike_sims):
    sim = strike_sims(SHAPE)
    rec = synthetic_recording(sim, sim.space.vector(), 3, seed=9)
    given = rec.pop("start_pose")
    *_, start, noise = read_tracks(rec)
    err = np.abs(start - given) / np.array([noise[0], noise[0], noise[1]])
    assert np.all(err < 4.0), err  # the mean of the samples at rest (one sample at least): within 4 std

"""The "MuJoCo identified" strike baseline: `mujoco.sysid` fits the scene to recorded tracks of the block.

What it fits
------------
The parameters named in `free` (default all eight of `sim.space`: μ1, μ2,
e1, time constant, mass, centre of mass x/y, torsion) to the recorded block
poses (x, y, yaw) of a recording's touched strikes, every sample from launch
(t = 0) to the end of the track: before the touch (at rest), during contact
and through the slide to rest.  The others keep `base` (default the prior's
nominal `sim.space.vector()`).

Residual
--------
For each sample, (simulated − recorded pose) / noise, the yaw difference
wrapped to (−π, π]; noise = (position, yaw) std estimated from the samples
before first touch as ingestion does (`clashx.events._ingest_strike.pooled_noise`; its
default 0.5 mm / 0.004 rad when there are too few, as on the lab's 120 Hz
tracks).  A simulated track is `clashx.hybrid._strike_slide.strike_tracks_c`: MuJoCo C
from the strike's start pose (the recording's `start_pose`, else the mean of
the samples before touch), contact phase then slide, interpolated at the
recorded times.  `mujoco.sysid`'s own rollout (`sysid_rollout`:
`mujoco.rollout` of one model under an open-loop control sequence) cannot
express the strike: the arm pulls the striker away 0.02 s after a *detected*
first touch (a state-triggered event) and the slide then runs on another
model and timestep; its `custom_rollout` hook would only wrap
`strike_tracks_c` in `SystemTrajectory` objects and rebuild an `MjModel` from
an `MjSpec` per finite-difference column, so we pass our residual instead.

Optimizer
---------
`mujoco.sysid.optimize(..., optimizer="mujoco")`, i.e. `mujoco.minimize.least_squares`
(regularised Gauss-Newton with box bounds via `mju_boxQP`, Armijo steps,
forward-difference Jacobian of step `eps`, options in `LM_OPTIONS`), which
takes any residual `(x, ParameterDict) -> ([r], ...)`.  The unknowns are the
free parameters' coordinates in the prior's unit cube (bounds [0, 1]; the
log-scaled time constant is searched in log space).  The optimizer asks for
all the Jacobian's columns at once, so one iteration is one
`strike_tracks_c` batch of free × strikes plus one of strikes per trial step.
`optimize`'s own `verbose` shadows the backend's, so the backend always runs
at full verbosity: it prints to `output` (a StringIO here) and ends each run
with one more Jacobian.  `starts` runs: the prior's nominal first, then
uniform draws in [0.1, 0.9] of the cube from `key`; the lowest final loss wins.
The cost jumps where contacts appear and vanish, so a run stops in a local
minimum; the starts are the only global search.

Cost: about starts × (max_iters + 1) × (free + 2) × strikes simulated strikes.
On the lab's 10-strike fit files, 8 free, 3 starts × 12 iterations: 3300-3900
strikes, 25-35 s on 2 shared cores (more iterations did not lower the loss).
"""

from __future__ import annotations

import io
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..core import PRNGKeyArray
from ..events import read_tracks
from ..hybrid import strike_tracks_c
from ..scenes import StrikeScene
from ._baselines import Identified

# mujoco.minimize.least_squares options.  eps: forward-difference step in unit-cube coordinates: the
# simulated tracks jump (contacts appear and vanish) every ~0.1-1 % of a prior range, so the default
# 1.5e-8, and 1e-3, difference across jumps or none and the fit stalls; 1e-2 recovered μ2, com_x and
# torsion of synthetic tracks to 2 % where 1e-3 missed by 10-70 %.  x_scale="jac" normalises the Jacobian's
# columns, so the regulariser mu is on the scale of 1; mu then starts at mu_min and grows by mu_factor
# per refused step: with the defaults (1e-6, 10**0.1) reaching a useful mu took ~100 refused steps,
# each a batch of rollouts.
LM_OPTIONS = {"eps": 1e-2, "x_scale": "jac", "mu_min": 1e-3, "mu_factor": 10**0.5}


def _wrap(angle: np.ndarray) -> np.ndarray:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def _from_unit(space, u: np.ndarray) -> np.ndarray:
    with jax.enable_x64(True):  # float32 would blur the finite-difference steps
        return np.asarray(space.from_unit(jnp.asarray(u, jnp.float64)), np.float64)


def _to_unit(space, values: np.ndarray) -> np.ndarray:
    with jax.enable_x64(True):
        return np.asarray(space.to_unit(jnp.asarray(values, jnp.float64)), np.float64)


def track_residuals(sim_poses: list[np.ndarray], poses: list[np.ndarray], noise) -> np.ndarray:
    """(Σ 3 k_i,) residuals (simulated − recorded) / noise of every sample, yaw wrapped."""
    scale = np.array([noise[0], noise[0], noise[1]])
    d = np.concatenate([s - p for s, p in zip(sim_poses, poses, strict=True)])
    d[:, 2] = _wrap(d[:, 2])
    return (d / scale).ravel()


def identify_tracks_sysid(
    sim: StrikeScene,
    recording: dict,
    *,
    rows=None,
    starts: int = 3,
    key: PRNGKeyArray,
    max_iters: int = 12,
    free: tuple[str, ...] | None = None,
    base: np.ndarray | None = None,
    nthread: int = 0,
) -> Identified:
    """Identify the scene's parameters from recorded strike tracks with `mujoco.sysid` (module docstring).

    Args:
        sim: the scene of the recording's shape.
        recording: a strike recording's arrays by key (`dict(np.load(path))`); `post_velocity_true` is not read.
        rows: indices of the strikes to fit (default all); misses among them are skipped.
        starts: optimizer runs: the nominal first, then random points of the prior from `key`.
        key: PRNG key of the random starts.
        max_iters: iterations of `mujoco.minimize.least_squares` per start.
        free: names of the parameters to identify (default all of `sim.space`).
        base: values of the others (default the prior's nominal `sim.space.vector()`).
        nthread: MuJoCo C threads (0: all CPUs).

    Returns:
        `Identified`: params (p,) in physical units; loss = mean squared residual (1 when the
        tracks are explained to the noise); iterations of all starts; evaluations = simulated
        strikes; start_losses (starts,) the final loss of each start.

    Raises:
        ValueError: no touched strike among `rows`, a row outside the recording, or starts < 1.

    Example: `identify_tracks_sysid(sim, dict(np.load(clashx.lab_recording("square", "fit"))), key=jax.random.PRNGKey(0))`.
    """
    from mujoco import sysid  # needs mujoco's sysid extra (absl-py, scipy, tabulate)

    if starts < 1:
        raise ValueError(f"identify_tracks_sysid: starts={starts}; give at least 1 (the prior's nominal)")
    strikes, times, poses, start_poses, noise = read_tracks(recording, rows)
    n = len(strikes)
    space = sim.space
    cols = [space.index(name) for name in (free if free is not None else space.names)]
    k = len(cols)
    base_u = _to_unit(space, space.vector() if base is None else base)
    nominal_u = _to_unit(space, space.vector())
    evaluations = 0

    def residuals(u: np.ndarray) -> np.ndarray:
        """(m, c) residuals of c unit-cube points (k, c), all simulated in one batch."""
        nonlocal evaluations
        full = np.tile(base_u, (u.shape[1], 1))
        full[:, cols] = np.clip(u.T, 0.0, 1.0)
        p = _from_unit(space, full)
        c = len(p)
        sim_poses = strike_tracks_c(
            sim, np.tile(strikes, (c, 1)), np.repeat(p, n, 0), times * c, np.tile(start_poses, (c, 1)), nthread=nthread
        )
        evaluations += c * n
        return np.stack([track_residuals(sim_poses[j * n : (j + 1) * n], poses, noise) for j in range(c)], 1)

    def residual_fn(x, _params):
        x = np.asarray(x, np.float64)
        r = residuals(x.reshape(k, -1))
        return [r if x.ndim == 2 else r[:, 0]], None, None

    u_rand = np.asarray(jax.random.uniform(key, (starts - 1, k), minval=0.1, maxval=0.9), np.float64)
    u0s = np.concatenate([np.clip(nominal_u[cols], 0.01, 0.99)[None], u_rand])  # mujoco.sysid warns at a bound
    best_u, best_loss, finals, iterations = None, math.inf, [], 0
    for u0 in u0s:
        pdict = sysid.ParameterDict({"unit": sysid.Parameter("unit", u0, np.zeros(k), np.ones(k))})
        opt, result = sysid.optimize(
            pdict,
            residual_fn,
            optimizer="mujoco",
            verbose=False,
            max_iters=max_iters,
            output=io.StringIO(),
            **LM_OPTIONS,
        )
        iterations += len(result.extras["objective"]) - 1  # its trace ends with a log of the end point
        u = opt.as_vector()
        r = residuals(u[:, None])[:, 0]
        loss = float(r @ r) / len(r)
        finals.append(loss)
        if loss < best_loss:
            best_u, best_loss = u, loss
    full = base_u.copy()
    full[cols] = best_u
    return Identified(
        params=_from_unit(space, full),
        loss=best_loss,
        iterations=iterations,
        evaluations=evaluations,
        start_losses=np.asarray(finals),
    )

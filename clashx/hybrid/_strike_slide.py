"""The block's slide after release on MuJoCo C: tracks predicted from a release state, and fitted to recordings.

From the release on (the arm has pulled the striker away) the block slides
on the ground alone, so its path depends on its state at release and on the
ground's parameters only.  The ground is the same everywhere, so the path
in the frame of the block's pose at release is the same wherever that pose
is: `local_tracks_c` simulates it once from the origin (the slide model of
the strike scene, MuJoCo C, `dt_slide` steps) and `to_world` places it, which
makes the derivatives with respect to the release pose exact.

A release state is six numbers: the velocity (vx, vy, ωz) of the block
frame's origin in the block frame (the collision event) and the pose
(x, y, yaw) at release.  `track_residuals` compares a predicted track with a
recorded one in units of the motion-capture noise; `track_jacobian` gives
its derivatives with respect to the velocity and any parameters of the
space by central differences (one batch of rollouts for all of them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..core import batch as _batch
from ..events import ingest_strike_lab, meta_dict, validate_events
from ..scenes import RELEASE_AFTER, StrikeScene, block_pose, contact_phase_c, make_strike_scene, slide_c
from ..scenes import geometry as geo
from ._strike_track import Query, place_track  # the one track rule, also MJX's

VELOCITY_STEP = 2e-3  # m/s and rad/s·r: central-difference step of the release velocity
PARAM_STEP = 1e-3  # central-difference step of a parameter, in units of its prior range


class Track(NamedTuple):
    """The recorded slide of one strike from its release on.

    Attributes:
        tau: (n,) sample times after release, s (≥ 0).
        pose: (n, 3) x, y (m), yaw (rad, unwrapped) of the block frame's origin, world.
    """

    tau: np.ndarray
    pose: np.ndarray


def _yaw(quat: np.ndarray) -> np.ndarray:
    w, x, y, z = quat[..., 0], quat[..., 1], quat[..., 2], quat[..., 3]
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def local_tracks_c(
    sim: StrikeScene, velocity: np.ndarray, params: np.ndarray, duration: float, *, nthread: int = 0
) -> np.ndarray:
    """Slides from the origin: the block at its rest height, yaw 0, moving at `velocity` (block frame).

    Args:
        sim: the strike scene (its slide model and parameter space).
        velocity: (n, 3) release velocities (vx, vy, ωz).
        params: (n, p) values of `sim.space`.
        duration: s of slide to simulate.
        nthread: MuJoCo C threads (0: all).

    Returns:
        (n, k + 1, 3) poses (x, y, unwrapped yaw) at t = 0, dt, ..., k·dt, k = ceil(duration / dt_slide).
    """
    velocity = np.asarray(velocity, np.float64)
    n = len(velocity)
    dt = sim.settings.dt_slide
    k = int(np.ceil(duration / dt)) + 1
    rest = np.asarray(sim.block_rest, np.float64)
    qpos = np.zeros((n, 10))
    qpos[:, 2] = rest[2]
    qpos[:, 3] = 1.0
    qvel = np.zeros((n, 9))
    qvel[:, 0:2] = velocity[:, 0:2]  # at yaw 0 the block frame is the world's
    qvel[:, 5] = velocity[:, 2]
    batch = _batch.make_batch(sim.mj_slide_model(), sim.space, sim.slide_rows, params, nsim=n, nthread=nthread)
    q = _batch.rollout(batch, qpos, qvel, k)["qpos"]
    q = np.concatenate([qpos[:, None], q], 1)
    return np.concatenate([q[..., 0:2], np.unwrap(_yaw(q[..., 3:7]), axis=1)[..., None]], -1)


def sample(local: np.ndarray, dt: float, tau: np.ndarray) -> np.ndarray:
    """Poses of one local track (k + 1, 3) at times `tau` (n,), linearly interpolated between steps."""
    x = np.clip(np.asarray(tau) / dt, 0.0, len(local) - 1 - 1e-9)
    i = np.floor(x).astype(int)
    w = (x - i)[:, None]
    return (1 - w) * local[i] + w * local[i + 1]


def to_world(local: np.ndarray, pose0: np.ndarray) -> np.ndarray:
    """Place local poses (..., 3) at the release pose `pose0` (x, y, yaw): rotate by yaw, shift."""
    c, s = np.cos(pose0[2]), np.sin(pose0[2])
    x = pose0[0] + c * local[..., 0] - s * local[..., 1]
    y = pose0[1] + s * local[..., 0] + c * local[..., 1]
    return np.stack([x, y, pose0[2] + local[..., 2]], -1)


def pose_jacobian(local: np.ndarray, pose0: np.ndarray) -> np.ndarray:
    """d to_world(local, pose0) / d pose0, (..., 3, 3): exact (the ground is the same everywhere)."""
    c, s = np.cos(pose0[2]), np.sin(pose0[2])
    jac = np.zeros((*local.shape[:-1], 3, 3))
    jac[..., 0, 0] = 1.0
    jac[..., 1, 1] = 1.0
    jac[..., 2, 2] = 1.0
    jac[..., 0, 2] = -s * local[..., 0] - c * local[..., 1]
    jac[..., 1, 2] = c * local[..., 0] - s * local[..., 1]
    return jac


def _scale(noise) -> np.ndarray:
    return 1.0 / np.array([noise[0], noise[0], noise[1]])


def track_residuals(predicted: np.ndarray, track: Track, noise) -> np.ndarray:
    """(n·3,) residuals of predicted poses (n, 3) against a recorded track, in units of the noise std."""
    return ((predicted - track.pose) * _scale(noise)).ravel()


class Linearised(NamedTuple):
    """Residuals of one recorded track and their derivatives at a release state and parameters.

    Attributes:
        residuals: (m,) predicted − recorded poses over the noise std, m = 3·samples.
        d_state: (m, 6) derivatives with respect to (vx, vy, ωz, x, y, yaw) at release.
        d_params: (m, q) derivatives with respect to the parameters named in `track_jacobian`'s `free`.
    """

    residuals: np.ndarray
    d_state: np.ndarray
    d_params: np.ndarray


def track_jacobian(
    sim: StrikeScene,
    tracks: Sequence[Track],
    states: np.ndarray,
    params: np.ndarray,
    noise,
    *,
    free: Sequence[str] = (),
    nthread: int = 0,
) -> list[Linearised]:
    """Residuals of every track and their derivatives, by central differences in one batch of C rollouts.

    Args:
        sim: the strike scene.
        tracks: one recorded slide per strike.
        states: (n, 6) release states (velocity in the block frame, pose).
        params: (n, p) or (p,) values of `sim.space`.
        noise: (position m, yaw rad) standard deviations of the samples.
        free: names of parameters to differentiate by (e.g. the ground's).
        nthread: MuJoCo C threads.

    Returns:
        One `Linearised` per track.
    """
    states = np.asarray(states, np.float64)
    n = len(tracks)
    params = np.broadcast_to(np.asarray(params, np.float64), (n, sim.space.size))
    cols = [sim.space.index(name) for name in free]
    span = np.array([sim.space.high[j] - sim.space.low[j] for j in cols])
    # worlds: each strike at its state, then ± a step of each velocity component and each free parameter
    k = 3 + len(cols)
    vel = np.repeat(states[:, None, :3], 1 + 2 * k, 1)
    par = np.repeat(params[:, None, :], 1 + 2 * k, 1)
    steps = np.concatenate([np.full(3, VELOCITY_STEP), PARAM_STEP * span])
    for a in range(k):
        for sign, w in ((1.0, 1 + 2 * a), (-1.0, 2 + 2 * a)):
            if a < 3:
                vel[:, w, a] += sign * steps[a]
            else:
                par[:, w, cols[a - 3]] += sign * steps[a]
    duration = max(float(tr.tau[-1]) for tr in tracks)
    local = local_tracks_c(sim, vel.reshape(-1, 3), par.reshape(-1, sim.space.size), duration, nthread=nthread)
    local = local.reshape(n, 1 + 2 * k, -1, 3)
    dt = sim.settings.dt_slide
    scale = _scale(noise)
    out = []
    for i, tr in enumerate(tracks):
        pose0 = states[i, 3:]
        at = [to_world(sample(local[i, w], dt, tr.tau), pose0) for w in range(1 + 2 * k)]
        r = track_residuals(at[0], tr, noise)
        d = np.stack([(at[1 + 2 * a] - at[2 + 2 * a]) / (2 * steps[a]) * scale for a in range(k)], -1)
        d = d.reshape(-1, k)
        d_pose = (pose_jacobian(sample(local[i, 0], dt, tr.tau), pose0) * scale[:, None]).reshape(-1, 3)
        out.append(Linearised(r, np.concatenate([d[:, :3], d_pose], 1), d[:, 3:]))
    return out


class SlideFit(NamedTuple):
    """Release states and ground parameters fitted to the recorded slides of one file.

    Attributes:
        states: (n, 6) release states (vx, vy, ωz in the block frame; x, y, yaw).
        state_cov: (n, 6, 6) their covariances (the ground's uncertainty marginalised in).
        params: (p,) the space's values with the fitted ones in place.
        param_std: {name: one-sigma} of the fitted parameters.
        chi2_dof: residual sum of squares per degree of freedom (1 when the model explains the tracks to the noise).
        iterations: Levenberg-Marquardt iterations taken.
    """

    states: np.ndarray
    state_cov: np.ndarray
    params: np.ndarray
    param_std: dict[str, float]
    chi2_dof: float
    iterations: int


def fit_slides(
    sim: StrikeScene,
    tracks: Sequence[Track],
    states: np.ndarray,
    params: np.ndarray,
    noise,
    *,
    free: Sequence[str] = ("mu2", "torsion", "com_x", "com_y"),
    iterations: int = 12,
    nthread: int = 0,
) -> SlideFit:
    """Fit every strike's release state and the shared ground parameters to the recorded slides.

    Levenberg-Marquardt on the tracks' residuals (`track_jacobian`), the
    states free per strike, the `free` parameters shared by all strikes
    (one table, one block) and kept inside their prior.

    Args:
        sim: the strike scene.
        tracks: one recorded slide per strike (samples from release on).
        states: (n, 6) starting release states (e.g. the stop-time estimate, `clashx.events._ingest_strike`).
        params: (p,) starting values of `sim.space`.
        noise: (position m, yaw rad) standard deviations of the samples.
        free: the shared parameters to fit.
        iterations: most Levenberg-Marquardt iterations.

    Returns:
        A `SlideFit`.
    """
    states = np.array(states, np.float64)
    params = np.array(params, np.float64)
    n, q = len(tracks), len(free)
    cols = [sim.space.index(name) for name in free]
    lo, hi = np.array(sim.space.low)[cols], np.array(sim.space.high)[cols]
    m_rows = [3 * len(tr.tau) for tr in tracks]

    def system(states, params):
        lin = track_jacobian(sim, tracks, states, params, noise, free=free, nthread=nthread)
        r = np.concatenate([x.residuals for x in lin])
        jac = np.zeros((len(r), 6 * n + q))
        row = 0
        for i, x in enumerate(lin):
            jac[row : row + m_rows[i], 6 * i : 6 * i + 6] = x.d_state
            jac[row : row + m_rows[i], 6 * n :] = x.d_params
            row += m_rows[i]
        return r, jac

    def step(states, params, delta):
        s = states + delta[: 6 * n].reshape(n, 6)
        p = params.copy()
        p[cols] = np.clip(p[cols] + delta[6 * n :], lo, hi)
        return s, p

    r, jac = system(states, params)
    cost, lam, taken = float(r @ r), 1e-3, 0
    for it in range(1, iterations + 1):
        taken = it
        jtj, jtr = jac.T @ jac, jac.T @ r
        improved = False
        for _ in range(8):
            delta = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-12), -jtr)
            s_new, p_new = step(states, params, delta)
            r_new, jac_new = system(s_new, p_new)
            c_new = float(r_new @ r_new)
            if c_new < cost:
                improved = c_new > cost * (1 - 1e-6)  # converged if the gain is negligible
                states, params, r, jac, cost, lam = s_new, p_new, r_new, jac_new, c_new, max(lam / 5, 1e-7)
                break
            lam *= 10
        else:
            break
        if improved:
            break
    dof = max(len(r) - jac.shape[1], 1)
    chi2 = cost / dof
    cov = np.linalg.pinv(jac.T @ jac) * max(chi2, 1.0)
    state_cov = np.stack([cov[6 * i : 6 * i + 6, 6 * i : 6 * i + 6] for i in range(n)])
    std = {name: float(np.sqrt(max(cov[6 * n + a, 6 * n + a], 0.0))) for a, name in enumerate(free)}
    return SlideFit(states, state_cov, params, std, chi2, taken)


def strike_tracks_c(
    sim: StrikeScene,
    strikes: np.ndarray,
    params: np.ndarray,
    times: Sequence[np.ndarray],
    start_poses: np.ndarray,
    *,
    nthread: int = 0,
) -> list[np.ndarray]:
    """Whole strikes on MuJoCo C, sampled like recordings: the block's pose at given times after launch.

    The contact phase (`_strike_c.contact_phase_c`, dt_contact) and then the
    slide with the striker parked (dt_slide), both recorded, interpolated
    linearly at `times`, and placed at each strike's start pose (the scene
    strikes a block resting at the origin; the ground is the same everywhere).

    Args:
        sim: the strike scene.
        strikes: (n, 3) strikes.
        params: (n, p) or (p,) values of `sim.space`.
        times: n arrays of sample times, s after launch (a recording's `t`).
        start_poses: (n, 3) block poses (x, y, yaw) at launch, world.

    Returns:
        n arrays (len(times[i]), 3) of poses (x, y, unwrapped yaw), world.
    """

    strikes = np.asarray(strikes, np.float64)
    n = len(strikes)
    params = np.broadcast_to(np.asarray(params, np.float64), (n, sim.space.size))
    c = contact_phase_c(sim, strikes, params, nthread=nthread)
    dt_c, dt_s = sim.settings.dt_contact, sim.settings.dt_slide
    t_last = max(float(np.max(t)) for t in times)
    n_slide = max(int(np.ceil((t_last - float(np.min(c.t_end))) / dt_s)) + 2, 1)
    q_slide = slide_c(sim, params, c.q_end, c.v_end, c.t_end, n_slide, nthread)
    pose_of = jax.jit(jax.vmap(jax.vmap(block_pose)))
    p_contact = np.asarray(pose_of(jnp.asarray(c.qpos)), np.float64)
    p_slide = np.asarray(pose_of(jnp.asarray(q_slide)), np.float64)
    origin = np.asarray(block_pose(sim.block_rest), np.float64)
    out = []
    for i in range(n):
        k_end = int(round(c.t_end[i] / dt_c))
        t_grid = np.concatenate([np.arange(k_end + 1) * dt_c, c.t_end[i] + dt_s * np.arange(1, n_slide + 1)])
        poses = np.concatenate([p_contact[i, : k_end + 1], p_slide[i]])
        poses[:, 2] = np.unwrap(poses[:, 2])
        local = poses - origin
        at = np.stack([np.interp(times[i], t_grid, local[:, j]) for j in range(3)], -1)
        out.append(to_world(at, np.asarray(start_poses[i], np.float64)))
    return out


def slide_tracks(
    recording: dict[str, Any], events: dict[str, np.ndarray], rows: np.ndarray
) -> tuple[list[Track], np.ndarray]:
    """Each strike's samples from release on, and a starting release state from its label and first samples."""
    off = np.asarray(recording["offsets"])
    t_all, pose_all = np.asarray(recording["t"], np.float64), np.asarray(recording["block_pose"], np.float64)
    tracks, states = [], []
    for i in rows:
        t, pose = t_all[off[i] : off[i + 1]], pose_all[off[i] : off[i + 1]]
        t_rel = float(events["t_release"][i])
        keep = t >= t_rel - 1e-9
        p = pose[keep].copy()
        p[:, 2] = np.unwrap(p[:, 2])
        tau = t[keep] - t_rel
        v = events["post_velocity"][i]
        c, s = np.cos(p[0, 2]), np.sin(p[0, 2])
        v_world = np.array([c * v[0] - s * v[1], s * v[0] + c * v[1], v[2]])
        tracks.append(Track(tau, p))
        states.append(np.r_[v, p[0] - v_world * tau[0]])
    return tracks, np.asarray(states)


def hybrid_tracks_c(
    sim: StrikeScene,
    model,
    strikes: np.ndarray,
    params: np.ndarray,
    start_poses: np.ndarray,
    t_touch: np.ndarray,
    times: Sequence[np.ndarray],
    *,
    nthread: int = 0,
) -> list[np.ndarray]:
    """clashx's prediction of recorded tracks: the surrogate at the impact, MuJoCo C's slide after release.

    The block rests at its start pose until the recorded touch, is at the
    surrogate's release pose (start ⊕ its window displacement) at
    t_touch + RELEASE_AFTER, moves linearly in between (inside the contact
    window no recording sample is fitted), and slides from its predicted
    release velocity after.

    Args:
        sim: the strike scene (slide model and space).
        model: a `StrikeSurrogate` with `release(strike, params)` (velocity and window displacement).
        strikes: (n, 3); params: (p,) or (n, p); start_poses: (n, 3); t_touch: (n,) recorded first touch, s.
        times: n arrays of sample times, s after launch.

    Returns:
        n arrays (len(times[i]), 3) of poses (x, y, unwrapped yaw), world.
    """

    strikes = np.asarray(strikes, np.float64)
    n = len(strikes)
    params = np.broadcast_to(np.asarray(params, np.float64), (n, sim.space.size))
    out6 = np.asarray(jax.vmap(model.release)(jnp.asarray(strikes, jnp.float32), jnp.asarray(params, jnp.float32)))
    velocity = out6[:, :3].astype(np.float64)
    t_release = np.asarray(t_touch, np.float64) + RELEASE_AFTER
    duration = max(float(np.max(t) - tr) for t, tr in zip(times, t_release)) + sim.settings.dt_slide
    local = local_tracks_c(sim, velocity, params, max(duration, sim.settings.dt_slide), nthread=nthread)

    out = []
    for i in range(n):
        q = Query(
            strikes[i],
            np.asarray(start_poses[i], np.float64),
            np.asarray(t_touch[i], np.float64),
            np.asarray(times[i], np.float64),
        )
        out.append(np.asarray(place_track(local[i], sim.settings.dt_slide, out6[i].astype(np.float64), q), np.float64))
    return out


SLIDE_PARAMS: tuple[str, ...] = ()  # shared slide parameters fitted jointly (none: mu2 from the pooled deceleration)


def ingest_by_simulation(
    recording: dict[str, Any],
    where: str,
    *,
    sim: StrikeScene | None = None,
    free: Sequence[str] = SLIDE_PARAMS,
    iterations: int = 12,
) -> dict[str, np.ndarray]:
    """`clashx ingest --method sim`: each strike's release velocity from its slide, simulated by MuJoCo C.

    The stop-time ingestion (`clashx.events._ingest_strike`) validates the recording and
    gives starting values and the ground's friction (μ2 = the file's pooled
    slide deceleration over g); then every strike's release state (velocity
    and pose) is fitted to its track through MuJoCo C's slide (`fit_slides`),
    with any shared slide parameters named in `free` fitted jointly.  Each
    strike gets the one-sigma of its velocity (`post_velocity_std`, inflated
    by the fit's χ²/dof when above 1).

    Measured (`bench/ingest.py`, 60 strikes of a fresh lab-A seed): median
    relative error 11 / 7 / 10 % (square / triangle / semi-cylinder) against
    the stop-time method's 4-5 %: MuJoCo's slide starts flat from the release
    pose, while a struck block still rocks (up to ~1 rad/s about a horizontal
    axis) and the lab's floor spins it down faster.  Fitting μ2, torsion and
    the centre of mass jointly (`free`) did not help: Levenberg-Marquardt on
    central differences of MuJoCo's slide stalls short of the optimum (on
    slides simulated with known parameters it left 5 % velocity errors, 0.8 %
    with the parameters given).

    Returns:
        A validated strike event dict (as `ingest_strike_lab`'s) with post_velocity,
        release_pose and post_velocity_std from the simulated fit; meta["estimator"] = "sim".
    """

    events = dict(ingest_strike_lab(recording, where, label_sigma=False))  # its own σ replaces the tracks
    shape = str(events["shape"])
    sim = sim or make_strike_scene(shape)
    meta = meta_dict(events)
    rows = np.flatnonzero(events["touched"] & np.isfinite(events["post_velocity"]).all(1))
    tracks, states = slide_tracks(recording, events, rows)
    decel = meta["prior"]["deceleration"]
    mu2 = float(np.clip(decel[0] / geo.GRAVITY, sim.space.low[1], sim.space.high[1])) if decel else 0.5
    fit = fit_slides(sim, tracks, states, sim.space.vector(mu2=mu2), tuple(meta["noise"]), free=free,
                     iterations=iterations)  # fmt: skip
    velocity = np.array(events["post_velocity"], np.float64)
    release = np.full((len(velocity), 3), np.nan)
    std = np.full((len(velocity), 3), np.nan)
    velocity[rows], release[rows] = fit.states[:, :3], fit.states[:, 3:]
    std[rows] = np.sqrt(np.clip(np.diagonal(fit.state_cov[:, :3, :3], axis1=1, axis2=2), 0.0, None))
    meta |= {
        "estimator": "sim: release states and slide parameters fitted to the tracks through MuJoCo C (clashx.hybrid._strike_slide)",
        "slide_params": {n: float(fit.params[sim.space.index(n)]) for n in free},
        "slide_params_std": fit.param_std,
        "chi2_dof": fit.chi2_dof,
        "iterations": fit.iterations,
        "label_sigma": None,  # post_velocity_std is MuJoCo's fit's one-sigma, not a track σ (events_label_sigma)
    }
    events |= {"post_velocity": velocity, "release_pose": release, "post_velocity_std": std}
    events["meta"] = np.asarray(json.dumps(meta))
    return validate_events(events, where=where)

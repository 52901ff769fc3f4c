"""Real cube tosses (ContactNets recordings) -> "cube-toss" collision events.

Reads a file in the format of `shared/data/contactnets_cube/tosses.npz`
(`states` (N, 13) at 148 Hz, `offsets` (n + 1,), `toss_ids` (n,)) and finds
each toss's first impact as `clashx.scenes._toss` defines it (its module docstring),
then every later impact that ends a free flight:

1. *Frame.*  The recordings' lengths carry a scale error: the free flights
   fall at 9.61 m/s^2, not 9.81 (2 % short, as the dataset's README warns),
   and a cube resting on a face has its centre 2 % lower than its half edge
   above the table.  So the length scale is estimated as the median apparent
   gravity of the long flights over 9.81, the table height as the median,
   over the tosses that end at rest, of the mean height of the four lowest
   corners of the (scaled) cube, and every toss is mapped into the simulator's
   frame: table at z = 0, metres: p <- (p - table) / scale, v <- v / scale.
2. *Flight.*  The frames before the lowest corner first comes within
   `MARGIN` of the table are fitted with a free flight (ballistic centre,
   constant body angular velocity; `free_flight`), least squares,
   dropping trailing frames that the impact already disturbs.  The fit gives
   `initial_state` (at the first frame: the recorded velocities are backward
   differences, half a frame late), `t_impact` (where its lowest corner
   reaches z = 0) and `pre_state` (the fit at `t_impact`).
3. *After.*  `post_state` is a local fit at t_post = `t_impact + WINDOW`:
   the frames within two frames of t_post, a quadratic in time for the
   centre and a constant body angular velocity for the orientation.
4. *Later impacts* (`impacts="all"`, the default).  After the first impact's
   window, each run of `MIN_BOUNCE_FRAMES` or more frames with the lowest
   corner above `MARGIN` (a bounce's flight) is fitted the same way; its
   crossing of z = 0 is the next impact, with its window's local fit after it
   (`_later_impacts`).  Landings without such a flight (a cube rocking from an
   edge onto a face) give no event: their pre-impact state is not a free flight.

Tosses whose track cannot be read that way (a flight that is not free, too
few flight frames, no frames after the window) are left out and listed in
the events' meta with the reason; a file that is not in the format raises
`EventFileError` naming the file, the toss and the fix.  Nothing is written.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from ..core import quat_mul_np, quat_to_mat_np
from ..scenes import CORNER_SIGNS, FRAME_DT, GRAVITY, HALF, WINDOW, crossing_time, free_flight, lowest_corner_z
from ._events import EventFileError, Events, read_npz

MARGIN = 0.002  # m: frames with the lowest corner this close to the table are not used as free flight
MIN_FLIGHT_FRAMES = 4  # frames of free flight needed to fit one
MIN_TOSS_FRAMES = 12  # shorter tosses are an input error
MAX_FLIGHT_RMS = 0.001  # m: a flight fitted worse than this is not free (a hand, a tracking glitch)
TRAIL_RESIDUAL = 3.0  # drop trailing flight frames whose residual exceeds this many times the median
LOCAL_HALF_WIDTH = 2  # frames on either side of t_impact + WINDOW used for the post-impact fit
REST_FRAMES = 10  # last frames of a toss used to find the table
QUAT_TOL = 1e-3  # allowed | |q| - 1 |
MIN_SCALE_TOSSES = 5  # tosses with long flights needed to estimate the length scale
LONG_FLIGHT = 12  # flight frames for a toss to count in the length-scale estimate
MIN_BOUNCE_FRAMES = 3  # frames of free flight after an impact's window needed to fit the flight before the next

_SIGNS = CORNER_SIGNS


@dataclasses.dataclass(frozen=True)
class CubeTracks:
    """Recorded tosses in the simulator's frame (table at z = 0, metres).

    Attributes:
        tracks: one (frames, 13) array per toss, dataset column layout.
        toss_ids: each toss's number in its source.
        table_z: table height in the file's frame (m, file units).
        length_scale: file lengths per metre (the file's metre is `length_scale` m).
        path: the file.
    """

    tracks: list[np.ndarray]
    toss_ids: np.ndarray
    table_z: float
    length_scale: float
    path: str


# --- reading and checking a file ---------------------------------------------------------------


MAX_POSITION = 10.0  # m: farther from the origin than any table-top toss (ContactNets: under 1 m)


def _read(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    raw = read_npz(path, ".npz cube-toss file")
    missing = [k for k in ("states", "offsets", "toss_ids") if k not in raw]
    if missing and "format" in raw:
        raise EventFileError(f"{path}: an event file, not cube tosses; it needs no ingesting")
    if missing and "block_pose" in raw:
        raise EventFileError(f"{path}: a strike recording, not cube tosses; use --source strike-lab")
    if missing:
        raise EventFileError(
            f"{path}: missing key(s) {missing}; a cube-toss file holds states (N, 13), offsets (n + 1,) and toss_ids (n,)"
        )
    states, offsets, ids = raw["states"], raw["offsets"], raw["toss_ids"]
    if states.ndim != 2 or states.shape[1] != 13 or states.dtype.kind != "f":
        raise EventFileError(
            f"{path}: 'states' has shape {states.shape} and dtype {states.dtype}; expected floats (N, 13): "
            "qw qx qy qz x y z wx wy wz vx vy vz"
        )
    if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or len(offsets) < 2:
        raise EventFileError(
            f"{path}: 'offsets' has shape {offsets.shape} and dtype {offsets.dtype}; expected integers (n + 1,)"
        )
    if ids.shape != (len(offsets) - 1,) or ids.dtype.kind not in "iu":
        raise EventFileError(
            f"{path}: 'toss_ids' has shape {ids.shape} and dtype {ids.dtype}; expected integers ({len(offsets) - 1},), one per toss"
        )
    if offsets[0] != 0 or offsets[-1] != len(states):
        raise EventFileError(
            f"{path}: 'offsets' runs from {offsets[0]} to {offsets[-1]}; it must start at 0 and end at len(states) = {len(states)}"
        )
    lengths = np.diff(offsets)
    if (lengths <= 0).any():
        row = int(np.argmax(lengths <= 0))
        raise EventFileError(
            f"{path}: 'offsets' decreases or repeats at toss row {row} (toss_id {ids[row]}): "
            f"{offsets[row]} -> {offsets[row + 1]}; offsets must increase strictly"
        )
    for row in range(len(ids)):
        seg = states[offsets[row] : offsets[row + 1]]
        where = f"{path}: toss row {row} (toss_id {ids[row]})"
        if len(seg) < MIN_TOSS_FRAMES:
            raise EventFileError(
                f"{where} has {len(seg)} frames; a toss needs at least {MIN_TOSS_FRAMES} "
                "(flight, impact window and the frames after it): remove it or record it whole"
            )
        bad = ~np.isfinite(seg)
        if bad.any():
            f, c = np.argwhere(bad)[0]
            raise EventFileError(
                f"{where}: frame {f}, column {c} is {seg[f, c]}; remove the toss or fill the gap in its track"
            )
        err = np.abs(np.linalg.norm(seg[:, :4], axis=1) - 1)
        if (err > QUAT_TOL).any():
            f = int(np.argmax(err > QUAT_TOL))
            raise EventFileError(
                f"{where}: frame {f} has a quaternion of norm {np.linalg.norm(seg[f, :4]):.6f}; "
                "columns 0-3 must be a unit quaternion (qw qx qy qz): normalise them"
            )
    return states.astype(np.float64), offsets.astype(np.int64), ids.astype(np.int64)


# --- geometry (numpy, float64) -------------------------------------------------------------------
# NumPy quaternions (core's `quat_mul_np`, `quat_to_mat_np` and the two below) on purpose: track fitting needs
# float64 and runs thousands of small fits; routing them through JAX under enable_x64 gave the same events
# but made ingesting the 350 tosses 7x slower (5 s -> 38 s of CPU).


def _corner_z(track: np.ndarray, half: float) -> np.ndarray:
    """Heights of the eight corners, (frames, 8), sorted."""
    return np.sort(
        track[:, None, 6] + half * np.einsum("fj,kj->fk", quat_to_mat_np(track[:, :4])[:, 2, :], _SIGNS), axis=1
    )


def _qexp(r: np.ndarray) -> np.ndarray:
    th = np.linalg.norm(r, axis=-1, keepdims=True)
    s = np.where(th > 1e-12, np.sin(th / 2) / np.maximum(th, 1e-12), 0.5)
    return np.concatenate([np.cos(th / 2), s * r], -1)


def _qlog(q: np.ndarray) -> np.ndarray:
    q = np.where(q[..., :1] < 0, -q, q)
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    th = 2 * np.arctan2(s, q[..., :1])
    return np.where(s > 1e-12, th / np.maximum(s, 1e-12), 2.0) * v


def _fit_rotation(t: np.ndarray, quats: np.ndarray, t_ref: float) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares q(t) = q_ref ⊗ exp(ω (t - t_ref)): (q_ref, ω in the body frame)."""
    q_ref = quats[np.argmin(np.abs(t - t_ref))]
    a = np.c_[np.ones_like(t), t - t_ref]
    for _ in range(3):  # Gauss-Newton on the offset; converges in two
        r = _qlog(quat_mul_np(q_ref * np.array([1, -1, -1, -1]), quats))
        coef, *_ = np.linalg.lstsq(a, r, rcond=None)
        q_ref = quat_mul_np(q_ref, _qexp(coef[0]))
    return q_ref / np.linalg.norm(q_ref), coef[1]


def _fit_flight(t: np.ndarray, track: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Free-flight fit of frames (t, track): (state at t_ref, t_ref, position residuals (frames,))."""
    t_ref = float(t[len(t) // 2])
    dt = t - t_ref
    z_grav = np.zeros_like(track[:, 4:7])
    z_grav[:, 2] = -0.5 * GRAVITY * dt**2
    coef, *_ = np.linalg.lstsq(np.c_[np.ones_like(dt), dt], track[:, 4:7] - z_grav, rcond=None)
    q_ref, omega = _fit_rotation(t, track[:, :4], t_ref)
    residual = np.linalg.norm(np.c_[np.ones_like(dt), dt] @ coef + z_grav - track[:, 4:7], axis=1)
    return np.concatenate([q_ref, coef[0], omega, coef[1]]), t_ref, residual


def _fit_local(t: np.ndarray, track: np.ndarray, t0: float) -> np.ndarray:
    """State at t0 from nearby frames: quadratic centre, constant body angular velocity."""
    dt = t - t0
    coef, *_ = np.linalg.lstsq(np.c_[np.ones_like(dt), dt, dt**2], track[:, 4:7], rcond=None)
    q0, omega = _fit_rotation(t, track[:, :4], t0)
    return np.concatenate([q0, coef[0], omega, coef[1]])


# --- the file's frame: length scale and table height ------------------------------------------


def _flight_frames(track: np.ndarray, table_z: float, half: float) -> int:
    low = _corner_z(track, half)[:, 0] - table_z
    near = low < MARGIN
    return int(np.argmax(near)) if near.any() else len(track)


def _estimate_table(tracks: list[np.ndarray], half: float) -> float | None:
    heights = []
    for tr in tracks:
        end = tr[-REST_FRAMES:]
        if np.abs(end[:, 10:13]).max() < 0.05 and np.abs(end[:, 7:10]).max() < 1.0:
            heights.append(_corner_z(end, half)[:, :4].mean())
    return float(np.median(heights)) if heights else None


def _estimate_scale(tracks: list[np.ndarray], table_z: float) -> tuple[float | None, int]:
    gs = []
    for tr in tracks:
        n = _flight_frames(tr, table_z, HALF)
        if n >= LONG_FLIGHT:
            t = np.arange(n) * FRAME_DT
            gs.append(-2 * np.polyfit(t, tr[:n, 6], 2)[0])
    return (float(np.median(gs)) / GRAVITY if len(gs) >= MIN_SCALE_TOSSES else None), len(gs)


def load_cube_tracks(
    path: str | os.PathLike, *, table_z: float | None = None, length_scale: float | None = None
) -> CubeTracks:
    """Read a cube-toss file, check it, and map its tracks into the simulator's frame (module docstring).

    Args:
        path: the .npz file.
        table_z: table height in the file (m); None: estimated from the tosses' resting frames.
        length_scale: file lengths per true length; None: estimated from the flights' apparent gravity.

    Raises:
        EventFileError: a bad file (keys, shapes, offsets, NaN, short tosses,
            non-unit quaternions), or too few tosses to estimate the frame.
    """
    path = os.fspath(path)
    states, offsets, ids = _read(path)
    raw = [states[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    far = float(np.abs(states[:, 4:7]).max())
    if length_scale is None and far > MAX_POSITION:
        raise EventFileError(
            f"{path}: the cube is tracked up to {far:.3g} length units from the origin, beyond the {MAX_POSITION:g} m "
            "of a table-top toss: clashx reads metres (a file in millimetres gives ~1000 times more); convert "
            "the positions and velocities to metres, or pass length_scale"
        )
    if length_scale is None:
        rough_table = _estimate_table(raw, HALF)
        if rough_table is None:
            raise EventFileError(f"{path}: no toss ends at rest, so the table height is unknown; pass table_z")
        length_scale, n_long = _estimate_scale(raw, rough_table if table_z is None else table_z)
        if length_scale is None:
            raise EventFileError(
                f"{path}: only {n_long} toss(es) fly {LONG_FLIGHT}+ frames, too few ({MIN_SCALE_TOSSES}) to estimate "
                "the length scale from gravity; pass length_scale (1.0 if the lengths are exact)"
            )
    if not (0.5 < length_scale < 2.0):
        raise EventFileError(
            f"{path}: the tosses fall at {length_scale:.3g} g in the file's length units (length_scale "
            f"{length_scale:.3g}; expected about 1): clashx reads metres (a file in millimetres gives ~1000, "
            "centimetres ~100); convert the positions and velocities to metres"
        )
    if table_z is None:
        table_z = _estimate_table(raw, HALF * length_scale)
        if table_z is None:
            raise EventFileError(f"{path}: no toss ends at rest, so the table height is unknown; pass table_z")
    tracks = []
    for tr in raw:
        out = tr.copy()
        out[:, 6] -= table_z
        out[:, 4:7] /= length_scale
        out[:, 10:13] /= length_scale
        tracks.append(out)
    return CubeTracks(tracks=tracks, toss_ids=ids, table_z=float(table_z), length_scale=float(length_scale), path=path)


# --- events ------------------------------------------------------------------------------------------


@jax.jit
def _first_crossing(state0, t_max):
    """First time in [0, t_max] when the free flight of state0 (at t = 0) puts a corner at z = 0; inf if none."""
    step = 2.5e-4
    grid = jnp.arange(0.0, 0.5, step)
    low = jax.vmap(lambda t: lowest_corner_z(free_flight(state0, t)))(grid)
    below = (low < 0) & (grid <= t_max + step)
    k = jnp.argmax(below)
    t_a = grid[jnp.maximum(k - 1, 0)]
    t = t_a + crossing_time(free_flight(state0, t_a), jnp.asarray(step))
    return jnp.where(below.any() & (k > 0), t, jnp.inf)


def _fit_free(t: np.ndarray, track: np.ndarray, min_frames: int) -> tuple[np.ndarray, float, int] | str:
    """Free-flight fit of frames (t, track), dropping disturbed trailing frames: (state at t_ref, t_ref, frames kept)."""
    n = len(t)
    state, t_ref, res = _fit_flight(t[:n], track[:n])
    while n > min_frames and res[-1] > TRAIL_RESIDUAL * max(np.median(res), 1e-4):
        n -= 1
        state, t_ref, res = _fit_flight(t[:n], track[:n])
    rms = float(np.sqrt(np.mean(res**2)))
    if rms > MAX_FLIGHT_RMS:
        return f"the flight is not free: fit residual {rms * 1e3:.2f} mm rms over {n} frames"
    return state, t_ref, n


def _post_fit(t: np.ndarray, track: np.ndarray, t_impact: float, window: float) -> np.ndarray | str:
    """The local fit at t_impact + window, or why the track cannot give it."""
    t_post = t_impact + window
    near = np.abs(t - t_post) <= LOCAL_HALF_WIDTH * FRAME_DT + 1e-9
    if t[-1] < t_post + LOCAL_HALF_WIDTH * FRAME_DT - 1e-9 or near.sum() < 3:
        return f"the track ends {t[-1] - t_impact:.3f} s after the impact, before the window's local fit"
    return _fit_local(t[near], track[near], t_post)


def _ingest_toss(track: np.ndarray, window: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | str:
    """(initial, pre, post, t_impact) of one toss's first impact in the simulator's frame, or the reason it has none."""
    t = np.arange(len(track)) * FRAME_DT
    n = _flight_frames(track, 0.0, HALF)
    if n < MIN_FLIGHT_FRAMES:
        return f"{n} frame(s) of flight before the first impact; {MIN_FLIGHT_FRAMES} needed"
    fit = _fit_free(t[:n], track[:n], MIN_FLIGHT_FRAMES)
    if isinstance(fit, str):
        return fit
    state, t_ref, n = fit
    initial = np.asarray(free_flight(jnp.asarray(state), jnp.asarray(-t_ref)), np.float64)
    initial[:4] /= np.linalg.norm(initial[:4])
    if _corner_z(initial[None], HALF)[0, 0] < 0:
        return "the first frame is not above the table"
    t_impact = float(_first_crossing(jnp.asarray(initial), t[min(n + 3, len(t) - 1)]))
    if not np.isfinite(t_impact):
        return "the fitted flight does not reach the table within three frames of the last flight frame"
    pre = np.asarray(free_flight(jnp.asarray(initial), jnp.asarray(t_impact)), np.float64)
    post = _post_fit(t, track, t_impact, window)
    if isinstance(post, str):
        return post
    return initial, pre, post, t_impact


def _later_impacts(track: np.ndarray, t_from: float, window: float) -> tuple[list[tuple], list[str]]:
    """The impacts after a free flight that starts after `t_from` (the first impact's window end).

    Every run of frames with the lowest corner above `MARGIN` that starts at or
    after `t_from` and lasts `MIN_BOUNCE_FRAMES` or more is fitted as a free
    flight; its crossing of z = 0 is the next impact: (pre, post, t_impact),
    and `t_from` moves to that impact's window end.  Returns (impacts, the
    reasons runs of flight were not used).
    """
    t = np.arange(len(track)) * FRAME_DT
    air = _corner_z(track, HALF)[:, 0] > MARGIN
    impacts, skipped = [], []
    k = 0
    while k < len(track):
        if not air[k] or t[k] < t_from - 1e-9:
            k += 1
            continue
        end = k
        while end < len(track) and air[end]:
            end += 1
        if end == len(track):
            break  # still flying when the recording ends
        if end - k < MIN_BOUNCE_FRAMES:
            k = end
            continue
        fit = _fit_free(t[k:end], track[k:end], MIN_BOUNCE_FRAMES)
        if isinstance(fit, str):
            skipped.append(f"after {t[k]:.3f} s: {fit}")
            k = end
            continue
        state, t_ref, n = fit
        tau = float(_first_crossing(jnp.asarray(state), t[min(k + n + 3, len(t) - 1)] - t_ref))
        if not np.isfinite(tau):
            skipped.append(f"after {t[k]:.3f} s: the fitted flight does not reach the table")
            k = end
            continue
        pre = np.asarray(free_flight(jnp.asarray(state), jnp.asarray(tau)), np.float64)
        post = _post_fit(t, track, t_ref + tau, window)
        if isinstance(post, str):
            skipped.append(f"after {t[k]:.3f} s: {post}")
            break
        impacts.append((pre, post, t_ref + tau))
        t_from = t_ref + tau + window
        k = end
    return impacts, skipped


def ingest_cube_tosses(
    path: str | os.PathLike,
    *,
    table_z: float | None = None,
    length_scale: float | None = None,
    window: float = WINDOW,
    impacts: str = "all",
) -> Events:
    """The impact events of the recorded tosses in `path` (source "contactnets").

    Args:
        path: a file in the ContactNets cube format (module docstring).
        table_z, length_scale: the file's frame; None estimates them (`load_cube_tracks`).
        window: the impact window (s); keep the default to match simulated events.
        impacts: "all": every impact after a free flight (the first, then each
            bounce's landing: `_later_impacts`), `impact` numbering them 0, 1, ...
            within each toss; "first": the first impact of each toss only.

    Returns:
        "cube-toss" `Events` (`clashx.events._events`), states in the simulator's
        frame, rows ordered by toss then impact; a toss whose first impact cannot be
        read gives no rows.  `initial_state` is the toss's (the same on all its rows)
        and `t_impact` counts from its first frame.  meta lists the skipped tosses
        and later flights with reasons, the frame and the window.  Save it with `save_events`.

    Raises:
        EventFileError: the file is not in the format (see `load_cube_tracks`).
        ValueError: `impacts` is neither "all" nor "first".
    """
    if impacts not in ("all", "first"):
        raise ValueError(f"ingest_cube_tosses: impacts={impacts!r}; use 'all' or 'first'")
    data = load_cube_tracks(path, table_z=table_z, length_scale=length_scale)
    out: list[tuple] = []
    skipped, skipped_later = [], []
    for row, (tid, track) in enumerate(zip(data.toss_ids, data.tracks, strict=True)):
        result = _ingest_toss(track, window)
        if isinstance(result, str):
            skipped.append({"row": row, "toss_id": int(tid), "reason": result})
            continue
        initial, pre, post, t_impact = result
        out.append((initial, pre, post, t_impact, int(tid), 0))
        if impacts == "all":
            later, why = _later_impacts(track, t_impact + window, window)
            out += [(initial, p, q, t, int(tid), i + 1) for i, (p, q, t) in enumerate(later)]
            skipped_later += [{"row": row, "toss_id": int(tid), "reason": r} for r in why]
    n = len(out)
    stack = (lambda i: np.array([o[i] for o in out], np.float64).reshape(n, -1)) if n else (lambda i: np.zeros((0, 13)))
    meta = {
        "file": os.path.basename(data.path),
        "window_s": window,
        "frame_dt": FRAME_DT,
        "table_z": data.table_z,
        "length_scale": data.length_scale,
        "n_tosses": len(data.toss_ids),
        "impacts": impacts,
        "skipped": skipped,
        "skipped_later_flights": skipped_later,
    }
    arrays = {
        "scene": "cube-toss",
        "shape": "",
        "source": "contactnets",
        "initial_state": stack(0),
        "pre_state": stack(1),
        "post_state": stack(2),
        "t_impact": stack(3).reshape(n),
        "params": np.full((n, 3), np.nan),
        "toss_id": np.array([o[4] for o in out], np.int64),
        "impact": np.array([o[5] for o in out], np.int64),
        "meta": json.dumps(meta),
    }
    return Events.from_arrays(arrays, where=os.fspath(path))

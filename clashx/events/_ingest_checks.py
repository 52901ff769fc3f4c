"""Validation of strike recordings (the format in `clashx.events._ingest_strike`'s docstring) before ingestion.

Every problem raises an `EventFileError` that names the file, the strike (row)
and what to fix; nothing is computed from a recording that fails here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..scenes import RELEASE_AFTER, SHAPES, STRIKE_NAMES, STRIKE_RANGES
from ._events import EventFileError

# The scene's physical scale (SCENE.md): strikes of at most 0.8 m/s send the block off at under 2 m/s, within a
# few metres of the origin.  A track past these bounds is in other units (millimetres, degrees), not a faster lab.
MAX_POSITION = 10.0  # m from the origin
MAX_SPEED = 10.0  # m/s between consecutive samples (lab A: 0.94 at most)
MAX_SPIN = 100.0  # rad/s between consecutive samples (lab A: 10 at most; the same track in degrees: 570)
MIN_SLIDE_SAMPLES = 4  # samples at or after release that a touched strike needs
REQUIRED_KEYS = ("offsets", "t", "block_pose", "strike", "touched", "t_first_touch", "shape")


def check_recording(raw: dict[str, Any], where: str) -> tuple[str, np.ndarray]:
    """Validate a recording (module docs); return (shape, offsets). Raises EventFileError."""

    def fail(what: str) -> EventFileError:
        return EventFileError(f"{where}: {what}")

    missing = [k for k in REQUIRED_KEYS if k not in raw]
    if missing and "format" in raw:
        raise fail(
            "an event file, not a strike recording; it needs no ingesting: pass it to identify or predict as it is"
        )
    if missing and "states" in raw:
        raise fail("cube tosses, not a strike recording; use --source cube-toss")
    if missing:
        raise fail(
            f"missing key(s) {missing}; a strike recording needs {list(REQUIRED_KEYS)} (clashx.events._ingest_strike docs)"
        )
    shape = str(np.asarray(raw["shape"]))
    if shape not in SHAPES:
        raise fail(f"'shape' is {shape!r}; expected one of {list(SHAPES)}")
    offsets, t = np.asarray(raw["offsets"]), np.asarray(raw["t"])
    if offsets.ndim != 1 or len(offsets) < 2 or not np.issubdtype(offsets.dtype, np.integer):
        raise fail(f"'offsets' must be N+1 >= 2 integers; got shape {offsets.shape}, dtype {offsets.dtype}")
    n = len(offsets) - 1
    if offsets[0] != 0:
        raise fail(f"'offsets'[0] is {offsets[0]}; it must be 0 (strike 0 starts at sample 0)")
    if (np.diff(offsets) <= 0).any():
        row = int(np.argmax(np.diff(offsets) <= 0))
        raise fail(f"strike {row}: 'offsets' do not increase ({offsets[row]}, {offsets[row + 1]}); give it its samples")
    if t.ndim != 1 or offsets[-1] != len(t):
        raise fail(f"'offsets'[-1] is {offsets[-1]} but 't' has shape {t.shape}; it must end at the track length")
    tails: dict[str, tuple[int, ...]] = {
        "block_pose": (len(t), 3),
        "striker_xy": (len(t), 2),
        "strike": (n, 3),
        "start_pose": (n, 3),
    }
    tails |= {"final_pose": (n, 3), "post_velocity_true": (n, 3), "touched": (n,), "t_first_touch": (n,)}
    tails |= {"mocap_hz": (), "lab": ()}
    for key, want in tails.items():
        if key in raw and np.asarray(raw[key]).shape != want:
            raise fail(
                f"{key!r} has shape {np.asarray(raw[key]).shape}; expected {want} (N = {n} strikes, {len(t)} samples)"
            )

    def row_of(sample: int) -> int:
        return int(np.searchsorted(offsets, sample, side="right") - 1)

    for key in ("t", "block_pose", "striker_xy"):
        if key in raw:
            arr = np.asarray(raw[key], dtype=np.float64).reshape(len(t), -1)
            bad = ~np.isfinite(arr).all(1)
            if bad.any():
                k = int(np.argmax(bad))
                raise fail(f"strike {row_of(k)}: {key!r} sample {k} is not finite ({arr[k]}); drop or interpolate it")
    t = t.astype(np.float64)
    late = np.flatnonzero((np.diff(t) <= 0) & np.isin(np.arange(1, len(t)), offsets, invert=True))
    if len(late):
        k = int(late[0]) + 1
        raise fail(f"strike {row_of(k)}: 't' does not increase at sample {k} ({t[k - 1]}, {t[k]}); sort the track")
    _check_units(np.asarray(raw["block_pose"], dtype=np.float64), t, offsets, row_of, fail)
    strike = np.asarray(raw["strike"], dtype=np.float64)
    for j, name in enumerate(STRIKE_NAMES):
        lo, hi = STRIKE_RANGES[name]
        bad = ~((strike[:, j] >= lo - 1e-9) & (strike[:, j] <= hi + 1e-9))
        if bad.any():
            row = int(np.argmax(bad))
            raise fail(
                f"strike {row}: {name}={float(strike[row, j])!r} is outside SCENE.md's [{lo:.4f}, {hi:.4f}]; drop or fix it"
            )
    touched = np.asarray(raw["touched"])
    if touched.dtype != bool and not np.isin(touched, (0, 1)).all():
        raise fail(f"'touched' must hold booleans (or 0/1); got dtype {touched.dtype}")
    t_touch = np.asarray(raw["t_first_touch"], dtype=np.float64)
    for row in map(int, np.flatnonzero(touched.astype(bool))):
        if not math.isfinite(t_touch[row]):
            raise fail(
                f"strike {row}: touched but 't_first_touch' is {t_touch[row]}; give the arm's touch time or mark a miss"
            )
        after = int(np.sum(t[offsets[row] : offsets[row + 1]] >= t_touch[row] + RELEASE_AFTER - 1e-9))
        if after < MIN_SLIDE_SAMPLES:
            raise fail(
                f"strike {row}: track too short to fit: {after} sample(s) at or after release (t_first_touch + "
                f"{RELEASE_AFTER} s), need at least {MIN_SLIDE_SAMPLES}; record until the block rests"
            )
    if "mocap_hz" in raw and not float(np.asarray(raw["mocap_hz"])) > 0:
        raise fail(f"'mocap_hz' is {np.asarray(raw['mocap_hz'])}; expected the capture rate in Hz")
    return shape, offsets.astype(np.int64)


def _check_units(pose: np.ndarray, t: np.ndarray, offsets: np.ndarray, row_of, fail) -> None:
    """Raise (via `fail`) if the block's track is far beyond the scene's scale: positions in mm or yaw in degrees."""
    far = np.abs(pose[:, :2]).max(1) > MAX_POSITION
    if far.any():
        k = int(np.argmax(far))
        raise fail(
            f"strike {row_of(k)}: 'block_pose' sample {k} is at {pose[k, :2]} m, farther than {MAX_POSITION:g} m "
            "from the origin; clashx reads metres and radians: is the recording in millimetres? (divide x, y by 1000)"
        )
    dt = np.diff(t)
    same = np.isin(np.arange(1, len(t)), offsets, invert=True) & (dt > 0)  # consecutive samples of one strike
    speed = np.linalg.norm(np.diff(pose[:, :2], axis=0), axis=1) / np.where(same, dt, np.inf)
    turn = (np.diff(pose[:, 2]) + math.pi) % (2 * math.pi) - math.pi  # a yaw that wraps at ±π is no spin
    spin = np.abs(turn) / np.where(same, dt, np.inf)
    for value, limit, unit, fix in ((speed, MAX_SPEED, "m/s", "millimetres? (divide x, y by 1000)"),
                                    (spin, MAX_SPIN, "rad/s", "degrees? (yaw in radians)")):  # fmt: skip
        if (value > limit).any():
            k = int(np.argmax(value > limit)) + 1
            raise fail(
                f"strike {row_of(k)}: the block moves at {value[k - 1]:.0f} {unit} at sample {k}, beyond the "
                f"{limit:g} {unit} any strike gives (SCENE.md); is the recording in {fix}"
            )

"""Event files: the one format for generated collisions, ingested lab strikes and real tosses.

An event file is a numpy `.npz` (no pickles) holding one row per event and a
JSON `meta` string.  Every producer (`clashx generate`, `clashx ingest`, a
user's own recordings) writes it through `save_events`, every consumer reads it
through `load_events`, and both validate it against `SCHEMAS`.

Strike events (`scene = "strike"`), N rows:

| key | shape | meaning |
|---|---|---|
| strike | (N, 3) | θ, θ1 (rad), v_pre (m/s), SCENE.md |
| params | (N, p) | the values of the parameter space (meta `param_space`) the event was simulated with; NaN for real events |
| post_velocity | (N, 3) | (vx, vy, ωz) of the block frame's origin in the block frame at release (m/s, rad/s); NaN if the striker missed |
| release_pose | (N, 3) | block pose (x, y, yaw) at release, world; optional (NaN where unknown) |
| post_velocity_std | (N, 3) | one-sigma of an estimated post_velocity; optional (NaN where unknown) |
| t_touch | (N,) | first touch, s after launch |
| t_release | (N,) | t_touch + 0.02 s: the contact window is [t_touch, t_release] |
| touched | (N,) bool | the striker touched the block |
| start_pose | (N, 3) | block pose (x, y, yaw) at launch, world, m and rad |
| rest_pose | (N, 3) | block pose when it came to rest (or 4 s after launch) |

Cube-toss events (`scene = "cube-toss"`), N rows, states as in the ContactNets
files: `qw qx qy qz | x y z | wx wy wz (body frame) | vx vy vz (world)`:

| key | shape | meaning |
|---|---|---|
| initial_state | (N, 13) | state at the first frame of the toss (t = 0) |
| pre_state | (N, 13) | state at the impact's first table contact, from the free flight before it |
| post_state | (N, 13) | state at the end of the impact window (meta `window_s` after that contact) |
| t_impact | (N,) | that contact, s after the toss's first frame |
| params | (N, 3) | μ, time constant, damping ratio simulated with; NaN for real events |
| toss_id | (N,) int | the toss's number in its source |
| impact | (N,) int | optional: 0 for the toss's first impact, k for the k-th impact after a later flight (0 if absent) |

Events of a user's scene (`scene = "pair"`, `clashx.scenes.PairScene`; `shape` is the
scene's name), N rows, d = the pair's joint coordinates and velocities:

| key | shape | meaning |
|---|---|---|
| launch | (N, nq + nv) | the world's (qpos ‖ qvel) at launch |
| pre_state | (N, d) | the pair's (qpos ‖ qvel) at the touch; NaN without one |
| post_state | (N, d) | the same, the scene's window later; NaN without a touch |
| t_impact | (N,) | the touch, s after launch; NaN without one |
| touched | (N,) bool | the pair touched within the scene's approach time |
| params | (N, p) | the scene's parameter values simulated with; NaN for real events |

Scalar string keys: `format` (= FORMAT), `scene`, `shape` ("" for the cube),
`source` ("mjx", "mujoco-c", "strike-lab", "contactnets", "user", ...),
`meta` (a JSON object: parameter space, ranges, solver settings, versions, seed...).
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ..core import Result

FORMAT = "clashx.events/1"

SCHEMAS: dict[str, dict[str, tuple[tuple[int, ...], str]]] = {
    "strike": {
        "strike": ((3,), "f"),
        "params": ((-1,), "f"),
        "post_velocity": ((3,), "f"),
        "release_pose": ((3,), "f"),
        "post_velocity_std": ((3,), "f"),
        "t_touch": ((), "f"),
        "t_release": ((), "f"),
        "touched": ((), "b"),
        "start_pose": ((3,), "f"),
        "rest_pose": ((3,), "f"),
    },
    "cube-toss": {
        "initial_state": ((13,), "f"),
        "pre_state": ((13,), "f"),
        "post_state": ((13,), "f"),
        "t_impact": ((), "f"),
        "params": ((-1,), "f"),
        "toss_id": ((), "i"),
        "impact": ((), "i"),
    },
    "pair": {
        "launch": ((-1,), "f"),
        "pre_state": ((-1,), "f"),
        "post_state": ((-1,), "f"),
        "t_impact": ((), "f"),
        "touched": ((), "b"),
        "params": ((-1,), "f"),
    },
}
# Columns that may hold NaN (unknown or undefined), by scene.
NAN_ALLOWED = {
    "strike": {"params", "post_velocity", "release_pose", "post_velocity_std", "t_touch", "t_release"},
    "cube-toss": {"params"},
    "pair": {"pre_state", "post_state", "t_impact", "params"},
}
# Lower bounds of columns, where known (NaN, unknown, passes), by scene.
NOT_BELOW: dict[str, dict[str, float]] = {
    "strike": {"t_touch": 0.0, "t_release": 0.0, "post_velocity_std": 0.0},
    "cube-toss": {"t_impact": 0.0},
    "pair": {"t_impact": 0.0},
}
# Bounds on magnitudes: SCENE.md's strikes (at most 0.8 m/s) send the block off at under 2 m/s and 40 rad/s.
NOT_ABOVE: dict[str, dict[str, float]] = {"strike": {"post_velocity": 100.0}, "cube-toss": {}, "pair": {}}
# Columns a touched row must know (NaN only where the pair never touched), by scene.
KNOWN_IF_TOUCHED = {
    "strike": ("post_velocity", "t_touch"),
    "cube-toss": (),
    "pair": ("pre_state", "post_state", "t_impact"),
}
# Columns that older files (or a user's) may lack: read as NaN.  A tail of -1 is any width.
OPTIONAL = {"strike": {"release_pose", "post_velocity_std"}, "cube-toss": {"impact"}, "pair": set()}


class EventFileError(ValueError):
    """A bad event file or event array: the message names the file, key, row and fix."""


_SCALARS = ("format", "scene", "shape", "source")


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class Events(Result, Mapping[str, Any]):
    """Validated collision events of one scene: N rows of the scene's columns, and what the file says of them.

    What `clashx.load_events`, `clashx.ingest_strike_file` and `clashx.ingest_cube_tosses`
    return, and what `clashx.save_events` writes.  The columns of each scene are in the
    module docstring (`clashx.events._events`); read one as `events["post_velocity"]`
    (a read-only array with N rows).  `events.select(rows)` keeps some rows;
    `events.to_arrays()` gives the plain dict of arrays an .npz holds.

    Attributes:
        columns: the scene's columns by name, each (N, ...) (read-only NumPy arrays).
        scene: "strike", "cube-toss" or "pair".
        shape: the strike's block shape or a pair scene's name ("" for the cube).
        source: where the events came from ("mjx", "mujoco-c", "strike-lab", "contactnets", ...).
        meta: the file's metadata (parameter space, ranges, solver settings, versions, seed, ...).
        path: the file read, if any.
    """

    columns: Mapping[str, np.ndarray]
    scene: str
    shape: str = ""
    source: str = ""
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    path: str | None = None

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, Any], where: str = "events", path: str | None = None) -> Events:
        """Validate an event dict (`validate_events`: raises `EventFileError` naming `where`) into `Events`."""
        checked = validate_events(arrays, where=where)
        columns = {}
        for k in SCHEMAS[str(checked["scene"])]:
            a = np.array(checked[k])
            a.flags.writeable = False
            columns[k] = a
        return cls(columns, str(checked["scene"]), str(checked["shape"]), str(checked["source"]),
                   meta_dict(checked), path)  # fmt: skip

    @property
    def n(self) -> int:
        """The number of events (rows)."""
        return int(next(iter(self.columns.values())).shape[0])

    def select(self, rows) -> Events:
        """The events at `rows` (an index array, a boolean mask or a slice)."""
        cols = {}
        for k, v in self.columns.items():
            a = np.array(v[rows])
            a.flags.writeable = False
            cols[k] = a
        return dataclasses.replace(self, columns=cols)

    def __or__(self, other: Mapping[str, Any]) -> Events:
        """These events with some columns (or `meta`, `source`, ...) replaced, as `dict | dict` does; validated."""
        return Events.from_arrays(self.to_arrays() | dict(other), where="events", path=self.path)

    def to_arrays(self) -> dict[str, Any]:
        """The plain dict of arrays an event file holds (`meta` as JSON text), for `numpy.savez`."""
        out: dict[str, Any] = {k: np.array(v) for k, v in self.columns.items()}
        out.update({k: np.asarray(self[k]) for k in _SCALARS})
        out["meta"] = np.asarray(json.dumps(dict(self.meta)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the columns as lists, the scalars and the metadata."""
        return {"scene": self.scene, "shape": self.shape, "source": self.source, "n": self.n,
                "meta": dict(self.meta), "columns": {k: v.tolist() for k, v in self.columns.items()}}  # fmt: skip

    def __repr__(self) -> str:
        cols = ", ".join(f"{k}{list(v.shape[1:]) if v.ndim > 1 else ''}" for k, v in self.columns.items())
        where = f", path={self.path!r}" if self.path else ""
        return f"Events(scene={self.scene!r}, shape={self.shape!r}, source={self.source!r}, n={self.n}, columns=[{cols}]{where})"

    # the Mapping protocol: columns by name, and the file's scalar keys as an .npz holds them
    def __getitem__(self, key: str) -> Any:
        if key in self.columns:
            return self.columns[key]
        if key == "format":
            return np.asarray(FORMAT)
        if key in _SCALARS:
            return np.asarray(getattr(self, key))
        if key == "meta":
            return self.meta
        raise KeyError(f"{key!r}: {self.scene} events have the columns {sorted(self.columns)}")

    def __iter__(self) -> Iterator[str]:
        yield from self.columns
        yield from _SCALARS
        yield "meta"

    def __len__(self) -> int:
        return len(self.columns) + len(_SCALARS) + 1


def meta_dict(events: Mapping[str, Any]) -> dict[str, Any]:
    """The `meta` of an event dict or `Events` as a dict, whether it is held parsed or as JSON text."""
    meta = events.get("meta", "{}")
    if isinstance(meta, Mapping):
        return dict(meta)
    return json.loads(str(meta.item() if isinstance(meta, np.ndarray) else meta))


def validate_events(events: Mapping[str, Any], where: str = "events") -> dict[str, np.ndarray]:
    """Check an event dict against its scene's schema; return it with canonical dtypes.

    Raises:
        EventFileError: naming `where`, the key and, for bad values, the first bad row.
    """
    scene = str(events.get("scene", ""))
    if scene not in SCHEMAS:
        raise EventFileError(f"{where}: 'scene' is {scene!r}; expected one of {sorted(SCHEMAS)}")
    schema = SCHEMAS[scene]
    missing = [k for k in schema if k not in events and k not in OPTIONAL[scene]]
    if missing:
        raise EventFileError(f"{where}: missing key(s) {missing} for scene {scene!r} (see clashx.events docs)")
    n: int | None = None
    out: dict[str, np.ndarray] = {}
    for key, (tail, kind) in schema.items():
        if key not in events:  # optional: unknown (an integer column: 0, e.g. a toss's first impact)
            arr = np.full((0 if n is None else n, *tail), 0 if kind == "i" else np.nan)
        else:
            arr = np.asarray(events[key])
        if n is None:
            n = arr.shape[0] if arr.ndim else -1
        if tail == (-1,) and arr.ndim == 2 and arr.shape[1] > 0:
            tail = (arr.shape[1],)
        if arr.shape != (n, *tail):
            raise EventFileError(
                f"{where}: {key!r} has shape {arr.shape}; expected ({n}, {', '.join(map(str, tail))})".replace(
                    ", )", ")"
                )
            )
        if arr.dtype.kind not in "biuf":
            raise EventFileError(
                f"{where}: {key!r} holds {arr.dtype} values; expected numbers ({'booleans' if kind == 'b' else kind})"
            )
        if arr.dtype == np.float16:
            raise EventFileError(
                f"{where}: {key!r} holds float16 values (3 significant digits); save float32 or float64"
            )
        if kind == "b" and arr.dtype.kind != "b" and not np.isin(arr, (0, 1)).all():
            row = int(np.argmax(~np.isin(arr, (0, 1))))
            raise EventFileError(f"{where}: {key!r} row {row} is {arr[row]}; expected true/false (or 0/1)")
        if kind == "f":
            arr = arr.astype(np.float64)
            bad = ~np.isfinite(arr) if key not in NAN_ALLOWED[scene] else np.isinf(arr)
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise EventFileError(f"{where}: {key!r} row {row} is not finite ({arr[row]}); remove or fix that event")
        elif kind == "b":
            arr = arr.astype(bool)
        else:
            arr = arr.astype(np.int64)
        out[key] = arr
    if not n:  # no rows: nothing more to check (readers refuse an empty file, `load_events`)
        return _with_scalars(out, events, where)
    for key, low in NOT_BELOW[scene].items():
        below = out[key].reshape(len(out[key]), -1) < low  # NaN compares False: unknown stays allowed
        if below.any():
            row = int(np.argmax(below.any(1)))
            raise EventFileError(f"{where}: {key!r} row {row} is {out[key][row]}; it cannot be below {low:g}")
    for key, high in NOT_ABOVE[scene].items():
        above = np.abs(out[key].reshape(len(out[key]), -1)) > high
        if above.any():
            row = int(np.argmax(above.any(1)))
            raise EventFileError(
                f"{where}: {key!r} row {row} is {out[key][row]}, beyond the {high:g} any event of this scene can "
                "reach; check the units (metres, seconds, radians)"
            )
    for key in KNOWN_IF_TOUCHED[scene]:
        unknown = out["touched"] & ~np.isfinite(out[key].reshape(len(out[key]), -1)).all(1)
        if unknown.any():
            row = int(np.argmax(unknown))
            raise EventFileError(
                f"{where}: row {row} is touched but its {key!r} is not finite ({out[key][row]}); fix that event, "
                "remove it, or mark it untouched (touched = False) if the pair never met"
            )
    return _with_scalars(out, events, where)


def _with_scalars(out: dict[str, np.ndarray], events: Mapping[str, Any], where: str) -> dict[str, np.ndarray]:
    """`out` with the event dict's scalar string keys (format, scene, shape, source) and its JSON `meta`, checked."""
    for key in ("format", "scene", "shape", "source"):
        out[key] = np.asarray(str(events.get(key, FORMAT if key == "format" else "")))
    meta = events.get("meta", "{}")
    if isinstance(meta, Mapping):
        meta = json.dumps(dict(meta))
    meta = meta if isinstance(meta, str) else (meta.item() if isinstance(meta, np.ndarray) else json.dumps(meta))
    try:
        parsed = json.loads(meta)
    except json.JSONDecodeError as e:
        raise EventFileError(f"{where}: 'meta' is not a JSON object ({e}); write the file again") from None
    if not isinstance(parsed, dict):
        raise EventFileError(
            f"{where}: 'meta' is JSON but not an object ({type(parsed).__name__}); write the file again"
        )
    out["meta"] = np.asarray(meta)
    return out


def atomic_savez(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """Write an .npz so that `path` holds either the old file or the whole new one, never a part."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub reads a ** dict as its allow_pickle
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a finished file gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # an .npz is a zip archive (a full one, or an empty one)


def read_npz(path: str | os.PathLike, what: str = ".npz file") -> dict[str, np.ndarray]:
    """All arrays of an .npz file (no pickles), or an EventFileError naming the file and what it should be."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise EventFileError(f"{path}: no such file")
    if os.path.isdir(path):
        raise EventFileError(f"{path}: a folder, not a {what}")
    if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe or device would block or stream
        raise EventFileError(f"{path}: not a regular file (a pipe or device?); save the {what} to a file")
    with open(path, "rb") as f:
        head = f.read(4)
    if head not in ZIP_MAGIC:
        raise EventFileError(
            f"{path}: not a readable {what}: an .npz is a zip archive (numpy.savez) and this file is not one "
            "(another format, or damaged); check the path, or save the arrays with numpy.savez"
        )
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except ValueError as e:
        if "pickle" not in str(e):
            raise EventFileError(f"{path}: not a readable {what} ({e}); save it with numpy.savez") from None
        raise EventFileError(
            f"{path}: holds an array of Python objects, which clashx does not load (unsafe); "
            "save numbers and strings only with numpy.savez"
        ) from None
    except Exception as e:  # a truncated or damaged archive
        raise EventFileError(f"{path}: a damaged {what} ({type(e).__name__}: {e}); write it again") from None


def save_events(path: str | os.PathLike, events: Mapping[str, Any]) -> None:
    """Validate `events` (an `Events` or a dict of arrays) and write them to `path` atomically (nothing is half-written)."""
    arrays = events.to_arrays() if isinstance(events, Events) else events
    atomic_savez(path, validate_events(arrays, where=str(path)))


def load_events(path: str | os.PathLike, scene: str | None = None) -> Events:
    """Read and validate an event file.

    Args:
        path: an .npz written by `save_events` (`clashx generate`, `clashx ingest`, or your own).
        scene: require events of this scene ("strike", "cube-toss", "pair").

    Returns:
        The file's `Events`.

    Raises:
        EventFileError: naming the file, the key, the first bad row and the fix.
    """
    path = os.fspath(path)
    return events_from_arrays(read_npz(path, ".npz event file"), path, scene)


def recording_arrays(recording: str | os.PathLike | Mapping[str, Any], where: str) -> tuple[dict[str, Any], str]:
    """A strike recording's arrays and its name for messages: read from a file (`read_npz`), or as given.

    Every function that takes a recording (`clashx.fit_recording`, `clashx.fit_families`) takes a path
    (e.g. `clashx.lab_recording("square", "fit")`) or the arrays (`dict(np.load(path))`).
    """
    if isinstance(recording, str | os.PathLike):
        path = os.fspath(recording)
        return read_npz(path, ".npz strike recording"), path
    return dict(recording), where


def as_events(data: str | os.PathLike | Mapping[str, Any], scene: str | None = None) -> Events:
    """Events from a file (`load_events`), or given in memory (`Events`, or a dict of arrays, validated).

    Every function that reads events takes either, so that arrays made in Python need no file.
    """
    if isinstance(data, str | os.PathLike):
        return load_events(data, scene)
    events = data if isinstance(data, Events) else Events.from_arrays(data, where="events (in memory)")
    if scene is not None and events.scene != scene:
        raise EventFileError(f"events (in memory): {events.scene!r} events; this needs {scene!r} events")
    return events


def event_source(events: Events) -> str:
    """How messages name events: their file, or "events (in memory)"."""
    return events.path or "events (in memory)"


def events_from_arrays(raw: Mapping[str, Any], path: str, scene: str | None = None) -> Events:
    """`load_events` on an .npz's arrays already read from `path` (named in the errors)."""
    if str(raw.get("format", "")) != FORMAT:
        raise EventFileError(f"{path}: {_not_events(raw, path)}")
    events = Events.from_arrays(raw, where=path, path=path)
    if events.n == 0:
        raise EventFileError(f"{path}: holds no events (0 rows); nothing to read")
    if scene is not None and events.scene != scene:
        raise EventFileError(f"{path}: holds {events.scene!r} events; this command needs {scene!r} events")
    return events


def holds_tracks(raw: Mapping[str, Any]) -> bool:
    """Whether an .npz's arrays are a strike recording (tracks) rather than an event file."""
    return "block_pose" in raw and "offsets" in raw


def _not_events(raw: Mapping[str, Any], path: str) -> str:
    """Why `raw` (an .npz's arrays without this format) is not an event file, and what to do."""
    if holds_tracks(raw):
        return (
            "a strike recording, not an event file; turn it into one with "
            f"`clashx ingest --source strike-lab --input {path} --out EVENTS.npz` and pass EVENTS.npz"
        )
    if "format" not in raw:
        return f"not an event file (no 'format' key; event files have format {FORMAT!r}: `clashx generate` or `ingest`)"
    return f"'format' is {str(raw['format'])!r}; expected {FORMAT!r}"


def n_events(events: Mapping[str, Any]) -> int:
    """Number of events (rows) in an event dict."""
    key = next(iter(SCHEMAS[str(events["scene"])]))
    return int(np.asarray(events[key]).shape[0])


def select(events: Mapping[str, Any], rows) -> Mapping[str, Any]:
    """The events at `rows` (an index array or slice), other keys unchanged."""
    if isinstance(events, Events):
        return events.select(rows)
    schema = SCHEMAS[str(events["scene"])]
    return {k: (np.asarray(v)[rows] if k in schema else v) for k, v in events.items()}


def concat(parts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Concatenate event dicts (or `Events`) of one scene row-wise; scalar keys come from the first."""
    scene = str(parts[0]["scene"])
    schema = SCHEMAS[scene]
    out = parts[0].to_arrays() if isinstance(parts[0], Events) else dict(parts[0])
    for k in schema:
        if any(k not in p for p in parts):
            if k not in OPTIONAL[scene]:
                raise EventFileError(f"events to join: a part lacks the key {k!r}")
            out.pop(k, None)  # unknown in some parts: left out, read as NaN by validate_events
            continue
        out[k] = np.concatenate([np.asarray(p[k]) for p in parts])
    return out

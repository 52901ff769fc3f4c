"""Collision data generation: sampled strikes (or tosses) simulated in chunks that survive a kill.

`generate(config)` samples inputs and contact parameters over the prior,
simulates them chunk by chunk (MJX or MuJoCo C), and writes one event file
(`clashx.events._events` format).  While it runs, finished chunks live in
`OUT.parts/` beside a `manifest.json`; a rerun with the same flags checks and
skips them (a damaged chunk is simulated again), a rerun with other flags is
refused with the flags that differ, and the final file is written atomically
once every chunk is there.  Engine "auto" is resolved before anything is
recorded, so a resume with "auto" on the same machine matches.  Chunk `i` draws its inputs from
`fold_in(PRNGKey(seed), i)`, so the data depend only on the seed and the chunk
size, never on where a run was interrupted.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import shutil
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

import jax
import numpy as np

from ..core import ParameterError, Result, block_size, check_seed, describe_changes, resolve_engine, write_json
from ..scenes import AbstractImpactScene, make_scene
from ..scenes import geometry as geo
from ..scenes import sample_strikes as sample_strikes
from . import _events

SCENES = ("strike", "cube-toss")
ENGINES = ("auto", "mjx", "c")
# The flag that sets each GenerateConfig field, for naming what differs from an interrupted run.
FLAGS = {
    "scene": "--scene",
    "shape": "--shape",
    "n": "--n",
    "seed": "--seed",
    "chunk_size": "--chunk-size",
    "engine": "--engine",
    "to_rest": "to_rest (--no-rest)",
    "out": "--out",
    "params": "--params",
}


@dataclasses.dataclass(frozen=True)
class GenerateConfig:
    """What to generate.

    Attributes:
        scene: "strike", "cube-toss", a user's `PairScene` as "module:Class" / "path/file.py:Class",
            or a scene object (`clashx.load_scene(...)`, your `PairScene` instance).
        shape: block shape for the strike scene ("" for the cube).
        n: number of events.
        seed: PRNG seed; same seed and chunk size, same data.
        out: output event file (.npz).
        chunk_size: events drawn (each chunk from its own key) and saved together.  On MJX with an
            accelerator several chunks are simulated as one batch (the batching policy's
            `clashx.core.block_size`); the data depend on the seed and chunk size only.
        engine: "mjx" (jit + vmap on the JAX device), "c" (MuJoCo C on all CPU cores) or
            "auto" (`clashx.core._engine.resolve_engine`: "mjx" on a GPU, else "c").
        to_rest: also simulate the slide to rest (strike scene).
        params: simulate every event with these values of the scene's space (e.g. to stand in
            for a lab); default (): a draw from its prior per event.
    """

    scene: str | AbstractImpactScene
    out: str
    n: int
    seed: int = 0
    shape: str = ""
    chunk_size: int = 1024
    engine: str = "auto"
    to_rest: bool = True
    params: tuple[float, ...] = ()

    def __post_init__(self):
        own = "GenerateConfig"
        if isinstance(self.scene, AbstractImpactScene):
            pass
        elif not isinstance(self.scene, str) or (self.scene not in SCENES and ":" not in self.scene):
            raise ParameterError(
                "scene", self.scene, f"expected one of {', '.join(SCENES)}, MODULE:CLASS of your scene, or a scene", own
            )
        if self.scene == "strike":
            geo.check_shape(self.shape)
        if self.engine not in ENGINES:
            raise ParameterError("engine", self.engine, f"expected one of {', '.join(ENGINES)}", own)
        if self.n < 1:
            raise ParameterError("n", self.n, "need at least one event", own)
        if self.chunk_size < 1:
            raise ParameterError("chunk_size", self.chunk_size, "must be positive", own)
        if not str(self.out).endswith(".npz"):
            raise ParameterError("out", self.out, "event files end in .npz", own)


def versions() -> dict[str, str]:
    """Versions of the libraries that determine the data."""
    out = {}
    for pkg in ("clashx", "jax", "jaxlib", "mujoco", "mujoco-mjx", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def scene_spec(scene: str | AbstractImpactScene) -> str:
    """The name a run records for its scene: the string given, or "module:Class" of a scene object."""
    if isinstance(scene, str):
        return scene
    return f"{type(scene).__module__}:{type(scene).__qualname__}"


def _manifest(config: GenerateConfig, scene: AbstractImpactScene) -> dict:
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return {
        "config": fields | {"scene": scene_spec(config.scene), "out": os.path.basename(config.out)},
        "versions": versions(),
        **scene.describe(),
    }


@dataclasses.dataclass(frozen=True, repr=False)
class GenerateResult(Result):
    """What `generate` wrote.

    Attributes:
        path: the event file.
        n: events in it.
        touched: events whose pair touched (the rest: no impact within the scene's approach time).
        engine: the engine that simulated them ("mjx" or "c": "auto" resolved).
        manifest: the JSON stored in the file's `meta` (config, versions, ranges, solver settings).
    """

    path: str
    n: int
    touched: int
    engine: str
    manifest: dict[str, Any]


def _result(config: GenerateConfig, manifest: dict) -> GenerateResult:
    events = _events.load_events(config.out)
    touched = int(np.sum(events["touched"])) if "touched" in events.columns else events.n
    return GenerateResult(config.out, events.n, touched, config.engine, manifest)


def generate(
    config: GenerateConfig,
    *,
    progress: Callable[[int, int], None] | None = None,
    report: Callable[[str], None] | None = None,
) -> GenerateResult:
    """Generate `config.n` events into `config.out`, resuming a killed run.

    Args:
        config: what to generate; engine "auto" is resolved first, and the
            resolved engine is what the manifest records and a resume compares.
        progress: called as `progress(done_events, total_events)` after each chunk.
        report: called with a line of news for the user: a resumed run, a damaged chunk made again.

    Returns:
        A `GenerateResult`: the file, its counts, the engine and the manifest stored in its `meta`.

    Raises:
        ValueError: if `OUT.parts/` holds chunks of a run with other settings (names each one).

    Example:
        >>> res = clashx.generate(clashx.GenerateConfig(scene="cube-toss", n=1000, out="cube.npz"))
        >>> events = clashx.load_events(res.path)
    """
    config = dataclasses.replace(config, engine=resolve_engine(config.engine, cpu="c", accelerator="mjx"))
    report = report or (lambda line: None)
    scene = config.scene if isinstance(config.scene, AbstractImpactScene) else make_scene(config.scene, config.shape)
    manifest = _manifest(config, scene)
    root = jax.random.PRNGKey(check_seed(config.seed))
    parts = config.out + ".parts"
    if os.path.exists(config.out) and not os.path.isdir(parts):
        return _result(config, _finished(config.out, manifest, report))
    _open_parts(parts, manifest, report)
    try:
        events = _chunks(scene, config, parts, root, progress, report)
    except BaseException:
        if not glob.glob(os.path.join(parts, "chunk-*.npz")):  # nothing to resume: leave nothing behind
            shutil.rmtree(parts, ignore_errors=True)
        raise
    if "toss_id" in events:  # chunks number their tosses from 0: number the file's
        events["toss_id"] = np.arange(config.n)
    events["meta"] = json.dumps(manifest)
    _events.save_events(config.out, events)
    shutil.rmtree(parts)
    return _result(config, manifest)


def _chunks(scene, config: GenerateConfig, parts: str, root, progress, report) -> dict:
    """Every chunk of the run, read from `parts` where finished, else simulated and saved there; joined."""
    n_chunks = -(-config.n // config.chunk_size)
    group = _group(scene, config)
    chunks: dict[int, Mapping[str, Any]] = {}
    todo: list[int] = []

    def path(i: int) -> str:
        return os.path.join(parts, f"chunk-{i:05d}.npz")

    def size(i: int) -> int:
        return min(config.chunk_size, config.n - i * config.chunk_size)

    def done() -> None:
        if progress is not None:
            progress(min(sum(size(i) for i in chunks), config.n), config.n)

    def simulate(ids: list[int]) -> None:  # chunks drawn apart, simulated as one batch, saved apart
        for i, events in zip(ids, _make_chunks(scene, config, [(jax.random.fold_in(root, i), size(i)) for i in ids])):
            events["meta"] = json.dumps({"chunk": i})
            _events.save_events(path(i), events)
            chunks[i] = events
        done()

    for i in range(n_chunks):
        events = _read_chunk(path(i), size(i), scene.schema)
        if events is not None:
            chunks[i] = events
            done()
            continue
        if os.path.exists(path(i)):
            report(f"{path(i)}: damaged or incomplete chunk; simulating it again")
        todo.append(i)
        if len(todo) == group:
            simulate(todo)
            todo = []
    if todo:
        simulate(todo)
    return _events.concat([chunks[i] for i in range(n_chunks)])


def _group(scene: AbstractImpactScene, config: GenerateConfig) -> int:
    """Chunks simulated together: as many as the batching policy puts in one vmap (MJX on an
    accelerator); one elsewhere.  The data do not depend on it: each chunk is drawn from its own key."""
    if config.engine != "mjx":
        return 1
    return max(1, block_size(config.n, world=scene.world_bytes()) // config.chunk_size)


def _finished(out: str, manifest: dict, report: Callable[[str], None]) -> dict:
    """The manifest of an existing `out` made with these settings (nothing to do); a ValueError for any other
    file there (an event file of other settings, a recording, anything): it is never replaced silently."""
    try:
        old = _events.load_events(out)["meta"]
    except _events.EventFileError:
        old = None
    config = old.get("config") if isinstance(old, dict) else None
    new = json.loads(json.dumps(manifest["config"]))
    if config == new:
        report(f"{out} is already complete with these settings; nothing to do")
        return old
    changes = describe_changes(config, new, FLAGS) if isinstance(config, dict) else "it is not from `clashx generate`"
    raise ValueError(
        f"--out {out} already holds events made with other settings ({changes}); delete it, or choose another --out"
    )


def _open_parts(parts: str, manifest: dict, report: Callable[[str], None]) -> None:
    """Start the chunk folder `parts`, or check that the run it holds had the same settings."""
    man_path = os.path.join(parts, "manifest.json")
    if not (os.path.isdir(parts) and os.path.exists(man_path)):
        os.makedirs(parts, exist_ok=True)
        write_json(man_path, manifest)
        return
    try:
        with open(man_path) as f:
            old = json.load(f)["config"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        raise ValueError(f"{man_path}: damaged; delete {parts} to start over") from None
    new = json.loads(json.dumps(manifest["config"]))  # as the file holds it (tuples become lists)
    if old != new:
        raise ValueError(
            f"{parts} holds chunks of an interrupted run with other settings: "
            f"{describe_changes(old, new, FLAGS)}. Rerun with that run's flags to resume it, "
            f"or choose another --out, or delete {parts} to start over"
        )
    done = len(glob.glob(os.path.join(parts, "chunk-*.npz")))
    report(f"resuming the interrupted run in {parts} ({done} chunk(s) there)")


def _read_chunk(path: str, size: int, scene: str) -> Mapping[str, Any] | None:
    """The events of a finished chunk, or None if the file is absent, damaged or not `size` events of `scene`."""
    if not os.path.exists(path):
        return None
    try:
        events = _events.load_events(path, scene=scene)
    except _events.EventFileError:
        return None
    return events if _events.n_events(events) == size else None


def _make_chunks(scene: AbstractImpactScene, config: GenerateConfig, draws: list[tuple[Any, int]]) -> list[Any]:
    """Sample each chunk of `draws` ((key, size) per chunk) and simulate them all as one batch."""
    inputs, params = [], []
    for key, size in draws:
        x, p = scene.sample_inputs(size, key=key)
        if config.params:
            p = np.tile(scene.space.check(np.asarray(config.params, np.float64), what="--params"), (size, 1))
        inputs.append(x)
        params.append(p)
    xs, ps = np.concatenate(inputs), np.concatenate(params)
    n = len(xs)
    if config.engine == "mjx":  # a short batch is padded to a full group: one compiled shape per run
        pad = len(draws) * min(config.chunk_size, config.n) - n
        xs, ps = (np.concatenate([a, np.repeat(a[-1:], pad, 0)]) for a in (xs, ps))
    events = scene.simulate_events(xs, ps, engine=config.engine, to_rest=config.to_rest)
    bounds = np.cumsum([0] + [size for _, size in draws])
    return [_events.select(events, slice(int(a), int(b))) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

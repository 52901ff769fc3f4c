"""Shared by the bad-input tests (`test_errors.py`, `test_boundaries.py`): the CLI run, its failure check,
and the small files they damage."""

from __future__ import annotations

import json

import jax
import numpy as np

import clashx
from clashx.workflows._cli import main

GEN = ["generate", "--scene", "strike", "--shape", "square", "--no-rest", "--chunk-size", "4"]
PARAMS = dict(zip(clashx.strike_space().names, clashx.strike_space().vector(mu1=0.5, mu2=0.3, e1=1.0).tolist()))


def run(argv) -> int:
    """The CLI's exit status for `argv` (paths allowed)."""
    return main([str(a) for a in argv])


def fails(argv, capsys, *needles):
    """Run the CLI, expect exit 2 and every needle in its stderr; return stderr."""
    assert run(argv) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, (needle, err)
    assert "Traceback" not in err
    return err


def make_files(root):
    """A tiny square surrogate, a PARAMS.json, and 16 generated square strikes (MuJoCo C, contact phase) in `root`."""
    model = root / "model"
    clashx.save_strike_surrogate(
        model, clashx.make_strike_surrogate("square", key=jax.random.PRNGKey(0), width=8, depth=1)
    )
    params = root / "params.json"
    params.write_text(json.dumps({"shape": "square", "params": PARAMS}))
    events = root / "events.npz"
    assert run([*GEN, "--n", "16", "--engine", "c", "--out", str(events)]) == 0
    return {"model": model, "params": params, "events": events, "root": root}


def model_copy(files, tmp_path):
    """A copy of the tiny surrogate's folder that a test may damage."""
    run_dir = tmp_path / "model"
    run_dir.mkdir()
    for name in ("surrogate.eqx", "surrogate.json"):
        (run_dir / name).write_bytes((files["model"] / name).read_bytes())
    return run_dir


def recording(touched):
    """A strike recording of len(touched) strikes, ten still samples each (the block never moves)."""
    n = len(touched)
    return {
        "offsets": np.arange(n + 1) * 10,
        "t": np.tile(np.arange(10) * 0.01, n),
        "block_pose": np.zeros((10 * n, 3)),
        "strike": np.tile([1.0, 0.0, 0.5], (n, 1)),
        "touched": np.asarray(touched),
        "t_first_touch": np.full(n, np.nan),
        "shape": np.array("square"),
    }


def digest(path) -> bytes:
    """A file's bytes, to compare before and after a command."""
    with open(path, "rb") as f:
        return f.read()


def with_changes(path, out, **changes):
    """A copy of the event file `path` at `out` with some arrays changed: key=(index, value)."""
    raw = dict(np.load(path))
    for key, (index, value) in changes.items():
        raw[key] = raw[key].copy()
        raw[key][index] = value
    np.savez(out, **raw)
    return out


def with_arrays(files, tmp_path, name, **arrays):
    """A copy of the shared event file as `tmp_path/name` with whole arrays replaced."""
    raw = dict(np.load(files["events"]))
    raw.update(arrays)
    path = tmp_path / name
    np.savez(path, **raw)
    return path

"""Event files: validation names the key and row; writes are atomic."""

from __future__ import annotations

import os

import numpy as np
import pytest

from clashx import EventFileError, load_events, save_events
from clashx.events._events import FORMAT


def _strike_events(n=3):
    return {
        "scene": "strike",
        "shape": "square",
        "source": "user",
        "strike": np.tile([1.0, 0.0, 0.5], (n, 1)),
        "params": np.full((n, 3), np.nan),
        "post_velocity": np.tile([0.1, -0.3, 1.0], (n, 1)),
        "t_touch": np.full(n, 0.02),
        "t_release": np.full(n, 0.04),
        "touched": np.ones(n, bool),
        "start_pose": np.zeros((n, 3)),
        "rest_pose": np.zeros((n, 3)),
        "meta": "{}",
    }


def test_round_trip(tmp_path):
    save_events(tmp_path / "e.npz", _strike_events())
    ev = load_events(tmp_path / "e.npz", scene="strike")
    assert str(ev["format"]) == FORMAT and ev["strike"].shape == (3, 3) and ev["meta"] == {}


def test_missing_key_is_named(tmp_path):
    ev = _strike_events()
    del ev["rest_pose"]
    with pytest.raises(EventFileError, match=r"missing key\(s\) \['rest_pose'\]"):
        save_events(tmp_path / "e.npz", ev)
    assert not os.path.exists(tmp_path / "e.npz")


def test_bad_row_is_named_and_nothing_is_written(tmp_path):
    ev = _strike_events()
    ev["strike"][2, 2] = np.nan
    with pytest.raises(EventFileError, match="'strike' row 2 is not finite"):
        save_events(tmp_path / "e.npz", ev)
    assert os.listdir(tmp_path) == []


def test_wrong_shape_is_named(tmp_path):
    ev = _strike_events()
    ev["post_velocity"] = ev["post_velocity"][:, :2]
    with pytest.raises(EventFileError, match=r"'post_velocity' has shape \(3, 2\)"):
        save_events(tmp_path / "e.npz", ev)


def test_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "e.npz"
    save_events(path, _strike_events(3))
    bad = _strike_events(5)
    bad["t_touch"][4] = np.inf
    with pytest.raises(EventFileError):
        save_events(path, bad)
    assert load_events(path)["strike"].shape == (3, 3)


def test_wrong_scene_and_foreign_files(tmp_path):
    save_events(tmp_path / "e.npz", _strike_events())
    with pytest.raises(EventFileError, match="needs 'cube-toss' events"):
        load_events(tmp_path / "e.npz", scene="cube-toss")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(EventFileError, match="not a readable .npz"):
        load_events(tmp_path / "junk.npz")
    with pytest.raises(EventFileError, match="no such file"):
        load_events(tmp_path / "absent.npz")

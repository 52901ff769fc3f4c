"""The tracks of a strike recording as the track fits read them: touched strikes, samples from t = 0, start poses."""

from __future__ import annotations

import numpy as np

from ._ingest_strike import pooled_noise, start_pose_before_touch


def read_tracks(recording: dict, rows=None) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray], np.ndarray, tuple]:
    """The touched strikes of a recording (npz contents) among `rows`, as the fit uses them.

    Returns:
        (strikes (n, 3), times [n × (k_i,)], poses [n × (k_i, 3)], start poses (n, 3), noise (m, rad)).

    Raises:
        ValueError: when none of the selected strikes touched the block.
    """
    offsets = np.asarray(recording["offsets"])
    n_all = len(offsets) - 1
    rows = np.arange(n_all) if rows is None else np.asarray(rows, int).reshape(-1)
    if rows.size and (rows.min() < 0 or rows.max() >= n_all):
        raise ValueError(f"read_tracks: rows {rows.tolist()} reach outside the recording's {n_all} strikes")
    touched = np.asarray(recording["touched"]).astype(bool)
    t_touch = np.where(touched, np.asarray(recording["t_first_touch"], np.float64), np.nan)
    keep = [int(i) for i in rows if touched[i]]
    if not keep:
        raise ValueError(
            f"read_tracks: none of the {len(rows)} selected strike(s) touched the block ('touched' is "
            "false for all), so the tracks say nothing about the contact; select touched strikes (rows=...)"
        )
    t_all, pose_all = np.asarray(recording["t"], np.float64), np.asarray(recording["block_pose"], np.float64)
    tracks = [(t_all[a:b], pose_all[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    noise = pooled_noise(tracks, t_touch)
    given = np.asarray(recording["start_pose"], np.float64) if "start_pose" in recording else None
    times, poses, starts = [], [], []
    for i in keep:
        t, pose = tracks[i]
        start = given[i] if given is not None else start_pose_before_touch(t, pose, t_touch[i], noise)
        starts.append(pose[0] if start is None else start)
        times.append(t[t >= 0.0])
        poses.append(pose[t >= 0.0])
    return np.asarray(recording["strike"], np.float64)[keep], times, poses, np.asarray(starts), noise

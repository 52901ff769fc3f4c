"""Pictures where people would rather look than read: α-curves, recorded against predicted tracks, cube tosses.

Every function writes one PNG atomically (a temporary file renamed into
place) and creates its folder; matplotlib runs headless (Agg).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..scenes import FRAME_DT
from ._cube_pipeline import METHODS


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str, dpi: int = 120) -> None:
    plt = _pyplot()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    os.replace(tmp, path)


def plot_alpha_curves(curves: dict, path: str, title: str = "") -> None:
    """α-accuracy curves (CLASH Fig. 4) of several methods into one PNG."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.6), dpi=120)
    for name, (alphas, acc) in curves.items():
        ax.plot(alphas, acc, label=name)
    ax.axvline(0.1, color="0.6", lw=0.8, ls="--")
    ax.set_xlabel("α (relative error bound)")
    ax.set_ylabel("α-accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def plot_tracks(tracks: dict[str, np.ndarray], path: str, title: str = "", target: np.ndarray | None = None) -> None:
    """Block tracks in the plane, one per method ({name: (n, 3) poses x, y, yaw}), "recorded" drawn as dots."""
    plt = _pyplot()
    fig, (ax, ay) = plt.subplots(1, 2, figsize=(9, 4), dpi=120)
    for name, tr in tracks.items():
        tr = np.asarray(tr)
        style = dict(ls="none", marker=".", ms=4, color="k") if name == "recorded" else dict(lw=1.5)
        ax.plot(tr[:, 0] * 1000, tr[:, 1] * 1000, label=name, **style)
        ay.plot(np.arange(len(tr)), np.degrees(np.unwrap(tr[:, 2])), label=name, **style)
    if target is not None:
        ax.plot(target[0] * 1000, target[1] * 1000, "r*", ms=10, label="target")
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ay.set_xlabel("sample (120 Hz)")
    ay.set_ylabel("yaw (deg)")
    ay.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def plot_tosses(result: Any, path: str) -> None:
    """Horizontal distance travelled and height of a few evaluation tosses: real against each method."""

    plt = _pyplot()

    real = result.tracks["real"]
    fig, axes = plt.subplots(2, len(real), figsize=(4 * len(real), 6), squeeze=False)
    for j, r in enumerate(real):
        t = np.arange(len(r)) * FRAME_DT
        for name, style in zip(("real",) + METHODS, ("k-", "C0--", "C1--", "C2--", "C3-")):
            if name != "real" and name not in result.sim_tracks:
                continue
            tr = r if name == "real" else result.sim_tracks[name][j][: len(r)]
            dist = np.linalg.norm(tr[:, 4:6] - r[0, 4:6], axis=1)
            axes[0, j].plot(t, dist * 100, style, label=name, lw=2 if name in ("real", "clashx") else 1)
            axes[1, j].plot(t, tr[:, 6] * 100, style, lw=2 if name in ("real", "clashx") else 1)
        axes[0, j].set_title(f"toss {result.tracks['toss_ids'][j]}")
        axes[1, j].set_xlabel("time (s)")
    axes[0, 0].set_ylabel("horizontal distance from start (cm)")
    axes[1, 0].set_ylabel("centre height (cm)")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)

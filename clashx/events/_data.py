"""Data shipped inside the package (each folder carries its source and licence)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..scenes import check_shape

LAB_SPLITS = ("fit", "test")


def data_path(name: str) -> Path:
    """Path of a file shipped in `clashx/data/`, e.g. `data_path("contactnets_cube/tosses.npz")`."""
    path = Path(str(resources.files("clashx") / "data" / name))
    if not path.exists():
        raise FileNotFoundError(f"clashx ships no data file {name!r} (looked in {path.parent})")
    return path


def lab_recording(shape: str, split: str) -> Path:
    """Path of a shipped strike-lab recording (lab A; see `clashx/data/strike_lab/README.md`).

    Args:
        shape: "semi-cylinder", "square" or "triangle".
        split: "fit" (10 strikes, to learn from) or "test" (200 strikes, to evaluate on).

    Returns:
        The `.npz` recording, in the format `clashx.ingest_strike_file` reads.  Its
        `post_velocity_true` is for scoring only.

    Example: `clashx.ingest_strike_file(clashx.lab_recording("square", "fit"))`.
    """
    check_shape(shape)
    if split not in LAB_SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(LAB_SPLITS)}")
    return data_path(f"strike_lab/{shape}_{split}.npz")

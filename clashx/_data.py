"""Data shipped inside the package (each folder carries its source and licence)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def data_path(name: str) -> Path:
    """Path of a file shipped in `clashx/data/`, e.g. `data_path("contactnets_cube/tosses.npz")`."""
    path = Path(str(resources.files("clashx") / "data" / name))
    if not path.exists():
        raise FileNotFoundError(f"clashx ships no data file {name!r} (looked in {path.parent})")
    return path

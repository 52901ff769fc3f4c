"""Small file helpers shared by the I/O layer."""

from __future__ import annotations

import json
import os

import equinox as eqx


def write_json(path: str, obj) -> None:
    """Write JSON so that `path` holds the old content or the whole new one, never a part."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_model(run_dir: str | os.PathLike, model, meta: dict, model_file: str, meta_file: str) -> None:
    """Write a model's leaves (`eqx.tree_serialise_leaves`) and its JSON metadata into `run_dir`, each atomically.

    The weights go first: a reader that finds the metadata finds weights beside it.
    """
    run_dir = os.fspath(run_dir)
    os.makedirs(run_dir, exist_ok=True)
    tmp = os.path.join(run_dir, model_file + ".tmp")
    eqx.tree_serialise_leaves(tmp, model)
    os.replace(tmp, os.path.join(run_dir, model_file))
    write_json(os.path.join(run_dir, meta_file), meta)


def read_model_meta(run_dir: str | os.PathLike, meta_file: str, fix: str) -> tuple[dict, str]:
    """The metadata JSON of a saved model and its path; FileNotFoundError naming the folder and `fix` if absent."""
    meta_path = os.path.join(os.fspath(run_dir), meta_file)
    if not os.path.exists(meta_path):
        raise FileNotFoundError(f"{os.fspath(run_dir)}: no {meta_file}; {fix}")
    with open(meta_path) as f:
        return json.load(f), meta_path


def check_space(run_dir: str | os.PathLike, meta: dict, space) -> None:
    """Raise a ValueError if a saved model is conditioned on another parameter space than `space` (None: any)."""
    if space is None or space.describe() == meta["param_space"]:
        return
    saved, want = meta["param_space"], space.describe()
    raise ValueError(
        f"{os.fspath(run_dir)}: the surrogate is conditioned on parameters {saved['names']} with ranges "
        f"{saved['low']}..{saved['high']}, not on {want['names']} with {want['low']}..{want['high']}"
    )

"""Small file helpers shared by the I/O layer: atomic writes, output checks, model folders."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax

from ._checks import check_finite_model


def write_json(path: str, obj) -> None:
    """Write JSON so that `path` holds the old content or the whole new one, never a part."""
    write_text(path, json.dumps(obj, indent=1))


def write_text(path: str, text: str) -> None:
    """Write `text` so that `path` holds the old content or the whole new one, never a part."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# Files that mark a folder as a model run (to resume or replace).
RUN_FILES = frozenset({"checkpoint.json", "surrogate.json", "model.json", "metrics.json"})


def check_output(
    path: str | os.PathLike, flag: str, *, folder: bool = False, run: bool = False, suffix: str | None = None
) -> None:
    """Raise a ValueError naming `flag` and the fix if `path` cannot be written as a file (or, with `folder`, a folder).

    Cheap checks made before any work: the path is not an existing folder where a
    file is wanted (or a file where a folder is), it ends in `suffix` if given,
    and its nearest existing parent is a folder we may write into.  With `run`
    (a model's run folder), an existing folder must be empty or hold a run.
    """
    path = os.fspath(path)
    if not path:
        raise ValueError(f"{flag}: empty path")
    if suffix and not folder and not path.endswith(suffix):
        raise ValueError(
            f"{flag} {path!r}: clashx writes {suffix} files only under names that end in {suffix} "
            f"(so that every reader finds them); use {path}{suffix}"
        )
    if folder and os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag} {path!r} is a file, not a folder; choose another {flag}")
    if run and os.path.isdir(path):
        listing = set(os.listdir(path))
        if listing and not listing & RUN_FILES:
            raise ValueError(
                f"{flag} {path!r} holds {len(listing)} other file(s) and no clashx output; clashx writes its "
                f"folders whole: choose a new or empty folder (e.g. {os.path.join(path, 'run')})"
            )
    if not folder and os.path.isdir(path):
        raise ValueError(f"{flag} {path!r} is a folder; give a file name inside it, e.g. {os.path.join(path, 'out')}")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"{flag} {path!r}: {parent} is a file, not a folder; choose another {flag}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path!r}: no permission to write in {parent}; choose another {flag}")


def describe_changes(old: dict, new: dict, flags: dict[str, str]) -> str:
    """The settings that differ between `old` and `new`, e.g. "--seed 3 there, 99 now; --n 10 there, 12 now".

    `flags` maps a setting's key to the flag that sets it (the key itself if absent).
    """
    keys = [k for k in {**old, **new} if old.get(k) != new.get(k)]
    return "; ".join(f"{flags.get(k, k)} {old.get(k)!r} there, {new.get(k)!r} now" for k in keys)


def save_model(run_dir: str | os.PathLike, model, meta: dict, model_file: str, meta_file: str) -> None:
    """Write a model's leaves (`eqx.tree_serialise_leaves`) and its JSON metadata into `run_dir`, each atomically.

    The weights go first: a reader that finds the metadata finds weights beside it.
    """
    run_dir = os.fspath(run_dir)
    check_finite_model(model, run_dir, "nothing was written; the training diverged: lower --lr and train again")
    os.makedirs(run_dir, exist_ok=True)
    tmp = os.path.join(run_dir, model_file + ".tmp")
    eqx.tree_serialise_leaves(tmp, model)
    os.replace(tmp, os.path.join(run_dir, model_file))
    write_json(os.path.join(run_dir, meta_file), meta)


def read_model_meta(
    run_dir: str | os.PathLike, meta_file: str, fix: str, *, keys: tuple[str, ...] = (), retrain: str = ""
) -> tuple[dict, str]:
    """The metadata JSON of a saved model and its path.

    Args:
        run_dir: the model folder.
        meta_file: the metadata's file name in it.
        fix: what to do when the file is absent.
        keys: keys the metadata must hold.
        retrain: how to make the model again (e.g. "re-run `clashx pretrain`"), for a damaged file.

    Raises:
        FileNotFoundError: no `meta_file` in `run_dir` (names the folder and `fix`).
        ValueError: the file is not a JSON object or lacks one of `keys` (names the file and the fix).
    """
    meta_path = os.path.join(os.fspath(run_dir), meta_file)
    if os.path.isfile(os.fspath(run_dir)):
        raise FileNotFoundError(f"{os.fspath(run_dir)}: a file, not a model folder; {fix}")
    if not os.path.exists(meta_path):
        raise FileNotFoundError(f"{os.fspath(run_dir)}: no {meta_file}; {fix}")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{meta_path}: corrupt, not JSON ({e}); copy the folder again or {retrain}") from None
    missing = [k for k in keys if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise ValueError(f"{meta_path}: corrupt, no {missing} in it; copy the folder again or {retrain}")
    return meta, meta_path


def load_model_leaves(
    run_dir: str | os.PathLike, model_file: str, meta_file: str, make: Callable[[], Any], retrain: str
):
    """The leaves in `run_dir/model_file` loaded into the skeleton `make()` builds from the metadata in `meta_file`.

    Raises:
        FileNotFoundError: the weights file is absent.
        ValueError: the metadata describes no model `make` can build, or the weights
            file is damaged (truncated, foreign bytes) or holds another architecture
            than its metadata describes; the message names the file and how to fix
            it (`retrain`, or copy the folder again).
    """
    path = os.path.join(os.fspath(run_dir), model_file)
    try:
        with jax.enable_x64(False):  # the saved leaves are float32; under x64 a skeleton would be float64
            skeleton = make()
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(
            f"{os.path.join(os.fspath(run_dir), meta_file)}: corrupt, describes no model ({type(e).__name__}: {e}); "
            f"copy the folder again or {retrain}"
        ) from None
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file beside its {meta_file}; copy the folder again or {retrain}")
    try:
        with open(path, "rb") as f:
            model = eqx.tree_deserialise_leaves(f, skeleton)
            trailing = f.read(1)  # a smaller network than the file's leaves bytes unread
    except Exception as e:  # equinox and numpy raise many kinds for bad bytes or shapes
        raise ValueError(_load_error(path, meta_file, retrain, str(e))) from None
    if trailing:
        raise ValueError(_load_error(path, meta_file, retrain, "bytes left over"))
    check_finite_model(model, path, f"the model is unusable; {retrain}")
    return model


def _load_error(path: str, meta_file: str, retrain: str, why: str) -> str:
    """The message for weights that do not load: the shapes if equinox named them, else "corrupt"."""
    shapes = re.search(r"from (\(.*?\)) in `like` to (\(.*?\)) on disk", why)
    if shapes:
        what = (
            f"does not match its {meta_file}: a weight is {shapes[2]} in the file but {shapes[1]} by the width "
            f"and depth in {meta_file} (edited?)"
        )
    else:
        what = f"corrupt (truncated or damaged), or holds another network than its {meta_file} describes"
    return f"{path}: {what}; copy the folder again or {retrain}"


def check_space(run_dir: str | os.PathLike, meta: dict, space) -> None:
    """Raise a ValueError if a saved model is conditioned on another parameter space than `space` (None: any).

    Spaces are compared as `ParamSpace`s, so an older file's description (without the
    targets' kind and mode, or the nominal values) matches the same space today.
    """
    if space is None:
        return
    saved_space = type(space).from_description(meta["param_space"])
    if (
        saved_space.names == space.names
        and saved_space.low == space.low
        and saved_space.high == space.high
        and (saved_space.targets == space.targets and saved_space.log_scale == space.log_scale)
    ):
        return
    saved, want = meta["param_space"], space.describe()
    raise ValueError(
        f"{os.fspath(run_dir)}: the surrogate is conditioned on parameters {saved['names']} with ranges "
        f"{saved['low']}..{saved['high']}, not on {want['names']} with {want['low']}..{want['high']}"
    )

"""Checks made at the boundary, before any work: seeds, finite weights, outputs that are inputs, one writer per output."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
from collections.abc import Iterator, Mapping

import equinox as eqx
import jax
import numpy as np

SEED_LIMIT = 2**32  # jax.random.PRNGKey keeps 32 bits of a seed without x64: 2**32 would be seed 0 again


class ParameterError(ValueError):
    """A bad argument of a library call: it names the parameter, the value given and the fix.

    The library names its own parameters (`GenerateConfig(chunk_size=0): must be positive`);
    the command line translates the parameter into its flag (`--chunk-size 0: must be positive`,
    `flag_message`), so a Python user is never told about flags and a shell user never about
    keyword arguments.

    Attributes:
        param: the parameter's name, as the function or config spells it.
        value: the value given.
        why: what is wrong and how to fix it.
        owner: the function or config the parameter belongs to ("" if none).
    """

    def __init__(self, param: str, value, why: str, owner: str = ""):
        self.param, self.value, self.why, self.owner = param, value, why, owner
        where = f"{owner}({param}={value!r})" if owner else f"{param}={value!r}"
        super().__init__(f"{where}: {why}")

    def flag_message(self, flag: str) -> str:
        """The message with `flag` in the parameter's place: "--chunk-size 0: must be positive"."""
        value = self.value
        if isinstance(value, tuple | list):
            value = " ".join(map(str, value))
        shown = repr(value) if isinstance(value, str) else str(value)
        return f"{flag} {shown}: {self.why}"


def check_seed(seed: int, param: str = "seed") -> int:
    """`seed` if it is an integer in [0, 2**32), else a `ParameterError` naming `param` and the range."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < SEED_LIMIT:
        raise ParameterError(
            param, seed, f"a seed is a whole number from 0 to {SEED_LIMIT - 1} (JAX's PRNG keeps 32 bits)"
        )
    return int(seed)


def event_weights(weights, n: int, who: str) -> np.ndarray | None:
    """A fit's weight per event, validated and scaled to mean 1 (None stays None: equal weights).

    Every fit that takes `weights` (`clashx.identify`, the MuJoCo-side baselines) weighs an event's squared
    residual by it, so a mean of 1 keeps the loss's scale and its balance with a prior.

    Raises:
        ValueError: not `n` finite numbers >= 0 with a positive sum (naming `who`).
    """
    if weights is None:
        return None
    w = np.asarray(weights, np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"{who}'s weights must be {n} finite numbers >= 0, not all 0 (got shape {w.shape})")
    return w / w.mean()


def nonfinite_leaves(tree) -> list[str]:
    """The key paths (e.g. "layers[0].weight") of a pytree's array leaves that hold NaN or inf."""
    bad = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(eqx.filter(tree, eqx.is_array)):
        if np.issubdtype(np.asarray(leaf).dtype, np.inexact) and not np.isfinite(np.asarray(leaf)).all():
            bad.append(jax.tree_util.keystr(path))
    return bad


def check_finite_model(model, where: str, fix: str) -> None:
    """Raise a ValueError naming `where`, the non-finite weights and `fix` if any weight of `model` is NaN or inf."""
    bad = nonfinite_leaves(model)
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise ValueError(f"{where}: non-finite weights (NaN or inf) in {', '.join(bad[:3])}{more}; {fix}")


def same_path(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file or folder (links followed; either may not exist yet)."""
    a, b = os.fspath(a), os.fspath(b)
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def check_outputs_apart(outputs: Mapping[str, str | None], inputs: Mapping[str, str | None]) -> None:
    """Raise a ValueError if an output path is an input's, another output's, inside an input folder, or a device.

    Args:
        outputs: flag -> path a command writes (None: not given).
        inputs: flag -> path it reads (None: not given).
    """
    outs = [(f, os.fspath(p)) for f, p in outputs.items() if p]
    ins = [(f, os.fspath(p)) for f, p in inputs.items() if p]
    for i, (flag, out) in enumerate(outs):
        if os.path.exists(out) and not (os.path.isfile(out) or os.path.isdir(out)):
            raise ValueError(f"{flag} {out!r} is a device or pipe, not a file; give a file path")
        for in_flag, path in ins:
            if same_path(out, path):
                raise ValueError(
                    f"{flag} {out!r} is the {in_flag} file this command reads; writing it would destroy the input. "
                    f"Choose another {flag}"
                )
            if os.path.isdir(path) and _inside(out, path):
                raise ValueError(
                    f"{flag} {out!r} lies inside the {in_flag} folder {path!r} this command reads; writing there "
                    f"could replace its files. Choose another {flag}"
                )
        for other_flag, other in outs[:i]:
            if same_path(out, other):
                raise ValueError(f"{flag} and {other_flag} are the same path {out!r}; give each its own")


def _inside(path: str, folder: str) -> bool:
    """Whether `path` lies inside `folder` (links followed; `path` need not exist)."""
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([real, root]) == root and real != root


@contextlib.contextmanager
def output_lock(paths: Mapping[str, str | None], command: str) -> Iterator[None]:
    """Hold an exclusive lock (`PATH.lock`, flock) on each output path while `command` writes them.

    A second run that would write the same output stops at once with a ValueError
    naming the run that holds it.  The lock is the kernel's (it ends with the
    process, even on kill -9); the `.lock` file is removed on a normal exit.
    """
    held: list[tuple[int, str]] = []
    try:
        for flag, path in paths.items():
            if not path:
                continue
            lock = os.path.abspath(os.fspath(path)).rstrip(os.sep) + ".lock"
            if not os.path.isdir(os.path.dirname(lock)):  # the writer makes the folder; nothing to guard yet
                continue
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise ValueError(
                    f"{flag} {os.fspath(path)!r}: cannot write in {os.path.dirname(lock)} ({e.strerror}); "
                    f"choose another {flag}"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = os.read(fd, 4096).decode(errors="replace").strip() or "another run"
                os.close(fd)
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                raise ValueError(
                    f"{flag} {os.fspath(path)!r} is being written by another clashx run ({holder}); "
                    f"wait for it to finish, or choose another {flag}"
                ) from None
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}: {command}".encode())
            held.append((fd, lock))
        yield
    finally:
        for fd, lock in reversed(held):
            with contextlib.suppress(OSError):
                os.unlink(lock)
            os.close(fd)


def command_line(argv: list[str] | None = None) -> str:
    """The running command, as a user would type it (for lock files and messages)."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["clashx", *args])

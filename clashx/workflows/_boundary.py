"""The command line's boundary: flag types with their ranges, and the guard every command runs inside.

`run_guarded` checks a parsed command's output paths against its inputs
(`clashx.core.check_outputs_apart`), locks its outputs (`clashx.core.output_lock`),
runs it, and turns every failure into one line on stderr and an exit code: 2 for
bad input, 130 for Ctrl-C, 143 for SIGTERM.  No traceback reaches the user.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading

from ..core import ParameterError, block_override, check_outputs_apart, check_seed, output_lock

# The flags whose paths a command reads, and those it writes: an output that is an input is refused,
# and each output is locked while the command writes it (`clashx.core.output_lock`).
INPUT_FLAGS = ("data", "real", "params", "model", "events", "input", "done", "ran", "targets", "need")
OUTPUT_FLAGS = ("out", "json", "plot")
RESUMABLE = ("generate", "pretrain", "train-policy")  # these keep their finished chunks, epochs or tables
# A library parameter whose flag is not "--" + its name with dashes (`flag_of`).
FLAG_OF = {"to_rest": "--no-rest", "k": "--k", "scene_spec": "--scene"}


def flag_of(param: str) -> str:
    """The command line's flag for a library parameter: `chunk_size` -> `--chunk-size`."""
    return FLAG_OF.get(param, "--" + param.replace("_", "-"))


def number_arg(kind, low: float, high: float = math.inf, *, low_open: bool = False, what: str = ""):
    """An argparse type: a finite `kind` in [low, high] (or (low, high] with `low_open`); the message says the range."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}"
            ) from None
        too_low = value <= low if low_open else value < low
        if not math.isfinite(value) or too_low or value > high:
            bound = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if high < math.inf else "")
            number = "a whole number" if kind is int else "a finite number"
            raise argparse.ArgumentTypeError(f"{text}: expected {number} {bound}{what}")
        return value

    return parse


def seed_arg(text: str) -> int:
    """An argparse type: a seed in [0, 2**32)."""
    try:
        return check_seed(int(text))
    except ParameterError as e:
        raise argparse.ArgumentTypeError(f"{text}: {e.why}") from None
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


POSITIVE = number_arg(int, 1)
POSITIVE_FLOAT = number_arg(float, 0.0, low_open=True)
LEARNING_RATE = number_arg(float, 0.0, 1.0, low_open=True, what=" (a learning rate, e.g. 1e-3)")


class Terminated(BaseException):
    """SIGTERM (e.g. `timeout`, a batch scheduler) raised as an exception, so outputs and locks are cleaned up."""


def run_guarded(a: argparse.Namespace, command: str) -> int:
    """Run the parsed command `a.func(a)` inside the boundary (module docs); returns the exit code.

    `command` is the command line as typed, written into the output locks.
    """
    outputs = _paths(a, OUTPUT_FLAGS)
    if a.command == "evaluate" and a.json and not a.plot:  # the α-curve goes beside the JSON
        outputs["--json (its .png)"] = os.path.splitext(a.json)[0] + ".png"
    signalled: list[Terminated] = []  # the SIGTERM raised, if any (`_on_sigterm`)
    previous = _on_sigterm(signalled)
    try:
        check_outputs_apart(outputs, _paths(a, INPUT_FLAGS) | _scene_file(a))
        with output_lock(outputs, command), block_override(getattr(a, "block_size", None)):
            return a.func(a)
    except (ValueError, RuntimeError, MemoryError, OSError) as e:
        # raised while unwinding a stop: e.g. a zip writer closed mid-entry by np.savez, or JAX's compile cache,
        # which reports an exception raised inside a static argument's __eq__ as a ValueError without the chain
        stop = _stop_behind(e) or (signalled[0] if signalled else None)
        if stop is not None:
            return _stopped(a, stop)
        if isinstance(e, MemoryError):
            message = (
                "out of memory; ask for less at once (fewer worlds or events, a shorter time, a smaller --block-size)"
            )
        elif isinstance(e, OSError):
            message = _os_message(e)
        elif isinstance(e, ParameterError):  # the library names its parameter; the user typed a flag
            message = e.flag_message(flag_of(e.param))
        else:
            message = str(e)
    except (KeyboardInterrupt, Terminated) as e:
        return _stopped(a, e)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    print(f"clashx {a.command}: error: {message}", file=sys.stderr)
    return 2


def _stop_behind(e: BaseException | None) -> BaseException | None:
    """The Ctrl-C or SIGTERM an error was raised while handling, if any (its `__context__` chain)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, (KeyboardInterrupt, Terminated)):
            return e
        seen.add(id(e))
        e = e.__context__
    return None


def _stopped(a: argparse.Namespace, e: BaseException) -> int:
    """Report a stop (Ctrl-C: 130, SIGTERM: 143) and what the user can do."""
    again = "rerun the same command to resume" if a.command in RESUMABLE else "no output was half-written"
    how = "Ctrl-C" if isinstance(e, KeyboardInterrupt) else "SIGTERM"
    print(f"\nclashx {a.command}: stopped ({how}); {again}", file=sys.stderr)
    return 130 if isinstance(e, KeyboardInterrupt) else 143


def _os_message(e: OSError) -> str:
    """An operating-system error as a line naming the path and the fix (our own FileNotFoundErrors say it all)."""
    if e.errno is None or not e.filename:
        return str(e)
    return (
        f"{e.filename}: {e.strerror}; check the path, that it (or its folder) exists, and that you may read it "
        "(an input) or write there (an output)"
    )


def _on_sigterm(signalled: list[Terminated]):
    """Make SIGTERM raise `Terminated` in the main thread, appended to `signalled` as well (an error that swallows
    it is still the stop's); returns the previous handler (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        signalled.append(Terminated())
        raise signalled[-1]

    return signal.signal(signal.SIGTERM, stop)


def _paths(a: argparse.Namespace, names: tuple[str, ...]) -> dict[str, str | None]:
    """{"--flag": path} of the parsed flags in `names` that the command has."""
    return {f"--{name.replace('_', '-')}": getattr(a, name) for name in names if getattr(a, name, None)}


def _scene_file(a: argparse.Namespace) -> dict[str, str]:
    """{"--scene": path} when --scene names a file (path/to/file.py:CLASS)."""
    where = (getattr(a, "scene", None) or "").rpartition(":")[0]
    return {"--scene": where} if where.endswith(".py") else {}

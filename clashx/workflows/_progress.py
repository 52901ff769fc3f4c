"""The command line's progress bars: tqdm, made on first use, closed on leaving a `with` block."""

from __future__ import annotations

from typing import Any

from tqdm import tqdm


class ProgressBar:
    """A tqdm progress bar made on first use; closed when done or on leaving a `with` block.

    Closing it ends its line, so an error printed after it starts on a line of its own.
    """

    def __init__(self, desc: str, unit: str):
        self.desc, self.unit = desc, unit
        self.bar: Any = None

    def __call__(self, done: int, total: int, postfix: dict | None = None) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.desc, unit=self.unit, dynamic_ncols=True)
        self.bar.update(done - self.bar.n)
        if postfix:
            self.bar.set_postfix(postfix)
        if done >= total:
            self.close()

    def write(self, line: str) -> None:
        """Print `line` above the bar (or plainly before it starts)."""
        if self.bar is None:
            print(line)
        else:
            self.bar.write(line)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""Numeric CSV tables given on the command line (`--targets`, `--need`): every bad cell named by file, line and column."""

from __future__ import annotations

import csv
from collections.abc import Sequence

import numpy as np


def read_columns(
    path: str, flag: str, columns: Sequence[str], optional: Sequence[str] = (), what: str = "row"
) -> tuple[np.ndarray, np.ndarray | None, list[int]]:
    """(values (n, len(columns)), optional values (n, len(optional)) or None, each row's line in the file)
    from a CSV with a header (blank lines skipped).

    The `optional` columns come all together or not at all; other columns are ignored.

    Raises:
        ValueError: naming `flag`, the file, and the line or column, for an unreadable file, a
            missing column, a ragged row, a non-number or a non-finite value.
    """
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise ValueError(f"{flag} {path}: cannot read it ({e.strerror or e})") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise ValueError(f"{flag} {path}: not a CSV text file ({e})") from None
    numbered = [(i, r) for i, r in enumerate(rows, start=1) if any(c.strip() for c in r)]  # the file's line numbers
    lines, rows = [i for i, _ in numbered], [r for _, r in numbered]
    if not rows:
        raise ValueError(f"{flag} {path}: empty; expected a header {','.join(columns)} and one row per {what}")
    header = [c.strip() for c in rows[0]]
    missing = [c for c in columns if c not in header]
    if missing:
        also = f" (and optionally {','.join(optional)})" if optional else ""
        raise ValueError(
            f"{flag} {path}: no column(s) {', '.join(missing)} in the header {rows[0]}; expected "
            f"{','.join(columns)}{also}"
        )
    has = [c in header for c in optional]
    if any(has) and not all(has):
        raise ValueError(f"{flag} {path}: give all of {', '.join(optional)} or none")
    if len(rows) < 2:
        raise ValueError(f"{flag} {path}: a header but no {what}s")
    names = tuple(columns) + (tuple(optional) if all(has) and optional else ())
    cols = [header.index(c) for c in names]
    values = np.zeros((len(rows) - 1, len(cols)))
    for k, (i, row) in enumerate(zip(lines[1:], rows[1:], strict=True)):
        if len(row) != len(header):
            raise ValueError(f"{flag} {path} line {i}: {len(row)} fields, the header has {len(header)}")
        for j, c in enumerate(cols):
            try:
                values[k, j] = float(row[c])
            except ValueError:
                raise ValueError(f"{flag} {path} line {i}, {header[c]}: {row[c]!r} is not a number") from None
            if not np.isfinite(values[k, j]):
                raise ValueError(f"{flag} {path} line {i}, {header[c]}: {row[c]!r} is not finite")
    n = len(columns)
    return values[:, :n], (values[:, n:] if all(has) and optional else None), lines[1:]

"""Small file helpers shared by the I/O layer."""

from __future__ import annotations

import json
import os


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

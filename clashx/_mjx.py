"""MJX, imported once and quietly.

mujoco.mjx prints "Failed to import warp" to stdout when the optional Warp
backend is absent (always, on a CPU machine); that line would land in users'
notebooks and in piped CLI output, so the import is done here with stdout
captured, and every clashx module imports `mjx` from here.
"""

import contextlib
import io

with contextlib.redirect_stdout(io.StringIO()):
    from mujoco import mjx

__all__ = ["mjx"]

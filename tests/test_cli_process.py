"""The `clashx` command as a process: SIGTERM and Ctrl-C stop it cleanly and keep what resumes, an error raised
while unwinding a stop is still the stop, and JAX's compiled programs are kept where JAX or the user says."""

from __future__ import annotations

import argparse
import glob
import os
import signal
import subprocess
import sys
import time

import jax
from cli_cases import GEN


def test_sigterm_stops_cleanly_and_keeps_what_resumes(tmp_path):
    out = tmp_path / "e.npz"
    cmd = [sys.executable, "-m", "clashx.workflows._cli", *GEN, "--n", "4000", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not glob.glob(str(out) + ".parts/chunk-*.npz") and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "stopped (SIGTERM); rerun the same command to resume" in err and "Traceback" not in err
    assert os.path.isdir(str(out) + ".parts") and not os.path.exists(str(out) + ".lock") and not out.exists()


def test_an_error_raised_while_unwinding_a_stop_is_the_stop(capsys):
    """SIGTERM inside np.savez leaves its zip writer open; closing it raises ValueError over the stop.  That is
    still the stop (143, resumable), not an error (2): CI once saw exactly this race."""
    from clashx.workflows._boundary import Terminated, run_guarded

    def stopped_mid_write(a):
        try:
            raise Terminated
        finally:
            raise ValueError("Can't close the ZIP file while there is an open writing handle on it.")

    def interrupted_mid_write(a):
        try:
            raise KeyboardInterrupt
        finally:
            raise OSError("seek of closed file")

    assert run_guarded(argparse.Namespace(command="generate", func=stopped_mid_write), "clashx generate") == 143
    assert "stopped (SIGTERM); rerun the same command to resume" in capsys.readouterr().err
    assert run_guarded(argparse.Namespace(command="identify", func=interrupted_mid_write), "clashx identify") == 130
    assert "stopped (Ctrl-C); no output was half-written" in capsys.readouterr().err

    def stopped_inside_jax(a):  # JAX's compile cache reports a SIGTERM inside __eq__ as a ValueError, no chain
        swallowed = False
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
        except BaseException:
            swallowed = True
        if swallowed:
            raise ValueError("static arguments should be comparable using __eq__ (CI, 2026-12-07)")

    assert run_guarded(argparse.Namespace(command="generate", func=stopped_inside_jax), "clashx generate") == 143
    assert "stopped (SIGTERM); rerun the same command to resume" in capsys.readouterr().err

    def plain_error(a):
        raise ValueError("bad row 3")

    assert run_guarded(argparse.Namespace(command="identify", func=plain_error), "clashx identify") == 2
    assert "error: bad row 3" in capsys.readouterr().err


def test_the_cli_keeps_compiled_programs_where_jax_or_the_user_says(tmp_path):
    """The persistent compilation cache: JAX's own variable wins, then XDG_CACHE_HOME; CLASHX_COMPILATION_CACHE=0
    turns it off (as the tests do)."""
    from clashx.workflows._cli import use_compilation_cache

    before = jax.config.jax_compilation_cache_dir
    assert use_compilation_cache({"CLASHX_COMPILATION_CACHE": "0", "XDG_CACHE_HOME": str(tmp_path)}) is None
    assert use_compilation_cache({"JAX_COMPILATION_CACHE_DIR": "/elsewhere"}) == "/elsewhere"
    assert jax.config.jax_compilation_cache_dir == before  # left to JAX in both cases
    try:
        folder = use_compilation_cache({"XDG_CACHE_HOME": str(tmp_path)})
        assert folder == str(tmp_path / "clashx" / "jax")
        assert jax.config.jax_compilation_cache_dir == folder
    finally:
        jax.config.update("jax_compilation_cache_dir", before)

"""Shared fixtures: scenes and compiled functions are built once per test session (MJX compiles are slow)."""

from __future__ import annotations

import gc
import importlib.util
import os
import sys
from pathlib import Path

import jax
import pytest
from jaxtyping import install_import_hook

# jaxtyping's runtime shape checks (beartype) on the modules whose annotations describe the arrays of one
# call: installed before clashx is first imported, so these modules are checked in every test below.
CHECKED = (
    "clashx.core._params",
    "clashx.events._metrics",
    "clashx.scenes._pair",
    "clashx.surrogate._base",
    "clashx.surrogate._pair",
    "clashx.hybrid._rule",
    "clashx.scenes._pair_state",
    "clashx.scenes._pair_contact",
    "clashx.scenes._scene",
    "clashx.learn._pair_learn",
)
_HOOK = install_import_hook(CHECKED, "beartype.beartype")
# the CLI's own persistent compilation cache (under the home folder) stays off in tests and in the commands they
# start: nothing of an earlier run may make a test pass.  Instead each run has a fresh cache of its own
# (`_run_compilation_cache`), shared by the xdist workers and the commands they start.
os.environ["CLASHX_COMPILATION_CACHE"] = "0"

import clashx  # noqa: E402
from clashx.scenes import _strike  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def strike_sims():
    """One StrikeScene per shape, built lazily and always in float32.

    A test may first ask for a scene inside `jax.enable_x64(True)`; built there, its arrays would be float64
    and every later float32 test would get a scene whose MJX scan carries change dtype.
    """
    cache: dict[str, _strike.StrikeScene] = {}

    def get(shape: str) -> _strike.StrikeScene:
        if shape not in cache:
            with jax.enable_x64(False):
                cache[shape] = clashx.make_strike_scene(shape)
        return cache[shape]

    return get


@pytest.fixture(scope="session")
def mjx_strike_fn():
    """jit(vmap(simulate_strike)) per (shape, to_rest), compiled once for the session."""
    cache = {}

    def get(sim: _strike.StrikeScene, to_rest: bool = True):
        key = (sim.shape, to_rest)
        if key not in cache:
            cache[key] = jax.jit(jax.vmap(lambda s, p: _strike.simulate_strike(sim, s, p, to_rest=to_rest)))
        return cache[key]

    return get


@pytest.fixture(scope="session")
def strike_lab_path() -> Path:
    """The lab simulator strike_lab.py, for the lab extras; they skip, saying so, without ../shared."""
    path = SHARED / "lab" / "strike_lab.py"
    if not path.exists():
        pytest.skip(f"lab extra: the strike lab {path} is not here (../shared beside the repository)")
    return path


@pytest.fixture(scope="session")
def strike_lab_module(strike_lab_path):
    """The lab's strike_lab.py as a module (a reference for SCENE.md's geometry); skipped without ../shared."""
    spec = importlib.util.spec_from_file_location("strike_lab", strike_lab_path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["strike_lab"] = mod  # its dataclasses look themselves up there
    spec.loader.exec_module(mod)
    return mod


CACHE_MIN_COMPILE_S = 0.2  # compiles faster than this are not worth a file (JAX's default keeps those over 1 s)


@pytest.fixture(scope="session", autouse=True)
def _run_compilation_cache(tmp_path_factory):
    """One persistent compilation cache per test run, in the run's own temporary folder.

    Both xdist workers, and the `clashx` commands the tests start (through JAX_COMPILATION_CACHE_DIR), read
    and write it, so an MJX program compiled in one test file is loaded, not compiled again, by the other
    worker and by the files after `_free_compiled_code` (measured: the suite went from 25-28 min to the
    figure in docs/development.md).  A new run starts empty: no earlier run can make a test pass.
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' folders share a parent
    folder = root / "jax-compilation-cache"
    folder.mkdir(exist_ok=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(folder)
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = str(CACHE_MIN_COMPILE_S)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", CACHE_MIN_COMPILE_S)
    yield folder


@pytest.fixture(scope="module", autouse=True)
def _free_compiled_code():
    """Drop JAX's compiled executables after each test file.

    Over the whole suite (~190 tests, hundreds of MJX compilations) the process kept growing, and late in
    the run XLA's CPU compiler died (a segmentation fault three times, an abort once) compiling a function
    that compiles fine in a fresh process.  Files compile what they need again; the few shared fixtures
    recompile once per file that uses them.
    """
    yield
    jax.clear_caches()
    gc.collect()


# The files that take longest (a full run's durations, worker-seconds: test_grad 570, test_hybrid 510,
# test_own_scene 390, test_track 240, test_strike 240, test_rule 230, test_examples 220, ...), started first so that
# `--dist loadfile` does not leave one worker running a long file alone while the other has finished
# (`--no-loadscope-reorder` in pyproject.toml: xdist's default queues the files with the most tests first).
HEAVY_FIRST = (
    "test_track.py",
    "test_grad.py",
    "test_hybrid.py",
    "test_own_scene.py",
    "test_strike.py",
    "test_rule.py",
    "test_examples.py",
    "test_pair_law.py",
    "test_docs.py",
    "test_cube.py",
    "test_notebook.py",
    "test_compare.py",
)


def pytest_collection_modifyitems(config, items):
    """Run the heavy files first (`HEAVY_FIRST`), tests/test_track.py first of all.

    Late in the full suite (after ~180 tests' compilations), XLA's CPU compiler crashed with a segmentation
    fault compiling `clashx.identify`'s search in test_track.py's tests, three times in two tests; alone, first,
    in the demo and in the benches the same compilations succeed.
    """
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0].removeprefix("tests/"), len(rank)))

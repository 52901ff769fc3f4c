"""Bad input and faults: each one exits 2 with a message naming the file, row or flag and the fix, writing nothing.

Also `--engine auto`, which every command that runs a simulator takes by default.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest
from cli_cases import GEN, PARAMS, make_files
from cli_cases import fails as _fails
from cli_cases import model_copy as _model_copy
from cli_cases import recording as _recording
from cli_cases import run as _run

import clashx
from clashx import StrikeScene
from clashx.core import _engine
from clashx.events import _generate
from clashx.surrogate import _cube
from clashx.workflows import _cli
from clashx.workflows._cli import main
from clashx.workflows._optimize_cmd import max_reach
from clashx.workflows._strike_workflow import parse_select


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny square surrogate, a PARAMS.json, and 16 generated square strikes (`cli_cases.make_files`)."""
    return make_files(tmp_path_factory.mktemp("files"))


# --- A: --engine auto ------------------------------------------------------------------------------


def test_resolve_engine_follows_the_jax_backend(monkeypatch):
    assert _engine.resolve_engine("mjx", cpu="c", accelerator="mjx") == "mjx"
    assert _engine.resolve_engine("c", cpu="c", accelerator="mjx") == "c"
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert _engine.resolve_engine("auto", cpu="c", accelerator="mjx") == "c"
    assert _engine.resolve_engine("auto", cpu="cpu-hybrid", accelerator="mjx-hybrid") == "cpu-hybrid"
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert _engine.resolve_engine("auto", cpu="c", accelerator="mjx") == "mjx"
    assert _engine.resolve_engine("auto", cpu="cpu-hybrid", accelerator="mjx-hybrid") == "mjx-hybrid"
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")  # MJX measured 40-58x slower than C there
    assert _engine.resolve_engine("auto", cpu="c", accelerator="mjx") == "c"


def test_engine_auto_is_the_default_and_help_says_so(capsys):
    parser = _cli.build_parser()
    assert parser.parse_args([*GEN, "--n", "8", "--out", "x.npz"]).engine == "auto"
    assert parser.parse_args(["optimize", "--model", "m", "--shape", "square", "--target", "0,0,0"]).engine == "auto"
    assert _generate.GenerateConfig(scene="strike", shape="square", n=1, out="x.npz").engine == "auto"
    assert main(["generate", "--help"]) == 0
    assert "auto (default)" in capsys.readouterr().out


def test_generate_records_the_resolved_engine_and_resumes_with_auto(tmp_path, monkeypatch, capsys):
    out = tmp_path / "a.npz"
    real = StrikeScene.simulate_events

    def dying(self, strikes, params, **kw):  # killed while simulating the second chunk
        if os.path.exists(str(out) + ".parts/chunk-00000.npz"):
            raise KeyboardInterrupt
        return real(self, strikes, params, **kw)

    monkeypatch.setattr(StrikeScene, "simulate_events", dying)
    assert _run([*GEN, "--n", "8", "--out", str(out)]) == 130  # Ctrl-C: one line, no traceback
    err = capsys.readouterr().err
    assert "stopped (Ctrl-C); rerun the same command to resume" in err and "Traceback" not in err
    assert not os.path.exists(str(out) + ".lock")
    monkeypatch.setattr(StrikeScene, "simulate_events", real)
    manifest = json.loads((tmp_path / "a.npz.parts" / "manifest.json").read_text())
    expected = "c" if jax.default_backend() == "cpu" else "mjx"
    assert manifest["config"]["engine"] == expected
    capsys.readouterr()
    assert _run([*GEN, "--n", "8", "--out", str(out)]) == 0  # auto again: the same engine, so it resumes
    stdout = capsys.readouterr().out
    assert f"engine {expected}" in stdout and "resuming" in stdout
    assert clashx.load_events(out)["meta"]["config"]["engine"] == expected


# --- 1: output paths -------------------------------------------------------------------------------


def test_unwritable_output_paths_are_refused_up_front(files, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    under_file = blocker / "out.npz"
    folder = tmp_path / "folder.npz"
    folder.mkdir()
    m, p, ev = files["model"], files["params"], files["events"]
    _fails([*GEN, "--n", "8", "--out", under_file], capsys, "--out", str(blocker), "is a file, not a folder")
    _fails([*GEN, "--n", "8", "--out", folder], capsys, "--out", "is a folder")
    _fails(["ingest", "--source", "strike-lab", "--input", ev, "--out", under_file], capsys, "is a file")
    _fails(["pretrain", "--data", ev, "--out", blocker], capsys, "--out", "is a file, not a folder")
    _fails(["predict", "--model", m, "--params", p, "--events", ev, "--out", folder], capsys, "is a folder")
    _fails(["evaluate", "--model", m, "--params", p, "--real", ev, "--json", under_file], capsys, "--json")
    _fails(["identify", "--model", m, "--real", ev, "--out", under_file], capsys, "--out")
    assert not os.path.exists(str(under_file) + ".parts") and sorted(os.listdir(tmp_path)) == ["a-file", "folder.npz"]


def test_os_errors_are_reported_with_the_path(monkeypatch, capsys):
    def denied(a):
        raise PermissionError(13, "Permission denied", "/data/out.npz")

    monkeypatch.setattr(_cli, "_cmd_ingest", denied)  # build_parser looks the command up when main runs
    _fails(["ingest", "--source", "strike-lab", "--input", "a", "--out", "b.npz"], capsys,
           "/data/out.npz: Permission denied; check the path")  # fmt: skip


def test_npz_outputs_must_end_in_npz(files, tmp_path, capsys):
    out = tmp_path / "noext"
    _fails(["ingest", "--source", "strike-lab", "--input", files["events"], "--out", out], capsys, ".npz")
    m, p = files["model"], files["params"]
    _fails(["predict", "--model", m, "--params", p, "--events", files["events"], "--out", out], capsys, ".npz")
    assert not out.exists()


# --- 2: damaged model folders ----------------------------------------------------------------------


def _truncate(run):
    data = (run / "surrogate.eqx").read_bytes()
    (run / "surrogate.eqx").write_bytes(data[: len(data) // 2])


def _random_bytes(run):
    (run / "surrogate.eqx").write_bytes(np.random.default_rng(0).bytes(600))


def _not_json(run):
    (run / "surrogate.json").write_text('{"format": "clashx.surrogate/2", ')


def _edit(key, value):
    def edit(run):
        meta = json.loads((run / "surrogate.json").read_text())
        (run / "surrogate.json").write_text(json.dumps(meta | {key: value}))

    return edit


@pytest.mark.parametrize(
    "damage, file, words",
    [
        (_truncate, "surrogate.eqx", "corrupt"),
        (_random_bytes, "surrogate.eqx", "corrupt"),
        (_not_json, "surrogate.json", "not JSON"),
        (_edit("width", 16), "surrogate.eqx", "does not match its surrogate.json"),
        (_edit("depth", 2), "surrogate.eqx", "corrupt"),
        (_edit("depth", 0), "surrogate.eqx", "does not match its surrogate.json"),
        (_edit("width", "wide"), "surrogate.json", "corrupt"),
    ],
)
def test_a_damaged_model_folder_names_the_file_and_the_fix(files, tmp_path, capsys, damage, file, words):
    run = _model_copy(files, tmp_path)
    damage(run)
    with pytest.raises(ValueError, match="clashx pretrain") as err:
        clashx.load_strike_surrogate(run)
    assert str(run / file) in str(err.value) and words in str(err.value)
    out = tmp_path / "pred.npz"
    _fails(["predict", "--model", run, "--params", files["params"], "--events", files["events"], "--out", out],
           capsys, str(run / file), "copy the folder again")  # fmt: skip
    assert not out.exists()


def test_a_damaged_cube_surrogate_names_the_file(tmp_path):
    model = _cube.make_cube_surrogate(key=jax.random.PRNGKey(0), width=8, depth=1)
    _cube.save_cube_surrogate(tmp_path, model)
    data = (tmp_path / "cube_surrogate.eqx").read_bytes()
    (tmp_path / "cube_surrogate.eqx").write_bytes(data[:-40])
    with pytest.raises(ValueError, match="cube_surrogate.eqx: corrupt.*cube_pretrain"):
        _cube.load_cube_surrogate(tmp_path)


# --- 3, 4: generate's chunk folder -----------------------------------------------------------------


def test_a_damaged_chunk_is_made_again(tmp_path, capsys):
    clean, out = tmp_path / "clean.npz", tmp_path / "out.npz"
    assert _run([*GEN, "--n", "8", "--engine", "c", "--out", clean]) == 0
    parts = tmp_path / "out.npz.parts"
    os.makedirs(parts)
    config = _generate.GenerateConfig(
        scene="strike", shape="square", n=8, out=str(out), chunk_size=4, engine="c", to_rest=False
    )
    (parts / "manifest.json").write_text(
        json.dumps(_generate._manifest(config, clashx.make_scene("strike", config.shape)))
    )
    (parts / "chunk-00000.npz").write_bytes(b"PK\x03\x04 half a zip")
    capsys.readouterr()
    assert _run([*GEN, "--n", "8", "--engine", "c", "--out", out]) == 0
    assert "chunk-00000.npz: damaged or incomplete chunk; simulating it again" in capsys.readouterr().out
    a, b = clashx.load_events(clean), clashx.load_events(out)
    for key in _generate._events.SCHEMAS["strike"]:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_a_resume_with_other_flags_names_each_difference(tmp_path, capsys):
    out = tmp_path / "out.npz"
    config = _generate.GenerateConfig(
        scene="strike", shape="square", n=8, seed=3, out=str(out), chunk_size=4, engine="c", to_rest=False
    )
    os.makedirs(str(out) + ".parts")
    manifest = _generate._manifest(config, clashx.make_scene("strike", config.shape))
    (tmp_path / "out.npz.parts" / "manifest.json").write_text(json.dumps(manifest))
    _fails([*GEN, "--n", "12", "--seed", "4", "--engine", "c", "--out", out], capsys,
           "--seed 3 there, 4 now", "--n 8 there, 12 now", "another --out", "delete")  # fmt: skip
    assert not out.exists()


# --- 5: accepted silently before -------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, words",
    [
        ({"params": PARAMS | {"mu3": 0.1}}, "unknown parameter(s) ['mu3']"),
        ({"mu1": 0.5, "mu2": 0.3, "restitution": 1.0}, "unknown parameter(s) ['restitution']"),
        ({"params": 5}, "'params' is 5"),
        ([1, 2, 3], "expected a JSON object"),
    ],
)
def test_bad_params_files(files, tmp_path, capsys, content, words):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(content))
    out = tmp_path / "pred.npz"
    argv = ["predict", "--model", files["model"], "--params", path, "--events", files["events"], "--out", out]
    _fails(argv, capsys, str(path), words)
    assert not out.exists()


def test_a_select_past_the_end_is_an_error(files, capsys):
    assert list(parse_select("2:5", 12, "f")) == [2, 3, 4]
    assert list(parse_select("-2:", 12, "f")) == [10, 11]
    for text in ("0:50", "13:", ":-13"):
        with pytest.raises(ValueError, match="runs past the end of f, which has 12 events"):
            parse_select(text, 12, "f")
    m, p, ev = files["model"], files["params"], files["events"]
    _fails(["evaluate", "--model", m, "--params", p, "--real", ev, "--select", "0:50"], capsys, "0:50", "16 events")


@pytest.mark.parametrize("alpha", ["-1", "0", "nan", "inf"])
def test_alpha_must_be_positive_and_finite(files, capsys, alpha):
    m, p, ev = files["model"], files["params"], files["events"]
    _fails(["evaluate", "--model", m, "--params", p, "--real", ev, f"--alpha={alpha}"], capsys, "--alpha")


def test_a_target_out_of_reach_is_refused_up_front(files, tmp_path, capsys):
    assert 0.5 < max_reach(1.0) < max_reach(0.3) < max_reach(0.02) <= max_reach(None)
    assert max_reach(0.02) > 4.9  # simulated: the triangle slides 4.9 m at mu2 = 0.02
    argv = ["optimize", "--model", files["model"], "--params", files["params"], "--shape", "square"]
    _fails([*argv, "--target", "14,0,0"], capsys, "--target 14,0", "no strike moves the block more than")
    _fails([*argv, "--target", "-14,0,0"], capsys, "--target -14,0")  # a negative x after the flag parses
    _fails([*argv, "--start", "-0.1,0,0", "--target", "13.9,0,0"], capsys, "--start -0.1,0")


def test_a_recording_of_misses_only_is_refused(tmp_path, capsys):
    rec, out = tmp_path / "rec.npz", tmp_path / "ev.npz"
    np.savez(rec, **_recording([False, False]))
    _fails(["ingest", "--source", "strike-lab", "--input", rec, "--out", out], capsys, str(rec), "missed the block")
    assert not out.exists()


# --- 6: clearer messages ---------------------------------------------------------------------------


def test_random_bytes_are_not_an_event_file(files, tmp_path, capsys):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(np.random.default_rng(1).bytes(300))
    err = _fails(["ingest", "--source", "strike-lab", "--input", junk, "--out", tmp_path / "e.npz"], capsys, str(junk))
    assert "not a readable .npz strike recording" in err and "pickle" not in err
    m, p = files["model"], files["params"]
    err = _fails(["predict", "--model", m, "--params", p, "--events", junk, "--out", tmp_path / "p.npz"], capsys)
    assert "not a readable .npz event file" in err and "pickle" not in err


def test_a_recording_too_small_to_identify_from_says_so(files, tmp_path, capsys):
    """identify takes recordings (the two-stage pipeline); one touched strike is not enough, and it says so."""
    rec, out = tmp_path / "rec.npz", tmp_path / "p.json"
    np.savez(rec, **_recording([True, False]))
    _fails(["identify", "--model", files["model"], "--real", rec, "--out", out], capsys, str(rec))
    assert not out.exists()


def test_identify_needs_a_starting_point(files, tmp_path, capsys):
    out = tmp_path / "p.json"
    _fails(["identify", "--model", files["model"], "--real", files["events"], "--out", out, "--starts", "0"],
           capsys, "argument --starts: 0: expected")  # fmt: skip
    assert not out.exists()


def test_an_error_after_a_progress_bar_starts_on_its_own_line(files, tmp_path, monkeypatch, capsys):
    def failing(config, *, progress=None, report=None):
        progress(1, 3, {"train_loss": 0.5, "val_alpha_0.1": 0.2})
        raise ValueError("boom")

    monkeypatch.setattr(_cli, "pretrain", failing)  # the name the CLI calls
    err = _fails(["pretrain", "--data", files["events"], "--out", tmp_path / "run"], capsys)
    assert "\nclashx pretrain: error: boom" in err


# --- 7: pretrain says where it resumes -------------------------------------------------------------


def test_pretrain_says_where_it_resumes_and_what_differs(files, tmp_path, capsys):
    run = tmp_path / "run"

    def argv(epochs):
        return ["pretrain", "--data", files["events"], "--out", run, "--epochs", epochs, "--batch-size", "8",
                "--width", "8", "--depth", "1", "--val-fraction", "0.2"]  # fmt: skip

    def killed(done, total, metrics):
        raise KeyboardInterrupt

    config = clashx.PretrainConfig(
        data=str(files["events"]), out=str(run), epochs=2, batch_size=8, width=8, depth=1, val_fraction=0.2
    )
    with pytest.raises(KeyboardInterrupt):
        clashx.pretrain(config, progress=killed)  # killed after epoch 1 was saved
    assert _run([str(a) for a in argv(2)]) == 0
    assert "resuming at epoch 2 of 2 (1 done)" in capsys.readouterr().out
    _fails(argv(3), capsys, "--epochs 2 there, 3 now", "another --out")

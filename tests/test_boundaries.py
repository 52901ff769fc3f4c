"""Nothing silent, nothing lost (issue 28): outputs apart from inputs, non-finite values and implausible inputs
stopped at the boundary, flags checked; and two probes' further variants.

Each test asserts the exit code, the message's key words, and that the inputs are unchanged.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest
from cli_cases import GEN, PARAMS, make_files
from cli_cases import digest as _digest
from cli_cases import fails as _fails
from cli_cases import model_copy as _model_copy
from cli_cases import recording as _recording
from cli_cases import run as _run
from cli_cases import with_arrays as _odd
from cli_cases import with_changes as _with

import clashx
from clashx.core import output_lock
from clashx.learn._train import train_epochs


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny square surrogate, a PARAMS.json, and 16 generated square strikes (`cli_cases.make_files`)."""
    return make_files(tmp_path_factory.mktemp("files"))


# --- 8: nothing silent, nothing lost (one test per kind of bad input) ------------------------------

BALL = os.path.join(os.path.dirname(__file__), "..", "examples", "ball_on_table.py")


@pytest.fixture(scope="module")
def ball_events(tmp_path_factory):
    """8 ball-on-table impacts (MuJoCo C), the parameters they were simulated with, and a tiny pair model."""
    root = tmp_path_factory.mktemp("ball")
    spec = f"{BALL}:BallOnTable"
    events = root / "ball.npz"
    assert _run(["generate", "--scene", spec, "--n", "16", "--engine", "c", "--out", events]) == 0
    model = root / "model"
    assert _run(["pretrain", "--scene", spec, "--data", events, "--out", model, "--epochs", "1",
                 "--batch-size", "8", "--width", "8", "--depth", "1", "--val-fraction", "0.2"]) == 0  # fmt: skip
    return {"spec": spec, "events": events, "model": model, "root": root}


@pytest.mark.parametrize(
    "argv, flag, victim",
    [
        (["identify", "--model", "{model}", "--real", "{events}", "--select", "0:10", "--out", "{events}"], "--out", "events"),
        (["predict", "--model", "{model}", "--params", "{params}", "--events", "{events}", "--out", "{events}"], "--out", "events"),
        (["evaluate", "--model", "{model}", "--params", "{params}", "--real", "{events}", "--json", "{params}"], "--json", "params"),
        (["finetune", "--model", "{model}", "--params", "{params}", "--real", "{events}", "--out", "{model}"], "--out", "model"),
        (["plan", "--shape", "square", "--model", "{model}", "--params", "{params}", "--out", "{root}/n.csv", "--json", "{params}"], "--json", "params"),
        (["ingest", "--source", "strike-lab", "--input", "{events}", "--out", "{link}"], "--out", "events"),
    ],
)  # fmt: skip
def test_an_output_that_is_an_input_is_refused_before_any_work(files, tmp_path, capsys, argv, flag, victim):
    link = tmp_path / "link.npz"
    link.symlink_to(files["events"])  # the same file under another name: links are followed
    fill = {k: str(v) for k, v in files.items()} | {"link": str(link)}
    before = {k: _digest(files[k]) for k in ("events", "params")}
    _fails([a.format(**fill) for a in argv], capsys, flag, "this command reads", "Choose another")
    assert {k: _digest(files[k]) for k in ("events", "params")} == before
    assert sorted(os.listdir(files["model"])) == ["surrogate.eqx", "surrogate.json"]


def test_two_outputs_on_one_path_are_refused(files, tmp_path, capsys):
    out = tmp_path / "same.json"
    _fails(["plan", "--shape", "square", "--model", files["model"], "--out", out, "--json", out], capsys,
           "--json and --out are the same path")  # fmt: skip


def test_a_second_writer_of_one_output_is_stopped_and_told_who_holds_it(files, tmp_path, capsys):
    out = tmp_path / "e.npz"
    with output_lock({"--out": str(out)}, "clashx generate --out e.npz (the first run)"):
        err = _fails([*GEN, "--n", "4", "--out", out], capsys, "is being written by another clashx run",
                     "the first run", "wait for it to finish")  # fmt: skip
    assert not out.exists() and not os.path.exists(str(out) + ".parts") and not os.path.exists(str(out) + ".lock")
    assert str(os.getpid()) in err


def test_a_nan_on_a_touched_row_stops_every_command_that_reads_it(files, tmp_path, capsys):
    touched = int(np.flatnonzero(np.load(files["events"])["touched"])[0])
    bad = _with(files["events"], tmp_path / "nan.npz", post_velocity=((touched, 1), np.nan))
    before = _digest(bad)
    for argv in (["pretrain", "--data", bad, "--out", tmp_path / "run"],
                 ["evaluate", "--model", files["model"], "--params", files["params"], "--real", bad],
                 ["identify", "--model", files["model"], "--real", bad, "--out", tmp_path / "p.json"]):  # fmt: skip
        _fails(argv, capsys, str(bad), f"row {touched} is touched but its 'post_velocity' is not finite")
    inf = _with(files["events"], tmp_path / "inf.npz", strike=((2, 2), np.inf))
    _fails(["predict", "--model", files["model"], "--params", files["params"], "--events", inf, "--out",
            tmp_path / "p.npz"], capsys, "'strike' row 2 is not finite")  # fmt: skip
    assert _digest(bad) == before and not (tmp_path / "run").exists() and not (tmp_path / "p.npz").exists()


def test_non_finite_weights_are_refused_when_saved_and_when_loaded(files, tmp_path, capsys):
    model = clashx.make_strike_surrogate("square", key=jax.random.PRNGKey(0), width=8, depth=1)
    broken = jax.tree.map(lambda x: x * np.nan if eqx_is_float(x) else x, model)
    with pytest.raises(ValueError, match="non-finite weights"):
        clashx.save_strike_surrogate(tmp_path / "nan-model", broken)
    assert not (tmp_path / "nan-model").exists()
    run = _model_copy(files, tmp_path)
    data = bytearray((run / "surrogate.eqx").read_bytes())
    data[-4:] = np.array([np.nan], np.float32).tobytes()  # the last weight, as a bit-flip on disk would make it
    (run / "surrogate.eqx").write_bytes(bytes(data))
    _fails(["predict", "--model", run, "--params", files["params"], "--events", files["events"], "--out",
            tmp_path / "p.npz"], capsys, "surrogate.eqx", "non-finite weights")  # fmt: skip


def eqx_is_float(x) -> bool:
    return hasattr(x, "dtype") and np.issubdtype(np.asarray(x).dtype, np.floating)


def test_a_diverging_training_stops_with_the_fix(tmp_path):
    model = {"w": jax.numpy.ones(3)}

    def loss(m, batch):
        return jax.numpy.sum(m["w"] * batch[0]) * np.nan

    with pytest.raises(ValueError, match=r"training diverged in epoch 1 .*lower --lr"):
        train_epochs(model, loss, (jax.numpy.ones((8, 3)),), key=jax.random.PRNGKey(0), epochs=2, batch_size=4,
                     lr=1e-3, weight_decay=0.0, run=str(tmp_path / "run"))  # fmt: skip
    assert not (tmp_path / "run" / "checkpoint.json").exists()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["pretrain", "--lr", "nan"], "argument --lr: nan: expected a finite number > 0"),
        (["pretrain", "--lr", "-1"], "argument --lr: -1"),
        (["pretrain", "--epochs", "0"], "argument --epochs: 0"),
        (["pretrain", "--val-fraction", "0.7"], "argument --val-fraction"),
        (["finetune", "--pull", "-5"], "argument --pull: -5: expected a finite number >= 0"),
        (["finetune", "--folds", "1"], "argument --folds: 1"),
        (["finetune", "--lr", "inf"], "argument --lr: inf"),
        (["evaluate", "--alpha", "1.5"], "argument --alpha: 1.5: expected a finite number > 0 and <= 1"),
        (["generate", "--seed", "99999999999999999999"], "argument --seed: 99999999999999999999: a seed is a whole number from 0 to 4294967295"),
        (["generate", "--seed", "-3"], "argument --seed"),
        (["generate", "--chunk-size", "0"], "argument --chunk-size: 0"),
        (["rollout", "--seconds", "nan"], "argument --seconds: nan"),
        (["optimize", "--population", "1"], "argument --population: 1"),
        (["train-policy", "--timesteps", "0"], "argument --timesteps: 0"),
        (["train-policy", "--draws", "0"], "argument --draws: 0"),
        (["plan", "--k", "0"], "argument --k: 0"),
    ],
)  # fmt: skip
def test_numeric_flags_are_checked_for_range_and_finiteness(files, tmp_path, capsys, argv, words):
    rest = {
        "pretrain": ["--data", files["events"], "--out", tmp_path / "run"],
        "finetune": ["--real", files["events"], "--params", files["params"], "--out", tmp_path / "run"],
        "evaluate": ["--real", files["events"]],
        "generate": ["--scene", "strike", "--shape", "square", "--n", "4", "--out", tmp_path / "e.npz"],
        "rollout": ["--scene", "x.py:X", "--model", tmp_path],
        "optimize": ["--shape", "square", "--target", "0.1,0,0"],
        "train-policy": ["--route", "1", "--sim", "mujoco", "--params", files["params"], "--out", tmp_path / "pol"],
        "plan": ["--shape", "square", "--out", tmp_path / "n.csv"],
    }[argv[0]]
    _fails([*argv, *rest], capsys, words)
    assert os.listdir(tmp_path) == []


def test_finetune_with_more_folds_than_events_is_refused(files, tmp_path, capsys):
    _fails(["finetune", "--model", files["model"], "--params", files["params"], "--real", files["events"],
            "--select", "0:6", "--folds", "99", "--out", tmp_path / "run"], capsys,
           "--folds 99: more folds than the", "use 6 or fewer")  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_a_seed_past_32_bits_is_refused_by_the_library_too(tmp_path):
    config = clashx.GenerateConfig(scene="strike", shape="square", n=4, seed=2**32, out=str(tmp_path / "e.npz"))
    with pytest.raises(ValueError, match="a seed is a whole number from 0 to"):
        clashx.generate(config)
    assert os.listdir(tmp_path) == []  # no .parts


def test_strikes_outside_the_training_ranges_are_counted_or_refused(files, tmp_path, capsys):
    rows = np.flatnonzero(np.load(files["events"])["touched"])
    far = _with(files["events"], tmp_path / "far.npz", strike=((rows[0], 2), 30.0))  # v_pre 30 m/s
    argv = ["predict", "--model", files["model"], "--params", files["params"], "--events", far]
    _fails([*argv, "--out", tmp_path / "p.npz"], capsys, str(far), f"row {rows[0]} has v_pre = 30 m/s",
           "outside what the model was trained on (0.2 to 0.8 m/s", "--outside")  # fmt: skip
    assert not (tmp_path / "p.npz").exists()
    near = _with(files["events"], tmp_path / "near.npz", strike=((rows[:2], 2), 0.85))
    assert _run([*argv[:-1], near, "--out", tmp_path / "p.npz"]) == 0
    assert "warning: 2 of 16 events lie outside the ranges the model was trained on" in capsys.readouterr().err
    assert _run([*argv, "--out", tmp_path / "p.npz", "--outside", "100"]) == 0  # the user's call


def test_a_recording_in_millimetres_or_degrees_is_named(tmp_path, capsys):
    rec = _recording([True, True])
    rec["t_first_touch"] = np.full(2, 0.0)
    rec["block_pose"] = np.tile(np.linspace(0, 1, 10)[:, None] * [0.05, 0.0, 0.5], (2, 1))  # 0.5 m/s, 5 rad/s
    for what, scale, words in (("mm", [1000.0, 1000.0, 1.0], "in millimetres? (divide x, y by 1000)"),
                               ("deg", [1.0, 1.0, 180 / np.pi], "in degrees? (yaw in radians)")):  # fmt: skip
        path = tmp_path / f"{what}.npz"
        np.savez(path, **(rec | {"block_pose": rec["block_pose"] * scale}))
        _fails(["ingest", "--source", "strike-lab", "--input", path, "--out", tmp_path / "e.npz"], capsys,
               str(path), "strike 0", words)  # fmt: skip
    assert not (tmp_path / "e.npz").exists()


@pytest.mark.parametrize(
    "arrays, words",
    [
        ({}, "not a strike event file or recording (no 'shape' key"),
        ({"x": np.zeros(3)}, "no 'shape' key"),
        (
            {"scene": np.array("cube-toss"), "shape": np.array("")},
            "holds 'cube-toss' events; this command takes strike",
        ),
    ],
)
def test_empty_or_foreign_npz_files_are_named(files, tmp_path, capsys, arrays, words):
    path = tmp_path / "odd.npz"
    np.savez(path, **arrays)
    for argv in (["evaluate", "--params", files["params"], "--real", path],
                 ["identify", "--real", path, "--out", tmp_path / "p.json"],
                 ["predict", "--params", files["params"], "--events", path, "--out", tmp_path / "p.npz"]):  # fmt: skip
        _fails(argv, capsys, str(path), words)
    assert sorted(os.listdir(tmp_path)) == ["odd.npz"]


SCENE_FAULTS = {
    "syntax": ("class Broken(:\n", "Broken", "SyntaxError at line 1"),
    "init": ("{base}\nclass Broken(BallOnTable):\n    def __init__(self):\n        raise RuntimeError('no table here')\n",
             "Broken", "Broken() raised RuntimeError: no table here"),
    "shape": ("{base}\nclass Broken(BallOnTable):\n    def sample_launch(self, n, key):\n"
              "        q, v = super().sample_launch(n, key)\n        return q[:, :2], v\n",
              "Broken", "sample_launch(4, key) gave qpos (4, 2)"),
    "nan": ("{base}\nclass Broken(BallOnTable):\n    def sample_launch(self, n, key):\n"
            "        q, v = super().sample_launch(n, key)\n        return q, v * float('nan')\n",
            "Broken", "sample_launch gave a non-finite state in row 0"),
}  # fmt: skip


@pytest.mark.parametrize("fault", SCENE_FAULTS)
def test_a_faulty_scene_file_is_named_and_leaves_nothing_behind(tmp_path, capsys, fault):
    text, cls, words = SCENE_FAULTS[fault]
    scene = tmp_path / "scene.py"
    base = f"import sys\nsys.path.insert(0, {os.path.dirname(BALL)!r})\nfrom ball_on_table import BallOnTable\n"
    scene.write_text(text.format(base=base))
    out = tmp_path / "e.npz"
    _fails(["generate", "--scene", f"{scene}:{cls}", "--n", "4", "--chunk-size", "4", "--out", out], capsys, words)
    assert sorted(os.listdir(tmp_path)) == ["scene.py"] or sorted(os.listdir(tmp_path)) == ["__pycache__", "scene.py"]


def test_a_pair_select_names_file_rows_and_refuses_rows_without_an_impact(ball_events, tmp_path, capsys):
    ev = ball_events["events"]
    raw = dict(np.load(ev))
    raw["touched"] = raw["touched"].copy()
    raw["touched"][0] = False  # row 0 never touched: its states are unknown
    for key in ("pre_state", "post_state"):
        raw[key] = raw[key].copy()
        raw[key][0] = np.nan
    raw["t_impact"] = raw["t_impact"].copy()
    raw["t_impact"][0] = np.nan
    missed = tmp_path / "missed.npz"
    np.savez(missed, **raw)
    argv = ["identify", "--scene", ball_events["spec"], "--model", ball_events["model"], "--real", missed]
    _fails([*argv, "--select", "0:6", "--out", tmp_path / "p.json"], capsys, "row 0 has no impact",
           "leave it out of --select", "rows with one: 1:16")  # fmt: skip
    assert _run([*argv, "--select", "1:7", "--out", tmp_path / "p.json"]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["rows"] == [1, 2, 3, 4, 5, 6]
    nan = _with(ev, tmp_path / "nan.npz", pre_state=((3, 0), np.nan))  # touched, yet a state unknown
    _fails([*argv[:-1], nan, "--select", "0:6", "--out", tmp_path / "q.json"], capsys,
           "row 3 is touched but its 'pre_state' is not finite")  # fmt: skip


def test_predict_takes_a_scene(ball_events, tmp_path, capsys):
    out = tmp_path / "pred.npz"
    argv = [
        "predict",
        "--scene",
        ball_events["spec"],
        "--model",
        ball_events["model"],
        "--events",
        ball_events["events"],
    ]
    assert _run([*argv, "--out", out]) == 0
    with np.load(out) as z, np.load(ball_events["events"]) as ev:
        assert z["post_state"].shape == ev["post_state"].shape
        np.testing.assert_array_equal(np.isfinite(z["post_state"]).all(1), ev["touched"])


def test_pretrain_refuses_to_resume_on_changed_data(files, tmp_path, capsys):
    data = tmp_path / "data.npz"
    data.write_bytes(_digest(files["events"]))
    argv = ["pretrain", "--data", data, "--out", tmp_path / "run", "--epochs", "2", "--batch-size", "8",
            "--width", "8", "--depth", "1", "--val-fraction", "0.2"]  # fmt: skip
    config = clashx.PretrainConfig(
        data=str(data), out=str(tmp_path / "run"), epochs=2, batch_size=8, width=8, depth=1, val_fraction=0.2
    )

    def killed(done, total, metrics):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        clashx.pretrain(config, progress=killed)
    rows = np.flatnonzero(np.load(data)["touched"])
    _with(files["events"], data, post_velocity=((rows[0], 0), 0.123))  # the same name, other contents
    _fails(argv, capsys, "holds a training run with other settings", "the contents of --data (SHA-256)")


def test_demo_with_no_shapes_is_refused(tmp_path, capsys):
    _fails(["demo", "--shapes", " , ", "--out", tmp_path / "demo"], capsys, "--shapes", "names no block shape")
    assert os.listdir(tmp_path) == []


def test_a_policy_for_the_semi_cylinder_refuses_a_square_s_parameters(files, tmp_path, capsys):
    _fails(["train-policy", "--route", "1", "--sim", "mujoco", "--params", files["params"], "--draws", "1",
            "--out", tmp_path / "pol", "--timesteps", "10"], capsys,
           "identified for the 'square' block; the model is for 'semi-cylinder'")  # fmt: skip


def test_pair_impacts_outside_the_training_ranges_are_refused(ball_events, tmp_path, capsys):
    meta = json.loads((ball_events["model"] / "model.json").read_text())
    assert len(meta["input_ranges"]["low"]) == len(meta["input_ranges"]["high"]) > 0  # recorded at pretraining
    raw = dict(np.load(ball_events["events"]))
    nq = 3  # the ball's x, z, spin: its pair state is (qpos ‖ qvel)
    fast = _with(ball_events["events"], tmp_path / "fast.npz", pre_state=((2, nq + 1), -300.0))  # lands at 300 m/s
    assert raw["touched"][2]
    argv = ["predict", "--scene", ball_events["spec"], "--model", ball_events["model"], "--events", fast]
    _fails([*argv, "--out", tmp_path / "p.npz"], capsys, str(fast), "row 2 has feature",
           "outside what the model was trained on", "--outside")  # fmt: skip
    assert not (tmp_path / "p.npz").exists()


def test_cube_tosses_in_millimetres_are_named(tmp_path, capsys):
    shipped = os.path.join(os.path.dirname(clashx.__file__), "data", "contactnets_cube", "tosses.npz")
    with np.load(shipped) as z:
        raw = {k: z[k] for k in z.files}
    keep = int(raw["offsets"][40])  # the first 40 tosses are enough to estimate the frame
    states = raw["states"][:keep].copy()
    states[:, 4:7] *= 1000.0
    states[:, 10:13] *= 1000.0
    path = tmp_path / "mm.npz"
    np.savez(path, states=states, offsets=raw["offsets"][:41], toss_ids=raw["toss_ids"][:40])
    _fails(["ingest", "--source", "cube-toss", "--input", path, "--out", tmp_path / "e.npz"], capsys, str(path),
           "a file in millimetres gives ~1000 times more")  # fmt: skip
    assert not (tmp_path / "e.npz").exists()


# --- 9: a probe's 40 further variants (outputs inside input folders, odd columns, odd JSON) ----------


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["evaluate", "--model", "{model}", "--params", "{params}", "--real", "{events}", "--json", "{model}/surrogate.json"], "--json"),
        (["evaluate", "--model", "{model}", "--params", "{params}", "--real", "{events}", "--plot", "{model}/surrogate.eqx"], "--plot"),
        (["evaluate", "--model", "{model}", "--params", "{params}", "--real", "{events}", "--json", "{model}/x.json"], "--json"),
        (["identify", "--model", "{model}", "--real", "{events}", "--out", "{model}/surrogate.json"], "--out"),
        (["plan", "--shape", "square", "--model", "{model}", "--out", "{root}/n.csv", "--json", "{model}/surrogate.json"], "--json"),
    ],
)  # fmt: skip
def test_an_output_inside_an_input_folder_is_refused(files, capsys, argv, flag):
    fill = {k: str(v) for k, v in files.items()}
    before = {n: _digest(files["model"] / n) for n in ("surrogate.eqx", "surrogate.json")}
    _fails([a.format(**fill) for a in argv], capsys, flag, "lies inside the --model folder", "Choose another")
    assert {n: _digest(files["model"] / n) for n in before} == before
    assert sorted(os.listdir(files["model"])) == ["surrogate.eqx", "surrogate.json"]


def test_the_png_beside_evaluate_s_json_is_checked_too(files, tmp_path, capsys):
    params = tmp_path / "params.png"  # a PARAMS file with an odd name: --json params.json would write the PNG on it
    params.write_bytes(_digest(files["params"]))
    _fails(["evaluate", "--model", files["model"], "--params", params, "--real", files["events"], "--json",
            tmp_path / "params.json"], capsys, "--json (its .png)", "is the --params file")  # fmt: skip
    assert _digest(params) == _digest(files["params"])


def test_generate_never_replaces_a_finished_file_silently(files, tmp_path, capsys):
    out = tmp_path / "e.npz"
    out.write_bytes(_digest(files["events"]))  # 16 events, --seed 0
    _fails([*GEN, "--n", "4", "--seed", "3", "--out", out], capsys, "already holds events made with other settings",
           "delete it, or choose another --out")  # fmt: skip
    assert _digest(out) == _digest(files["events"])
    rec = tmp_path / "rec.npz"
    np.savez(rec, **_recording([True]))
    _fails([*GEN, "--n", "4", "--out", rec], capsys, "not from `clashx generate`")
    capsys.readouterr()
    argv = [*GEN, "--n", "4", "--seed", "5", "--out", tmp_path / "f.npz"]
    assert _run(argv) == 0
    made = _digest(tmp_path / "f.npz")
    capsys.readouterr()
    assert _run(argv) == 0 and "already complete with these settings; nothing to do" in capsys.readouterr().out
    assert _digest(tmp_path / "f.npz") == made


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: {k: (v[:0] if v.ndim else v) for k, v in r.items()}, "holds no events (0 rows)"),
        (lambda r: {"strike": np.full(r["strike"].shape, "a")}, "'strike' holds <U1 values; expected numbers"),
        (lambda r: {"touched": np.where(r["touched"], 2, 0)}, "expected true/false (or 0/1)"),
        (lambda r: {"t_touch": np.where(r["touched"], -5.0, np.nan)}, "cannot be below 0"),
        (
            lambda r: {"post_velocity": np.where(r["touched"][:, None], np.full((16, 3), 1e30), np.nan)},
            "check the units",
        ),
        (lambda r: {"post_velocity_std": np.full(r["strike"].shape, -1.0)}, "'post_velocity_std' row 0"),
    ],
)
def test_odd_columns_are_named(files, tmp_path, capsys, change, words):
    raw = dict(np.load(files["events"]))
    path = _odd(files, tmp_path, "odd.npz", **change(raw))
    before = _digest(path)
    for argv in (["predict", "--model", files["model"], "--params", files["params"], "--events", path, "--out",
                  tmp_path / "p.npz"],
                 ["evaluate", "--model", files["model"], "--params", files["params"], "--real", path]):  # fmt: skip
        _fails(argv, capsys, str(path), words)
    assert _digest(path) == before and not (tmp_path / "p.npz").exists()


def test_a_pipe_is_not_read(files, tmp_path, capsys):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    _fails(["predict", "--model", files["model"], "--params", files["params"], "--events", fifo, "--out",
            tmp_path / "p.npz"], capsys, "not a regular file")  # fmt: skip


@pytest.mark.parametrize(
    "value, words",
    [('"0.5"', "'mu1' is '0.5'; values must be numbers"), ("true", "'mu1' is True; values must be numbers"),
     ("0.5, \"mu1\": 0.9", "the key 'mu1' appears twice")],
)  # fmt: skip
def test_parameter_values_are_numbers_named_once(files, tmp_path, capsys, value, words):
    others = ", ".join(f'"{k}": {v}' for k, v in PARAMS.items() if k != "mu1")
    path = tmp_path / "p.json"
    path.write_text('{"params": {' + others + ', "mu1": ' + value + "}}")
    _fails(["predict", "--model", files["model"], "--params", path, "--events", files["events"], "--out",
            tmp_path / "p.npz"], capsys, str(path), words)  # fmt: skip


def test_a_std_must_be_positive(files, tmp_path, capsys):
    raw = json.loads(files["params"].read_text())
    raw["std"] = dict.fromkeys(raw["params"], -1.0)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(raw))
    _fails(["plan", "--shape", "square", "--model", files["model"], "--params", path, "--out", tmp_path / "n.csv",
            "--k", "1", "--candidates", "8"], capsys, "a σ is a finite number > 0")  # fmt: skip


@pytest.mark.parametrize(
    "argv, words",
    [
        (["evaluate", "--select", " "], "argument --select: empty"),
        (["evaluate", "--json", "{tmp}/e.txt"], "does not end in .json"),
        (["optimize", "--shape", "square", "--target", "nan,0,0"], "every number must be finite"),
    ],
)
def test_empty_selects_odd_json_names_and_nan_targets_are_refused(files, tmp_path, capsys, argv, words):
    rest = ["--model", files["model"], "--params", files["params"]]
    rest += ["--real", files["events"]] if argv[0] == "evaluate" else []
    _fails([a.format(tmp=tmp_path) for a in argv] + rest, capsys, words)
    assert os.listdir(tmp_path) == []


def test_a_scene_given_a_strike_model_says_so(files, ball_events, tmp_path, capsys):
    _fails(["predict", "--scene", ball_events["spec"], "--model", files["model"], "--events", ball_events["events"],
            "--out", tmp_path / "p.npz"], capsys, "holds a strike surrogate (surrogate.json)")  # fmt: skip
    _fails(["rollout", "--scene", ball_events["spec"], "--model", ball_events["model"], "--seconds", "1e-9"], capsys,
           "shorter than one step of the scene")  # fmt: skip


def test_pretraining_data_outside_its_prior_is_refused(files, tmp_path, capsys):
    raw = dict(np.load(files["events"]))
    raw["params"] = raw["params"].copy()
    raw["params"][3, 1] = 1e30
    path = tmp_path / "far.npz"
    np.savez(path, **raw)
    _fails(["pretrain", "--data", path, "--out", tmp_path / "run"], capsys, str(path), "row 3", "outside the prior")
    assert not (tmp_path / "run").exists()


def test_the_probe_s_silent_cases_now_speak(files, tmp_path, capsys):
    half = tmp_path / "half.npz"
    raw = dict(np.load(files["events"]))
    np.savez(half, **(raw | {"strike": raw["strike"].astype(np.float16)}))
    _fails(["evaluate", "--model", files["model"], "--params", files["params"], "--real", half], capsys,
           "holds float16 values")  # fmt: skip
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    _fails(["pretrain", "--data", files["events"], "--out", busy], capsys, "holds 1 other file(s) and no clashx output")
    assert os.listdir(busy) == ["notes.txt"]
    _fails(["identify", "--model", files["model"], "--real", files["events"], "--out", tmp_path / "p.json",
            "--starts", "100000"], capsys, "argument --starts: 100000")  # fmt: skip
    run = tmp_path / "run"
    argv = ["pretrain", "--data", files["events"], "--out", run, "--epochs", "1", "--batch-size", "64",
            "--width", "8", "--depth", "1", "--val-fraction", "0.2"]  # fmt: skip
    assert _run(argv) == 0
    out = capsys.readouterr().out
    assert "--batch-size 64 is more than the" in out and "held-out events only: its scores say little" in out


# --- 10: a second probe (49 variants): devices, overflow, twice-given flags, wrong-kind inputs ------


def test_a_device_is_never_an_output(files, capsys):
    _fails(["evaluate", "--model", files["model"], "--params", files["params"], "--real", files["events"],
            "--plot", "/dev/null"], capsys, "--plot '/dev/null' is a device or pipe, not a file")  # fmt: skip
    assert not os.path.isfile("/dev/null") and os.path.exists("/dev/null")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--select", "99999999999999999999"], "a row past the end of"),
        (["--select", "0:4", "--select", "4:8"], "argument --select: given more than once"),
        (["--real", "{events}"], "argument --real: given more than once"),
    ],
)
def test_an_overflowing_select_and_twice_given_flags_are_named(files, tmp_path, capsys, argv, words):
    base = ["identify", "--model", files["model"], "--real", files["events"], "--out", tmp_path / "p.json"]
    _fails([*base, *(a.format(events=files["events"]) for a in argv)], capsys, words)
    assert os.listdir(tmp_path) == []


def test_event_meta_must_be_a_json_object(files, tmp_path, capsys):
    raw = dict(np.load(files["events"]))
    path = tmp_path / "meta.npz"
    np.savez(path, **(raw | {"meta": np.array("[1, 2, 3]")}))
    _fails(["identify", "--model", files["model"], "--real", path, "--out", tmp_path / "p.json"], capsys,
           "'meta' is JSON but not an object (list)")  # fmt: skip


@pytest.mark.parametrize(
    "source, kind, fix",
    [
        ("cube-toss", "a strike recording, not cube tosses", "use --source strike-lab"),
        ("strike-lab", "an event file, not a strike recording", "it needs no ingesting"),
    ],
)
def test_ingest_names_what_the_file_is(files, tmp_path, capsys, source, kind, fix):
    path = clashx.lab_recording("square", "fit") if source == "cube-toss" else files["events"]
    _fails(["ingest", "--source", source, "--input", path, "--out", tmp_path / "e.npz"], capsys, kind, fix)
    assert os.listdir(tmp_path) == []


def test_plan_refuses_one_file_as_done_and_ran(files, tmp_path, capsys):
    _fails(["plan", "--shape", "square", "--model", files["model"], "--params", files["params"], "--done",
            files["events"], "--ran", files["events"], "--out", tmp_path / "n.csv"], capsys,
           "--done and --ran are the same file")  # fmt: skip


def test_a_model_that_is_a_file_says_so(files, tmp_path, capsys):
    _fails(["predict", "--model", files["params"], "--params", files["params"], "--events", files["events"],
            "--out", tmp_path / "p.npz"], capsys, "a file, not a model folder")  # fmt: skip


def test_identify_on_too_few_strikes_warns(files, tmp_path, capsys):
    touched = int(np.flatnonzero(np.load(files["events"])["touched"])[0])
    assert _run(["identify", "--model", files["model"], "--real", files["events"], "--select", str(touched),
                 "--out", tmp_path / "p.json", "--starts", "2"]) == 0  # fmt: skip
    assert "1 strike(s) give 3 numbers for 8 parameters" in capsys.readouterr().err


def test_a_pair_model_refuses_a_scene_whose_mjcf_changed(ball_events, tmp_path, capsys):
    scene = tmp_path / "big.py"
    scene.write_text(
        f"import sys\nsys.path.insert(0, {os.path.dirname(BALL)!r})\nimport ball_on_table as b\n"
        "class BigBall(b.BallOnTable):\n    def mjcf(self):\n        return b.XML.replace('mass=\"0.05\"', 'mass=\"0.5\"')\n"
    )
    _fails(["predict", "--scene", f"{scene}:BigBall", "--model", ball_events["model"], "--events",
            ball_events["events"], "--out", tmp_path / "p.npz"], capsys, "trained on another MJCF")  # fmt: skip

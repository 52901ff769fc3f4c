"""The learning core: surrogate save/load, pretraining resume, identification and fine-tuning on known answers."""

from __future__ import annotations

import dataclasses
import json

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import clashx
from clashx.scenes import _geometry as geo
from clashx.surrogate import _strike_surrogate


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """300 simulated square strikes (MuJoCo C, contact phase)."""
    out = tmp_path_factory.mktemp("data") / "sq.npz"
    clashx.generate(
        clashx.GenerateConfig(
            scene="strike", shape="square", n=300, seed=0, chunk_size=300, engine="c", to_rest=False, out=str(out)
        )
    )
    return out


@pytest.fixture(scope="module")
def small_model(small_data, tmp_path_factory):
    run = tmp_path_factory.mktemp("run") / "run"
    clashx.pretrain(
        clashx.PretrainConfig(data=str(small_data), out=str(run), epochs=3, batch_size=64, width=32, depth=2)
    ).save(run)
    return run


def test_save_load_round_trip_and_mismatch_errors(small_model, tmp_path):
    model = clashx.load_strike_surrogate(small_model, shape="square", space=clashx.make_strike_scene("square").space)
    s, p = jnp.array([1.0, 0.1, 0.5]), jnp.asarray(model.space.vector(mu1=0.3, mu2=0.4, e1=1.2, com_x=0.002))
    clashx.save_strike_surrogate(tmp_path / "copy", model)
    again = clashx.load_strike_surrogate(tmp_path / "copy")
    np.testing.assert_array_equal(np.asarray(model(s, p)), np.asarray(again(s, p)))
    with pytest.raises(ValueError, match="for the 'square' block, not 'triangle'"):
        clashx.load_strike_surrogate(small_model, shape="triangle")
    with pytest.raises(ValueError, match="conditioned on parameters"):
        clashx.load_strike_surrogate(small_model, space=clashx.cube_space())
    with pytest.raises(FileNotFoundError, match="no surrogate.json"):
        clashx.load_strike_surrogate(tmp_path / "nothing-here")


def test_pretrain_resumes_and_refuses_other_settings(small_data, small_model):
    meta = json.loads((small_model / "checkpoint.json").read_text())
    assert meta["epoch"] == 3 and len(meta["history"]) == 3
    cfg = clashx.PretrainConfig(data=str(small_data), out=str(small_model), epochs=3, batch_size=64, width=32, depth=2)
    result = clashx.pretrain(cfg)  # all epochs done: resumes at the end, trains nothing more
    assert len(result.history) == 3 and result.n_train + result.n_val == 300
    # the same events in memory (no file, no checkpoints) give the same weights
    in_memory = clashx.pretrain(dataclasses.replace(cfg, data=clashx.load_events(small_data), out=None))
    chex.assert_trees_all_equal(eqx.filter(in_memory.model, eqx.is_array), eqx.filter(result.model, eqx.is_array))
    assert "PretrainResult(model=StrikeSurrogate(...)" in repr(in_memory) and len(repr(in_memory)) < 400
    with pytest.raises(ValueError, match="other settings"):
        clashx.pretrain(
            clashx.PretrainConfig(
                data=str(small_data), out=str(small_model), epochs=4, batch_size=64, width=32, depth=2
            )
        )


def test_pretrain_killed_mid_run_resumes_to_the_same_weights(small_data, tmp_path):
    cfg = dict(data=str(small_data), epochs=3, batch_size=64, width=16, depth=1)
    whole = clashx.pretrain(clashx.PretrainConfig(out=str(tmp_path / "whole"), **cfg)).model

    def die_after_first(done, total, metrics):
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        clashx.pretrain(clashx.PretrainConfig(out=str(tmp_path / "cut"), **cfg), progress=die_after_first)
    assert json.loads((tmp_path / "cut" / "checkpoint.json").read_text())["epoch"] == 1
    cut = clashx.pretrain(clashx.PretrainConfig(out=str(tmp_path / "cut"), **cfg)).model
    chex.assert_trees_all_equal(eqx.filter(whole, eqx.is_array), eqx.filter(cut, eqx.is_array))


def test_cli_identify_finetune_evaluate_predict(small_data, small_model, tmp_path, capsys):
    """The file-level commands run on an event file, write their outputs, and agree with the library."""
    from clashx.workflows._cli import main

    run, data = str(small_model), str(small_data)
    params = str(tmp_path / "params.json")
    assert main(["identify", "--model", run, "--real", data, "--select", "0:10", "--out", params, "--starts", "8"]) == 0
    written = json.loads(open(params).read())
    assert (
        written["shape"] == "square"
        and written["rows"] == list(range(10))
        and list(written["params"]) == list(clashx.strike_space().names)
    )
    tuned = str(tmp_path / "tuned")
    assert (
        main(
            [
                "finetune",
                "--model",
                run,
                "--real",
                data,
                "--select",
                "0:10",
                "--params",
                params,
                "--out",
                tuned,
                "--max-steps",
                "20",
            ]
        )
        == 0
    )
    out = str(tmp_path / "eval.json")
    assert main(["evaluate", "--model", tuned, "--real", data, "--select", "10:60", "--json", out]) == 0
    result = json.loads(open(out).read())
    assert (tmp_path / "eval.png").exists() and result["n_events"] == 50
    ev = clashx.load_events(data)
    model = clashx.load_strike_surrogate(tuned)
    p = np.array([written["params"][n] for n in model.space.names])
    pred = np.asarray(clashx.predict(model, ev["strike"][10:60], p))
    expect = clashx.alpha_accuracy(pred, ev["post_velocity"][10:60], geo.characteristic_length("square"), 0.1)
    assert abs(result["alpha_accuracy"] - expect) < 1e-9
    assert main(["predict", "--model", tuned, "--events", data, "--out", str(tmp_path / "pred.npz")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "pred.npz")["post_velocity"][10:60], pred, rtol=1e-5, atol=1e-6)
    assert main(["identify", "--model", run, "--real", data, "--select", "1,1", "--out", params]) == 2
    assert "names a row twice" in capsys.readouterr().err


def test_mirror_flips_vx_wz_dx_dyaw_and_com_x():
    space = clashx.strike_space()
    p = space.vector(com_x=0.003, com_y=-0.002)
    s, v, q = _strike_surrogate.mirror(
        jnp.array([[0.3, 0.1, 0.5]]), jnp.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]), p[None], space
    )
    np.testing.assert_allclose(np.asarray(s), [[np.pi - 0.3, -0.1, 0.5]], atol=1e-6)
    np.testing.assert_allclose(np.asarray(v), [[-1.0, 2.0, -3.0, -4.0, 5.0, -6.0]])
    np.testing.assert_allclose(np.asarray(q)[0], space.vector(com_x=-0.003, com_y=-0.002), atol=1e-9)


def _surrogate_with_signal(key):
    """A random surrogate whose output depends clearly on every parameter."""
    return clashx.make_strike_surrogate(
        "square", key=key, width=32, depth=2, out_mean=[0.1, -0.8, 2.0, 0.0, -0.01, 0.02], out_std=[0.3, 0.3, 3.0] * 2
    )


IDENTIFY_TOL = 0.02  # in units of each parameter's prior range


def _known_events(n: int, seed: int):
    """A surrogate, n strikes and their velocities at known parameters: (model, strikes, velocities, truth, range)."""
    model = _surrogate_with_signal(jax.random.PRNGKey(1))
    rng = np.random.default_rng(seed)
    lo, hi = np.array(model.space.low), np.array(model.space.high)
    strikes = rng.uniform([0.3, -0.25, 0.2], [2.8, 0.25, 0.8], (n, 3))
    true = lo + np.array([0.3, 0.6, 0.45, 0.5, 0.35, 0.7, 0.4, 0.55]) * (hi - lo)
    return model, strikes, np.array(clashx.predict(model, strikes, true)), true, hi - lo


def test_identify_recovers_known_parameters_deterministically():
    model, strikes, vel, true, span = _known_events(10, 0)
    a = clashx.identify(model, strikes, vel, key=jax.random.PRNGKey(0), n_starts=16)
    b = clashx.identify(model, strikes, vel, key=jax.random.PRNGKey(0), n_starts=16)
    np.testing.assert_array_equal(np.asarray(a.params), np.asarray(b.params))
    assert np.all(np.abs(np.asarray(a.params) - true) <= IDENTIFY_TOL * span), (a.params, true)
    assert np.isfinite(np.asarray(a.std)).all() and float(a.loss) < 1e-4


def test_identify_weights_events():
    """Equal weights change nothing; three corrupted labels weighed down stop pulling the fit off the truth."""
    model, strikes, vel, true, span = _known_events(13, 1)
    vel[:3] *= 1.5  # three labels 50 % off
    key = jax.random.PRNGKey(0)
    plain = clashx.identify(model, strikes, vel, key=key, n_starts=16)
    ones = clashx.identify(model, strikes, vel, key=key, n_starts=16, weights=np.ones(13))
    np.testing.assert_allclose(np.asarray(ones.params), np.asarray(plain.params), rtol=1e-6)
    down = clashx.identify(model, strikes, vel, key=key, n_starts=16, weights=np.r_[np.full(3, 1e-6), np.ones(10)])
    err = lambda r: np.max(np.abs(np.asarray(r.params) - true) / span)  # noqa: E731
    assert err(down) <= IDENTIFY_TOL < err(plain), (err(down), err(plain))


def test_finetune_corrects_a_systematic_error_and_leaves_a_right_model_alone():
    model = _surrogate_with_signal(jax.random.PRNGKey(2))
    rng = np.random.default_rng(1)
    strikes = rng.uniform([0.3, -0.25, 0.2], [2.8, 0.25, 0.8], (10, 3))
    test = rng.uniform([0.3, -0.25, 0.2], [2.8, 0.25, 0.8], (200, 3))
    params = jnp.asarray(model.space.vector())
    length = geo.characteristic_length("square")

    def real(s):  # "reality": the model's outcome, 15 % faster
        return 1.15 * np.asarray(clashx.predict(model, s, params))

    ft = clashx.finetune(model, strikes, real(strikes), params, key=jax.random.PRNGKey(0))
    tuned, report = ft.model, ft.to_dict()
    before = np.median(np.asarray(clashx.relative_error(clashx.predict(model, test, params), real(test), length)))
    after = np.median(np.asarray(clashx.relative_error(clashx.predict(tuned, test, params), real(test), length)))
    assert report["steps"] > 0 and after < 0.5 * before, (before, after, report["reason"])
    same = clashx.finetune(
        model, strikes, np.asarray(clashx.predict(model, strikes, params)), params, key=jax.random.PRNGKey(0)
    )
    assert same.steps == 0 and "unchanged" in same.reason and same.model is model

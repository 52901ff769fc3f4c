"""Data generation: deterministic from the seed, resumable after a kill, refusing mismatched resumes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from clashx import StrikeScene, load_events, make_scene, strike_space
from clashx.core import block_override
from clashx.events import _generate
from clashx.workflows._cli import main as cli_main


def _config(tmp_path, name, **kw):
    base = dict(scene="strike", shape="square", n=10, seed=3, chunk_size=4, engine="c", out=str(tmp_path / name))
    return _generate.GenerateConfig(**(base | kw))


def _arrays(path):
    ev = load_events(path)
    return {k: ev[k] for k in _generate._events.SCHEMAS["strike"]}


def test_same_seed_same_data_and_metadata(tmp_path):
    _generate.generate(_config(tmp_path, "a.npz"))
    _generate.generate(_config(tmp_path, "b.npz"))
    a, b = _arrays(tmp_path / "a.npz"), _arrays(tmp_path / "b.npz")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    ev = load_events(tmp_path / "a.npz", scene="strike")
    assert ev["meta"]["config"]["seed"] == 3
    assert ev["meta"]["param_space"]["names"] == list(strike_space().names)
    assert "mujoco" in ev["meta"]["versions"] and ev["meta"]["solver"]["dt_contact"] == 0.001
    assert ev["touched"].all()
    lo, hi = np.array(ev["meta"]["param_space"]["low"]), np.array(ev["meta"]["param_space"]["high"])
    assert ((ev["params"] >= lo) & (ev["params"] <= hi)).all()
    assert not os.path.exists(str(tmp_path / "a.npz") + ".parts")


def test_other_seed_other_data(tmp_path):
    _generate.generate(_config(tmp_path, "a.npz"))
    _generate.generate(_config(tmp_path, "c.npz", seed=4))
    assert not np.array_equal(_arrays(tmp_path / "a.npz")["strike"], _arrays(tmp_path / "c.npz")["strike"])


def test_resume_after_a_kill_neither_loses_nor_redoes_chunks(tmp_path, monkeypatch):
    _generate.generate(_config(tmp_path, "whole.npz"))
    calls = []
    real = StrikeScene.simulate_events

    def dying(self, strikes, params, **kw):
        calls.append(len(strikes))
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed while simulating the second chunk
        return real(self, strikes, params, **kw)

    monkeypatch.setattr(StrikeScene, "simulate_events", dying)
    cfg = _config(tmp_path, "resumed.npz")
    with pytest.raises(KeyboardInterrupt):
        _generate.generate(cfg)
    assert not os.path.exists(cfg.out)  # nothing half-written
    assert sorted(os.listdir(cfg.out + ".parts")) == ["chunk-00000.npz", "manifest.json"]
    calls.clear()
    monkeypatch.setattr(
        StrikeScene, "simulate_events", lambda self, s, p, **kw: (calls.append(len(s)), real(self, s, p, **kw))[1]
    )
    _generate.generate(cfg)
    assert calls == [4, 2]  # chunk 0 was not redone; chunks 1 and 2 were made
    whole, resumed = _arrays(tmp_path / "whole.npz"), _arrays(tmp_path / "resumed.npz")
    for k in whole:
        np.testing.assert_array_equal(whole[k], resumed[k], err_msg=k)


def test_resume_with_other_settings_is_refused(tmp_path):
    cfg = _config(tmp_path, "x.npz")
    os.makedirs(cfg.out + ".parts")
    other = _generate._manifest(_config(tmp_path, "x.npz", seed=99), make_scene("strike", cfg.shape))
    with open(os.path.join(cfg.out + ".parts", "manifest.json"), "w") as f:
        json.dump(other, f)
    with pytest.raises(ValueError, match="interrupted run with other settings"):
        _generate.generate(cfg)


def test_mjx_engine_is_deterministic(tmp_path):
    cfg = dict(n=3, chunk_size=4, engine="mjx", to_rest=False)
    _generate.generate(_config(tmp_path, "m1.npz", **cfg))
    _generate.generate(_config(tmp_path, "m2.npz", **cfg))
    a, b = _arrays(tmp_path / "m1.npz"), _arrays(tmp_path / "m2.npz")
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# m/s, m, s: an MJX world simulated in a batch of 4 or of 2 (float32).  XLA's CPU kernels may vectorise a batch of 4
# differently from one of 2 (seen on one machine: 6.5e-5 m/s on an angular speed of 4.2, 1.6e-5 relative); a world
# mixed up with another would differ by whole units
BATCHED_ATOL = 1e-5
BATCHED_RTOL = 1e-4


def test_chunks_simulated_together_are_the_chunks_drawn_apart(tmp_path):
    # on an accelerator the batching policy simulates several chunks in one vmap; the data must not change
    cfg = dict(n=4, chunk_size=2, engine="mjx", to_rest=False)
    with block_override(2):  # one chunk per batch
        _generate.generate(_config(tmp_path, "apart.npz", **cfg))
    with block_override(4):  # both chunks in one batch
        assert _generate._group(make_scene("strike", "square"), _config(tmp_path, "x.npz", **cfg)) == 2
        _generate.generate(_config(tmp_path, "together.npz", **cfg))
    a, b = _arrays(tmp_path / "apart.npz"), _arrays(tmp_path / "together.npz")
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=BATCHED_RTOL, atol=BATCHED_ATOL, err_msg=k)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["generate", "--scene", "strike", "--shape", "square", "--n", "0", "--out", "x.npz"],
            "argument --n: 0: expected a whole number >= 1",
        ),
        (["generate", "--scene", "strike", "--shape", "square", "--n", "5", "--out", "x.csv"], "end in .npz"),
    ],
)
def test_cli_rejects_bad_flags(argv, message, capsys):
    assert cli_main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_needs_a_shape_for_strikes(capsys):
    assert cli_main(["generate", "--scene", "strike", "--n", "5", "--out", "x.npz"]) == 2
    assert "generate --scene strike needs --shape" in capsys.readouterr().err

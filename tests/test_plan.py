"""Choosing the next real strikes (`clashx plan`): the criteria prefer what a strike can teach.

A known case: on the square, a strike square to a face through its centre
(θ = π/2, θ1 = 0) tells little about the striker-block friction μ1; an oblique
one (θ1 at the range's edge) tells more.  The shipped square surrogate's
Jacobian says so, and the planner picks accordingly.
"""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest
from test_ingest import slide_track

import clashx
from clashx.events._ingest_strike import NOISE, ingest_strike_lab
from clashx.optimize import _plan
from clashx.optimize._plan import (
    CRITERIA,
    LABEL_NOISE,
    PlanConfig,
    label_noise,
    model_error,
    plan,
    strike_information,
    strike_sensitivity,
)
from clashx.scenes import _geometry as geo
from clashx.scenes._strike import sample_strikes
from clashx.workflows._cli import main
from clashx.workflows._next_strikes import concat_recordings, slice_recording, strike_loop

FACE_TO_OBLIQUE_MAX = 0.25  # μ1 information of the face-centre strike / the oblique one's, at most
NOISE_RTOL = 1e-5  # label_noise against its formula (float32 speeds)
MMD_ATOL = 1e-9  # the greedy coverage's running MMD² against the direct sum
ERROR_ATOL = 2e-3  # model_error of labels 20 % off, against (0.2 / 1.2)² less the label noise


@pytest.fixture(scope="module")
def square():
    return clashx.shipped_strike_surrogate("square")


def test_face_centre_strike_tells_little_about_mu1(square):
    """Sensitivity to μ1 (JᵀJ at equal label noise, prior-unit coordinates): face-centre against oblique strikes.

    With each strike's label noise (`strike_information`) the oblique strikes' slower,
    noisier labels narrow the gap, and they still carry the more.
    """
    p = square.space.vector()
    face = [[math.pi / 2, 0.0, 0.5]]
    oblique = [[math.pi / 2, math.pi / 12, 0.5], [math.pi / 2, -math.pi / 12, 0.5]]
    s_face = strike_sensitivity(square, face, p, free=("mu1",))[0, 0, 0]
    s_obl = strike_sensitivity(square, oblique, p, free=("mu1",))[:, 0, 0]
    assert np.all(s_face < FACE_TO_OBLIQUE_MAX * s_obl), (s_face, s_obl)
    i_face = strike_information(square, face, p, free=("mu1",))[0, 0, 0]
    assert np.all(i_face < strike_information(square, oblique, p, free=("mu1",))[:, 0, 0])


def test_label_noise_is_the_floor_and_the_mocap_noise_over_the_slide(square):
    """Slow strikes' labels are noisier; the noise is LABEL_NOISE ⊕ mocap noise / (v² / 2 μ2 g), v the predicted speed."""
    p = np.asarray(square.space.vector(), np.float64)
    strikes = np.array([[math.pi / 2, 0.0, v] for v in (0.2, 0.4, 0.8)])
    noise = label_noise(square, strikes, p)
    speed = np.linalg.norm(np.asarray(jax.vmap(lambda s: square(s, p))(strikes))[:, :2], axis=1)
    slide = speed**2 / (2 * p[square.space.index("mu2")] * geo.GRAVITY)
    np.testing.assert_allclose(noise, np.sqrt(LABEL_NOISE**2 + (NOISE[0] / slide) ** 2), rtol=NOISE_RTOL)
    assert noise[0] > noise[1] > noise[2] > LABEL_NOISE


def test_model_error_is_what_the_label_noise_does_not_explain(square):
    """Labels at the prediction: no model error; labels 20 % faster on fast strikes: (0.2/1.2)² less 3 LABEL_NOISE²."""
    p = np.asarray(square.space.vector(), np.float64)
    strikes = np.array([[th, 0.0, 0.8] for th in (1.2, 1.5, 1.8, 2.1)])
    pred = np.asarray(jax.vmap(lambda s: square(s, p))(strikes), np.float64)
    assert model_error(square, strikes, pred, p) == 0.0
    slow = label_noise(square, strikes, p)
    expect = (0.2 / 1.2) ** 2 - 3 * np.average(slow**2, weights=1 / slow**2)
    assert abs(model_error(square, strikes, 1.2 * pred, p) - expect) < ERROR_ATOL


def test_robust_is_predictive_without_model_error_and_covers_with_it(square):
    """error = 0: the predictive criterion's picks; a large error: a design closer to the candidates' spread."""
    p = square.space.vector()
    ran = np.array([[1.0, 0.1, 0.5], [2.0, -0.1, 0.6]])

    def picks(criterion, error=None):
        return plan(square, p, ran=ran, error=error, config=PlanConfig(k=4, criterion=criterion, candidates=512))

    np.testing.assert_array_equal(picks("robust", 0.0)["strikes"], picks("predictive")["strikes"])
    cand = np.asarray(sample_strikes(512, key=jax.random.split(jax.random.PRNGKey(0), 3)[0]), np.float64)

    def mmd(design):  # direct MMD² (less its constant) in units of one random strike's
        cov = _plan._Coverage(cand, None)
        u, c = _plan._unit_strikes(design), cov.cand
        return (_plan._kernel(u, u).mean() - 2 * _plan._kernel(u, c).mean()) / cov.norm

    wide = picks("robust", 100.0)["strikes"]
    assert mmd(np.concatenate([ran, wide])) < mmd(np.concatenate([ran, picks("predictive")["strikes"]]))
    cov = _plan._Coverage(cand, ran)
    for j in (5, 17):
        after = cov.after_each()[j]
        cov.add(j)
        assert abs(after - cov.mmd()) < MMD_ATOL
    assert abs(cov.mmd() - mmd(np.concatenate([ran, cand[[5, 17]]]))) < MMD_ATOL


def test_d_optimal_picks_the_most_informative_candidates(square):
    """With one free parameter, greedy D-optimal design picks the candidates of largest information, in order."""
    p = square.space.vector()
    config = PlanConfig(k=3, criterion="d-optimal", candidates=256, free=("mu1",), seed=4)
    r = plan(square, p, config=config)
    # the planner's candidates: the same key
    cand = np.asarray(sample_strikes(256, key=jax.random.split(jax.random.PRNGKey(4), 3)[0]), np.float64)
    info = strike_information(square, cand, p, free=("mu1",))[:, 0, 0]
    np.testing.assert_allclose(r["strikes"], cand[np.argsort(info)[::-1][:3]])
    # strikes whose labels the lab measures well: less noisy than the candidates' median
    assert np.all(label_noise(square, r["strikes"], p) < np.median(label_noise(square, cand, p)))


@pytest.mark.parametrize("criterion", CRITERIA)
def test_every_criterion_shrinks_the_posterior(square, criterion):
    """Distinct strikes inside the lab's ranges; every parameter's expected σ goes down; σ given is σ used."""
    p = square.space.vector()
    std = 0.1 * (np.asarray(square.space.high) - np.asarray(square.space.low))
    r = plan(square, p, std=std, config=PlanConfig(k=4, criterion=criterion, candidates=512))
    s = r["strikes"]
    assert len(np.unique(s, axis=0)) == 4
    assert np.all((s[:, 0] >= math.pi / 12) & (s[:, 0] <= 11 * math.pi / 12) & (np.abs(s[:, 1]) <= math.pi / 12))
    before = np.array(list(r["std_before"].values()))
    np.testing.assert_allclose(before, std, rtol=1e-6)
    assert np.all(np.array(list(r["std_after"].values())) < before)


def test_plan_command_writes_the_lab_csv(tmp_path):
    """`clashx plan` writes a CSV with strike_lab.py's header and k rows; bad flags fail before writing."""
    out = tmp_path / "next.csv"
    assert main(["plan", "--shape", "triangle", "--k", "3", "--candidates", "256", "--out", str(out),
                 "--json", str(tmp_path / "plan.json")]) == 0  # fmt: skip
    lines = out.read_text().splitlines()
    assert lines[0] == "theta,theta1,v_pre" and len(lines) == 4
    r = json.loads((tmp_path / "plan.json").read_text())
    assert r["criterion"] == "infogap" and r["mode"] == "coverage" and r["model_error"] is None
    bad = tmp_path / "bad.csv"
    assert main(["plan", "--shape", "triangle", "--k", "0", "--out", str(bad)]) == 2
    assert not bad.exists()


@pytest.mark.parametrize(
    "text, message",
    [
        ("theta,v_pre\n1.0,0.5\n", "no column(s) theta1"),
        ("theta,theta1,v_pre\n", "a header but no strikes"),
        ("theta,theta1,v_pre\n1.0,0.0,0.5\n1.0,x,0.5\n", "line 3, theta1: 'x' is not a number"),
        ("theta,theta1,v_pre\n1.0,0.0,nan\n", "line 2, v_pre: 'nan' is not finite"),
        ("theta,theta1,v_pre\n1.0,0.0\n", "line 2: 2 fields"),
        ("theta,theta1,v_pre\n1.0,0.9,0.5\n", "line 2, theta1: 0.9 is outside the lab's range"),
    ],
)
def test_plan_need_file_errors_name_line_and_column(tmp_path, capsys, text, message):
    """A bad --need CSV fails with the file, line and column, and nothing is written."""
    need, out = tmp_path / "need.csv", tmp_path / "next.csv"
    need.write_text(text)
    assert main(["plan", "--shape", "square", "--need", str(need), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(need) in err
    assert not out.exists()


def test_plan_refuses_need_as_output_and_need_for_criteria_that_ignore_it(tmp_path, capsys):
    """--out onto the --need file is refused before anything is read or written; so is --need with d-optimal."""
    need = tmp_path / "need.csv"
    need.write_text("theta,theta1,v_pre\n1.0,0.0,0.5\n\n2.0,0.1,0.6\n")
    assert main(["plan", "--shape", "square", "--need", str(need), "--out", str(need)]) == 2
    assert "--need" in capsys.readouterr().err and need.read_text().startswith("theta,theta1,v_pre\n1.0")
    out = tmp_path / "next.csv"
    assert main(["plan", "--shape", "square", "--need", str(need), "--criterion", "d-optimal", "--out", str(out)]) == 2
    assert "--need" in capsys.readouterr().err and not out.exists()
    need.write_text("theta,theta1,v_pre\n1.0,0.0,0.5\n\n2.0,x,0.6\n")  # a blank line: the line number is the file's
    assert main(["plan", "--shape", "square", "--need", str(need), "--out", str(out)]) == 2
    assert "line 4, theta1: 'x' is not a number" in capsys.readouterr().err


def _mmd(design: np.ndarray, need: np.ndarray) -> float:
    """Direct MMD² of `design` from `need` (less the need-need constant), the coverage kernel."""
    u, t = _plan._unit_strikes(design), _plan._unit_strikes(need)
    return float(_plan._kernel(u, u).mean() - 2 * _plan._kernel(u, t).mean())


def test_coverage_is_greedy_herding_of_the_needed_strikes(square):
    """Each pick is the candidate that lowers the design's MMD² from `need` the most (checked by brute force),
    and the design is closer to `need` than every one of 50 random designs of the same size."""
    p = square.space.vector()
    need = np.asarray(sample_strikes(64, key=jax.random.PRNGKey(9)), np.float64)
    need[:, 2] = np.clip(need[:, 2], 0.6, None)  # a task of fast strikes only
    r = plan(square, p, need=need, config=PlanConfig(k=4, criterion="coverage", candidates=256, seed=3))
    cand = np.asarray(sample_strikes(256, key=jax.random.split(jax.random.PRNGKey(3), 3)[0]), np.float64)
    design = np.zeros((0, 3))
    for pick in r["strikes"]:
        best = cand[int(np.argmin([_mmd(np.concatenate([design, c[None]]), need) for c in cand]))]
        np.testing.assert_allclose(pick, best)
        design = np.concatenate([design, best[None]])
    rng = np.random.default_rng(0)
    random_mmd = [_mmd(cand[rng.choice(256, 4, replace=False)], need) for _ in range(50)]
    assert _mmd(r["strikes"], need) < min(random_mmd)
    with pytest.raises(ValueError, match="inside the lab's ranges"):
        plan(square, p, need=need + 10.0, config=PlanConfig(k=2, criterion="coverage", candidates=64))


def test_infogap_covers_until_held_out_strikes_say_the_model_matches(square):
    """No held-out error or one beyond MISSPECIFIED: coverage's picks; within it: robust's with that error."""
    p = square.space.vector()
    ran = np.array([[1.0, 0.1, 0.5], [2.0, -0.1, 0.6]])

    def picks(criterion, error=None):
        r = plan(square, p, ran=ran, error=error, config=PlanConfig(k=3, criterion=criterion, candidates=256))
        return r["strikes"], r["mode"]

    cover, _ = picks("coverage")
    for error in (None, 2.0 * _plan.MISSPECIFIED):
        s, mode = picks("infogap", error)
        assert mode == "coverage"
        np.testing.assert_array_equal(s, cover)
    s, mode = picks("infogap", 0.5 * _plan.MISSPECIFIED)
    assert mode == "robust"
    np.testing.assert_array_equal(s, picks("robust", 0.5 * _plan.MISSPECIFIED)[0])
    assert not np.array_equal(s, cover)


def test_pooled_error_terms_are_model_error(square):
    """Two batches' terms pooled = model_error of the batches joined (same model and parameters)."""
    p = np.asarray(square.space.vector(), np.float64)
    strikes = np.array([[th, 0.05, v] for th, v in ((1.2, 0.5), (1.6, 0.9), (2.0, 0.7), (2.4, 0.6))])
    labels = 1.15 * np.asarray(jax.vmap(lambda s: square(s, p))(strikes), np.float64)
    a, b = _plan.error_terms(square, strikes[:1], labels[:1], p), _plan.error_terms(square, strikes[1:], labels[1:], p)
    pooled = _plan.pooled_error(*(np.concatenate(t) for t in zip(a, b, strict=True)))
    assert abs(pooled - model_error(square, strikes, labels, p)) < ERROR_ATOL * 1e-3
    x, w = np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])
    m = np.sum(w * x) / np.sum(w)
    se = np.sqrt(np.sum(w**2 * (x - m) ** 2)) / np.sum(w)
    assert abs(_plan.pooled_error(x, w, upper=True) - (m + 2 * se)) < ERROR_ATOL * 1e-3


def _synthetic_lab(model, true_params, log):
    """A lab whose block leaves each strike with the surrogate's velocity at `true_params` and slides (tracks, noise)."""

    def run(strikes):
        log.append(len(strikes))
        parts = [slide_track(np.asarray(model(s, true_params)), seed=len(log) * 100 + i) for i, s in enumerate(strikes)]
        ts = [p[0] for p in parts]
        n = len(strikes)
        return {
            "offsets": np.concatenate([[0], np.cumsum([len(t) for t in ts])]).astype(np.int64),
            "t": np.concatenate(ts),
            "block_pose": np.concatenate([p[1] for p in parts]),
            "striker_xy": np.zeros((sum(len(t) for t in ts), 2)),
            "strike": np.asarray(strikes, np.float64),
            "start_pose": np.tile([0.1, -0.2, 0.3], (n, 1)),
            "final_pose": np.array([p[1][-1] for p in parts]),
            "post_velocity_true": np.array([p[3] for p in parts]),
            "t_first_touch": np.full(n, 0.015),
            "touched": np.ones(n, bool),
            "shape": np.array("square"),
            "lab": np.array("synthetic"),
            "mocap_hz": np.array(120),
        }

    return run


def test_strike_loop_spends_the_budget_and_identifies_at_each_checkpoint(square, strike_sims):
    """3 random strikes, then 2 planned from the fit; a fit at 3 and at 5; the recordings joined.

    The 2 are predicted by the fit at 3 before they run: the held-out model error at 5 is theirs (its upper
    bound).  The lab leaves every strike 30 % faster than the surrogate can, so the model error is real.
    """
    log: list[int] = []
    true = square.space.vector(mu1=0.3, e1=1.5)

    def unlike(s, p):  # a lab the surrogate cannot match
        return 1.3 * square(s, p)

    out = strike_loop(
        square, strike_sims("square"), _synthetic_lab(unlike, true, log), key=jax.random.PRNGKey(0), checkpoints=(3, 5)
    )
    assert log == [3, 2] and [c["n"] for c in out] == [3, 5]
    np.testing.assert_array_equal(out[1]["strikes"][:3], out[0]["strikes"])
    assert all(np.isfinite(c["params"]).all() and np.isfinite(c["std"]).all() for c in out)
    assert out[0]["error"] is None and out[1]["error"] is not None and out[1]["modes"] == ["random", "coverage"]
    again = _synthetic_lab(unlike, true, [])  # the same tracks again: the joined recording's labels
    events = ingest_strike_lab(concat_recordings([again(out[1]["strikes"][:3]), again(out[1]["strikes"][3:])]), "again")
    first = strike_loop(square, strike_sims("square"), _synthetic_lab(unlike, true, []), key=jax.random.PRNGKey(0),
                        checkpoints=(3,))[0]  # fmt: skip
    terms = _plan.error_terms(first["model"], events["strike"][3:], events["post_velocity"][3:], first["params"])
    expect = _plan.pooled_error(*terms, upper=True)
    assert expect > _plan.pooled_error(*terms) > 0.0  # a real model error, and the bound above it
    assert abs(out[1]["error"] - expect) < ERROR_ATOL
    with pytest.raises(ValueError, match="must all be ≥ start"):
        strike_loop(
            square, strike_sims("square"), _synthetic_lab(square, true, []), key=jax.random.PRNGKey(0), checkpoints=(2,)
        )


def test_joined_recordings_ingest_as_their_parts(square):
    """`concat_recordings`: the joined recording's labels are the parts' labels, in order."""
    lab = _synthetic_lab(square, square.space.vector(), [])
    a, b = lab(np.array([[1.2, 0.1, 0.5], [2.0, 0.0, 0.7]])), lab(np.array([[0.9, -0.1, 0.6]]))
    joined = ingest_strike_lab(concat_recordings([a, b]), "joined")
    np.testing.assert_array_equal(joined["strike"], np.concatenate([a["strike"], b["strike"]]))
    each = [ingest_strike_lab(r, "part") for r in (a, b)]  # a start pose is read off its own track alone
    np.testing.assert_allclose(joined["start_pose"], np.concatenate([e["start_pose"] for e in each]), atol=1e-12)
    assert len(joined["strike"]) == 3 and np.isfinite(joined["post_velocity"]).all()
    # slice_recording undoes the join: the last strike alone ingests as part b
    np.testing.assert_allclose(ingest_strike_lab(slice_recording(concat_recordings([a, b]), 2, 3), "b")["post_velocity"],
                               each[1]["post_velocity"], atol=1e-12)  # fmt: skip

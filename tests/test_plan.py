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

import clashx
from clashx.optimize._plan import CRITERIA, PlanConfig, plan, strike_information
from clashx.scenes._strike import sample_strikes
from clashx.workflows._cli import main

FACE_TO_OBLIQUE_MAX = 0.25  # μ1 information of the face-centre strike / the oblique one's, at most


@pytest.fixture(scope="module")
def square():
    return clashx.shipped_surrogate("square")


def test_face_centre_strike_tells_little_about_mu1(square):
    """Fisher information on μ1 (prior-unit coordinates): face-centre against oblique strikes at the same speed."""
    p = square.space.vector()
    face = [[math.pi / 2, 0.0, 0.5]]
    oblique = [[math.pi / 2, math.pi / 12, 0.5], [math.pi / 2, -math.pi / 12, 0.5]]
    i_face = strike_information(square, face, p, free=("mu1",))[0, 0, 0]
    i_obl = strike_information(square, oblique, p, free=("mu1",))[:, 0, 0]
    assert np.all(i_face < FACE_TO_OBLIQUE_MAX * i_obl), (i_face, i_obl)


def test_d_optimal_picks_the_most_informative_candidates(square):
    """With one free parameter, greedy D-optimal design picks the candidates of largest information, in order."""
    p = square.space.vector()
    config = PlanConfig(k=3, criterion="d-optimal", candidates=256, free=("mu1",), seed=4)
    r = plan(square, p, config=config)
    # the planner's candidates: the same key
    cand = np.asarray(sample_strikes(256, key=jax.random.split(jax.random.PRNGKey(4), 3)[0]), np.float64)
    info = strike_information(square, cand, p, free=("mu1",))[:, 0, 0]
    np.testing.assert_allclose(r["strikes"], cand[np.argsort(info)[::-1][:3]])
    assert np.mean(np.abs(r["strikes"][:, 1])) > math.pi / 24  # more oblique than the candidates' mean


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
    assert json.loads((tmp_path / "plan.json").read_text())["criterion"] == "d-optimal"
    bad = tmp_path / "bad.csv"
    assert main(["plan", "--shape", "triangle", "--k", "0", "--out", str(bad)]) == 2
    assert not bad.exists()

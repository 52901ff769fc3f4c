"""The compliant impulse family: its law against Hunt-Crossley's restitution, its shipped surrogate against the law,
and the two families' average."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

import clashx
from clashx.events import relative_error, sample_strikes
from clashx.learn import FamilyFit, LabFit, LabFitConfig, family_config, fit_families
from clashx.learn._families import mixture_moments
from clashx.scenes import compliant_space, family_outcomes
from clashx.scenes import geometry as geo

# Head-on on the square's face, no friction: the block leaves at (1 + e) m_s v0 / (m_s + m_b) with Hunt-Crossley's
# e ≈ 1 - 2 λ v0 / 3 (first order in λ v0).  Measured: 1e-5 at λ = 1e-3 s/m, at most 0.14 % at λ v0 ≤ 0.08.
HC_RESTITUTION_RTOL = 3e-3
# The shipped compliant surrogates against the law on random strikes and parameters (validation: 0.6-2.1 %).
SURROGATE_MEDIAN_TOL = 0.04
BLOCK_MASS = 0.25


@pytest.mark.parametrize("lam", [1e-3, 0.1])
@pytest.mark.parametrize("v0", [0.3, 0.8])
def test_compliant_law_bounces_as_hunt_crossley_predicts(lam, v0):
    params = np.array([0.0, 0.0, 6.0, np.log10(lam), BLOCK_MASS, 0.0, 0.0, 0.0])  # mu1 mu2 log10k log10lam m com τ
    out = family_outcomes("compliant", "square", np.array([[np.pi / 2, 0.0, v0]]), params)[0]
    e = 1.0 - 2.0 / 3.0 * lam * v0
    expected = (1.0 + e) * geo.STRIKER_MASS * v0 / (geo.STRIKER_MASS + BLOCK_MASS)
    assert -out[1] == pytest.approx(expected, rel=HC_RESTITUTION_RTOL)
    assert abs(out[0]) < 1e-6 and abs(out[2]) < 1e-5  # straight on: no sideways motion, no spin


@pytest.mark.parametrize("shape", geo.SHAPES)
def test_shipped_compliant_surrogate_follows_its_law(shape):
    model = clashx.shipped_strike_surrogate(shape, "compliant")
    assert model.space == compliant_space()
    k_s, k_p = jax.random.split(jax.random.PRNGKey(7))
    strikes = np.asarray(sample_strikes(256, key=k_s), np.float64)
    params = np.asarray(model.space.sample(256, key=k_p), np.float64)
    law = family_outcomes("compliant", shape, strikes, params)
    pred = np.asarray(clashx.predict(model, strikes, params))
    err = np.asarray(relative_error(pred, law, geo.characteristic_length(shape)))
    assert np.median(err) < SURROGATE_MEDIAN_TOL


def test_family_average_weighs_the_families_equally():
    strikes = np.asarray(sample_strikes(8, key=jax.random.PRNGKey(1)), np.float64)
    fits, preds = {}, []
    for family in ("mujoco", "compliant"):
        model = clashx.shipped_strike_surrogate("triangle", family)
        params = np.asarray(model.space.vector(), np.float64)
        fits[family] = LabFit(params, np.zeros_like(params), model, {}, np.arange(0), {})
        preds.append(np.asarray(clashx.predict(model, strikes, params), np.float64))
    both = FamilyFit.equal(fits)
    assert both.weights == {"mujoco": 0.5, "compliant": 0.5}
    np.testing.assert_allclose(both.predict(strikes), 0.5 * (preds[0] + preds[1]), rtol=1e-6)
    assert not np.allclose(preds[0], preds[1], rtol=0.01)  # the families differ, so the average is not either


def test_family_config_and_bad_families():
    cfg = family_config("compliant", LabFitConfig(n_starts=3))
    assert cfg.local is None and cfg.n_starts == 3 and dict(cfg.prior_std)["log10k"] == 1.0
    assert family_config("mujoco") == LabFitConfig()
    with pytest.raises(ValueError, match="family 'rigid'"):
        family_config("rigid")
    with pytest.raises(ValueError, match="at most once"):
        fit_families({}, "square", key=jax.random.PRNGKey(0), families=("mujoco", "mujoco"))
    with pytest.raises(ValueError, match="shipped surrogates"):
        clashx.shipped_strike_surrogate("square", "rigid")


def test_cube_family_average_of_two_rotations_is_the_half_turn():
    """Rotations of 0 and 90 degrees about z average to 45 degrees, whichever sign the second quaternion has."""
    from clashx.workflows._cube_ensemble import mean_states
    from clashx.workflows._cube_pipeline import average_states

    h = np.pi / 8  # half of 45 degrees
    a = np.r_[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1, np.zeros(6)]
    b = np.r_[np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4), 0.2, 0.0, 0.3, np.ones(6)]
    for q_sign in (1.0, -1.0):
        bb = b.copy()
        bb[:4] *= q_sign
        m = mean_states(np.stack([a, bb]))
        np.testing.assert_allclose(average_states(a, bb), m, atol=0)
        np.testing.assert_allclose(m[:4], [np.cos(h), 0.0, 0.0, np.sin(h)], atol=1e-12)
        np.testing.assert_allclose(m[4:], 0.5 * (a[4:] + b[4:]), atol=1e-12)


def test_mixture_moments_match_samples_of_the_mixture():
    """Two Gaussians per event, equal weights: the moments against 200 000 draws of the mixture."""
    rng = np.random.default_rng(0)
    m1, m2 = np.array([[1.0, 0.0, 0.5]]), np.array([[0.6, 0.2, 0.5]])
    c1, c2 = np.diag([0.01, 0.02, 0.03])[None], np.diag([0.04, 0.01, 0.01])[None]
    mean, cov = mixture_moments([m1, m2], [c1, c2], [0.5, 0.5])
    pick = rng.random(200_000) < 0.5
    draws = np.where(pick[:, None], rng.multivariate_normal(m1[0], c1[0], 200_000),
                     rng.multivariate_normal(m2[0], c2[0], 200_000))  # fmt: skip
    np.testing.assert_allclose(mean[0], draws.mean(0), atol=2e-3)
    np.testing.assert_allclose(cov[0], np.cov(draws.T), atol=2e-3)
    assert cov[0, 0, 0] == pytest.approx(0.5 * (0.01 + 0.04) + 0.25 * 0.4**2)  # the families' spread widens it


def test_cube_family_average_needs_both_families():
    from clashx.workflows._cube_pipeline import CubeTossConfig

    with pytest.raises(ValueError, match="add clashx_rigid"):
        CubeTossConfig(tosses="tosses.npz", methods=("clashx", "clashx_families"))
    with pytest.raises(ValueError, match="need clashx_rigid"):
        CubeTossConfig(tosses="tosses.npz", methods=("clashx",), posterior_samples=8)
    with pytest.raises(ValueError, match="needs --posterior-samples"):
        CubeTossConfig(tosses="tosses.npz", posterior_noise=True)
    with pytest.raises(ValueError, match="0 \\(none\\) or more"):
        CubeTossConfig(tosses="tosses.npz", posterior_samples=-1)


def test_cli_identifies_both_families_and_averages_their_predictions(tmp_path, capsys):
    """`clashx identify --family both` writes each family's fit; `predict` and `evaluate` average the families'
    predictions with the file's weights, recomputed here from the shipped surrogates; misuse is refused."""
    from clashx.events import ingest_strike_lab, read_npz, save_events
    from clashx.learn._identify import fit_loss
    from clashx.workflows._cli import main

    events = tmp_path / "ev.npz"
    save_events(events, ingest_strike_lab(read_npz(clashx.lab_recording("square", "fit"), "lab"), "lab"))
    params, pred, score = tmp_path / "p.json", tmp_path / "pred.npz", tmp_path / "e.json"
    assert main(["identify", "--real", str(events), "--family", "both", "--starts", "4", "--out", str(params)]) == 0
    assert main(["predict", "--events", str(events), "--params", str(params), "--out", str(pred)]) == 0
    assert main(["evaluate", "--real", str(events), "--params", str(params), "--json", str(score)]) == 0
    raw = json.loads(params.read_text())
    ev = clashx.load_events(events)
    touched = ev["touched"]
    s, v = ev["strike"][touched], ev["post_velocity"][touched]
    assert raw["weights"] == {"mujoco": 0.5, "compliant": 0.5}
    ref = 0.0
    for family, fit in raw["families"].items():
        model = clashx.shipped_strike_surrogate("square", family)
        p = np.array([fit["params"][n] for n in model.space.names])
        # the loss the file reports is the surrogate's at the parameters it reports, each event weighed by the
        # weight the file reports for its label (the event file carries the labels' σ)
        w = np.asarray(fit["label_weighting"]["weights"])
        per_event = np.array([float(fit_loss(model, p, s[i : i + 1], v[i : i + 1])) for i in range(len(s))])
        assert float(np.mean(w * per_event)) == pytest.approx(fit["loss"], rel=1e-4)
        ref = ref + 0.5 * np.asarray(clashx.predict(model, s, p), np.float64)
    got = np.load(pred)
    np.testing.assert_allclose(got["post_velocity"][touched], ref, rtol=1e-5, atol=1e-7)
    assert str(got["family"]) == "both" and list(got["names_compliant"]) == list(compliant_space().names)
    err = np.asarray(relative_error(ref, v, geo.characteristic_length("square")))
    assert json.loads(score.read_text())["alpha_accuracy"] == pytest.approx(np.mean(err <= 0.1))
    capsys.readouterr()
    # --model with both families, and a several-families file where one family's parameters are needed
    (tmp_path / "m").mkdir()
    assert main(["identify", "--real", str(events), "--family", "both", "--model", str(tmp_path / "m"),
                 "--out", str(tmp_path / "q.json")]) == 2  # fmt: skip
    assert "--family both" in capsys.readouterr().err
    assert main(["finetune", "--real", str(events), "--params", str(params), "--out", str(tmp_path / "ft")]) == 2
    assert "several impulse families" in capsys.readouterr().err
    bad = dict(raw, weights={"mujoco": 0.9, "compliant": 0.9})
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert main(["evaluate", "--real", str(events), "--params", str(tmp_path / "bad.json")]) == 2
    assert "'weights'" in capsys.readouterr().err
    # one family's file: evaluated through that family's shipped surrogate; a surrogate of the other is refused
    one = tmp_path / "compliant.json"
    one.write_text(json.dumps(raw["families"]["compliant"] | {"family": "compliant", "shape": "square"}))
    assert main(["evaluate", "--real", str(events), "--params", str(one), "--json", str(score)]) == 0
    model = clashx.shipped_strike_surrogate("square", "compliant")
    alone = clashx.predict(model, s, np.array([raw["families"]["compliant"]["params"][n] for n in model.space.names]))
    err = np.asarray(relative_error(alone, v, geo.characteristic_length("square")))
    assert json.loads(score.read_text())["alpha_accuracy"] == pytest.approx(np.mean(err <= 0.1))
    mujoco_dir = str(clashx.data_path("strike_surrogate/square"))
    assert main(["evaluate", "--real", str(events), "--params", str(one), "--model", mujoco_dir]) == 2
    assert "the compliant family's is needed" in capsys.readouterr().err
    assert main(["plan", "--shape", "square", "--params", str(one), "--k", "2", "--out", str(tmp_path / "n.csv")]) == 2
    assert "'compliant' impulse family" in capsys.readouterr().err


def test_label_sigma_weighs_the_joint_identification():
    """Equal σs leave the fit as it is; a label given a large σ weighs less in the joint search; a σ per strike;
    by default (`LabFitConfig.label_weights`) the σ is read off the tracks."""
    from clashx.events import read_npz, track_label_sigma
    from clashx.learn import fit_family

    rec = read_npz(clashx.lab_recording("square", "fit"), "lab")
    cfg = LabFitConfig(n_starts=3, iterations=10, label_weights=False)
    n = len(rec["touched"])

    def fit(sigma, config=cfg):
        return fit_family(rec, "compliant", key=jax.random.PRNGKey(0), shape="square", config=config,
                          label_sigma=sigma)  # fmt: skip

    plain, equal = fit(None), fit(np.full(n, 0.05))
    np.testing.assert_allclose(equal.params, plain.params, rtol=1e-6)
    assert plain.report["joint"]["label_weights"] is None
    assert equal.report["joint"]["label_weights"] == pytest.approx([1.0] * len(equal.rows))
    sigma = np.zeros(n)
    sigma[equal.rows[0]] = 1.0  # a label as uncertain as its own size
    w = fit(sigma).report["joint"]["label_weights"]
    loss = plain.report["stage1"]["loss"]
    # 1 / (loss + 1) against 1 / loss for the others, before scaling to mean 1
    assert w[0] / w[1] == pytest.approx(loss / (loss + 1.0), rel=1e-6)
    with pytest.raises(ValueError, match="label_sigma"):
        fit(np.zeros(n + 1))
    # the default reads each label's σ off its track: the same fit as that σ given
    default = fit(None, dataclasses.replace(cfg, label_weights=True))
    tracks = fit(track_label_sigma(rec, "lab"))
    assert default.report["joint"]["label_weights"] == pytest.approx(tracks.report["joint"]["label_weights"])
    np.testing.assert_allclose(default.params, tracks.params, rtol=1e-6)
    assert np.ptp(default.report["joint"]["label_weights"]) > 0.1  # the tracks' σs differ


def test_cli_identify_weighs_a_recordings_labels_unless_told_not_to(tmp_path, capsys):
    """`clashx identify` on a recording weighs its labels by their tracks' σ; `--equal-label-weights` equally.
    On the event file ingested from it, the labels carry the same σ and are weighed by 1 / (misfit + σ²); the
    flag on an event file whose labels carry no σ is refused, naming it, with nothing written."""
    from clashx.events import events_label_sigma, ingest_strike_lab, read_npz, save_events
    from clashx.workflows._cli import main

    rec = str(clashx.lab_recording("square", "fit"))
    events = tmp_path / "ev.npz"
    ingested = ingest_strike_lab(read_npz(rec, "lab"), "lab")
    save_events(events, ingested)
    for real in (rec, str(events)):
        runs = {}
        for flag in ([], ["--equal-label-weights"]):
            out = tmp_path / f"p{len(flag)}.json"
            argv = ["identify", "--real", real, "--family", "compliant", "--starts", "2", "--out", str(out)]
            assert main(argv + flag) == 0
            runs[bool(flag)] = json.loads(out.read_text())
        assert runs[False]["label_weights"] == "track sigma" and runs[True]["label_weights"] == "equal"
        fit = runs[False]
        w = fit["stages"]["joint"]["label_weights"] if real == rec else fit["label_weighting"]["weights"]
        assert len(w) == len(runs[False]["rows"]) and np.mean(w) == pytest.approx(1.0) and np.ptp(w) > 0.1
        if real == rec:
            assert runs[True]["stages"]["joint"]["label_weights"] is None
        else:  # 1 / w is (misfit + σ²) up to the mean-1 scale: a line in σ² with a positive intercept
            assert "label_weighting" not in runs[True]
            s2 = events_label_sigma(ingested)[runs[False]["rows"]] ** 2
            slope, intercept = np.polyfit(s2, 1.0 / np.asarray(w), 1)
            np.testing.assert_allclose(1.0 / np.asarray(w), slope * s2 + intercept, rtol=1e-6)
            assert slope > 0 and intercept / slope == pytest.approx(fit["label_weighting"]["misfit"], rel=1e-6)
    # a selection out of order and with gaps: each row keeps its own σ
    rows = [7, 2, 5, 0, 9]
    out = tmp_path / "sel.json"
    argv = ["identify", "--real", str(events), "--select", ",".join(map(str, rows)), "--family", "compliant"]
    assert main(argv + ["--starts", "2", "--out", str(out)]) == 0
    fit = json.loads(out.read_text())
    s2 = events_label_sigma(ingested)[rows] ** 2
    w = np.asarray(fit["label_weighting"]["weights"])
    product = w * (fit["label_weighting"]["misfit"] + s2)  # constant: w ∝ 1 / (misfit + σ²) row by row
    assert fit["rows"] == rows and np.ptp(s2) > 0
    np.testing.assert_allclose(product, product[0], rtol=1e-6)
    # rows without a track σ: a file without the column, or marked as another σ (--method sim), weighs
    # equally and refuses the flag; a selection that mixes rows with and without σ is refused, naming them
    bare = tmp_path / "bare.npz"
    save_events(bare, {k: v for k, v in ingested.items() if k != "post_velocity_std"})
    sim_meta = json.dumps(json.loads(str(ingested["meta"])) | {"label_sigma": None})
    other = tmp_path / "other.npz"
    save_events(other, ingested | {"meta": sim_meta})
    mixed = tmp_path / "mixed.npz"
    save_events(mixed, ingested | {"post_velocity_std": np.where(np.arange(10)[:, None] == 3, np.nan,
                                                                 ingested["post_velocity_std"])})  # fmt: skip
    for path in (bare, other):
        out = tmp_path / "eq.json"
        assert main(["identify", "--real", str(path), "--family", "compliant", "--starts", "2", "--out", str(out)]) == 0
        assert json.loads(out.read_text())["label_weights"] == "equal"
        assert "label_weighting" not in json.loads(out.read_text())
        never = tmp_path / "never.json"
        assert main(["identify", "--real", str(path), "--equal-label-weights", "--out", str(never)]) == 2
        assert "--equal-label-weights" in capsys.readouterr().err and not never.exists()
    never = tmp_path / "never.json"
    assert main(["identify", "--real", str(mixed), "--out", str(never)]) == 2
    err = capsys.readouterr().err
    assert "rows [3]" in err and "--equal-label-weights" in err and not never.exists()


FASTER = 1.1  # labels 30 % faster: the fit to them predicts the fit strikes this much faster at least (measured 1.16x)


def test_labels_measured_otherwise_replace_the_tracks():
    """`labels` given as the tracks' own read changes nothing; other labels move the fit; NaN rows keep the track's."""
    from clashx.events import ingest_strike_lab, read_npz
    from clashx.learn import fit_family

    rec = read_npz(clashx.lab_recording("square", "fit"), "lab")
    cfg = LabFitConfig(n_starts=3, iterations=10)
    tracks = ingest_strike_lab(rec, "lab")["post_velocity"]

    def fit(labels):
        return fit_family(rec, "compliant", key=jax.random.PRNGKey(0), shape="square", config=cfg, labels=labels)

    plain = fit(None)
    # every row NaN: every label and its σ from its track
    np.testing.assert_allclose(fit(np.full_like(tracks, np.nan)).params, plain.params, rtol=1e-6)
    # the tracks' labels given as measured otherwise: the same fit where the labels are not weighed by their σ
    unweighted = dataclasses.replace(cfg, label_weights=False)
    np.testing.assert_allclose(
        fit_family(
            rec, "compliant", key=jax.random.PRNGKey(0), shape="square", config=unweighted, labels=tracks
        ).params,
        fit_family(rec, "compliant", key=jax.random.PRNGKey(0), shape="square", config=unweighted).params,
        rtol=1e-6,
    )
    other = fit(tracks * 1.3)  # every block leaving 30 % faster: a different block and contact
    np.testing.assert_allclose(other.events["post_velocity"][other.rows], 1.3 * tracks[other.rows])
    s = other.events["strike"][other.rows]
    speed = [
        np.linalg.norm(np.asarray(clashx.predict(f.model, s, f.params))[:, :2], axis=1).mean() for f in (plain, other)
    ]
    assert speed[1] > FASTER * speed[0], speed
    with pytest.raises(ValueError, match="labels"):
        fit(tracks[:-1])


FAMILY_HANDLER_TOL = 1e-5  # float32: the handler's weighted sum against FamilyFit.predict's (float64 of float32)


def test_the_families_handler_is_their_average_and_runs_in_the_hybrid():
    """`FamilyFit.handler()` at MuJoCo's parameters is `FamilyFit.predict`, and the strike's hybrid runs it as it runs
    one surrogate (a strike whose handler is the average lands between the two families' own)."""
    shape = "square"
    models = {f: clashx.shipped_strike_surrogate(shape, f) for f in ("mujoco", "compliant")}
    params = {f: np.asarray(m.space.centre) for f, m in models.items()}
    fits = {f: LabFit(params[f], np.zeros_like(params[f]), models[f], {}, np.arange(0), {}) for f in models}
    fam = FamilyFit.equal(fits)
    strikes = np.array([[1.2, 0.1, 0.5], [0.4, -0.2, 0.3], [2.0, 0.0, 0.7]])
    handler = fam.handler()
    got = np.asarray(jax.vmap(handler, in_axes=(0, None))(strikes, params["mujoco"]))
    np.testing.assert_allclose(got, fam.predict(strikes), rtol=FAMILY_HANDLER_TOL, atol=FAMILY_HANDLER_TOL)
    hybrid = clashx.make_strike_hybrid(shape)
    rest = {f: clashx.strike_rollouts_c(hybrid, models[f], strikes[:1], params["mujoco"] if f == "mujoco" else params[f])
            for f in ("mujoco",)}  # fmt: skip
    both = clashx.strike_rollouts_c(hybrid, handler, strikes[:1], params["mujoco"])
    np.testing.assert_allclose(both.post_velocity, got[:1], rtol=1e-4, atol=1e-4)  # the guard left it alone
    assert np.isfinite(both.rest_pose).all() and not np.allclose(both.rest_pose, rest["mujoco"].rest_pose)

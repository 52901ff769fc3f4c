"""The cube toss: state conventions, free flight, MJX against MuJoCo C, events, real-data ingestion."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import clashx
from clashx.events._events import EventFileError, validate_events
from clashx.events._ingest_cube import MIN_TOSS_FRAMES, ingest_cube_tosses, load_cube_tracks
from clashx.scenes import _cube_flight as F
from clashx.scenes import _toss as T

REAL = clashx.data_path("contactnets_cube/tosses.npz")  # shipped with clashx

# Tolerances, with where they come from.
STEP_TOL = 2e-5  # one MuJoCo step against free_flight: semi-implicit Euler's g dt^2 = 9e-6 m
EULER_OFFSET = 0.5 * F.GRAVITY * T.DT  # m/s: semi-implicit Euler's ballistic runs ahead by g dt / 2 in velocity
FLIGHT_POS_TOL = 2e-5  # m, MJX (float32) frames against the Euler-corrected ballistic
FLIGHT_ANGLE_TOL = 2e-4  # rad, MJX orientation against constant-ω rotation (float32)
MJX_C_POS_TOL = 1e-4  # m, post_state position, MJX (float32) against MuJoCo C (seen: 1e-6)
MJX_C_VEL_TOL = 5e-3  # m/s (seen: 5e-5)
MJX_C_OMEGA_TOL = 5e-2  # rad/s (seen: 2e-4)
MJX_C_ANGLE_TOL = 1e-3  # rad
MJX_C_TIME_TOL = 1e-5  # s, t_impact (seen: 5e-8)
# Ingestion of a noise-free analytic toss: only the fits' numerics.
SYN_TIME_TOL = 1e-5  # s
SYN_VEL_TOL = 1e-3  # m/s
SYN_OMEGA_TOL = 1e-2  # rad/s
SYN_POS_TOL = 1e-5  # m

N_FRAMES = 40  # trajectory frames asked of the simulators in these tests


def angle(qa, qb):
    """Rotation angle (rad) between unit quaternions, (..., 4), well conditioned near zero."""
    qa, qb = np.asarray(qa, np.float64), np.asarray(qb, np.float64)
    rel = np.asarray(
        jax.vmap(clashx.core.quat_mul)(jnp.asarray(qa.reshape(-1, 4) * [1, -1, -1, -1]), jnp.asarray(qb.reshape(-1, 4)))
    )
    return (2 * np.arctan2(np.linalg.norm(rel[:, 1:], axis=1), np.abs(rel[:, 0]))).reshape(qa.shape[:-1])


def random_states(n, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.c_[q, rng.normal(size=(n, 9))]


# --- states ----------------------------------------------------------------------------------------


def test_state_conversion_round_trip():
    for s in random_states(5).astype(np.float32):  # float32: jnp's default precision, so reordering is exact
        qpos, qvel = F.state_to_qpos_qvel(s)
        np.testing.assert_array_equal(qpos, np.r_[s[4:7], s[0:4]])  # x y z | qw qx qy qz
        np.testing.assert_array_equal(qvel, np.r_[s[10:13], s[7:10]])  # v world | ω body
        np.testing.assert_array_equal(F.qpos_qvel_to_state(qpos, qvel), s)
        q2, v2 = F.state_to_qpos_qvel(F.qpos_qvel_to_state(qpos, qvel))
        np.testing.assert_array_equal(q2, qpos)
        np.testing.assert_array_equal(v2, qvel)


def test_state_conventions_match_mujoco():
    """One MuJoCo C step from a state moves it as the dataset's conventions say (ω body, v world)."""
    sim = T.make_toss_scene()
    m = sim.mj_model()
    d = mujoco.MjData(m)
    for s in random_states(3, seed=1):
        s = s.copy()
        s[6] = 1.0  # far above the table
        qpos, qvel = F.state_to_qpos_qvel(s)
        d.qpos[:], d.qvel[:] = np.asarray(qpos), np.asarray(qvel)
        mujoco.mj_step(m, d)
        got = np.asarray(F.qpos_qvel_to_state(d.qpos, d.qvel))
        want = np.asarray(F.free_flight(jnp.asarray(s), T.DT))
        assert angle(got[:4], want[:4]) < STEP_TOL
        np.testing.assert_allclose(got[4:], want[4:], atol=STEP_TOL)


def test_lowest_corner():
    s = np.r_[1.0, 0, 0, 0, 0, 0, 0.1, np.zeros(6)]
    assert float(F.lowest_corner_z(jnp.asarray(s))) == pytest.approx(0.1 - F.HALF, abs=1e-7)
    c, h = np.cos(np.pi / 8), np.sin(np.pi / 8)  # 45° about x: an edge down
    s[:4] = [c, h, 0, 0]
    assert float(F.lowest_corner_z(jnp.asarray(s))) == pytest.approx(0.1 - np.sqrt(2) * F.HALF, abs=1e-6)


# --- simulation: one MJX compilation, one MuJoCo C run, shared by the tests below ---------------


def toss_batch():
    """Two tosses that hit the table (stiff and soft contact) and one that stays in flight."""
    states, _ = T.sample_toss_inputs(2, key=jax.random.key(7))
    states = np.asarray(states, np.float64)
    high = states[0].copy()
    high[6], high[12] = 1.5, 1.0  # climbs 5 cm more and falls 1.5 m: no impact within the event horizon
    params = np.array([[0.3, 0.004, 1.0], [0.15, 0.03, 0.5], [0.3, 0.004, 1.0]])
    return np.r_[states, high[None]], params


@pytest.fixture(scope="module")
def sims():
    sim = T.make_toss_scene()
    states, params = toss_batch()
    mjx_ev = jax.tree.map(np.asarray, T.simulate_tosses(sim, jnp.asarray(states), jnp.asarray(params), N_FRAMES))
    c_ev = T.simulate_tosses_c(sim, states, params, N_FRAMES)
    return sim, states, params, mjx_ev, c_ev


def euler_ballistic(state, t):
    """MuJoCo's (semi-implicit Euler) free flight: exact velocities and rotation; positions of v0 + g dt / 2."""
    flight = jax.jit(jax.vmap(F.free_flight, in_axes=(None, 0)))
    out = np.array(flight(jnp.asarray(state), jnp.asarray(t)), np.float64)
    shifted = np.array(state, np.float64)
    shifted[12] -= EULER_OFFSET
    out[:, 4:7] = np.asarray(flight(jnp.asarray(shifted), jnp.asarray(t)))[:, 4:7]
    return out


@pytest.mark.parametrize("engine", ["mjx", "c"])
def test_free_flight_against_ballistic(sims, engine):
    sim, states, _, mjx_ev, c_ev = sims
    ev = mjx_ev if engine == "mjx" else c_ev
    t = np.arange(N_FRAMES) * T.FRAME_DT
    for i in range(len(states)):
        flying = t < (ev.t_impact[i] if ev.valid[i] else np.inf)
        want = euler_ballistic(states[i], t[flying])
        got = ev.track[i][flying]
        assert flying.sum() >= 5
        assert np.abs(got[:, 4:7] - want[:, 4:7]).max() < FLIGHT_POS_TOL
        assert np.abs(got[:, 10:13] - want[:, 10:13]).max() < FLIGHT_POS_TOL / T.FRAME_DT
        assert angle(got[:, :4], want[:, :4]).max() < FLIGHT_ANGLE_TOL
    assert list(ev.valid) == [True, True, False]  # the high toss has no impact within the horizon
    for i in range(2):  # pre_state is the free flight at t_impact, where a corner touches z = 0
        want = euler_ballistic(states[i], np.array([ev.t_impact[i]]))[0]
        np.testing.assert_allclose(ev.pre_state[i][4:7], want[4:7], atol=FLIGHT_POS_TOL)
        np.testing.assert_allclose(ev.pre_state[i][7:], want[7:], atol=FLIGHT_POS_TOL / T.FRAME_DT)
        assert abs(float(F.lowest_corner_z(jnp.asarray(ev.pre_state[i])))) < 1e-5


def test_mjx_matches_mujoco_c(sims):
    _, _, _, m, c = sims
    np.testing.assert_array_equal(m.valid, c.valid)
    ok = c.valid
    np.testing.assert_allclose(m.t_impact[ok], c.t_impact[ok], atol=MJX_C_TIME_TOL)
    for name in ("pre_state", "post_state"):
        a, b = getattr(m, name)[ok], getattr(c, name)[ok]
        assert angle(a[:, :4], b[:, :4]).max() < MJX_C_ANGLE_TOL, name
        assert np.abs(a[:, 4:7] - b[:, 4:7]).max() < MJX_C_POS_TOL, name
        assert np.abs(a[:, 7:10] - b[:, 7:10]).max() < MJX_C_OMEGA_TOL, name
        assert np.abs(a[:, 10:13] - b[:, 10:13]).max() < MJX_C_VEL_TOL, name
    assert np.abs(m.track[:, :, 4:7] - c.track[:, :, 4:7]).max() < MJX_C_POS_TOL
    # the impact did something: the table pushed up
    assert (c.post_state[ok, 12] > c.pre_state[ok, 12] + 0.3).all()


def test_sampler_and_events():
    states, params = T.sample_toss_inputs(64, key=jax.random.key(0))
    again, _ = T.sample_toss_inputs(64, key=jax.random.key(0))
    np.testing.assert_array_equal(states, again)
    states, params = np.asarray(states), np.asarray(params)
    low = np.asarray(jax.vmap(F.lowest_corner_z)(jnp.asarray(states)))
    lo, hi = T.INIT_RANGES["lowest_corner"]
    assert (low > lo - 1e-6).all() and (low < hi + 1e-6).all()
    np.testing.assert_allclose(np.linalg.norm(states[:, :4], axis=1), 1, atol=1e-6)
    T.cube_space().check(params)
    sim = T.make_toss_scene()
    ev = T.toss_events(sim, states[:3], params[:3], engine="c")  # batch of 3, as `sims`: no recompilation
    out = validate_events(ev)
    assert str(out["source"]) == "mujoco-c" and str(out["scene"]) == "cube-toss"
    assert json.loads(str(out["meta"]))["window_s"] == pytest.approx(T.WINDOW)
    np.testing.assert_array_equal(out["toss_id"], np.arange(3))  # every sampled toss hits the table in time
    with pytest.raises(ValueError, match="engine"):
        T.toss_events(sim, states[:1], params[:1], engine="bullet")


# --- ingestion -----------------------------------------------------------------------------------------


def analytic_toss(t_impact_frames=10.37, n=40):
    """A toss with a known impact: free flight, an instantaneous bounce at t_impact, free flight again."""
    c, s = np.cos(0.3), np.sin(0.3)
    q0 = np.array([c, s * 0.6, s * 0.8, 0.0])
    probe = np.r_[q0, 0.0, 0.0, 0.0, 2.0, -1.0, 0.5, 0.9, 0.3, 0.0]
    t_imp = t_impact_frames * T.FRAME_DT
    # place the cube so that its lowest corner reaches z = 0 exactly at t_imp
    at_imp = np.asarray(F.free_flight(jnp.asarray(probe), t_imp))
    probe[6] -= float(F.lowest_corner_z(jnp.asarray(at_imp)))
    pre = np.asarray(F.free_flight(jnp.asarray(probe), t_imp), np.float64)
    post0 = pre.copy()
    post0[10:13] = [0.5, 0.2, 0.8]  # the bounce: new velocities, both known
    post0[7:10] = [-1.0, 3.0, 1.0]
    t = np.arange(n) * T.FRAME_DT
    track = np.array(
        [F.free_flight(jnp.asarray(probe if tk < t_imp else post0), tk if tk < t_imp else tk - t_imp) for tk in t],
        np.float64,
    )
    track[:, :4] /= np.linalg.norm(track[:, :4], axis=1, keepdims=True)
    return track, probe, pre, post0, t_imp


def write_tosses(path, tracks, ids=None):
    offsets = np.r_[0, np.cumsum([len(tr) for tr in tracks])]
    ids = np.arange(len(tracks)) if ids is None else ids
    np.savez(path, states=np.concatenate(tracks), offsets=offsets, toss_ids=np.asarray(ids))


def test_ingest_analytic_toss(tmp_path):
    track, initial, pre, post0, t_imp = analytic_toss()
    path = tmp_path / "one.npz"
    write_tosses(path, [track], ids=[17])
    ev = ingest_cube_tosses(path, table_z=0.0, length_scale=1.0)
    validate_events(ev)
    assert ev["toss_id"].tolist() == [17]
    assert ev["t_impact"][0] == pytest.approx(t_imp, abs=SYN_TIME_TOL)
    np.testing.assert_allclose(ev["pre_state"][0, 7:], pre[7:], atol=SYN_VEL_TOL)
    np.testing.assert_allclose(ev["pre_state"][0, 4:7], pre[4:7], atol=SYN_POS_TOL)
    np.testing.assert_allclose(ev["initial_state"][0, 4:], initial[4:], atol=SYN_VEL_TOL)
    post = np.asarray(F.free_flight(jnp.asarray(post0), T.WINDOW))
    np.testing.assert_allclose(ev["post_state"][0, 10:], post[10:], atol=SYN_VEL_TOL)
    np.testing.assert_allclose(ev["post_state"][0, 7:10], post[7:10], atol=SYN_OMEGA_TOL)
    np.testing.assert_allclose(ev["post_state"][0, 4:7], post[4:7], atol=SYN_POS_TOL)
    assert angle(ev["post_state"][0, :4], post[:4]) < 1e-4


def test_ingest_later_impact(tmp_path):
    """The bounce's flight lands again: impacts="all" finds that landing from the flight before it."""
    track, initial, pre, post0, t_imp = analytic_toss(n=48)
    path = tmp_path / "bounce.npz"
    write_tosses(path, [track], ids=[3])
    ev = ingest_cube_tosses(path, table_z=0.0, length_scale=1.0)
    assert ev["impact"].tolist() == [0, 1] and ev["toss_id"].tolist() == [3, 3]
    first = ingest_cube_tosses(path, table_z=0.0, length_scale=1.0, impacts="first")
    assert first["impact"].tolist() == [0]
    np.testing.assert_array_equal(first["pre_state"][0], ev["pre_state"][0])
    # the analytic second landing: the free flight from post0 first puts a corner at z = 0
    tau = float(F.crossing_time(jnp.asarray(post0 + np.r_[np.zeros(6), 1e-9, np.zeros(6)]), 0.3))
    pre2 = np.asarray(F.free_flight(jnp.asarray(post0), tau))
    assert ev["t_impact"][1] == pytest.approx(t_imp + tau, abs=SYN_TIME_TOL)
    np.testing.assert_allclose(ev["pre_state"][1, 4:7], pre2[4:7], atol=SYN_POS_TOL)
    np.testing.assert_allclose(ev["pre_state"][1, 10:13], pre2[10:13], atol=SYN_VEL_TOL)
    np.testing.assert_allclose(ev["pre_state"][1, 7:10], pre2[7:10], atol=SYN_OMEGA_TOL)
    np.testing.assert_array_equal(ev["initial_state"][1], ev["initial_state"][0])
    with pytest.raises(ValueError, match="impacts"):
        ingest_cube_tosses(path, table_z=0.0, length_scale=1.0, impacts="second")


def test_ingest_frame_correction(tmp_path):
    """A file 2 % short in length with the table 3 mm up: the frame is found and undone."""
    track, initial, pre, _, t_imp = analytic_toss(t_impact_frames=16.2, n=60)
    rest = np.r_[1.0, 0, 0, 0, 0.1, 0.2, F.HALF, np.zeros(6)]
    track = np.r_[track[:30], np.tile(rest, (MIN_TOSS_FRAMES, 1))]
    scale, table = 0.98, 0.003
    scaled = track.copy()
    scaled[:, 4:7] *= scale
    scaled[:, 10:13] *= scale
    scaled[:, 6] += table
    path = tmp_path / "six.npz"
    write_tosses(path, [scaled] * 6)
    tracks = load_cube_tracks(path)
    assert tracks.length_scale == pytest.approx(scale, abs=1e-3)
    assert tracks.table_z == pytest.approx(table, abs=2e-4)
    ev = ingest_cube_tosses(path)
    assert ev["t_impact"] == pytest.approx(np.full(6, t_imp), abs=2e-4)
    np.testing.assert_allclose(ev["pre_state"][:, 10:], np.tile(pre[10:], (6, 1)), atol=0.02)


def _bad_files():
    track, *_ = analytic_toss()
    good = dict(states=track, offsets=np.array([0, len(track)]), toss_ids=np.array([5]))
    nan = track.copy()
    nan[3, 8] = np.nan
    unnorm = track.copy()
    unnorm[4, :4] *= 1.1
    return {
        "missing key": ({k: v for k, v in good.items() if k != "offsets"}, "offsets"),
        "wrong shape": (dict(good, states=track[:, :12]), "shape"),
        "offsets inconsistent": (dict(good, offsets=np.array([0, len(track) - 3])), "offsets"),
        "nan": (dict(good, states=nan), "toss row 0 \\(toss_id 5\\): frame 3, column 8"),
        "too short": (
            dict(good, states=track[: MIN_TOSS_FRAMES - 1], offsets=np.array([0, MIN_TOSS_FRAMES - 1])),
            "toss row 0 \\(toss_id 5\\) has 11 frames",
        ),
        "non-unit quaternion": (dict(good, states=unnorm), "toss row 0 \\(toss_id 5\\): frame 4 .*normalise"),
    }


@pytest.mark.parametrize("case", list(_bad_files()))
def test_ingest_bad_input(tmp_path, case):
    arrays, message = _bad_files()[case]
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(EventFileError, match=message) as err:
        ingest_cube_tosses(path, table_z=0.0, length_scale=1.0)
    assert str(path) in str(err.value)
    assert sorted(tmp_path.iterdir()) == before  # nothing written


def test_ingest_real_tosses():
    every = ingest_cube_tosses(REAL)
    validate_events(every)
    ev = every.select(every["impact"] == 0)
    later = every["impact"] > 0
    assert later.sum() >= 200  # bounces: more real impacts than tosses (seen 262 more)
    low = np.asarray(jax.vmap(F.lowest_corner_z)(jnp.asarray(every["pre_state"][later])))
    assert np.abs(low).max() < 1e-5  # a corner at the table
    assert (every["pre_state"][later, 6] > F.HALF * 0.99).all()  # the centre above a half edge: not through the table
    for tid in np.unique(every["toss_id"][later]):  # after the toss's first impact, in order
        rows = every["t_impact"][every["toss_id"] == tid]
        assert (np.diff(rows) > T.WINDOW).all()
    meta = ev.meta
    assert meta["n_tosses"] == 350
    assert len(ev["toss_id"]) >= 340, meta["skipped"]
    assert 0.97 < meta["length_scale"] < 0.99  # the README's "about 2 %"
    assert abs(meta["table_z"]) < 0.002  # "near z = 0"
    pre, post = ev["pre_state"], ev["post_state"]
    low = np.asarray(jax.vmap(F.lowest_corner_z)(jnp.asarray(pre)))
    assert np.abs(low).max() < 1e-5  # a corner at the table
    assert (pre[:, 12] < -0.3).all()  # falling onto the table
    assert (post[:, 12] > pre[:, 12] + 0.3).all()  # the table pushed up
    assert (np.abs(post[:, 12]) < np.abs(pre[:, 12])).mean() > 0.95  # the vertical speed shrank or reversed
    speed = lambda s: np.linalg.norm(s[:, 10:13], axis=1)  # noqa: E731
    assert (speed(post) < speed(pre)).mean() > 0.95  # energy lost
    # the generated tosses' initial states cover the real ones
    init = ev["initial_state"]
    ilow = np.asarray(jax.vmap(F.lowest_corner_z)(jnp.asarray(init)))
    r = T.INIT_RANGES
    assert r["lowest_corner"][0] <= ilow.min() and ilow.max() <= r["lowest_corner"][1]
    vh = np.linalg.norm(init[:, 10:12], axis=1)
    assert r["v_horizontal"][0] <= vh.min() and vh.max() <= r["v_horizontal"][1]
    assert r["vz"][0] <= init[:, 12].min() and init[:, 12].max() <= r["vz"][1]
    assert np.linalg.norm(init[:, 7:10], axis=1).max() <= r["omega"][1]
    assert ev["t_impact"].max() + T.WINDOW < T.make_toss_scene().n_event_frames * T.FRAME_DT

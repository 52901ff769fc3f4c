"""`clashx demo`: what clashx does today, end to end, at a laptop's size.

Strike scene, for the square block (`bench/generate.py` compares every shape;
the demo keeps one so that it stays a few minutes on 2 CPU cores): sample strikes and contact parameters over
the prior, simulate them on MJX (jit + vmap) and on MuJoCo C, and print how
well the two engines agree and how fast each is.  Real impacts: ingest the
shipped ContactNets cube tosses into first-impact events and simulate the same
tosses in MuJoCo with its nominal cube parameters; then the cube pipeline
(`clashx._cube_pipeline`) at a small size: fit every method on ten shipped
tosses and score its rollouts of 100 others, beside the published errors.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from . import _geometry as geo
from . import _metrics, _strike
from ._generate import sample_strikes


def compare_engines(shape: str, n: int, seed: int, *, to_rest: bool = True, repeats: int = 1) -> dict:
    """Simulate `n` prior strikes of `shape` on MJX and on MuJoCo C; timings (best of `repeats`) and agreement.

    Used by `clashx demo` and `bench/generate.py`; MJX's compile time is kept apart from its run time.
    """
    sim = _strike.make_strike_sim(shape)
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    strikes = np.asarray(sample_strikes(n, key=k1), np.float64)
    params = np.asarray(sim.space.sample(n, key=k2), np.float64)
    s, p = jnp.asarray(strikes), jnp.asarray(params)
    t0 = time.perf_counter()
    compiled = _strike.simulate_strikes_mjx.lower(sim, s, p, to_rest=to_rest).compile()
    t_compile = time.perf_counter() - t0

    def best(fn):
        times, out = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = jax.block_until_ready(fn())
            times.append(time.perf_counter() - t0)
        return min(times), out

    t_mjx, ev_mjx = best(lambda: compiled(sim, s, p, to_rest=to_rest))
    _strike.simulate_strikes_c(sim, strikes, params, to_rest=to_rest)  # warm-up: its JAX helpers compile once
    t_c, ev_c = best(lambda: _strike.simulate_strikes_c(sim, strikes, params, to_rest=to_rest))
    length = geo.characteristic_length(shape)
    ok = np.asarray(ev_mjx.touched) & ev_c.touched
    err = np.asarray(_metrics.relative_error(np.asarray(ev_mjx.post_velocity)[ok], ev_c.post_velocity[ok], length))
    rest = np.linalg.norm(np.asarray(ev_mjx.rest_pose)[ok, :2] - ev_c.rest_pose[ok, :2], axis=1)
    return {
        "shape": shape,
        "n": n,
        "to_rest": to_rest,
        "mjx_compile_s": t_compile,
        "mjx_run_s": t_mjx,
        "c_run_s": t_c,
        "mjx_ms_per_strike": 1e3 * t_mjx / n,
        "c_ms_per_strike": 1e3 * t_c / n,
        "agree_alpha_0.1": float(np.mean(err <= 0.1)),
        "median_rel_err": float(np.median(err)),
        "rest_pos_diff_mm": 1e3 * float(np.median(rest)) if to_rest else float("nan"),
    }


DEMO_SHAPES = ("square",)  # MJX compiles ~50 s per shape on 2 cores; bench/generate.py runs all of geo.SHAPES


def run_demo(n: int = 64, seed: int = 0) -> int:
    """Run the demo and print its table; returns a process exit code."""
    print(
        f"clashx demo: {n} strikes on the {', '.join(DEMO_SHAPES)} block over the prior, "
        f"MJX (jit+vmap, {jax.default_backend()}) vs MuJoCo C (every shape: bench/generate.py)"
    )
    print("simulated to rest: contact phase at 1 ms, slide phase at 4 ms, 4 s after launch\n")
    head = f"{'shape':<14}{'MJX compile':>12}{'MJX ms/strike':>15}{'C ms/strike':>13}{'agree α=0.1':>13}{'median err':>12}{'rest Δ mm':>11}"
    print(head)
    print("-" * len(head))
    for shape in DEMO_SHAPES:
        r = compare_engines(shape, n, seed)
        print(
            f"{shape:<14}{r['mjx_compile_s']:>11.1f}s{r['mjx_ms_per_strike']:>15.2f}{r['c_ms_per_strike']:>13.2f}"
            f"{r['agree_alpha_0.1']:>13.2f}{r['median_rel_err']:>12.3f}{r['rest_pos_diff_mm']:>11.2f}"
        )
    print(
        "\nagree α=0.1: fraction of strikes whose MJX post-impact velocity is within 10 % of MuJoCo C's (clashx.metrics)"
    )
    cube_impacts(n_sim=n)
    cube_pipeline(seed=seed)
    return 0


def cube_pipeline(seed: int = 0, max_eval: int = 100) -> dict:
    """The cube-toss pipeline on the shipped tosses, small: 10 fit tosses, `max_eval` evaluated, short fits."""
    from ._cube_pipeline import CubeTossConfig, run_cube_toss, summary_table
    from ._data import data_path

    print("\nreal cube tosses: fit on 10, roll out others from their initial states (bench/cube_toss.py: all 340)")
    config = CubeTossConfig(
        tosses=str(data_path("contactnets_cube/tosses.npz")),
        fit=10,
        seed=seed,
        max_eval=max_eval,
        mjx_starts=1,
        mjx_iterations=4,
        sysid_iters=15,
    )
    t0 = time.perf_counter()
    result = run_cube_toss(config, log=lambda msg: print("  " + msg))
    print()
    print(summary_table(result))
    print(
        "\npos: mean over a toss's recorded frames of |p_sim - p_real| / cube width, then mean ± std over tosses;"
        "\nat rest: the same at the last frame; rot: mean angle between simulated and real orientation;"
        "\nα: share of tosses whose state 27 ms after first contact has speed vector (v, r ω) within α of the real one"
        f"\n({time.perf_counter() - t0:.0f} s)"
    )
    return result


def cube_impacts(n_sim: int = 64) -> dict:
    """Ingest the shipped real tosses; compare their first impacts with MuJoCo C at nominal parameters."""
    from . import _toss
    from ._data import data_path
    from ._ingest_cube import ingest_cube_tosses
    from ._scenes import CUBE_FRICTION

    ev = ingest_cube_tosses(data_path("contactnets_cube/tosses.npz"))
    n = len(ev["toss_id"])
    vz_pre, vz_post = ev["pre_state"][:, 12], ev["post_state"][:, 12]
    print(f"\nreal cube tosses (ContactNets, shipped): {n} first impacts ingested")
    print(
        f"  vertical velocity before impact {np.median(vz_pre):+.3f} m/s, 27 ms after {np.median(vz_post):+.3f} m/s (medians)"
    )
    sim = _toss.make_toss_sim()
    k = min(n_sim, n)
    nominal = np.tile([CUBE_FRICTION, 0.02, 1.0], (k, 1))  # dair_pll's friction, MuJoCo's default solref
    out = _toss.simulate_tosses_c(sim, ev["initial_state"][:k], nominal)
    ok = np.asarray(out.valid)
    dv = np.linalg.norm(np.asarray(out.post_state)[ok, 10:13] - ev["post_state"][:k][ok, 10:13], axis=1)
    speed = np.linalg.norm(ev["post_state"][:k][ok, 10:13], axis=1)
    print(
        f"  MuJoCo C at nominal contact parameters, {int(ok.sum())} of them: post-impact velocity off by "
        f"{np.median(dv):.3f} m/s (median; real post-impact speed {np.median(speed):.3f} m/s)"
    )
    return {"n": n, "median_dv": float(np.median(dv))}

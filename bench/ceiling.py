"""MuJoCo's ceiling on a lab, and what further MuJoCo knobs add to it (issue 26, item 1).

    python bench/ceiling.py [--labs a,C,D] [--n 60] [--fit-seed 7] [--spaces strike8,solimp] [--generations 40]
                            [--restarts 1] [--json OUT]

The ceiling of a model class is how well its best parameters can do: MuJoCo C
is fitted by CMA-ES (`clashx.baselines.identify_cmaes`, population 16) to the
*true* post-impact velocities (`post_velocity_true`) of `--n` random lab
strikes (`--fit-seed`, 7): an oracle fit, for measuring the model class only, never a
method.  Scored at α = 0.1 on the same strikes (the ceiling) and on held-out
test strikes (lab A: the shipped 200; labs C and D of bench/correction.py: 100,
seed 1).  Spaces:

* `strike8`   clashx's eight parameters (`clashx.strike_space`);
* `solimp`    the eight plus the striker-block pair's solimp (d0, dmax, width):
              MuJoCo's impedance, how the constraint's stiffness grows with penetration.

A knob that raises the ceiling is worth distilling (a surrogate conditioned
on it); one that does not is not.

With `--n 10 --fit-seed 2` (and `--labs a:...` as in bench/correction.py) the
oracle sees the *true* labels of the same ten strikes clashx fits on: what ten
random strikes can tell MuJoCo's class at best, label noise removed.
`bench/accuracy.py` prints the ceiling rows of its own test set
(`test_set_ceiling`).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import numpy as np
from cmaes import run_lab  # bench/cmaes.py: strike_lab.py in a subprocess
from correction import lab_file, lab_test

from clashx.baselines import identify_cmaes
from clashx.core import ParamSpace, Target, write_json
from clashx.events import relative_error
from clashx.scenes import geometry as geo
from clashx.scenes import make_strike_scene, simulate_strikes_c, strike_space
from clashx.workflows import lab_truth

SOLIMP = {  # name: (col, low, high, nominal, log)
    "solimp_d0": (0, 0.5, 0.99, 0.9, False),
    "solimp_dmax": (1, 0.8, 0.999, 0.95, False),
    "solimp_width": (2, 1e-4, 0.01, 1e-3, True),
}


def solimp_space(shape: str) -> ParamSpace:
    """clashx's eight strike parameters and the striker-block pair's solimp."""
    pieces = len(geo.convex_pieces(shape))
    base = strike_space(pieces)
    extra = [(name, *spec) for name, spec in SOLIMP.items()]
    assert base.nominal is not None
    return ParamSpace(
        names=base.names + tuple(e[0] for e in extra),
        low=base.low + tuple(e[2] for e in extra),
        high=base.high + tuple(e[3] for e in extra),
        targets=base.targets
        + tuple(tuple(Target("pair_solimp", f"striker_block_{k}", (e[1],)) for k in range(pieces)) for e in extra),
        log_scale=base.log_scale + tuple(e[5] for e in extra),
        nominal=base.nominal + tuple(e[4] for e in extra),
    )


def oracle_fit(sim, strikes, truth, *, key, generations: int = 40, restarts: int = 1):
    """The oracle: MuJoCo C's parameters of `sim.space` fitted by CMA-ES to *true* velocities (flat prior)."""
    return identify_cmaes(sim, strikes, truth, key=key, generations=generations, prior_std={}, restarts=restarts)


def alpha_of(sim, params, strikes, truth, shape: str) -> float:
    """α = 0.1 accuracy of MuJoCo C at `params` against true velocities."""
    p = np.broadcast_to(params, (len(strikes), len(params)))
    pred = simulate_strikes_c(sim, strikes, p, to_rest=False).post_velocity
    return float(np.mean(np.asarray(relative_error(pred, truth, geo.characteristic_length(shape))) <= 0.1))


def held_out_ceiling(test: dict, n: int, fit, score, names) -> dict:
    """An oracle's ceiling on a test recording: `fit(strikes, truth) -> params` on the true labels of its first `n`
    strikes, `score(params, strikes, truth) -> α` on those `n` and on the others; `names` name the parameters.

    Returns {"n_fit", "n_held_out", "in_sample", "held_out", "params"}.  An oracle (it reads
    `post_velocity_true`): a bound on the model class, never a method.
    """
    s, v, _ = lab_truth(test, "test")
    if len(s) <= n:
        raise ValueError(f"the test recording has {len(s)} touched strikes; the ceiling needs more than n={n}")
    params = np.asarray(fit(s[:n], v[:n]))
    return {
        "n_fit": n, "n_held_out": len(s) - n,
        "in_sample": score(params, s[:n], v[:n]), "held_out": score(params, s[n:], v[n:]),
        "params": dict(zip(names, params.tolist(), strict=True)),
    }  # fmt: skip


def test_set_ceiling(shape: str, test: dict, *, n: int = 60, key, generations: int = 40, restarts: int = 3) -> dict:
    """MuJoCo's ceiling on a test recording (`held_out_ceiling`): the oracle fitted to the true labels of its first
    `n` strikes, α = 0.1 on them and on the others."""
    sim = make_strike_scene(shape)
    return held_out_ceiling(
        test, n,
        lambda s, v: oracle_fit(sim, s, v, key=key, generations=generations, restarts=restarts).params,
        lambda p, s, v: alpha_of(sim, p, s, v, shape), sim.space.names,
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labs", default="a,C,D")
    ap.add_argument("--shapes", default=",".join(geo.SHAPES))
    ap.add_argument("--n", type=int, default=60, help="strikes fitted (true labels)")
    ap.add_argument("--test-n", type=int, default=100)
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("--fit-seed", type=int, default=7, help="seed of the --n fitted strikes")
    ap.add_argument("--spaces", default="strike8,solimp", help="comma-separated: strike8, solimp")
    ap.add_argument("--restarts", type=int, default=1, help="CMA-ES restarts, the best by fit loss kept")
    ap.add_argument("--json")
    a = ap.parse_args()
    unknown = sorted(set(a.spaces.split(",")) - {"strike8", "solimp"})
    if unknown:
        raise SystemExit(f"bench/ceiling.py: --spaces {unknown}: choose from strike8, solimp")
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for lab in a.labs.split(","):
            path = lab_file(lab, tmp)
            for shape in a.shapes.split(","):
                rec = run_lab(shape, path, os.path.join(tmp, f"{lab}_{shape}_fit.npz"), n=a.n, seed=a.fit_seed)
                test = lab_test(shape, lab, tmp, a.test_n)
                s_fit, v_fit, _ = lab_truth(rec, "fit")
                s_test, v_test, _ = lab_truth(test, "test")
                row: dict = {"lab": lab, "shape": shape, "n_fit": len(s_fit)}
                spaces = {"strike8": None, "solimp": solimp_space(shape)}
                for name in a.spaces.split(","):
                    space = spaces[name]
                    sim = make_strike_scene(shape, space=space)
                    fit = oracle_fit(sim, s_fit, v_fit, key=jax.random.PRNGKey(0), generations=a.generations,
                                     restarts=a.restarts)  # fmt: skip
                    row[name] = {"ceiling": alpha_of(sim, fit.params, s_fit, v_fit, shape),
                                 "held_out": alpha_of(sim, fit.params, s_test, v_test, shape),
                                 "params": dict(zip(sim.space.names, np.asarray(fit.params).tolist(), strict=True))}  # fmt: skip
                rows.append(row)
                cells = "   ".join(
                    f"{n} ceiling {row[n]['ceiling']:.3f} held-out {row[n]['held_out']:.3f}"
                    for n in a.spaces.split(",")
                )
                print(f"lab {lab} {shape:<14} {cells}   [{time.perf_counter() - t0:.0f} s]", flush=True)
    for name in a.spaces.split(","):
        c = np.mean([r[name]["ceiling"] for r in rows])
        h = np.mean([r[name]["held_out"] for r in rows])
        print(f"mean over {len(rows)} (lab, shape): {name:<8} ceiling {c:.3f}  held-out {h:.3f}")
    if a.json:
        write_json(a.json, {"rows": rows, "n": a.n, "fit_seed": a.fit_seed, "generations": a.generations,
                            "restarts": a.restarts})  # fmt: skip
        print(f"-> {a.json}")


if __name__ == "__main__":
    main()

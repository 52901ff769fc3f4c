"""MuJoCo's ceiling on a lab, and what further MuJoCo knobs add to it (issue 26, item 1).

    python bench/ceiling.py [--labs a,C,D] [--n 60] [--generations 40] [--json OUT]

The ceiling of a model class is how well its best parameters can do: MuJoCo C
is fitted by CMA-ES (`clashx.baselines.identify_cmaes`, population 16) to the
*true* post-impact velocities (`post_velocity_true`) of `--n` random lab
strikes (seed 7): an oracle fit, for measuring the model class only, never a
method.  Scored at α = 0.1 on the same strikes (the ceiling) and on held-out
test strikes (lab A: the shipped 200; labs C and D of bench/correction.py: 100,
seed 1).  Spaces:

* `strike8`   clashx's eight parameters (`clashx.strike_space`);
* `solimp`    the eight plus the striker-block pair's solimp (d0, dmax, width):
              MuJoCo's impedance, how the constraint's stiffness grows with penetration.

A knob that raises the ceiling is worth distilling (a surrogate conditioned
on it); one that does not is not.
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
from clashx.scenes import make_strike_sim, simulate_strikes_c, strike_space
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labs", default="a,C,D")
    ap.add_argument("--shapes", default=",".join(geo.SHAPES))
    ap.add_argument("--n", type=int, default=60, help="strikes fitted (true labels)")
    ap.add_argument("--test-n", type=int, default=100)
    ap.add_argument("--generations", type=int, default=40)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for lab in a.labs.split(","):
            path = lab_file(lab, tmp)
            for shape in a.shapes.split(","):
                rec = run_lab(shape, path, os.path.join(tmp, f"{lab}_{shape}_fit.npz"), n=a.n, seed=7)
                test = lab_test(shape, lab, tmp, a.test_n)
                s_fit, v_fit, _ = lab_truth(rec, "fit")
                s_test, v_test, _ = lab_truth(test, "test")
                length = geo.characteristic_length(shape)
                row: dict = {"lab": lab, "shape": shape, "n_fit": len(s_fit)}
                for name, space in (("strike8", None), ("solimp", solimp_space(shape))):
                    sim = make_strike_sim(shape, space=space)
                    fit = identify_cmaes(
                        sim, s_fit, v_fit, key=jax.random.PRNGKey(0), generations=a.generations, prior_std={}
                    )

                    def acc(s, v, sim=sim, fit=fit, length=length):
                        p = np.broadcast_to(fit.params, (len(s), len(fit.params)))
                        pred = simulate_strikes_c(sim, s, p, to_rest=False).post_velocity
                        return float(np.mean(np.asarray(relative_error(pred, v, length)) <= 0.1))

                    row[name] = {"ceiling": acc(s_fit, v_fit), "held_out": acc(s_test, v_test),
                                 "params": dict(zip(sim.space.names, np.asarray(fit.params).tolist(), strict=True))}  # fmt: skip
                rows.append(row)
                print(
                    f"lab {lab} {shape:<14} strike8 ceiling {row['strike8']['ceiling']:.3f} held-out "
                    f"{row['strike8']['held_out']:.3f}   +solimp ceiling {row['solimp']['ceiling']:.3f} held-out "
                    f"{row['solimp']['held_out']:.3f}   [{time.perf_counter() - t0:.0f} s]",
                    flush=True,
                )
    for name in ("strike8", "solimp"):
        c = np.mean([r[name]["ceiling"] for r in rows])
        h = np.mean([r[name]["held_out"] for r in rows])
        print(f"mean over {len(rows)} (lab, shape): {name:<8} ceiling {c:.3f}  held-out {h:.3f}")
    if a.json:
        write_json(a.json, {"rows": rows, "n": a.n, "generations": a.generations})
        print(f"-> {a.json}")


if __name__ == "__main__":
    main()

"""The whole pipeline on real cube tosses (ContactNets), against MuJoCo and MJX, beside the published errors.

    python bench/cube_toss.py --fit 10 --seed 0 [--tosses FILE] [--eval FILE] [--surrogate RUN]
                              [--json OUT] [--plot PNG] [--max-eval N]

Ten tosses (`--fit`) are drawn from `--tosses` (default: the ones shipped in
clashx/data/contactnets_cube/); every method is fitted on them and rolled out
from the initial state of every other toss (or of every toss of `--eval`),
over its recorded frames (`clashx.workflows._cube_pipeline`):

  mujoco_nominal     MuJoCo C, μ 0.15 and MuJoCo's default solref (0.02 s, 1)
  mujoco_identified  MuJoCo C, (μ, time constant, damping ratio) by mujoco.sysid on the fit trajectories
  mjx_identified     MJX, the same three by Levenberg-Marquardt on forward-mode Jacobians through MJX (float64)
  clashx             hybrid rollout: every landing after a free flight (the first, each bounce's) through the cube
                     surrogate (identified through it and fine-tuned on every impact of the fit tosses) over its
                     27 ms window, MJX between them (parameters fitted by Levenberg-Marquardt through MJX from
                     the surrogate's first post-impact states)
  clashx_first       the same fit; only the first impact through the surrogate, MJX after its window
  clashx_rigid       hybrid rollout as clashx's, every landing through the second impact family instead: a rigid
                     cube under an algebraic impulse law (restitution e_n, e_t, Coulomb μ, the cube's inertia;
                     clashx.scenes.rigid_cube_window) fitted by CMA-ES on every impact of the fit tosses
  clashx_families    clashx's and clashx_rigid's rollouts averaged frame by frame (positions and velocities averaged,
                     quaternions sign-aligned and normalised): the two impact families together
  clashx_mean, clashx_rigid_mean, clashx_families_mean (with --posterior-samples N): each family's predictive
                     mean, N rollouts per toss with the impact parameters drawn from the fit's Laplace posterior,
                     averaged frame by frame; the two families' means averaged
  oracle_first_post  a bound, not a method: clashx's every-impact rollout from each evaluated toss's measured
                     state at the end of its first impact window (what a perfect first impact would give)

Errors (`clashx.baselines._cube_fit`), w = cube width 0.1048 m, per toss over all its
recorded frames k = 0 … K-1 from the first: position ‖p_sim − p_real‖ / w in %,
averaged over k; "at rest" the same at the last frame; rotation the angle of
R_simᵀ R_real in degrees, averaged over k.  Reported: mean ± std over the
evaluated tosses.  Acosta, Yang & Posa (RA-L 2022) report the same two kinds of
figure (position in % of cube width, rotation in degrees, mean ± std) for
Drake 13.5 / 16.5, Bullet 14.9 / 16.5, MuJoCo 25.1 / 21.7 after tuning on
these tosses; their exact averaging and tuning set are not in the sources at
hand, so the comparison is of magnitudes.  α-accuracy: the state 27 ms after
first contact, speed vector (v, r ω), r = √(I/m); within α if
‖Δu‖ ≤ α ‖u_real‖ (α = 0.1 in the JSON's "alpha_accuracy"; 0.2 beside it).

Times are wall-clock seconds on this machine (shared CPUs).
"""

from __future__ import annotations

import argparse
import json
import time

import jax

from clashx.events import data_path
from clashx.workflows import (
    METHODS,
    CubeTossConfig,
    plot_tosses,
    run_cube_toss,
    save_json,
    summary_table,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fit", type=int, default=10, help="tosses to fit on")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tosses", default=None, help="cube-toss file (default: the shipped ContactNets tosses)")
    ap.add_argument("--eval", default=None, help="evaluate on every toss of this file instead of the rest of --tosses")
    ap.add_argument("--surrogate", default=None, help="pretrained cube surrogate folder (default: the shipped one)")
    ap.add_argument("--max-eval", type=int, default=0, help="evaluate on at most N tosses (0: all)")
    ap.add_argument(
        "--rest-generations", type=int, default=6, help="CMA-ES generations of clashx's between-impact refit (0: off)"
    )
    ap.add_argument(
        "--rest-starts",
        type=int,
        default=1,
        help="Levenberg-Marquardt starts of clashx's MJX fit after the impacts (the first from the impact fit; 0: none,"
        " the CMA-ES refit starts at the impact's parameters)",
    )
    ap.add_argument(
        "--rest-std", type=float, default=0.1, help="the CMA-ES refit's initial step, in the prior's unit box"
    )
    ap.add_argument(
        "--rigid-joint",
        action="store_true",
        help="clashx_rigid's CMA-ES refit searches the rigid law's parameters jointly with MJX's on whole tosses",
    )
    ap.add_argument(
        "--rigid-inertia",
        action="store_true",
        help="clashx_rigid's MJX between impacts runs a cube with the rigid law's fitted inertia",
    )
    ap.add_argument(
        "--posterior-samples",
        type=int,
        default=0,
        help="members per toss of the posterior-mean rollouts (clashx_mean, clashx_rigid_mean, clashx_families_mean;"
        " 0: none)",
    )
    ap.add_argument(
        "--posterior-noise", action="store_true", help="the posterior-mean members also draw each impact's noise τ"
    )
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--plot", default=None, help="PNG of a few tosses, real against each method")
    a = ap.parse_args()
    config = CubeTossConfig(
        tosses=a.tosses or str(data_path("contactnets_cube/tosses.npz")),
        eval=a.eval,
        fit=a.fit,
        seed=a.seed,
        surrogate=a.surrogate,
        max_eval=a.max_eval,
        rest_generations=a.rest_generations,
        rest_starts=a.rest_starts,
        rest_std=a.rest_std,
        rigid_joint=a.rigid_joint,
        rigid_inertia=a.rigid_inertia,
        posterior_samples=a.posterior_samples,
        posterior_noise=a.posterior_noise,
        methods=tuple(m.strip() for m in a.methods.split(",") if m.strip()),
    )
    print(f"device: {jax.default_backend()} ({jax.devices()[0].device_kind}); seed {a.seed}")
    t0 = time.perf_counter()
    result = run_cube_toss(config)
    print()
    print(summary_table(result))
    print(
        f"\nwall time {time.perf_counter() - t0:.0f} s; fitting: "
        + ", ".join(f"{m} {r['fit_s']:.0f} s" for m, r in result.methods.items())
    )
    print("clashx fit:", json.dumps({k: result.methods["clashx"][k] for k in ("params", "rest_params")}))
    print("clashx fine-tuning:", result.methods["clashx"]["finetune"]["reason"])
    if a.json:
        save_json(a.json, result)
    if a.plot:
        plot_tosses(result, a.plot)


if __name__ == "__main__":
    main()

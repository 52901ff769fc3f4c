"""Gradient quality through the strike's stiff impact: plain MJX, MJX with BCG, and the surrogate hybrid.

    python bench/gradients.py [--shapes square,triangle,semi-cylinder] [--strikes 32] [--replicas 3]
                              [--targets 8] [--gd-steps 20] [--seed 0] [--json OUT] [--plot OUT.png]

For each shape and path (`clashx.grad.PATHS`), the Jacobian of the block pose
0.6 s after launch (at rest for the nominal μ2 = 0.5) with respect to the
strike (θ, θ1, v_pre) and the contact parameters (μ1, μ2, e1), at the
parameters' nominal values, by forward mode (`jax.jacfwd`, six tangents) in
float64.  Inputs are in units of their ranges (SCENE.md's strike ranges, the
prior's parameter ranges); the pose is (x, y, L·yaw) with L = 0.05 m.

Reference: the Gaussian-smoothed central difference of MuJoCo C's rest pose
(`simulate_strikes_c`, full contact): K = `--ref-samples` draws of the inputs
with σ = `--ref-smooth` of each range, central differences of step
`--ref-step` on each input, averaged.

Per path:
  bias              median over strikes of |mean_r J_r − J_ref| / |J_ref| (Frobenius norms)
  variance          median over strikes of Σ var_r(J_r) / |J_ref|²: replicas r differ by an input
                    jitter of `--jitter` of each range and, for BCG, the bundle's key
  seconds_per_grad  wall time of one full 3 × 6 Jacobian after compilation (compile time apart)
  nan_rate          fraction of Jacobians with a NaN

First-order use (same compiled functions):
  strikes   `--targets` rest poses of random strikes in MuJoCo C; Adam (optax) on the strike from the
            range's middle, `--gd-steps` steps per path; each step's strike is run in MuJoCo C and its
            median position error over the targets recorded against the path's wall time; beside it
            CMA-ES (evosax, 16 × `--cma-generations`) over MuJoCo C rollouts on the same targets.
  identify  μ1, μ2, e1 from the rest poses of `--targets` strikes run in MuJoCo C at a prior draw, by
            Adam through each path from the prior's middle: parameter error (units of the ranges) against
            wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

# XLA:CPU's multi-threaded Eigen pool wedged (all threads idle, never returning) on the bundled
# rollouts' nested vmap in 3 of 4 runs here (jax 0.10.2); single-threaded Eigen avoids it
# (PyAutoFit#1528/#1530 report the same).  Set before jax is imported; a user's own XLA_FLAGS win.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from clashx.core import as_float64  # noqa: E402
from clashx.grad import PATHS, PosePath, strike_bcg_config  # noqa: E402
from clashx.hybrid import make_strike_hybrid  # noqa: E402
from clashx.optimize import cmaes_in_box  # noqa: E402
from clashx.scenes import geometry as geo  # noqa: E402
from clashx.scenes import make_strike_scene, sample_strikes, simulate_strikes_c  # noqa: E402
from clashx.surrogate import shipped_strike_surrogate  # noqa: E402

L_YAW = 0.05  # m: yaw enters the pose error as L·yaw
CONTACT = (0, 1, 2)  # μ1, μ2, e1 in the strike space
S_LOW, S_HIGH = np.asarray(geo.STRIKE_LOW), np.asarray(geo.STRIKE_HIGH)


def _wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


class Inputs:
    """Unit-box inputs u (n, 6) ↔ strikes (n, 3) and contact parameters (n, 3)."""

    def __init__(self, space):
        self.c_low = np.asarray(space.low)[list(CONTACT)]
        self.c_high = np.asarray(space.high)[list(CONTACT)]

    def split(self, u):
        u = np.asarray(u)
        return S_LOW + u[:, :3] * (S_HIGH - S_LOW), self.c_low + u[:, 3:] * (self.c_high - self.c_low)

    def unit(self, strikes, contact):
        return np.concatenate(
            [(strikes - S_LOW) / (S_HIGH - S_LOW), (contact - self.c_low) / (self.c_high - self.c_low)], 1
        )


def _scaled_pose(pose):
    pose = np.asarray(pose, np.float64)
    return np.stack([pose[..., 0], pose[..., 1], L_YAW * pose[..., 2]], -1)


def c_poses(sim_c, base, inputs: Inputs, u) -> np.ndarray:
    """MuJoCo C rest poses (n, 3) of unit inputs u (n, 6)."""
    strikes, contact = inputs.split(u)
    params = np.broadcast_to(np.asarray(base), (len(u), len(base))).copy()
    params[:, list(CONTACT)] = contact
    return np.asarray(simulate_strikes_c(sim_c, strikes, params).rest_pose, np.float64)


def reference_jacobians(sim_c, base, inputs, u, *, samples, smooth, step, key):
    """Smoothed central-difference Jacobians (n, 3, 6) of the scaled pose in unit inputs, and their standard errors."""
    n, d = u.shape
    delta = smooth * np.asarray(jax.random.normal(key, (n, samples, d)))
    eye = step * np.eye(d)
    pts = u[:, None, None, None, :] + delta[:, :, None, None, :] + np.stack([eye, -eye], 0)[None, None]
    poses = c_poses(sim_c, base, inputs, pts.reshape(-1, d)).reshape(n, samples, 2, d, 3)
    diff = poses[:, :, 0] - poses[:, :, 1]
    diff[..., 2] = _wrap(diff[..., 2])
    jac = _scaled_pose(diff) / (2 * step)  # (n, K, d, 3)
    jac = np.swapaxes(jac, -1, -2)  # (n, K, 3, d)
    return jac.mean(1), jac.std(1) / math.sqrt(samples)


def make_jacobian_fn(path: PosePath, inputs: Inputs):
    """A jitted (u (b, 6), keys (b,)) → (scaled poses (b, 3), Jacobians (b, 3, 6) in unit inputs)."""
    s_low, c_low = jnp.asarray(S_LOW), jnp.asarray(inputs.c_low)
    s_rng, c_rng = jnp.asarray(S_HIGH - S_LOW), jnp.asarray(inputs.c_high - inputs.c_low)
    out_scale = jnp.asarray([1.0, 1.0, L_YAW])

    def one(u, key):
        def f(x):
            pose = path(s_low + x[:3] * s_rng, c_low + x[3:] * c_rng, key) * out_scale
            return pose, pose

        jac, pose = jax.jacfwd(f, has_aux=True)(u)
        return pose, jac

    return eqx.filter_jit(jax.vmap(one))


def _blocks(fn, u, keys, block):
    poses, jacs = [], []
    for i in range(0, len(u), block):
        p, j = fn(jnp.asarray(u[i : i + block]), keys[i : i + block])
        poses.append(np.asarray(p))
        jacs.append(np.asarray(j))
    return np.concatenate(poses), np.concatenate(jacs)


def quality(fn, u, j_ref, *, replicas, jitter, block, key):
    """Bias, variance, seconds per gradient, NaN rate of one path against the reference."""
    n = len(u)
    jacs, seconds = [], 0.0
    for _ in range(replicas):
        key, k_jit, k_b = jax.random.split(key, 3)
        ur = np.clip(u + jitter * np.asarray(jax.random.normal(k_jit, u.shape)), 0.0, 1.0)
        t0 = time.perf_counter()
        _, j = _blocks(fn, ur, jax.random.split(k_b, n), block)
        seconds += time.perf_counter() - t0
        jacs.append(j)
    jacs = np.stack(jacs)  # (R, n, 3, 6)
    bad = np.isnan(jacs).any(axis=(2, 3))
    ok = ~bad.any(0)
    ref_norm = np.linalg.norm(j_ref, axis=(1, 2))
    mean = np.nanmean(jacs, 0)
    bias = np.linalg.norm(mean - j_ref, axis=(1, 2)) / ref_norm
    var = np.nansum(np.nanvar(jacs, 0), axis=(1, 2)) / ref_norm**2
    return {
        "bias": float(np.median(bias[ok])) if ok.any() else float("nan"),
        "bias_mean": float(np.mean(bias[ok])) if ok.any() else float("nan"),
        "variance": float(np.median(var[ok])) if ok.any() else float("nan"),
        "seconds_per_grad": seconds / (replicas * n),
        "nan_rate": float(bad.mean()),
        "n_strikes": n,
        "replicas": replicas,
    }


def gd_strikes(fn, sim_c, base, inputs, targets, *, steps, lr, block, key):
    """Adam on the strike toward each target through one path: (wall time, MuJoCo C median error) per step."""
    n = len(targets)
    contact_u = np.full((n, 3), 0.5)
    x = np.full((n, 3), 0.5)
    opt = optax.adam(lr)
    state = opt.init(jnp.asarray(x))
    curve, spent = [], 0.0
    keys = jax.random.split(key, n)
    for _ in range(steps + 1):
        u = np.concatenate([x, contact_u], 1)
        pose_c = c_poses(sim_c, base, inputs, u)
        curve.append((spent, float(np.median(np.linalg.norm(pose_c[:, :2] - targets[:, :2], axis=1)))))
        t0 = time.perf_counter()
        pose, jac = _blocks(fn, u, keys, block)
        resid = pose - _scaled_pose(targets)
        resid[:, 2] = L_YAW * _wrap(resid[:, 2] / L_YAW)
        grad = np.einsum("ni,nij->nj", resid, jac[:, :, :3])
        grad = np.nan_to_num(grad)
        upd, state = opt.update(jnp.asarray(grad), state)
        x = np.clip(np.asarray(optax.apply_updates(jnp.asarray(x), upd)), 0.0, 1.0)
        spent += time.perf_counter() - t0
    return curve


def cma_strikes(sim_c, base, inputs, targets, *, population, generations, key):
    """CMA-ES over MuJoCo C rollouts per target: (wall time, median error) per generation, over targets."""
    hist, seconds = [], 0.0
    contact_u = np.full(3, 0.5)
    for t, target in enumerate(targets):

        def losses(us, target=target):
            u = np.concatenate([us, np.broadcast_to(contact_u, (len(us), 3))], 1)
            p = c_poses(sim_c, base, inputs, u)
            return np.linalg.norm(p[:, :2] - target[:2], axis=1)

        t0 = time.perf_counter()
        _, _, h = cmaes_in_box(
            losses,
            np.full(3, 0.5),
            key=jax.random.fold_in(key, t),
            population=population,
            generations=generations,
            std_init=0.25,
        )
        seconds += time.perf_counter() - t0
        hist.append(np.minimum.accumulate(h))
    med = np.median(np.stack(hist), 0)
    per_gen = seconds / generations  # one generation over the whole target set
    return [(per_gen * (g + 1), float(e)) for g, e in enumerate(med)]


def gd_identify(fn, sim_c, base, inputs, strikes_u, truth_u, *, steps, lr, block, key):
    """Adam on (μ1, μ2, e1) through one path to fit MuJoCo C rest poses: (wall time, parameter error) per step."""
    n = len(strikes_u)
    data = _scaled_pose(c_poses(sim_c, base, inputs, np.concatenate([strikes_u, np.broadcast_to(truth_u, (n, 3))], 1)))
    c = np.full(3, 0.5)
    opt = optax.adam(lr)
    state = opt.init(jnp.asarray(c))
    curve, spent = [], 0.0
    keys = jax.random.split(key, n)
    for _ in range(steps + 1):
        curve.append((spent, float(np.linalg.norm(c - truth_u))))
        t0 = time.perf_counter()
        pose, jac = _blocks(fn, np.concatenate([strikes_u, np.broadcast_to(c, (n, 3))], 1), keys, block)
        resid = pose - data
        resid[:, 2] = L_YAW * _wrap(resid[:, 2] / L_YAW)
        grad = np.nan_to_num(np.einsum("ni,nij->j", resid, jac[:, :, 3:]))
        upd, state = opt.update(jnp.asarray(grad), state)
        c = np.clip(np.asarray(optax.apply_updates(jnp.asarray(c), upd)), 0.0, 1.0)
        spent += time.perf_counter() - t0
    return curve


def run_shape(shape: str, args, log=print) -> dict:
    """Everything the bench measures on one shape."""
    key = jax.random.fold_in(jax.random.PRNGKey(args.seed), hash(shape) % 1000)
    sim_c = make_strike_scene(shape)
    sim = as_float64(sim_c)
    hs = make_strike_hybrid(shape, sim=sim)
    handler = as_float64(shipped_strike_surrogate(shape))
    base = jnp.asarray(sim.space.nominal, jnp.float64)
    inputs = Inputs(sim.space)
    k_u, k_ref, k_q, k_t, k_gd, k_cma, k_id, k_truth = jax.random.split(key, 8)
    strikes = np.asarray(sample_strikes(args.strikes, key=k_u), np.float64)
    u = inputs.unit(strikes, np.broadcast_to(np.asarray(base)[list(CONTACT)], (args.strikes, 3)))
    t0 = time.perf_counter()
    j_ref, j_se = reference_jacobians(
        sim_c,
        np.asarray(base),
        inputs,
        u,
        samples=args.ref_samples,
        smooth=args.ref_smooth,
        step=args.ref_step,
        key=k_ref,
    )
    ref_norm = np.linalg.norm(j_ref, axis=(1, 2))
    log(
        f"[{shape}] reference: {args.strikes} strikes × {args.ref_samples} × 12 MuJoCo C rollouts in {time.perf_counter() - t0:.1f} s; "
        f"its relative standard error {np.median(np.linalg.norm(j_se, axis=(1, 2)) / ref_norm):.3f} (median)"
    )
    out: dict = {
        "paths": {},
        "reference": {"relative_se": float(np.median(np.linalg.norm(j_se, axis=(1, 2)) / ref_norm))},
    }
    bcg = strike_bcg_config(
        n_bundle=args.bundle, sigma_pos=args.sigma_pos, sigma_vel=args.sigma_vel, horizon=args.bundle_horizon
    )
    targets_strikes = np.asarray(sample_strikes(args.targets, key=k_t), np.float64)
    targets = c_poses(
        sim_c,
        np.asarray(base),
        inputs,
        inputs.unit(targets_strikes, np.broadcast_to(np.asarray(base)[list(CONTACT)], (args.targets, 3))),
    )
    truth_u = np.asarray(jax.random.uniform(k_truth, (3,), minval=0.2, maxval=0.8))
    id_strikes_u = np.asarray(jax.random.uniform(k_id, (args.targets, 3)))
    curves: dict = {"strikes": {}, "identify": {}}
    for name in args.paths:
        path = PosePath(
            name,
            sim,
            hs if name == "hybrid" else None,
            handler if name == "hybrid" else None,
            base,
            CONTACT,
            bcg,
            args.horizon,
        )
        fn = make_jacobian_fn(path, inputs)
        block = args.bcg_block if name == "mjx_bcg" else args.block
        t0 = time.perf_counter()
        pose, _ = _blocks(fn, u[:block], jax.random.split(k_q, block), block)
        compile_s = time.perf_counter() - t0
        q = quality(fn, u, j_ref, replicas=args.replicas, jitter=args.jitter, block=block, key=k_q)
        c_pose = _scaled_pose(c_poses(sim_c, np.asarray(base), inputs, u[:block]))
        q["compile_s"] = compile_s
        q["value_error_m"] = float(np.median(np.linalg.norm(pose[:, :2] - c_pose[:, :2], axis=1)))
        out["paths"][name] = q
        log(
            f"[{shape}] {name:8s} bias {q['bias']:.3f}  variance {q['variance']:.4f}  {q['seconds_per_grad']:.3f} s/grad "
            f"(compile {compile_s:.0f} s)  NaN {q['nan_rate']:.2f}  |pose − C| {1000 * q['value_error_m']:.2f} mm"
        )
        curves["strikes"][name] = gd_strikes(
            fn, sim_c, np.asarray(base), inputs, targets, steps=args.gd_steps, lr=args.lr, block=block, key=k_gd
        )
        log(
            f"[{shape}] {name:8s} GD strikes: median error {1000 * curves['strikes'][name][0][1]:.1f} → {1000 * curves['strikes'][name][-1][1]:.1f} mm in {curves['strikes'][name][-1][0]:.1f} s"
        )
        curves["identify"][name] = gd_identify(
            fn,
            sim_c,
            np.asarray(base),
            inputs,
            id_strikes_u,
            truth_u,
            steps=args.gd_steps,
            lr=args.lr,
            block=block,
            key=k_id,
        )
        log(
            f"[{shape}] {name:8s} GD identify: |Δparams| {curves['identify'][name][0][1]:.3f} → {curves['identify'][name][-1][1]:.3f} in {curves['identify'][name][-1][0]:.1f} s"
        )
    if args.cma:
        curves["strikes"]["cmaes_c"] = cma_strikes(
            sim_c, np.asarray(base), inputs, targets, population=16, generations=args.cma_generations, key=k_cma
        )
        log(
            f"[{shape}] CMA-ES (MuJoCo C): median error {1000 * curves['strikes']['cmaes_c'][-1][1]:.1f} mm in {curves['strikes']['cmaes_c'][-1][0]:.1f} s"
        )
    out["curves"] = curves
    return out


def table(result: dict) -> str:
    rows = [
        "| shape | path | bias (median) | variance (median) | s / gradient | compile s | NaN rate | GD strike error, mm | GD identify |Δ| |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for shape, r in result.items():
        for name, q in r["paths"].items():
            gs, gi = r["curves"]["strikes"][name], r["curves"]["identify"][name]
            rows.append(
                f"| {shape} | {name} | {q['bias']:.3f} | {q['variance']:.4f} | {q['seconds_per_grad']:.3f} | {q['compile_s']:.0f} | "
                f"{q['nan_rate']:.2f} | {1000 * gs[0][1]:.1f} → {1000 * gs[-1][1]:.1f} ({gs[-1][0]:.0f} s) | {gi[0][1]:.3f} → {gi[-1][1]:.3f} ({gi[-1][0]:.0f} s) |"
            )
        c = r["curves"]["strikes"].get("cmaes_c")
        if c:
            rows.append(
                f"| {shape} | CMA-ES, MuJoCo C | | | | | | {1000 * c[0][1]:.1f} → {1000 * c[-1][1]:.1f} ({c[-1][0]:.0f} s) | |"
            )
    return "\n".join(rows)


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = list(result)
    fig, axes = plt.subplots(2, len(shapes), figsize=(4.5 * len(shapes), 7), squeeze=False)
    for j, shape in enumerate(shapes):
        for name, curve in result[shape]["curves"]["strikes"].items():
            t, e = np.asarray(curve).T
            axes[0, j].plot(np.maximum(t, 1e-2), 1000 * e, marker=".", label=name)
        axes[0, j].set(
            xscale="log",
            title=f"{shape}: model-based strikes",
            xlabel="wall time (s)",
            ylabel="median error in MuJoCo C (mm)",
        )
        for name, curve in result[shape]["curves"]["identify"].items():
            t, e = np.asarray(curve).T
            axes[1, j].plot(np.maximum(t, 1e-2), e, marker=".", label=name)
        axes[1, j].set(
            xscale="log",
            title=f"{shape}: identification (μ1, μ2, e1)",
            xlabel="wall time (s)",
            ylabel="|Δ params| (range units)",
        )
        axes[0, j].legend(fontsize=8)
        axes[1, j].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="square,triangle,semi-cylinder")
    ap.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}")
    ap.add_argument("--cma", action=argparse.BooleanOptionalAction, default=True, help="CMA-ES beside the paths")
    ap.add_argument("--strikes", type=int, default=32)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--block", type=int, default=8, help="strikes per compiled batch")
    ap.add_argument(
        "--bcg-block",
        type=int,
        default=2,
        help="strikes per compiled batch of the bundled path (its copies multiply the batch; larger batches hung XLA:CPU here)",
    )
    ap.add_argument("--jitter", type=float, default=1e-3, help="input jitter between replicas, units of the ranges")
    ap.add_argument("--ref-samples", type=int, default=96)
    ap.add_argument("--ref-smooth", type=float, default=0.01)
    ap.add_argument("--ref-step", type=float, default=0.01)
    ap.add_argument("--bundle", type=int, default=8)
    ap.add_argument("--sigma-pos", type=float, default=5e-4)
    ap.add_argument("--sigma-vel", type=float, default=0.02)
    ap.add_argument("--bundle-horizon", type=int, default=10)
    ap.add_argument("--horizon", type=float, default=0.6, help="s after launch")
    ap.add_argument("--targets", type=int, default=8)
    ap.add_argument("--gd-steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--cma-generations", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--plot")
    args = ap.parse_args(argv)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if not args.paths or set(args.paths) - set(PATHS):
        ap.error(f"--paths {','.join(args.paths)}: choose among {', '.join(PATHS)}")
    for s in shapes:
        geo.check_shape(s)
    if args.strikes % args.block or args.targets % args.block or args.block % args.bcg_block:
        ap.error(
            f"--strikes ({args.strikes}) and --targets ({args.targets}) must be multiples of --block ({args.block})"
        )
    print(f"device: {jax.devices()[0].device_kind} × {len(jax.devices())}; {os.cpu_count()} CPU cores", flush=True)
    result = {}
    for shape in shapes:
        result[shape] = run_shape(shape, args, log=lambda m: print(m, flush=True))
        if args.json:  # written after every shape: a long run keeps what it measured
            with open(args.json + ".part", "w") as f:
                json.dump(result, f, indent=1)
            os.replace(args.json + ".part", args.json)
    print(table(result))
    if args.plot:
        plot(result, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

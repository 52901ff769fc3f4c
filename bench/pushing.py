"""Sequential pushing in the strike lab: policies trained in MuJoCo and in clashx, and a planner (CLASH Table VII).

    python bench/pushing.py [--lab PATH] [--routes 1,2,3] [--episodes 20] [--controllers search,search-adapt]
                            [--draws 8] [--fit-seed 2] [--work DIR] [--seed 0] [--json OUT] [--plot OUT.png] [--quick]

1. Ten lab strikes on the semi-cylinder (`strike_lab.py --random 10 --seed FIT_SEED --reset-each` on `--lab`; on
   lab A with seed 2 that is the shipped fit recording) identify both simulators, as `bench/cmaes.py` does:
   mujoco  MuJoCo C, all 8 parameters by CMA-ES on the track-estimated velocities with clashx's objective,
           then the slide's parameters refit on the ten rest poses;
   clashx  the full pipeline (ground from the slides, two-stage identification through the surrogate,
           re-distillation, fine-tuning), then the same rest-pose refit through the CPU hybrid.
   Both refits weigh yaw at the task's own rate (`clashx.pushing._routes.YAW_LENGTH`, 0.1 m/rad, as the reward and
   the planner do): at bench/cmaes.py's 0.035 m/rad the refit leaves torsional friction high and both simulators
   turn the block about half as much as the lab does.
   The lab's parameter file is only ever handed to the lab itself.
2. Each simulator is tabulated (`clashx.pushing.build_table`) at its identified values and at draws-1 draws
   around them (σ: clashx's identification; MuJoCo's CMA-ES gives none, so both use the same σ and the
   simulators differ only in their model and identified values).
3. One brax-PPO policy per route per simulator: the same settings, budget and seed (with --restarts K, K training
   seeds each, and the one that does best in its own simulator is kept; the lab plays no part in that choice).
4. Controllers (`--controllers`), each over each simulator's table:
   search        the whole-route beam search (`clashx.pushing.SearchController`), on the identified values, its
                 cost-to-go value-iterated on the simulator's table (computed once per route and simulator);
   search-adapt  the same, reweighing the table's draws after every lab strike from the observed poses
                 (online identification, the ten fit strikes' posterior as the prior);
   policy        the PPO policy of step 3 (trained only when asked for);
   planner       the receding-horizon CMA-ES planner, two strikes ahead (`clashx.pushing.plan_strike`).
5. In simulation first: `--sim-episodes` episodes per route on the simulator's own table (`table_rig`): the
   identified draw for search, planner and policy; for search-adapt, a world drawn from the other draws.
   For the search controllers it also counts the start yaws from which the cost-to-go says the route can be
   finished within its budget at all, in that simulator: no controller can do better there.
6. In the lab, closed loop, observing the noisy mocap pose; `--episodes` per route, start yaws ROUTES.md's
   (`evaluation_yaws`).  Reported: success rate with a 95 % Wilson interval, sub-goals, and clashx against
   MuJoCo on the same start yaws (paired: an exact McNemar test on the episodes where they differ).
7. Each simulator's rest-pose error on `--check-strikes` fresh lab strikes (seed 11, block reset each time),
   through its table at the identified values: median position and yaw error.
Trained policies and tables are kept in --work and reused when the run is repeated (resumable).
`--quick`: route 1, 3 episodes, 2 draws, 10 check strikes, search-adapt only: a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmaes  # noqa: E402  (the shared identification of bench/cmaes.py)

from clashx.core import write_json
from clashx.pushing import (
    GOAL_TOL,
    SAFE_HIGH,
    SAFE_LOW,
    SHAPE,
    YAW_LENGTH,
    PlannerConfig,
    PPOConfig,
    PushEnv,
    SearchConfig,
    SearchController,
    evaluation_yaws,
    load_policy,
    lookup,
    plan_strike,
    policy_controller,
    prior_belief,
    route,
    route_strikes_left,
    route_value,
    run_episode,
    save_policy,
    table_rig,
    table_vii,
    train_policy,
)
from clashx.workflows import plot_curve, tabulate

SIMS = ("mujoco", "clashx")
CONTROLLERS = ("search", "search-adapt", "policy", "planner")
METHOD_OF = {"mujoco": "mujoco_identified", "clashx": "clashx"}


def load_lab_module():
    """strike_lab.py of ../shared/lab, imported as a module (the rig)."""
    path = cmaes.LAB_DIR / "strike_lab.py"
    if not path.exists():
        raise SystemExit(f"{path}: the strike lab is not here (bench/pushing.py needs ../shared/lab)")
    spec = importlib.util.spec_from_file_location("strike_lab", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["strike_lab"] = mod  # its dataclasses look their module up while the file runs
    spec.loader.exec_module(mod)
    return mod


def identify(lab_path: str, work: str, seed: int, fit_seed: int = 2) -> dict:
    """{sim: (params, std, handler, details)} from ten lab strikes (module docstring, 1).

    Kept in `work`/identified.json; a rerun whose tables are already in `work` reads it back (the tables then need
    no handler).
    """
    saved = os.path.join(work, "identified.json")
    if os.path.exists(saved) and all(os.path.exists(os.path.join(work, f"table_{s}.npz")) for s in SIMS):
        with open(saved) as f:
            raw = json.load(f)
        if (
            raw.get("lab") == os.path.abspath(lab_path)
            and raw.get("seed") == seed
            and raw.get("fit_seed", 2) == fit_seed
            and raw.get("yaw_weight") == YAW_LENGTH
        ):
            print(f"identification reused from {saved}", flush=True)
            return {s: (np.asarray(raw[s]["params"]), np.asarray(raw[s]["std"]), None, raw[s]["details"]) for s in SIMS}
    rec = cmaes.run_lab(SHAPE, lab_path, os.path.join(work, "fit.npz"), n=10, seed=fit_seed)
    methods = cmaes.identify_methods(SHAPE, rec, None, {}, seed=seed, yaw_weight=YAW_LENGTH)
    std = np.asarray(methods["clashx"][2]["std"], np.float64)
    out = {}
    for sim in SIMS:
        params, handler, details = methods[METHOD_OF[sim]]
        out[sim] = (np.asarray(params, np.float64), std, handler, details)
    record = {s: {"params": out[s][0].tolist(), "std": std.tolist(), "details": out[s][3]} for s in SIMS}
    meta = {"lab": os.path.abspath(lab_path), "seed": seed, "fit_seed": fit_seed, "yaw_weight": YAW_LENGTH}
    write_json(saved, record | meta)
    return out


def _sim_score(policy) -> tuple[float, float, float]:
    """How good a policy is in its own simulator (brax's last evaluation): success, then sub-goals, then return."""
    info = policy.info
    return (
        float(info.get("sim_success", float("-inf"))),
        float(info.get("sim_reached", float("-inf"))),
        float(policy.curve[-1][1]) if policy.curve else float("-inf"),
    )


def train_all(
    ident: dict, routes, config: PPOConfig, draws: int, work: str, seed: int, restarts: int = 1, train: bool = True
) -> tuple[dict, dict, dict]:
    """Tables and (with `train`) policies per simulator and route (reused from `work` when there).

    With `restarts` > 1, PPO runs with that many training seeds (seed + 1000 k) and the policy kept is the one
    that does best in its own simulator (`_sim_score`): a choice made in simulation, never in the lab.
    """
    tables, policies, runs = {}, {}, {}
    for sim in SIMS:
        params, std, handler, _ = ident[sim]
        t0 = time.perf_counter()
        tables[sim] = tabulate(
            sim, params, std, draws, handler=handler, model_name="bench", seed=seed,
            cache=os.path.join(work, f"table_{sim}.npz"),
        )  # fmt: skip
        print(f"{sim}: table of {tables[sim].draws} draws in {time.perf_counter() - t0:.0f} s", flush=True)
        for r in routes if train else ():
            candidates = []
            for k in range(restarts):
                folder = os.path.join(work, f"policy_{sim}_route{r}" + (f"_restart{k}" if k else ""))
                if os.path.exists(os.path.join(folder, "policy.json")):
                    candidates.append(load_policy(folder))
                    print(f"{sim} route {r}: reused {folder}", flush=True)
                    continue
                env = PushEnv(route(r), tables[sim], randomize=draws > 1)

                def progress(steps, m, sim=sim, r=r, k=k):
                    print(
                        f"  {sim} route {r} (training seed {seed + 1000 * k}): {steps:>9d} strikes, return "
                        f"{m['return']:.2f}, success {m['success']:.2f}, sub-goals {m['reached']:.2f}",
                        flush=True,
                    )

                pol = train_policy(env, dataclasses.replace(config, seed=seed + 1000 * k), progress=progress)
                save_policy(pol, folder)
                plot_curve(pol, os.path.join(folder, "curve.png"))
                candidates.append(pol)
                print(f"{sim} route {r}: {pol.info['env_steps']} strikes in {pol.info['wall_s']:.0f} s", flush=True)
            best = max(range(len(candidates)), key=lambda i: _sim_score(candidates[i]))
            policies[sim, r] = candidates[best]
            runs[sim, r] = [
                {"training_seed": c.config.seed, "sim_success": c.info.get("sim_success"),
                 "sim_reached": c.info.get("sim_reached"), "wall_s": c.info.get("wall_s"), "kept": i == best}
                for i, c in enumerate(candidates)
            ]  # fmt: skip
            print(
                f"{sim} route {r}: kept training seed {candidates[best].config.seed} of {len(candidates)}", flush=True
            )
    return tables, policies, runs


def planner_controller(table, r, config, seed):
    """The receding-horizon CMA-ES planner as a controller (a fresh key every strike)."""
    from clashx.pushing import Task

    count = [0]

    def act(task: Task, seen: np.ndarray) -> np.ndarray:
        count[0] += 1
        now = Task(pose=jnp.asarray(seen, jnp.float32), goal=task.goal, used=task.used, draw=task.draw)
        a, _ = plan_strike(table, r, now, config, key=jax.random.PRNGKey(seed * 100_003 + count[0]))
        return np.asarray(a)

    return act


def make_controller(ctrl: str, sim: str, r, tables, policies, seed: int):
    """The controller `ctrl` over simulator `sim` for route `r` (a fresh one per episode)."""
    if ctrl == "policy":
        return policy_controller(policies[sim, r.number], r)
    if ctrl == "planner":
        return planner_controller(tables[sim], r, PlannerConfig(), seed)
    adapt = ctrl == "search-adapt"
    key = (sim, adapt, r.number)
    if key not in _VALUES:  # the cost-to-go is the same for the simulation and the lab episodes
        t0 = time.perf_counter()
        _VALUES[key] = route_value(tables[sim], prior_belief(tables[sim], identified_only=not adapt), r, SearchConfig())
        print(f"  cost-to-go of route {r.number}, {ctrl} in {sim}: {time.perf_counter() - t0:.0f} s", flush=True)
    return SearchController(tables[sim], r, adapt=adapt, value=_VALUES[key])


_VALUES: dict = {}  # (simulator, adapting, route) -> the search's cost-to-go


def wilson(k: int, n: int) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate k / n."""
    if n == 0:
        return 0.0, 1.0
    z, p = 1.959964, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(centre - half, 0.0)), float(min(centre + half, 1.0))


def mcnemar(a: list[bool], b: list[bool]) -> dict:
    """Exact McNemar test of paired successes: a-only and b-only episodes, two-sided p (binomial, 1/2)."""
    from math import comb

    only_a = sum(x and not y for x, y in zip(a, b))
    only_b = sum(y and not x for x, y in zip(a, b))
    n, k = only_a + only_b, min(only_a, only_b)
    p = min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0
    return {"only_clashx": only_a, "only_mujoco": only_b, "p": p}


def score(eps: list[dict], r) -> dict:
    """Table VII's SR and SGCR of episodes, the SR's interval, and what each episode did."""
    out = table_vii([e["reached"] for e in eps], [e["success"] for e in eps], r.n_goals)
    k = sum(bool(e["success"]) for e in eps)
    needed = [e["strikes_needed"] for e in eps if "strikes_needed" in e]
    feasible = {"feasible": int(sum(n <= r.budget for n in needed)), "strikes_needed": needed} if needed else {}
    return (
        out
        | feasible
        | {
            "sr_ci95": wilson(k, len(eps)),
            "success": [bool(e["success"]) for e in eps],
            "strikes": [e["strikes"] for e in eps],
            "out": int(sum(e["out"] for e in eps)),
            "paths": [e["poses"].tolist() for e in eps],
            "plans": [e.get("plan") for e in eps],
        }
    )


def episodes(ctrl_name, sim, r, yaws, tables, policies, seed, rig_of) -> list[dict]:
    """One episode per start yaw on the rigs `rig_of(i, yaw)` gives; a search controller's first plan is kept."""
    act = make_controller(ctrl_name, sim, r, tables, policies, seed)
    eps = []
    for i, yaw in enumerate(yaws):
        if isinstance(act, SearchController):
            act.reset()
        strike, close = rig_of(i, yaw)
        try:
            e = run_episode(act, strike, r, np.array([0.0, 0.0, yaw]))
        finally:
            close()
        if isinstance(act, SearchController) and act.plans:
            first = act.plans[0]
            e["plan"] = [[0.0, 0.0, float(yaw)]] + first[np.isfinite(first[:, 0])].tolist()
            start = jnp.asarray([0.0, 0.0, yaw], jnp.float32)
            e["strikes_needed"] = float(route_strikes_left(act.value, r, jnp.asarray(0), start))
        eps.append(e)
    return eps


def play(where: str, rig_for, tables, policies, routes, n: int, controllers, seed) -> dict:
    """`n` episodes per route, controller and simulator on the rigs `rig_for(sim, ctrl)(i, yaw)` gives.

    Returns {route: {sim: {controller: score}}, and "paired_<controller>": clashx against MuJoCo on the same
    start yaws (exact McNemar)}.
    """
    out: dict = {}
    for rn in routes:
        r, yaws = route(rn), evaluation_yaws(rn, n)
        out[rn] = {}
        for sim in SIMS:
            out[rn][sim] = {}
            for ctrl in controllers:
                t0 = time.perf_counter()
                res = score(episodes(ctrl, sim, r, yaws, tables, policies, seed, rig_for(sim, ctrl)), r)
                res["eval_s"] = time.perf_counter() - t0
                out[rn][sim][ctrl] = res
                lo, hi = res["sr_ci95"]
                can = f"; {res['feasible']}/{n} starts can finish in the model" if "feasible" in res else ""
                print(
                    f"{where}, route {rn}, {ctrl} in {sim}: SR {res['sr_text']} [{lo:.2f}, {hi:.2f}], "
                    f"SGCR {res['sgcr_text']} ({res['eval_s']:.0f} s{can})",
                    flush=True,
                )
        for ctrl in controllers:
            out[rn][f"paired_{ctrl}"] = mcnemar(out[rn]["clashx"][ctrl]["success"], out[rn]["mujoco"][ctrl]["success"])
    return out


def in_simulation(tables, policies, routes, n: int, controllers, seed) -> dict:
    """Each controller on its own simulator's table (module docstring, 5), as `play` returns it."""

    def rig_for(sim, ctrl):
        k = tables[sim].draws

        def rig_of(i, yaw):
            draw = 1 + i % (k - 1) if ctrl == "search-adapt" and k > 1 else 0
            return table_rig(tables[sim], draw, np.array([0.0, 0.0, yaw])), lambda: None

        return rig_of

    return play("in simulation", rig_for, tables, policies, routes, n, controllers, seed)


def evaluate(lab_mod, lab_path, tables, policies, routes, n: int, controllers, seed) -> dict:
    """Closed-loop episodes in the lab (module docstring, 6), as `play` returns them."""
    lab_params = lab_mod.LabParams.load(lab_path)

    def rig_of(i, yaw):
        lab = lab_mod.Lab(SHAPE, lab_params, start=(0.0, 0.0, float(yaw)))
        return lab.strike, lab.close

    return play("lab", lambda sim, ctrl: rig_of, tables, policies, routes, n, controllers, seed)


def rest_pose_check(lab_path: str, tables, work: str, n: int) -> dict:
    """Each simulator's rest-pose error on `n` fresh lab strikes (seed 11), through its table at draw 0."""
    from clashx.optimize import pose_error, to_start_frame
    from clashx.scenes import geometry as geo

    rec = cmaes.run_lab(SHAPE, lab_path, os.path.join(work, "check.npz"), n=n, seed=11)
    ok = rec["touched"].astype(bool)
    lo, hi = np.asarray(geo.STRIKE_LOW), np.asarray(geo.STRIKE_HIGH)
    act = jnp.asarray(2.0 * (rec["strike"][ok] - lo) / (hi - lo) - 1.0, jnp.float32)
    seen = jnp.stack([to_start_frame(f, s) for f, s in zip(rec["final_pose"][ok], rec["start_pose"][ok])])
    out = {"strikes": int(ok.sum())}
    for sim in SIMS:
        pred = jax.vmap(lambda a, sim=sim: lookup(tables[sim], jnp.asarray(0), a))(act)
        pos, yaw = pose_error(pred, seen)
        out[sim] = {"pos_median_m": float(jnp.median(pos)), "yaw_median_rad": float(jnp.median(yaw))}
    print(
        f"rest-pose error on {out['strikes']} fresh lab strikes (median): "
        + ", ".join(f"{s} {1000 * out[s]['pos_median_m']:.1f} mm / {out[s]['yaw_median_rad']:.3f} rad" for s in SIMS),
        flush=True,
    )
    return out


def table_text(result: dict, routes, controllers) -> str:
    """CLASH Table VII's layout: a row per controller and simulator, SR [95 % interval] and SGCR per route."""
    head = "| controller, trained / planned in | " + " | ".join(f"route {r} SR | route {r} SGCR" for r in routes)
    lines = [head + " |", "|---|" + "---|---|" * len(routes)]
    for ctrl in controllers:
        for sim in SIMS:
            cells = []
            for r in routes:
                res = result[r][sim][ctrl]
                lo, hi = res["sr_ci95"]
                cells.append(f"{res['sr_text']} [{lo:.2f}, {hi:.2f}] | {res['sgcr_text']}")
            lines.append(f"| {ctrl}, {sim} | " + " | ".join(cells) + " |")
        if all(f"paired_{ctrl}" in result[r] for r in routes):
            cells = []
            for r in routes:
                m = result[r][f"paired_{ctrl}"]
                cells.append(f"clashx only {m['only_clashx']}, MuJoCo only {m['only_mujoco']} | p = {m['p']:.2f}")
            lines.append(f"| {ctrl}: paired (McNemar) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_paths(result: dict, routes, controllers, path: str) -> None:
    """Each route's lab episodes over the corridor and sub-goals, one panel per controller and simulator.

    Solid: what the lab did; dashed (search controllers): the route planned before the first strike.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = [(c, s) for c in controllers for s in SIMS]
    fig, axes = plt.subplots(len(routes), len(cols), figsize=(4.2 * len(cols), 2.6 * len(routes)), squeeze=False)
    for i, rn in enumerate(routes):
        r = route(rn)
        goals = np.asarray(r.goals)
        for j, (ctrl, sim) in enumerate(cols):
            ax = axes[i, j]
            lo, hi = SAFE_LOW, SAFE_HIGH
            ax.add_patch(plt.Rectangle(lo, hi[0] - lo[0], hi[1] - lo[1], fill=False, ls="--", color="0.5"))
            res = result[rn][sim][ctrl]
            for k, p in enumerate(res["paths"]):
                p = np.asarray(p)
                line = ax.plot(p[:, 0], p[:, 1], "-", lw=0.8, alpha=0.7)[0]
                ax.plot(p[-1, 0], p[-1, 1], "k.", ms=3)
                plan = res["plans"][k]
                if plan is not None and k < 3:
                    q = np.asarray(plan)
                    ax.plot(q[:, 0], q[:, 1], "--", lw=0.8, color=line.get_color(), alpha=0.9)
            for k, g in enumerate(goals):
                ax.add_patch(plt.Circle(g[:2], GOAL_TOL, color="tab:red", alpha=0.25))
                ax.annotate(str(k + 1), g[:2], ha="center", va="center", fontsize=7)
            ax.set_xlim(lo[0] - 0.05, hi[0] + 0.05)
            ax.set_ylim(lo[1] - 0.05, hi[1] + 0.05)
            ax.set_aspect("equal")
            ax.set_title(f"route {rn}, {ctrl} ({sim}): SR {res['sr_text']}", fontsize=8)
            ax.tick_params(labelsize=6)
    fig.suptitle(
        "solid: the lab's paths; dashed: the route planned before the first strike (first 3 episodes)", fontsize=8
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lab", default=str(cmaes.LAB_DIR / "lab_a.json"), help="the lab's JSON (handed to the lab only)")
    ap.add_argument("--routes", default="1,2,3")
    ap.add_argument("--episodes", type=int, default=20, help="lab episodes per route")
    ap.add_argument("--sim-episodes", type=int, default=20, help="episodes per route in simulation (0: none)")
    ap.add_argument("--check-strikes", type=int, default=60, help="fresh lab strikes for the rest-pose error (0: none)")
    ap.add_argument("--timesteps", type=int, default=3_000_000, help="PPO strikes per policy")
    ap.add_argument("--draws", type=int, default=8, help="parameter draws: domain randomisation and adaptation")
    ap.add_argument(
        "--restarts", type=int, default=1, help="PPO training seeds per policy; the best in simulation is kept"
    )
    ap.add_argument("--controllers", default="search,search-adapt", help=f"some of {','.join(CONTROLLERS)}")
    ap.add_argument("--work", default="bench-pushing", help="folder for the fit recording, tables and policies")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fit-seed", type=int, default=2, help="strike_lab.py --seed of the ten fit strikes")
    ap.add_argument("--quick", action="store_true", help="route 1, 3 episodes, 2 draws, search-adapt only")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    a = ap.parse_args()
    if a.quick:
        a.routes, a.episodes, a.sim_episodes, a.draws, a.check_strikes = "1", 3, 3, 2, 10
        a.controllers = "search-adapt"
    routes = [int(v) for v in a.routes.split(",")]
    for rn in routes:
        route(rn)
    controllers = [c for c in a.controllers.split(",") if c]
    bad = [c for c in controllers if c not in CONTROLLERS]
    if bad:
        raise SystemExit(f"--controllers: unknown {bad}; expected some of {', '.join(CONTROLLERS)}")
    if "search-adapt" in controllers and a.draws < 2:
        raise SystemExit("--controllers search-adapt: adaptation weighs the table's draws; use --draws 2 or more")
    if not os.path.exists(a.lab):
        raise SystemExit(f"--lab {a.lab}: no such file")
    os.makedirs(a.work, exist_ok=True)
    lab_mod = load_lab_module()
    print(f"device: {jax.devices()[0].platform}, {os.cpu_count()} CPUs; lab {a.lab}", flush=True)

    t0 = time.perf_counter()
    ident = identify(a.lab, a.work, a.seed, a.fit_seed)
    ident_s = time.perf_counter() - t0
    for sim in SIMS:
        print(f"{sim} identified: {np.round(ident[sim][0], 4).tolist()}", flush=True)

    config = PPOConfig(timesteps=a.timesteps, seed=a.seed)
    t0 = time.perf_counter()
    train = "policy" in controllers
    tables, policies, runs = train_all(ident, routes, config, a.draws, a.work, a.seed, a.restarts, train)
    train_s = time.perf_counter() - t0
    sim_result = in_simulation(tables, policies, routes, a.sim_episodes, controllers, a.seed) if a.sim_episodes else {}
    check = rest_pose_check(a.lab, tables, a.work, a.check_strikes) if a.check_strikes else None
    result = evaluate(lab_mod, a.lab, tables, policies, routes, a.episodes, controllers, a.seed)
    text = table_text(result, routes, controllers)
    print(text)
    if sim_result:
        print("in simulation (each controller on its own simulator's table):")
        print(table_text(sim_result, routes, controllers))
    print(f"identification {ident_s:.0f} s; tables and training {train_s:.0f} s in all (this run)")
    cost = {}
    if train:
        cost = {
            f"{sim}_route{r}": {
                k: policies[sim, r].info.get(k)
                for k in ("env_steps", "wall_s", "first_eval_s", "sim_success", "sim_reached")
            }
            for sim in SIMS
            for r in routes
        }
        every = sum(x["wall_s"] or 0.0 for v in runs.values() for x in v)
        print(f"training every policy of every restart: {every:.0f} s")
        for k, v in cost.items():
            print(
                f"  {k}: {v['env_steps']} strikes, {v['wall_s']:.0f} s; in simulation: success "
                f"{v.get('sim_success', float('nan')):.2f}, sub-goals {v.get('sim_reached', float('nan')):.2f} "
                "per episode"
            )

    def slim(res: dict) -> dict:
        return {
            str(r): {k: ({c: {f: x for f, x in v[c].items() if f not in ("paths", "plans")} for c in controllers}
                         if k in SIMS else v) for k, v in res[r].items()}
            for r in routes
        }  # fmt: skip

    if a.json:
        write_json(
            a.json,
            {
                "routes": slim(result),
                "in_simulation": slim(sim_result) if sim_result else None,
                "rest_pose_check": check,
                "paths": {str(r): {sim: {c: result[r][sim][c]["paths"] for c in controllers} for sim in SIMS}
                          for r in routes},
                "plans": {str(r): {sim: {c: result[r][sim][c]["plans"] for c in controllers} for sim in SIMS}
                          for r in routes},
                "training": cost,
                "restarts": {f"{sim}_route{r}": runs[sim, r] for sim in SIMS for r in routes} if train else {},
                "identified": {sim: {"params": ident[sim][0].tolist(), "std": ident[sim][1].tolist()} for sim in SIMS},
                "identify_s": ident_s,
                "train_s": train_s,
                "config": dataclasses.asdict(config) | {"draws": a.draws, "fit_seed": a.fit_seed},
                "lab": os.path.abspath(a.lab),
                "table": text,
            },
        )  # fmt: skip
    if a.plot:
        plot_paths(result, routes, controllers, a.plot)


if __name__ == "__main__":
    main()

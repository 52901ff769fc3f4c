"""Trajectory errors of simulated cube tosses against recorded ones, and fitting contact parameters to them.

Errors (the bench's and the demo's, `trajectory_errors`)
----------------------------------------------------------
A recorded toss has frames k = 0 … K−1 at 148 Hz from its first frame; a
simulator rolls it out from the toss's initial state (the free-flight fit of
its flight frames, `clashx.events._ingest_cube`) over the same frames.  With w the
cube's width (0.1048 m):

- position error of a toss: mean over k of ‖p_sim(k) − p_real(k)‖ / w, in %;
- at rest: the same at the last frame k = K − 1 (every toss ends at rest);
- rotation error of a toss: mean over k of the angle of R_sim(k)ᵀ R_real(k), in degrees;
- the same two averaged over the first H frames only, H in HORIZONS (40 and 80:
  dair_pll, whose tosses these are, slices them into 80-step trajectories; the
  shipped tosses are 85 to 139 frames long, median 105);

and a method's figure is the mean (± std) of the tosses' errors.

Fitting
-------
The trajectory residual of a toss stacks, for every frame after the fitted
stretch's start, (p_sim − p_real) / w and the rotation vector of
q_realᵀ ⊗ q_sim (rad), divided by √(frames) so each toss weighs the same.
Two fitters use it:

- `identify_sysid`: MuJoCo C rollouts, `mujoco.sysid.optimize` (MuJoCo's
  least-squares with finite-difference Jacobians) over the prior's unit cube;
- `identify_trajectory_mjx`: Levenberg-Marquardt on forward-mode Jacobians
  through MJX in float64 (the strike's `identify_mjx`, on trajectories).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import (
    Array,
    Float,
    ParamSpace,
    PRNGKeyArray,
    as_float64,
    levenberg_marquardt,
    quat_conj,
    quat_log,
    quat_mul,
    quat_to_mat,
)
from ..core import batch as _batch
from ..hybrid import hybrid_tosses, rest_rollout
from ..optimize import cmaes_in_box
from ..scenes import (
    CUBE_INERTIA,
    CUBE_MASS,
    FRAME_DT,
    HALF,
    WINDOW,
    TossScene,
    rigid_cube_window,
    rigid_from_unit,
)

WIDTH = 2 * HALF  # m
HORIZONS = (40, 80)  # frames from the first: the errors' short horizons (beside the whole recording)
_Z_MAX = 4.0  # logits stay in [-4, 4] (see `_baselines._Z_MAX`)


# --- errors ---------------------------------------------------------------------------------------


def rotation_angle_deg(qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """Angle (degrees) of the rotation between unit quaternions qa and qb, (..., 4) -> (...)."""
    d = np.abs(np.sum(np.asarray(qa) * np.asarray(qb), -1))
    return np.degrees(2 * np.arccos(np.clip(d, 0.0, 1.0)))


def toss_errors(sim_track: np.ndarray, real_track: np.ndarray) -> dict:
    """Errors of one toss (module docstring): sim_track (≥ K, 13), real_track (K, 13)."""
    k = len(real_track)
    s = np.asarray(sim_track)[:k]
    pos = 100 * np.linalg.norm(s[:, 4:7] - real_track[:, 4:7], axis=1) / WIDTH
    rot = rotation_angle_deg(s[:, 0:4], real_track[:, 0:4])
    out = {"pos_pct": float(pos.mean()), "rest_pct": float(pos[-1]), "rot_deg": float(rot.mean())}
    for h in HORIZONS:
        out[f"pos_pct_{h}"], out[f"rot_deg_{h}"] = float(pos[:h].mean()), float(rot[:h].mean())
    return out


def trajectory_errors(sim_tracks, real_tracks: list[np.ndarray]) -> dict:
    """Mean and std over tosses of `toss_errors`; sim_tracks (n, ≥ K_max, 13) or a list."""
    per = [toss_errors(s, r) for s, r in zip(sim_tracks, real_tracks, strict=True)]
    out = {}
    for key in per[0]:
        v = np.array([p[key] for p in per])
        out[key + "_mean"], out[key + "_std"] = float(v.mean()), float(v.std())
    out["n"] = len(per)
    return out


# --- MuJoCo C rollouts ------------------------------------------------------------------------------


def rollout_c(
    sim: TossScene,
    states0: np.ndarray,
    params: np.ndarray,
    n_frames: int,
    *,
    space: ParamSpace | None = None,
    nthread: int = 0,
) -> np.ndarray:
    """Tosses on MuJoCo C from `states0` (n, 13) at t = 0, frames 0 … n_frames − 1: (n, n_frames, 13).

    `params` is one set of `space` (default `sim.space`) for all or (n, p); a space that also writes the
    cube's inertia (`cube_space(inertia=True)`) gets the model prepared for it.  The plain rollout of
    `_toss.simulate_tosses_c` without the event rule (fast enough for a fitter's inner loop).
    """
    states0 = np.asarray(states0, np.float64)
    n = len(states0)
    space = sim.space if space is None else space
    params = np.broadcast_to(np.asarray(params, np.float64), (n, space.size))
    model = space.prepare(sim.mj_model())
    batch = _batch.make_batch(model, space, space.rows(model), params, nsim=n, nthread=nthread)
    k = sim.substeps
    qpos0, qvel0 = np.c_[states0[:, 4:7], states0[:, 0:4]], np.c_[states0[:, 10:13], states0[:, 7:10]]
    rec = _batch.rollout(batch, qpos0, qvel0, k * (n_frames - 1), record=("qpos", "qvel"))
    qpos, qvel = rec["qpos"][:, k - 1 :: k], rec["qvel"][:, k - 1 :: k]
    after = np.concatenate([qpos[..., 3:7], qpos[..., 0:3], qvel[..., 3:6], qvel[..., 0:3]], -1)
    return np.concatenate([states0[:, None], after], 1)


# --- trajectory residuals -------------------------------------------------------------------------


def pad_tracks(tracks: list[np.ndarray], n_frames: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Tracks stacked to (n, n_frames, 13) (the last frame repeated) and their validity mask (n, n_frames)."""
    n_frames = n_frames or max(len(t) for t in tracks)
    out = np.zeros((len(tracks), n_frames, 13))
    mask = np.zeros((len(tracks), n_frames), bool)
    for i, t in enumerate(tracks):
        k = min(len(t), n_frames)
        out[i, :k], out[i, k:] = t[:k], t[k - 1]
        mask[i, :k] = True
    return out, mask


def _frame_residual(sim_state, real_state):
    rel = quat_mul(quat_conj(real_state[0:4]), sim_state[0:4] / jnp.linalg.norm(sim_state[0:4]))
    return jnp.concatenate([(sim_state[4:7] - real_state[4:7]) / WIDTH, quat_log(rel)])


@jax.jit  # called per candidate on the host by the fitters: op by op it cost ~0.1 s a call
def trajectory_residuals(sim_tracks, real_tracks, mask) -> Float[Array, "r"]:
    """Residual vector (module docstring) of tosses (n, F, 13) against (n, F, 13) where `mask` (n, F) holds."""
    sim_tracks = jnp.asarray(sim_tracks)
    r = jax.vmap(jax.vmap(_frame_residual))(sim_tracks, jnp.asarray(real_tracks, sim_tracks.dtype))
    m = jnp.asarray(mask, r.dtype)
    w = m / jnp.sqrt(jnp.maximum(m.sum(1, keepdims=True), 1.0) * m.shape[0])
    return (r * w[..., None]).reshape(-1)


# --- mujoco.sysid on MuJoCo C ---------------------------------------------------------------------


def identify_sysid(
    sim: TossScene,
    initial_states: np.ndarray,
    tracks: list[np.ndarray],
    *,
    starts: tuple[tuple[float, float, float], ...] = ((0.15, 0.02, 1.0), (0.325, 0.00894, 1.05), (0.3, 0.01, 0.5)),
    max_iters: int = 30,
) -> tuple[np.ndarray, float]:
    """Identify (μ, time constant, damping ratio) with `mujoco.sysid.optimize` on MuJoCo C trajectories.

    The unknowns are the prior's unit-cube coordinates (bounds [0, 1], so the
    log-scaled time constant is searched in log space); the residual is
    `trajectory_residuals` of C rollouts from the recorded initial states.
    The trajectory cost is piecewise smooth in the parameters (contacts
    switch), so the fit stops at kinks: several starts (the nominal values, the
    prior's centre, one more) each run MuJoCo's least squares
    (`optimizer="mujoco"`, finite-difference Jacobian); the lowest cost wins.

    Returns:
        (params (3,), cost = ‖residual‖²).
    """
    from mujoco import sysid  # needs mujoco's sysid extra (absl-py, scipy, tabulate)

    real, mask = pad_tracks(tracks)
    n_frames = real.shape[1]
    space = sim.space

    def residual_fn(x, _params):
        # mujoco.minimize asks for several points at once (x of shape (3, k)) to difference the
        # Jacobian; they run as one MuJoCo C batch of k × tosses
        x = np.asarray(x, np.float64)
        cols = x.reshape(3, -1).T
        p = np.asarray(space.from_unit(jnp.asarray(np.clip(cols, 0.0, 1.0))), np.float64)
        n = len(initial_states)
        tracks = rollout_c(sim, np.tile(initial_states, (len(p), 1)), np.repeat(p, n, 0), n_frames)
        r = [
            np.asarray(trajectory_residuals(tracks[j * n : (j + 1) * n], real, mask), np.float64) for j in range(len(p))
        ]
        out = np.stack(r, 1)
        return [out if x.ndim == 2 else out[:, 0]], None, None

    best, best_cost = None, math.inf
    for start in starts:
        u0 = np.clip(np.asarray(space.to_unit(jnp.asarray(start, jnp.float32)), np.float64), 0.01, 0.99)
        pdict = sysid.ParameterDict({"unit": sysid.Parameter("unit", u0, np.zeros(3), np.ones(3))})
        opt, _ = sysid.optimize(
            pdict, residual_fn, optimizer="mujoco", verbose=False, max_iters=max_iters, eps=1e-3, output=io.StringIO()
        )
        x = opt.as_vector()
        r = residual_fn(x, None)[0][0]
        cost = float(r @ r)
        if cost < best_cost:
            best, best_cost = x, cost
    return np.asarray(space.from_unit(jnp.asarray(best)), np.float64), best_cost


# --- Levenberg-Marquardt through MJX (forward mode, float64) --------------------------------------


@eqx.filter_jit
def _mjx_terms(sim: TossScene, starts, t_starts, real, mask, z):
    """Residuals (s, m) and their Jacobians (s, m, 3) w.r.t. the logits z (s, 3), by forward mode through
    `rest_rollout` (every start of the search in one batch of s × tosses worlds)."""

    def res(z):
        p = sim.space.from_unit(jax.nn.sigmoid(z))
        tracks = jax.vmap(lambda s, t: rest_rollout(sim, s, t, p, real.shape[1]))(starts, t_starts)
        return trajectory_residuals(tracks, real, mask)

    def both(z):
        r = res(z)
        return r, r  # the residuals once: the primal of the forward pass is the aux

    def one(z):
        jac, r = jax.jacfwd(both, has_aux=True)(z)
        return r, jac

    return jax.vmap(one)(z)  # every start of the search at once


def identify_trajectory_mjx(
    sim: TossScene,
    starts: np.ndarray,
    t_starts: np.ndarray,
    tracks: list[np.ndarray],
    *,
    key: PRNGKeyArray,
    n_starts: int = 2,
    iterations: int = 8,
    damping: float = 1e-2,
    init: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Fit (μ, time constant, damping ratio) to recorded frames by Levenberg-Marquardt through MJX (float64).

    Each toss is rolled out on MJX from `starts[i]` at time `t_starts[i]`
    (the initial state at 0 for a plain MJX fit; the surrogate's post-impact
    state for clashx's rest phase); frames before `t_starts[i]` are left out
    of the residual.  The unknowns are logits of the prior's unit cube
    (clipped to ±4), the Jacobian comes from `jax.jacfwd` through MJX's
    solver in float64 (float32 tangents are unreliable, `clashx.core._mjx.as_float64`).
    A step solves (JᵀJ + λ diag(JᵀJ) + λ 1e-6) δ = −Jᵀr, kept if the cost drops
    (λ /= 3), else refused (λ *= 4).  The first start is `init` (physical
    units; default the prior's centre), the others are drawn from `key`.

    Returns:
        (params (3,), cost = ‖residual‖²).
    """
    real, mask = pad_tracks(tracks)
    t = np.arange(real.shape[1]) * FRAME_DT
    mask = mask & (t[None] >= np.asarray(t_starts)[:, None])
    u_rand = np.asarray(jax.random.uniform(key, (n_starts - 1, 3), minval=0.1, maxval=0.9), np.float64)
    first = np.full((1, 3), 0.5) if init is None else np.asarray(sim.space.to_unit(jnp.asarray(init)))[None]
    u0 = np.concatenate([np.clip(first, 0.02, 0.98), u_rand])
    best: np.ndarray = np.zeros(3)  # logits of the prior's centre until a start beats it
    best_cost = math.inf
    with jax.enable_x64(True):
        sim64 = as_float64(sim)
        args = (
            jnp.asarray(starts, jnp.float64),
            jnp.asarray(t_starts, jnp.float64),
            jnp.asarray(real),
            jnp.asarray(mask),
        )

        def terms(z):
            r, j = _mjx_terms(sim64, *args, jnp.asarray(z, jnp.float64))
            return np.asarray(r), np.asarray(j)

        zs, costs, _ = levenberg_marquardt(
            terms, np.log(u0 / (1 - u0)), iterations=iterations, damping=damping, z_max=_Z_MAX
        )
        i = int(np.argmin(costs))
        if costs[i] < best_cost:
            best, best_cost = zs[i], float(costs[i])
    return np.asarray(sim.space.from_unit(jnp.asarray(1 / (1 + np.exp(-best)))), np.float64), best_cost


def fit_between_impacts(
    sim: TossScene,
    impact: Callable,
    initial_states: Float[np.ndarray, "n 13"],
    params: Float[np.ndarray, "p"],
    tracks: list[np.ndarray],
    rest0: Float[np.ndarray, "3"],
    *,
    key: PRNGKeyArray,
    population: int = 8,
    generations: int = 6,
    std_init: float = 0.1,
    impact_box: tuple[Callable, Callable] | None = None,
) -> tuple[np.ndarray, float, np.ndarray]:
    """MJX's contact parameters between impacts, refit on whole recorded tosses through the every-impact hybrid.

    CMA-ES (`clashx.optimize.cmaes_in_box`, the prior's unit cube, started at
    `rest0`) on the squared trajectory residuals (`clashx.baselines._cube_fit.trajectory_residuals`:
    position in cube widths and rotation, every recorded frame) of the tosses
    rolled out from `initial_states` by `hybrid_toss_every` with `impact` at `params`
    (a `CubeSurrogate`, or the rigid law `clashx.scenes.rigid_cube_window`).  The rest
    parameters are `sim.space`'s.  Each generation is one batched rollout of population × tosses.

    With `impact_box` = (from_unit, to_unit) of the handler's parameters, those are searched too,
    jointly with the rest parameters (one unit box, started at (`params`, `rest0`)): the impact law
    is then fitted to the whole tosses, not only to its impacts.

    Returns:
        (rest params (3,), their cost, the best cost of each generation); `rest0`
        itself competes, so the cost never exceeds its.  With `impact_box`, the params are
        (impact params (p,), rest params (3,)) concatenated.
    """

    real, mask = pad_tracks(tracks)
    n, n_frames = mask.shape
    states = np.asarray(initial_states, np.float64)

    p_imp = np.asarray(params, np.float64)
    n_imp = 0 if impact_box is None else len(p_imp)

    def split(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rest = np.asarray(sim.space.from_unit(jnp.asarray(u[:, n_imp:])), np.float64)
        if impact_box is None:
            return np.broadcast_to(p_imp, (len(u), len(p_imp))), rest
        return np.asarray(impact_box[0](jnp.asarray(u[:, :n_imp])), np.float64), rest

    def losses(u: np.ndarray) -> np.ndarray:
        imp, rest = split(u)
        k = len(u)
        frames = hybrid_tosses(
            sim,
            impact,
            np.tile(states, (k, 1)),
            np.repeat(imp, n, 0),
            n_frames,
            rest_params=np.repeat(rest, n, 0),
            every_impact=True,
            block=k * n,
        ).frames.reshape(k, n, n_frames, 13)
        return np.array([float(jnp.sum(trajectory_residuals(f, real, mask) ** 2)) for f in frames])

    u0 = np.clip(np.asarray(sim.space.to_unit(jnp.asarray(rest0)), np.float64), 0.02, 0.98)
    if impact_box is not None:
        u0 = np.concatenate([np.clip(np.asarray(impact_box[1](jnp.asarray(p_imp)), np.float64), 0.02, 0.98), u0])
    # the start in a batch of the generations' shape: one compiled rollout for all (a batch of one compiled
    # apart took 7.6 s on 2 CPU cores, the padded batch 2.7 s)
    start = (u0, float(losses(np.repeat(u0[None], population, 0))[0]))
    u, cost, history = cmaes_in_box(
        losses, u0, key=key, population=population, generations=generations, std_init=std_init, best=start
    )
    imp, rest = split(np.asarray(u, np.float64)[None])
    return (rest[0] if impact_box is None else np.concatenate([imp[0], rest[0]])), cost, history


GYRATION = math.sqrt(CUBE_INERTIA / CUBE_MASS)  # m: the cube's radius of gyration r = √(I/m)


def speed_vector(state: Float[Array, "13"]) -> Float[Array, "6"]:
    """One toss state (13,) -> its speed vector (v, r ω world) (6,), in JAX (differentiable), r = `GYRATION`."""
    w_world = quat_to_mat(state[:4]) @ state[7:10]
    return jnp.concatenate([state[10:13], GYRATION * w_world])


def with_speed_vector(state: Float[Array, "13"], u: Float[Array, "6"]) -> Float[Array, "13"]:
    """`state` (13,) with its velocities set from a speed vector u = (v, r ω world) (6,): `speed_vector`'s
    inverse at the same pose, in JAX, in `state`'s dtype."""
    state = jnp.asarray(state)
    w_body = quat_to_mat(state[:4]).T @ (u[3:] / GYRATION)
    return state.at[7:10].set(w_body.astype(state.dtype)).at[10:13].set(u[:3].astype(state.dtype))


def speed_vectors(states: Float[np.ndarray, "... 13"]) -> np.ndarray:
    """Toss states (..., 13) -> speed vectors (..., 6) (`speed_vector`, in float64), m/s."""
    states = np.asarray(states, np.float64)
    with jax.enable_x64(True):
        u = np.asarray(jax.vmap(speed_vector)(jnp.asarray(states.reshape(-1, 13))), np.float64)
    return u.reshape(*states.shape[:-1], 6)


def impact_speed_errors(pred: Float[np.ndarray, "... 13"], real: Float[np.ndarray, "n 13"]) -> np.ndarray:
    """Relative errors ‖u_pred − u_real‖ / ‖u_real‖ of the speed vectors (`speed_vectors`); `pred` may carry
    leading axes (candidates)."""
    u_p, u_r = speed_vectors(pred), speed_vectors(real)
    return np.linalg.norm(u_p - u_r, axis=-1) / np.maximum(np.linalg.norm(u_r, axis=-1), 1e-12)


@eqx.filter_jit
def _posts(impact, pre, params):
    return jax.vmap(lambda p: jax.vmap(lambda s: impact(s, p))(pre))(params)


def impact_posts(
    impact: Callable, pre: Float[np.ndarray, "n 13"], params: Float[np.ndarray, "p"] | Float[np.ndarray, "k p"]
) -> np.ndarray:
    """The post-window states (k, n, 13) of impacts `pre` under a handler at k parameter vectors (one jitted call).

    `impact` is any handler of the hybrid rule, `(pre_state (13,), params) -> state WINDOW later`: a
    `CubeSurrogate` or the rigid law `clashx.scenes.rigid_cube_window`; `params` (p,) gives k = 1.
    """
    pre_j = jnp.asarray(pre, jnp.float32)
    return np.asarray(_posts(impact, pre_j, jnp.asarray(np.atleast_2d(params), jnp.float32)), np.float64)


def mujoco_windows_c(
    sim: TossScene,
    space: ParamSpace,
    pre: Float[np.ndarray, "n 13"],
    params: Float[np.ndarray, "k p"],
    nthread: int = 0,
) -> np.ndarray:
    """MuJoCo C's post-window states (k, n, 13) of impacts `pre` at k parameter vectors of `space`.

    Each impact's pre-impact state is rolled out (`rollout_c`, one batch of k × n worlds) for the impact
    window (`WINDOW`, whole frames: the surrogate's and the rigid law's); `space` may be
    `cube_space(inertia=True)`.
    """
    pre = np.asarray(pre, np.float64)
    params = np.atleast_2d(np.asarray(params, np.float64))
    k, n = len(params), len(pre)
    frames = int(round(WINDOW / FRAME_DT)) + 1
    tracks = rollout_c(sim, np.tile(pre, (k, 1)), np.repeat(params, n, axis=0), frames, space=space, nthread=nthread)
    return tracks[:, -1].reshape(k, n, 13)


def _identify_impacts(name: str, posts: Callable, from_unit: Callable, dim: int, pre, post, *, key: PRNGKeyArray,
                      population: int, generations: int, restarts: int) -> tuple[np.ndarray, float]:  # fmt: skip
    """CMA-ES (`clashx.optimize.cmaes_in_box`, `restarts` searches from the box's centre, one batch per generation)
    over a handler's unit box on the mean relative error of the speed vectors `WINDOW` after contact
    (`impact_speed_errors`); `posts(pre, params (k, p)) -> (k, n, 13)`."""
    pre, post = np.asarray(pre, np.float64), np.asarray(post, np.float64)
    if len(pre) == 0 or pre.shape != post.shape or pre.shape[1:] != (13,):
        raise ValueError(f"{name}: pre {pre.shape} and post {post.shape} must both be (n ≥ 1, 13)")

    def losses(u: np.ndarray) -> np.ndarray:
        return impact_speed_errors(posts(pre, from_unit(u)), post).mean(-1)

    u, loss, _ = cmaes_in_box(
        losses, np.full(dim, 0.5), key=key, population=population, generations=generations, std_init=0.25,
        restarts=restarts,
    )  # fmt: skip
    return np.asarray(from_unit(u), np.float64), float(loss)


def identify_mujoco_impacts(
    sim: TossScene,
    space: ParamSpace,
    pre: Float[np.ndarray, "n 13"],
    post: Float[np.ndarray, "n 13"],
    *,
    key: PRNGKeyArray,
    population: int = 16,
    generations: int = 30,
    restarts: int = 3,
) -> tuple[np.ndarray, float]:
    """MuJoCo C's parameters (of `space`) that fit observed cube impacts, by `identify_rigid_impacts`' search and
    loss on `mujoco_windows_c`, flat over the space's box.

    Returns:
        (params (p,), their mean relative error).
    """
    return _identify_impacts(
        "identify_mujoco_impacts", lambda pre, x: mujoco_windows_c(sim, space, pre, x),
        lambda u: np.asarray(space.from_unit(jnp.asarray(u)), np.float64), space.size, pre, post, key=key,
        population=population, generations=generations, restarts=restarts,
    )  # fmt: skip


def identify_rigid_impacts(
    pre: Float[np.ndarray, "n 13"],
    post: Float[np.ndarray, "n 13"],
    *,
    key: PRNGKeyArray,
    population: int = 16,
    generations: int = 30,
    restarts: int = 3,
) -> tuple[np.ndarray, float]:
    """The rigid impulse law's (e_n, e_t, μ, inertia scale) that fit observed cube impacts (`clashx.scenes._cube_rigid`).

    CMA-ES (`clashx.optimize.cmaes_in_box`, `restarts` searches from the box's
    centre, one batch per generation) on the mean relative error of the speed
    vectors WINDOW after contact (`impact_speed_errors`), flat over the box
    `RIGID_LOW`-`RIGID_HIGH`.

    Returns:
        (params (4,), their mean relative error).
    """
    return _identify_impacts(
        "identify_rigid_impacts", lambda s, x: impact_posts(rigid_cube_window, s, x), rigid_from_unit, 4, pre, post,
        key=key, population=population, generations=generations, restarts=restarts,
    )  # fmt: skip


def identify_handler_impacts(
    impact: Callable,
    from_unit: Callable,
    dim: int,
    pre: Float[np.ndarray, "n 13"],
    post: Float[np.ndarray, "n 13"],
    *,
    key: PRNGKeyArray,
    population: int = 16,
    generations: int = 30,
    restarts: int = 3,
) -> tuple[np.ndarray, float]:
    """Any impact handler's parameters that fit observed cube impacts, by `identify_rigid_impacts`' search and
    objective (CMA-ES over the handler's unit box, mean relative speed error `WINDOW` after contact).

    Args:
        impact: a handler `(pre_state (13,), params (p,)) -> state WINDOW later`, e.g. a `CubeSurrogate`
            (the rigid family distilled, `bench/cube_rigid_distil.py`).
        from_unit: its unit box (k, dim) -> parameters (k, p), in NumPy.
        dim: the box's dimension.
        pre, post: the impacts' states before and after their window.

    Returns:
        (params (p,), their mean relative error).
    """
    return _identify_impacts(
        "identify_handler_impacts", lambda s, x: impact_posts(impact, s, x), from_unit, dim, pre, post, key=key,
        population=population, generations=generations, restarts=restarts,
    )  # fmt: skip

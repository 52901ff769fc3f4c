"""Baselines of CLASH's Table III for the strike: simulators with nominal or identified contact parameters, and MLPs.

Every baseline predicts a strike's post-impact velocity (vx, vy, ωz) of the
block frame's origin in the block frame (the lab's `post_velocity_true`) from
the strike (θ, θ1, v_pre), and every fit minimises the metric's own error:
the mean squared relative error of the speed vector (vx, vy, r·ωz)
(`clashx.events._metrics.relative_error`, r = `characteristic_length(shape)`).

| method | what is fitted to the ~10 fit events | how |
|---|---|---|
| nominal MuJoCo | nothing | `NOMINAL_PARAMS`, MuJoCo C (`predict_c`) |
| MuJoCo + CMA-ES | μ1, μ2, e1 | `identify_cmaes`, MuJoCo C rollouts |
| MJX + gradients | μ1, μ2, e1 | `identify_mjx`: Levenberg-Marquardt, forward-mode Jacobians through MJX (float64) |
| NN, no pretraining | an MLP strike → velocity | `train_velocity_mlp`, decay by `choose_weight_decay` |
| residual | an MLP on top of MuJoCo + CMA-ES | `train_velocity_mlp` on the residual targets |

The simulator baselines run only the contact phase (the event is at release;
the slide to rest does not change it).  Identification works in the unit cube
of the prior (`ParamSpace.from_unit`), so every parameter has the same scale.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..core import Array, Float, PRNGKeyArray, as_float64, event_weights, levenberg_marquardt
from ..events import relative_error, speed_scale, speed_vector
from ..events import speed_residuals as metrics_speed_residuals
from ..optimize import cmaes_in_box
from ..scenes import StrikeScene, simulate_strike, simulate_strikes_c
from ..scenes import geometry as geo
from ..surrogate import MLP, make_mlp

# MuJoCo's defaults for a contact pair: friction 1 (sliding) and solref (0.02, 1), i.e. damping ratio 1.
# The time constant stays the scene's 0.005 s (SCENE.md); μ1 = μ2 = 1 and e1 = 1 are the nominal values,
# the block as drawn (0.25 kg, centre of mass at the centroid) and no torsional friction the rest.
NOMINAL_CONTACT = {"mu1": 1.0, "mu2": 1.0, "e1": 1.0}
CONTACT_NAMES = ("mu1", "mu2", "e1")  # SCENE.md's three: the "3 parameters" variants identify these only


def nominal_params(sim: StrikeScene) -> np.ndarray:
    """MuJoCo's nominal model of the scene as a value vector of `sim.space` (p,)."""
    return sim.space.vector(**{k: v for k, v in NOMINAL_CONTACT.items() if k in sim.space.names})


def _free_columns(sim: StrikeScene, free) -> list[int]:
    return [sim.space.index(n) for n in (free if free is not None else sim.space.names)]


class Identified(eqx.Module):
    """Contact parameters identified from a few events.

    Attributes:
        params: (μ1, μ2, e1) in physical units, shape (3,).
        loss: mean squared relative error of the speed vector on the fit events at `params`.
        iterations: generations (CMA-ES) or accepted + rejected steps (Levenberg-Marquardt), all starts.
        evaluations: simulated strikes (one strike at one parameter vector counts one).
        start_losses: the final loss of each start (CMA-ES: the best loss of each generation).
    """

    params: np.ndarray
    loss: float
    iterations: int
    evaluations: int
    start_losses: np.ndarray


def speed_residuals(pred: Float[Array, "n 3"], true: Float[Array, "n 3"], length: float) -> Float[Array, "n 3"]:
    """Per-event residual vectors whose norms are `relative_error(pred, true, length)`.

    `mean(sum(r**2, -1))` is the fit loss of every baseline (mean squared relative error).
    """
    return metrics_speed_residuals(pred, true, length)


def relative_mse(pred: Float[Array, "... 3"], true: Float[Array, "... 3"], length: float) -> Float[Array, ""]:
    """Mean squared relative error of the speed vector over the last-but-one axis (the fit loss)."""
    return jnp.mean(relative_error(pred, true, length) ** 2, axis=-1)


# --- MuJoCo C -------------------------------------------------------------------------------


def predict_c(
    sim: StrikeScene, strikes: Float[np.ndarray, "n 3"], params, *, nthread: int = 0
) -> Float[np.ndarray, "n 3"]:
    """Post-impact velocities of `strikes` on MuJoCo C with one parameter vector.

    Args:
        sim: the scene of the block's shape.
        strikes: (n, 3) strikes (θ, θ1, v_pre), rad, rad, m/s.
        params: (p,) values of `sim.space`, e.g. `nominal_params(sim)`.
        nthread: MuJoCo C threads (0: all CPUs).

    Returns:
        (n, 3) velocities (vx, vy, ωz), m/s and rad/s; zeros for a strike that missed.
    """
    strikes = np.asarray(strikes, np.float64)
    p = np.broadcast_to(np.asarray(params, np.float64), (len(strikes), sim.space.size))
    ev = simulate_strikes_c(sim, strikes, p, to_rest=False, nthread=nthread)
    return np.asarray(ev.post_velocity, np.float64)


def identify_cmaes(
    sim: StrikeScene,
    strikes: Float[np.ndarray, "n 3"],
    velocities: Float[np.ndarray, "n 3"],
    *,
    key: PRNGKeyArray,
    population: int = 16,
    generations: int = 30,
    std_init: float = 0.25,
    free: tuple[str, ...] | None = None,
    base: np.ndarray | None = None,
    prior_std: dict[str, float] | None = None,
    nthread: int = 0,
    restarts: int = 1,
    weights: np.ndarray | None = None,
) -> Identified:
    """Identify parameters with CMA-ES over MuJoCo C strikes (the "MuJoCo + CMA-ES" baseline).

    CMA-ES (evosax `CMA_ES`, ask/tell) searches the unit cube of the prior,
    starting at its centre with step size `std_init`; a candidate is clipped
    to the cube before it is simulated, and its fitness is the mean squared
    relative error on the events plus the squared distance it was clipped by
    (which keeps the search mean inside the cube).  Each generation simulates
    `population × n` strikes in one `mujoco.batch` rollout.

    Args:
        sim: the scene of the events' shape.
        strikes: (n, 3) strikes of the fit events.
        velocities: (n, 3) their measured post-impact velocities.
        key: PRNG key (same key, same result).
        population: candidates per generation.
        generations: generations (the budget is `population × generations × n` strikes).
        std_init: initial step size, in units of the prior's ranges.
        free: names of the parameters to identify (default: all of `sim.space`).
        base: values of the others (default `nominal_params(sim)`), and the prior's centre.
        prior_std: {name: σ in units of the prior range} of a Gaussian prior around `base`,
            added to the loss as Σ ((u − u_base) / σ)² / n: the objective of `clashx.identify`.
        nthread: MuJoCo C threads (0: all CPUs).
        restarts: independent CMA-ES searches sharing each generation's batch (`cmaes_in_box`);
            the best by the loss wins.
        weights: (n,) a weight per event (>= 0, scaled to mean 1; default equal) on its squared relative
            error: the same weighted mean as `clashx.identify`'s `weights`.

    Returns:
        `Identified` with the best candidate seen (clipped into the prior box); its `loss` is the fit part
        (weighted, with `weights`).
    """
    strikes = np.asarray(strikes, np.float64)
    velocities = np.asarray(velocities, np.float64)
    cols = _free_columns(sim, free)
    names = [sim.space.names[j] for j in cols]
    inv_std = np.array([1.0 / prior_std[nm] if prior_std and nm in prior_std else 0.0 for nm in names])
    base_u = np.asarray(sim.space.to_unit(jnp.asarray(nominal_params(sim) if base is None else base)), np.float64)
    n, p = len(strikes), len(cols)
    length = geo.characteristic_length(sim.shape)
    w = event_weights(weights, n, "identify_cmaes")
    w = np.ones(n) if w is None else w

    def full(u: np.ndarray) -> np.ndarray:
        out = np.tile(base_u, (len(u), 1))
        out[:, cols] = u
        return out

    def fit_losses(u: np.ndarray) -> np.ndarray:
        phys = np.asarray(sim.space.from_unit(jnp.asarray(full(u))), np.float64)
        ev = simulate_strikes_c(
            sim, np.tile(strikes, (len(u), 1)), np.repeat(phys, n, axis=0), to_rest=False, nthread=nthread
        )
        pred = np.asarray(ev.post_velocity, np.float64).reshape(len(u), n, 3)
        err = np.asarray(relative_error(pred, velocities[None], length), np.float64)
        return np.mean(w * err**2, axis=-1)

    def losses(u: np.ndarray) -> np.ndarray:
        return fit_losses(u) + np.sum(((u - base_u[cols]) * inv_std) ** 2, axis=1) / n

    start = base_u[cols] if prior_std else np.full(p, 0.5)
    best_u, _, history = cmaes_in_box(
        losses, start, key=key, population=population, generations=generations, std_init=std_init, restarts=restarts
    )
    best_loss = float(fit_losses(np.asarray(best_u)[None])[0])
    return Identified(
        params=np.asarray(sim.space.from_unit(jnp.asarray(full(best_u[None])[0])), np.float64),
        loss=best_loss,
        iterations=generations,
        evaluations=generations * population * n * restarts,
        start_losses=history,
    )


# --- MJX and forward-mode gradients ---------------------------------------------------------

_Z_MAX = 4.0  # logits stay in [-4, 4] (unit 0.018 … 0.982) so that the sigmoid's slope does not vanish


def mjx_post_velocity(sim: StrikeScene, strike: Float[Array, "3"], params: Float[Array, "3"]) -> Float[Array, "3"]:
    """Post-impact velocity of one strike on MJX (contact phase only); batch with `jax.vmap`."""
    return simulate_strike(sim, strike, params, to_rest=False).post_velocity


def _params_of_logits(sim: StrikeScene, z: Float[Array, "3"]) -> Float[Array, "3"]:
    return sim.space.from_unit(jax.nn.sigmoid(z))


@eqx.filter_jit
def _mjx_predict(sim: StrikeScene, strikes, params):
    return jax.vmap(mjx_post_velocity, in_axes=(None, 0, None))(sim, strikes, params)


def predict_mjx(
    sim: StrikeScene, strikes: Float[np.ndarray, "n 3"], params, *, x64: bool = True
) -> Float[np.ndarray, "n 3"]:
    """Post-impact velocities (n, 3) of `strikes` on MJX with one parameter vector; compiled once per (scene, n, x64).

    With `x64` the rollout runs in float64 (`as_float64`), as `identify_mjx` does.
    """
    with jax.enable_x64(x64):
        sim = as_float64(sim) if x64 else sim
        dtype = jnp.float64 if x64 else jnp.float32
        out = _mjx_predict(sim, jnp.asarray(strikes, dtype), jnp.asarray(params, dtype))
        return np.asarray(out, np.float64)


@eqx.filter_jit
def mjx_velocity_jacobian(
    sim: StrikeScene, strikes: Float[Array, "n 3"], params: Float[Array, "3"]
) -> tuple[Float[Array, "n 3"], Float[Array, "n 3 3"]]:
    """MJX post-impact velocities (n, 3) and their Jacobian (n, 3, 3) w.r.t. (μ1, μ2, e1), by forward mode.

    MJX's constraint solver is a `while_loop`, which reverse mode cannot
    differentiate; forward mode (`jax.jacfwd`, one tangent per parameter)
    passes it.  Call it in float64 (`jax.enable_x64(True)`, `as_float64(sim)`):
    float32 tangents are wrong (see `as_float64`).  The strike's dynamics are
    hybrid (contacts appear and vanish, stick and slip), so the velocity is
    piecewise smooth in the parameters, with jumps: this is the Jacobian of
    the piece the parameters lie on.
    """

    def f(p):
        v = jax.vmap(mjx_post_velocity, in_axes=(None, 0, None))(sim, strikes, p)
        return v, v

    jac, v = jax.jacfwd(f, has_aux=True)(params)
    return v, jac


@eqx.filter_jit
def _velocity_jacobians(sim: StrikeScene, strikes, params):
    """`mjx_velocity_jacobian` for every row of `params` (s, 3) at once: s × n worlds in one batch."""
    return jax.vmap(lambda p: mjx_velocity_jacobian(sim, strikes, p))(params)


def _residual_gain(velocities: np.ndarray, length: float, weights: np.ndarray) -> np.ndarray:
    """(n, 1) factors g such that the speed-vector differences times g have the squared norm
    mean(weights · relative_error²): `identify_mjx`'s loss, as `speed_residuals` / √n weighted."""
    y = np.asarray(velocities, np.float64)
    scale = np.asarray(speed_scale(y, length), np.float64)  # (n, 1)
    return np.sqrt(np.asarray(weights, np.float64) / len(y))[:, None] / scale


def _residual_terms(
    sim: StrikeScene, strikes, velocities, z: np.ndarray, cols, base_z, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Residuals (s, 3n) of `identify_mjx`'s loss at logits z (s, k) of the free columns (every start
    of the search at once), each event's scaled by √weight, and their Jacobians (s, 3n, k) w.r.t. z."""
    n = len(velocities)
    length = geo.characteristic_length(sim.shape)

    def params_of(z):
        return _params_of_logits(sim, jnp.asarray(base_z, z.dtype).at[jnp.asarray(cols)].set(z))

    zj = jnp.asarray(z, strikes.dtype)
    params, dp_dz = jax.vmap(params_of)(zj), jax.vmap(jax.jacfwd(params_of))(zj)
    v, dv_dp = _velocity_jacobians(sim, strikes, params)
    y = np.asarray(velocities, np.float64)
    w = np.array([1.0, 1.0, length])
    gain = _residual_gain(y, length, weights)  # (n, 1)
    r = ((np.asarray(v, np.float64) - y) * w * gain).reshape(len(zj), -1)
    jac = (np.asarray(dv_dp, np.float64) * w[:, None] * gain[:, :, None]).reshape(len(zj), 3 * n, -1)
    return r, jac @ np.asarray(dp_dz, np.float64)


def identify_mjx(
    sim: StrikeScene,
    strikes: Float[np.ndarray, "n 3"],
    velocities: Float[np.ndarray, "n 3"],
    *,
    key: PRNGKeyArray,
    starts: int = 3,
    iterations: int = 12,
    damping: float = 1e-2,
    x64: bool = True,
    free: tuple[str, ...] | None = None,
    base: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> Identified:
    """Identify parameters by Levenberg-Marquardt through MJX strikes (the "MJX + gradients" baseline).

    The unknowns are logits z of the prior's unit cube (params =
    `space.from_unit(sigmoid(z))`, z clipped to ±4), so every step stays in
    the prior.  The residuals are the fit events' `speed_residuals` / √n, whose
    squared norm is the mean squared relative error; their Jacobian comes from
    forward mode through MJX (`mjx_velocity_jacobian`, the one compiled
    function it calls), in float64 unless `x64` is false (see `as_float64`).  A step solves
    (JᵀJ + λ·diag(JᵀJ) + λ·1e-6) δ = −Jᵀr; it is kept if the loss drops
    (λ /= 3) and else refused (λ *= 4); every trial costs one call of the
    compiled residual-and-Jacobian function.  The first start is the prior's
    centre, the others are drawn from `key` in the middle 80 % of the cube.

    Args:
        sim: the scene.
        strikes, velocities: (n, 3) fit events.
        key: PRNG key for the extra starts.
        starts: number of starts.
        iterations: trials (evaluations of residuals and Jacobian) per start.
        damping: initial λ.
        x64: run MJX in float64 (right tangents; a separate compilation).
        free: names of the parameters to identify (default: all of `sim.space`).
        base: values of the others (default `nominal_params(sim)`).
        weights: (n,) a weight per event (>= 0, scaled to mean 1; default equal) on its squared relative
            error, as `identify_cmaes`'s.

    Returns:
        `Identified` of the best start; `iterations` counts the trials of all starts.
    """
    cols = _free_columns(sim, free)
    w = event_weights(weights, len(strikes), "identify_mjx")
    w = np.ones(len(strikes)) if w is None else w
    base_u = np.asarray(sim.space.to_unit(jnp.asarray(nominal_params(sim) if base is None else base)), np.float64)
    base_z = np.log(np.clip(base_u, 0.018, 0.982) / (1 - np.clip(base_u, 0.018, 0.982)))
    k = len(cols)
    u_rand = np.asarray(jax.random.uniform(key, (starts - 1, k), minval=0.1, maxval=0.9), np.float64)
    u0 = np.concatenate([np.full((1, k), 0.5), u_rand])
    with jax.enable_x64(x64):
        dtype = jnp.float64 if x64 else jnp.float32
        sim_ = as_float64(sim) if x64 else sim
        s = jnp.asarray(strikes, dtype)

        def terms(z):
            return _residual_terms(sim_, s, velocities, z, cols, base_z, w)

        # every start in one batch per trial (starts × strikes worlds)
        zs, costs, n_trials = levenberg_marquardt(
            terms, np.log(u0 / (1 - u0)), iterations=iterations, damping=damping, z_max=_Z_MAX
        )
        trials = n_trials * len(zs)
        finals = [float(c) for c in costs]
        i = int(np.argmin(costs))
        best_z, best_loss = zs[i], float(costs[i])
    z_all = base_z.copy()
    z_all[cols] = best_z
    return Identified(
        params=np.asarray(sim.space.from_unit(1 / (1 + np.exp(-z_all))), np.float64),
        loss=best_loss,
        iterations=trials,
        evaluations=trials * len(strikes),
        start_losses=np.asarray(finals),
    )


# --- MLPs -----------------------------------------------------------------------------------


def strike_features(strike: Float[Array, "3"]) -> Float[Array, "4"]:
    """Network input of one strike: (cos θ, sin θ, θ1, v_pre), θ1 and v_pre scaled to [-1, 1] over SCENE.md's ranges."""
    theta, theta1, v_pre = strike[0], strike[1], strike[2]
    (a_lo, a_hi), (v_lo, v_hi) = geo.STRIKE_RANGES["theta1"], geo.STRIKE_RANGES["v_pre"]
    return jnp.stack(
        [
            jnp.cos(theta),
            jnp.sin(theta),
            (2 * theta1 - a_lo - a_hi) / (a_hi - a_lo),
            (2 * v_pre - v_lo - v_hi) / (v_hi - v_lo),
        ]
    )


class VelocityMLP(eqx.Module):
    """An MLP from a strike to a post-impact velocity (or a correction of one).

    The network predicts the speed vector (vx, vy, r·ωz) divided by `scale`
    (the RMS speed of the training targets), so its outputs are of order one.
    Call on one strike (3,) → velocity (3,); batch with `jax.vmap`.  Only
    `mlp` is trained; `scale` is an array so that a new value does not recompile.
    """

    mlp: MLP
    scale: Float[Array, ""]
    length: float = eqx.field(static=True)

    def __call__(self, strike: Float[Array, "3"]) -> Float[Array, "3"]:
        u = self.scale * self.mlp(jnp.asarray(strike_features(strike)))
        return u / jnp.array([1.0, 1.0, self.length])


class MLPConfig(eqx.Module):
    """Size and training of a `VelocityMLP`: full-batch Adam, a fixed step count, weight decay as an L2 penalty.

    The penalty `weight_decay · Σ w²` (all weights and biases) is added to the
    loss rather than decoupled (AdamW): with ~10 events Adam refits the data
    against a decoupled decay, while an L2 term moves the optimum itself.
    """

    width: int = 64
    depth: int = 2
    steps: int = 2000
    learning_rate: float = 3e-3
    weight_decay: float = 1e-3


def _init_mlp(strikes, targets, length: float, key: PRNGKeyArray, scale: float | None, config: MLPConfig):
    strikes = jnp.asarray(strikes, jnp.float32)
    targets = jnp.asarray(targets, jnp.float32)
    if scale is None:
        scale = float(jnp.sqrt(jnp.mean(jnp.sum(speed_vector(targets, length) ** 2, axis=-1))))
    mlp = make_mlp(4, 3, config.width, config.depth, activation=jax.nn.gelu, key=key)
    return (
        VelocityMLP(mlp=mlp, scale=jnp.asarray(max(float(scale), 1e-6), jnp.float32), length=float(length)),
        strikes,
        targets,
    )


def train_velocity_mlp(
    strikes: Float[Array, "n 3"],
    targets: Float[Array, "n 3"],
    length: float,
    *,
    key: PRNGKeyArray,
    scale: float | None = None,
    config: MLPConfig = MLPConfig(),  # noqa: B008 (an immutable eqx.Module)
) -> VelocityMLP:
    """Fit a `VelocityMLP` to (strike, target velocity) pairs; no pretraining.

    The loss is the mean squared speed-vector error over `scale²`: with
    targets = measured velocities it is the fit loss of the "NN" baseline;
    with targets = measured − simulated (a residual) and `scale` the
    measured velocities' RMS speed, it is the loss of simulation + residual.

    Args:
        strikes: (n, 3) strikes.
        targets: (n, 3) velocities (vx, vy, ωz) to fit.
        length: r of the speed vector (`characteristic_length(shape)`).
        key: PRNG key of the initial weights.
        scale: speed (m/s) the outputs are measured in; default the RMS speed of `targets`.
        config: network size and optimiser (see `choose_weight_decay` for the decay).

    Returns:
        The trained `VelocityMLP`.
    """
    model, strikes, targets = _init_mlp(strikes, targets, length, key, scale, config)
    weights = jnp.ones(len(strikes))
    return _fit(
        model,
        strikes,
        targets,
        weights,
        config.steps,
        jnp.float32(config.learning_rate),
        jnp.float32(config.weight_decay),
    )


def choose_weight_decay(
    strikes: Float[Array, "n 3"],
    targets: Float[Array, "n 3"],
    length: float,
    *,
    key: PRNGKeyArray,
    scale: float | None = None,
    config: MLPConfig = MLPConfig(),  # noqa: B008
    candidates: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0),
    folds: int = 5,
) -> tuple[float, np.ndarray]:
    """Pick the weight decay of `train_velocity_mlp` by k-fold cross-validation within the fit events.

    Every (candidate, fold) pair trains one network from the same initial
    weights under one `jax.vmap` (one compilation); the held-out loss is the
    training loss's quantity on the left-out events.  With ~10 events the
    choice is between fitting them and staying near zero (for a residual:
    near the simulator).

    Returns:
        (the candidate with the lowest mean held-out loss, mean held-out loss per candidate).
    """
    k_init, k_fold = jax.random.split(key)
    model, strikes, targets = _init_mlp(strikes, targets, length, k_init, scale, config)
    n = len(strikes)
    folds = max(2, min(folds, n))
    fold_of = jnp.asarray(np.asarray(jax.random.permutation(k_fold, n)) % folds)
    wd = jnp.asarray(candidates, jnp.float32)
    losses = np.asarray(
        _cv_losses(model, strikes, targets, fold_of, folds, config.steps, jnp.float32(config.learning_rate), wd)
    )
    mean = losses.mean(axis=1)
    return float(candidates[int(np.argmin(mean))]), mean


def _mlp_loss(model: VelocityMLP, strikes, targets, weights):
    pred = jax.vmap(model)(strikes)
    per = jnp.sum(speed_vector(pred - targets, model.length) ** 2, axis=-1) / model.scale**2
    return jnp.sum(weights * per) / jnp.maximum(jnp.sum(weights), 1e-12)


@eqx.filter_jit
def _fit(model: VelocityMLP, strikes, targets, weights, steps: int, learning_rate, weight_decay) -> VelocityMLP:
    opt = optax.adam(learning_rate)
    params, static = eqx.partition(model.mlp, eqx.is_inexact_array)

    def with_mlp(p):
        return eqx.tree_at(lambda m: m.mlp, model, eqx.combine(p, static))

    def loss(p):
        l2 = sum(jnp.sum(w**2) for w in jax.tree.leaves(p))
        return _mlp_loss(with_mlp(p), strikes, targets, weights) + weight_decay * l2

    def step(carry, _):
        params, opt_state = carry
        grads = jax.grad(loss)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, length=steps)
    return with_mlp(params)


@eqx.filter_jit
def _cv_losses(model: VelocityMLP, strikes, targets, fold_of, folds: int, steps: int, learning_rate, weight_decays):
    def one(wd, f):
        held = (fold_of == f).astype(jnp.float32)
        trained = _fit(model, strikes, targets, 1.0 - held, steps, learning_rate, wd)
        return _mlp_loss(trained, strikes, targets, held)

    return jax.vmap(lambda wd: jax.vmap(lambda f: one(wd, f))(jnp.arange(folds)))(weight_decays)


def predict_mlp(model: VelocityMLP, strikes: Float[Array, "n 3"]) -> Float[np.ndarray, "n 3"]:
    """Velocities (n, 3) of a `VelocityMLP` for a batch of strikes."""
    return np.asarray(jax.vmap(model)(jnp.asarray(strikes, jnp.float32)), np.float64)

"""A σ per prediction for an identified model, from the few real events it was fitted to.

`predictive` gives, for every event to predict, a model's output vector y
(k components; the strike's speed vector, the cube's post-impact speed
vector) and its covariance.  Both come from the fit events alone (no
evaluated event is looked at):

- noise: the model's relative residuals on the fit events,
  (y_pred − y_real) / ‖y_pred‖ per component, give a variance τ_c² per
  component (degrees of freedom corrected for the fitted parameters); an
  event's noise covariance is diag(τ²) ‖y_pred‖², so a faster event is
  predicted with a proportionally wider spread;
- parameters: a Laplace approximation in the parameters' unit box, the
  Gauss-Newton curvature of those weighted residuals (forward-mode Jacobians
  through the model) plus a Gaussian prior per unit coordinate (by default
  the box's own spread, σ² = 1/12, a uniform's variance; the identification's
  own prior where it had one), so that a direction the events do not pin down
  stays as wide as the prior;
- an evaluated event's covariance is J Σ_u Jᵀ + diag(τ²) ‖y_pred‖², J its
  Jacobian in the unit box.

`predictive_calibration` scores such a prediction against measured outputs:
the coverage of the 50 % and 90 % ellipsoids (χ² with k degrees of freedom),
and whether the σ ranks the errors (Spearman).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from ..core import Float

PRIOR_VAR = 1.0 / 12.0  # variance of a unit coordinate under the box's flat prior


def _predict_with_jacobian(fn: Callable, from_unit: Callable, x: np.ndarray, u: np.ndarray):
    """(y (n, k), ∂y/∂unit (n, k, p)) of inputs `x` at unit parameters `u` (forward mode, the prediction being
    the forward pass's primal)."""

    def both(s, z):
        out = fn(s, from_unit(z))
        return out, out

    one = jax.jit(jax.vmap(lambda s, z: jax.jacfwd(lambda zz: both(s, zz), has_aux=True)(z), in_axes=(0, None)))
    jac, pred = one(jnp.asarray(x, jnp.float32), jnp.asarray(u, jnp.float32))
    return np.asarray(pred, np.float64), np.asarray(jac, np.float64)


def _predict(fn: Callable, from_unit: Callable, x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """y (n, k) of inputs `x` at unit parameters `u` (no Jacobian)."""
    one = jax.jit(jax.vmap(lambda s, z: fn(s, from_unit(z)), in_axes=(0, None)))
    return np.asarray(one(jnp.asarray(x, jnp.float32), jnp.asarray(u, jnp.float32)), np.float64)


def predictive(
    fn: Callable,
    from_unit: Callable,
    u_hat: Float[np.ndarray, "p"],
    x_fit: Float[np.ndarray, "n d"],
    y_fit: Float[np.ndarray, "n k"],
    x_eval: Float[np.ndarray, "m d"],
    *,
    noise_from: Callable | None = None,
    prior_var: Float[np.ndarray, "p"] | None = None,
    noise_scale: str = "rms",
) -> dict:
    """A model's predictions with their covariance (module docstring).

    Args:
        fn: the model (x (d,), params (p,)) -> y (k,), JAX-traceable.
        from_unit: the parameters' unit box -> the parameters, in JAX.
        u_hat: the fitted parameters in that unit box.
        x_fit, y_fit: the fit events' inputs and measured outputs.
        x_eval: the inputs to predict.
        noise_from: the model whose residuals on the fit events set the noise τ (default `fn`).  A model
            fine-tuned on those very events fits them closer than it predicts others (the cube's seed 1: 15
            steps, and its 90 % ellipsoid held 0.39 of the evaluated impacts); pass the model before
            fine-tuning.
        prior_var: the Gaussian prior's variance per unit coordinate (default 1/12 each, the box's spread);
            0 for a parameter held fixed.
        noise_scale: how τ is read off the fit residuals: "rms" (their root mean square, degrees of freedom
            corrected) or "mad" (1.4826 × their median absolute value, then the same correction: the bulk of
            the residuals, where a few fit labels are outliers the predicted quantity does not share, as the
            strike's labels read off tracks are against its true velocities).

    Returns:
        {"pred": (m, k), "cov": (m, k, k), "sigma_rel": (m,) √trace(cov) / ‖y_pred‖, the expected relative
         error; "tau": (k,) relative noise per component; "param_std_unit": (p,) one-sigma in the unit box;
         "param_cov_unit": (p, p) the parameters' posterior covariance in the unit box}.
    """
    x_fit, y_fit = np.asarray(x_fit, np.float64), np.asarray(y_fit, np.float64)
    if len(x_fit) == 0 or len(x_fit) != len(y_fit):
        raise ValueError(f"predictive: x_fit {x_fit.shape} and y_fit {y_fit.shape} need the same n ≥ 1 events")
    u_hat = np.asarray(u_hat, np.float64)
    p = len(u_hat)
    prior = np.full(p, PRIOR_VAR) if prior_var is None else np.asarray(prior_var, np.float64)
    if prior.shape != (p,) or np.any(prior < 0):
        raise ValueError(f"predictive: prior_var {prior.shape} must be ({p},) variances ≥ 0")
    pred, jac = _predict_with_jacobian(fn, from_unit, x_fit, u_hat)
    if pred.shape != y_fit.shape:
        raise ValueError(f"predictive: the model gives {pred.shape[1:]} outputs per event, y_fit {y_fit.shape[1:]}")
    k = pred.shape[1]
    scale = np.maximum(np.linalg.norm(pred, axis=1), 1e-9)
    noisy = pred if noise_from is None else _predict(noise_from, from_unit, x_fit, u_hat)
    rel = (noisy - y_fit) / scale[:, None]
    dof = max(rel.size - int(np.sum(prior > 0)), 1)
    if noise_scale == "rms":
        spread2 = np.mean(rel**2, 0)
    elif noise_scale == "mad":
        spread2 = (1.4826 * np.median(np.abs(rel), 0)) ** 2
    else:
        raise ValueError(f"predictive: noise_scale {noise_scale!r}: expected 'rms' or 'mad'")
    tau2 = np.maximum(spread2 * rel.size / dof, 1e-12)
    w = 1.0 / (tau2[None] * scale[:, None] ** 2)  # (n, k)
    held = prior > 0  # a fixed parameter has no posterior spread
    cov_u = np.zeros((p, p))
    curvature = np.einsum("nci,nc,ncj->ij", jac, w, jac)[np.ix_(held, held)] + np.diag(1.0 / prior[held])
    cov_u[np.ix_(held, held)] = np.linalg.inv(curvature)
    pred_e, jac_e = _predict_with_jacobian(fn, from_unit, np.asarray(x_eval, np.float64), u_hat)
    scale_e = np.maximum(np.linalg.norm(pred_e, axis=1), 1e-9)
    cov = (
        np.einsum("mci,ij,mdj->mcd", jac_e, cov_u, jac_e)
        + tau2[None, :, None] * np.eye(k) * scale_e[:, None, None] ** 2
    )
    return {
        "pred": pred_e,
        "cov": cov,
        "sigma_rel": np.sqrt(np.trace(cov, axis1=1, axis2=2)) / scale_e,
        "tau": np.sqrt(tau2),
        "param_std_unit": np.sqrt(np.diag(cov_u)),
        "param_cov_unit": cov_u,
    }


def predictive_calibration(pred: dict, y_real: Float[np.ndarray, "m k"]) -> dict:
    """How well `predictive`'s σ describes measured outputs `y_real`.

    Returns:
        {"coverage_50", "coverage_90": fractions of events inside the 50 % / 90 % ellipsoid of their covariance
         (calibrated: 0.5 / 0.9); "sigma_rel_median": the median predicted relative σ; "err_rel_median": the median
         relative error ‖y_pred − y_real‖ / ‖y_real‖; "spearman": rank correlation of σ and that error}.
    """
    y_real = np.asarray(y_real, np.float64)
    e = y_real - pred["pred"]
    k = e.shape[1]
    z2 = np.einsum("mc,mcd,md->m", e, np.linalg.inv(pred["cov"]), e)
    err = np.linalg.norm(e, axis=1) / np.maximum(np.linalg.norm(y_real, axis=1), 1e-12)
    rho = stats.spearmanr(pred["sigma_rel"], err).statistic
    return {
        "coverage_50": float(np.mean(z2 <= stats.chi2.ppf(0.5, k))),
        "coverage_90": float(np.mean(z2 <= stats.chi2.ppf(0.9, k))),
        "sigma_rel_median": float(np.median(pred["sigma_rel"])),
        "err_rel_median": float(np.median(err)),
        "spearman": float(rho),
    }

"""A σ per toss for a fitted impact handler: the spread of its first-impact prediction, from ten tosses' impacts.

`impact_predictive` gives, for every evaluated impact, the predicted
post-window speed vector u = (v, r ω) (`speed_vector`) and its covariance.
Both come from the fit impacts alone (no evaluated toss is looked at):

- noise: the handler's relative residuals on the fit impacts,
  (u_pred − u_real) / ‖u_pred‖ per component, give a variance τ_c² per
  component (degrees of freedom corrected for the fitted parameters); an
  impact's noise covariance is diag(τ²) ‖u_pred‖², so a faster impact is
  predicted with a proportionally wider spread;
- parameters: a Laplace approximation in the parameters' unit box, the
  Gauss-Newton curvature of those weighted residuals (forward-mode Jacobians
  through the handler) plus a Gaussian prior of the box's own spread (σ² = 1/12
  per unit coordinate, a uniform's variance) so that a direction the impacts do
  not pin down stays as wide as the prior;
- an evaluated impact's covariance is J Σ_u Jᵀ + diag(τ²) ‖u_pred‖², J its
  Jacobian in the unit box.

`predictive_calibration` scores such a prediction against measured
post-window states: the coverage of the 50 % and 90 % ellipsoids (χ² with 6
degrees of freedom), and whether the σ ranks the errors (Spearman).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from ..core import Float
from ._cube_fit import speed_vector, speed_vectors

PRIOR_VAR = 1.0 / 12.0  # variance of a unit coordinate under the box's flat prior


def _predict_with_jacobian(impact: Callable, from_unit: Callable, pre: np.ndarray, u: np.ndarray):
    """(u_pred (n, 6), ∂u_pred/∂unit (n, 6, p)) of impacts `pre` at unit parameters `u` (forward mode, the
    prediction being the forward pass's primal)."""

    def both(s, z):
        out = speed_vector(impact(s, from_unit(z)))
        return out, out

    fn = jax.jit(jax.vmap(lambda s, z: jax.jacfwd(lambda zz: both(s, zz), has_aux=True)(z), in_axes=(0, None)))
    jac, pred = fn(jnp.asarray(pre, jnp.float32), jnp.asarray(u, jnp.float32))
    return np.asarray(pred, np.float64), np.asarray(jac, np.float64)


def impact_predictive(
    impact: Callable,
    from_unit: Callable,
    u_hat: Float[np.ndarray, "p"],
    pre_fit: Float[np.ndarray, "n 13"],
    post_fit: Float[np.ndarray, "n 13"],
    pre_eval: Float[np.ndarray, "m 13"],
    *,
    noise_from: Callable | None = None,
) -> dict:
    """A handler's first-impact prediction with its covariance (module docstring).

    Args:
        impact: handler (pre (13,), params (p,)) -> post-window state (13,), JAX-traceable (a
            `CubeSurrogate`, or `clashx.scenes.rigid_cube_window`).
        from_unit: the handler's unit box -> its parameters, in JAX.
        u_hat: the fitted parameters in that unit box.
        pre_fit, post_fit: the fit impacts' states before and after their window.
        pre_eval: the impacts to predict.
        noise_from: the handler whose residuals on the fit impacts set the noise τ (default `impact`). A
            handler fine-tuned on those very impacts fits them closer than it predicts others (the cube's
            seed 1: 15 steps, and its 90 % ellipsoid held 0.39 of the evaluated impacts); pass it the
            model before fine-tuning.

    Returns:
        {"u_pred": (m, 6), "cov": (m, 6, 6), "sigma_rel": (m,) √trace(cov) / ‖u_pred‖, the expected relative
         error; "tau": (6,) relative noise per component; "param_std_unit": (p,) one-sigma in the unit box}.
    """
    pre_fit, post_fit = np.asarray(pre_fit, np.float64), np.asarray(post_fit, np.float64)
    if len(pre_fit) == 0 or pre_fit.shape != post_fit.shape:
        raise ValueError(f"impact_predictive: pre_fit {pre_fit.shape} and post_fit {post_fit.shape} must match, n ≥ 1")
    u_hat = np.asarray(u_hat, np.float64)
    p = len(u_hat)
    pred, jac = _predict_with_jacobian(impact, from_unit, pre_fit, u_hat)
    real = speed_vectors(post_fit)
    scale = np.maximum(np.linalg.norm(pred, axis=1), 1e-9)
    noisy = pred if noise_from is None else _predict_with_jacobian(noise_from, from_unit, pre_fit, u_hat)[0]
    rel = (noisy - real) / scale[:, None]
    dof = max(rel.size - p, 1)
    tau2 = np.maximum(np.sum(rel**2, 0) * rel.size / (dof * len(rel)), 1e-12)
    w = 1.0 / (tau2[None] * scale[:, None] ** 2)  # (n, 6)
    curvature = np.einsum("nci,nc,ncj->ij", jac, w, jac) + np.eye(p) / PRIOR_VAR
    cov_u = np.linalg.inv(curvature)
    pred_e, jac_e = _predict_with_jacobian(impact, from_unit, np.asarray(pre_eval, np.float64), u_hat)
    scale_e = np.maximum(np.linalg.norm(pred_e, axis=1), 1e-9)
    cov = (
        np.einsum("mci,ij,mdj->mcd", jac_e, cov_u, jac_e)
        + tau2[None, :, None] * np.eye(6) * scale_e[:, None, None] ** 2
    )
    return {
        "u_pred": pred_e,
        "cov": cov,
        "sigma_rel": np.sqrt(np.trace(cov, axis1=1, axis2=2)) / scale_e,
        "tau": np.sqrt(tau2),
        "param_std_unit": np.sqrt(np.diag(cov_u)),
    }


def predictive_calibration(predictive: dict, post_real: Float[np.ndarray, "m 13"]) -> dict:
    """How well `impact_predictive`'s σ describes measured post-window states.

    Returns:
        {"coverage_50", "coverage_90": fractions of impacts inside the 50 % / 90 % ellipsoid of their covariance
         (calibrated: 0.5 / 0.9); "sigma_rel_median": the median predicted relative σ; "err_rel_median": the median
         relative error ‖u_pred − u_real‖ / ‖u_real‖; "spearman": rank correlation of σ and that error}.
    """
    real = speed_vectors(post_real)
    e = real - predictive["u_pred"]
    z2 = np.einsum("mc,mcd,md->m", e, np.linalg.inv(predictive["cov"]), e)
    err = np.linalg.norm(e, axis=1) / np.maximum(np.linalg.norm(real, axis=1), 1e-12)
    rho = stats.spearmanr(predictive["sigma_rel"], err).statistic
    return {
        "coverage_50": float(np.mean(z2 <= stats.chi2.ppf(0.5, 6))),
        "coverage_90": float(np.mean(z2 <= stats.chi2.ppf(0.9, 6))),
        "sigma_rel_median": float(np.median(predictive["sigma_rel"])),
        "err_rel_median": float(np.median(err)),
        "spearman": float(rho),
    }

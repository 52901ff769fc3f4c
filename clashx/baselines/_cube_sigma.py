"""A σ per toss for a fitted impact handler: the spread of its first-impact prediction, from ten tosses' impacts.

`impact_predictive` is `clashx.learn.predictive` (relative noise from the fit
impacts' residuals, a Laplace posterior of the parameters in their unit box)
on the post-window speed vector u = (v, r ω) (`speed_vector`) of a cube's
impact handler; `impact_calibration` scores it against measured post-window
states (coverage of the 50 % and 90 % ellipsoids, χ² with 6 degrees of
freedom, and the Spearman rank correlation of σ and error).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core import Float
from ..learn import predictive, predictive_calibration
from ._cube_fit import speed_vector, speed_vectors


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
    """A handler's first-impact speed vector with its covariance (`clashx.learn.predictive`).

    Args:
        impact: handler (pre (13,), params (p,)) -> post-window state (13,), JAX-traceable (a
            `CubeSurrogate`, or `clashx.scenes.rigid_cube_window`).
        from_unit: the handler's unit box -> its parameters, in JAX.
        u_hat: the fitted parameters in that unit box.
        pre_fit, post_fit: the fit impacts' states before and after their window.
        pre_eval: the impacts to predict.
        noise_from: the handler whose residuals on the fit impacts set the noise (default `impact`; pass the
            model before fine-tuning).

    Returns:
        `predictive`'s dict: "pred" (m, 6) speed vectors, "cov" (m, 6, 6), "sigma_rel", "tau" (6,),
        "param_std_unit".
    """
    pre_fit, post_fit = np.asarray(pre_fit, np.float64), np.asarray(post_fit, np.float64)
    if len(pre_fit) == 0 or pre_fit.shape != post_fit.shape:
        raise ValueError(f"impact_predictive: pre_fit {pre_fit.shape} and post_fit {post_fit.shape} must match, n ≥ 1")

    def speeds(handler):
        return lambda pre, params: speed_vector(handler(pre, params))

    return predictive(
        speeds(impact), from_unit, u_hat, pre_fit, speed_vectors(post_fit), pre_eval,
        noise_from=None if noise_from is None else speeds(noise_from),
    )  # fmt: skip


def impact_calibration(pred: dict, post_real: Float[np.ndarray, "m 13"]) -> dict:
    """`clashx.learn.predictive_calibration` of `impact_predictive`'s σ against measured post-window states."""
    return predictive_calibration(pred, speed_vectors(post_real))

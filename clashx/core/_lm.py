"""Levenberg-Marquardt on the host, for residuals that are too costly to compile inside one search.

The baselines identify through MJX rollouts (the strike's contact phase, the cube's
trajectories): each evaluation of the residuals and their forward-mode Jacobian is one
jitted call, and the search around it runs here in NumPy.  Surrogate identification,
whose residuals are cheap, runs its whole multistart search in one jitted function instead
(`clashx.learn._identify`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def levenberg_marquardt(
    terms: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    z0: np.ndarray,
    *,
    iterations: int,
    damping: float = 1e-2,
    z_max: float = np.inf,
) -> tuple[np.ndarray, float, int]:
    """Minimise ‖r(z)‖² from `z0`.

    A trial that lowers the cost is kept (λ /= 3); otherwise λ *= 4 and the next trial
    steps from the best point again.  Steps are clipped to |z| ≤ `z_max`.

    Args:
        terms: z (k,) -> (residuals (m,), Jacobian (m, k)).
        z0: the start (k,).
        iterations: evaluations of `terms`, the start's included.
        damping: the initial λ (Marquardt's diagonal scaling, plus 1e-6 I).
        z_max: bound on every coordinate.

    Returns:
        (z, cost, trials): the best point, its ‖r‖², and the evaluations made.
    """
    z = np.asarray(z0, np.float64)
    r, jac = terms(z)
    cost, lam, trials = float(r @ r), damping, 1
    for _ in range(iterations - 1):
        jtj = jac.T @ jac
        a = jtj + lam * (np.diag(np.diag(jtj)) + 1e-6 * np.eye(len(z)))
        z_new = np.clip(z + np.linalg.solve(a, -jac.T @ r), -z_max, z_max)
        r_new, jac_new = terms(z_new)
        trials += 1
        cost_new = float(r_new @ r_new)
        if np.isfinite(cost_new) and cost_new < cost:
            z, r, jac, cost, lam = z_new, r_new, jac_new, cost_new, lam / 3
        else:
            lam *= 4
    return z, cost, trials

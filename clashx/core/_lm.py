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
) -> tuple[np.ndarray, np.ndarray, int]:
    """Minimise ‖r(z)‖² from every start of `z0` at once (the starts run in lockstep: one call of
    `terms` per trial evaluates all of them, so a batched simulator sees starts × examples worlds).

    Each start is its own search: a trial that lowers its cost is kept (its λ /= 3);
    otherwise its λ *= 4 and its next trial steps from its best point again.  Steps are
    clipped to |z| ≤ `z_max`.  A start's path is the one a search of that start alone takes.

    Args:
        terms: z (s, k) -> (residuals (s, m), Jacobians (s, m, k)).
        z0: the starts (s, k).
        iterations: evaluations of `terms`, the starts' included.
        damping: the initial λ (Marquardt's diagonal scaling, plus 1e-6 I).
        z_max: bound on every coordinate.

    Returns:
        (z (s, k), cost (s,), trials): each start's best point and its ‖r‖², and the evaluations
        of `terms` made (each evaluates every start).
    """
    z = np.atleast_2d(np.asarray(z0, np.float64))
    r, jac = (np.asarray(a, np.float64) for a in terms(z))
    cost = np.einsum("sm,sm->s", r, r)
    lam = np.full(len(z), float(damping))
    eye = np.eye(z.shape[1])
    for _ in range(iterations - 1):
        jtj = np.einsum("smk,sml->skl", jac, jac)
        diag = np.einsum("skk->sk", jtj)[:, :, None] * eye
        a = jtj + lam[:, None, None] * (diag + 1e-6 * eye)
        step = np.linalg.solve(a, -np.einsum("smk,sm->sk", jac, r)[..., None])[..., 0]
        z_new = np.clip(z + step, -z_max, z_max)
        r_new, jac_new = (np.asarray(a, np.float64) for a in terms(z_new))
        cost_new = np.einsum("sm,sm->s", r_new, r_new)
        keep = np.isfinite(cost_new) & (cost_new < cost)
        z, r, jac = (
            np.where(keep.reshape(-1, *[1] * (x.ndim - 1)), xn, x) for x, xn in ((z, z_new), (r, r_new), (jac, jac_new))
        )
        cost = np.where(keep, cost_new, cost)
        lam = np.where(keep, lam / 3, lam * 4)
    return z, cost, iterations

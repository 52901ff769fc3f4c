"""Identifying a scene's rigid impact law (`clashx.scenes.PairLaw`) from observed impacts.

The law has three parameters, (e_n, e_t, μ) (`clashx.scenes.law_space`); they are
fitted as the cube's rigid law is (`clashx.baselines.identify_rigid_impacts`):
CMA-ES over the law's unit box (`restarts` searches from the box's centre sharing
one batch per generation) on the mean relative error of the pair's post-window
velocities (`velocity_errors`: rotations counted as speeds), flat over the box.

The search is `clashx.core.cmaes_in_box`, the one `clashx.optimize` uses too.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, PRNGKeyArray, Result, cmaes_in_box
from ..scenes import LAW_HIGH, LAW_LOW, PairLaw
from ._pair_learn import PairScores, velocity_errors


@dataclasses.dataclass(frozen=True, repr=False)
class PairLawFit(Result):
    """The law's parameters that fit observed impacts (`identify_pair_law`).

    Attributes:
        params: (3,) the fitted (e_n, e_t, μ).
        loss: their mean relative error of the post-window velocities (`velocity_errors`).
        median_rel_err: the median of those errors.
        errors: (n,) each impact's relative error at `params`.
        history: (generations,) the best loss found up to each generation.
        n: impacts fitted.
    """

    params: np.ndarray
    loss: float
    median_rel_err: float
    errors: np.ndarray
    history: np.ndarray
    n: int


@eqx.filter_jit
def _law_posts(law: PairLaw, pre: Float[Array, "n d"], params: Float[Array, "k 3"]) -> Float[Array, "k n d"]:
    """The law at each of k parameter sets (vmap) on each of n impacts (vmap), compiled once per law."""
    return jax.vmap(jax.vmap(law, in_axes=(0, None)), in_axes=(None, 0))(pre, params)


def law_posts(law: PairLaw, pre: Float[np.ndarray, "n d"], params: Float[np.ndarray, "k 3"]) -> np.ndarray:
    """The law's post-window pair states of impacts `pre` (n, d) at each of k parameter sets (k, 3): (k, n, d),
    float64 (computed in the law's dtype)."""
    dtype = law.model.qpos0.dtype
    return np.asarray(_law_posts(law, jnp.asarray(pre, dtype), jnp.asarray(params, dtype)), np.float64)


def identify_pair_law(
    law: PairLaw,
    pre: Float[np.ndarray, "n d"],
    post: Float[np.ndarray, "n d"],
    *,
    key: PRNGKeyArray,
    population: int = 16,
    generations: int = 30,
    restarts: int = 3,
) -> PairLawFit:
    """The law's (e_n, e_t, μ) under which it best reproduces observed impacts (module docstring).

    Args:
        law: the scene's law (`clashx.scenes.pair_law(scene)`).
        pre, post: (n, d) pair states at each impact's touch and `law.window` s later.
        key: the search's PRNG key.
        population, generations, restarts: CMA-ES's candidates per generation, generations, and
            independent searches (as `clashx.core.cmaes_in_box`'s).

    Returns:
        A `PairLawFit`.

    Raises:
        ValueError: naming `pre` and `post` where they are not both (n ≥ 1, d) of the law's scene.
    """
    pre, post = np.asarray(pre, np.float64), np.asarray(post, np.float64)
    d = law.joints.size
    if pre.ndim != 2 or len(pre) == 0 or pre.shape != post.shape or pre.shape[1] != d:
        raise ValueError(
            f"identify_pair_law: pre {pre.shape} and post {post.shape} must both be (n ≥ 1, {d}), the pair states "
            f"of scene {law.scene.name!r}"
        )
    low, high = np.asarray(LAW_LOW), np.asarray(LAW_HIGH)

    def errors(params: np.ndarray) -> np.ndarray:  # (k, 3) -> (k, n)
        return np.stack([velocity_errors(law.scene, p, post) for p in law_posts(law, pre, params)])

    def losses(u: np.ndarray) -> np.ndarray:
        return errors(low + u * (high - low)).mean(-1)

    u, loss, history = cmaes_in_box(
        losses, np.full(3, 0.5), key=key, population=population, generations=generations, std_init=0.25,
        restarts=restarts,
    )  # fmt: skip
    params = low + np.asarray(u, np.float64) * (high - low)
    err = errors(params[None])[0]
    return PairLawFit(params, float(loss), float(np.median(err)), err, np.asarray(history, np.float64), len(pre))


def pair_law_scores(
    law: PairLaw, pre: Float[np.ndarray, "n d"], post: Float[np.ndarray, "n d"], params, alpha: float = 0.1
) -> PairScores:
    """α-accuracy and median of `velocity_errors` of the law at `params` (3,) on impacts (n, d); also of "no
    impact" (post = pre): `clashx.learn.pair_scores` for the law."""
    err = velocity_errors(law.scene, law_posts(law, pre, np.asarray(params, np.float64)[None])[0], post)
    still = velocity_errors(law.scene, np.asarray(pre, np.float64), np.asarray(post, np.float64))
    return PairScores(
        float(alpha), float(np.mean(err <= alpha)), float(np.median(err)), float(np.median(still)), int(len(err))
    )

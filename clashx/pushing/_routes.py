"""The sequential pushing task: routes, sub-goals, reward, termination and scoring (CLASH Fig. 6, Tables VI, VII).

Fixed by the strike lab's ROUTES.md: the semi-cylinder starts at (0, 0) with a
route's start yaw; one step is one strike to rest; a sub-goal is reached when
the rest pose is within `GOAL_TOL` of its position (and within `YAW_TOL` of its
yaw, where it has one); sub-goals are taken in order; the episode ends when
every sub-goal is reached, when the block rests outside the safe zone, or when
the strike budget is spent.

`advance` is the task's pure transition (jit / vmap): the environment
(`clashx.pushing.PushEnv`), the planner and the lab evaluation all score a
strike with it, so the reward and the success rule exist once.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..core import Array, Bool, Float, Int
from ..optimize import pose_error

SHAPE = "semi-cylinder"
SAFE_LOW = (-0.15, -0.25)  # m, the corridor's x and y bounds (block frame origin)
SAFE_HIGH = (0.90, 0.25)
GOAL_TOL = 0.04  # m
YAW_TOL = 0.5  # rad
REWARD_SIGMA = 0.1  # m: σ of the dense position reward R1 = exp(-Δx² / σ²), about one strike's reach
OUT_PENALTY = -10.0  # r0 of R4: resting outside the safe zone
YAW_LENGTH = 0.1  # m per rad: where a sub-goal has a yaw, R1's Δx counts the yaw error at this length


class Route(eqx.Module):
    """One route of ROUTES.md.

    Attributes:
        number: 1, 2 or 3.
        goals: (m, 3) sub-goals x, y (m), yaw (rad; 0 where none is asked).
        has_yaw: (m,) whether the sub-goal's yaw counts.
        budget: strikes at most.
        random_yaw: the start yaw is uniform in [-π, π) (else 0).
    """

    number: int = eqx.field(static=True)
    goals: Float[Array, "m 3"]
    has_yaw: Bool[Array, "m"]
    budget: int = eqx.field(static=True)
    random_yaw: bool = eqx.field(static=True)

    @property
    def n_goals(self) -> int:
        """Sub-goals in the route."""
        return int(self.goals.shape[0])


def route(number: int) -> Route:
    """The route `number` (1, 2 or 3) of ROUTES.md."""
    half_pi = math.pi / 2
    table = {
        1: ([(0.35, 0.00, 0.0)], [False], 12, True),
        2: ([(0.20, 0.10, 0.0), (0.40, -0.05, 0.0)], [False, False], 20, True),
        3: ([(0.15, -0.08, half_pi), (0.30, 0.08, half_pi), (0.45, 0.00, half_pi)], [True] * 3, 30, False),
    }
    if number not in table:
        raise ValueError(f"--route {number}: there are routes 1, 2 and 3 (ROUTES.md)")
    goals, has_yaw, budget, random_yaw = table[number]
    return Route(number, jnp.asarray(goals, jnp.float32), jnp.asarray(has_yaw), budget, random_yaw)


def evaluation_yaws(number: int, episodes: int = 10) -> np.ndarray:
    """The start yaws of a route's evaluation episodes: `default_rng(1000 + route)` draws (ROUTES.md); 0 on route 3."""
    if not route(number).random_yaw:
        return np.zeros(episodes)
    return np.random.default_rng(1000 + number).uniform(-math.pi, math.pi, episodes)


def in_safe_zone(pose: Float[Array, "3"], margin: float = 0.0) -> Bool[Array, ""]:
    """Whether the block frame's origin lies in the corridor, at least `margin` (m) inside its edges (a planner's
    room for prediction error; the task's rule is margin 0)."""
    lo, hi = jnp.asarray(SAFE_LOW) + margin, jnp.asarray(SAFE_HIGH) - margin
    return jnp.all((pose[:2] >= lo) & (pose[:2] <= hi))


def reached(r: Route, goal: Int[Array, ""], pose: Float[Array, "3"]) -> Bool[Array, ""]:
    """Whether `pose` reaches sub-goal `goal` (position within GOAL_TOL, yaw within YAW_TOL where asked)."""
    pos, yaw = pose_error(pose, r.goals[goal])
    return (pos <= GOAL_TOL) & ((yaw <= YAW_TOL) | ~r.has_yaw[goal])


class Outcome(eqx.Module):
    """What one strike did to the task.

    Attributes:
        reward: R1 + R2 + R3 + R4 of CLASH Table VI.
        goal: the current sub-goal's index after the strike (n_goals once all are reached).
        reached: the strike reached the current sub-goal.
        out: the block rests outside the safe zone.
        done: the episode ends (all reached, out, or the budget spent).
        success: every sub-goal reached, in the zone, within the budget.
    """

    reward: Float[Array, ""]
    goal: Int[Array, ""]
    reached: Bool[Array, ""]
    out: Bool[Array, ""]
    done: Bool[Array, ""]
    success: Bool[Array, ""]


def advance(r: Route, goal: Int[Array, ""], used: Int[Array, ""], pose: Float[Array, "3"]) -> Outcome:
    """Score the rest pose after a strike (CLASH Table VI's reward; ROUTES.md's termination).

    Args:
        r: the route.
        goal: the current sub-goal's index before the strike (< n_goals).
        used: strikes used, this one included (1 after the first).
        pose: the block's rest pose after the strike, world (x, y, yaw).

    Returns:
        The `Outcome`. R1 = exp(-Δx² / REWARD_SIGMA²) toward the sub-goal that was current (Δx: the position
        error, and where the sub-goal has a yaw the yaw error times YAW_LENGTH, so that the dense reward also
        leads toward the orientation R2 pays for); R2 = (1 + cos Δyaw) / 2
        when a sub-goal with a yaw is reached; R3 = budget - used when a sub-goal is reached; R4 = OUT_PENALTY
        when the block rests outside the safe zone.
    """
    goal = jnp.asarray(goal, jnp.int32)
    g = r.goals[goal]
    pos, yaw = pose_error(pose, g)
    d2 = pos**2 + jnp.where(r.has_yaw[goal], (YAW_LENGTH * yaw) ** 2, 0.0)
    hit = reached(r, goal, pose)
    out = ~in_safe_zone(pose)
    r1 = jnp.exp(-d2 / REWARD_SIGMA**2)
    r2 = jnp.where(hit & r.has_yaw[goal], 0.5 * (1.0 + jnp.cos(pose[2] - g[2])), 0.0)
    r3 = jnp.where(hit, jnp.asarray(r.budget - used, jnp.float32), 0.0)
    r4 = jnp.where(out, OUT_PENALTY, 0.0)
    new_goal = goal + hit.astype(jnp.int32)
    finished = new_goal >= r.n_goals
    done = finished | out | (used >= r.budget)
    return Outcome(
        reward=r1 + r2 + r3 + r4,
        goal=new_goal,
        reached=hit,
        out=out,
        done=done,
        success=finished & ~out,
    )


def table_vii(reached_goals: np.ndarray, success: np.ndarray, n_goals: int) -> dict[str, float | str]:
    """SR and SGCR of a route's episodes (CLASH Table VII).

    Args:
        reached_goals: (episodes,) sub-goals reached in each episode.
        success: (episodes,) whether each episode succeeded.
        n_goals: the route's sub-goals.

    Returns:
        {"sr": successes / episodes, "sgcr": sub-goals reached / all, "sr_text": "k/n", "sgcr_text": "j/m"}.
    """
    reached_goals, success = np.asarray(reached_goals), np.asarray(success, bool)
    n = len(success)
    return {
        "sr": float(success.mean()) if n else 0.0,
        "sgcr": float(reached_goals.sum() / (n * n_goals)) if n else 0.0,
        "sr_text": f"{int(success.sum())}/{n}",
        "sgcr_text": f"{int(reached_goals.sum())}/{n * n_goals}",
    }

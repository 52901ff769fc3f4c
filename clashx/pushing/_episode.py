"""One closed-loop pushing episode on a rig: a controller chooses each strike from the observed pose.

The rig is any `strike(theta, theta1, v_pre) -> dict` that acts on the block
where it lies and returns, as the strike lab (`strike_lab.Lab.strike`) does,
its motion-capture track `block_pose` (n, 3) and the rest pose `final_pose`
(3,).  The controller sees what a real rig gives: the last sample of the
previous strike's track (noisy; the start pose before the first strike) and
the current sub-goal.  Success and sub-goals are scored on the rest pose with
the route's rule (`_routes.advance`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from ..optimize import clip_to_ranges
from ..scenes import geometry as geo
from . import _routes
from ._env import Task, observe
from ._response import StrikeTable, compose, lookup, strike_of_action

Controller = Callable[[Task, np.ndarray], np.ndarray]  # (task, observed pose) -> action in [-1, 1]^3
Rig = Callable[[float, float, float], dict[str, Any]]


def policy_controller(policy, r: _routes.Route) -> Controller:
    """A controller from a trained policy (`clashx.pushing.Policy`): its deterministic action."""

    def act(task: Task, seen: np.ndarray) -> np.ndarray:
        return np.asarray(policy.act(observe(r, task, jnp.asarray(seen, jnp.float32))))

    return act


def run_episode(act: Controller, strike: Rig, r: _routes.Route, start: np.ndarray) -> dict[str, Any]:
    """Run one episode of route `r` from rest pose `start` (x, y, yaw) until it ends.

    Returns:
        {"success", "reached" (sub-goals), "strikes", "out", "poses" (rest poses, (k + 1, 3), start first),
        "seen" (observed poses), "actions"}.
    """
    start = np.asarray(start, np.float64)
    task = Task(
        pose=jnp.asarray(start, jnp.float32),
        goal=jnp.asarray(0, jnp.int32),
        used=jnp.asarray(0, jnp.int32),
        draw=jnp.asarray(0, jnp.int32),
    )
    seen, poses, seen_all, actions = start, [start], [start], []
    success = out = False
    while True:
        a = np.clip(np.asarray(act(task, seen), np.float64), -1.0, 1.0)
        s = clip_to_ranges(strike_of_action(jnp.asarray(a, jnp.float32)))  # float32 can step past a range
        rec = strike(*map(float, s))
        rest = np.asarray(rec["final_pose"], np.float64)
        seen = np.asarray(rec["block_pose"], np.float64)[-1]
        used = int(task.used) + 1
        o = _routes.advance(r, task.goal, jnp.asarray(used), jnp.asarray(rest, jnp.float32))
        task = Task(pose=jnp.asarray(rest, jnp.float32), goal=o.goal, used=jnp.asarray(used), draw=task.draw)
        actions.append(a)
        poses.append(rest)
        seen_all.append(seen)
        if bool(o.done):
            success, out = bool(o.success), bool(o.out)
            break
    return {
        "success": success,
        "reached": int(task.goal),
        "strikes": int(task.used),
        "out": out,
        "poses": np.stack(poses),
        "seen": np.stack(seen_all),
        "actions": np.stack(actions),
    }


def table_rig(table: StrikeTable, draw: int, start: np.ndarray) -> Rig:
    """A rig made of a table: each strike moves the block where it lies by draw `draw`'s response (no noise).

    What "in simulation" means for a controller of the pushing task: the same
    episode loop (`run_episode`) with the simulator's table in the lab's place.
    """
    pose = [np.asarray(start, np.float64)]
    lo, hi = np.asarray(geo.STRIKE_LOW), np.asarray(geo.STRIKE_HIGH)

    def strike(theta: float, theta1: float, v_pre: float) -> dict[str, Any]:
        a = 2.0 * (np.array([theta, theta1, v_pre]) - lo) / (hi - lo) - 1.0
        local = lookup(table, jnp.asarray(draw), jnp.asarray(a, jnp.float32))
        pose[0] = np.asarray(compose(jnp.asarray(pose[0], jnp.float32), local), np.float64)
        return {"final_pose": pose[0], "block_pose": pose[0][None]}

    return strike

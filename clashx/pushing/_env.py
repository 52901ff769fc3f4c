"""Sequential pushing as a brax environment: one step is one strike to rest (ROUTES.md).

`PushEnv` follows brax's `Env` conventions (`reset(rng) -> State`,
`step(State, action) -> State`, pure and jit/vmap-able), so
`brax.training.agents.ppo` trains on it as on any brax environment.

* Action: [-1, 1]³ mapped linearly onto SCENE.md's strike ranges (θ, θ1, v_pre).
* Step: the simulator's rest pose after that strike, in the frame of the
  block's pose before it (`response`: a tabulated simulator, `lookup`, or the
  exact one through `jax.pure_callback`, `exact_response`), composed with the
  pose; then the route's reward and termination (`_routes.advance`).
* Observation (13 numbers, all in the block's frame where a direction is
  meant): the current sub-goal's offset and the next one's (/ REWARD_SIGMA),
  the sub-goal's yaw relative to the block's (cos, sin, times whether it
  counts) and whether it counts, the block's position in the corridor and its
  yaw (cos, sin), the sub-goal index and the strikes left (fractions).
* Domain randomisation: with `randomize`, each episode draws one of the
  table's parameter draws at reset (the identified values ± their σ).

The task's state (pose, sub-goal, strikes used, draw) is the brax State's
`pipeline_state`, so brax's auto-reset wrapper restores it with the observation.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from brax.envs.base import Env, State

from ..core import Array, Float, Int
from ..optimize import to_start_frame
from . import _routes
from ._response import StrikeTable, compose, lookup

OBS_SIZE = 13
CORRIDOR_SCALE = 0.5  # m: the block's world position is observed in these units


class Task(eqx.Module):
    """What evolves in an episode (the brax State's pipeline_state).

    Attributes:
        pose: the block's rest pose, world (x, y, yaw).
        goal: the current sub-goal's index (n_goals once all are reached).
        used: strikes used.
        draw: the parameter draw of the episode (row of the table).
    """

    pose: Float[Array, "3"]
    goal: Int[Array, ""]
    used: Int[Array, ""]
    draw: Int[Array, ""]


def observe(r: _routes.Route, task: Task, pose: Float[Array, "3"] | None = None) -> Float[Array, "13"]:
    """The policy's observation of `task`, with the block at `pose` (default: the task's; the lab passes mocap's)."""
    pose = task.pose if pose is None else pose
    g = jnp.minimum(task.goal, r.n_goals - 1)
    nxt = jnp.minimum(task.goal + 1, r.n_goals - 1)
    here = to_start_frame(r.goals[g], pose)  # the sub-goal in the block's frame
    then = to_start_frame(r.goals[nxt], pose)
    yaw_on = r.has_yaw[g].astype(jnp.float32)
    return jnp.concatenate(
        [
            here[:2] / _routes.REWARD_SIGMA,
            then[:2] / _routes.REWARD_SIGMA,
            yaw_on * jnp.stack([jnp.cos(here[2]), jnp.sin(here[2])]),
            yaw_on[None],
            pose[:2] / CORRIDOR_SCALE,
            jnp.stack([jnp.cos(pose[2]), jnp.sin(pose[2])]),
            jnp.stack([task.goal / r.n_goals, (r.budget - task.used) / r.budget]).astype(jnp.float32),
        ]
    )


class PushEnv(Env):
    """One route of sequential pushing on one simulator (a brax `Env`).

    Args:
        route: the `Route` (`clashx.pushing.route(1|2|3)`).
        table: the simulator's tabulated response (`build_table`).
        randomize: draw the episode's parameters among the table's draws at reset (else always draw 0,
            the identified values).
        response: an alternative step, `(action) -> rest pose in the start frame` (e.g. `exact_response`);
            it replaces the table's lookup (and ignores the draw).
    """

    def __init__(
        self,
        route: _routes.Route,
        table: StrikeTable,
        *,
        randomize: bool = True,
        response: Callable[[Float[Array, "3"]], Float[Array, "3"]] | None = None,
    ):
        self.route = route
        self.table = table
        self.randomize = randomize
        self.response = response

    def reset(self, rng: jax.Array) -> State:
        """A new episode: the block at (0, 0) with the route's start yaw, the first sub-goal current."""
        k_yaw, k_draw = jax.random.split(rng)
        yaw = jax.random.uniform(k_yaw, (), minval=-jnp.pi, maxval=jnp.pi) if self.route.random_yaw else 0.0
        draw = jax.random.randint(k_draw, (), 0, self.table.draws) if self.randomize else jnp.asarray(0)
        task = Task(
            pose=jnp.stack([0.0, 0.0, jnp.asarray(yaw, jnp.float32)]),
            goal=jnp.asarray(0, jnp.int32),
            used=jnp.asarray(0, jnp.int32),
            draw=jnp.asarray(draw, jnp.int32),
        )
        zero = jnp.zeros(())
        metrics = {"reached": zero, "success": zero, "out": zero}
        return State(task, observe(self.route, task), zero, zero, metrics, {})

    def step(self, state: State, action: jax.Array) -> State:
        """One strike to rest; reward, termination and metrics from the route."""
        task: Task = state.pipeline_state
        local = self.response(action) if self.response is not None else lookup(self.table, task.draw, action)
        pose = compose(task.pose, local)
        used = task.used + 1
        out = _routes.advance(self.route, task.goal, used, pose)
        nxt = Task(pose=pose, goal=out.goal, used=used, draw=task.draw)
        metrics = {
            **state.metrics,  # brax's wrappers may keep their own entries here
            "reached": out.reached.astype(jnp.float32),
            "success": out.success.astype(jnp.float32),
            "out": out.out.astype(jnp.float32),
        }
        return state.replace(
            pipeline_state=nxt,
            obs=observe(self.route, nxt),
            reward=out.reward,
            done=out.done.astype(jnp.float32),
            metrics=metrics,
        )

    @property
    def observation_size(self) -> int:
        """13 (see the module's docstring)."""
        return OBS_SIZE

    @property
    def action_size(self) -> int:
        """3: θ, θ1, v_pre, each in [-1, 1]."""
        return 3

    @property
    def backend(self) -> str:
        """The simulator behind the step ("mujoco" or "clashx")."""
        return self.table.simulator

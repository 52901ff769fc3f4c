"""A planning baseline beside the policies: receding-horizon CMA-ES over the same simulator.

At every step, `plan_strike` searches `horizon` strikes ahead with evosax's
CMA-ES (in action space, [-1, 1]³ per strike, candidates clipped before they
are simulated and their clip distance added to the cost, as in
`clashx.optimize`) through the simulator's tabulated response (`lookup`, the
table the policy of that simulator trains on), and returns the first strike
of the best sequence.  The cost of a sequence toward the current sub-goal g is

    min over h ≤ horizon of  ‖p_h − g‖ + w · |wrap(yaw_h − yaw_g)| [g has a yaw] + OUT_COST · [p_h left the zone]

so a sequence that reaches g early is not charged for moving past it.  The
whole search is one jitted `lax.scan` (the table is a JAX array), a few
milliseconds a strike on a CPU; the lab episode is the slow part.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from evosax.algorithms import CMA_ES

from ..core import Array, Float, Int, PRNGKeyArray
from ..optimize import pose_error
from . import _routes
from ._env import Task
from ._response import StrikeTable, compose, lookup

OUT_COST = 1.0  # m: what resting outside the corridor costs a sequence


class PlannerConfig(eqx.Module):
    """Settings of the receding-horizon search.

    Attributes:
        horizon: strikes planned ahead (the first is executed).
        population: CMA-ES candidates per generation.
        generations: CMA-ES generations.
        std_init: initial step size in action units ([-1, 1]).
        yaw_weight: metres one radian of yaw error costs where the sub-goal has a yaw.
    """

    horizon: int = eqx.field(static=True, default=2)
    population: int = eqx.field(static=True, default=32)
    generations: int = eqx.field(static=True, default=25)
    std_init: float = eqx.field(static=True, default=0.5)
    yaw_weight: float = eqx.field(static=True, default=_routes.YAW_LENGTH)


def sequence_cost(
    table: StrikeTable, draw: Int[Array, ""], r: _routes.Route, task: Task, actions: Float[Array, "h 3"], yaw_weight
) -> Float[Array, ""]:
    """The cost of striking `actions` in turn from `task`'s pose toward its current sub-goal (module docstring)."""
    g = r.goals[jnp.minimum(task.goal, r.n_goals - 1)]
    yaw_on = r.has_yaw[jnp.minimum(task.goal, r.n_goals - 1)]

    def strike(pose, a):
        pose = compose(pose, lookup(table, draw, a))
        pos, yaw = pose_error(pose, g)
        c = pos + jnp.where(yaw_on, yaw_weight * yaw, 0.0)
        c = c + jnp.where(_routes.in_safe_zone(pose), 0.0, OUT_COST)
        return pose, c

    _, costs = jax.lax.scan(strike, task.pose, actions)
    return jnp.min(costs)


@eqx.filter_jit
def plan_strike(
    table: StrikeTable, r: _routes.Route, task: Task, config: PlannerConfig, *, key: PRNGKeyArray
) -> tuple[Float[Array, "3"], Float[Array, ""]]:
    """The next strike's action ([-1, 1]³) for `task` by receding-horizon CMA-ES, and its sequence's cost (m).

    Plans on parameter draw 0 of `table` (the identified values).
    """
    dim = 3 * config.horizon
    es = CMA_ES(population_size=config.population, solution=jnp.zeros(dim))
    params = es.default_params.replace(std_init=config.std_init)
    k_init, key = jax.random.split(key)
    state = es.init(k_init, jnp.zeros(dim), params)
    draw = jnp.asarray(0)

    def cost(x):
        a = jnp.clip(x, -1.0, 1.0)
        return sequence_cost(table, draw, r, task, a.reshape(config.horizon, 3), config.yaw_weight) + jnp.sum(
            (x - a) ** 2
        )

    def generation(carry, k):
        state, best_x, best_f = carry
        k_ask, k_tell = jax.random.split(k)
        pop, state = es.ask(k_ask, state, params)
        fit = jax.vmap(cost)(pop)
        state, _ = es.tell(k_tell, pop, fit, state, params)
        i = jnp.argmin(fit)
        better = fit[i] < best_f
        return (state, jnp.where(better, pop[i], best_x), jnp.where(better, fit[i], best_f)), None

    x0 = jnp.zeros(dim)
    (_, best_x, best_f), _ = jax.lax.scan(generation, (state, x0, cost(x0)), jax.random.split(key, config.generations))
    return jnp.clip(best_x[:3], -1.0, 1.0), best_f

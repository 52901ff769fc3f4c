"""A planner over the whole remaining route: beam search through the tabulated response, and online adaptation.

`search_strike` plans every strike still to come, not only the next two: a
beam of `beam` strike sequences is grown `depth` strikes deep (or to the
strikes left), each node expanded by the same `actions` (a grid over the strike
ranges, `action_set`), scored by the route's rule (`_routes.advance`: sub-goals
reached in order, the corridor, the budget) and by what remains, in strikes:

    cost = strikes used + W_j(pose) + TIE_BREAK · ‖p − g_j‖,
           ∞ over the budget or closer than PLAN_WALL_MARGIN to the corridor's edges

where W_j is the value-iterated number of strikes that finish the route from
that pose with sub-goal j current (`_value.route_value_iteration`: it knows
the turns, the walls and the arrival yaw a later sub-goal needs).  A plan is
judged at its end: the first strike returned is that of the cheapest node of
the deepest depth that still has live nodes, or of a cheaper plan that
completes the route.  A strike's response does not depend on where the block
lies (`_response`), so the responses of the actions are looked up once and a
depth is one compose over beam × actions.

Online adaptation (`Belief`, `update_belief`): the table holds the response at
the identified parameters and at draws from their posterior (`param_draws`).
After each real strike, the observed displacement (the mocap pose after the
strike in the frame of the pose before it) weighs each draw by its
likelihood, a Gaussian of ADAPT_POS_SIGMA and ADAPT_YAW_SIGMA; the planner
then plans on the posterior-weighted mean response.  This refits every
parameter of the draws (the slide's μ2, torsion and centre of mass among them)
on the lab's own rest poses, with the ten fit strikes' posterior as the prior.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, Int
from ..optimize import pose_error, to_start_frame, wrap
from . import _routes
from ._env import Task
from ._response import StrikeTable, compose, lookup
from ._value import ROUTE_ACTIONS, ROUTE_GRID, RouteToGo, route_strikes_left, route_value_iteration

ACTION_GRID = (25, 9, 9)  # actions along θ, θ1, v_pre (the table's θ and θ1 grid points; v_pre every 1.5 grid steps)
TIE_BREAK = 0.5  # strikes per metre to the current sub-goal: orders plans the value grid scores alike
# m: plans keep this far inside the corridor's edges (a strike's position error on a fresh lab strike is 3-4 mm
# median, and a strike that ends 1 cm inside the wall on the table can end outside it in the lab)
PLAN_WALL_MARGIN = 0.02
ADAPT_POS_SIGMA = 0.01  # m: a draw's likelihood, position (about a tenth of a strike's reach)
ADAPT_YAW_SIGMA = 0.05  # rad: and yaw (about a tenth of a strike's largest turn)


class SearchConfig(eqx.Module):
    """Settings of the whole-route search.

    Attributes:
        beam: nodes kept per depth.
        depth: strikes planned ahead at most (the strikes left bound it too).
        grid: actions per axis (θ, θ1, v_pre) of `action_set`.
        value_grid: the cost-to-go's grid points along x, y, yaw (`route_value_iteration`).
        value_actions: the actions per axis its value iteration backs up over (coarser than `grid`).
        wall_margin: m, how far inside the corridor's edges a plan keeps the block (the task allows 0).
    """

    beam: int = eqx.field(static=True, default=256)
    depth: int = eqx.field(static=True, default=10)
    grid: tuple[int, int, int] = eqx.field(static=True, default=ACTION_GRID)
    value_grid: tuple[int, int, int] = eqx.field(static=True, default=ROUTE_GRID)
    value_actions: tuple[int, int, int] = eqx.field(static=True, default=ROUTE_ACTIONS)
    wall_margin: float = eqx.field(static=True, default=PLAN_WALL_MARGIN)


def action_set(grid: tuple[int, int, int] = ACTION_GRID) -> Float[Array, "a 3"]:
    """Actions in [-1, 1]³ on a regular grid, θ slowest."""
    axes = [jnp.linspace(-1.0, 1.0, n) for n in grid]
    return jnp.stack(jnp.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)


class Belief(eqx.Module):
    """The planner's belief over the table's parameter draws.

    Attributes:
        log_weight: (k,) unnormalised log posterior weight of each draw.
    """

    log_weight: Float[Array, " k"]

    @property
    def weights(self) -> Float[Array, " k"]:
        """Normalised weights."""
        return jax.nn.softmax(self.log_weight)


def prior_belief(table: StrikeTable, *, identified_only: bool = False) -> Belief:
    """Equal weights on every draw (the posterior of the ten fit strikes), or all on draw 0 (the identified values)."""
    w = jnp.zeros(table.draws)
    if identified_only:
        w = jnp.full(table.draws, -jnp.inf).at[0].set(0.0)
    return Belief(w)


@eqx.filter_jit
def update_belief(
    table: StrikeTable, belief: Belief, action: Float[Array, "3"], before: Float[Array, "3"], after: Float[Array, "3"]
) -> Belief:
    """Weigh each draw by the likelihood of the observed displacement from `before` to `after` (world poses)."""
    seen = to_start_frame(after, before)
    pred = jax.vmap(lambda k: lookup(table, k, action))(jnp.arange(table.draws))
    d_pos = jnp.linalg.norm(pred[:, :2] - seen[:2], axis=-1) / ADAPT_POS_SIGMA
    d_yaw = jnp.abs(wrap(pred[:, 2] - seen[2])) / ADAPT_YAW_SIGMA
    return Belief(belief.log_weight - 0.5 * (d_pos**2 + d_yaw**2))


@eqx.filter_jit
def mean_responses(table: StrikeTable, belief: Belief, actions: Float[Array, "a 3"]) -> Float[Array, "a 3"]:
    """The belief-weighted response of every action (rest pose in the start frame), (a, 3)."""
    per_draw = jax.vmap(lambda k: jax.vmap(lambda a: lookup(table, k, a))(actions))(jnp.arange(table.draws))
    w = belief.weights[:, None]
    xy = jnp.tensordot(belief.weights, per_draw[..., :2], axes=1)
    yaw = jnp.arctan2((w * jnp.sin(per_draw[..., 2])).sum(0), (w * jnp.cos(per_draw[..., 2])).sum(0))
    return jnp.concatenate([xy, yaw[:, None]], -1)


def route_value(table: StrikeTable, belief: Belief, r: _routes.Route, config: SearchConfig) -> RouteToGo:
    """The search's cost-to-go: strikes to finish the route from any pose (`route_value_iteration`), on the
    belief's mean responses over the coarser `config.value_actions` grid."""
    responses = mean_responses(table, belief, action_set(config.value_actions))
    return route_value_iteration(responses, r, grid=config.value_grid, margin=config.wall_margin)


def _remaining(r: _routes.Route, v: RouteToGo, goal: Int[Array, ""], pose: Float[Array, "3"]) -> Float[Array, ""]:
    """Strikes still needed from `pose` with `goal` current, and TIE_BREAK strikes per metre to that sub-goal
    (which orders plans the grid scores alike)."""
    pos, _ = pose_error(pose, r.goals[jnp.minimum(goal, r.n_goals - 1)])
    return route_strikes_left(v, r, goal, pose) + jnp.where(goal >= r.n_goals, 0.0, TIE_BREAK * pos)


@eqx.filter_jit
def search_strike(
    responses: Float[Array, "a 3"],
    actions: Float[Array, "a 3"],
    r: _routes.Route,
    value: RouteToGo,
    task: Task,
    config: SearchConfig,
) -> tuple[Float[Array, "3"], Float[Array, ""], Float[Array, "d 3"]]:
    """The next strike's action ([-1, 1]³) of the best whole-route plan from `task`, that plan's cost and its poses.

    Args:
        responses: (a, 3) each action's rest pose in the start frame (`mean_responses`, or one draw's).
        actions: (a, 3) the actions (`action_set`).
        r: the route; value: its cost-to-go (`route_value`, of the same responses or near them).
        task: the block's pose (observed), the current sub-goal and the strikes used.
        config: beam width, depth.

    Returns:
        (action, cost, plan): cost is in strikes (used + still needed); plan is (depth, 3), the predicted rest
        pose after each planned strike, NaN past the plan's end.
    """
    n_act = actions.shape[0]
    b, depth = config.beam, config.depth
    inf = jnp.asarray(jnp.inf, jnp.float32)
    pose = jnp.broadcast_to(task.pose, (b, 3))
    goal = jnp.broadcast_to(task.goal, (b,))
    used = jnp.broadcast_to(task.used, (b,))
    alive = jnp.arange(b) == 0  # one root
    seq = jnp.zeros((b, depth), jnp.int32)
    # (cost, actions, length): the cheapest plan that completes the route, and the cheapest of the deepest depth
    # that still has a live node; a plan is judged at its end, so a strike that looks good but leads into the
    # corridor's wall loses to one whose descendants get on
    empty = (inf, jnp.zeros(depth, jnp.int32), jnp.asarray(0, jnp.int32))
    best = (empty, empty)

    def expand(carry, d):
        pose, goal, used, alive, seq, best = carry
        new_pose = jax.vmap(lambda p: jax.vmap(lambda loc: compose(p, loc))(responses))(pose)  # (b, a, 3)
        new_used = used + 1
        out = jax.vmap(lambda g, u, ps: jax.vmap(lambda p: _routes.advance(r, g, u, p))(ps))(goal, new_used, new_pose)
        remaining = jax.vmap(jax.vmap(lambda g, p: _remaining(r, value, g, p)))(out.goal, new_pose)
        cost = remaining + new_used[:, None].astype(jnp.float32)
        clear = jax.vmap(jax.vmap(lambda p: _routes.in_safe_zone(p, config.wall_margin)))(new_pose)
        ok = alive[:, None] & ~out.out & clear & (new_used[:, None] <= r.budget)
        cost = jnp.where(ok, cost, inf).reshape(-1)
        neg, idx = jax.lax.top_k(-cost, b)
        parent, act = idx // n_act, idx % n_act
        pose = new_pose.reshape(-1, 3)[idx]
        goal = out.goal.reshape(-1)[idx]
        used = new_used[parent]
        seq = seq[parent].at[:, d].set(act.astype(jnp.int32))
        # a node that finished the route is complete: it competes at its own cost and grows no further
        alive = jnp.isfinite(neg) & (goal < r.n_goals)
        done, leaf = best
        complete = jnp.where(alive, -jnp.inf, neg)
        i = jnp.argmax(complete)  # the cheapest complete node of this depth
        better = -complete[i] < done[0]
        done = tuple(jnp.where(better, new, old) for new, old in zip((-neg[i], seq[i], d + 1), done, strict=True))
        j = jnp.argmax(jnp.where(alive, neg, -jnp.inf))  # the cheapest live node of this depth
        deeper = jnp.any(alive)
        leaf = tuple(jnp.where(deeper, new, old) for new, old in zip((-neg[j], seq[j], d + 1), leaf, strict=True))
        return (pose, jnp.minimum(goal, r.n_goals - 1), used, alive, seq, (done, leaf)), None

    carry = (pose, goal, used, alive, seq, best)
    (*_, (done, leaf)), _ = jax.lax.scan(expand, carry, jnp.arange(depth))  # type: ignore[arg-type]
    pick = done[0] <= leaf[0]
    cost, plan_idx, length = (jnp.where(pick, a, b) for a, b in zip(done, leaf, strict=True))
    # no feasible plan (every strike leaves the corridor or the budget is spent): the strike that ends nearest
    nearest = jnp.argmin(jax.vmap(lambda loc: _remaining(r, value, task.goal, compose(task.pose, loc)))(responses))
    plan_idx = jnp.where(jnp.isfinite(cost), plan_idx, plan_idx.at[0].set(nearest))
    length = jnp.where(jnp.isfinite(cost), length, 1)

    def walk(p, k):
        nxt = compose(p, responses[plan_idx[k]])
        return nxt, jnp.where(k < length, nxt, jnp.nan)

    _, plan = jax.lax.scan(walk, task.pose, jnp.arange(depth))
    return actions[plan_idx[0]], cost, plan


class SearchController:
    """A controller (`run_episode`'s) planning each strike by `search_strike`, adapting its belief if `adapt`.

    Without adaptation it plans on the identified values (draw 0).  With it, it
    starts from the draws' prior and reweighs them after every strike from the
    observed poses before and after (`update_belief`).  Call `reset()` between
    episodes; `belief` holds the current weights and `plans` each strike's
    planned route (`search_strike`'s poses).

    Measured on three strike labs (README, "Sequential pushing"), adaptation
    added nothing, and on one lab's route 3 it failed every episode: its
    cost-to-go stays that of the prior's mixture while the belief collapses
    onto one draw.  Plan without it by default.

    Args:
        table: the simulator's tabulated response (its draws are the adaptation's hypotheses).
        r: the route.
        config: `SearchConfig`.
        adapt: reweigh the draws online.
        value: the cost-to-go (`route_value` of the table, the starting belief, the route and config), when
            it is at hand: it takes about 10 s per sub-goal to compute.
    """

    def __init__(
        self,
        table: StrikeTable,
        r: _routes.Route,
        config: SearchConfig | None = None,
        *,
        adapt: bool,
        value: RouteToGo | None = None,
    ):
        self.table, self.route, self.adapt = table, r, adapt
        self.config = config or SearchConfig()
        self.actions = action_set(self.config.grid)
        self.reset()
        # the cost-to-go of the responses it starts from, kept as the belief moves: a cost-to-go only ranks plans
        # whose strikes the search looks up on the current belief
        self.value = route_value(table, self.belief, r, self.config) if value is None else value

    def reset(self) -> None:
        """Back to the prior, for a new episode."""
        self.belief = prior_belief(self.table, identified_only=not self.adapt)
        self.last: tuple[np.ndarray, np.ndarray] | None = None
        self.plans: list[np.ndarray] = []  # the planned rest poses at each strike of the episode
        self.responses = mean_responses(self.table, self.belief, self.actions)

    def __call__(self, task: Task, seen: np.ndarray) -> np.ndarray:
        """The next action ([-1, 1]³) from the observed pose `seen` (the task's sub-goal and strikes used)."""
        seen = np.asarray(seen, np.float64)
        if self.adapt and self.last is not None:
            a, before = self.last
            self.belief = update_belief(
                self.table, self.belief, jnp.asarray(a, jnp.float32), jnp.asarray(before, jnp.float32),
                jnp.asarray(seen, jnp.float32),
            )  # fmt: skip
            self.responses = mean_responses(self.table, self.belief, self.actions)
        now = Task(pose=jnp.asarray(seen, jnp.float32), goal=task.goal, used=task.used, draw=task.draw)
        action, _, plan = search_strike(self.responses, self.actions, self.route, self.value, now, self.config)
        out = np.asarray(action, np.float64)
        self.last = (out, seen)
        self.plans.append(np.asarray(plan, np.float64))
        return out

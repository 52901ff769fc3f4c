"""Strikes to go: value iteration over the block's pose in the corridor, the whole-route search's cost-to-go.

A strike's response does not depend on where the block lies (`_response`):
one strike with response (d, Δψ) (the rest pose in the frame of the pose
before it) takes the block from s = (x, y, ψ) to s' = compose(s, response).
So the task is a deterministic decision process on three numbers, and
`route_value_iteration` solves Bellman's equation for the least number of
strikes that finish a route, one grid per sub-goal j (the current one):

    W_j(s) = min(cap, 1 + min_a { cap if s' leaves the corridor;
                                   W_{j+1}(s') if s' reaches sub-goal j (0 after the last);
                                   W_j(s') otherwise }),

on a grid over the corridor (x, y) and yaw (periodic), trilinearly
interpolated between grid points, from W = 0 upward (each sweep settles one
more strike) until no value moves by more than `VALUE_TOL`; cap = budget + 1
means "not within the budget".  Sub-goals are solved last to first.

This is what the search's cost-to-go used to approximate by hand (the distance,
plus a turn term): the grid knows that a block whose arc faces away from the
sub-goal must be turned first, by how much a strike can turn it, which strikes
turn and push at once, that the corridor's walls are in the way, and what
yaw the block should arrive at a sub-goal with for the next one.
`route_strikes_left` at the start pose says which start yaws can finish a
route within its budget at all, in that model.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from ..core import Array, Float, Int, block_size
from ..optimize import wrap
from . import _routes
from ._response import compose

ROUTE_GRID = (43, 21, 32)  # points along x, y (the corridor, 2.5 cm apart) and yaw
ROUTE_ACTIONS = (13, 5, 5)  # the coarser action grid the route's value iteration backs up over
VALUE_TOL = 1e-3  # strikes: the sweeps stop when no value moves by more


class RouteToGo(eqx.Module):
    """Least strikes to finish a route from a world pose, with sub-goal j current, on a grid over the corridor.

    Attributes:
        values: (m, n_x, n_y, n_ψ) strikes to finish, at x, y evenly over the safe zone (ends included)
            and ψ = 2π k / n_ψ − π; capped at `cap` (no way to finish within the budget).
        cap: the route's budget + 1.
        margin: m, how far inside the corridor's edges a pose must rest to count as inside.
    """

    values: Float[Array, "m nx ny npsi"]
    cap: float = eqx.field(static=True)
    margin: float = eqx.field(static=True, default=0.0)


def _world_interpolate(values: Float[Array, "nx ny npsi"], pose: Float[Array, "3"]) -> Float[Array, ""]:
    """Trilinear interpolation of one sub-goal's grid at a world pose (x, y clamped to the corridor; yaw periodic)."""
    n_x, n_y, n_psi = values.shape
    lo, hi = _routes.SAFE_LOW, _routes.SAFE_HIGH
    fx = jnp.clip((pose[0] - lo[0]) / (hi[0] - lo[0]), 0.0, 1.0) * (n_x - 1)
    fy = jnp.clip((pose[1] - lo[1]) / (hi[1] - lo[1]), 0.0, 1.0) * (n_y - 1)
    fz = (wrap(pose[2]) + math.pi) * n_psi / (2 * math.pi)
    x0, y0, z0 = jnp.clip(jnp.floor(fx), 0, n_x - 2), jnp.clip(jnp.floor(fy), 0, n_y - 2), jnp.floor(fz)
    wx, wy, wz = fx - x0, fy - y0, fz - z0
    i0, j0, k0 = x0.astype(jnp.int32), y0.astype(jnp.int32), z0.astype(jnp.int32) % n_psi
    out = jnp.zeros(())
    for i, a in ((i0, 1 - wx), (i0 + 1, wx)):
        for j, b in ((j0, 1 - wy), (j0 + 1, wy)):
            for k, c in ((k0, 1 - wz), ((k0 + 1) % n_psi, wz)):
                out = out + a * b * c * values[i, j, k]
    return out


def route_strikes_left(
    v: RouteToGo, r: _routes.Route, goal: Int[Array, ""], pose: Float[Array, "3"]
) -> Float[Array, ""]:
    """Strikes to finish route `r` from world `pose` with sub-goal `goal` current (0 once all are reached)."""
    g = jnp.minimum(goal, r.n_goals - 1)
    left = jnp.where(_routes.in_safe_zone(pose, v.margin), _world_interpolate(v.values[g], pose), v.cap)
    return jnp.where(goal >= r.n_goals, 0.0, left)


@eqx.filter_jit
def route_value_iteration(
    responses: Float[Array, "a 3"],
    r: _routes.Route,
    *,
    grid: tuple[int, int, int] = ROUTE_GRID,
    margin: float = 0.0,
    tol: float = VALUE_TOL,
) -> RouteToGo:
    """Least strikes to finish route `r` from every pose of a grid over the corridor (module docstring's W_j).

    The sweeps run from W_j = 0 upward until no value moves by more than `tol` (at most `cap` sweeps); cells
    are batched by the package's batching policy (`clashx.core.block_size`).  About 10 s a sub-goal on 2 cores
    with the defaults.

    Args:
        responses: (a, 3) the actions' rest poses in the frame before the strike (a coarse action grid serves:
            the search that uses this looks the full one up exactly).
        r: the route.
        grid: points along x, y and yaw.
        margin: m, the corridor counts this much narrower on every side (a plan's room for prediction error).
        tol: strikes.

    Returns:
        `RouteToGo`, one grid per sub-goal.
    """
    cap = float(r.budget + 1)
    n_x, n_y, n_psi = grid
    lo, hi = _routes.SAFE_LOW, _routes.SAFE_HIGH
    xs, ys = jnp.linspace(lo[0], hi[0], n_x), jnp.linspace(lo[1], hi[1], n_y)
    ps = jnp.arange(n_psi) * 2 * math.pi / n_psi - math.pi
    cells = jnp.stack(jnp.meshgrid(xs, ys, ps, indexing="ij"), -1).reshape(-1, 3)
    block = block_size(cells.shape[0], world=16 * responses.shape[0] * responses.dtype.itemsize)
    n_blocks = -(-cells.shape[0] // block)
    padded = jnp.concatenate([cells, jnp.repeat(cells[-1:], n_blocks * block - cells.shape[0], 0)])
    nxt = jnp.zeros(grid)  # W_{j+1}: 0 after the last sub-goal

    def solve(j, nxt):
        def backup(values, s):
            def one(resp):
                p = compose(s, resp)
                hit = _routes.reached(r, j, p)
                w = jnp.where(hit, _world_interpolate(nxt, p), _world_interpolate(values, p))
                return jnp.where(_routes.in_safe_zone(p, margin), w, cap)

            return jnp.minimum(cap, 1.0 + jnp.min(jax.vmap(one)(responses)))

        def sweep(values):
            blocks = padded.reshape(n_blocks, block, 3)
            out = jax.lax.map(lambda ss: jax.vmap(lambda s: backup(values, s))(ss), blocks)
            return out.reshape(-1)[: cells.shape[0]].reshape(grid)

        def more(state):
            return (state[1] > tol) & (state[2] < cap)

        def step(state):
            values, _, k = state
            new = sweep(values)
            return new, jnp.max(jnp.abs(new - values)), k + 1

        values, _, _ = jax.lax.while_loop(more, step, (jnp.zeros(grid), jnp.asarray(jnp.inf), jnp.asarray(0.0)))
        return values

    out = []
    for j in range(r.n_goals - 1, -1, -1):
        nxt = solve(j, nxt)
        out.append(nxt)
    return RouteToGo(jnp.stack(out[::-1]), cap, margin)

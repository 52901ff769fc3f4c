"""A strike's effect on a resting block, tabulated from a simulator: what the pushing environment steps with.

On flat ground the block's rest pose after a strike, in the frame of its pose
before the strike, depends on the strike (θ, θ1, v_pre) and the physical
parameters only: not on where the block lies.  So one environment step of
sequential pushing is `compose(pose, response(strike))`, and the response of
one simulator at one parameter vector is a function of three numbers.

`build_table` simulates that function on a grid over the strike ranges
(SCENE.md Table II) with a batched host simulator (`rest_of`: MuJoCo C with
full contact, or the CPU hybrid with the surrogate as the contact handler;
`simulator`), once per parameter draw, and `lookup` interpolates it
trilinearly inside jit.  Training then costs JAX steps, not simulator steps
(measured on the semi-cylinder, 25 × 9 × 13 grid, against the simulator at
random strikes: 0.3 mm median and 1.5 mm 95th-percentile position error and
0.005 rad median yaw error at the prior's centre; 1.2 mm median and 4.1 mm
worst (0.017 rad median, 0.11 rad worst in yaw) at μ2 = 0.3, whose slides are longer; `tests/test_pushing.py` holds it
to `TABLE_POS_MEDIAN_TOL` and `TABLE_POS_MAX_TOL`).  `exact_response` is the untabulated step, the simulator
reached from jitted code through `jax.pure_callback` (batched under vmap).

Domain randomisation (brax's `randomization_fn`, per episode): `param_draws`
draws parameter vectors around the identified values with their identified σ
(capped at `SIGMA_CAP` of the prior's range), clipped into the prior; the table holds one response per draw and an episode
picks one at reset.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.ndimage import map_coordinates

from ..core import Array, Float, Int
from ..optimize import clip_to_ranges, make_evaluator, strikes_of_unit, to_world
from ..scenes import geometry as geo

GRID = (25, 9, 13)  # points along θ, θ1, v_pre
SIMULATORS = ("mujoco", "clashx")
SIGMA_CAP = 0.1  # the largest σ of a domain-randomisation draw, in units of the parameter's prior range

RestOf = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (strikes (n, 3), params (p,)) -> rest poses (n, 3)
ENGINE_OF = {"mujoco": "mujoco-c-two-phase", "clashx": "cpu-hybrid"}  # clashx.optimize's evaluators


class StrikeTable(eqx.Module):
    """Rest poses after strikes on a grid, one grid per parameter draw.

    Attributes:
        values: (k, n_θ, n_θ1, n_v, 3) rest pose (x, y, yaw) in the frame of the pose before the strike.
        params: (k, p) the parameter draw of each grid (row 0: the identified values).
        simulator: "mujoco" or "clashx".
    """

    values: Float[Array, "k a b c 3"]
    params: Float[Array, "k p"]
    simulator: str = eqx.field(static=True)

    @property
    def draws(self) -> int:
        """Parameter draws tabulated."""
        return int(self.values.shape[0])


def unit_of_action(action: Float[Array, "3"]) -> Float[Array, "3"]:
    """An action in [-1, 1]³ (clipped) as a point of the unit cube of the strike ranges."""
    return 0.5 * (jnp.clip(action, -1.0, 1.0) + 1.0)


def strike_of_action(action: Float[Array, "3"]) -> Float[Array, "3"]:
    """An action in [-1, 1]³ (clipped) as a strike (θ, θ1, v_pre) within SCENE.md's ranges."""
    return strikes_of_unit(unit_of_action(action))


def grid_strikes(grid: tuple[int, int, int] = GRID) -> np.ndarray:
    """The strikes at the table's grid points, (n_θ · n_θ1 · n_v, 3), θ slowest."""
    axes = [np.linspace(0.0, 1.0, n) for n in grid]
    u = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    return np.asarray(geo.STRIKE_LOW) + u * (np.asarray(geo.STRIKE_HIGH) - np.asarray(geo.STRIKE_LOW))


def param_draws(params, std, low, high, k: int, *, key) -> np.ndarray:
    """k parameter vectors: the identified `params` first, then k - 1 normal draws around them, clipped into the prior.

    The σ of a draw is the identified one, capped at `SIGMA_CAP` of the prior's range: ten strikes leave some
    parameters unidentified (σ wider than their prior, e.g. μ1 and e1 from rest poses), and drawing those over
    the whole prior gives simulators unlike any lab (blocks that slide for metres at the prior's corners).
    """
    params = np.asarray(params, np.float64)
    std = np.asarray(std, np.float64)
    if not np.all(np.isfinite(std)) or np.any(std < 0):
        raise ValueError(f"parameter σ must be finite and non-negative, got {std.tolist()}")
    std = np.minimum(std, SIGMA_CAP * (np.asarray(high) - np.asarray(low)))
    noise = np.asarray(jax.random.normal(key, (max(k - 1, 0), len(params))), np.float64)
    draws = np.clip(params + noise * std, np.asarray(low), np.asarray(high))
    return np.concatenate([params[None], draws], 0)


def build_table(
    rest_of: RestOf,
    draws: np.ndarray,
    simulator: str,
    *,
    grid: tuple[int, int, int] = GRID,
    progress: Callable[[int, int], None] | None = None,
) -> StrikeTable:
    """Simulate the grid of strikes once per parameter draw.

    Args:
        rest_of: batched host simulator, (strikes (n, 3), params (p,)) → rest poses (n, 3) in the start frame.
        draws: (k, p) parameter vectors (`param_draws`).
        simulator: the name recorded with the table.
        grid: points along θ, θ1 and v_pre.
        progress: called with (draws done, draws) after each draw.

    Returns:
        The `StrikeTable`.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"unknown simulator {simulator!r}; expected one of {', '.join(SIMULATORS)}")
    strikes = grid_strikes(grid)
    draws = np.atleast_2d(np.asarray(draws, np.float64))
    values = []
    for i, p in enumerate(draws):
        rest = np.asarray(rest_of(strikes, p), np.float64)
        if not np.all(np.isfinite(rest)):
            raise RuntimeError(f"the {simulator} simulator gave a non-finite rest pose for parameter draw {i}")
        values.append(rest.reshape(*grid, 3))
        if progress is not None:
            progress(i + 1, len(draws))
    return StrikeTable(jnp.asarray(np.stack(values), jnp.float32), jnp.asarray(draws, jnp.float32), simulator)


def lookup(table: StrikeTable, draw: Int[Array, ""], action: Float[Array, "3"]) -> Float[Array, "3"]:
    """The tabulated rest pose (start frame) after the strike of `action`, for parameter draw `draw` (trilinear)."""
    u = unit_of_action(action)
    n = jnp.asarray(table.values.shape[1:4], jnp.float32)
    coords = list(u * (n - 1.0))
    grid = table.values[draw]
    return jnp.stack([map_coordinates(grid[..., j], coords, order=1, mode="nearest") for j in range(3)])


def exact_response(rest_of: RestOf, params) -> Callable[[Float[Array, "3"]], Float[Array, "3"]]:
    """The untabulated response: `action -> rest pose` (start frame) through `jax.pure_callback` to `rest_of`.

    Under `jax.vmap` the callback receives the whole batch at once (one batched host rollout).
    """
    params = np.asarray(params, np.float64)

    def host(strikes):
        out = rest_of(clip_to_ranges(np.reshape(strikes, (-1, 3))), params)
        return np.asarray(out, np.float32).reshape(np.shape(strikes))

    def respond(action):
        strike = strike_of_action(action)
        return jax.pure_callback(
            host, jax.ShapeDtypeStruct(strike.shape, jnp.float32), strike, vmap_method="expand_dims"
        )

    return respond


def compose(pose: Float[Array, "3"], local: Float[Array, "3"]) -> Float[Array, "3"]:
    """The world pose of `local` (a pose in the frame of `pose`): `clashx.optimize`'s `to_world`."""
    return to_world(local, pose)


def simulator(kind: str, *, handler=None, sims: dict | None = None) -> RestOf:
    """The batched host simulator of `kind` on the semi-cylinder: rest poses (start frame) of strikes.

    `clashx.optimize`'s evaluators: "mujoco" is MuJoCo C with full contact (1 ms steps until release, then the
    slide; what `clashx generate` simulates), "clashx" the CPU hybrid (MuJoCo C with `handler`, a surrogate, as
    the striker-block contact).  `sims` caches the scenes across calls.
    """
    if kind not in ENGINE_OF:
        raise ValueError(f"--sim {kind!r}: expected one of {', '.join(SIMULATORS)}")
    if kind == "clashx" and handler is None:
        raise ValueError("the clashx simulator needs a surrogate (--model RUN, or the shipped one)")
    sims = {} if sims is None else sims

    def rest_of(strikes: np.ndarray, params: np.ndarray) -> np.ndarray:
        evaluate, _ = make_evaluator(ENGINE_OF[kind], "semi-cylinder", params, handler=handler, sims=sims)
        return np.asarray(evaluate(strikes))

    return rest_of


def save_table(table: StrikeTable, path: str, meta: dict) -> None:
    """Write a table as .npz (no pickles): values, params, simulator, grid and `meta` (JSON text, e.g. its source).

    Written under a temporary name and renamed: `path` holds the old table or the whole new one.
    """
    tmp = path + ".tmp.npz"
    np.savez(
        tmp,
        values=np.asarray(table.values),
        params=np.asarray(table.params),
        simulator=np.array(table.simulator),
        meta=np.array(json.dumps(meta, sort_keys=True)),
    )
    os.replace(tmp, path)


def load_table(path: str) -> tuple[StrikeTable, dict]:
    """Read a table written by `save_table`: (table, meta)."""
    import json

    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in ("values", "params", "simulator", "meta") if k not in z.files]
        if missing:
            raise ValueError(f"{path}: not a strike table (no {missing[0]}); write one with `clashx train-policy`")
        table = StrikeTable(jnp.asarray(z["values"]), jnp.asarray(z["params"]), str(z["simulator"]))
        return table, json.loads(str(z["meta"]))

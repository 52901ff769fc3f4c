"""The strike's final block pose on three differentiable paths: plain MJX, MJX with BCG, and the surrogate hybrid.

Each path maps (strike, contact parameters) to the block pose (x, y, yaw)
`horizon` seconds after launch, on MJX, so `jax.jacfwd`, `jax.jacrev` and
`jax.grad` apply:

- `"mjx"`: the full-contact strike (`clashx.scenes._strike`'s contact phase
  at 1 ms, then the slide at 4 ms with the striker parked);
- `"mjx_bcg"`: the same, with a bundle (`bcg_scan`) opened at the pair's
  onset: the first collision pass that finds a striker-block contact (MJX
  reports no distance for a pair that does not touch, so the onset cannot be
  anticipated from the contact data; the bundle opens after the first 1 ms
  contact step, within the first fifth of the 5 ms time constant);
- `"hybrid"`: the surrogate as the striker-block handler
  (`clashx.hybrid.strike_rollout`).

`reverse=True` steps with `clashx.grad.step` (fixed-iteration solver scan),
which reverse mode needs; forward mode works on either.  The horizon replaces
the scene's MAX_TIME = 4 s: a gradient's cost is proportional to the steps it
runs through, and at the prior's middle (μ2 = 0.5) a block is at rest 0.3 s
after the fastest strike (the caller checks rest; `bench/gradients.py` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import hybrid as _hybrid
from ..core import Array, Float, PRNGKeyArray, mjx
from ..scenes import ContactResult, StrikeScene, block_pose, initial_state, parked, release_rule, striker_contact
from . import _solver
from ._bcg import BCGConfig, bcg_scan, plain_scan

PATHS = ("mjx", "mjx_bcg", "hybrid")
HORIZON = 0.6  # s after launch: the pose the gradients are of (the default)
# The contacting bodies' dofs: block x, y and striker x, y (positions); block vx, vy, ωz and striker vx, vy.
STRIKE_QPOS_DOFS = (0, 1, 7, 8)
STRIKE_QVEL_DOFS = (0, 1, 5, 6, 7)


def strike_bcg_config(**overrides) -> BCGConfig:
    """`BCGConfig` with the strike's contacting dofs (block and striker), other fields overridable."""
    return BCGConfig(qpos_dofs=STRIKE_QPOS_DOFS, qvel_dofs=STRIKE_QVEL_DOFS, **overrides)


def _record(sim: StrikeScene, data: mjx.Data):
    touching, depth, normal = striker_contact(sim, data)
    return data.qpos, data.qvel, touching, depth, normal


def contact_from_records(sim: StrikeScene, qpos0, qvel0, records) -> ContactResult:
    """The contact phase's result (`_strike.contact_phase`'s bookkeeping) from per-step records.

    `records[k]` is the state after step k (state k + 1) and the collision pass of
    state k, as `contact_phase` reads them inside its loop.
    """
    qpos, qvel, touching, depth, normal = records
    n = qpos.shape[0]
    n_win = sim.n_window
    found = touching.any()
    touch_k = jnp.where(found, jnp.argmax(touching), -1)
    k = jnp.maximum(touch_k, 0)
    # the striker's velocity on the state the touching pass ran on (state k = record k - 1)
    v_pre = jnp.where(k > 0, qvel[jnp.maximum(k - 1, 0)], qvel0)
    v_striker = jnp.concatenate([v_pre[6:8], jnp.zeros(1, v_pre.dtype)])
    closing = jnp.abs(v_striker @ normal[k])
    ia = jnp.clip(k + n_win - 2, 0, n - 1)
    ib = jnp.clip(k + n_win - 1, 0, n - 1)
    touched, post, pose, t_touch, t_release = release_rule(
        sim, found, touch_k, depth[k], closing, qpos[ia], qvel[ia], qpos[ib], qvel[ib]
    )
    return ContactResult(
        post_velocity=post,
        release_pose=pose,
        t_touch=t_touch,
        t_release=t_release,
        touched=touched,
        q_end=qpos[ib],
        v_end=qvel[ib],
        t_end=(touch_k + n_win) * sim.settings.dt_contact,
    )


def _stepper(reverse: bool) -> Callable[[mjx.Model, mjx.Data], mjx.Data]:
    return _solver.step if reverse else mjx.step


def slide_steps(sim: StrikeScene, horizon: float) -> int:
    """Slide steps (at dt_slide) from the latest release within the contact phase to `horizon` s after launch."""
    t_release_max = sim.n_contact * sim.settings.dt_contact
    if horizon <= t_release_max:
        raise ValueError(f"horizon = {horizon} s must exceed the contact phase ({t_release_max:.3f} s)")
    return int(math.ceil((horizon - t_release_max) / sim.settings.dt_slide))


def full_contact_pose(
    sim: StrikeScene,
    strike: Float[Array, "3"],
    params: Float[Array, "p"],
    *,
    bcg: BCGConfig | None = None,
    key: PRNGKeyArray | None = None,
    horizon: float = HORIZON,
    reverse: bool = False,
) -> Float[Array, "3"]:
    """Block pose (x, y, yaw) at `horizon` after launch, full contact on MJX, with or without a bundle.

    Args:
        sim: the strike scene (build it in float64 for derivatives: `clashx.core._mjx.as_float64`).
        strike: (θ, θ1, v_pre).
        params: the scene's parameters (`sim.space` order).
        bcg: the bundle (None: the plain rollout).
        key: the bundle's key (required with `bcg`).
        horizon: seconds after launch.
        reverse: step with the fixed-iteration solver (for reverse mode).

    Returns:
        (3,) pose; the slide after release runs `slide_steps(sim, horizon)` steps.
    """
    step = _stepper(reverse)
    model = sim.space.apply(sim.model, sim.rows, params)
    qpos0, qvel0 = initial_state(sim, strike)
    data = mjx.make_data(model).replace(qpos=qpos0.astype(model.qpos0.dtype), qvel=qvel0.astype(model.qpos0.dtype))
    record = lambda d: _record(sim, d)  # noqa: E731
    if bcg is None:
        _, records = plain_scan(lambda d: step(model, d), data, sim.n_contact, record=record)
    else:
        if key is None:
            raise ValueError("full_contact_pose: a bundle (bcg=...) needs key=")

        def onset(d):
            return striker_contact(sim, d)[0]

        _, records = bcg_scan(
            lambda d: step(model, d), data, sim.n_contact, onset=onset, record=record, config=bcg, key=key
        )
    c = contact_from_records(sim, qpos0, qvel0, records)
    slide = sim.space.apply(sim.slide_model, sim.slide_rows, params)
    q, v = parked(c.q_end, c.v_end)
    d = mjx.make_data(slide).replace(qpos=q, qvel=v)
    d, _ = jax.lax.scan(lambda d, _: (step(slide, d), None), d, None, length=slide_steps(sim, horizon))
    return block_pose(d.qpos)


def hybrid_pose(
    hs: _hybrid.StrikeHybrid,
    handler,
    strike: Float[Array, "3"],
    params: Float[Array, "p"],
    *,
    horizon: float = HORIZON,
) -> Float[Array, "3"]:
    """Block pose at `horizon` after launch, the surrogate as the striker-block handler (`strike_rollout`)."""
    n_after = int(math.ceil((horizon - hs.n_steps * hs.dt) / hs.dt_after))
    return _hybrid.strike_rollout(hs, handler, strike, params, n_steps=hs.n_steps + max(n_after, 0)).rest_pose


class PosePath(eqx.Module):
    """One differentiable path from (strike (3,), contact parameters (k,)) to the pose (3,).

    Attributes:
        name: one of `PATHS`.
        sim: the strike scene (float64).
        hs: the hybrid scene (for "hybrid").
        handler: the surrogate (for "hybrid").
        base: the full parameter vector; the differentiated ones replace entries `idx`.
        idx: which of `sim.space`'s parameters are inputs (e.g. μ1, μ2, e1).
        bcg: the bundle (for "mjx_bcg").
        horizon: seconds after launch.
        reverse: use the fixed-iteration solver.
    """

    name: str = eqx.field(static=True)
    sim: StrikeScene
    hs: _hybrid.StrikeHybrid | None
    handler: object
    base: Float[Array, "p"]
    idx: tuple[int, ...] = eqx.field(static=True)
    bcg: BCGConfig | None
    horizon: float = eqx.field(static=True)
    reverse: bool = eqx.field(static=True, default=False)

    def __call__(self, strike, contact, key=None) -> Float[Array, "3"]:
        params = jnp.asarray(self.base).at[jnp.asarray(self.idx)].set(contact)
        if self.name == "hybrid":
            assert self.hs is not None
            return hybrid_pose(self.hs, self.handler, strike, params, horizon=self.horizon)
        bcg = self.bcg if self.name == "mjx_bcg" else None
        return full_contact_pose(self.sim, strike, params, bcg=bcg, key=key, horizon=self.horizon, reverse=self.reverse)

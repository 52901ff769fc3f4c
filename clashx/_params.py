"""Parameter spaces: which contact parameters are identified, their priors, and where they live in a model.

A `ParamSpace` is static configuration.  The values themselves are a plain
array `(p,)` (one world) or `(batch, p)`, in physical units, in the order of
`names`.  `apply` writes one world's values into an MJX model (use it inside a
`jax.vmap` for per-world parameters); `batch_model` + `in_axes` do the same
for a batch without re-writing the function, vmapping over only the written
fields; `apply_c` writes into a MuJoCo C model or a `mujoco.batch.Batch`.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ._mjx import mjx
from ._types import Array, Float, PRNGKeyArray


class Target(eqx.Module):
    """Where one parameter is written: `field[row, cols]` of a model (MjModel naming)."""

    field: str = eqx.field(static=True)
    element: str = eqx.field(static=True)  # the named element (a pair), resolved to a row by name
    cols: tuple[int, ...] = eqx.field(static=True)


class ParamSpace(eqx.Module):
    """Names, prior ranges and model locations of the identified contact parameters.

    Attributes:
        names: parameter names, e.g. ("mu1", "mu2", "e1").
        low, high: prior range of each, physical units.
        targets: for each parameter, the model entries it sets.
        log_scale: whether a parameter is sampled and optimised in log space.
    """

    names: tuple[str, ...] = eqx.field(static=True)
    low: tuple[float, ...] = eqx.field(static=True)
    high: tuple[float, ...] = eqx.field(static=True)
    targets: tuple[tuple[Target, ...], ...] = eqx.field(static=True)
    log_scale: tuple[bool, ...] = eqx.field(static=True)

    def __check_init__(self):
        n = len(self.names)
        if not (len(self.low) == len(self.high) == len(self.targets) == len(self.log_scale) == n):
            raise ValueError("ParamSpace: names, low, high, targets and log_scale must have one entry per parameter")
        for name, lo, hi, log in zip(self.names, self.low, self.high, self.log_scale):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"ParamSpace: parameter {name!r} has an empty range [{lo}, {hi}]")
            if log and lo <= 0:
                raise ValueError(f"ParamSpace: parameter {name!r} is log-scaled but its range [{lo}, {hi}] reaches 0")

    @property
    def size(self) -> int:
        """Number of parameters."""
        return len(self.names)

    def describe(self) -> dict:
        """A JSON-able description, stored in data files and checkpoints to detect mismatches."""
        return {
            "names": list(self.names),
            "low": list(self.low),
            "high": list(self.high),
            "log_scale": list(self.log_scale),
            "targets": [[[t.field, t.element, list(t.cols)] for t in ts] for ts in self.targets],
        }

    @classmethod
    def from_description(cls, d: dict) -> ParamSpace:
        """Rebuild a space from `describe()`'s output (as stored in files)."""
        return cls(
            names=tuple(d["names"]),
            low=tuple(float(v) for v in d["low"]),
            high=tuple(float(v) for v in d["high"]),
            targets=tuple(tuple(Target(f, e, tuple(c)) for f, e, c in ts) for ts in d["targets"]),
            log_scale=tuple(bool(v) for v in d["log_scale"]),
        )

    def check(self, values: np.ndarray, what: str = "parameters") -> np.ndarray:
        """Validate user-given values (..., p) against the prior box; raise naming the bad entry."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape[-1:] != (self.size,):
            raise ValueError(f"{what}: expected {self.size} values ({', '.join(self.names)}), got shape {values.shape}")
        flat = values.reshape(-1, self.size)
        for j, name in enumerate(self.names):
            col = flat[:, j]
            bad = ~np.isfinite(col) | (col < self.low[j] - 1e-12) | (col > self.high[j] + 1e-12)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(
                    f"{what}: row {i}: {name}={float(col[i])!r} is outside the prior range [{self.low[j]}, {self.high[j]}]"
                )
        return values

    def sample(self, n: int, *, key: PRNGKeyArray) -> Float[Array, "n p"]:
        """`n` draws from the prior: uniform in each range (log-uniform where `log_scale`)."""
        u = jax.random.uniform(key, (n, self.size), dtype=jnp.float64 if jax.config.jax_enable_x64 else None)
        return self.from_unit(u)

    def from_unit(self, u: Float[Array, "... p"]) -> Float[Array, "... p"]:
        """Map the unit cube onto the prior box (log-uniformly where `log_scale`)."""
        lo, hi = jnp.asarray(self.low), jnp.asarray(self.high)
        lin = lo + u * (hi - lo)
        is_log = jnp.asarray(self.log_scale)
        lo, hi = jnp.where(is_log, lo, 1.0), jnp.where(is_log, hi, 2.0)  # keep the unused log branch finite
        log = jnp.exp(jnp.log(lo) + u * (jnp.log(hi) - jnp.log(lo)))
        return jnp.where(jnp.asarray(self.log_scale), log, lin)

    def to_unit(self, values: Float[Array, "... p"]) -> Float[Array, "... p"]:
        """Inverse of `from_unit`."""
        lo, hi = jnp.asarray(self.low), jnp.asarray(self.high)
        lin = (values - lo) / (hi - lo)
        is_log = jnp.asarray(self.log_scale)
        v, lo, hi = jnp.where(is_log, values, 1.0), jnp.where(is_log, lo, 1.0), jnp.where(is_log, hi, 2.0)
        log = (jnp.log(v) - jnp.log(lo)) / (jnp.log(hi) - jnp.log(lo))
        return jnp.where(jnp.asarray(self.log_scale), log, lin)

    def _row(self, mj_model: mujoco.MjModel, target: Target) -> int:
        return mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_PAIR, target.element)

    def rows(self, mj_model: mujoco.MjModel, strict: bool = True) -> tuple[tuple[int, ...], ...]:
        """Row of each target in `mj_model` (the pair's id).

        A pair the model lacks raises, or with `strict=False` gets row -1 and is
        skipped when writing (a model of a phase where that pair cannot touch).
        """
        out = []
        for name, ts in zip(self.names, self.targets):
            rows = []
            for t in ts:
                r = self._row(mj_model, t)
                if r < 0 and strict:
                    raise ValueError(f"parameter {name!r}: the model has no contact pair named {t.element!r}")
                rows.append(r)
            out.append(tuple(rows))
        return tuple(out)

    def apply(self, model: mjx.Model, rows, values: Float[Array, "p"]) -> mjx.Model:
        """Write one world's values into an MJX model; `rows` from `rows(mj_model)`."""
        updates: dict[str, jax.Array] = {}
        for j, ts in enumerate(self.targets):
            for t, r in zip(ts, rows[j]):
                if r < 0:
                    continue
                arr = updates.get(t.field, getattr(model, t.field))
                updates[t.field] = arr.at[r, jnp.asarray(t.cols)].set(values[j])
        return model.tree_replace(updates)

    def in_axes(self, model: mjx.Model) -> mjx.Model:
        """An `in_axes` pytree for `jax.vmap` over a model batched by `batch_model`: 0 on the written fields only."""
        fields = {t.field for ts in self.targets for t in ts}
        axes = jax.tree.map(lambda _: None, model)
        return axes.tree_replace({f: 0 for f in fields})

    def batch_model(self, model: mjx.Model, rows, values: Float[Array, "batch p"]) -> mjx.Model:
        """A model whose written fields carry a leading batch axis, one row per world (see `in_axes`)."""
        fields = {t.field for ts in self.targets for t in ts}
        per_world = jax.vmap(lambda v: self.apply(model, rows, v))(values)
        return model.tree_replace({f: getattr(per_world, f) for f in fields})

    def apply_c(self, target, rows, values: np.ndarray) -> None:
        """Write values into a MuJoCo C model (values (p,)) or a `mujoco.batch.Batch` (values (nsim, p))."""
        values = np.asarray(values, dtype=np.float64)
        for j, ts in enumerate(self.targets):
            for t, r in zip(ts, rows[j]):
                if r < 0:
                    continue
                if isinstance(target, mujoco.MjModel):
                    getattr(target, t.field)[r, list(t.cols)] = values[j]
                else:
                    arr = target.expand(t.field)
                    for c in t.cols:
                        arr[:, r, c] = values[:, j]


def strike_space(n_pieces: int = 1) -> ParamSpace:
    """SCENE.md's contact parameters of the strike: μ1 (striker-block), μ2 (block-ground), e1 (damping ratio).

    Args:
        n_pieces: convex pieces of the block (`clashx._geometry.convex_pieces`);
            each parameter is written into the pairs of every piece.
    """
    ks = range(n_pieces)
    return ParamSpace(
        names=("mu1", "mu2", "e1"),
        low=(0.05, 0.02, 0.1),
        high=(1.0, 1.0, 3.0),
        targets=(
            tuple(Target("pair_friction", f"striker_block_{k}", (0, 1)) for k in ks),
            tuple(Target("pair_friction", f"block_ground_{k}", (0, 1)) for k in ks),
            tuple(Target("pair_solref", f"striker_block_{k}", (1,)) for k in ks),
        ),
        log_scale=(False, False, False),
    )


def cube_space() -> ParamSpace:
    """Contact parameters of the cube toss: friction, time constant and damping ratio of the cube-table contact.

    The table touches the cube at its eight corners, one pair each
    (`_scenes.CUBE_PAIRS`); every parameter is written into all eight.
    """
    pairs = tuple(f"cube_table{i}" for i in range(8))  # _scenes.CUBE_PAIRS (no import: _scenes is MJCF only)
    return ParamSpace(
        names=("mu", "timeconst", "dampratio"),
        low=(0.05, 0.002, 0.1),
        high=(0.6, 0.04, 2.0),
        targets=(
            tuple(Target("pair_friction", p, (0, 1)) for p in pairs),
            tuple(Target("pair_solref", p, (0,)) for p in pairs),
            tuple(Target("pair_solref", p, (1,)) for p in pairs),
        ),
        log_scale=(False, True, False),
    )

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
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ._mjx import mjx
from ._types import Array, Float, PRNGKeyArray


class Target(eqx.Module):
    """Where one parameter is written: `field[row, cols]` of a model (MjModel naming).

    Attributes:
        field: the model field, e.g. "pair_friction" or "body_mass".
        element: the named pair or body that picks the row.
        cols: the columns written.
        kind: "pair" or "body": what `element` names.
        mode: "set" writes the value; "offset" writes nominal + value; "scale"
            writes nominal · value / `ref` (e.g. the inertia of a block whose
            mass is scaled at uniform density).  "nominal" is the compiled
            model's own entry, read once by `ParamSpace.rows`.
        ref: the reference value of "scale".
    """

    field: str = eqx.field(static=True)
    element: str = eqx.field(static=True)
    cols: tuple[int, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="pair")
    mode: str = eqx.field(static=True, default="set")
    ref: float = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        if self.kind not in ("pair", "body") or self.mode not in ("set", "offset", "scale"):
            raise ValueError(f"Target {self.field}: kind {self.kind!r} / mode {self.mode!r} not understood")


class Slot(NamedTuple):
    """One target resolved in a compiled model: its row (-1: absent) and the nominal entries of its columns."""

    row: int
    nominal: tuple[float, ...]


class FreeBody(NamedTuple):
    """A free body whose mass, centre of mass or inertia a space writes, resolved in a compiled model.

    MuJoCo derives `body_subtreemass`, `body_invweight0` and `dof_invweight0`
    from them (`mj_setConst`); `ParamSpace.apply` re-derives those after writing.
    """

    body: int
    dof: int  # first of its free joint's six dofs
    iquat: tuple[float, float, float, float]  # principal axes in the body frame (not written)
    world_mass_rest: float  # the world's subtree mass less this body's


class Layout(NamedTuple):
    """What `ParamSpace.rows` resolves once per compiled model: slots per parameter and target, free bodies."""

    slots: tuple[tuple[Slot, ...], ...]
    bodies: tuple[FreeBody, ...]

    def __getitem__(self, j):  # layout[j]: the slots of parameter j
        return self.slots[j]

    def __len__(self):
        return len(self.slots)


_INERTIAL_FIELDS = ("body_mass", "body_ipos", "body_inertia")
CHECK_RTOL = 1e-6  # `ParamSpace.check`'s slack, relative to each bound: float32 holds a bound to 6e-8 of it
_OBJ = {"pair": mujoco.mjtObj.mjOBJ_PAIR, "body": mujoco.mjtObj.mjOBJ_BODY}


def _skew(c, xp):
    z = xp.zeros_like(c[0])
    return xp.stack([xp.stack([z, -c[2], c[1]]), xp.stack([c[2], z, -c[0]]), xp.stack([-c[1], c[0], z])])


def _quat_mat(q) -> np.ndarray:
    m = np.zeros(9)
    mujoco.mju_quat2Mat(m, np.asarray(q, np.float64))
    return m.reshape(3, 3)


def free_body_invweights(mass, ipos, inertia, iquat, xp=jnp):
    """`mj_setConst`'s inverse weights of a free body at its reference pose (identity orientation).

    With the free joint's dofs (linear velocity of the body origin, angular
    velocity) the mass matrix is M = [[m I, -m C], [m C, I_c - m C C]], C = [ipos]×;
    MuJoCo takes the mean diagonal of the translational and rotational blocks
    of J M⁻¹ Jᵀ at the centre of mass (= (1/m, mean diag I_c⁻¹)) for the body,
    and of M⁻¹ itself for the dofs.

    Args:
        mass, ipos (3,), inertia (3,), iquat (4,): the body's inertial entries (kg, m, kg m²).
        xp: the array module, `jax.numpy` (traceable) or `numpy`.

    Returns:
        (body_invweight0 (2,), dof_invweight0 (6,)).
    """
    r = xp.asarray(_quat_mat(iquat))
    i_c = r @ xp.diag(inertia) @ r.T
    c = _skew(ipos, xp)
    eye = xp.eye(3)
    m_full = xp.block([[mass * eye, -mass * c], [mass * c, i_c - mass * c @ c]])
    m_inv = xp.linalg.inv(m_full)
    rot = xp.trace(xp.linalg.inv(i_c)) / 3
    tran_dof = xp.trace(m_inv[:3, :3]) / 3
    rot_dof = xp.trace(m_inv[3:, 3:]) / 3
    body = xp.stack([1.0 / mass, rot])
    dof = xp.concatenate([xp.full(3, tran_dof), xp.full(3, rot_dof)])
    return body, dof


def free_body_invweights_batch(mass, ipos, inertia, iquat) -> tuple[np.ndarray, np.ndarray]:
    """`free_body_invweights` of n worlds at once in NumPy: mass (n,), ipos (n, 3), inertia (n, 3) -> (n, 2), (n, 6)."""
    mass, ipos, inertia = np.asarray(mass), np.asarray(ipos), np.asarray(inertia)
    r = _quat_mat(iquat)
    i_c = np.einsum("ij,nj,kj->nik", r, inertia, r)
    z = np.zeros_like(mass)
    c = np.stack(
        [np.stack([z, -ipos[:, 2], ipos[:, 1]], -1), np.stack([ipos[:, 2], z, -ipos[:, 0]], -1),
         np.stack([-ipos[:, 1], ipos[:, 0], z], -1)], 1,
    )  # fmt: skip
    m = mass[:, None, None]
    m_full = np.zeros((len(mass), 6, 6))
    m_full[:, :3, :3] = m * np.eye(3)
    m_full[:, :3, 3:] = -m * c
    m_full[:, 3:, :3] = m * c
    m_full[:, 3:, 3:] = i_c - m * c @ c
    m_inv = np.linalg.inv(m_full)
    rot = np.trace(np.linalg.inv(i_c), axis1=1, axis2=2) / 3
    tran = np.trace(m_inv[:, :3, :3], axis1=1, axis2=2) / 3
    rot_dof = np.trace(m_inv[:, 3:, 3:], axis1=1, axis2=2) / 3
    return np.stack([1.0 / mass, rot], 1), np.concatenate(
        [np.repeat(tran[:, None], 3, 1), np.repeat(rot_dof[:, None], 3, 1)], 1
    )


class ParamSpace(eqx.Module):
    """Names, prior ranges and model locations of the identified parameters.

    Attributes:
        names: parameter names, e.g. ("mu1", "mu2", "e1").
        low, high: prior range of each, physical units.
        targets: for each parameter, the model entries it sets.
        log_scale: whether a parameter is sampled and optimised in log space.
        nominal: the values of an unidentified model (a part as drawn, MuJoCo's
            defaults), used where a parameter is not given; default the prior's centre.
    """

    names: tuple[str, ...] = eqx.field(static=True)
    low: tuple[float, ...] = eqx.field(static=True)
    high: tuple[float, ...] = eqx.field(static=True)
    targets: tuple[tuple[Target, ...], ...] = eqx.field(static=True)
    log_scale: tuple[bool, ...] = eqx.field(static=True)
    nominal: tuple[float, ...] | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        n = len(self.names)
        if not (len(self.low) == len(self.high) == len(self.targets) == len(self.log_scale) == n):
            raise ValueError("ParamSpace: names, low, high, targets and log_scale must have one entry per parameter")
        if self.nominal is not None and len(self.nominal) != n:
            raise ValueError("ParamSpace: nominal must have one entry per parameter")
        for name, lo, hi, log in zip(self.names, self.low, self.high, self.log_scale):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"ParamSpace: parameter {name!r} has an empty range [{lo}, {hi}]")
            if log and lo <= 0:
                raise ValueError(f"ParamSpace: parameter {name!r} is log-scaled but its range [{lo}, {hi}] reaches 0")

    @property
    def size(self) -> int:
        """Number of parameters."""
        return len(self.names)

    def index(self, name: str) -> int:
        """Position of parameter `name` in the value vector."""
        if name not in self.names:
            raise ValueError(f"no parameter {name!r}; this space has {', '.join(self.names)}")
        return self.names.index(name)

    @property
    def centre(self) -> np.ndarray:
        """The prior's centre in physical units (the middle of the unit box), (p,)."""
        return np.asarray(self.from_unit(jnp.full(self.size, 0.5)), np.float64)

    def vector(self, **values: float) -> np.ndarray:
        """A full value vector (p,): the given parameters by name, `nominal` (or the centre) for the rest.

        Example: `space.vector(mu1=1.0, mu2=1.0, e1=1.0)`.
        """
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            raise ValueError(f"no parameter(s) {unknown}; this space has {', '.join(self.names)}")
        base = np.asarray(self.nominal, np.float64) if self.nominal is not None else self.centre
        return np.array([float(values.get(n, b)) for n, b in zip(self.names, base)])

    def describe(self) -> dict:
        """A JSON-able description, stored in data files and checkpoints to detect mismatches."""
        return {
            "names": list(self.names),
            "low": list(self.low),
            "high": list(self.high),
            "log_scale": list(self.log_scale),
            "targets": [[[t.field, t.element, list(t.cols), t.kind, t.mode, t.ref] for t in ts] for ts in self.targets],
        } | ({"nominal": list(self.nominal)} if self.nominal is not None else {})

    @classmethod
    def from_description(cls, d: dict) -> ParamSpace:
        """Rebuild a space from `describe()`'s output (as stored in files; older 3-entry targets read as pairs)."""
        return cls(
            names=tuple(d["names"]),
            low=tuple(float(v) for v in d["low"]),
            high=tuple(float(v) for v in d["high"]),
            targets=tuple(
                tuple(Target(t[0], t[1], tuple(t[2]), *(t[3:5]), *(float(v) for v in t[5:6])) for t in ts)
                for ts in d["targets"]
            ),
            log_scale=tuple(bool(v) for v in d["log_scale"]),
            nominal=tuple(float(v) for v in d["nominal"]) if d.get("nominal") is not None else None,
        )

    def check(self, values: np.ndarray, what: str = "parameters") -> np.ndarray:
        """Validate user-given values (..., p) against the prior box; raise naming the bad entry."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape[-1:] != (self.size,):
            raise ValueError(f"{what}: expected {self.size} values ({', '.join(self.names)}), got shape {values.shape}")
        flat = values.reshape(-1, self.size)
        for j, name in enumerate(self.names):
            col = flat[:, j]
            below = self.low[j] - max(CHECK_RTOL * abs(self.low[j]), 1e-12)
            above = self.high[j] + max(CHECK_RTOL * abs(self.high[j]), 1e-12)
            bad = ~np.isfinite(col) | (col < below) | (col > above)
            if bad.any():
                i = int(np.argmax(bad))
                row = f"row {i}: " if values.ndim > 1 else ""
                raise ValueError(
                    f"{what}: {row}{name}={float(col[i])!r} is outside the prior range [{self.low[j]}, {self.high[j]}]; "
                    "use a value inside it"
                )
        return values

    def sample(self, n: int, *, key: PRNGKeyArray) -> Float[Array, "n p"]:
        """`n` draws from the prior: uniform in each range (log-uniform where `log_scale`)."""
        u = jax.random.uniform(key, (n, self.size), dtype=jax.dtypes.canonicalize_dtype(jnp.float64))
        return self.from_unit(u)

    def from_unit(self, u: Float[Array, "... p"]) -> Float[Array, "... p"]:
        """Map the unit cube onto the prior box (log-uniformly where `log_scale`).

        A u in [0, 1] lands inside the box's bounds as this dtype holds them, however the device rounds
        exp and log (a TPU's float32 exp(log(0.0025)) gave 0.0024998, outside the prior, and `clashx
        pretrain` refused the file that `clashx generate` wrote), with the unclipped derivative (`unit_scale`);
        a u outside [0, 1] extrapolates.
        """
        low, high = jnp.asarray(self.low), jnp.asarray(self.high)
        lin = low + u * (high - low)
        is_log = jnp.asarray(self.log_scale)
        lo, hi = jnp.where(is_log, low, 1.0), jnp.where(is_log, high, 2.0)  # keep the unused log branch finite
        log = jnp.exp(jnp.log(lo) + u * (jnp.log(hi) - jnp.log(lo)))
        out = jnp.where(is_log, log, lin)
        inside = out + jax.lax.stop_gradient(jnp.clip(out, low, high) - out)  # clipped value, unclipped derivative
        return jnp.where((u >= 0) & (u <= 1), inside, out)

    def unit_scale(self, values) -> np.ndarray:
        """dp/du of `from_unit` at `values` (p,): hi - lo, or p·ln(hi/lo) for a log-scale parameter."""
        lo, hi, p = np.asarray(self.low), np.asarray(self.high), np.asarray(values, np.float64)
        is_log = np.asarray(self.log_scale)
        return np.where(is_log, p * np.log(np.where(is_log, hi, 2.0) / np.where(is_log, lo, 1.0)), hi - lo)

    def to_unit(self, values: Float[Array, "... p"]) -> Float[Array, "... p"]:
        """Inverse of `from_unit`."""
        lo, hi = jnp.asarray(self.low), jnp.asarray(self.high)
        lin = (values - lo) / (hi - lo)
        is_log = jnp.asarray(self.log_scale)
        v, lo, hi = jnp.where(is_log, values, 1.0), jnp.where(is_log, lo, 1.0), jnp.where(is_log, hi, 2.0)
        log = (jnp.log(v) - jnp.log(lo)) / (jnp.log(hi) - jnp.log(lo))
        return jnp.where(jnp.asarray(self.log_scale), log, lin)

    def _inertial_bodies(self) -> list[str]:
        return sorted({t.element for ts in self.targets for t in ts if t.field in _INERTIAL_FIELDS})

    def prepare(self, mj_model: mujoco.MjModel) -> mujoco.MjModel:
        """Make a compiled model ready for per-world inertial writes; returns it (changed in place).

        MuJoCo compiles a body whose centre of mass sits at its frame origin as
        "same frame" and "simple" (a diagonal mass matrix), and a geom (a mesh
        recentred on its centroid) whose frame is the body's inertial frame as
        placed by the centre of mass: shortcuts that a written centre-of-mass
        offset would silently break in MuJoCo C (the geom would move with the
        centre of mass; MJX does not take them).  They are switched off for
        every body whose mass, centre of mass or inertia this space writes and
        for its geoms.  Call it on every MuJoCo model the space writes into.
        """
        for name in self._inertial_bodies():
            b = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_BODY, name)
            if b < 0:
                continue
            mj_model.body_sameframe[b] = 0
            mj_model.geom_sameframe[mj_model.geom_bodyid == b] = 0
            mj_model.body_simple[b] = 0
            adr = mj_model.body_dofadr[b]
            mj_model.dof_simplenum[adr : adr + mj_model.body_dofnum[b]] = 0
        return mj_model

    def rows(self, mj_model: mujoco.MjModel, strict: bool = True) -> Layout:
        """Resolve every target in `mj_model` (its row and nominal entries) and the free bodies written.

        A pair or body the model lacks raises, or with `strict=False` gets row
        -1 and is skipped when writing (a model of a phase where that pair
        cannot touch).  A body whose inertia is written must be a free body
        child of the world (its derived constants are re-derived in closed form).
        """
        slots = []
        for name, ts in zip(self.names, self.targets):
            per = []
            for t in ts:
                r = mujoco.mj_name2id(mj_model, _OBJ[t.kind], t.element)
                if r < 0 and strict:
                    raise ValueError(f"parameter {name!r}: the model has no {t.kind} named {t.element!r}")
                arr = getattr(mj_model, t.field)
                nominal = tuple(float(arr[r] if arr.ndim == 1 else arr[r, c]) for c in t.cols) if r >= 0 else ()
                per.append(Slot(r, nominal))
            slots.append(tuple(per))
        bodies = []
        for name in self._inertial_bodies():
            b = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_BODY, name)
            if b < 0:
                continue
            jnt = mj_model.body_jntadr[b]
            if (
                mj_model.body_parentid[b] != 0
                or mj_model.body_jntnum[b] != 1
                or mj_model.jnt_type[jnt] != mujoco.mjtJoint.mjJNT_FREE
            ):
                raise ValueError(f"body {name!r}: inertial parameters are supported on free bodies of the world only")
            rest = float(mj_model.body_subtreemass[0] - mj_model.body_subtreemass[b])
            q = mj_model.body_iquat[b]
            iquat = (float(q[0]), float(q[1]), float(q[2]), float(q[3]))
            bodies.append(FreeBody(int(b), int(mj_model.jnt_dofadr[jnt]), iquat, rest))
        return Layout(tuple(slots), tuple(bodies))

    def _writes(self, rows: Layout, values, xp=jnp):
        """(field, row, cols, new entries) of every write, in order (values: one world's (p,))."""
        for j, ts in enumerate(self.targets):
            for t, slot in zip(ts, rows.slots[j]):
                if slot.row < 0:
                    continue
                nominal = xp.asarray(slot.nominal)
                if t.mode == "set":
                    new = xp.broadcast_to(values[j], nominal.shape)
                elif t.mode == "offset":
                    new = nominal + values[j]
                else:
                    new = nominal * (values[j] / t.ref)
                yield t.field, slot.row, t.cols, new

    @staticmethod
    def _derived(rows: Layout, get, xp=jnp):
        """(field, index, new value) of the constants MuJoCo derives from the written inertial fields."""
        for fb in rows.bodies:
            mass, ipos, inertia = get("body_mass")[fb.body], get("body_ipos")[fb.body], get("body_inertia")[fb.body]
            body_w, dof_w = free_body_invweights(mass, ipos, inertia, fb.iquat, xp)
            yield "body_subtreemass", (fb.body,), mass
            yield "body_subtreemass", (0,), fb.world_mass_rest + mass
            yield "body_invweight0", (fb.body, slice(None)), body_w
            yield "dof_invweight0", (slice(fb.dof, fb.dof + 6),), dof_w

    def apply(self, model: mjx.Model, rows: Layout, values: Float[Array, "p"]) -> mjx.Model:
        """Write one world's values into an MJX model; `rows` from `rows(mj_model)` of the same model."""
        updates: dict[str, jax.Array] = {}
        for field, r, cols, new in self._writes(rows, values):
            arr = updates.get(field, getattr(model, field))
            idx = (r, jnp.asarray(cols)) if arr.ndim > 1 else (r,)
            updates[field] = arr.at[idx].set(new if arr.ndim > 1 else new[0])
        get = lambda f: updates.get(f, getattr(model, f))  # noqa: E731
        for field, idx, new in list(self._derived(rows, get)):
            updates[field] = get(field).at[idx].set(new)
        return model.tree_replace(updates)

    def written_fields(self, rows: Layout | None = None) -> set[str]:
        """The model fields `apply` changes (the derived constants included when inertia is written)."""
        fields = {t.field for ts in self.targets for t in ts}
        if any(f in _INERTIAL_FIELDS for f in fields):
            fields |= {"body_subtreemass", "body_invweight0", "dof_invweight0"}
        return fields

    def in_axes(self, model: mjx.Model) -> mjx.Model:
        """An `in_axes` pytree for `jax.vmap` over a model batched by `batch_model`: 0 on the written fields only."""
        axes = jax.tree.map(lambda _: None, model)
        return axes.tree_replace({f: 0 for f in self.written_fields()})

    def batch_model(self, model: mjx.Model, rows: Layout, values: Float[Array, "batch p"]) -> mjx.Model:
        """A model whose written fields carry a leading batch axis, one row per world (see `in_axes`)."""
        per_world = jax.vmap(lambda v: self.apply(model, rows, v))(values)
        return model.tree_replace({f: getattr(per_world, f) for f in self.written_fields()})

    def apply_c(self, target, rows: Layout, values: np.ndarray) -> None:
        """Write values into a MuJoCo C model (values (p,)) or a `mujoco.batch.Batch` (values (nsim, p)).

        The model (or the batch's base model) must have gone through `prepare`
        when this space writes inertia.
        """
        values = np.asarray(values, dtype=np.float64)
        if isinstance(target, mujoco.MjModel):
            arrays = {f: getattr(target, f) for f in self.written_fields()}
            self._write_numpy(arrays, rows, values)
            return
        # (nsim, ...) views; the derived constants read mass, centre of mass and inertia even where one is not written
        fields = self.written_fields() | ({"body_mass", "body_ipos", "body_inertia"} if rows.bodies else set())
        arrays = {f: target.expand(f) for f in fields}
        for j, ts in enumerate(self.targets):  # every world at once
            for t, slot in zip(ts, rows.slots[j]):
                if slot.row < 0:
                    continue
                v, nominal = values[:, j : j + 1], np.asarray(slot.nominal)
                new = {"set": v + 0.0 * nominal, "offset": nominal + v, "scale": nominal * (v / t.ref)}[t.mode]
                arr = arrays[t.field]
                if arr.ndim > 2:
                    arr[:, slot.row, list(t.cols)] = new
                else:
                    arr[:, slot.row] = new[:, 0]
        for fb in rows.bodies:  # the constants MuJoCo derives, every world at once
            mass = arrays["body_mass"][:, fb.body]
            body_w, dof_w = free_body_invweights_batch(
                mass, arrays["body_ipos"][:, fb.body], arrays["body_inertia"][:, fb.body], fb.iquat
            )
            arrays["body_subtreemass"][:, fb.body] = mass
            arrays["body_subtreemass"][:, 0] = fb.world_mass_rest + mass
            arrays["body_invweight0"][:, fb.body] = body_w
            arrays["dof_invweight0"][:, fb.dof : fb.dof + 6] = dof_w

    def _write_numpy(self, arrays: dict[str, np.ndarray], rows: Layout, values: np.ndarray) -> None:
        for field, r, cols, new in self._writes(rows, values, np):
            arr = arrays[field]
            if arr.ndim > 1:
                arr[r, list(cols)] = new
            else:
                arr[r] = new[0]
        for field, idx, new in list(self._derived(rows, lambda f: arrays[f], np)):
            arrays[field][idx] = new

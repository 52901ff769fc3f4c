"""Cube impacts beyond the first: generated training impacts that cover every impact of real tosses.

A real toss holds its first impact (from the throw) and, after each bounce's
free flight, a later one (`clashx.events._ingest_cube`, `impacts="all"`).  In
the 350 shipped tosses the later impacts are slower and spin faster than the
first: closing speed of the lowest corner 0.2-1.3 m/s (5th-95th percentile;
first impacts 0.9-1.4), |ω| 2.6-13 rad/s (first 1.7-6.3), horizontal speed
0.8-1.1 m/s.  Tosses drawn from `INIT_RANGES` start 1-15 cm up, so their
first impacts close at 0.44 m/s or more and miss the slow end.

`BOUNCE_RANGES` is a second box of initial states: a cube just above the
table (0.5-15 mm), moving as cubes do between bounces, its tilt from a face-down
pose uniform in 0-55° (later impacts land nearly flat far more often than a
uniformly random orientation would: 40 % of them within 20° of a face).  The first impacts of
tosses drawn from it (`generate_bounce_events`, MuJoCo C or MJX) stand for the
later impacts; the union of both boxes covers the real distribution, feature
by feature (`impact_features`, `coverage`, `bench/cube_impacts.py` draws the
histograms).
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Array, Float, PRNGKeyArray, quat_mul, quat_to_mat
from ..scenes import (
    CORNER_SIGNS,
    HALF,
    TossScene,
    lowest_corner_z,
    sample_toss_inputs,
    toss_events,
)

# Initial states of generated "bounce" tosses (`sample_toss_inputs(ranges=...)`): a cube a little above
# the table, as after a bounce.  Set from the shipped tosses' later impacts (module docstring).
BOUNCE_RANGES = {
    "lowest_corner": (0.0005, 0.015),  # m above the table
    "v_horizontal": (0.5, 1.3),  # m/s, any heading
    "vz": (-0.5, 0.25),  # m/s
    "omega": (0.0, 16.0),  # rad/s, any axis
    "tilt": (0.0, 55.0),  # deg between the table's normal and the nearest cube axis, uniform (any yaw)
}

FEATURES = ("closing speed (m/s)", "horizontal speed (m/s)", "|ω| (rad/s)", "spin |ω_z| (rad/s)", "tilt (deg)")


def corner_closing_speed(state: Float[Array, "13"]) -> Float[Array, ""]:
    """Downward speed (m/s) of the lowest corner of one toss state; positive when it closes on the table.

    The handler's firing rule (`clashx.hybrid_toss_every`) and the features compared here both use it.
    """
    rot = quat_to_mat(state[0:4] / jnp.linalg.norm(state[0:4]))
    corners = jnp.asarray(CORNER_SIGNS * HALF, state.dtype) @ rot.T
    r = corners[jnp.argmin(corners[:, 2])]
    return -(state[12] + jnp.cross(rot @ state[7:10], r)[2])


def closing_speed(pre: np.ndarray) -> np.ndarray:
    """`corner_closing_speed` of pre-impact states (n, 13), float64."""
    with jax.enable_x64(True):
        return np.asarray(jax.vmap(corner_closing_speed)(jnp.asarray(pre, jnp.float64)), np.float64)


def impact_features(pre: np.ndarray) -> np.ndarray:
    """The features whose distributions are compared (`FEATURES`), (n, 5), for pre-impact states (n, 13).

    tilt: the angle between the table's normal and the cube axis closest to it
    (0° lands flat on a face, 45° on an edge, 54.7° on a corner).
    """
    pre = np.asarray(pre, np.float64)
    rot = np.asarray(jax.vmap(quat_to_mat)(jnp.asarray(pre[:, :4])), np.float64)
    w = np.einsum("nij,nj->ni", rot, pre[:, 7:10])
    tilt = np.degrees(np.arccos(np.clip(np.abs(rot[:, 2, :]).max(1), 0.0, 1.0)))
    return np.stack(
        [
            closing_speed(pre),
            np.linalg.norm(pre[:, 10:12], axis=1),
            np.linalg.norm(w, axis=1),
            np.abs(w[:, 2]),
            tilt,
        ],
        1,
    )


COVER_RATIO = 0.1  # a bin is covered where the generated density is at least this share of the real one


def coverage(real_pre: np.ndarray, generated_pre: np.ndarray, bins: int = 20) -> dict[str, float]:
    """Per feature, the share of real impacts in covered histogram bins (over the real range, `bins` wide).

    A bin is covered where the generated impacts' density is at least
    `COVER_RATIO` times the real ones' there: not merely present, but not a
    hundred times rarer than in the real tosses.
    """
    fr, fg = impact_features(real_pre), impact_features(generated_pre)
    out = {}
    for i, name in enumerate(FEATURES):
        edges = np.linspace(fr[:, i].min(), fr[:, i].max() + 1e-9, bins + 1)
        hr, _ = np.histogram(fr[:, i], edges)
        hg, _ = np.histogram(fg[:, i], edges)
        dens_r, dens_g = hr / max(len(fr), 1), hg / max(len(fg), 1)
        out[name] = float(hr[dens_g >= COVER_RATIO * dens_r].sum() / max(hr.sum(), 1))
    return out


def sample_bounce_inputs(n: int, *, key: PRNGKeyArray) -> tuple[np.ndarray, np.ndarray]:
    """Initial states (n, 13) and parameters (n, 3) of `n` bounce tosses (`BOUNCE_RANGES`, module docstring).

    As `sample_toss_inputs(ranges=BOUNCE_RANGES)`, but the orientation is a
    uniform yaw after a tilt, uniform in `BOUNCE_RANGES["tilt"]`, about a
    uniformly drawn horizontal axis from face-down.
    """
    k_in, k_tilt, k_axis, k_yaw = jax.random.split(key, 4)
    states, params = sample_toss_inputs(n, key=k_in, ranges=BOUNCE_RANGES)
    tilt = np.radians(np.asarray(jax.random.uniform(k_tilt, (n,), minval=0.0, maxval=1.0), np.float64))
    tilt = tilt * (BOUNCE_RANGES["tilt"][1] - BOUNCE_RANGES["tilt"][0]) + np.radians(BOUNCE_RANGES["tilt"][0])
    phi = 2 * np.pi * np.asarray(jax.random.uniform(k_axis, (n,)), np.float64)
    yaw = 2 * np.pi * np.asarray(jax.random.uniform(k_yaw, (n,)), np.float64)
    axis = np.stack([np.cos(phi), np.sin(phi), np.zeros(n)], 1)
    q_tilt = np.c_[np.cos(tilt / 2), np.sin(tilt / 2)[:, None] * axis]
    q_yaw = np.c_[np.cos(yaw / 2), np.zeros((n, 2)), np.sin(yaw / 2)]
    quat = np.asarray(jax.vmap(quat_mul)(jnp.asarray(q_tilt), jnp.asarray(q_yaw)), np.float64)
    states = np.asarray(states, np.float64).copy()
    low = np.asarray(jax.vmap(lowest_corner_z)(jnp.asarray(states)))  # the drawn height of the lowest corner
    states[:, 0:4] = quat
    states[:, 6] += low - np.asarray(jax.vmap(lowest_corner_z)(jnp.asarray(states)))
    return states, np.asarray(params)


def generate_bounce_events(sim: TossScene, n: int, *, key: PRNGKeyArray, engine: str = "c") -> dict:
    """First-impact events of `n` tosses drawn by `sample_bounce_inputs`, as a "cube-toss" event dict.

    `impact` is 1 on every row (they stand for later impacts); meta records the ranges.
    """
    states, params = sample_bounce_inputs(n, key=key)
    ev = toss_events(sim, np.asarray(states), np.asarray(params), engine=engine)
    meta = json.loads(ev["meta"]) | {"init_ranges": {k: list(v) for k, v in BOUNCE_RANGES.items()}}
    return ev | {"impact": np.ones(len(ev["toss_id"]), np.int64), "meta": json.dumps(meta)}

"""Fine-tuning the surrogate on recorded tracks: the track loss, early-stopped by cross-validation over strikes.

`clashx.finetune` learns from one velocity per strike read off its track.
`finetune_on_tracks` learns from the track itself: the hybrid's predicted
poses (`clashx.hybrid_track`: the surrogate's release prediction, MJX's
slide after it) against the recorded ones, in units of the motion-capture
noise, over the first `window` seconds after release.

The weight gradient is taken in two parts, because reverse mode cannot
pass MJX's constraint solver (a `while_loop`, mujoco#2259): the derivative
of each strike's loss with respect to the surrogate's six outputs by forward
mode through the slide (six tangents, float64 as `clashx.hybrid._strike_track`
requires), then a vector-Jacobian product through the network.  Steps are
Adam on the weights `FinetuneConfig.scope` names with an L2 pull toward the
starting weights; the step count is chosen by `clashx.learn._finetune.choose_steps`
on held-out strikes' track loss (whole strikes per fold).

**Measured on the strike lab (lab A, ten fit tracks, 200 test strikes, α = 0.1),
it does not make the surrogate more right about the impact.**  With the
defaults here (the last layer and the output normalisers, lr 1e-4, at most
20 steps, CV over five folds) cross-validation accepted 20 / 20 / 14 steps
(square / triangle / semi-cylinder; the held-out track loss fell 20-23 %)
and α moved 0.775 → 0.745, 0.59 → 0.625, 0.635 → 0.655, at 1.5-5 min per fit
on 2 CPU cores.  Moving all weights without early stopping lowered the
square's track loss 215 → 9.6 in 40 steps while α fell 0.76 → 0.435: the
weights learn to make MuJoCo's slide reproduce the lab's track (the block's
rocking at release, the lab's slide and spin-down), not the true
post-impact velocity.  So `clashx.fit_recording` does not call it; it is
here for scenes whose slide MuJoCo reproduces (tests/test_track.py: on
MuJoCo's own tracks it removes most of a 15 % speed error), and to measure.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..core import PRNGKeyArray, as_float64
from ..events import read_tracks
from ..hybrid import Query, pose_loss, track_from_release
from ..scenes import RELEASE_AFTER, StrikeScene
from ..surrogate import StrikeSurrogate
from ._finetune import FinetuneConfig, FinetuneResult, choose_steps, cv_folds

WINDOW = 0.3  # s after release fitted by default: the slide's first part, where the release velocity dominates


class TrackBatch(NamedTuple):
    """A recording's touched strikes as the track loss takes them (padded to one length).

    Attributes:
        query: `Query` with (n, ·) leaves.
        poses: (n, T, 3) recorded poses (x, y, yaw), padded with the last sample.
        mask: (n, T) which samples are real and inside the window.
        noise: motion-capture noise (position m, yaw rad) pooled from the recording.
        n_steps: slide steps that cover the last fitted sample.
    """

    query: Query
    poses: np.ndarray
    mask: np.ndarray
    noise: tuple[float, float]
    n_steps: int


def track_batch(sim: StrikeScene, recording: dict[str, Any], *, rows=None, window: float = WINDOW) -> TrackBatch:
    """The touched strikes of a strike-lab recording (among `rows`) with their samples up to `window` s after
    release (`window` <= 0: the whole track)."""
    strikes, times, poses, starts, noise = read_tracks(recording, rows)
    touched = np.asarray(recording["touched"]).astype(bool)
    keep = np.flatnonzero(touched) if rows is None else np.asarray([int(i) for i in np.atleast_1d(rows) if touched[i]])
    t_touch = np.asarray(recording["t_first_touch"], np.float64)[keep]
    cut = [t <= tt + RELEASE_AFTER + window if window > 0 else np.ones(len(t), bool) for t, tt in zip(times, t_touch)]
    k = max(int(c.sum()) for c in cut)
    pad = lambda a, c: np.concatenate([a[c], np.repeat(a[c][-1:], k - int(c.sum()), 0)])  # noqa: E731
    t_pad = np.stack([pad(t, c) for t, c in zip(times, cut)])
    last = float(np.max(t_pad - t_touch[:, None])) - RELEASE_AFTER
    query = Query(strikes, starts, t_touch, t_pad)
    mask = np.stack([np.arange(k) < int(c.sum()) for c in cut])
    n_steps = max(int(np.ceil(last / sim.settings.dt_slide)) + 2, 2)
    return TrackBatch(query, np.stack([pad(p, c) for p, c in zip(poses, cut)]), mask, noise, n_steps)


def _f32(tree):
    return jax.tree.map(lambda a: a.astype(jnp.float32) if eqx.is_inexact_array(a) else a, tree)


def finetune_on_tracks(
    model: StrikeSurrogate,
    sim: StrikeScene,
    recording: dict[str, Any],
    params: np.ndarray,
    *,
    key: PRNGKeyArray,
    config: FinetuneConfig | None = None,
    rows=None,
    window: float = WINDOW,
) -> FinetuneResult:
    """Fine-tune `model` on a recording's tracks at fixed `params`, early-stopped by cross-validation.

    Args:
        model: the (identified, re-distilled) surrogate of the recording's shape.
        sim: the strike scene of that shape.
        recording: strike-lab recording arrays (`clashx.events._ingest_strike` format).
        params: (p,) identified parameters.
        key: PRNG key of the fold assignment.
        config: step size, step budget (`max_steps`), folds, pull, scope, stopping rule.
        rows: strikes to use (default: every touched one).
        window: seconds after release fitted (<= 0: the whole track).

    Returns:
        A `FinetuneResult`: the model, the chosen steps, why, the held-out track-loss curve and the time.
    """
    config = config or FinetuneConfig(max_steps=20, lr=1e-4)
    t0 = time.perf_counter()
    batch = track_batch(sim, recording, rows=rows, window=window)
    n = len(batch.poses)
    config, fold_of = cv_folds(key, n, config, what="tracks")
    with jax.enable_x64(True):
        sim64, base = as_float64(sim), as_float64(model)
        p = jnp.asarray(params, jnp.float64)
        q = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), batch.query)
        poses, mask = jnp.asarray(batch.poses, jnp.float64), jnp.asarray(batch.mask)
        w0, static = eqx.partition(base, base.trainable(config.scope))

        def strike_loss(out, qi, rec, m):
            return pose_loss(track_from_release(sim64, out, p, qi, batch.n_steps), qi, rec, batch.noise, m)

        def outputs(w):
            return jax.vmap(eqx.combine(w, static).release, in_axes=(0, None))(q.strike, p)

        @jax.jit
        def losses_and_grad(w, train_w):
            outs, pullback = jax.vjp(outputs, w)
            per, d_out = jax.vmap(lambda o, qi, r, m: (strike_loss(o, qi, r, m), jax.jacfwd(strike_loss)(o, qi, r, m)))(
                outs, q, poses, mask
            )
            (g,) = pullback(d_out * (train_w / jnp.sum(train_w))[:, None])
            g = jax.tree.map(lambda a, b, c: a + config.pull * (b - c), g, w, w0)
            return per, g

        opt = optax.adam(config.lr)

        def run(train_w, eval_w, steps):
            w, state, curve = w0, opt.init(w0), []
            for _ in range(steps + 1):
                per, g = losses_and_grad(w, train_w)
                curve.append(float(jnp.sum(per * eval_w) / jnp.sum(eval_w)))
                if len(curve) <= steps:
                    upd, state = opt.update(g, state, w)
                    w = optax.apply_updates(w, upd)
            return w, curve

        curves = []
        for f in range(config.folds):
            held = np.asarray(fold_of == f, np.float64)
            curves.append(run(jnp.asarray(1.0 - held), jnp.asarray(held), config.max_steps)[1])
        steps, best, reason = choose_steps(np.asarray(curves), config)
        tuned = base
        if steps > 0:
            w, _ = run(jnp.ones(n), jnp.ones(n), steps)
            tuned = eqx.combine(w, static)
    mean = np.mean(curves, 0)
    return FinetuneResult(
        _f32(tuned), steps, reason.replace("held-out loss", "held-out track loss"), tuple(float(v) for v in mean),
        config.folds, {"tracks": n, "window_s": window, "time_s": time.perf_counter() - t0},
    )  # fmt: skip

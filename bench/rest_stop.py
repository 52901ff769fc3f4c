"""MuJoCo C slides stopped at rest against slides to MAX_TIME: time ratio and rest-pose change, per shape.

    python bench/rest_stop.py [--n 512] [--seed 5]

`clashx.scenes._strike_c.slide_to_rest_c` (the slide of `simulate_strikes_c`) steps the batch
50 steps at a time, carries the still-moving worlds on in a smaller batch once half have come
to rest, and stops when all have; `slide_c` runs every world to MAX_TIME.  Both start from the
same contact phase; compile time is left out (a 4-world warm-up).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import clashx
from clashx.events import sample_strikes
from clashx.scenes import MAX_TIME, block_poses_batch, contact_phase_c, slide_c, slide_to_rest_c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=512, help="prior strikes per shape")
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    print(f"device: {jax.devices()[0].platform}; {a.n} prior strikes per shape, seed {a.seed}")
    for shape in clashx.SHAPES:
        sim = clashx.make_strike_scene(shape)
        s = np.asarray(sample_strikes(a.n, key=jax.random.PRNGKey(a.seed)), np.float64)
        p = np.asarray(sim.space.sample(a.n, key=jax.random.PRNGKey(a.seed + 1)), np.float64)
        c = contact_phase_c(sim, s, p)
        slide_to_rest_c(sim, p[:4], c.q_end[:4], c.v_end[:4], c.t_end[:4])  # warm-up
        t0 = time.perf_counter()
        n_steps = np.ceil((MAX_TIME - c.t_end) / sim.settings.dt_slide - 1e-9).astype(int)
        full = slide_c(sim, p, c.q_end, c.v_end, c.t_end, int(n_steps.max()))[np.arange(a.n), n_steps - 1]
        t_full = time.perf_counter() - t0
        t0 = time.perf_counter()
        early = slide_to_rest_c(sim, p, c.q_end, c.v_end, c.t_end)
        t_early = time.perf_counter() - t0
        d = np.abs(np.asarray(block_poses_batch(jnp.asarray(full))) - np.asarray(block_poses_batch(jnp.asarray(early))))
        print(
            f"{shape:14s} to MAX_TIME {t_full:6.2f} s   stopped at rest {t_early:6.2f} s   ratio {t_early / t_full:.2f}   "
            f"max |Δpos| {d[:, :2].max() * 1e6:.2f} µm   max |Δyaw| {d[:, 2].max():.1e} rad"
        )


if __name__ == "__main__":
    main()

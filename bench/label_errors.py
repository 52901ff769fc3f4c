"""How wrong the velocities read off strike tracks are, and what in a track says so (a diagnostic, issue 26).

    python bench/label_errors.py RECORDING.npz [RECORDING.npz ...] [--json OUT]

Each recording is a strike-lab file with `post_velocity_true` (read here to
measure the labels' errors only; nothing is fitted to it).  Every touched
strike's label is read as `clashx.events.ingest_strike_lab` reads it (the
stop-time slide fit with the file's pooled prior), and per shape the script
prints:

* the labels' relative error of the speed vector (vx, vy, r ωz), by how many
  samples the slide has before its fitted stop (`SlideFit.slide_samples`;
  `WELL_MEASURED_SAMPLES` = 12 is the ingestion's own "well measured");
* each label's σ read off its track alone (`clashx.events.track_label_sigma`:
  the slide model's grid posterior over stop times and veers) and how it ranks
  and scales the labels' errors of (vx, vy).

Measured on the ten-strike recordings of lab A's seeds 2, 12, 22, 32 and labs
C and D's 2, 22, 32, and the test recordings (`bench/results/cpu2/label_errors.txt`).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import spearmanr

from clashx.core import write_json
from clashx.events import WELL_MEASURED_SAMPLES, recording_slides, release_speed_sigma, speed_vector
from clashx.scenes import geometry as geo

BUCKETS = ((0, WELL_MEASURED_SAMPLES), (WELL_MEASURED_SAMPLES, 20), (20, 30), (30, 10**6))


def read(path: str) -> list[dict]:
    """One row per touched strike of a recording: its label's errors, slide samples and σ."""
    raw = dict(np.load(path))
    sl = recording_slides(raw, path)
    length = geo.characteristic_length(sl.shape)
    out = []
    for i, fit in zip(sl.rows, sl.fits):
        true = np.asarray(raw["post_velocity_true"][i], np.float64)
        if not np.isfinite(true).all():
            continue
        y, u = (np.asarray(speed_vector(v[None], length))[0] for v in (fit.velocity, true))
        sigma = release_speed_sigma(
            *sl.tracks[i], sl.t_release[i], point=sl.point, noise=sl.noise, prior=sl.prior, yaw0=fit.yaw
        )
        out.append({
            "shape": sl.shape, "file": path, "error": float(np.linalg.norm(y - u) / np.linalg.norm(u)),
            "error_v": float(np.linalg.norm(fit.velocity[:2] - true[:2]) / np.linalg.norm(true[:2])),
            "component": ((y - u) / np.linalg.norm(u)).tolist(), "slide_samples": fit.slide_samples, "sigma_v": sigma,
        })  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recordings", nargs="+")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = [r for path in a.recordings for r in read(path)]
    for shape in geo.SHAPES:
        rs = [r for r in rows if r["shape"] == shape]
        if not rs:
            continue
        e, n = np.array([r["error"] for r in rs]), np.array([r["slide_samples"] for r in rs])
        comp = np.array([r["component"] for r in rs])
        print(f"{shape}: {len(rs)} labels, median error {np.median(e):.3f}, {np.mean(e > 0.2):.2f} beyond 0.2; "
              f"Spearman of the error with the slide's samples {spearmanr(e, n)[0]:.2f}")  # fmt: skip
        for lo, hi in BUCKETS:
            k = (n >= lo) & (n < hi)
            if k.any():
                rms = np.sqrt(np.mean(comp[k] ** 2, 0))
                print(f"  slide samples {lo:>2}-{min(hi, 999):>3}: {k.sum():>4} labels, median error "
                      f"{np.median(e[k]):.3f}, beyond 0.2 {np.mean(e[k] > 0.2):.2f}, rms (vx, vy, r ωz) "
                      f"{rms[0]:.3f} {rms[1]:.3f} {rms[2]:.3f}")  # fmt: skip
        ev, s = np.array([r["error_v"] for r in rs]), np.array([r["sigma_v"] for r in rs])
        print(f"  σ of the release speed (vx, vy) from the track: median {np.median(s):.3f} against the error's "
              f"{np.median(ev):.3f}; median error / σ {np.median(ev / s):.2f}, within 2 σ {np.mean(ev < 2 * s):.2f}; "
              f"Spearman {spearmanr(ev, s)[0]:.2f}")  # fmt: skip
        q = np.quantile(s, [0.0, 0.5, 0.8, 1.0])
        for name, lo, hi in zip(("lowest half", "next 30 %", "highest 20 %"), q[:-1], q[1:]):
            k = (s >= lo) & (s <= hi)
            print(f"    σ's {name:<12} (from {lo:.3f}): {k.sum():>4} labels, median error {np.median(ev[k]):.3f}, "
                  f"rms {np.sqrt(np.mean(ev[k] ** 2)):.3f}")  # fmt: skip
    if a.json:
        write_json(a.json, rows)


if __name__ == "__main__":
    main()

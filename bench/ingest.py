"""How well each ingestion method reads post-impact velocities off recorded tracks, against the lab's truth.

    python bench/ingest.py --shape square [--input REC.npz] [--methods stop-time,sim] [--max-strikes 200] [--json OUT]

INPUT is a strike-lab recording with `post_velocity_true` (default: the
shipped lab-A test recording, 200 strikes; for a fresh seed run e.g.
`strike_lab.py --shape square --random 200 --seed 11 --reset-each`).  Each
method ingests the tracks (never reading the truth); the estimates are then
scored against `post_velocity_true` with clashx's metric (relative error of
(vx, vy, r·ωz), r the footprint's radius of gyration): median, 90th
percentile and the share within α = 0.1, with the wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from clashx.core import write_json
from clashx.events import ingest_strike_lab, lab_recording, read_npz, relative_error
from clashx.hybrid import ingest_by_simulation
from clashx.scenes import geometry as geo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, choices=geo.SHAPES)
    ap.add_argument("--input", help="strike-lab recording with post_velocity_true (default: the shipped test one)")
    ap.add_argument("--methods", default="stop-time,sim")
    ap.add_argument("--max-strikes", type=int, default=200, help="use the first N strikes")
    ap.add_argument("--json")
    a = ap.parse_args()
    path = a.input or str(lab_recording(a.shape, "test"))
    raw = read_npz(path, "strike recording")
    if str(raw["shape"]) != a.shape:
        raise SystemExit(f"--input {path}: strikes on the {str(raw['shape'])!r} block, not {a.shape!r}")
    n = min(a.max_strikes, len(raw["offsets"]) - 1)
    off = raw["offsets"]
    rec = {k: v for k, v in raw.items() if k not in ("offsets", "t", "block_pose", "striker_xy")}
    rec = {k: (v[:n] if np.ndim(v) and len(v) == len(off) - 1 else v) for k, v in rec.items()}
    rec |= {k: raw[k][: off[n]] for k in ("t", "block_pose", "striker_xy") if k in raw} | {"offsets": off[: n + 1]}
    truth = np.asarray(rec.pop("post_velocity_true"), np.float64)
    length = geo.characteristic_length(a.shape)
    out = {"input": path, "n": n, "shape": a.shape, "methods": {}}
    for method in a.methods.split(","):
        t0 = time.perf_counter()
        ev = ingest_by_simulation(rec, path) if method == "sim" else ingest_strike_lab(rec, path)
        dt = time.perf_counter() - t0
        ok = ev["touched"] & np.isfinite(ev["post_velocity"]).all(1) & np.isfinite(truth).all(1)
        err = np.asarray(relative_error(ev["post_velocity"][ok], truth[ok], length))
        r = {
            "median": float(np.median(err)),
            "p90": float(np.percentile(err, 90)),
            "alpha_0.1": float(np.mean(err <= 0.1)),
            "n": int(ok.sum()),
            "time_s": dt,
        }
        out["methods"][method] = r
        print(
            f"{a.shape:<14}{method:<10} median {100 * r['median']:5.1f} %  p90 {100 * r['p90']:5.1f} %  "
            f"within α=0.1 {r['alpha_0.1']:.3f}  ({r['n']} strikes, {dt:.1f} s)",
            flush=True,
        )
    if a.json:
        write_json(a.json, out)


if __name__ == "__main__":
    main()

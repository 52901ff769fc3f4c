"""Training impacts for every impact of a real toss: generate them, and show they cover the real ones.

    python bench/cube_impacts.py --out DIR [--n-toss 131072] [--n-bounce 131072] [--seed 5]
                                 [--tosses FILE] [--plot PNG] [--json OUT]
    python bench/cube_pretrain.py --data DIR/toss.npz DIR/bounce.npz --out RUN --epochs 60

Writes two event files on MuJoCo C (`clashx.events._cube_impacts`):
  DIR/toss.npz    first impacts of tosses drawn from `INIT_RANGES` (what `clashx generate --scene cube-toss` makes)
  DIR/bounce.npz  first impacts of tosses drawn from `BOUNCE_RANGES`: a cube just above the table, for the later impacts
and compares the pre-impact states, feature by feature, with every impact of the
real tosses (`ingest_cube_tosses(impacts="all")`): per-feature histograms (real
first impacts, real later impacts, generated) in `--plot`, and the share of real
impacts whose histogram bin holds generated ones.  An existing DIR/*.npz is
read, not made again.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

from clashx.events import (
    FEATURES,
    coverage,
    data_path,
    generate_bounce_events,
    impact_features,
    ingest_cube_tosses,
    load_events,
    save_events,
)
from clashx.scenes import make_toss_scene, sample_toss_inputs, toss_events

CHUNK = 8192


def _make(path: str, n: int, key, bounce: bool, sim) -> dict:
    if os.path.exists(path):
        print(f"{path}: exists, read")
        return load_events(path, scene="cube-toss")
    parts = []
    t0 = time.perf_counter()
    for i, k in enumerate(jax.random.split(key, -(-n // CHUNK))):
        m = min(CHUNK, n - i * CHUNK)
        if bounce:
            parts.append(generate_bounce_events(sim, m, key=k))
        else:
            s, p = sample_toss_inputs(m, key=k)
            parts.append(toss_events(sim, np.asarray(s), np.asarray(p), engine="c"))
        print(f"  {os.path.basename(path)}: {min((i + 1) * CHUNK, n)}/{n} tosses ({time.perf_counter() - t0:.0f} s)")
    ev = {k: np.concatenate([q[k] for q in parts]) for k in ("initial_state", "pre_state", "post_state", "t_impact")}
    ev |= {k: np.concatenate([q[k] for q in parts]) for k in ("params", "toss_id")}
    ev["impact"] = np.full(len(ev["toss_id"]), int(bounce), np.int64)
    ev |= {"scene": "cube-toss", "shape": "", "source": "mujoco-c", "meta": parts[0]["meta"]}
    save_events(path, ev)
    return load_events(path, scene="cube-toss")


def plot_coverage(real: dict, generated: dict[str, np.ndarray], path: str) -> None:
    """Per-feature histograms: real first impacts, real later impacts, each generated set (densities)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fr = impact_features(real["pre_state"])
    first = real["impact"] == 0
    fg = {name: impact_features(pre) for name, pre in generated.items()}
    fig, axes = plt.subplots(1, len(FEATURES), figsize=(4 * len(FEATURES), 3.4))
    for i, (ax, name) in enumerate(zip(axes, FEATURES, strict=True)):
        lo = min([fr[:, i].min()] + [np.percentile(f[:, i], 0.5) for f in fg.values()])
        hi = max([fr[:, i].max()] + [np.percentile(f[:, i], 99.5) for f in fg.values()])
        edges = np.linspace(lo, hi, 31)
        for label, f in fg.items():
            ax.hist(f[:, i], edges, density=True, histtype="stepfilled", alpha=0.25, label=f"generated: {label}")
        ax.hist(fr[first, i], edges, density=True, histtype="step", lw=2, color="k", label="real, first impacts")
        ax.hist(fr[~first, i], edges, density=True, histtype="step", lw=2, color="C3", label="real, later impacts")
        ax.set_xlabel(name)
    axes[0].set_ylabel("density")
    axes[0].legend(fontsize=7)
    fig.suptitle("pre-impact states: every impact of the real tosses against the generated training impacts")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for toss.npz and bounce.npz")
    ap.add_argument("--n-toss", type=int, default=131072)
    ap.add_argument("--n-bounce", type=int, default=131072)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--tosses", default=None, help="real cube-toss file (default: the shipped ContactNets tosses)")
    ap.add_argument("--plot", default=None, help="PNG of the per-feature histograms")
    ap.add_argument("--json", default=None, help="write the coverage and the impact counts here")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    sim = make_toss_scene()
    k_toss, k_bounce = jax.random.split(jax.random.PRNGKey(a.seed))
    toss = _make(os.path.join(a.out, "toss.npz"), a.n_toss, k_toss, False, sim)
    bounce = _make(os.path.join(a.out, "bounce.npz"), a.n_bounce, k_bounce, True, sim)
    real = ingest_cube_tosses(a.tosses or str(data_path("contactnets_cube/tosses.npz")), impacts="all")
    counts = np.bincount(real["impact"]).tolist()
    print(f"real impacts: {len(real['impact'])} in {len(np.unique(real['toss_id']))} tosses, by index {counts}")
    later = real["pre_state"][real["impact"] > 0]
    union = np.concatenate([toss["pre_state"], bounce["pre_state"]])
    result = {"real_impacts_by_index": counts, "coverage": {}}
    for label, gen in (("toss", toss["pre_state"]), ("toss + bounce", union)):
        for which, pre in (("all real", real["pre_state"]), ("real later", later)):
            cov = coverage(pre, gen)
            result["coverage"][f"{label} / {which}"] = cov
            print(f"{label:>14} covers {which:>10}: " + ", ".join(f"{k} {v:.2f}" for k, v in cov.items()))
    if a.plot:
        plot_coverage(real, {"toss": toss["pre_state"], "bounce": bounce["pre_state"]}, a.plot)
        print(f"wrote {a.plot}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

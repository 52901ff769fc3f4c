"""Pretrain the cube-table impact surrogate on generated tosses (how the shipped one was made).

    clashx generate --scene cube-toss --engine c --n 65536 --seed 1 --out train.npz
    clashx generate --scene cube-toss --engine c --n 196608 --seed 2 --out train2.npz
    python bench/cube_pretrain.py --data train.npz train2.npz --out clashx/data/cube_surrogate --epochs 100

The tosses are simulated on MuJoCo C (`--engine c`): the same model as MJX
(tests/test_toss.py checks their events agree), ~10x faster on a CPU.
"""

from __future__ import annotations

import argparse
import json

from clashx.learn import cube_pretrain_config, pretrain_cube


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, nargs="+", help="event file(s) of `clashx generate --scene cube-toss`")
    ap.add_argument("--out", required=True, help="folder for cube_surrogate.eqx / .json")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    config = cube_pretrain_config(tuple(a.data), a.out, epochs=a.epochs, width=a.width, depth=a.depth, seed=a.seed)

    def progress(epoch, total, m):
        print(
            f"epoch {epoch}/{total}: train {m['train_loss']:.4f} val {m['val_loss']:.4f} ({m['elapsed_s']:.0f} s)",
            flush=True,
        )

    result = pretrain_cube(config, progress=progress)
    result.save(config.out)
    print(json.dumps(result.validation, indent=1))


if __name__ == "__main__":
    main()

"""The `clashx` command line: flags are parsed into a typed config and handed to one library function."""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import _geometry as geo


def _progress_bar(desc: str, unit: str):
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def _cmd_generate(a: argparse.Namespace) -> int:
    from ._generate import GenerateConfig, generate

    config = GenerateConfig(
        scene=a.scene,
        shape=a.shape if a.scene == "strike" else "",
        n=a.n,
        seed=a.seed,
        out=a.out,
        chunk_size=a.chunk_size,
        engine=a.engine,
        to_rest=not a.no_rest,
    )
    t0 = time.perf_counter()
    generate(config, progress=_progress_bar(f"generate {a.scene} {config.shape}".strip(), "events"))
    print(f"{config.n} {a.scene} events -> {a.out} ({time.perf_counter() - t0:.1f} s, engine {a.engine})")
    return 0


def _cmd_ingest(a: argparse.Namespace) -> int:
    from ._events import n_events, save_events

    if a.source == "strike-lab":
        from ._ingest import ingest_strike_file

        events = ingest_strike_file(a.input)
    else:
        from ._ingest_cube import ingest_cube_tosses

        events = ingest_cube_tosses(a.input)
    save_events(a.out, events)
    print(f"{n_events(events)} {events['scene']} events from {a.input} -> {a.out}")
    return 0


def _cmd_demo(a: argparse.Namespace) -> int:
    from ._demo import run_demo

    return run_demo(n=a.n, seed=a.seed)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `clashx` command."""
    ap = argparse.ArgumentParser(prog="clashx", description="Collision learning for robot simulators (CLASH).")
    sub = ap.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="simulate collisions over the prior and write an event file")
    g.add_argument("--scene", required=True, choices=("strike", "cube-toss"))
    g.add_argument("--shape", choices=geo.SHAPES, help="block shape (strike scene)")
    g.add_argument("--n", type=int, required=True, help="number of events")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True, help="output event file (.npz); OUT.parts/ holds chunks until done")
    g.add_argument("--chunk-size", type=int, default=1024, help="events per saved chunk (default 1024)")
    g.add_argument(
        "--engine",
        choices=("mjx", "c"),
        default="mjx",
        help="mjx: jit+vmap on the JAX device (default); c: MuJoCo C on all CPU cores (faster without a GPU)",
    )
    g.add_argument("--no-rest", action="store_true", help="skip the slide to rest (rest_pose = pose at release)")
    g.set_defaults(func=_cmd_generate)

    i = sub.add_parser("ingest", help="turn recordings (strike lab, cube tosses) into an event file")
    i.add_argument("--source", required=True, choices=("strike-lab", "cube-toss"))
    i.add_argument("--input", required=True, help="recording file (.npz)")
    i.add_argument("--out", required=True, help="output event file (.npz)")
    i.set_defaults(func=_cmd_ingest)

    d = sub.add_parser("demo", help="the main job end to end, at a size for a laptop")
    d.add_argument("--n", type=int, default=64, help="events per shape")
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(func=_cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `clashx` console script."""
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.command == "generate" and a.scene == "strike" and not a.shape:
        parser.error("generate --scene strike needs --shape")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        return a.func(a)
    except (ValueError, FileNotFoundError) as e:
        print(f"clashx {a.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

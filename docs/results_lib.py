"""Helpers of docs/gen_results.py: reading bench/results/ and saying where each table came from."""

from __future__ import annotations

import ast
import json
import math
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
OUT = ROOT / "docs" / "results.md"
MACHINES = {"cpu2": "2-core CPU", "tpu_v5e": "TPU v5e host"}
SHAPES = ("semi-cylinder", "square", "triangle")
SHORT_SHAPES = {"semi": "semi-cylinder", "squa": "square", "tria": "triangle"}
# Result files whose name does not start with their bench script's.
SCRIPT_OF = {
    "own_scene_": "own_scene_families",
    "part2": "throughput",
    "pipeline": "throughput",
    "engines": "throughput",
    "fitn": "compliant_surrogate",
    "fitfr": "compliant_surrogate",
    "fitft": "compliant_surrogate",
    "budget": "compliant_surrogate",
}


def warn(message: str) -> None:
    print(f"gen_results: {message}", file=sys.stderr)


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def load(path: Path):
    """A JSON file's content, or None (said on stderr) if it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        warn(f"skipping {rel(path)}: {e}")
        return None


def git_date(path: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", str(path)], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        out = ""
    return out or "not committed"


def shallow() -> bool:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return False
    return out == "true"


def script_of(path: Path) -> str | None:
    """The bench script that wrote a result file: the longest bench/*.py stem its name starts with."""
    stems = sorted((p.stem for p in (ROOT / "bench").glob("*.py")), key=len, reverse=True)
    name = path.name
    for prefix, stem in SCRIPT_OF.items():
        if name.startswith(prefix):
            return stem
    return next((s for s in stems if name.startswith(s)), None)


def readme_commands(folder: Path) -> list[str]:
    """The commands a results folder's README.md gives: its indented `python ...` lines (with their
    continuations), else the first `bench/....py ...` it quotes."""
    readme = folder / "README.md"
    if not readme.is_file():
        return []
    text = readme.read_text()
    commands: list[str] = []
    going = False
    for line in text.splitlines():
        stripped = line.strip()
        if going:
            commands[-1] += "\n    " + stripped
        elif line.startswith("    ") and stripped.startswith("python"):
            commands.append(stripped)
        else:
            continue
        going = stripped.endswith("\\")
    if not commands:
        quoted = re.search(r"`(bench/\w+\.py[^`]*)`", text)
        commands = [f"python {quoted.group(1)}"] if quoted else []
    return commands


def config_command(path: Path, data) -> str | None:
    """`python bench/SCRIPT.py --flag value ...` from a JSON's recorded `config` or `args` (the keys the script
    takes as flags; the others named in a comment)."""
    if not isinstance(data, dict):
        return None
    config = data.get("config") or data.get("args") or (data.get("_meta") or {}).get("config")
    script = script_of(path)
    if not isinstance(config, dict) or not script:
        return None
    source = (ROOT / "bench" / f"{script}.py").read_text()
    parts, other = [f"python bench/{script}.py"], []
    for k, v in config.items():
        flag = "--" + k.replace("_", "-")
        if k == "json" or v is None or v is False:
            continue
        if f'"{flag}"' not in source:
            other.append(f"{k}={v}")
        elif v is True:
            parts.append(flag)
        else:
            parts.append(f"{flag} {','.join(map(str, v)) if isinstance(v, list) else v}")
    return " ".join(parts) + (f"  # also recorded: {', '.join(other)}" if other else "")


def device_label(d) -> str | None:
    """What a JSON says it ran on, shortly: '13 CPU cores', 'JAX on tpu'."""
    if not isinstance(d, dict):
        return None
    if isinstance(d.get("details"), dict) and "device" in d["details"]:
        d = d["details"]
    if isinstance(d.get("backend"), str):
        return f"JAX on {d['backend']}"
    device = d.get("device")
    if not isinstance(device, str):
        return None
    if "CPU cores" in device:
        return device.rsplit(", ", 1)[-1]
    return "JAX on tpu" if device.startswith("TPU") else "JAX on cpu" if device.startswith("cpu") else device


def provenance(files: list[Path], data: list) -> str:
    """Machine, date, command and source of a table made of `files` (their parsed content in `data`)."""
    pairs = [(f, d) for f, d in zip(files, data + [None] * (len(files) - len(data))) if f.exists()]
    files = [f for f, _ in pairs]
    machines = []
    for top in dict.fromkeys(f.relative_to(RESULTS).parts[0] for f in files):
        devices = sorted(
            {x for f, d in pairs if f.relative_to(RESULTS).parts[0] == top for x in [device_label(d)] if x}
        )
        machines.append(MACHINES.get(top, top) + (f" ({', '.join(devices)})" if devices else ""))
    machine = ", ".join(machines)
    dates = sorted({d["date"] for _, d in pairs if isinstance(d, dict) and isinstance(d.get("date"), str)})
    dates = dates or sorted({git_date(f) for f in files})
    date = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    commands = [d["command"] for _, d in pairs if isinstance(d, dict) and isinstance(d.get("command"), str)]
    commands = commands or [c for c in (config_command(f, d) for f, d in pairs) if c]
    if not commands:
        for folder in dict.fromkeys(f.parent for f in files):
            commands += readme_commands(folder)
    if not commands:
        scripts = sorted({s for s in map(script_of, files) if s})
        commands = [f"python bench/{s}.py  # its flags are not recorded" for s in scripts]
    unique = list(dict.fromkeys(commands))
    shown = "\n".join(unique[:4]) + (f"\n# ... {len(unique) - 4} more" if len(unique) > 4 else "")
    folders = list(dict.fromkeys(rel(f.parent) + "/" for f in files))
    return (
        f"*Machine:* {machine}.  *Date:* {date}.  *Files:* {', '.join(f'`{x}`' for x in folders)}\n\n"
        f"```bash\n{shown}\n```\n"
    )


def num(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


def signed(x: float) -> str:
    return f"{x:+.3f}".replace("-", "−")


def table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- the strike


def lab_name(lab: str) -> str:
    return lab[:1].upper() + lab[1:]


def natural(name: str) -> tuple[str, int]:
    """Sort key of a lab-seed such as "A12": the lab, then the seed as a number."""
    digits = name.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    return (name[: len(name) - len(digits)], int(digits) if digits.isdigit() else 0)


def finite(values) -> list[float]:
    return [float(v) for v in values or [] if isinstance(v, int | float) and math.isfinite(v)]


def parse_rows(path: Path) -> list[tuple[list[str], list]]:
    """Rows of a table `bench/compliant_surrogate.py` printed: words, then Python dicts, then the seconds."""
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#") or "{" not in line:
            continue
        head, rest = line[: line.index("{")].split(), line[line.index("{") :]
        try:
            dicts = []
            while rest.lstrip().startswith("{"):
                end = rest.index("}") + 1
                dicts.append(ast.literal_eval(rest[:end].strip()))
                rest = rest[end:]
            rows.append((head, dicts))
        except (ValueError, SyntaxError) as e:
            warn(f"{rel(path)}: skipping a line it cannot read ({e}): {line[:60]}")
    return rows

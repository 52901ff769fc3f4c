"""The package's layout holds: folders use each other's public surface only, and imports sit at the top.

The layering itself (which folder may import which) is import-linter's `layers`
contract in pyproject.toml, run by `.ci/run` (`lint-imports`).  These checks read
the sources' imports (no clashx module is imported):

- a module of one folder, or a bench script, imports another folder's names from
  that folder's `__init__.py`, never from its private modules (`from ..scenes._toss import x`);
- every name so imported is one that `__init__.py` lists, and none is private (`_name`);
- no clashx module imports clashx code inside a function.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "clashx"
FOLDERS = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").exists())


def _exports(folder: str) -> set[str]:
    tree = ast.parse((PKG / folder / "__init__.py").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def _cross_imports(path: pathlib.Path):
    """(line, target folder, module path after it, names) of each import of another clashx folder in `path`."""
    own = path.parent.name if path.parent.parent == PKG else None
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        if node.level == 2 and own is not None:
            parts = node.module.split(".")
        elif node.level == 0 and node.module.split(".")[0] == "clashx" and "." in node.module:
            parts = node.module.split(".")[1:]
        else:
            continue
        if parts[0] in FOLDERS and parts[0] != own:
            yield node.lineno, parts[0], parts[1:], [a.name for a in node.names]


SOURCES = sorted(p for p in PKG.rglob("*.py") if p.name != "__init__.py" and p.parent != PKG) + sorted(
    (ROOT / "bench").rglob("*.py")
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_other_folders_are_used_through_their_init(path):
    bad = []
    for line, folder, rest, names in _cross_imports(path):
        if rest:
            bad.append(f"line {line}: from {folder}.{'.'.join(rest)} (import it from clashx.{folder})")
            continue
        missing = [n for n in names if n not in _exports(folder)]
        if missing:
            bad.append(f"line {line}: {missing} are not in clashx/{folder}/__init__.py")
        private = [n for n in names if n.startswith("_")]
        if private:
            bad.append(f"line {line}: private names {private} of clashx.{folder}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_clashx_import_inside_a_function(path):
    tree = ast.parse(path.read_text())
    inner = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                is_ours = isinstance(node, ast.ImportFrom) and (
                    node.level > 0 or (node.module or "").startswith("clashx")
                )
                if is_ours:
                    inner.append(f"line {node.lineno} in {fn.name}")
    assert not inner, inner

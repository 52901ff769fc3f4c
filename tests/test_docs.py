"""The Python in the README and on the quickstart page runs as written (executed top to bottom, one namespace per page)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/quickstart.md")


def python_blocks(path: Path) -> list[str]:
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.M | re.S)


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_as_written(page, tmp_path, monkeypatch, capsys):
    """Every block of the page, in order, in a fresh folder that holds the repository's examples."""
    blocks = python_blocks(ROOT / page)
    assert blocks, f"{page} has no python block"
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"{page} block {i + 1}", "exec"), namespace)  # noqa: S102
        except Exception as e:  # name the page and the block
            raise AssertionError(f"{page}, python block {i + 1} failed: {type(e).__name__}: {e}") from e
    out = capsys.readouterr().out
    assert "nan" not in out.lower().split(), out  # nothing printed as NaN
    if page == "README.md":
        assert os.path.exists(ROOT / "docs" / "img" / "alpha_square.png")

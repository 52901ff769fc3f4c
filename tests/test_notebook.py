"""The strike-pipeline notebook runs top to bottom (it needs the strike lab, so ../shared and pybullet)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "strike_pipeline.ipynb"


def test_strike_pipeline_notebook_runs():
    pytest.importorskip("pybullet")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    if not (SHARED / "lab" / "strike_lab.py").exists():
        pytest.skip("the strike lab (../shared/lab) is not here")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "α=0.1 accuracy" in outputs

"""The notebooks run top to bottom: the strike pipeline on the shipped lab recordings, and your own scene (the ball)."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.parametrize(
    ("name", "printed"),
    [("strike_pipeline.ipynb", "α=0.1 accuracy"), ("own_scene.ipynb", "final x against full contact")],
)
def test_notebook_runs(name, printed):
    nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="the test extra installs nbclient")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert printed in outputs, outputs[-2000:]

"""The notebooks run end to end at small sizes (outputs are not committed)."""

import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quickstart.ipynb", "baselines.ipynb"])
def test_notebook_runs(name, tmp_path, monkeypatch):
    monkeypatch.setenv("LUCA_NOTEBOOK_SEEDS", "1")
    nb = nbformat.read(ROOT / name, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "outputs must not be committed"
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert any(c.outputs for c in nb.cells if c.cell_type == "code")


@pytest.mark.slow
def test_rl_training_notebook_runs(tmp_path, monkeypatch):
    """Trains a tiny PPO, evaluates it beside the baselines and plots the curve."""
    monkeypatch.setenv("LUCA_GYM_NOTEBOOK_QUICK", "1")
    nb = nbformat.read(ROOT / "rl_training.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "outputs must not be committed"
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    last = nb.cells[-1].outputs
    assert any("image/png" in o.get("data", {}) for o in last)

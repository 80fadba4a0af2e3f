"""The notebooks are stored with their outputs (they read without running),
are listed in the README, and run end to end at small sizes.

The runs here execute a copy with its stored outputs cleared, writing under a
temporary results folder (``LUCA_NOTEBOOK_RESULTS``), never the repository's.
"""

import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = ["quickstart.ipynb", "baselines.ipynb", "llm_agent.ipynb", "rl_training.ipynb", "model_fit.ipynb"]
MAX_BYTES = 512 * 1024


def cleared(path: pathlib.Path):
    """The notebook with every code cell's stored outputs removed."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def run_quick(name: str, tmp_path, monkeypatch):
    """Execute notebook ``name`` (outputs cleared) in quick mode, writing under
    ``tmp_path/results``; returns the executed notebook, checked error-free."""
    monkeypatch.setenv("LUCA_GYM_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("LUCA_NOTEBOOK_RESULTS", str(tmp_path / "results"))
    nb = cleared(ROOT / name)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert not errors(nb)
    return nb


def errors(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]


def test_every_notebook_is_listed_in_the_readme():
    assert sorted(p.name for p in ROOT.glob("*.ipynb")) == sorted(NOTEBOOKS)
    readme = (ROOT.parent / "README.md").read_text(encoding="utf-8")
    for name in NOTEBOOKS:
        assert f"notebooks/{name}" in readme, f"README.md does not list notebooks/{name}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_stored_with_its_outputs(name):
    path = ROOT / name
    assert path.stat().st_size < MAX_BYTES, f"{name}: {path.stat().st_size} bytes stored; keep outputs small"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs for c in code), f"{name}: a code cell has no stored output; execute it and store it"
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), f"{name}: not stored from one run top to bottom ({counts})"
    assert not errors(nb), f"{name}: stored with an error output"
    text = nbformat.writes(nb)
    assert not re.search(r"/(tmp|work|home|root)/", text), f"{name}: an absolute path of this machine is in the outputs"
    for cell in code:  # files go under results/, never next to the notebook or in the repository root
        assert not re.search(r"""(savefig|draw_network|open)\(\s*["'](?!.*results)""", cell.source), cell.source


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quickstart.ipynb", "baselines.ipynb"])
def test_notebook_runs(name, tmp_path, monkeypatch):
    monkeypatch.setenv("LUCA_NOTEBOOK_SEEDS", "1")
    monkeypatch.setenv("LUCA_NOTEBOOK_RESULTS", str(tmp_path / "results"))
    nb = cleared(ROOT / name)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert not errors(nb)
    assert any(c.outputs for c in nb.cells if c.cell_type == "code")
    written = {p.name for p in (tmp_path / "results" / "notebooks" / name.removesuffix(".ipynb")).iterdir()}
    assert {"quickstart.ipynb": {"network.png"}, "baselines.ipynb": {"sessions.jsonl", "composite.png"}}[name] <= written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"], "the notebook wrote outside its results folder"


@pytest.mark.slow
def test_rl_training_notebook_runs(tmp_path, monkeypatch):
    """Trains a tiny PPO, evaluates it beside the baselines and plots the curve."""
    nb = run_quick("rl_training.ipynb", tmp_path, monkeypatch)
    last = nb.cells[-1].outputs
    assert any("image/png" in o.get("data", {}) for o in last)
    out = tmp_path / "results" / "notebooks" / "rl_training"
    assert (out / "run" / "curve_vs_baselines.png").is_file() and (out / "eval" / "sessions.jsonl").is_file()


@pytest.mark.slow
def test_model_fit_notebook_runs(tmp_path, monkeypatch):
    """One healthy and one diseased session of model-fit (small fits), with its three figures."""
    run_quick("model_fit.ipynb", tmp_path, monkeypatch)
    written = {p.name for p in (tmp_path / "results" / "notebooks" / "model_fit").iterdir()}
    assert {"disagreement.png", "fitted_vs_true.png", "diagnosis.png"} <= written

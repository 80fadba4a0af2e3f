"""notebooks/llm_agent.ipynb runs end to end with the scripted agent; with no
provider key in the kernel's environment the real-model cell is skipped (no
network). The notebook is stored with its outputs; this runs a copy with them
cleared, writing under a temporary results folder."""

from __future__ import annotations

import os
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "llm_agent.ipynb"
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def _text(nb) -> str:
    parts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.outputs:
            parts.append(out.get("text", "") or "".join(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


@pytest.mark.slow
def test_llm_agent_notebook_runs_the_scripted_agent_without_keys(tmp_path, monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["JAX_PLATFORMS"] = "cpu"
    env["LUCA_NOTEBOOK_RESULTS"] = str(tmp_path / "results")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=env)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    text = _text(nb)
    assert "real model skipped" in text
    assert "'composite'" in text and "'diagnosis'" in text and "'rescue'" in text
    assert "test_rescue" in text and "budget" in text
    assert "unknown field 'G999'" in text
    assert (tmp_path / "results" / "notebooks" / "llm_agent" / "scripted_session.json").is_file()

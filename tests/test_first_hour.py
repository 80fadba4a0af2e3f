"""A newcomer's first hour: `make demo` installs only what the demo imports,
the demo's table and the LUCA report say what `random` does, the disease
figure's gap panel keeps its whiskers apart and names every line it draws,
an interrupted `luca-gym train` leaves no empty run folder, the README's
headline figures are a table and its training commands say how long they take,
and the site's code neither runs off the page nor breaks inside a name."""

from __future__ import annotations

import importlib
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from luca_gym.worlds.luca import report as luca_report
from luca_gym.worlds.luca import tables as luca_tables
from luca_gym.worlds.luca.evaluation import SCORE_FIELDS, STRATEGY_FIELDS

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def rule(target: str) -> tuple[str, str]:
    """(prerequisites, recipe) of the Makefile rule for ``target``."""
    m = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n)*)", MAKEFILE, re.MULTILINE)
    assert m, f"no Makefile rule for {target}"
    return m.group(1).strip(), m.group(2)


# -- 1. make demo installs the package alone ------------------------------------------------


def test_demo_and_ablation_install_the_package_alone_and_test_the_dev_extra():
    assert rule("demo")[0] == rule("ablation")[0] == "$(DEMO_STAMP)"
    prerequisites, recipe = rule("$(DEMO_STAMP)")
    assert prerequisites == "pyproject.toml"
    assert "$(PYTHON) -m venv $(VENV)" in recipe  # a fresh clone bootstraps .venv
    assert re.search(r"pip install -qq --no-compile -e \.;", recipe), "the demo's install names no extra"
    assert "[$(STAMP) -nt pyproject.toml ]" in recipe.replace(" [ ", "[")  # a dev install already holds it
    assert rule("test")[0] == "$(STAMP)"
    assert "$(PYTHON) -m venv $(VENV)" in rule("$(STAMP)")[1]
    assert '-e ".[$(EXTRAS)]"' in rule("$(STAMP)")[1] and re.search(r"^EXTRAS \?= dev$", MAKEFILE, re.MULTILINE)


# Top-level packages of the dev extra that the package's base install lacks.
DEV_ONLY = ("torch", "verifiers", "mkdocs", "pandas", "statsmodels", "stable_baselines3", "sb3_contrib", "mcp",
            "openai", "anthropic", "pytest", "hypothesis")

DEMO_CODE_PATH = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = set(sys.argv[2].split(","))

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not installed (the demo's install lacks it)")
            return None

    sys.meta_path.insert(0, Absent())
    from luca_gym.cli import main
    out = sys.argv[1]
    assert main(["eval", "--agents", "random", "--tiers", "easy", "--modes", "disease", "--seeds", "0",
                 "--out", out, "--quiet"]) == 0
    assert main(["report", out]) == 0
    print("imported:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
""")


@pytest.mark.slow  # another process: 13 s with the compilation cache warm, 73 s cold
def test_the_demos_commands_run_without_the_dev_extra(tmp_path):
    """`luca-gym eval` and `report` (the demo's two commands) on a tiny sweep,
    in a fresh interpreter where every dev-only package fails to import."""
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-c", DEMO_CODE_PATH, str(out), ",".join(DEV_ONLY)], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "imported: []" in done.stdout
    assert luca_tables.RANDOM_NOTE in done.stdout  # the printed table says what random does
    assert {"report.md", "composite.png", "disease.png"} <= set(os.listdir(out))


# -- 2. what random does ---------------------------------------------------------------------


def _records(agents=("random", "causal-sweep"), modes=("healthy", "disease"), seeds=3):
    rng = np.random.default_rng(0)
    out = []
    for a in agents:
        for m in modes:
            for seed in range(seeds):
                scores = {f: float(rng.uniform(0, 1)) for f in (*SCORE_FIELDS, *STRATEGY_FIELDS, "n_alt")}
                out.append(dict(agent=a, tier="easy", mode=m, n_genes=20, seed=seed, scores=scores))
    return out


def test_random_is_said_in_one_line_where_it_ran():
    note = luca_tables.RANDOM_NOTE
    assert "\n" not in note and "no experiment" in note and "0.5" in note
    assert luca_tables.baseline_notes(_records()) == [note]
    assert luca_tables.baseline_notes(_records(agents=("causal-sweep",))) == []


def test_the_luca_report_says_it_under_the_composite_table(tmp_path, monkeypatch):
    monkeypatch.setattr(luca_report, "figure_composite", lambda *a, **k: None)
    monkeypatch.setattr(luca_report, "figure_disease", lambda *a, **k: None)
    monkeypatch.setattr(luca_report.process, "section", lambda records: "")
    records = _records(modes=("healthy",))
    parts = luca_report.sections(records, str(tmp_path), source="x")
    table = parts.index(luca_tables.composite_table(records, 20))
    assert parts[table + 1] == luca_tables.RANDOM_NOTE


# -- 3. the disease figure's gap panel -------------------------------------------------------


@pytest.fixture
def gap_axes(monkeypatch):
    figs = []
    monkeypatch.setattr(luca_report, "save", lambda plt, fig, path: figs.append(fig))
    records = _records(agents=("random", "heuristic", "causal-sweep"), modes=("disease",), seeds=4)
    luca_report.figure_disease(records, "disease.png", 20)
    yield figs[0].axes[1]  # one tier (easy): its panel, then the gap panel
    import matplotlib.pyplot as plt

    plt.close("all")


def test_the_gap_panels_whiskers_are_dodged_apart(gap_axes):
    rows = {}
    for container in gap_axes.containers:
        (x,), (y,) = (np.asarray(v) for v in container.lines[0].get_data())
        rows.setdefault(round(float(y)), []).append(float(y))
    assert len(rows) == 3
    for ys in rows.values():
        assert len(ys) == 2 and abs(ys[0] - ys[1]) >= 0.2  # diagnosis above, rescue below: never one line


def test_the_gap_panels_legend_names_its_connectors(gap_axes):
    labels = [t.get_text() for t in gap_axes.get_legend().get_texts()]
    assert labels == ["diagnosis", "rescue", "diagnosis to rescue", "paper diagnosis", "paper rescue",
                      "paper diagnosis to rescue"]
    grey = [line for line in gap_axes.get_lines() if line.get_color() == "0.85"]
    assert len(grey) == 3 and all(line.get_linewidth() == 3 for line in grey)  # what "diagnosis to rescue" names


# -- 4. an interrupted train leaves no empty run folder --------------------------------------


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


TINY = ["--tier", "easy", "--mode", "healthy", "--n-genes", "8", "--steps", "256", "--num-envs", "8", "--quiet"]


@pytest.mark.parametrize("algo,target", [("ppo", "luca_gym.functional.make_pool"), ("bc", "luca_gym.agents.bc.clone")])
def test_ctrl_c_before_the_first_update_leaves_no_run_folder(tmp_path, monkeypatch, algo, target):
    from luca_gym.cli import main

    module, name = target.rsplit(".", 1)
    monkeypatch.setattr(importlib.import_module(module), name, _interrupt)
    out = tmp_path / "runs" / "interrupted"
    assert main(["train", "--algo", algo, *TINY, "--out", str(out)]) == 130  # what Ctrl-C returns
    assert not out.exists()
    assert (tmp_path / "runs").is_dir()  # only the folder the run made goes


def test_ctrl_c_keeps_a_folder_that_was_there(tmp_path, monkeypatch):
    from luca_gym import functional
    from luca_gym.cli import main

    monkeypatch.setattr(functional, "make_pool", _interrupt)
    assert main(["train", "--algo", "ppo", *TINY, "--out", str(tmp_path)]) == 130
    assert tmp_path.is_dir()


def test_train_called_directly_cleans_up_too(tmp_path, monkeypatch):
    from luca_gym.agents import ppo

    monkeypatch.setattr(ppo, "init_runner", _interrupt)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        ppo.train(ppo.PPOConfig("luca", {"tier": "easy", "mode": "healthy", "n_genes": 8}, steps=256, num_envs=8), str(out))
    assert not out.exists()


def test_remove_unfinished_run_keeps_a_curve_with_lines(tmp_path):
    from luca_gym.agents.ppo import CURVE_CSV, remove_unfinished_run

    header_only, started = tmp_path / "a", tmp_path / "b"
    for folder, text in ((header_only, "update,env_steps\n"), (started, "update,env_steps\n1,256\n")):
        folder.mkdir()
        (folder / CURVE_CSV).write_text(text)
    assert remove_unfinished_run(str(header_only)) and not header_only.exists()
    assert not remove_unfinished_run(str(started)) and (started / CURVE_CSV).read_text().endswith("1,256\n")


# -- 5. the README -----------------------------------------------------------------------------


def section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_headline_figures_are_a_table():
    body = section("Headline figures")
    rows = [line for line in body.splitlines() if line.startswith("|")]
    assert rows[:2] == ["| what | figure |", "| --- | --- |"] and len(rows) >= 8
    assert not re.search(r"^- ", body, re.MULTILINE)


def test_readme_training_commands_say_how_long():
    block = section("Training").split("```\n", 2)[1]
    trains = [line for line in block.splitlines() if line.startswith("luca-gym train")]
    assert len(trains) >= 5
    for line in trains:
        assert re.search(r"#.*\b\d+(\.\d+)?(-\d+)? (s|min|h|hours?)\b", line), f"no time: {line}"
    bc = next(line for line in trains if "--algo bc" in line)
    assert "--steps" in bc and "--num-envs" in bc  # a size that finishes, not the defaults


def test_readme_names_the_gymnax_interface_and_why_each_dependency():
    assert "luca_gym.integrations.gymnax" in README
    why = section("Why each dependency")
    for name in ("jax", "numpy", "gymnasium", "optax", "equinox", "matplotlib", "tqdm", "flatbuffers", "pyarrow",
                 "torch", "mcp", "verifiers", "pandas", "pytest", "import-linter", "MkDocs"):
        assert name in why, name


# -- 6. the site's code -------------------------------------------------------------------------


def test_the_site_wraps_code_blocks_and_keeps_code_in_tables_whole():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\ntheme:", 1)[0])
    assert "stylesheets/extra.css" in config["extra_css"]
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    rules = dict(re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL)))
    pre = next(body for sel, body in rules.items() if "pre > code" in sel)
    assert "white-space: pre-wrap" in pre
    cells = next(body for sel, body in rules.items() if "td code" in sel)
    assert "word-break: keep-all" in cells and "overflow-wrap: normal" in cells  # breaks at spaces, not in a name


@pytest.mark.parametrize("page", ["getting-started.md", "status.md"])
def test_getting_started_and_status_say_what_is(page):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "a dated measurement"
    for word in ("the trees of", "before the split", "the day before", "issue ", " yet"):
        assert word not in text, word

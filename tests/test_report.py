"""The report's figures, the network drawing and the session view (``luca-gym show``).

One small results folder is swept once per module (two baselines, easy, both
modes, N=20, two seeds), and its healthy sessions are written again labelled
N=10 for the scaling figure (the report reads the label; a real N=10 sweep
would compile a generator program of its own. N=10, having no paper figure,
shows the scaling marks drawn only where the paper has one); the figure
functions are
checked through the figures they build (panels, error bars, paper marks, tick
labels) and the PNGs they write.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import LineCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.patches import Circle, FancyArrowPatch

from luca_gym import harness as ev
from luca_gym.harness.results import append_record
from luca_gym.results import report
from luca_gym.results import figures as figure_helpers
from luca_gym.worlds.luca import calls, viewer
from luca_gym.worlds.luca.spec import MALFUNCTION_TYPES
from luca_gym.worlds.luca import generator as world
from luca_gym.cli import main
from luca_gym.worlds.luca.fidelity import PAPER_TABLE8
from luca_gym.worlds.luca import tables as luca_tables
from luca_gym.worlds.luca import report as luca_report
from luca_gym.worlds.luca.core import make_params

# One worker runs the module: its module fixtures (sessions, a trained run) are built once, not once per worker.
pytestmark = pytest.mark.xdist_group("report")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
AGENTS = ["random", "heuristic"]
SEEDS = [0, 1]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("results")
    ev.sweep(ev.plan_world("luca", AGENTS, SEEDS, tier="easy", mode=["healthy", "disease"], n_genes=20), str(folder))
    path = folder / ev.SESSIONS_FILE
    healthy = [json.loads(line) for line in path.read_text().splitlines() if json.loads(line)["mode"] == "healthy"]
    budget = make_params("easy", 10, "healthy").budget  # the paper's default at N=10, as the report checks
    with open(path, "a") as f:
        for record in healthy:
            append_record(f, {**{k: v for k, v in record.items() if k != "digest"}, "n_genes": 10, "budget": budget})
    return folder


@pytest.fixture(scope="module")
def records(results) -> list:
    return ev.load_sessions(str(results))


@pytest.fixture
def figures(monkeypatch) -> list:
    """Every figure the report and the viewer save, kept for inspection (closed figures keep their axes)."""
    drawn = []
    save = figure_helpers.save

    def keep(plt, fig, path):
        drawn.append(fig)
        save(plt, fig, path)

    monkeypatch.setattr(luca_report, "save", keep)
    monkeypatch.setattr(viewer, "save", keep)
    return drawn


def assert_png(path) -> None:
    import matplotlib.pyplot as plt

    data = Path(path).read_bytes()
    assert data.startswith(PNG_MAGIC), path
    assert len(data) > 1000, path
    height, width = plt.imread(str(path)).shape[:2]
    assert height > 100 and width > 100, path


def errorbar_containers(ax) -> list:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def paper_line(ax, label: str):
    lines = [line for line in ax.get_lines() if line.get_label() == label]
    assert len(lines) == 1, [line.get_label() for line in ax.get_lines()]
    return lines[0]


# -- write_report ---------------------------------------------------------------------------
def test_write_report_writes_markdown_and_three_pngs(results, tmp_path):
    text = report.write_report(str(results), str(tmp_path))
    assert (tmp_path / "report.md").read_text() == text
    for heading in ("## Composite score (N=20)", "## Disease sub-scores (N=20)", "## Scaling (easy healthy, prediction accuracy)"):
        assert heading in text
    for name in ("composite.png", "disease.png", "scaling.png"):
        assert_png(tmp_path / name)


def test_a_report_at_another_budget_leaves_the_papers_figures_out(records, tmp_path, figures):
    """Sessions at a budget other than the paper's N + S + 8 (``eval --budget``)
    are not comparable with the paper's figures: neither tables nor figures
    show them, and a note says why; at the default budget they are shown."""
    at_default = "\n".join(luca_report.sections(records, str(tmp_path), source="r"))
    assert "(paper " in at_default and "not the paper's default" not in at_default
    assert any(line.get_label() == "paper (Tables 6-7)" for line in figures[0].axes[0].get_lines())
    figures.clear()
    tight = [{**r, "budget": 8} for r in records]  # the report only reads the label
    text = "\n".join(luca_report.sections(tight, str(tmp_path), source="r"))
    assert "(paper " not in text and "Note: sessions at budget 8, not the paper's default" in text
    assert not any("paper" in str(line.get_label()) for fig in figures for ax in fig.axes for line in ax.get_lines())


# -- the score figures ----------------------------------------------------------------------
def test_composite_has_error_bars_and_paper_marks(records, tmp_path, figures):
    luca_report.figure_composite(records, str(tmp_path / "c.png"), 20)
    assert_png(tmp_path / "c.png")
    (fig,) = figures
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == len(AGENTS) and all(len(b) == 2 for b in bars)  # easy healthy, easy disease
    assert all(b.errorbar is not None for b in bars)
    assert len(errorbar_containers(ax)) == len(AGENTS)
    paper = paper_line(ax, "paper (Tables 6-7)")
    expected = sorted(luca_tables.PAPER_COMPOSITE[a][("easy", m)] for a in AGENTS for m in ("healthy", "disease"))
    assert sorted(paper.get_ydata()) == pytest.approx(expected)
    assert ax.get_ylabel() == "composite score (mean ± 1 std)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["easy\nhealthy", "easy\ndisease"]


def test_composite_marks_no_paper_figures_off_the_papers_size(records, tmp_path, figures):
    luca_report.figure_composite(records, str(tmp_path / "c10.png"), 10)
    (ax,) = figures[0].axes
    assert "paper (Tables 6-7)" not in [line.get_label() for line in ax.get_lines()]
    assert len(errorbar_containers(ax)) == len(AGENTS)


def test_zero_bars_show_a_stroke_at_zero(tmp_path):
    plt = figure_helpers.pyplot()
    fig, ax = plt.subplots()
    figure_helpers.bars(ax, [0, 1, 2], [(0.0, 0.0, 2), (0.5, 0.1, 2), (0.0, 0.0, 2)], 0.4, "C0")
    (strokes,) = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == "zero-bar"]
    segments = strokes.get_segments()
    assert len(segments) == 2
    assert all(np.allclose(seg[:, 1], 0.0) for seg in segments)
    assert sorted(seg[:, 0].mean() for seg in segments) == pytest.approx([0.0, 2.0])
    plt.close(fig)


def test_disease_has_subscore_panels_and_the_gap_panel(records, tmp_path, figures):
    luca_report.figure_disease(records, str(tmp_path / "d.png"), 20)
    assert_png(tmp_path / "d.png")
    (fig,) = figures
    bars_ax, gap_ax = fig.axes  # one tier (easy) + the rescue - diagnosis panel
    assert bars_ax.get_ylabel() == "score (mean ± 1 std)"
    assert len(errorbar_containers(bars_ax)) == 3  # prediction, diagnosis, rescue
    assert len(paper_line(bars_ax, "paper (Table 8)").get_xdata()) == 3 * len(AGENTS)
    assert {t.get_text() for t in gap_ax.get_yticklabels()} == {f"{a} (easy)" for a in AGENTS}
    assert len(errorbar_containers(gap_ax)) == 2 * len(AGENTS)  # diagnosis and rescue per row
    gaps = [t.get_text() for t in gap_ax.texts if t.get_text()[:1] in "+-"]
    assert len(gaps) == len(AGENTS)
    summary = luca_tables.summary([r for r in records if r["mode"] == "disease"])
    for a in AGENTS:
        st = summary[(a, "easy", "disease", 20)]
        assert any(g.startswith(f"{st['rescue'][0] - st['diagnosis'][0]:+.2f}") for g in gaps)
    paper_rescue = {line.get_xdata()[0] for line in gap_ax.get_lines() if line.get_marker() == "D" and line.get_markerfacecolor() == "black"}
    assert paper_rescue == {PAPER_TABLE8["easy"][a]["rescue"] for a in AGENTS}


def test_scaling_ticks_at_the_n_values_with_three_panels(records, tmp_path, figures):
    luca_report.figure_scaling(records, str(tmp_path / "s.png"), "easy", "healthy")
    assert_png(tmp_path / "s.png")
    (fig,) = figures
    assert len(fig.axes) == 3
    for ax in fig.axes:
        assert ax.get_xscale() == "log"
        assert list(ax.get_xticks()) == [10, 20]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "20"]
        assert len(errorbar_containers(ax)) == len(AGENTS)
    assert [ax.get_title()[:3] for ax in fig.axes] == ["(a)", "(b)", "(c)"]
    # easy healthy: the paper has no figures for it, so none are marked
    assert not any("(paper)" in line.get_label() for ax in fig.axes for line in ax.get_lines())


def test_scaling_marks_the_papers_medium_healthy_figures(records, tmp_path, figures):
    relabelled = [{**r, "tier": "medium"} for r in records if r["mode"] == "healthy"]  # the drawing only reads the label
    luca_report.figure_scaling(relabelled, str(tmp_path / "s.png"), "medium", "healthy")
    prediction, budget, coverage = figures[0].axes
    for a in AGENTS:
        line = paper_line(prediction, f"{a} (paper)")
        assert list(line.get_xdata()) == [20]  # only at N values present that the paper has (none at N=10)
        assert list(line.get_ydata()) == [luca_tables.PAPER_SCALING[a][20]]
    assert list(paper_line(budget, "heuristic (paper)").get_ydata()) == [luca_report.PAPER_STRATEGY["heuristic"]["budget_fraction"]]
    assert list(paper_line(coverage, "heuristic (paper)").get_ydata()) == [luca_report.PAPER_STRATEGY["heuristic"]["gene_coverage"]]


# -- the network ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def organism():
    return world.make_organism(3, "hard", 20, "disease")


def test_network_draws_arrows_signals_readouts_and_legend(organism, tmp_path, figures):
    viewer.draw_network(organism, str(tmp_path / "net.png"))
    assert_png(tmp_path / "net.png")
    (ax,) = figures[0].axes
    a, m = organism.arrays, organism.meta
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    expected = (np.count_nonzero(np.asarray(a.weights)) + np.count_nonzero(np.asarray(a.signal_effects))
                + np.count_nonzero(np.asarray(a.readout)))
    assert len(arrows) == expected
    assert all(type(p.get_arrowstyle()).__name__ == "CurveFilledB" for p in arrows)  # "-|>": a filled arrowhead
    texts = {t.get_text(): t for t in ax.texts}
    for label, mode in zip(m.signal_labels, m.signal_modes):
        assert f"{label}\n({mode})" in texts
    for name in m.module_names:
        assert name in texts
    circles = {tuple(np.round(c.center, 6)): c.radius for c in ax.patches if isinstance(c, Circle) and c.radius == viewer.PHENOTYPE_RADIUS}
    assert len(circles) == 3
    for name in m.phenotype_names:  # the name starts right of its circle, never over it
        x, y = texts[name].get_position()
        (centre,) = [c for c in circles if abs(c[1] - y) < 1e-6]
        assert x > centre[0] + viewer.PHENOTYPE_RADIUS
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"activates (gene → gene)", "inhibits (gene → gene)", "latent gene", "signal", "phenotype"} <= set(labels)
    assert "malfunction" not in labels and not any("malfunction" in t for t in texts)


def test_network_marks_the_malfunction_when_asked(organism, tmp_path, figures):
    viewer.draw_network(organism, str(tmp_path / "net.png"), malfunction=True)
    (ax,) = figures[0].axes
    a, m = organism.arrays, organism.meta
    name = calls.target_name(m, int(a.malfunction_target))
    kind = MALFUNCTION_TYPES[int(a.malfunction_type)]
    assert [t.get_text() for t in ax.texts if t.get_text().startswith("malfunction")] == [f"malfunction: {name} {kind}"]
    assert "malfunction" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"malfunction {name} {kind}" in ax.get_title()


def test_network_of_a_healthy_organism_says_there_is_no_malfunction(tmp_path, figures):
    healthy = world.make_organism(3, "hard", 20, "healthy")
    viewer.draw_network(healthy, str(tmp_path / "net.png"), malfunction=True)
    assert "healthy: no malfunction" in figures[0].axes[0].get_title()


# -- the session view -------------------------------------------------------------------------
def test_show_session_draws_the_four_panels(results, tmp_path, figures):
    out = tmp_path / "one.png"
    message = report.show_session(str(results), 0, "heuristic", str(out), tier="easy", mode="disease", n_genes=20)
    assert message == str(out)
    assert_png(out)
    (fig,) = figures
    panels = {ax.get_title(loc="left")[:3]: ax for ax in fig.axes if ax.get_title(loc="left")}
    assert list(panels) == ["(a)", "(b)", "(c)", "(d)"]
    assert len(fig.axes) == 5  # and the budget-left twin of (b)
    assert panels["(c)"].get_title(loc="left") == "(c) predictions vs truth"  # unsealed, this build: truth regenerated
    record, _ = report.pick_session(ev.load_sessions(str(results)), 0, "heuristic", mode="disease", n_genes=20)
    assert len(panels["(b)"].get_xticks()) == len(record["calls"])
    summary = "\n".join(t.get_text() for t in panels["(d)"].texts)
    assert "diagnosis committed" in summary and "true malfunction" in summary and "rescue score" in summary


def test_show_session_names_the_one_drawn_when_several_match(results, tmp_path):
    out = tmp_path / "first.png"
    message = report.show_session(str(results), 1, "random", str(out))
    assert message.startswith(f"{out} (")
    assert "3 sessions match" in message and "random easy healthy N=20 seed 1" in message
    assert_png(out)


def test_show_session_default_path_is_in_the_results_folder(results):
    message = report.show_session(str(results / ev.SESSIONS_FILE), 0, "random", None, mode="healthy", n_genes=20)
    assert message == str(results / "session_random_easy_healthy_0.png")
    assert_png(message)


@pytest.mark.parametrize(
    "seed, agent, filters, words",
    [
        (0, "robot", {}, ["agent: 'robot'", "agents there: random, heuristic"]),
        (7, "random", {}, ["seed: 7", "seeds there: 0-1"]),
        (0, "random", {"tier": "hard"}, ["tier=hard", "random easy healthy N=20 seed 0", "random easy disease N=20 seed 0"]),
    ],
)
def test_show_session_unknown_choices_name_what_exists(results, tmp_path, seed, agent, filters, words):
    with pytest.raises(ValueError) as info:
        report.show_session(str(results), seed, agent, str(tmp_path / "x.png"), **filters)
    for w in words:
        assert w in str(info.value)
    assert not (tmp_path / "x.png").exists()


def test_session_file_names_are_filesystem_safe():
    record = {"agent": "openai:gpt-4o/mini", "tier": "hard", "mode": "disease", "n_genes": 20, "seed": 4}
    assert viewer.session_file_name(record) == "session_openai-gpt-4o-mini_hard_disease_4.png"
    assert viewer.session_file_name({**record, "agent": "ppo:/runs/a b", "n_genes": 40, "backwards": True}) == \
        "session_ppo-runs-a-b_hard_disease_4_N40_backwards.png"


def test_truth_is_regenerated_only_for_this_builds_unsealed_records(records):
    record = next(r for r in records if r["mode"] == "disease")
    organism, why = viewer.rebuilt_organism(record)
    assert organism is not None and why is None
    assert viewer.rebuilt_organism({**record, "sealed": "f" * 64}) == (None, "sealed organism: truth not regenerated")
    organism, why = viewer.rebuilt_organism({**record, "version": "0.0.0"})
    assert organism is None and "version 0.0.0" in why
    reveal = next(i for i, c in enumerate(record["calls"]) if c["call"] == "get_next_prediction_task")
    forged = json.loads(json.dumps(record))
    forged["calls"][reveal]["result"]["interventions"] = {"G001": {"type": "DAMPEN"}}
    assert viewer.rebuilt_organism(forged)[0] is None


def test_a_record_without_calls_still_draws(records, tmp_path):
    record = {k: v for k, v in records[0].items() if k != "calls"}
    viewer.draw_session(record, str(tmp_path / "bare.png"))
    assert_png(tmp_path / "bare.png")


# -- the CLI ------------------------------------------------------------------------------------
def test_cli_show_prints_the_path_it_wrote(results, capsys):
    argv = ["show", str(results), "--seed", "1", "--agent", "heuristic", "--tier", "easy", "--mode", "disease"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    path = results / "session_heuristic_easy_disease_1.png"
    assert captured.out == f"{path}\n"
    # stderr says what it is drawing before the slow part, and nothing else
    assert captured.err == f"luca-gym show: drawing the session (agent heuristic, seed 1) into {path} ...\n"
    assert_png(path)


def test_cli_show_out_and_the_note_on_several_matches(results, tmp_path, capsys):
    out = tmp_path / "sub" / "s.png"
    assert main(["show", str(results), "--seed", "0", "--agent", "random", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{out}\n"
    progress, note = captured.err.splitlines()
    assert note.startswith("luca-gym show: note: 3 sessions match")
    assert progress.startswith("luca-gym show: drawing the session (agent random, seed 0)")
    assert_png(out)


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--seed", "9", "--agent", "random"], ["seed: 9", "0-1"]),
        (["--seed", "0", "--agent", "causal-sweep"], ["'causal-sweep'", "random, heuristic"]),
        (["--seed", "0", "--agent", "random", "--tier", "hard"], ["tier=hard", "random easy disease N=20 seed 0"]),
    ],
)
def test_cli_show_bad_choices_exit_2_with_one_line(results, capsys, extra, words):
    assert main(["show", str(results), *extra]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("luca-gym show: error: ")
    for w in words:
        assert w in line
    assert captured.out == ""


def test_cli_show_missing_results(tmp_path, capsys):
    assert main(["show", str(tmp_path / "nowhere"), "--seed", "0", "--agent", "random"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("luca-gym show: error: ") and "no such results file" in line


def test_cli_show_real_exit_code(results):
    script = Path(sys.executable).with_name("luca-gym")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "luca_gym.cli"]
    proc = subprocess.run(command + ["show", str(results), "--seed", "5", "--agent", "random"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("luca-gym show: error: ") and "seed: 5 has no session" in line and proc.stdout == ""

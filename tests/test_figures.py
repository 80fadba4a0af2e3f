"""Report figures: one colour per agent everywhere, short legend names, scores
clipped to [0, 1], unique panel letters (helpers, and the artists of figures
drawn from a tiny synthetic results table; no evaluation is run)."""

import numpy as np
import pytest

from luca_gym.results import figures
from luca_gym.worlds.luca import report
from luca_gym.worlds.luca.evaluation import SCORE_FIELDS, STRATEGY_FIELDS

AGENTS = ("null", "causal-sweep", "ppo:results/run/my-run/policy.eqx")


def _records():
    rng = np.random.default_rng(0)
    out = []
    for a in AGENTS:
        for t in ("easy", "medium"):
            for m in ("healthy", "disease"):
                for n in (20, 40):
                    for seed in range(3):
                        v = 0.0 if a == "null" else float(rng.uniform(0.7, 1.0))
                        scores = {f: v for f in (*SCORE_FIELDS, *STRATEGY_FIELDS, "n_alt")}
                        out.append(dict(agent=a, tier=t, mode=m, n_genes=n, seed=seed, scores=scores))
    return out


@pytest.fixture(scope="module")
def drawn(monkeypatch_module):
    figs = {}
    monkeypatch_module.setattr(figures, "save", lambda plt, fig, path: figs.__setitem__(path, fig))
    monkeypatch_module.setattr(report, "save", lambda plt, fig, path: figs.__setitem__(path, fig))
    recs = _records()
    report.figure_composite(recs, "composite", n_genes=20)
    report.figure_disease(recs, "disease", n_genes=20)
    report.figure_scaling(recs, "scaling", "medium", "healthy")
    return figs


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_colour_is_stable_and_per_agent():
    assert figures.agent_color("causal-sweep") == figures.AGENT_PALETTE["causal-sweep"]
    assert figures.agent_colors(["null", "causal-sweep"])["causal-sweep"] == figures.agent_colors(["causal-sweep"])["causal-sweep"]
    a, b = figures.agent_color("ppo:results/run/x"), figures.agent_color("ppo:other/x")
    assert a == b == figures.agent_color("ppo:x")  # the same run name, the same colour
    assert figures.agent_colors(["ppo:x", "null"])["ppo:x"] == figures.agent_colors(["null", "random", "ppo:x"])["ppo:x"]


def test_fallback_colours_differ_from_baselines():
    assert not set(figures._FALLBACK) & set(figures.AGENT_PALETTE.values())
    assert figures.agent_color("ppo:some-run") in figures._FALLBACK


def test_short_name():
    assert figures.short_name("ppo:results/run/my-run") == "ppo:my-run"
    assert figures.short_name("ppo:results/run/my-run/policy.eqx") == "ppo:my-run"
    assert figures.short_name("causal-sweep") == "causal-sweep"
    assert figures.short_name("openai:gpt-4.1") == "openai:gpt-4.1"


def test_clip_to_score():
    mean, err = figures.clip_to_score([0.0, 0.5, 0.95, 1.2], [0.1, 0.2, 0.2, 0.0])
    assert mean.tolist() == [0.0, 0.5, 0.95, 1.0]
    assert np.allclose(err[0], [0.0, 0.2, 0.2, 0.0])
    assert np.allclose(err[1], [0.1, 0.2, 0.05, 0.0])
    assert (mean - err[0] >= 0).all() and (mean + err[1] <= 1 + 1e-12).all()


def _bar_extents(fig):
    from matplotlib.patches import Rectangle

    for ax in fig.axes:
        for p in ax.patches:
            if isinstance(p, Rectangle) and p.get_width() < 1:
                yield p.get_y(), p.get_y() + p.get_height()


def test_bars_and_error_bars_stay_in_range(drawn):
    for name in ("composite", "disease"):
        for lo, hi in _bar_extents(drawn[name]):
            assert lo >= 0 and hi <= 1 + 1e-9, (name, lo, hi)
        for ax in drawn[name].axes:
            for coll in ax.collections:  # error bar segments
                for seg in getattr(coll, "get_segments", lambda: [])():
                    ys = np.asarray(seg)[:, 1] if ax.get_ylim()[1] <= 1.2 else []
                    assert all(-1e-9 <= y <= 1 + 1e-9 for y in ys), name


def test_same_agent_same_colour_across_figures(drawn):
    from matplotlib.colors import to_hex

    want = {figures.short_name(a): figures.agent_color(a) for a in AGENTS}
    seen = {}
    for name in ("composite", "scaling"):
        for ax in drawn[name].axes:
            leg = ax.get_legend()
            if leg is None:
                continue
            for h, t in zip(leg.legend_handles, leg.get_texts()):
                label = t.get_text()
                if label in want:
                    from matplotlib.lines import Line2D

                    if isinstance(h, Line2D):
                        c = h.get_color()
                    elif hasattr(h, "get_segments"):  # an error bar's line handle
                        c = np.ravel(h.get_edgecolor())[:4]
                    else:
                        c = np.ravel(h.get_facecolor())[:4]
                    seen.setdefault(label, set()).add(to_hex(c))
    assert seen and all(cs == {want[k]} for k, cs in seen.items()), seen
    assert "ppo:my-run" in seen  # the short name in the legend


def test_panel_letters_unique(drawn):
    for name in ("disease", "scaling"):
        letters = [ax.get_title()[:3] for ax in drawn[name].axes if ax.get_title().startswith("(")]
        assert len(letters) >= 3 and len(set(letters)) == len(letters), (name, letters)


def test_scaling_axis_is_log2(drawn):
    ax = drawn["scaling"].axes[0]
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2


def test_fidelity_arguments_checked_before_any_folder():
    from luca_gym.worlds.luca import fidelity

    with pytest.raises(ValueError, match="tables: '5' unknown"):
        fidelity.check_arguments(tables=["5"])
    assert fidelity.check_arguments(seeds=[0, 1], tables=["6"])[0] == [0, 1]

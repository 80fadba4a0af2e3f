"""``report.html`` (:mod:`luca_gym.results.html`), written by ``luca-gym report``.

One results folder is swept once for the module: the mock OpenAI-compatible
provider (:class:`~luca_gym.llm.mock.MockClient` behind
:class:`~luca_gym.llm.providers.OpenAIChatAgent`, no network) on LUCA
(easy, N=20, one seed), dag (3 nodes, two seeds: an empty matrix, then the
true one) and biobank (the tiny profile, the session's demo calls), each
turn's text and reasoning added as a provider returning them would (with
markup in it, to see it escaped). The page is checked for the report's
sections, the embedded figures, a chosen session's transcript, the budget
left beside each call, no script and nothing fetched, well-formed nesting,
and the caps on sessions and tool results; a headless Chromium opens it
from disk (slow; skipped where /usr/bin/chromium is absent).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from luca_gym import harness as ev
from luca_gym.results import report, html as report_html
from luca_gym.llm.loop import AgentTurn
from luca_gym.llm.mock import MockClient, scripted_strategy
from luca_gym.llm.providers import OpenAIChatAgent

pytestmark = pytest.mark.xdist_group("report_html")

AGENT = "openai:mock-model"
N = 3  # dag nodes
DAG_SEEDS = (0, 1)
EMPTY = [[0] * N for _ in range(N)]
CHROMIUM = "/usr/bin/chromium"


def truth(seed: int) -> list:
    """The true adjacency of dag instance ``seed`` (the test's own knowledge; the mock proposes it at cycle 2)."""
    from luca_gym.worlds.graphs import core
    from luca_gym.worlds.graphs.config import DagConfig

    return core.instance(seed, DagConfig(n_nodes=N), None).adjacency.astype(int).tolist()


def script_strategy(script):
    """A MockClient strategy playing ``script`` ((name, arguments) per assistant turn), then text only."""
    def strategy(messages, tools):
        turn = sum(m.get("role") == "assistant" for m in messages)
        return [script[turn]] if turn < len(script) else None
    return strategy


class Talker:
    """The mock provider's agent, with text and reasoning on every turn (as a
    provider returning reasoning gives): ``reasoning-<world>-<turn>: ...``."""

    def __init__(self, world: str, strategy):
        self.world, self.turn = world, 0
        self.inner = OpenAIChatAgent("mock-model", client=MockClient(strategy))

    def __call__(self, messages, tools) -> AgentTurn:
        turn = self.inner(messages, tools)
        self.turn += 1
        return AgentTurn(content=f"Turn {self.turn}: I observe the result <b>not bold</b> & maybe an edge.",
                         tool_calls=turn.tool_calls, usage=turn.usage,
                         reasoning=f"reasoning-{self.world}-{self.turn}: the data might depend on a parent.")


def sweep_mock(folder, world: str, seeds, strategy, **settings) -> None:
    ev.sweep(ev.plan_world(world, [AGENT], list(seeds), **settings), str(folder), lambda name: Talker(world, strategy))


def dag_strategy(seed: int):
    return script_strategy([("intervene", {"molecule": 0, "adjacency": EMPTY}),
                            ("intervene", {"molecule": 1, "adjacency": truth(seed)}),
                            ("submit_graph", {"adjacency": truth(seed)})])


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    from luca_gym.worlds.biobank.tools import BiobankToolSession

    folder = tmp_path_factory.mktemp("mock_results")
    sweep_mock(folder, "luca", [0], scripted_strategy, tier="easy", mode="healthy", n_genes=20)
    for seed in DAG_SEEDS:
        sweep_mock(folder, "dag", [seed], dag_strategy(seed), n_nodes=N)
    sweep_mock(folder, "biobank", [0], script_strategy(BiobankToolSession.demo_calls(None)), profile="tiny")
    return folder


@pytest.fixture(scope="module")
def written(results, tmp_path_factory) -> tuple[Path, str, str]:
    out = tmp_path_factory.mktemp("report")
    text = report.write_report(str(results), str(out))
    return out, text, (out / "report.html").read_text(encoding="utf-8")


class Nesting(HTMLParser):
    """Checks that every element closes in order (void elements aside); keeps every src/href and every tag."""

    VOID = {"meta", "img", "br", "hr", "link", "input", "source", "wbr", "col", "area", "base", "embed", "track"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.urls, self.tags = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v is not None]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
        else:
            self.stack.pop()


def parsed(page: str) -> Nesting:
    parser = Nesting()
    parser.feed(page)
    parser.close()
    return parser


# -- the page ---------------------------------------------------------------------------------
def test_the_report_writes_report_html_beside_report_md(written):
    out, text, page = written
    assert (out / "report.md").read_text() == text
    assert page.startswith("<!DOCTYPE html>")
    for heading in ("LUCA results", "Composite score (N=20)", "Directed graph discovery results (dag)",
                    "Process (language-model sessions)", "Reasoning keywords", "Tokens per round",
                    "Proposal accuracy by cycle (graph worlds)", "Transcripts"):
        assert f">{heading}</h" in page, heading
    assert "<table>" in page and "<th>agent</th>" in page
    # the figures are embedded: the page opens from disk alone
    assert '<img alt="composite" src="data:image/png;base64,iVBORw0KGgo' in page
    assert 'src="composite.png"' not in page


def test_a_chosen_sessions_transcript_is_on_the_page_escaped(written, results):
    _, _, page = written
    record = next(r for r in ev.load_sessions(str(results)) if r["world"] == "dag" and r["seed"] == 1)
    reasoning = next(m["reasoning"] for m in record["messages"] if m.get("reasoning"))
    assert reasoning.startswith("reasoning-dag-") and reasoning in page
    assert "I observe the result &lt;b&gt;not bold&lt;/b&gt; &amp; maybe an edge." in page
    assert "<b>not bold</b>" not in page
    summary = f"dag · {AGENT} · seed 1 · n_nodes=3"
    assert summary in page and "<details class=\"session\"><summary>" in page
    # each tool call beside the budget the session reported after it
    budgets = [c["budget_remaining"] for c in record["calls"]]
    assert f'<span class="status">budget remaining: {budgets[0]}</span>' in page
    assert "→ <code>intervene</code> after it <span class=\"status\">budget remaining:" in page
    # every world's sessions have their transcripts
    for world in ("luca", "dag", "biobank"):
        assert f"<h3>{world} · {AGENT}</h3>" in page
    assert "submissions left: " in page and "budget left: " in page  # biobank's status fields


def test_the_page_has_no_script_and_fetches_nothing(written):
    _, _, page = written
    parser = parsed(page)
    assert "script" not in parser.tags and "<script" not in page.lower()
    assert "iframe" not in parser.tags and "link" not in parser.tags
    fetched = [u for u in parser.urls if u.startswith(("http:", "https:", "//"))]
    assert fetched == [], fetched
    assert all(u.startswith(("data:image/", "#")) or "://" not in u for u in parser.urls)


def test_the_page_is_well_formed(written):
    _, _, page = written
    parser = parsed(page)
    assert parser.errors == []
    assert parser.stack == []
    assert parser.tags[0] == "html" and parser.tags.count("details") >= 4


# -- caps and pieces -----------------------------------------------------------------------------
def long_record(seed: int) -> dict:
    return {"world": "dag", "agent": "a", "seed": seed, "calls": [{"call": "intervene", "arguments": {}, "result": {},
                                                                  "budget_remaining": 5}],
            "messages": [{"role": "system", "content": "rules"},
                         {"role": "assistant", "content": "go", "tool_calls": [{"id": "c0", "name": "intervene",
                                                                                "arguments": "{\"molecule\": 0}"}]},
                         {"role": "tool", "tool_call_id": "c0", "name": "intervene", "content": "x" * 10_000}]}


def test_sessions_per_agent_and_long_results_are_capped_and_said():
    page = report_html.page("# Title", [long_record(s) for s in range(4)], max_sessions=2)
    assert page.count('<details class="session">') == 2
    assert "2 more sessions of a left out" in page
    assert f"{10_000 - report_html.MAX_RESULT:,} more characters left out" in page
    assert "x" * report_html.MAX_RESULT in page and "x" * (report_html.MAX_RESULT + 1) not in page
    assert '{"molecule": 0}' in report_html.html.unescape(page)  # a provider's JSON arguments shown parsed
    assert parsed(page).errors == []


def test_a_transcript_whose_calls_do_not_match_shows_no_status():
    record = long_record(0)
    record["calls"] = []
    assert report_html.call_status(record) == [None]
    assert "budget remaining" not in report_html.transcript_html(record)


def test_markdown_to_html_converts_what_the_report_writes():
    text = "\n".join([
        "# Results <1>", "", "2 sessions from `/tmp/<x>`; *floor* and **bold**.", "second line", "",
        "| agent | a \\| b |", "| --- | --- |", "| *floor: empty* | 0% / ∞ (2) |", "",
        "- one", "- two", "", "```", "<code> & co", "```", "![missing](nowhere.png)", "[link](javascript:alert(1))",
    ])
    out = report_html.markdown_to_html(text, folder=None)
    assert '<h1 id="results-1">Results &lt;1&gt;</h1>' in out
    assert "<p>2 sessions from <code>/tmp/&lt;x&gt;</code>; <em>floor</em> and <strong>bold</strong>.<br>\nsecond line</p>" in out
    assert "<th>a | b</th>" in out and "<td><em>floor: empty</em></td><td>0% / ∞ (2)</td>" in out
    assert "<ul>\n<li>one</li>\n<li>two</li>\n</ul>" in out
    assert "<pre><code>&lt;code&gt; &amp; co</code></pre>" in out
    assert '<img alt="missing" src="nowhere.png">' in out  # not in the folder: referenced relatively
    assert 'href="#"' in out and "javascript" not in out.split("href=")[1].split(">")[0]
    assert parsed(out).errors == []


def test_an_image_of_the_folder_is_embedded(tmp_path):
    (tmp_path / "fig.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    out = report_html.markdown_to_html("![fig](fig.png)", folder=str(tmp_path))
    assert 'src="data:image/png;base64,iVBORw0KGgpmYWtl"' in out


def test_a_scripted_run_gets_a_page_without_transcripts(tmp_path):
    ev.sweep(ev.plan_world("dag", ["random"], [0], n_nodes=N), str(tmp_path), lambda name: ev.make_runner(name, world="dag"))
    text = report.write_report(str(tmp_path))
    page = (tmp_path / "report.html").read_text()
    assert "Process (language-model sessions)" not in text
    assert "Transcripts" not in page and "<table>" in page


# -- a browser opens it ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is absent (Debian: apt-get install chromium); "
                                                          "the page's other checks run without it")
def test_chromium_opens_the_page_from_disk(written, tmp_path):
    out, _, _ = written
    profile = tmp_path / "profile"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
               f"--user-data-dir={profile}", "--virtual-time-budget=2000", "--dump-dom", (out / "report.html").as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert "Transcripts" in dom and "reasoning-dag-1" in dom and "Proposal accuracy by cycle" in dom
    assert dom.count("<details") >= 4
    shutil.rmtree(profile, ignore_errors=True)

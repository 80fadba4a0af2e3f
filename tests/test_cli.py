"""The ``luca-gym`` command: bad input gets one line on stderr naming the
problem and what is allowed, exit code 2, and leaves what is on disk alone;
``report`` writes markdown and PNG figures; ``info --graph`` draws a network;
``play`` runs a session from typed calls through the agents' dispatcher;
``info``, ``play`` and ``mcp`` open the same organism (``--backwards`` too).

Most cases run ``main([...])`` in-process; a few run the installed console
script to check the real exit code.
"""

from __future__ import annotations

import io
import json
import pathlib
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from luca_gym import harness as ev
from luca_gym.worlds.luca import generator as world
from luca_gym.cli import build_parser, main
from luca_gym.cli.common import parse_seeds
from luca_gym.cli.progress import TrainProgress
from luca_gym.worlds.luca.cli import cmd_play
from luca_gym.worlds.luca import tables as luca_tables

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
AGENTS_ALLOWED = "random, heuristic, causal-sweep, task-directed"


def make_record(agent, tier, mode, n, seed, composite) -> dict:
    scores = dict(
        composite=composite, prediction=composite, diagnosis=0.5, rescue=0.5,
        budget_fraction=0.5, single_gene_fraction=1.0, gene_coverage=0.5, block_fraction=1.0,
        redundancy=0.0, commit_point=0.0, n_alt=0,
    )
    return {"agent": agent, "tier": tier, "mode": mode, "n_genes": n, "seed": seed, "backwards": False, "scores": scores}


RECORDS = [
    make_record(agent, tier, mode, n, seed, 0.25 * ((seed + len(agent)) % 5))
    for agent in ("random", "heuristic", "causal-sweep")
    for tier, mode, n in (("easy", "healthy", 20), ("medium", "healthy", 20), ("easy", "disease", 20), ("medium", "healthy", 40))
    for seed in (0, 1)
]


def write_results(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ev.SESSIONS_FILE).write_text("".join(line + "\n" for line in lines))
    return folder


@pytest.fixture
def results(tmp_path) -> Path:
    """A results folder with valid sessions and an earlier report.md."""
    folder = write_results(tmp_path / "results", [json.dumps(r) for r in RECORDS])
    (folder / "report.md").write_text("# an earlier report\n")
    return folder


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_error_line(err: str, command: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines}"
    assert lines[0].startswith(f"luca-gym {command}: error: ")
    return lines[0]


def luca_gym_command() -> list[str]:
    script = Path(sys.executable).with_name("luca-gym")
    return [str(script)] if script.exists() else [sys.executable, "-m", "luca_gym.cli"]


# -- bad input ----------------------------------------------------------------------
EVAL_DEFAULTS = {"--agents": "random", "--tiers": "easy", "--modes": "healthy", "--seeds": "0", "--n-genes": "20"}
BAD_EVAL = [
    ({"--agents": "robot"}, ["agent", "'robot'", AGENTS_ALLOWED]),
    ({"--agents": "random,robot"}, ["agent", "'robot'", AGENTS_ALLOWED]),
    ({"--agents": ","}, ["agent", "empty", AGENTS_ALLOWED]),
    ({"--tiers": "extreme"}, ["tier", "'extreme'", "easy, medium, hard"]),
    ({"--modes": "sick"}, ["mode", "'sick'", "healthy, disease"]),
    ({"--seeds": "5-2"}, ["seeds", "'5-2'", "LOW <= HIGH"]),
    ({"--seeds": "-1"}, ["seed", "-1", "0..2**63-1"]),
    ({"--seeds": str(2**63)}, ["seed", str(2**63), "0..2**63-1"]),
    ({"--seeds": "a-b"}, ["seeds", "'a-b'", "0-19"]),
    ({"--seeds": ""}, ["seeds", "''", "0-19"]),
    ({"--n-genes": "3"}, ["--n-genes", "3", "4..4096"]),
    ({"--n-genes": "5000"}, ["--n-genes", "5000", "4..4096"]),
    ({"--n-genes": "twenty"}, ["n-genes", "'twenty'", "integers"]),
    ({"--agents": "ppo:"}, ["agent", "'ppo:'", "ppo:RUN_DIR or sb3:FILE.zip"]),
    ({"--agents": "random,ppo:/no/such/run"}, ["agent", "'ppo:/no/such/run'", "no such run folder", "luca-gym train"]),
    ({"--agents": "sb3:/no/such/model.zip"}, ["agent", "'sb3:/no/such/model.zip'", "no such file"]),
    # --budget: one value, checked by the world's config before any session runs
    *[({"--budget": v}, ["--budget", words, "1..65536"]) for v, words in
      (("0", "0 not allowed"), ("-1", "-1 not allowed"), ("8.5", "8.5 not allowed"), ("x", "'x' not allowed"),
       ("1000000000", "1000000000 not allowed"), ("8.0", "8.0 not allowed"))],
    ({"--budget": "8,9"}, ["--budget", "'8,9'", "one value"]),
    ({"--budget": ""}, ["--budget", "empty"]),
    ({"--budget": "null"}, ["--budget", "'null'", "leave --budget out"]),
]


def eval_argv(out: Path, **overrides) -> list[str]:
    opts = {**EVAL_DEFAULTS, **overrides}
    return ["eval", *[x for kv in opts.items() for x in kv], "--out", str(out), "--quiet"]


@pytest.mark.parametrize("bad, words", BAD_EVAL, ids=[f"{k}={v!r}" for b, _ in BAD_EVAL for k, v in b.items()])
def test_eval_bad_input(results, capsys, bad, words):
    before = snapshot(results)
    assert main(eval_argv(results, **bad)) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err, "eval")
    for w in words:
        assert w in line
    assert snapshot(results) == before


@pytest.mark.parametrize(
    "argv, words",
    [
        (["info", "--tier", "extreme"], ["tier", "'extreme'", "easy, medium, hard"]),
        (["info", "--mode", "sick"], ["mode", "'sick'", "healthy, disease"]),
        (["info", "--n-genes", "2"], ["2", "4..4096"]),
        (["info", "--seed", "-1"], ["seed", "-1", "0..2**63-1"]),
        (["play", "--tier", "extreme"], ["tier", "'extreme'", "easy, medium, hard"]),
        (["play", "--n-genes", "5000"], ["5000", "4..4096"]),
    ],
)
def test_info_and_play_bad_input(capsys, argv, words):
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err, argv[0])
    for w in words:
        assert w in line


def test_parse_seeds_forms():
    assert parse_seeds("0-4,10") == [0, 1, 2, 3, 4, 10]
    assert parse_seeds("3,0,3") == [0, 3]
    assert parse_seeds("7") == [7]


def test_eval_unwritable_output_folder(results, capsys):
    before = snapshot(results)
    out = results / ev.SESSIONS_FILE / "sub"  # its parent is a regular file
    assert main(eval_argv(out)) == 2
    line = one_error_line(capsys.readouterr().err, "eval")
    assert f"out: cannot create folder {str(out)!r}" in line
    assert snapshot(results) == before


def test_report_unwritable_output_folder(results, capsys):
    before = snapshot(results)
    out = results / "report.md" / "figures"
    assert main(["report", str(results), "--out", str(out)]) == 2
    line = one_error_line(capsys.readouterr().err, "report")
    assert str(out) in line
    assert snapshot(results) == before


def test_info_graph_unwritable_folder(results, capsys):
    before = snapshot(results)
    assert main(["info", "--tier", "easy", "--graph", str(results / "report.md" / "net.png")]) == 2
    line = one_error_line(capsys.readouterr().err, "info")
    assert str(results / "report.md") in line
    assert snapshot(results) == before


def test_info_graph_error_names_the_graph_argument(results, capsys):
    assert main(["info", "--tier", "easy", "--graph", str(results / "report.md" / "net.png")]) == 2
    line = one_error_line(capsys.readouterr().err, "info")
    named = line.removeprefix("luca-gym info: error: ").split(":")[0]
    assert named in ("graph", "--graph")


@pytest.fixture
def corrupt(tmp_path) -> Path:
    lines = [json.dumps(RECORDS[0]), '{"agent": "random", "tier": "ea', json.dumps(RECORDS[1])]
    return write_results(tmp_path / "corrupt", lines)


def test_report_corrupt_line(corrupt, capsys):
    before = snapshot(corrupt)
    assert main(["report", str(corrupt)]) == 2
    line = one_error_line(capsys.readouterr().err, "report")
    assert f"{ev.SESSIONS_FILE}:2: corrupt line" in line and "fix or remove" in line
    assert snapshot(corrupt) == before  # no report.md, no figures, results untouched


def test_resumed_eval_corrupt_line(corrupt, capsys):
    before = snapshot(corrupt)
    assert main(eval_argv(corrupt, **{"--seeds": "0-3"})) == 2
    line = one_error_line(capsys.readouterr().err, "eval")
    assert f"{ev.SESSIONS_FILE}:2: corrupt line" in line
    assert snapshot(corrupt) == before


def test_report_missing_results(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "no such results file" in one_error_line(capsys.readouterr().err, "report")


def test_report_line_without_score_metrics(tmp_path, capsys):
    record = dict(RECORDS[0], scores={})
    folder = write_results(tmp_path / "noscores", [json.dumps(record)])
    assert main(["report", str(folder)]) == 2
    assert "corrupt line" in one_error_line(capsys.readouterr().err, "report")


def test_eval_empty_n_genes_is_refused(results, capsys):
    assert main(eval_argv(results, **{"--n-genes": ""})) == 2
    assert "n-genes" in one_error_line(capsys.readouterr().err, "eval")


def test_eval_repeated_agent_runs_each_session_once(tmp_path, capsys):
    assert main(eval_argv(tmp_path, **{"--agents": "random,random"})) == 0
    lines = (tmp_path / ev.SESSIONS_FILE).read_text().splitlines()
    assert len(lines) == 1


@pytest.mark.parametrize(
    "argv, words",
    [
        (["eval", "--agents", "robot", "--out", "{out}"], ["'robot'", AGENTS_ALLOWED]),
        (["report", "{corrupt}"], [":2: corrupt line"]),
    ],
)
def test_real_exit_code(results, corrupt, argv, words):
    before = snapshot(results), snapshot(corrupt)
    argv = [a.format(out=results, corrupt=corrupt) for a in argv]
    proc = subprocess.run(luca_gym_command() + argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    line = one_error_line(proc.stderr, argv[0])
    for w in words:
        assert w in line
    assert (snapshot(results), snapshot(corrupt)) == before


# -- report and info ---------------------------------------------------------------------
def test_report_writes_markdown_and_figures(results, capsys):
    assert main(["report", str(results)]) == 0
    text = (results / "report.md").read_text()
    # It prints the paths it wrote, one a line: the markdown, the page, then each figure the markdown shows.
    printed = capsys.readouterr().out.split()
    assert printed[:2] == [str(results / "report.md"), str(results / "report.html")] and {str(results / n) for n in ("composite.png", "disease.png", "scaling.png")} <= set(printed[1:])
    assert all(pathlib.Path(p).is_file() for p in printed)
    for heading in ("## Composite score (N=20)", "## Disease sub-scores (N=20)", "## Strategy (medium healthy)",
                    "## Scaling (medium healthy, prediction accuracy)"):
        assert heading in text
    assert f"{len(RECORDS)} sessions" in text
    assert luca_tables.composite_table(RECORDS, 20) in text
    for name in ("composite.png", "disease.png", "scaling.png"):
        data = (results / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
        assert len(data) > 1000


def test_report_to_another_folder(results, tmp_path, capsys):
    before = snapshot(results)
    out = tmp_path / "elsewhere"
    assert main(["report", str(results / ev.SESSIONS_FILE), "--out", str(out)]) == 0
    assert (out / "report.md").read_text().startswith("# LUCA results")
    assert (out / "composite.png").read_bytes().startswith(PNG_MAGIC)
    assert snapshot(results) == before


def test_info_graph_writes_png_and_prints_fingerprint(tmp_path, capsys):
    path = tmp_path / "figs" / "net.png"
    assert main(["info", "--seed", "3", "--tier", "hard", "--graph", str(path)]) == 0
    out = capsys.readouterr().out
    fingerprint = world.make_organism(3, "hard", 20, "healthy").fingerprint()
    assert f"fingerprint {fingerprint[:16]}" in out
    assert "seed=3 tier=hard N=20" in out
    assert path.read_bytes().startswith(PNG_MAGIC)


# -- play ----------------------------------------------------------------------------------
def play(script: str, *options: str) -> tuple[int, str]:
    args = build_parser().parse_args(["play", *options])
    stdout = io.StringIO()
    rc = cmd_play(args, stdin=io.StringIO(script), stdout=stdout)
    return rc, stdout.getvalue()


def printed_results(out: str) -> list[dict]:
    """The call results play printed (one JSON object a line, after the prompt)."""
    lines = (line.removeprefix("luca> ") for line in out.splitlines())
    return [json.loads(line) for line in lines if line.startswith("{")]


# -- info, play and mcp open one and the same organism ------------------------------------------
@pytest.mark.parametrize("backwards", [False, True])
def test_info_play_and_mcp_open_the_same_organism(monkeypatch, capsys, backwards):
    """--backwards reaches the env in every front end (it used to be dropped by
    play and mcp: they played the forward organism)."""
    options = ["--seed", "0", "--tier", "easy", "--mode", "disease"] + (["--backwards"] if backwards else [])
    organism = world.make_organism(0, "easy", 20, "disease", backwards)
    modes = list(organism.meta.signal_modes)
    assert modes == ["inhibits" if backwards else "activates"] * len(modes)  # the two directions differ here

    assert main(["info", *options]) == 0
    out = capsys.readouterr().out
    assert f"fingerprint {organism.fingerprint()[:16]}" in out
    assert ", ".join(f"{s} ({m})" for s, m in zip(organism.meta.signal_labels, modes)) in out

    rc, out = play("info\nend\n", "--json", *options)
    assert rc == 0
    info = printed_results(out)[0]
    assert [s["mode"] for s in info["signals"]] == modes

    served = []
    # mcp passes a builder (the organism is generated while the server already answers initialize).
    monkeypatch.setattr("luca_gym.mcp.server.serve", lambda session, **kw: served.append((session, kw)))
    assert main(["mcp", *options]) == 0
    ((build, kw),) = served
    session = build()
    assert kw["instructions"] == session.system_prompt()
    assert session.meta == organism.meta
    assert [s["mode"] for s in session.call("get_organism_info")["signals"]] == modes


def test_the_backwards_flag_parses_alike_for_info_play_and_mcp():
    for command in ("info", "play", "mcp"):
        assert build_parser().parse_args([command]).backwards is False
        assert build_parser().parse_args([command, "--backwards"]).backwards is True


# -- train, and learned agents in eval ----------------------------------------------------
BAD_TRAIN = [
    (["--algo", "dqn"], ["algo", "'dqn'", "ppo, maskable-ppo"]),
    (["--algo", "maskable-ppo", "--pool-size", "0"], ["--pool-size", "0", "positive integer"]),
    (["--steps", "100", "--num-envs", "16"], ["steps", "100", "one update", "512"]),
    (["--num-envs", "0"], ["--num-envs", "0", "positive integer"]),
    (["--tier", "extreme"], ["tier", "'extreme'", "easy, medium, hard"]),
    (["--n-genes", "3"], ["--n-genes", "3", "4..4096"]),
    (["--analyst", "oracle"], ["analyst", "'oracle'", "logit-additive"]),
    (["--pool-size", "0"], ["--pool-size", "0", "positive integer"]),
    (["--algo", "maskable-ppo", "--network", "entity"], ["network", "--algo ppo and bc", "not maskable-ppo"]),
    (["--algo", "bc", "--teacher", "causal-sweep"], ["--teacher", "'causal-sweep'", "unknown", "allowed causal-sweep-flat"]),
    (["--algo", "bc", "--world", "biobank"], ["--algo", "bc needs a world with a flat codec", "'biobank'"]),
    (["--algo", "bc", "--epochs", "0"], ["--epochs", "0 not allowed", "positive integer"]),
    (["--algo", "bc", "--steps", "100", "--num-envs", "512"], ["--steps", "100", "one step per env", "at least 512"]),
    (["--algo", "bc", "--num-envs", "-3"], ["--num-envs", "-3 not allowed"]),
    (["--algo", "bc", "--init", "run"], ["--init", "--algo ppo only", "not bc"]),
    (["--teacher", "causal-sweep-flat"], ["--teacher", "--algo bc only", "not ppo"]),
    (["--algo", "maskable-ppo", "--epochs", "3"], ["--epochs", "--algo bc only"]),
    (["--init", "/nonexistent/run"], ["--init", "/nonexistent/run: no such run folder"]),
    (["--learning-rate", "-1"], ["--learning-rate", "-1.0 not allowed"]),
    (["--ent-coef", "nan"], ["--ent-coef", "nan not allowed"]),
    (["--algo", "bc", "--learning-rate", "0.1"], ["--learning-rate", "--algo ppo only", "not bc"]),
    (["--network", "transformer"], ["network", "'transformer'", "'mlp', 'entity', 'recurrent'"]),
    (["--world", "dag", "--set", "observation=raw", "--network", "entity"],
     ["network", "observation='raw' has no token layout", "network='mlp'"]),
    *[(["--budget", v], ["--budget", words]) for v, words in
      (("0", "0 not allowed; an integer in 1..65536"), ("-1", "-1 not allowed"), ("8.5", "8.5 not allowed"),
       ("x", "'x' not allowed"), ("1000000000", "1000000000 not allowed"), ("8,9", "one value"), ("null", "'null'"))],
]


@pytest.mark.parametrize("args, words", BAD_TRAIN, ids=[" ".join(a) for a, _ in BAD_TRAIN])
def test_train_bad_input(tmp_path, capsys, args, words):
    out = tmp_path / "run"
    assert main(["train", *args, "--out", str(out), "--quiet"]) == 2
    line = one_error_line(capsys.readouterr().err, "train")
    for w in words:
        assert w in line
    assert not out.exists()


TRAIN_PLANS = [
    ("ppo", 1_500_000, 1024, 45, "1,474,560 env steps = 45 updates x 1024 envs x 32 steps (1,500,000 rounded down to "
     "whole updates); learning rate 0.001 annealed linearly to 0 over these 45 updates (the step count sets both the "
     "run's length and the schedule's horizon)"),
    ("maskable-ppo", 5_000, 4, 20, "5,120 env steps = 20 updates x 4 envs x 64 steps (5,000 rounded up to whole "
     "rollouts); learning rate 0.002, constant (the step count sets the run's length only); a pool of 1,024 training "
     "instances"),
]


@pytest.mark.parametrize("algo, steps, num_envs, updates, plan", TRAIN_PLANS, ids=[p[0] for p in TRAIN_PLANS])
def test_train_states_its_plan_then_shows_setup_and_progress(tmp_path, capsys, monkeypatch, algo, steps, num_envs, updates, plan):
    """Both algorithms alike: the steps it will run and the learning-rate
    horizon on stdout; on stderr a setup notice while the first update runs,
    then progress (off a terminal: the first update, each tenth, the last).
    The training itself is faked."""
    from luca_gym.agents import ppo, sb3

    run = int(plan.split()[0].replace(",", ""))

    def train(progress):
        time.sleep(0.5)  # setting up: past the notice's delay
        for u in range(1, updates + 1):
            progress({"update": u, "updates": updates, "env_steps": u * run // updates, "wall_s": 0.5 + u / 100, "mean_score": 0.5})
        return {"env_steps": run, "steps": run, "wall_s": 1.0, "steps_per_s": 1000.0, "final_score": 0.5}

    monkeypatch.setattr(ppo, "train", lambda config, out, progress: train(progress))
    monkeypatch.setattr(sb3, "train_maskable_ppo", lambda progress, **kwargs: train(progress))
    monkeypatch.setattr(TrainProgress, "notice_after_s", 0.05)
    argv = ["train", "--algo", algo, "--tier", "easy", "--steps", str(steps), "--num-envs", str(num_envs),
            "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == f"training {algo}: {plan}"
    assert f"trained {algo}: {run} steps in 1.0 s (1000 steps/s after the first update)" in out
    notice, *lines = err.splitlines()
    assert notice.startswith(f"{algo}: setting up: generating training instances and compiling")
    shown = [int(re.search(r"update (\d+)/", line).group(1)) for line in lines]
    assert shown[0] == 1 and shown[-1] == updates and len(shown) == 11


def test_train_maskable_ppo_without_the_rl_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "luca_gym.agents.sb3", None)  # the import fails as without sb3-contrib
    assert main(["train", "--algo", "maskable-ppo", "--out", str(tmp_path / "run"), "--quiet"]) == 2
    line = one_error_line(capsys.readouterr().err, "train")
    assert 'pip install -e ".[rl]"' in line


def test_eval_sb3_agent_without_the_rl_extra(results, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "luca_gym.agents.sb3", None)
    model = tmp_path / "model.zip"
    model.write_bytes(b"PK")
    before = snapshot(results)
    assert main(eval_argv(results, **{"--agents": f"sb3:{model}"})) == 2
    line = one_error_line(capsys.readouterr().err, "eval")
    assert f"sb3:{model}" in line and 'pip install -e ".[rl]"' in line
    assert snapshot(results) == before


def test_eval_corrupt_ppo_checkpoint_runs_nothing(results, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{not json")
    (run / "params.npz").write_bytes(b"")
    before = snapshot(results)
    assert main(eval_argv(results, **{"--agents": f"random,ppo:{run}"})) == 2
    line = one_error_line(capsys.readouterr().err, "eval")
    assert "config.json: corrupt" in line
    assert snapshot(results) == before  # no session ran, not even the random agent's


# -- --budget ---------------------------------------------------------------------------
def test_eval_budget_reaches_every_record_and_the_folder_keeps_one_budget(tmp_path, capsys):
    """``--budget 8``: every line records budget 8 and its call limit, the
    table says so; the same folder then refuses a run at another budget,
    naming both, and is left as it was."""
    out = tmp_path / "b8"
    argv = eval_argv(out, **{"--agents": "causal-sweep,causal-sweep-flat", "--tiers": "medium", "--modes": "disease",
                             "--budget": "8"})
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Composite score, N=20, budget 8" in printed and "causal-sweep-flat" in printed
    records = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert [(r["agent"], r["budget"], r["call_limit"]) for r in records] == [
        ("causal-sweep", 8, 4 * 8 + 64), ("causal-sweep-flat", 8, 4 * 8 + 64)]
    for r in records:
        assert sum(c["call"] in ("run_experiment", "test_rescue") for c in r["calls"]) <= 8
        assert r["end_reason"] == "end"
    before = snapshot(out)
    default = [a for a in argv if a not in ("--budget", "8")]
    assert main(default) == 2
    line = one_error_line(capsys.readouterr().err, "eval")
    assert "budget=8" in line and "budget=31" in line and "another --out folder" in line
    assert snapshot(out) == before


def test_eval_budget_refused_for_a_world_without_one(tmp_path, capsys):
    """``--budget`` for a world whose config has no budget (tracking) is refused before anything runs."""
    out = tmp_path / "tracking"
    assert main(["eval", "--world", "tracking", "--budget", "8", "--seeds", "0", "--out", str(out), "--quiet"]) == 2
    line = one_error_line(capsys.readouterr().err, "eval")
    assert all(w in line for w in ("budget", "'tracking'", "has no budget setting"))
    assert not out.exists()


def test_eval_without_budget_keeps_the_default(tmp_path, capsys):
    out = tmp_path / "default"
    assert main(eval_argv(out, **{"--agents": "causal-sweep-flat"})) == 0
    assert "paper figures in brackets" in capsys.readouterr().out
    (record,) = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert record["budget"] == world.sizes(20).budget and "budget" not in ev.record_key(record)


@pytest.mark.parametrize("algo", ["ppo", "maskable-ppo"])
def test_train_budget_reaches_the_run_config(tmp_path, capsys, monkeypatch, algo):
    """``train --budget 8`` builds the learner's env at budget 8 and its run
    folder's config.json records it; without it the world's default (None).
    The training itself is faked; the config is the one train writes."""
    from luca_gym.agents import ppo, sb3

    seen = []
    result = {"env_steps": 1, "steps": 1, "wall_s": 1.0, "steps_per_s": None, "final_score": 0.5}

    def fake_ppo(config, out, progress):
        seen.append(config.make_env().params.budget)
        seen.append(config.to_json()["settings"]["budget"])
        return result

    def fake_sb3(progress, **kwargs):
        seen.append(kwargs.get("budget"))  # train_maskable_ppo builds its codec, and config.json, from these settings
        return result

    monkeypatch.setattr(ppo, "train", fake_ppo)
    monkeypatch.setattr(sb3, "train_maskable_ppo", fake_sb3)
    base = ["train", "--algo", algo, "--tier", "medium", "--mode", "disease", "--steps", "32768", "--quiet"]
    assert main([*base, "--budget", "8", "--out", str(tmp_path / "b8")]) == 0
    assert main([*base, "--out", str(tmp_path / "default")]) == 0
    capsys.readouterr()
    if algo == "ppo":
        assert seen == [8, 8, world.sizes(20).budget, None]
    else:
        assert seen == [8, None]


def test_train_network_reaches_the_ppo_config(tmp_path, capsys, monkeypatch):
    """``train --network entity`` builds the entity network; the default stays the MLP."""
    from luca_gym.agents import ppo

    seen = []

    def fake_ppo(config, out, progress):
        seen.append((config.network, config.to_json()["network"]))
        return {"env_steps": 1, "steps": 1, "wall_s": 1.0, "steps_per_s": None, "final_score": 0.5}

    monkeypatch.setattr(ppo, "train", fake_ppo)
    base = ["train", "--steps", "32768", "--quiet"]
    assert main([*base, "--network", "entity", "--out", str(tmp_path / "entity")]) == 0
    assert main([*base, "--out", str(tmp_path / "mlp")]) == 0
    capsys.readouterr()
    assert seen == [("entity", "entity"), ("mlp", "mlp")]


def test_train_learning_rate_and_entropy_reach_the_ppo_config(tmp_path, capsys, monkeypatch):
    """``--learning-rate`` and ``--ent-coef`` set the JAX PPO's (a gentle fine-tune from ``--init``); the defaults stay."""
    from luca_gym.agents import ppo

    seen = []

    def fake_ppo(config, out, progress):
        seen.append((config.learning_rate, config.ent_coef))
        return {"env_steps": 1, "steps": 1, "wall_s": 1.0, "steps_per_s": None, "final_score": 0.5}

    monkeypatch.setattr(ppo, "train", fake_ppo)
    base = ["train", "--steps", "32768", "--quiet"]
    assert main([*base, "--learning-rate", "1e-4", "--ent-coef", "0.001", "--out", str(tmp_path / "gentle")]) == 0
    assert main([*base, "--out", str(tmp_path / "default")]) == 0
    capsys.readouterr()
    assert seen == [(1e-4, 0.001), (ppo.PPOConfig.learning_rate, ppo.PPOConfig.ent_coef)]


def test_eval_summary_has_a_scaling_table_only_where_medium_healthy_sessions_ran():
    """The paper's scaling table is of medium healthy sessions: a sweep of
    several N without them (medium disease) prints no empty table."""
    from luca_gym.worlds.luca.cli import CLI
    from luca_gym.worlds.luca.evaluation import luca_spec

    def summary(tier, mode):
        records = [make_record("causal-sweep", tier, mode, n, s, 0.5) for n in (20, 40) for s in (0, 1)]
        return CLI.eval_summary(records, [luca_spec("causal-sweep", tier, mode, n, s) for n in (20, 40) for s in (0, 1)])

    healthy, disease = summary("medium", "healthy"), summary("medium", "disease")
    assert "Scaling (medium healthy, prediction accuracy)\n| N | budget | causal-sweep |" in healthy
    assert "Composite score, N=40" in disease and "Scaling" not in disease


def test_report_and_show_read_a_plugin_world_that_eval_took(tmp_path):
    """A world outside the registry (``eval --world package.module:WORLD``) is
    reported and shown once ``--world`` names it again; without it, one line
    says how."""
    import os

    tests = str(Path(__file__).resolve().parent)
    env = {**os.environ, "PYTHONPATH": tests + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = tmp_path / "coin"

    def run(*argv):
        return subprocess.run(luca_gym_command() + list(argv), capture_output=True, text=True, timeout=300, env=env)

    made = run("eval", "--world", "coin_world:WORLD", "--seeds", "0-1", "--set", "n_coins=3", "--set", "weighings=1",
               "--out", str(out), "--quiet")
    assert made.returncode == 0, made.stderr
    refused = run("report", str(out))
    assert refused.returncode == 2 and "'coin', which is not registered" in refused.stderr
    assert "--world package.module:WORLD" in refused.stderr and not (out / "report.md").exists()
    reported = run("report", str(out), "--world", "coin_world:WORLD")
    assert reported.returncode == 0, reported.stderr
    assert "ternary-search" in (out / "report.md").read_text()
    shown = run("show", str(out), "--world", "coin_world:WORLD", "--seed", "0", "--agent", "ternary-search", "--transcript")
    assert shown.returncode == 0 and "guess" in shown.stdout, shown.stderr

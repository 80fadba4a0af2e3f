"""Sealed evaluations and results you can trust.

Each test here names the break it guards against: the public seed giving
the organism away, results lines trusted on their key alone, two sweeps
writing one folder, an undecodable byte without file and line, duplicates
counted twice, a refused call closing the session, a lone surrogate stored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

from luca_gym import harness as ev
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca import generator as world
from luca_gym.cli import main
from luca_gym.worlds.luca.envs import LucaEnv, LucaVectorEnv
from luca_gym.worlds.luca.functional import organism_batch
from luca_gym.llm.loop import ScriptedAgent
from luca_gym.worlds.luca.tools import ToolSession
from luca_gym.worlds.luca.evaluation import luca_spec

SECRET = "correct horse battery staple 42"
OTHER = "an entirely different secret!!"
TIER, MODE, N = "easy", "disease", 20
SPECS = ev.plan_world("luca", ["random", "heuristic"], [0, 1], tier=[TIER], mode=[MODE], n_genes=[N])


@pytest.fixture(scope="module")
def seal():
    return seal_mod.make_seal(SECRET)


def _weights(organism) -> np.ndarray:
    return np.asarray(organism.arrays.weights)


# -- 1. the public seed no longer gives the organism ---------------------------------
def test_regenerating_from_the_public_seed_does_not_give_the_sealed_organism(seal):
    sealed = world.make_organism(3, TIER, N, MODE, sealed=seal)
    public = world.make_organism(3, TIER, N, MODE)
    assert sealed.fingerprint() != public.fingerprint()
    assert not np.array_equal(_weights(sealed), _weights(public))
    assert sealed.meta.signal_labels != public.meta.signal_labels  # the names do not fingerprint it either
    assert sealed.meta.phenotype_names != public.meta.phenotype_names
    # Nor does any public seed nearby: an agent trying seeds 0-29 finds no match.
    for seed in range(30):
        assert world.make_organism(seed, TIER, N, MODE).fingerprint() != sealed.fingerprint()
    assert sealed.meta.seed == 3 and sealed.meta.sealed == seal.fingerprint and public.meta.sealed is None


def test_sealed_organisms_are_a_pure_function_of_secret_and_seed(seal):
    a = world.make_organism(5, TIER, N, MODE, sealed=SECRET)
    b = world.make_organism(5, TIER, N, MODE, sealed=seal_mod.Seal(SECRET.encode()))
    c = world.make_organism(5, TIER, N, MODE, sealed=OTHER)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    # The healthy and disease organisms of a sealed triple share their network, as unsealed.
    healthy = world.make_organism(5, TIER, N, "healthy", sealed=seal)
    assert np.array_equal(_weights(healthy), _weights(a))


def test_every_front_end_opens_the_same_sealed_organism(seal):
    env = LucaEnv(TIER, MODE, N, sealed=seal)
    env.reset(options={"organism_seed": 7})
    session = ToolSession(7, tier=TIER, mode=MODE, n_genes=N, sealed=SECRET)
    assert env.organism.fingerprint() == session.env.organism.fingerprint()
    vec = LucaVectorEnv(2, TIER, MODE, N, sealed=seal, pool_size=16)
    vec.reset(options={"organism_seeds": [7, 8]})
    organisms, _ = organism_batch([7], TIER, N, MODE, sealed=seal)
    for got in (np.asarray(vec._organisms.weights)[0], np.asarray(organisms.weights)[0]):
        np.testing.assert_array_equal(got, _weights(env.organism))
    assert session.organism_info()["signals"][0]["label"] == env.organism.meta.signal_labels[0]


def test_the_sealed_session_shows_an_opaque_id_and_never_the_sealed_seed(seal):
    session = ToolSession(7, tier=TIER, mode=MODE, n_genes=N, sealed=seal)
    info = session.organism_info()
    assert info["organism_id"] == seal.organism_id(7) != "org_00000007"
    assert len(info["organism_id"]) == len("org_") + 12
    assert ToolSession(7, tier=TIER, mode=MODE, n_genes=N, sealed=OTHER).organism_info()["organism_id"] != info["organism_id"]
    hidden = str(seal.organism_seed(7))
    session.call("run_experiment", {"interventions": {session.targetable_genes[0]: {"type": "BLOCK"}}})
    session.call("end", {})
    text = json.dumps(session.record(), ensure_ascii=False) + json.dumps(session.tool_specs()) + session.system_prompt()
    assert hidden not in text and SECRET not in text
    assert SECRET not in repr(seal) and seal.fingerprint in repr(seal)


def test_bad_secrets_get_clear_errors(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="at least 16"):
        seal_mod.make_seal("short")
    with pytest.raises(ValueError, match="sealed: int not allowed"):
        seal_mod.make_seal(5)
    monkeypatch.delenv(seal_mod.SECRET_ENV, raising=False)
    with pytest.raises(ValueError, match=seal_mod.SECRET_ENV):
        seal_mod.make_seal(True)
    monkeypatch.setenv(seal_mod.SECRET_ENV, SECRET)
    assert seal_mod.make_seal(True).fingerprint == seal_mod.make_seal(SECRET).fingerprint
    with pytest.raises(ValueError, match="cannot be read"):
        seal_mod.read_secret_file(str(tmp_path / "absent.key"))
    drawn, created = seal_mod.load_or_create(str(tmp_path))
    again, created_again = seal_mod.load_or_create(str(tmp_path))
    assert created and not created_again and drawn == again
    assert os.stat(tmp_path / seal_mod.SECRET_FILE).st_mode & 0o077 == 0  # readable by its owner only


# -- 2. sealed sweeps resume and reproduce ----------------------------------------------
@pytest.fixture(scope="module")
def sealed_sweep(tmp_path_factory, seal):
    out = tmp_path_factory.mktemp("sealed")
    path = ev.sweep(SPECS, str(out), sealed=seal)
    return out, path


def test_a_sealed_sweep_records_the_fingerprint_and_signs_each_line(sealed_sweep, seal):
    out, path = sealed_sweep
    records = ev.load_sessions(path)
    assert len(records) == len(SPECS)
    text = open(path, encoding="utf-8").read()
    assert SECRET not in text and str(seal.organism_seed(0)) not in text
    for r in records:
        assert r["sealed"] == seal.fingerprint and r["signature"] and r["digest"]
        assert r["organism_id"] == seal.organism_id(r["seed"])
        assert r["version"] and r["budget"] == 31 and r["call_limit"] == 4 * 31 + 64 and r["end_reason"] == "end"


def test_a_sealed_rerun_resumes_and_a_fresh_one_reproduces(sealed_sweep, seal, tmp_path):
    out, path = sealed_sweep
    before = open(path, "rb").read()
    ev.sweep(SPECS, str(out), sealed=SECRET)  # the same secret: everything is done already
    assert open(path, "rb").read() == before
    fresh = ev.sweep(SPECS, str(tmp_path), sealed=SECRET)
    scores = lambda p: {ev.record_key(r): r["scores"] for r in ev.load_sessions(p)}  # noqa: E731
    assert scores(fresh) == scores(path)
    unsealed = ev.sweep(SPECS, str(tmp_path / "public"))
    assert scores(unsealed) != scores(path)


@pytest.mark.parametrize("sealed,field", [(None, "sealed"), (OTHER, "sealed")])
def test_a_rerun_under_another_seal_is_refused_by_file_and_line(sealed_sweep, sealed, field):
    out, path = sealed_sweep
    before = open(path, "rb").read()
    with pytest.raises(ev.ResultsError, match=rf"sessions\.jsonl:1: written with {field}="):
        ev.sweep(SPECS, str(out), sealed=sealed)
    assert open(path, "rb").read() == before


# -- 3. results you can trust ------------------------------------------------------------
@pytest.fixture()
def public_results(tmp_path):
    path = ev.sweep(SPECS, str(tmp_path))
    return tmp_path, path


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8").read().splitlines()]


def _write(path, records) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))


def test_an_edited_line_is_refused_naming_file_and_line(public_results):
    out, path = public_results
    records = _lines(path)
    records[2]["scores"]["composite"] = 0.999  # a hand edit: the table would change
    _write(path, records)
    with pytest.raises(ev.ResultsError, match=r"sessions\.jsonl:3: the line was changed after it was written"):
        ev.sweep(SPECS, str(out))
    with pytest.raises(ev.ResultsError, match=r"sessions\.jsonl:3"):
        ev.load_sessions(path)


@pytest.mark.parametrize("field,value", [("version", "0.0.1"), ("budget", 12), ("call_limit", 9)])
def test_a_line_from_another_configuration_is_refused_even_with_a_fresh_digest(public_results, field, value):
    """The break: a line edited to another version, budget and composite (its
    digest recomputed) was skipped on rerun and changed the table."""
    out, path = public_results
    records = _lines(path)
    for r in records:  # a whole file from another build keeps its own consistency
        r[field] = value
        r.pop("digest")
    _write(path, records)
    before = open(path, "rb").read()
    with pytest.raises(ev.ResultsError, match=rf"sessions\.jsonl:1: written with {field}={value!r}"):
        ev.sweep(SPECS, str(out))
    assert open(path, "rb").read() == before  # nothing run, nothing appended


def test_lines_of_two_builds_in_one_file_are_refused(public_results):
    out, path = public_results
    records = _lines(path)
    records[1]["version"] = "0.0.1"
    records[1].pop("digest")
    _write(path, records)
    with pytest.raises(ev.ResultsError, match=r"sessions\.jsonl:2: written with version='0.0.1', but line 1"):
        ev.load_sessions(path)


def test_the_model_server_is_part_of_the_configuration(tmp_path):
    spec = luca_spec("openai:some-model", TIER, MODE, N, 0)
    factory = lambda name: ScriptedAgent([("end", {})])  # noqa: E731 -- no network
    path = ev.sweep([spec], str(tmp_path), policy_factory=factory, base_url="http://localhost:8000/v1")
    (record,) = ev.load_sessions(path)
    assert record["base_url"] == "http://localhost:8000/v1"
    with pytest.raises(ev.ResultsError, match=r"sessions\.jsonl:1: written with base_url='http://localhost:8000/v1'"):
        ev.sweep([spec], str(tmp_path), policy_factory=factory, base_url="http://elsewhere/v1")
    ev.sweep([spec], str(tmp_path), policy_factory=factory, base_url="http://localhost:8000/v1")  # same server: resumes
    # A baseline sweep into the same folder does not care about the server.
    ev.sweep([luca_spec("random", TIER, MODE, N, 0)], str(tmp_path), policy_factory=lambda n: ev.make_runner(n, world="luca"))


def test_reading_drops_duplicate_lines_and_says_so(public_results):
    out, path = public_results
    text = open(path, encoding="utf-8").read()
    first = text.splitlines()[0]
    with open(path, "a", encoding="utf-8") as f:
        f.write(first + "\n" + first + "\n")
    results = ev.read_results(path)
    assert len(results.records) == len(SPECS) and [d for d, _ in results.duplicates] == [len(SPECS) + 1, len(SPECS) + 2]
    assert "2 duplicate session line(s) ignored" in results.notes()[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(ev.load_sessions(path)) == len(SPECS)
    assert any(issubclass(w.category, ev.ResultsWarning) for w in caught)


def test_a_non_utf8_byte_is_named_by_file_and_line(public_results, capsys):
    out, path = public_results
    lines = open(path, "rb").read().split(b"\n")
    lines[1] = lines[1][:10] + b"\xff" + lines[1][10:]
    open(path, "wb").write(b"\n".join(lines))
    with pytest.raises(ev.ResultsError, match=r"sessions\.jsonl:2: not UTF-8 text \(byte 0xff at column 11\)"):
        ev.load_sessions(path)
    argv = ["eval", "--agents", "random", "--tiers", TIER, "--modes", MODE, "--seeds", "0", "--out", str(out), "--quiet"]
    assert main(argv) == 2
    assert "sessions.jsonl:2: not UTF-8" in capsys.readouterr().err


def test_a_second_sweep_into_a_locked_folder_is_refused(tmp_path):
    """The break: two evals into one folder at once wrote 8 lines for 4 sessions."""
    with ev.folder_lock(str(tmp_path)):
        with pytest.raises(ev.ResultsError, match="another luca-gym run is writing this folder"):
            ev.sweep(SPECS, str(tmp_path))
    ev.sweep(SPECS, str(tmp_path))
    assert len(ev.read_results(str(tmp_path)).records) == len(SPECS)
    assert len(open(tmp_path / ev.SESSIONS_FILE).read().splitlines()) == len(SPECS)


def test_two_eval_processes_at_once_never_double_a_session(tmp_path):
    argv = [sys.executable, "-m", "luca_gym.cli", "eval", "--agents", "random", "--tiers", TIER, "--modes", "healthy",
            "--seeds", "0-3", "--out", str(tmp_path), "--quiet"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 2]), outs
    if codes == [0, 2]:
        assert any("another luca-gym run is writing this folder" in err for _, err in outs)
    lines = open(tmp_path / ev.SESSIONS_FILE).read().splitlines()
    assert len(lines) == 4 and not ev.read_results(str(tmp_path)).duplicates


def test_an_mcp_style_recording_is_read_by_the_harness(tmp_path, seal):
    session = ToolSession(4, tier=TIER, mode=MODE, n_genes=N, sealed=seal)
    with pytest.raises(ValueError, match="still open"):
        ev.record_tool_session(session, str(tmp_path))
    session.call("end", {})
    path = ev.record_tool_session(session, str(tmp_path), agent="mcp-client", wall_s=1.5)
    (record,) = ev.read_results(path, seal=seal).records
    assert record["scores"] == session.scores and record["sealed"] == seal.fingerprint and record["end_reason"] == "end"
    with pytest.raises(ev.ResultsError, match="already recorded"):
        ev.record_tool_session(session, str(tmp_path))


# -- 4. no step-limit cliff ------------------------------------------------------------
def test_hundreds_of_refused_calls_change_nothing_and_never_end_the_session():
    """The break: the 188th refused call closed the session and returned scores."""
    session = ToolSession(0, tier="hard", mode="healthy", n_genes=N)
    latent = next(g for g in session.meta.gene_names if g not in session.targetable_genes)
    for i in range(3 * session.call_limit):
        call = [("test_rescue", {"interventions": {session.targetable_genes[0]: {"type": "BLOCK"}}}),
                ("run_experiment", {"interventions": {latent: {"type": "BLOCK"}}}),
                ("submit_prediction", {"predictions": {p: 0.5 for p in session.meta.phenotype_names}})][i % 3]
        result = session.call(*call)
        assert "error" in result and "ended" not in result and "scores" not in result
    assert not session.ended and int(session.env.state.step_count) == 0 and session.scores is None
    assert session.organism_info()["calls_accepted"] == 0 and session.obs["budget_left"] == session.env.params.budget
    assert "phenotypes" in session.call("run_experiment", {"interventions": {session.targetable_genes[0]: {"type": "BOOST"}}})


def test_the_call_limit_is_stated_where_an_agent_reads():
    session = ToolSession(0, tier=TIER, mode=MODE, n_genes=N, env=LucaEnv(TIER, MODE, N, max_steps=7))
    assert session.call_limit == 7 and session.organism_info()["call_limit"] == 7
    assert "at most 7 calls" in session.system_prompt()
    described = {s["name"]: s["description"] for s in session.tool_specs()}
    assert "at most 7 calls" in described["get_organism_info"] and "limit of 7 accepted calls" in described["submit_network"]
    assert all("{call_limit}" not in d for d in described.values())


# -- 5. a lone surrogate ----------------------------------------------------------------
@pytest.mark.parametrize("arguments", [{"text": "before \ud800 after"}, '{"text": "\\ud800"}', '{"text": "\\udfff x"}'])
def test_a_lone_surrogate_is_refused_and_the_record_stays_utf8(arguments):
    session = ToolSession(0, tier=TIER, mode="healthy", n_genes=N)
    result = session.call("submit_hypothesis", arguments)
    assert "lone surrogate" in result["error"] and session.hypotheses == []
    session.call("\ud800", {})
    session.call("end", {})
    json.dumps(session.record(), ensure_ascii=False).encode("utf-8")  # raised UnicodeEncodeError before


def test_a_valid_astral_character_is_kept():
    session = ToolSession(0, tier=TIER, mode="healthy", n_genes=N)
    assert session.call("submit_hypothesis", {"text": "G001 \U0001f9ec drives it"})["stored"] is True
    assert session.hypotheses == ["G001 \U0001f9ec drives it"]


def test_hypotheses_are_bounded():
    session = ToolSession(0, tier=TIER, mode="healthy", n_genes=N)
    from luca_gym.worlds.luca.tools import MAX_HYPOTHESES

    for i in range(MAX_HYPOTHESES):
        assert session.call("submit_hypothesis", {"text": f"h{i}"})["stored"]
    assert "no more are kept" in session.call("submit_hypothesis", {"text": "one more"})["error"]
    assert len(session.hypotheses) == MAX_HYPOTHESES


def test_the_sealed_cli_eval_keeps_its_secret_beside_the_results(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(seal_mod.SECRET_ENV, raising=False)
    argv = ["eval", "--agents", "random", "--tiers", TIER, "--modes", MODE, "--seeds", "0", "--out", str(tmp_path), "--quiet"]
    assert main([*argv, "--sealed"]) == 0
    err = capsys.readouterr().err
    drawn = seal_mod.read_secret_file(str(tmp_path / seal_mod.SECRET_FILE))
    assert f"fingerprint {drawn.fingerprint}" in err and drawn.secret.decode() not in err
    assert main(argv) == 2  # unsealed into a sealed folder
    assert "written with sealed=" in capsys.readouterr().err
    assert main([*argv, "--sealed"]) == 0  # resumes with the kept secret
    assert len(ev.read_results(str(tmp_path), seal=drawn).records) == 1


def test_threads_holding_the_lock_exclude_each_other(tmp_path):
    order = []

    def hold(name):
        with ev.folder_lock(str(tmp_path), wait_s=30):
            order.append(f"{name}+")
            order.append(f"{name}-")

    threads = [threading.Thread(target=hold, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(order[i][:-1] == order[i + 1][:-1] for i in range(0, len(order), 2))


def test_report_says_which_duplicate_lines_it_dropped(public_results, capsys):
    out, path = public_results
    first = open(path, encoding="utf-8").read().splitlines()[0]
    with open(path, "a", encoding="utf-8") as f:
        f.write(first + "\n")
    assert main(["report", str(out)]) == 0
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("report: ")]  # its steps
    assert err == [f"note: {path}: 1 duplicate session line(s) ignored: line {len(SPECS) + 1} (same session as line 1)"]
    text = (out / "report.md").read_text(encoding="utf-8")
    assert f"{len(SPECS)} sessions" in text and "1 duplicate session line(s) ignored" in text

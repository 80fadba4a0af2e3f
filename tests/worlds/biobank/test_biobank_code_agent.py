"""The biobank world's code-agent path (the paper's setting): a session
with the ``python`` tool submits its phenotype as a file it wrote in its
working folder (``submit``'s ``phenotype_file``, no size cap but the
cohort's), and has no structured analysis tools unless asked
(``analysis_tools=True``, ``--python-analysis-tools``), through every
generic path (:func:`luca_gym.tools.session.tool_options`). Every bad
phenotype file is refused with a clear error and changes nothing; a path
never reaches outside the working folder. Every world is of the ``tiny``
profile but the slow test's, of the ``small`` one (6,000 participants,
whose phenotype cannot travel inline)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from luca_gym import harness
from luca_gym.cli import main
from luca_gym.envs.tools import ToolsEnv
from luca_gym.seal import SECRET_ENV, make_seal
from luca_gym.llm.loop import ScriptedAgent
from luca_gym.tools.session import MAX_PAYLOAD, tool_options
from luca_gym.worlds.biobank import phenotype_file as phenotype_mod
from luca_gym.worlds.biobank.phenotype_file import read_phenotype_file, read_rows
from luca_gym.worlds.biobank.tools import ANALYSIS_TOOLS, BiobankToolSession

SEAL = make_seal("a secret of the code-agent tests")
SEED = 3
TINY = {"profile": "tiny"}
CODE_TOOLS = ("experiment", "submit", "end", "python")
SANDBOX = pytest.mark.skipif(os.geteuid() != 0 and not os.access("/usr/bin/bwrap", os.X_OK), reason="needs root or bubblewrap")
ONE_WORKER = pytest.mark.xdist_group("sandbox")  # as tests/test_sandbox.py: sandboxes share uid 65534's processes

# The agent's block: a phenotype for the whole cohort (minus the imaging
# measure for the imaged, age for the others), as Parquet and as CSV.
WRITE_PHENOTYPE = """import pandas as pd
ids = pd.read_parquet('release/participants.parquet')[['participant_id', 'age_years']]
imaging = pd.read_parquet('release/imaging.parquet')[['participant_id', 'lvef_pct']]
df = ids.merge(imaging, on='participant_id', how='left')
df['value'] = (-df['lvef_pct']).fillna(df['age_years'] / 10)
df[['participant_id', 'value']].to_parquet('phenotype.parquet', index=False)
df[['value', 'participant_id']].to_csv('phenotype.csv', index=False)
print(len(df))
"""

# Every bad file, written by the agent's own code in one block.
WRITE_BAD_FILES = """import os
import pandas as pd
rows = pd.read_parquet('release/participants.parquet')[['participant_id']].head(20)
rows['value'] = 1.0
rows.to_parquet('good.parquet', index=False)
open('garbage.parquet', 'w').write('not a parquet file')
rows.rename(columns={'participant_id': 'id'}).to_parquet('wrong_columns.parquet', index=False)
rows.to_csv('wrong_columns.csv')
rows.assign(value='high').to_parquet('text_values.parquet', index=False)
open('text_values.csv', 'w').write('participant_id,value\\nP000001,1.5\\nP000002,high\\n')
open('ragged.csv', 'w').write('participant_id,value\\nP000001,1.5,7\\n')
pd.concat([rows, rows.head(3)]).to_parquet('duplicates.parquet', index=False)
unknown = pd.DataFrame({'participant_id': ['P999999'] + [f'Q{i}' for i in range(11)], 'value': 0.0})
pd.concat([rows, unknown]).to_csv('unknown.csv', index=False)
rows.assign(value=float('inf')).to_parquet('infinite.parquet', index=False)
os.symlink('/etc/passwd', 'passwd.csv')
os.symlink('good.parquet', 'inside_link.parquet')
os.symlink('/', 'root')
os.mkfifo('fifo.csv')
os.mkdir('folder.csv')
os.mkdir('sub')
rows.to_parquet('linked.parquet', index=False)
os.link('linked.parquet', 'sub/hard_link.parquet')
open('phenotype.txt', 'w').write('participant_id,value\\n')
import pyarrow as pa, pyarrow.parquet as pq  # a bomb: 784 bytes, one 8 MiB id repeated on every row once decoded
bomb = pa.DictionaryArray.from_arrays(pa.array([0] * 2000, pa.int32()), pa.array(['P' * (8 << 20)]))
pq.write_table(pa.table({'participant_id': bomb, 'value': pa.array([1.0] * 2000)}), 'bomb.parquet', store_schema=False,
               dictionary_pagesize_limit=1 << 30, compression='zstd')
print('written')
"""


def _open(**options) -> BiobankToolSession:
    return BiobankToolSession(SEED, sealed=SEAL, python=True, turns=None, **options, **TINY)


def _submit_file(session, path, **claims) -> dict:
    return session.call("submit", {"nominations": [], **claims, "phenotype_file": path})


# -- the tool list and the system prompt ------------------------------------------------------
def test_a_session_without_code_offers_no_phenotype_file():
    session = BiobankToolSession(SEED, **TINY)
    assert set(ANALYSIS_TOOLS) <= set(session.tool_names) and "python" not in session.tool_names
    (submit,) = [s for s in session.tool_specs() if s["name"] == "submit"]
    assert "phenotype_file" not in submit["input_schema"]["properties"] and "phenotype_file" not in submit["description"]
    assert "phenotype_file" not in session.system_prompt()
    answer = session.call("submit", {"nominations": [], "phenotype_file": "phenotype.parquet"})
    assert "unknown field 'phenotype_file'" in answer["error"] and not session.ended


@SANDBOX
@ONE_WORKER
@pytest.mark.parametrize("analysis_tools", [False, True])
def test_a_python_session_has_the_analysis_tools_only_when_asked(analysis_tools):
    session = _open(analysis_tools=analysis_tools)
    try:
        expected = (*ANALYSIS_TOOLS, *CODE_TOOLS) if analysis_tools else CODE_TOOLS
        assert sorted(session.tool_names) == sorted(expected) and session.analysis_tools is analysis_tools
        prompt = session.system_prompt()
        assert "phenotype_file='phenotype.parquet'" in prompt and "/analysis" in prompt
        assert ("describe_release" in prompt) is analysis_tools and ("define_phenotype" in prompt) is analysis_tools
        assert ("no structured analysis tools" in prompt) is not analysis_tools
        (submit,) = [s for s in session.tool_specs() if s["name"] == "submit"]
        assert "phenotype_file" in submit["input_schema"]["properties"]
        if not analysis_tools:
            answer = session.call("describe_release", {})
            assert answer["error"].startswith("unknown tool 'describe_release'; allowed experiment, submit, end, python")
            assert "defined" not in session.call("submit", {"nominations": [], "phenotype": "mine"})["error"]
        else:
            assert "tables" in session.call("describe_release", {})
    finally:
        session.close()


def test_the_option_is_refused_by_name_where_it_cannot_be():
    class CodeOnly:  # a world whose session offers the python tool and has no analysis tools
        world, offers_python = "code-only", True

    with pytest.raises(ValueError, match="analysis_tools: True only with the python tool"):
        tool_options(BiobankToolSession, analysis_tools=True)
    with pytest.raises(ValueError, match="analysis_tools: 'yes' not allowed"):
        tool_options(BiobankToolSession, python=True, sealed=SEAL, analysis_tools="yes")
    with pytest.raises(ValueError, match="world 'code-only' has no structured analysis tools"):
        tool_options(CodeOnly, python=True, sealed=SEAL, analysis_tools=True)
    with pytest.raises(ValueError, match="world 'dag' does not offer the python tool"):
        ToolsEnv("dag", python=True, sealed=SEAL, analysis_tools=True)
    with pytest.raises(ValueError, match="analysis_tools: True only with the python tool"):
        BiobankToolSession(SEED, analysis_tools=True, **TINY)
    with pytest.raises(ValueError, match="analysis_tools: True only with the python tool"):
        harness.check_python(harness.plan_world("biobank", ["null"], [SEED], **TINY), False, SEAL, True)
    assert tool_options(BiobankToolSession, python=True, sealed=SEAL, analysis_tools=True) == {
        "python": True, "analysis_tools": True}
    assert tool_options(BiobankToolSession, python=True, sealed=SEAL) == {"python": True}


# -- the phenotype file -------------------------------------------------------------------------
@SANDBOX
@ONE_WORKER
@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_a_full_cohort_file_scores_as_the_same_phenotype_inline(kind):
    session = _open(budget="limited")
    try:
        assert session.call("python", {"code": WRITE_PHENOTYPE})["output"] == f"{session.config.sizes.participants}\n"
        table = pq.read_table(os.path.join(session.sandbox.work_dir, "phenotype.parquet"))
        ids, values = table.column("participant_id").to_pylist(), table.column("value").to_numpy()
        assert len(ids) == session.config.sizes.participants  # the whole cohort
        answer = _submit_file(session, f"./phenotype.{kind}")
    finally:
        session.close()
    assert answer["ended"] and session.ended and answer["scores"]["phenotype_r"] is not None
    imaged = set(session.release.tables["imaging"]["participant_id"])  # the scored participants: inline fits the cap
    inline = BiobankToolSession(SEED, sealed=SEAL, budget="limited", **TINY)
    expected = inline.call("submit", {"nominations": [], "phenotype_values": {
        i: float(v) for i, v in zip(ids, values) if i in imaged and np.isfinite(v)}})
    assert answer["scores"] == expected["scores"]


@pytest.fixture(scope="module")
def bad_files():
    session = _open(budget="limited")
    assert session.call("python", {"code": WRITE_BAD_FILES})["output"] == "written\n"
    yield session
    session.close()


@pytest.mark.parametrize("claims, message", [
    ({"phenotype_file": "nope.parquet"}, "'nope.parquet' not found in the working folder /analysis"),
    ({"phenotype_file": "garbage.parquet"}, "'garbage.parquet' is not a readable Parquet file"),
    ({"phenotype_file": "wrong_columns.parquet"}, "has the columns ['id', 'value']; it needs exactly participant_id and value"),
    ({"phenotype_file": "wrong_columns.csv"}, "has the columns ['', 'participant_id', 'value']; it needs exactly "
                                              "participant_id and value (pandas: write it with index=False)"),
    ({"phenotype_file": "text_values.parquet"}, "phenotype_file: column value is large_string; it needs numbers"),
    ({"phenotype_file": "text_values.csv"}, "line 3: value 'high' is not a number"),
    ({"phenotype_file": "ragged.csv"}, "line 2 has 3 fields; it needs 2"),
    ({"phenotype_file": "duplicates.parquet"}, "phenotype_file: 3 participant ids appear more than once (first: 'P000001')"),
    ({"phenotype_file": "unknown.csv"}, "phenotype_file: 12 participant ids are not in the release (first: 'P999999'"),
    ({"phenotype_file": "infinite.parquet"}, "20 values infinite"),
    ({"phenotype_file": "bomb.parquet"}, "'bomb.parquet' holds a participant_id of 8,388,608 characters; the release's ids "
                                         "have at most 7"),
    ({"phenotype_file": "/analysis/good.parquet"}, "is an absolute path; give a path relative to the working folder /analysis "
                                                   "('good.parquet')"),
    ({"phenotype_file": "/etc/passwd"}, "'/etc/passwd' is an absolute path"),
    ({"phenotype_file": "../good.parquet"}, "leaves the working folder ('..' not allowed)"),
    ({"phenotype_file": "sub/../../work/good.parquet"}, "leaves the working folder"),
    ({"phenotype_file": "passwd.csv"}, "'passwd.csv' is or passes through a symbolic link"),
    ({"phenotype_file": "inside_link.parquet"}, "is or passes through a symbolic link"),
    ({"phenotype_file": "root/etc/passwd.csv"}, "'root/etc/passwd.csv' is or passes through a symbolic link"),
    ({"phenotype_file": "fifo.csv"}, "'fifo.csv' is not a regular file"),
    ({"phenotype_file": "folder.csv"}, "'folder.csv' is not a regular file"),
    ({"phenotype_file": "sub/hard_link.parquet"}, "has other hard links"),
    ({"phenotype_file": "phenotype.txt"}, "is neither .parquet nor .csv"),
    ({"phenotype_file": "./"}, "names no file"),
    ({"phenotype_file": "good.parquet", "phenotype": "imaging.lvef_pct"}, "phenotype and phenotype_file: give one of them"),
    ({"phenotype_file": "good.parquet", "phenotype_values": {"P000001": 1.0}}, "phenotype_values and phenotype_file: give one"),
])
@SANDBOX
@ONE_WORKER
def test_a_bad_phenotype_file_is_refused_and_changes_nothing(bad_files, claims, message):
    session = bad_files
    files = sorted(os.listdir(session.sandbox.work_dir))
    before = (session.budget_left, session.status())
    answer = session.call("submit", {"nominations": [], **claims})
    assert message in answer["error"] and answer["error"].startswith("submit: ") and answer["error"].endswith("nothing changed")
    assert not session.ended and session.scores is None and (session.budget_left, session.status()) == before
    assert answer["submissions_left"] == 1 and sorted(os.listdir(session.sandbox.work_dir)) == files


@SANDBOX
@ONE_WORKER
def test_a_good_file_in_the_same_folder_is_read_and_one_over_the_size_bound_refused(bad_files, monkeypatch):
    ids, values = read_phenotype_file(bad_files.sandbox, "good.parquet", bad_files.config.sizes.participants, 7)
    assert ids == [f"P{i:06d}" for i in range(1, 21)] and values.tolist() == [1.0] * 20
    monkeypatch.setattr(phenotype_mod, "MAX_PHENOTYPE_FILE", 64)  # sent into the sandbox with the reader
    answer = _submit_file(bad_files, "good.parquet")
    assert "bytes; at most 64" in answer["error"] and not bad_files.ended


def test_paths_from_anywhere_never_read_outside_the_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("phenotype_paths")
    folder, outside = root / "work", root / "outside.csv"
    folder.mkdir()
    outside.write_text("participant_id,value\nP000002,2.0\n")
    (folder / "good.csv").write_text("participant_id,value\nP000001,1.0\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "good.csv").write_text("participant_id,value\nP000001,1.0\n")
    os.symlink(outside, folder / "out.csv")
    os.symlink(root, folder / "up")
    names = st.sampled_from(["good.csv", "sub", "out.csv", "up", "..", ".", "", "outside.csv", "work", "/", "\0", "x.parquet"])

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(path=st.one_of(st.lists(names, min_size=1, max_size=5).map("/".join), st.text(max_size=40)))
    def check(path):
        try:
            ids, values = read_rows(str(folder), path, 10)
        except ValueError as exc:
            assert str(exc).startswith("phenotype_file: ")
        else:
            assert ids == ["P000001"] and values.tolist() == [1.0]  # only the files inside

    check()


@SANDBOX
@ONE_WORKER
def test_the_harness_and_command_line_pass_the_option_on(tmp_path, monkeypatch, capsys):
    spec = harness.plan_world("biobank", ["null"], [SEED], **TINY)[0]
    script = [("describe_release", {"table": "imaging"}), ("submit", {"nominations": []})]
    record = harness.run_tool_session(ScriptedAgent(script), spec, sealed=SEAL, python=True, analysis_tools=True)
    assert record["python"] is True and record["analysis_tools"] is True and "columns" in record["calls"][0]["result"]
    assert record["end_reason"] == "end"
    plain = harness.run_tool_session(ScriptedAgent(script), spec, sealed=SEAL, python=True)
    assert "analysis_tools" not in plain and plain["calls"][0]["result"]["error"].startswith("unknown tool")

    monkeypatch.setenv(SECRET_ENV, "a secret of the code-agent tests, from the environment")
    out = str(tmp_path / "eval")
    base = ["eval", "--world", "biobank", "--agents", "null", "--set", "profile=tiny", "--python", "--sealed", "--out", out,
            "--quiet"]
    assert main([*base, "--seeds", str(SEED), "--python-analysis-tools"]) == 0
    (line,) = harness.load_sessions(out)
    assert line["python"] is True and line["analysis_tools"] is True
    capsys.readouterr()
    assert main([*base, "--seeds", str(SEED + 1)]) == 2  # a folder holds one kind of session
    assert "analysis_tools" in capsys.readouterr().err
    assert main(["eval", "--world", "biobank", "--agents", "null", "--seeds", str(SEED), "--set", "profile=tiny",
                 "--python-analysis-tools", "--sealed", "--out", str(tmp_path / "no_python")]) == 2
    assert "only with the python tool" in capsys.readouterr().err and not os.path.exists(tmp_path / "no_python")

    served = {}
    monkeypatch.setattr("luca_gym.mcp.server.serve", lambda session, **kw: served.update(session=session, **kw))
    for flags, expected in (([], CODE_TOOLS), (["--python-analysis-tools"], (*ANALYSIS_TOOLS, *CODE_TOOLS))):
        assert main(["mcp", "--world", "biobank", "--seed", str(SEED), "--set", "profile=tiny", "--python", "--sealed",
                     *flags]) == 0
        session = served["session"]
        try:
            assert sorted(session.tool_names) == sorted(expected)
        finally:
            session.close()
    assert main(["mcp", "--world", "biobank", "--set", "profile=tiny", "--python-analysis-tools", "--sealed"]) == 2
    assert "only with the python tool" in capsys.readouterr().err
    assert main(["mcp", "--world", "biobank", "--set", "profile=tiny", "--set", "analysis_tools=true", "--python",
                 "--sealed"]) == 2
    assert "give --python-analysis-tools" in capsys.readouterr().err


@pytest.mark.slow
@SANDBOX
@ONE_WORKER
def test_the_small_profiles_whole_cohort_is_submitted_by_file():
    """6,000 participants: their phenotype is over the inline cap, and goes as a file."""
    session = BiobankToolSession(SEED, sealed=SEAL, python=True, profile="small")
    try:
        assert session.call("python", {"code": WRITE_PHENOTYPE})["output"] == "6000\n"
        table = pq.read_table(os.path.join(session.sandbox.work_dir, "phenotype.parquet"))
        inline = {i: float(v) for i, v in zip(table.column("participant_id").to_pylist(), table.column("value").to_numpy())}
        assert "characters of JSON; at most" in session.call("submit", {"nominations": [], "phenotype_values": inline})["error"]
        assert len(str(inline)) > MAX_PAYLOAD
        answer = _submit_file(session, "phenotype.parquet")
    finally:
        session.close()
    assert answer["ended"] and answer["scores"]["phenotype_r"] is not None


def test_a_paper_size_file_is_read_and_a_longer_one_refused(tmp_path):
    """The paper profile's 54,000 participants as Parquet and CSV (no world needed: the reader alone)."""
    n = 54_000
    ids = [f"P{i:06d}" for i in range(1, n + 1)]
    values = np.linspace(-3.0, 3.0, n)
    values[::7] = np.nan  # missing
    pq.write_table(pa.table({"participant_id": ids, "value": values}), tmp_path / "paper.parquet")
    with open(tmp_path / "paper.csv", "w") as f:
        f.write("participant_id,value\n" + "".join(f"{i},{'' if np.isnan(v) else repr(float(v))}\n" for i, v in zip(ids, values)))
    for name in ("paper.parquet", "paper.csv"):
        read_ids, read_values = read_rows(str(tmp_path), name, n)
        assert read_ids == ids and np.array_equal(read_values, values, equal_nan=True)
        with pytest.raises(ValueError, match=f"phenotype_file: '{name}' has 54,000 rows or more; at most 53,999"):
            read_rows(str(tmp_path), name, n - 1)

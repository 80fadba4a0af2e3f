"""Phenotype files built to explode when decoded
(:mod:`luca_gym.worlds.biobank.phenotype_file`): a Parquet dictionary
holding one 8 MiB string under the cohort's 2,000 rows (784 bytes on disk,
written with ``store_schema=False`` and a large dictionary page), a
compression bomb, 20,000 columns, a CSV line of 48 MiB and a quoted CSV
field of 60 MB are each refused with one clear error, and the host's peak
memory grows by at most :data:`BOUND` while it refuses them: both where the
careful reader runs in the host's own process (:func:`read_rows`) and
where, as in a session, it runs in the session's sandbox
(:func:`read_phenotype_file`). Measured in a fresh process, its peak RSS
(``ru_maxrss``) reset before each file (``/proc/self/clear_refs``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from luca_gym import sandbox as sandbox_mod
from luca_gym.sandbox import isolation as sandbox_isolation

BOUND = 100 << 20  # bytes the host's peak memory may grow by while it refuses a bomb
ROWS = 2000  # the tiny profile's cohort

# Written by the agent's code (in the sandbox) or by the test itself: each bomb, and a good file beside them.
BOMBS = """import pyarrow as pa, pyarrow.parquet as pq
rows = {rows}
ids = pa.array([f'P{{i:06d}}' for i in range(1, rows + 1)])
pq.write_table(pa.table({{'participant_id': ids, 'value': pa.array([1.0] * rows)}}), 'good.parquet')
big = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(['P' * (8 << 20)]))
pq.write_table(pa.table({{'participant_id': big, 'value': pa.array([1.0] * rows)}}), 'dictionary.parquet',
               store_schema=False, dictionary_pagesize_limit=1 << 30, compression='zstd')
wide = pa.array(['P' * (40 << 10) + str(i) for i in range(rows)])  # 80 MB of ids, a few KB compressed
pq.write_table(pa.table({{'participant_id': wide, 'value': pa.array([1.0] * rows)}}), 'compressed.parquet',
               use_dictionary=False, compression='zstd', compression_level=19)
columns = {{'participant_id': ids.slice(0, 1), 'value': pa.array([1.0])}}
columns.update({{f'c{{i}}': pa.array([0.0]) for i in range(20_000)}})
pq.write_table(pa.table(columns), 'columns.parquet', store_schema=False)
with open('line.csv', 'w') as f:
    f.write('participant_id,value\\nP000001,' + '1' * (48 << 20) + '\\n')
with open('field.csv', 'w') as f:
    f.write('participant_id,value\\n"' + ('x' * 100 + '\\n') * 600_000 + '",1\\n')
print('written')
"""
# (file, the words its refusal holds)
REFUSALS = (("dictionary.parquet", "holds a participant_id of 8,388,608 characters; the release's ids have at most 7"),
            ("compressed.parquet", "unpacks to"),
            ("columns.parquet", "is not a readable Parquet file"),
            ("line.csv", "line 2 is longer than 1,024 bytes"),
            ("field.csv", "is not a readable CSV file"))

# The host: a fresh process; its peak RSS is reset before each file and read after it.
HOST = """import json, os, resource, sys
from luca_gym.sandbox import Limits, Sandbox
from luca_gym.worlds.biobank.phenotype_file import read_phenotype_file, read_rows

def reset():
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10

where, isolation, names = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sandbox = Sandbox(Limits(timeout_s=60.0), isolation) if where == 'sandbox' else None
folder = sandbox.work_dir if sandbox else sys.argv[4]
if sandbox:
    answer = sandbox.run(sys.stdin.read())
    assert answer['output'] == 'written\\n', answer
else:
    os.chdir(folder)
    exec(sys.stdin.read())
out = {{}}
for name in ['good.parquet'] + names:
    import pyarrow, pyarrow.parquet, numpy  # loaded before the measure: their code is not the file's cost
    reset()
    before = peak()
    try:
        if sandbox:
            ids, values = read_phenotype_file(sandbox, name, {rows}, 7)
        else:
            ids, values = read_rows(folder, name, {rows}, 7)
        result = len(ids)
    except ValueError as exc:
        result = str(exc)
    out[name] = [result, peak() - before]
if sandbox:
    sandbox.close()
print(json.dumps(out))
""".format(rows=ROWS)


def _host(where: str, tmp_path, isolation: str = "auto") -> dict:
    names = [name for name, _ in REFUSALS]
    done = subprocess.run([sys.executable, "-c", HOST, where, isolation, json.dumps(names), str(tmp_path)],
                          input=BOMBS.format(rows=ROWS), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _check(out: dict) -> None:
    assert out["good.parquet"][0] == ROWS  # the reader reads a good file
    for name, words in REFUSALS:
        message, grew = out[name]
        assert isinstance(message, str) and message.startswith(f"phenotype_file: '{name}'") and words in message, (name, message)
        assert "\n" not in message and len(message) < 600
        assert grew <= BOUND, f"{name}: the host's peak memory grew by {grew >> 20} MiB"


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs /proc/self/clear_refs to reset the peak")
def test_the_careful_reader_refuses_each_bomb_within_the_bound_in_the_hosts_own_process(tmp_path):
    _check(_host("here", tmp_path))


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs /proc/self/clear_refs to reset the peak")
@pytest.mark.skipif(os.geteuid() != 0 and not os.access("/usr/bin/bwrap", os.X_OK), reason="needs root or bubblewrap")
@pytest.mark.xdist_group("sandbox")
def test_a_session_reads_each_bomb_in_its_sandbox_and_the_host_holds(tmp_path):
    if not os.access(sandbox_isolation._BWRAP, os.X_OK) and os.environ.get("LUCA_GYM_REQUIRE_BWRAP") == "1":
        pytest.fail(f"LUCA_GYM_REQUIRE_BWRAP=1 and no bubblewrap at {sandbox_isolation._BWRAP}")
    _check(_host("sandbox", tmp_path))


def _mutated(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for at, value in edits:
        out[at % len(out)] = value
    return bytes(out)


def test_any_file_is_read_or_refused_in_one_line(tmp_path_factory):
    # what the reader itself raises for any bytes (a good file's, with bytes changed anywhere, or any text): its
    # ValueError and nothing else; what it reads holds the release's shape. (Derandomised: pyarrow aborts the
    # whole process on some footers, which the reader's checks now avoid for every one of 12,000 random
    # mutations tried; an abort the checks miss costs the sandbox's process, never the host's: below.)
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from hypothesis import HealthCheck, given, settings, strategies as st

    from luca_gym.worlds.biobank.phenotype_file import read_rows

    folder = tmp_path_factory.mktemp("fuzz")
    pq.write_table(pa.table({"participant_id": [f"P{i:06d}" for i in range(1, 9)], "value": np.arange(8.0)}),
                   folder / "good.parquet")
    good = (folder / "good.parquet").read_bytes()

    @settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(kind=st.sampled_from(["parquet", "csv"]), edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                                                    max_size=6),
           text=st.text(max_size=300))
    def check(kind, edits, text):
        data = _mutated(good, edits) if kind == "parquet" else text.encode("utf-8", "surrogatepass")
        (folder / f"file.{kind}").write_bytes(data)
        try:
            ids, values = read_rows(str(folder), f"file.{kind}", 8, 7)
        except ValueError as exc:
            message = str(exc)
            assert message.startswith(f"phenotype_file: 'file.{kind}'") or message.startswith("phenotype_file: column")\
                or message.startswith("phenotype_file: participant_id is empty") or "infinite" in message, message
            assert "\n" not in message
        else:
            assert len(ids) == len(values) <= 8 and all(isinstance(i, str) and len(i) <= 7 for i in ids)
            assert values.dtype == np.float64 and not np.isinf(values).any()

    check()


class _CrashingSandbox:
    """A sandbox whose reader process died (pyarrow aborts on some malformed footers), or ran out of memory."""
    limits = sandbox_mod.Limits(timeout_s=60.0)

    def __init__(self, output: str, status: int | None, timed_out: bool = False):
        self.answer = {"output": output, "truncated": False, "exit_status": status, "timed_out": timed_out, "limit": None}

    def run_host_code(self, code: str, output_bytes: int) -> dict:
        assert "def read_rows(" in code and "_main('/analysis', 'file.parquet', 2000, 7," in code
        return self.answer

    def memory_words(self) -> str:
        return "2 GiB for all the session's processes together"


@pytest.mark.parametrize("answer, words", [
    (("Fatal Python error: Aborted\n", -6), "could not be read in the sandbox (exit status -6)"),
    (("Traceback ...\nMemoryError\n", 1), "could not be read in the sandbox (it ran out of memory (2 GiB for all"),
    (("", None, True), "could not be read within the sandbox's 60 s"),
    (('{"ids": ["P000001"], "values": [1.0, 2.0]}\n', 0), "its rows came back malformed"),
    (('{"ids": ["P0000001"], "values": [1.0]}\n', 0), "its rows came back malformed"),  # an id over 7 characters
    (('{"error": "not ours"}\n', 0), "could not be read in the sandbox (exit status 0)"),
    (('{"ids": ["P000001"], "values": [Infinity]}\n', 0), "1 value infinite"),
    (("[" * 100_000 + "\n", 0), "could not be read in the sandbox (exit status 0)"),
])
def test_the_host_refuses_whatever_the_sandboxed_reader_gives_back_in_one_line(answer, words):
    from luca_gym.worlds.biobank.phenotype_file import read_phenotype_file

    with pytest.raises(ValueError) as refused:
        read_phenotype_file(_CrashingSandbox(*answer), "file.parquet", ROWS, 7)
    message = str(refused.value)
    assert message.startswith("phenotype_file: ") and words in message and "\n" not in message, message

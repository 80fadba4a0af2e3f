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

from luca_gym.tools import sandbox as sandbox_mod

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
from luca_gym.tools.sandbox import Limits, Sandbox
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
    if not os.access(sandbox_mod._BWRAP, os.X_OK) and os.environ.get("LUCA_GYM_REQUIRE_BWRAP") == "1":
        pytest.fail(f"LUCA_GYM_REQUIRE_BWRAP=1 and no bubblewrap at {sandbox_mod._BWRAP}")
    _check(_host("sandbox", tmp_path))

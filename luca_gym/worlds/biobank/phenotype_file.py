"""Reading the phenotype file an agent's code wrote (``submit``'s
``phenotype_file``) without trusting a byte of it: :func:`read_phenotype_file`.

A module of its own because it runs in two places. The host never decodes
the file: :func:`read_phenotype_file` sends this module's own source into
the session's sandbox as a block (uid 65534, the session's memory cap and
time limit, the seccomp filter; the working folder is not on the import
path, so the agent's files cannot stand in for a module), where
:func:`read_rows` reads the file and prints the rows as JSON; the host
takes back at most a few bytes a row and checks every one of them again. So
a file built to explode when decoded (a Parquet dictionary holding one 8 MiB
string under 100 rows, a compression bomb, thousands of columns, a CSV line
of megabytes) or to crash the decoder (pyarrow aborts its process on some
malformed footers) costs the host nothing: at worst it runs the sandbox out
of its own memory or kills the sandbox's process, and the call is refused. It therefore imports nothing of
``luca_gym``.

:func:`read_rows` is careful as well, so that such a file gets a clear
error rather than a memory error: it reads at most
:data:`MAX_PHENOTYPE_FILE` bytes; for Parquet it checks the footer (two
columns, their physical types, the rows, the row groups, the sizes
unpacked) before any page is decompressed, reads ``participant_id`` as a
dictionary and refuses an id longer than the release's longest before any
is expanded, reads a row group at a time against :data:`MAX_DECODED` bytes
held; for CSV it reads a line at a time, each at most :data:`MAX_LINE`
bytes.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import stat

import numpy as np

MAX_PHENOTYPE_FILE = 64 << 20  # bytes of a phenotype file (the paper profile's 54,000 rows take under 2 MB as CSV)
MAX_PATH = 256  # characters of a phenotype file's path
MAX_LINE = 1024  # bytes of one CSV line (an id and a number take under 40)
MAX_ROW_GROUPS = 1024  # row groups of a Parquet file (pandas and pyarrow write one per million rows)
MAX_DECODED = 256 << 20  # bytes the Parquet reader may hold decoded at once
MAX_FOOTER_STRING = 1 << 20  # bytes of one string in a Parquet footer (pandas' schema note takes a few KB)
MAX_FOOTER_ITEMS = 1 << 14  # items of one list in a Parquet footer (columns, row groups)
PHENOTYPE_COLUMNS = ("participant_id", "value")
_ID_TYPES = ("BYTE_ARRAY",)  # Parquet's physical types of the two columns
_VALUE_TYPES = ("INT32", "INT64", "FLOAT", "DOUBLE")


def read_phenotype_file(sandbox, path: str, max_rows: int, max_id_chars: int) -> tuple[list[str], np.ndarray]:
    """The participant ids and values (float64; NaN: missing) of the
    phenotype file at ``path``, relative to the sandbox's working folder,
    read inside ``sandbox`` (a :class:`~luca_gym.sandbox.Sandbox`) by
    :func:`read_rows`: a ``.parquet`` or ``.csv`` file with the columns
    ``participant_id`` (text, at most ``max_id_chars`` characters: the
    release's longest id) and ``value`` (numbers; empty or NaN: missing), at
    most ``max_rows`` rows and :data:`MAX_PHENOTYPE_FILE` bytes.
    ValueError (``phenotype_file: ...``) says what is wrong and what is
    allowed; it changes nothing (the sandbox runs no code of the agent's)."""
    from luca_gym.sandbox import WORKDIR

    shown = path[:MAX_PATH]
    relative_parts(path, WORKDIR)  # refused here at once: nothing to run
    with open(__file__, encoding="utf-8") as f:
        source = f.read()
    code = f"{source}\n_main({WORKDIR!r}, {path!r}, {max_rows!r}, {max_id_chars!r}, {MAX_PHENOTYPE_FILE!r})\n"
    row_bytes = 4 * max_id_chars + 40  # an id's JSON (escaped: at most 4 bytes a character... and quotes) and a number's
    answer = sandbox.run_host_code(code, output_bytes=max_rows * row_bytes + 65536)
    if answer["timed_out"]:
        raise ValueError(f"phenotype_file: {shown!r} could not be read within the sandbox's "
                         f"{sandbox.limits.timeout_s:g} s; write a plain file of participant_id and value")
    lines = answer["output"].rstrip("\n").rsplit("\n", 1)
    try:
        read = json.loads(lines[-1]) if answer["exit_status"] == 0 and not answer["truncated"] else None
    except (ValueError, RecursionError):
        read = None
    if isinstance(read, dict) and isinstance(read.get("error"), str) and read["error"].startswith("phenotype_file: "):
        raise ValueError(read["error"][:1000])
    if not isinstance(read, dict) or set(read) != {"ids", "values"}:
        memory = "MemoryError" in answer["output"][-2000:] or answer["exit_status"] in (-9, 137)
        why = f"it ran out of memory ({sandbox.memory_words()})" if memory else f"exit status {answer['exit_status']}"
        raise ValueError(f"phenotype_file: {shown!r} could not be read in the sandbox ({why}); write a plain file of "
                         "participant_id and value, e.g. with pandas' to_parquet or to_csv")
    ids, values = read["ids"], read["values"]
    # what came back is checked as if the agent had written it (it wrote the file it came from)
    if not (isinstance(ids, list) and isinstance(values, list) and len(ids) == len(values) <= max_rows
            and all(isinstance(i, str) and len(i) <= max_id_chars for i in ids)
            and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values)):
        raise ValueError(f"phenotype_file: {shown!r} could not be read in the sandbox (its rows came back malformed)")
    values = np.array([math.nan if v is None else v for v in values], np.float64)
    _check_finite(ids, values)
    return ids, values


def _main(folder: str, path: str, max_rows: int, max_id_chars: int, max_bytes: int) -> None:
    """In the sandbox: print the rows of the file as one JSON line, or the refusal."""
    try:
        ids, values = read_rows(folder, path, max_rows, max_id_chars, max_bytes)
    except ValueError as exc:
        print(json.dumps({"error": str(exc)}))
        return
    except MemoryError:
        raise  # the host says so
    except Exception as exc:  # whatever else a malformed file makes the readers raise
        kind = "Parquet" if path.lower().endswith(".parquet") else "CSV"
        print(json.dumps({"error": f"phenotype_file: {path[:MAX_PATH]!r} is not a readable {kind} file "
                                   f"({type(exc).__name__}: {_one_line(exc)})"}))
        return
    print(json.dumps({"ids": ids, "values": [None if math.isnan(v) else v for v in values.tolist()]}))


def read_rows(folder: str, path: str, max_rows: int, max_id_chars: int = 16,
              max_bytes: int = MAX_PHENOTYPE_FILE) -> tuple[list[str], np.ndarray]:
    """The ids and values of the phenotype file at ``path``, relative to
    ``folder``, read in this process (the sandbox's, :func:`read_phenotype_file`).

    Nothing in the folder is trusted: an absolute path, a ``..``, a symbolic
    link anywhere on the path (each folder is opened without following
    links, relative to the one before), anything but a regular file with one
    link, or a file over ``max_bytes`` is refused, as is a file that is
    missing or malformed (wrong columns or types, an id over
    ``max_id_chars`` characters, non-numeric or infinite values, more than
    ``max_rows`` rows, a CSV line over :data:`MAX_LINE` bytes, a Parquet file
    that would hold more than :data:`MAX_DECODED` bytes decoded).
    ValueError (``phenotype_file: ...``) says which and what is allowed."""
    parts = relative_parts(path, folder)
    kind = os.path.splitext(parts[-1])[1].lower()
    data = _read_inside(folder, parts, path, max_bytes)
    ids, values = (_parquet_rows if kind == ".parquet" else _csv_rows)(data, path, max_rows, max_id_chars)
    _check_finite(ids, values)
    return ids, values


def relative_parts(path: str, folder: str) -> list[str]:
    """The path's folder and file names, or ValueError for a path that is
    empty, absolute, leaves the folder (``..``), holds a NUL or names
    neither a ``.parquet`` nor a ``.csv`` file (``folder``: the working
    folder as the agent sees it, named in the error)."""
    if path.startswith("/"):
        hint = f" ({path[len(folder) + 1:][:MAX_PATH]!r})" if path.startswith(folder + "/") else ""
        raise ValueError(f"phenotype_file: {path[:MAX_PATH]!r} is an absolute path; give a path relative to the working "
                         f"folder {folder}{hint}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"phenotype_file: {path[:MAX_PATH]!r} leaves the working folder ('..' not allowed); give a path "
                         f"inside {folder}")
    if not parts or "\0" in path:
        raise ValueError(f"phenotype_file: {path[:MAX_PATH]!r} names no file; give a path relative to {folder}, "
                         "e.g. 'phenotype.parquet'")
    if os.path.splitext(parts[-1])[1].lower() not in (".parquet", ".csv"):
        raise ValueError(f"phenotype_file: {path[:MAX_PATH]!r} is neither .parquet nor .csv; write the phenotype as "
                         "one of them")
    return parts


def _one_line(exc: Exception) -> str:
    """An exception's message on one line, cut to 160 characters (a refusal is one line)."""
    return " ".join(str(exc).split())[:160]


def _plural(k: int, noun: str) -> str:
    return f"{k:,} {noun}{'' if k == 1 else 's'}"


def _check_finite(ids: list, values: np.ndarray) -> None:
    infinite = np.flatnonzero(np.isinf(values))
    if len(infinite):
        raise ValueError(f"phenotype_file: {_plural(len(infinite), 'value')} infinite (first: participant "
                         f"{str(ids[infinite[0]])[:16]!r}); give a finite number, or leave the participant out (missing)")


def _read_inside(folder: str, parts: list[str], path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file ``folder/parts...``, opened one name at
    a time without following a symbolic link (so nothing resolves outside
    ``folder``, whatever the agent's code made of it), at most ``max_bytes``."""
    shown = path[:MAX_PATH]
    linked = ValueError(f"phenotype_file: {shown!r} is or passes through a symbolic link, which is not allowed; write the "
                        f"file itself inside {folder}")
    directory = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(folder, directory)
    try:
        try:
            for i, part in enumerate(parts):
                if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise linked
                if i < len(parts) - 1:
                    inner = os.open(part, directory, dir_fd=fd)
                    os.close(fd)
                    fd = inner
            file = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except OSError as exc:  # O_NOFOLLOW: a link made between the check and the open is refused too (ELOOP, ENOTDIR)
            if exc.errno == errno.ENOENT:
                raise ValueError(f"phenotype_file: {shown!r} not found in the working folder {folder}; write it there "
                                 "first, with the python tool") from None
            if exc.errno == errno.ELOOP:
                raise linked from None
            if exc.errno == errno.ENOTDIR:
                raise ValueError(f"phenotype_file: {shown!r}: a part of the path is not a folder") from None
            raise ValueError(f"phenotype_file: {shown!r} cannot be opened ({os.strerror(exc.errno or 0)})") from None
    finally:
        os.close(fd)
    try:
        info = os.fstat(file)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            what = "has other hard links" if stat.S_ISREG(info.st_mode) else "is not a regular file"
            raise ValueError(f"phenotype_file: {shown!r} {what}; write the phenotype as a file of its own")
        if info.st_size > max_bytes:
            raise ValueError(f"phenotype_file: {shown!r} holds {info.st_size:,} bytes; at most {max_bytes:,}")
        with os.fdopen(os.dup(file), "rb") as f:
            data = f.read(max_bytes + 1)
    finally:
        os.close(file)
    if len(data) > max_bytes:  # it grew after the check
        raise ValueError(f"phenotype_file: {shown!r} holds over {max_bytes:,} bytes; at most {max_bytes:,}")
    return data


def _check_columns(columns: list, path: str) -> None:
    if len(columns) != len(PHENOTYPE_COLUMNS) or sorted(map(str, columns)) != sorted(PHENOTYPE_COLUMNS):
        raise ValueError(f"phenotype_file: {path[:MAX_PATH]!r} has {'the columns' if len(columns) <= 8 else f'{len(columns):,} columns, first'} "
                         f"{[str(c)[:32] for c in columns[:8]]}; it needs exactly participant_id and value (pandas: write "
                         "it with index=False)")


def _too_many_rows(rows: int, path: str, max_rows: int) -> ValueError:
    return ValueError(f"phenotype_file: {path[:MAX_PATH]!r} has {rows:,} rows or more; at most {max_rows:,}, one a participant")


def _too_long(longest: int, path: str, max_id_chars: int) -> ValueError:
    return ValueError(f"phenotype_file: {path[:MAX_PATH]!r} holds a participant_id of {longest:,} characters; the "
                      f"release's ids have at most {max_id_chars} (such as 'P000001')")


def _parquet_rows(data: bytes, path: str, max_rows: int, max_id_chars: int) -> tuple[list[str], np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    shown = path[:MAX_PATH]
    try:
        footer = {"thrift_string_size_limit": MAX_FOOTER_STRING, "thrift_container_size_limit": MAX_FOOTER_ITEMS}
        parquet = pq.ParquetFile(pa.BufferReader(data), **footer)
        meta = parquet.metadata
        # checked before anything is decompressed: a small file may unpack to a large table
        _check_columns([parquet.schema.column(c).name for c in range(meta.num_columns)], path)
        # participant_id as a dictionary: a dictionary page's values are checked before any is repeated across rows
        parquet = pq.ParquetFile(pa.BufferReader(data), read_dictionary=["participant_id"], **footer)
        if meta.num_rows > max_rows:
            raise _too_many_rows(meta.num_rows, path, max_rows)
        if meta.num_row_groups > MAX_ROW_GROUPS:
            raise ValueError(f"phenotype_file: {shown!r} has {meta.num_row_groups:,} row groups; at most {MAX_ROW_GROUPS:,}")
        groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
        if any(group.num_columns != len(PHENOTYPE_COLUMNS) for group in groups):  # pyarrow aborts past a group's columns
            raise ValueError(f"phenotype_file: {shown!r} is not a readable Parquet file (a row group does not hold both "
                             "columns)")
        unpacked = sum(group.total_byte_size for group in groups)  # uncompressed (a column's own size may be absent)
        if unpacked > MAX_PHENOTYPE_FILE:
            raise ValueError(f"phenotype_file: {shown!r} unpacks to {unpacked:,} bytes; at most {MAX_PHENOTYPE_FILE:,}")
        schema = parquet.schema_arrow
        text = schema.field("participant_id").type
        text = text.value_type if pa.types.is_dictionary(text) else text
        physical = {parquet.schema.column(c).name: parquet.schema.column(c).physical_type for c in range(meta.num_columns)}
        if not (pa.types.is_string(text) or pa.types.is_large_string(text)) or physical["participant_id"] not in _ID_TYPES:
            raise ValueError(f"phenotype_file: column participant_id is {text}; it needs text ids such as 'P000001'")
        number = schema.field("value").type
        if not (pa.types.is_integer(number) or pa.types.is_floating(number)) or physical["value"] not in _VALUE_TYPES:
            raise ValueError(f"phenotype_file: column value is {number}; it needs numbers (integers or floats; "
                             "null: missing)")
        ids, values, rows = [], [], 0
        for g in range(meta.num_row_groups):
            group = parquet.read_row_group(g, columns=list(PHENOTYPE_COLUMNS))
            rows += group.num_rows
            if rows > max_rows:  # the footer said fewer
                raise _too_many_rows(rows, path, max_rows)
            for chunk in group.column("participant_id").chunks:
                held = chunk.dictionary if pa.types.is_dictionary(chunk.type) else chunk
                longest = pc.max(pc.utf8_length(held)).as_py() if len(held) else 0
                if longest is not None and longest > max_id_chars:
                    raise _too_long(longest, path, max_id_chars)
            if pa.total_allocated_bytes() > MAX_DECODED:
                raise ValueError(f"phenotype_file: {shown!r} holds over {MAX_DECODED:,} bytes decoded; at most "
                                 f"{MAX_DECODED:,}")
            ids += group.column("participant_id").cast(text).to_pylist()  # now at most rows x max_id_chars
            values.append(group.column("value").cast(pa.float64(), safe=False).to_numpy())
        if None in ids:
            raise ValueError(f"phenotype_file: participant_id is empty in row {ids.index(None) + 1}; every row needs its id")
    except UnicodeDecodeError:
        raise ValueError(f"phenotype_file: {shown!r}: participant_id holds bytes that are not UTF-8 text") from None
    except (pa.ArrowException, OSError) as exc:  # ArrowInvalid is a ValueError too: caught here first; a footer too big: OSError
        raise ValueError(f"phenotype_file: {shown!r} is not a readable Parquet file ({_one_line(exc)})") from None
    return ids, np.concatenate(values) if values else np.zeros(0)


def _lines(data: bytes, path: str):
    """The CSV's lines, decoded, each refused past :data:`MAX_LINE` bytes (before it is decoded)."""
    stream, number = io.BytesIO(data), 0
    while raw := stream.readline(MAX_LINE + 1):
        number += 1
        if len(raw) > MAX_LINE and not raw.endswith(b"\n") or len(raw.rstrip(b"\r\n")) > MAX_LINE:
            raise ValueError(f"phenotype_file: {path[:MAX_PATH]!r} line {number} is longer than {MAX_LINE:,} bytes; a line "
                             "holds one id and one number")
        try:
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"phenotype_file: {path[:MAX_PATH]!r} is not UTF-8 text (line {number}); write the CSV as "
                             "UTF-8") from None


def _csv_rows(data: bytes, path: str, max_rows: int, max_id_chars: int) -> tuple[list[str], np.ndarray]:
    shown = path[:MAX_PATH]
    reader = csv.reader(_lines(data, path))
    try:
        header = next(reader, [])
        _check_columns(header, path)
        at = header.index("participant_id")
        ids, values = [], []
        for line in reader:
            if not line:
                continue
            if len(ids) >= max_rows:
                raise _too_many_rows(len(ids) + 1, path, max_rows)
            if len(line) != 2:
                raise ValueError(f"phenotype_file: {shown!r} line {reader.line_num} has {len(line)} fields; it needs 2 "
                                 "(participant_id,value)")
            value, name = line[1 - at].strip(), line[at].strip()
            if len(name) > max_id_chars:
                raise _too_long(len(name), path, max_id_chars)
            try:
                values.append(float(value) if value else math.nan)
            except ValueError:
                raise ValueError(f"phenotype_file: {shown!r} line {reader.line_num}: value {value[:32]!r} is not a number "
                                 "(leave it empty for a missing value)") from None
            ids.append(name)
    except csv.Error as exc:
        raise ValueError(f"phenotype_file: {shown!r} is not a readable CSV file (line {reader.line_num}: {exc})") from None
    return ids, np.array(values, np.float64)

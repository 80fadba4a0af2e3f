"""What a session's code may use: :class:`Limits` (per block and per
session, checked on construction), and the words and parsers around it
(:func:`size_words`, :func:`parse_size`, :func:`parse_seconds`, and
:func:`sandbox_limits`, which ``luca-gym eval/mcp --sandbox-memory 8G
--sandbox-time 60`` go through).

A module of its own because it is plain data and validation, with no host
effect: the command line, the tool session and the docs read the limits
without starting a sandbox. How each limit is held on a host (cgroups,
rlimits, a mounted working folder) is :mod:`luca_gym.sandbox.cgroups`,
:mod:`luca_gym.sandbox.mounts` and :mod:`luca_gym.sandbox.isolation`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

MiB, GiB = 1 << 20, 1 << 30
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": MiB, "g": GiB, "t": 1 << 40}
# (field, lowest, highest, unit) of every limit; those of _MAY_BE_NONE may also be None
_RANGES = (("timeout_s", 0.1, 86_400, "seconds"), ("cpu_s", 1, 172_800, "seconds"),
           ("memory_bytes", 64 * MiB, 1 << 40, "bytes"), ("session_memory_bytes", 64 * MiB, 1 << 40, "bytes"),
           ("session_processes", 8, 4096, "processes"), ("tmp_bytes", MiB, 1 << 40, "bytes"),
           ("workdir_bytes", 16 * MiB, 1 << 40, "bytes"), ("file_bytes", MiB, 1 << 40, "bytes"),
           ("output_chars", 100, 10_000_000, "characters"))
_MAY_BE_NONE = ("cpu_s", "memory_bytes")


def size_words(n: float) -> str:
    """A byte count in words: ``2 GiB``, ``256 MiB``, ``1.5 GiB``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"


def _check_range(name: str, value, given: str | None = None, shown=None) -> None:
    """ValueError unless field ``name`` may be ``value``: it names the field (or ``given``, the
    option it came from, showing ``shown``), the value and the range allowed."""
    low, high, unit = next(r[1:] for r in _RANGES if r[0] == name)
    whole = name != "timeout_s"
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or not low <= value <= high:
        if unit == "bytes":
            allowed = f"{'a size' if given else 'an integer of bytes'} from {size_words(low)} to {size_words(high)}"
        else:
            allowed = f"{'an integer' if whole else 'a number'} from {low:,} to {high:,} {unit}"
        none = " (or None)" if name in _MAY_BE_NONE and not given else ""
        what = repr(value) if given is None else f"{shown!r}" + (f" ({size_words(value)})" if unit == "bytes" else "")
        raise ValueError(f"{given or name}: {what} not allowed; {allowed}{none}")


@dataclass(frozen=True)
class Limits:
    """What a session's code may use, per block and per session (what holds
    on a host: :attr:`Sandbox.enforced`).

    Per block (one call of the tool):
        timeout_s: wall-clock seconds, then the block's whole pid namespace is killed (60).
        cpu_s: CPU seconds of each process (RLIMIT_CPU); None: twice ``timeout_s``.
        tmp_bytes: the block's ``/tmp`` (a tmpfs of this size; 256 MiB).
        file_bytes: the largest file a block may write (RLIMIT_FSIZE; 256 MiB).
        output_chars: the output shown (stdout and stderr together); the rest is counted.

    Per session (every block's processes together):
        session_memory_bytes: memory of all the session's processes at once, their ``/tmp`` files
            included (a memory cgroup; 2 GiB). ``luca-gym --sandbox-memory`` sets it.
        memory_bytes: address space of each process (RLIMIT_AS); None: ``session_memory_bytes``
            (a larger allocation fails at once). Where no memory cgroup holds, the only memory limit.
        session_processes: processes and threads of the session at once (a pids cgroup; 128); where
            none holds, RLIMIT_NPROC of uid 65534, shared by every session of the host.
        workdir_bytes: the working folder, kept between blocks (a filesystem of this size; 1 GiB).

    ValueError names a field, its value and the range allowed."""

    timeout_s: float = 60.0
    cpu_s: int | None = None
    session_memory_bytes: int = 2 * GiB
    memory_bytes: int | None = None
    session_processes: int = 128
    tmp_bytes: int = 256 * MiB
    workdir_bytes: int = GiB
    file_bytes: int = 256 * MiB
    output_chars: int = 20_000

    def __post_init__(self):
        for name, *_ in _RANGES:
            if not (getattr(self, name) is None and name in _MAY_BE_NONE):
                _check_range(name, getattr(self, name))

    @property
    def process_cpu_s(self) -> int:
        """Each process's CPU seconds: ``cpu_s``, or twice ``timeout_s``."""
        return self.cpu_s if self.cpu_s is not None else max(1, math.ceil(2 * self.timeout_s))

    @property
    def process_memory_bytes(self) -> int:
        """Each process's address space: ``memory_bytes``, or ``session_memory_bytes``."""
        return self.memory_bytes if self.memory_bytes is not None else self.session_memory_bytes

    def memory_words(self, enforced: dict | None = None) -> str:
        """The memory limit that holds, in words (``enforced``: :attr:`Sandbox.enforced`; None: all hold)."""
        if enforced is None or enforced.get("session_memory"):
            return (f"{size_words(self.session_memory_bytes)} for all the session's processes together, their /tmp "
                    f"files included, and {size_words(self.process_memory_bytes)} for any one process")
        return (f"{size_words(self.process_memory_bytes)} per process; this host offers no memory cgroup, so the "
                f"session's processes together are not capped")

    def describe(self, enforced: dict | None = None) -> str:
        """The limits in words (a tool's description states them); ``enforced``:
        what holds on this host (:attr:`Sandbox.enforced`), None: every limit."""
        holds = (lambda key: True) if enforced is None else (lambda key: bool(enforced.get(key)))
        processes = (f"{self.session_processes} processes and threads at once" if holds("session_processes") else
                     f"{self.session_processes} processes of the sandbox's user, shared with every session on this "
                     f"host (no pids cgroup here)")
        workdir = (f"the working folder up to {size_words(self.workdir_bytes)}" if holds("workdir") else
                   "the working folder without a quota (none can be mounted here)")
        return (f"per block {self.timeout_s:g} s wall clock, {self.process_cpu_s} s CPU per process, /tmp up to "
                f"{size_words(self.tmp_bytes)}, files up to {size_words(self.file_bytes)}, output up to "
                f"{self.output_chars:,} characters; per session: memory {self.memory_words(enforced)}; {processes}; "
                f"{workdir}")


def parse_size(value, name: str = "size") -> int:
    """Bytes of ``value``: an integer, or text such as ``512M``, ``2G``,
    ``8G``, ``1.5GiB`` or ``1048576`` (K, M, G, T: powers of 1024; B, iB
    optional). ValueError names ``name``, the value and the forms allowed."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text:
        for suffix in ("ib", "b"):
            if text.endswith(suffix) and len(text) > len(suffix):
                text = text[:-len(suffix)]
                break
        unit = text[-1] if text[-1] in _SIZE_UNITS else ""
        try:
            number = float(text[:len(text) - len(unit)])
        except ValueError:
            number = float("nan")
        if math.isfinite(number) and number >= 0:
            return int(number * _SIZE_UNITS[unit])
    raise ValueError(f"{name}: {value!r} not allowed; a size such as 512M, 2G or 8G (K, M, G, T: powers of 1024), "
                     "or an integer of bytes")


def parse_seconds(value, name: str = "seconds") -> float:
    """Seconds of ``value``: a number, or text such as ``60`` or ``90s``.
    ValueError names ``name``, the value and what is allowed."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower().removesuffix("s")
        try:
            seconds = float(text)
        except ValueError:
            seconds = float("nan")
        if math.isfinite(seconds):
            return seconds
    raise ValueError(f"{name}: {value!r} not allowed; seconds, a number such as 60 or 90s")


def sandbox_limits(limits: Limits | None = None, *, sandbox_memory=None, sandbox_time=None) -> Limits | None:
    """``limits`` (default :class:`Limits`) with the session's memory
    (``sandbox_memory``: a size, :func:`parse_size`) and each block's wall
    clock (``sandbox_time``: seconds) set where given; None where nothing is.
    ValueError names ``limits``, ``sandbox_memory`` or ``sandbox_time``."""
    if limits is not None and not isinstance(limits, Limits):
        raise ValueError(f"limits: {type(limits).__name__} not allowed; a Limits or None")
    if sandbox_memory is None and sandbox_time is None:
        return limits
    changes = {}
    if sandbox_memory is not None:
        changes["session_memory_bytes"] = parse_size(sandbox_memory, "sandbox_memory")
        _check_range("session_memory_bytes", changes["session_memory_bytes"], "sandbox_memory", sandbox_memory)
    if sandbox_time is not None:
        changes["timeout_s"] = parse_seconds(sandbox_time, "sandbox_time")
        _check_range("timeout_s", changes["timeout_s"], "sandbox_time", sandbox_time)
    return replace(limits or Limits(), **changes)


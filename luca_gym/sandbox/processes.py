"""Running one block: launch its command (:func:`_run_block`, the command
from :mod:`luca_gym.sandbox.isolation`), serve its pipes from the calling
thread (:class:`_Pipes`: the code on stdin, the output kept up to a cap),
and at its end kill its process group (:func:`_kill`) and every process in
the session's cgroup, reap the launcher (:func:`_reap`), and say which
limit, if any, stopped it.

A module of its own because it is the one place a process of the sandbox
is started, waited for and killed: the order of the end (kill, kill the
cgroup, reap, then read the rest) is what keeps a surviving process from
holding a pipe or outliving its block, and it is written once, here.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from typing import TYPE_CHECKING

from luca_gym.sandbox.isolation import _command, _limited
from luca_gym.sandbox.limits import Limits
from luca_gym.sandbox.release import _signals_to_the_main_thread

if TYPE_CHECKING:
    from luca_gym.sandbox.session import Sandbox


def _run_block(sandbox: Sandbox, code: str, limits: Limits, agent: bool = True, output_bytes: int | None = None) -> dict:
    """Run one block of ``code`` in ``sandbox`` under ``limits`` (:meth:`~luca_gym.sandbox.Sandbox.run`'s answer;
    ``agent`` and ``output_bytes``: :meth:`~luca_gym.sandbox.Sandbox.run_host_code`'s), and end everything it
    started, the session's whole cgroup, before its output is read to the end."""
    oom_kills = sandbox._cgroup.oom_kills()
    cap = 4 * limits.output_chars + 4 if output_bytes is None else output_bytes  # bytes kept (UTF-8: 4 a character)
    program = os.open(sandbox._seccomp, os.O_RDONLY | os.O_CLOEXEC) if sandbox.isolation == "bwrap" else None
    try:
        process = subprocess.Popen(_limited(sandbox, _command(sandbox, program, agent), limits), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                   close_fds=True, pass_fds=() if program is None else (program,), cwd="/",
                                   env={"PATH": "/usr/bin:/bin"})  # its own process group: a timeout kills it whole
    finally:
        if program is not None:
            os.close(program)
    pipes = _Pipes(process, code.encode("utf-8", "surrogatepass"), cap)
    try:
        with _signals_to_the_main_thread():
            timed_out = not pipes.exchange(time.monotonic() + limits.timeout_s)
    finally:
        # Every process of the session dies before the pipes are touched again, whatever a block did to
        # its pid namespace; only then is the rest of the output read (to its end, or for a moment).
        _kill(process)
        sandbox._cgroup.kill()
        _reap(process)
        pipes.drain(time.monotonic() + 2.0)
        pipes.close()
    text = pipes.kept.decode("utf-8", "replace")
    if output_bytes is not None:
        return {"output": text, "truncated": pipes.dropped > 0, "exit_status": None if timed_out else process.returncode,
                "timed_out": timed_out, "limit": "time" if timed_out else None}
    truncated = pipes.dropped > 0 or len(text) > limits.output_chars
    if truncated:
        text = text[:limits.output_chars] + (f"\n[output truncated to {limits.output_chars:,} characters; "
                                             f"{len(pipes.kept) + pipes.dropped:,} bytes in all]")
    status = process.returncode
    signalled = 0 if status is None else -status if status < 0 else status - 128 if status > 128 else 0
    limit = ("time" if timed_out else "memory" if sandbox._cgroup.oom_kills() > oom_kills  # the cgroup killed one
             else "cpu" if signalled in (signal.SIGXCPU, signal.SIGKILL)
             else "memory" if "MemoryError" in text[-2000:] else None)
    return {"output": text, "truncated": truncated, "exit_status": None if timed_out else status, "timed_out": timed_out,
            "limit": limit}


class _Pipes:
    """A block's stdin (``data``, written as the block reads it) and its stdout
    (kept up to ``cap`` bytes, the rest counted in :attr:`dropped`), served
    from the calling thread with non-blocking reads: no reader thread can be
    left blocked in a read that a surviving process keeps open."""

    def __init__(self, process: subprocess.Popen, data: bytes, cap: int):
        self.process, self.cap = process, cap
        self.kept, self.dropped, self.eof = bytearray(), 0, False
        self._data = memoryview(data)
        self._out, self._in = process.stdout.fileno(), process.stdin.fileno()
        os.set_blocking(self._out, False)
        os.set_blocking(self._in, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out, selectors.EVENT_READ)
        if self._data:
            self._selector.register(self._in, selectors.EVENT_WRITE)
        else:
            self._close_stdin()

    def exchange(self, deadline: float) -> bool:
        """Serve the pipes until the block has exited and its output ended (True), or ``deadline`` (False).
        A block whose first process exited while another still holds the output gets a second's grace."""
        exited = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                return False
            if self.process.poll() is not None:
                if self.eof:
                    return True
                exited = exited or now
                if now - exited > 1.0:
                    return True
            elif self.eof:
                try:
                    self.process.wait(timeout=deadline - now)
                except subprocess.TimeoutExpired:
                    return False
                return True
            self._serve(min(deadline - now, 0.1))

    def drain(self, deadline: float) -> None:
        """Read what is left of the output, to its end or ``deadline`` (the writers are dead by now)."""
        if self._in is not None:
            self._close_stdin()
        while not self.eof and time.monotonic() < deadline:
            self._serve(max(0.0, min(deadline - time.monotonic(), 0.1)))

    def _serve(self, timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            if key.fd == self._out:
                try:
                    chunk = os.read(self._out, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    self.eof = True
                    self._selector.unregister(self._out)
                    continue
                room = max(self.cap - len(self.kept), 0)
                self.kept.extend(chunk[:room])
                self.dropped += max(len(chunk) - room, 0)
            else:
                try:
                    written = os.write(self._in, self._data[:65536])
                except BlockingIOError:
                    continue
                except OSError:  # the block stopped reading (exited, or closed its stdin)
                    written = len(self._data)
                self._data = self._data[written:]
                if not self._data:
                    self._close_stdin()

    def _close_stdin(self) -> None:
        if self._in in self._selector.get_map():
            self._selector.unregister(self._in)
        self.process.stdin.close()
        self._in = None

    def close(self) -> None:
        """Close both pipes (no other thread reads them)."""
        if self._in is not None:
            self._close_stdin()
        self._selector.close()
        self.process.stdout.close()


def _kill(process: subprocess.Popen) -> None:
    """Kill the block's process group (the launcher and the namespace's pid 1: with it the whole pid namespace;
    the group is still ours: its leader is not reaped yet)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _reap(process: subprocess.Popen) -> None:
    """Wait for the killed launcher (a process in the kernel's hands a moment longer is left to the next call)."""
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass

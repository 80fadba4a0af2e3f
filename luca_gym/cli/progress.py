"""Progress on stderr: a sweep's (:class:`Progress`, what ``eval`` shows as
its sessions run: a bar on a terminal, a line every few seconds elsewhere)
and a training run's (:class:`TrainProgress`, ``train``: a line per update or
epoch), each quiet with ``--quiet`` and never a failure when stderr is gone."""

from __future__ import annotations

import sys
import threading
import time

PROGRESS_EVERY_S = 5.0  # off a terminal: a line at least this often while a sweep works


def _duration(seconds: float) -> str:
    """``41 s``, ``3 min 05 s``, ``1 h 02 min``."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"


def spec_label(spec) -> str:
    """A session in a few words when its world's CLI hook has no
    ``progress_label``: its agent, world, the settings that differ from the
    world's defaults, and its seed."""
    from dataclasses import MISSING, fields

    from luca_gym import worlds
    from luca_gym.protocol import load

    defaults = {f.name: f.default for f in fields(load(worlds.get(spec.world).config)) if f.default is not MISSING}
    settings = " ".join(f"{k}={v}" for k, v in spec.settings if k not in defaults or defaults[k] != v)
    return f"{spec.agent} {spec.world}{' ' + settings if settings else ''} seed {spec.seed}"


class Progress:
    """A sweep's progress on stderr (the ``progress`` of
    :func:`luca_gym.harness.sweep`): ``progress(i, total, spec)`` as session
    ``spec`` starts with ``i`` of ``total`` done (``spec`` None: all done),
    :meth:`step` as the running session makes its ``count``-th move (a
    policy's call, a tool agent's turn: the bar moves within a session), :meth:`close` when the sweep stops.

    On a terminal: a tqdm bar (count, rate, ETA, the session running and its
    move, redrawn at most five times a second). Elsewhere (a pipe, ``| tee``,
    a CI log): one line when the sweep starts, one at least every ``every``
    seconds while it works (a timer, so a session that compiles or waits on a
    model still shows), and one at the end, each ``eval: 12/540 sessions; ...``.
    While the first session takes longer than 3 s, both say it compiles.
    ``quiet``: nothing. ``label(spec)``: a session in a few words
    (:func:`spec_label` where None). ``stream`` and ``clock`` are for tests."""

    compile_note_after_s = 3.0

    def __init__(self, quiet: bool = False, *, label=None, stream=None, every: float = PROGRESS_EVERY_S,
                 clock=time.monotonic, heartbeat: bool = True):
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.tty = False
        self.label, self.every, self.clock, self.heartbeat = label or spec_label, every, clock, heartbeat
        self.lock = threading.RLock()
        self.bar = self.timer = None
        self.done, self.total, self.what, self.moves, self.unit = 0, 0, "", 0, "call"
        self.started = self.session_started = self.last_line = self.last_redraw = None
        self.closed = False

    def __call__(self, i: int, total: int, spec) -> None:
        if self.quiet or total == 0:
            return
        with self.lock:
            now = self.clock()
            first = self.started is None
            if first:
                self.started = now
            self.done, self.total = i, total
            if spec is None:
                self._finish(now)
                return
            self.what, self.moves, self.session_started = self.label(spec), 0, now
            if self.tty:
                self._redraw(now, force=True)
            elif first:
                self._line(now)
            if first and self.heartbeat:
                self._arm()

    def step(self, spec, count: int, unit: str = "call") -> None:
        """The running session ``spec`` made its ``count``-th move (``unit``:
        ``"call"`` for a policy's, ``"turn"`` for a tool agent's)."""
        if self.quiet or self.started is None or self.closed:
            return
        with self.lock:
            self.moves, self.unit = count, unit
            now = self.clock()
            if self.tty:
                self._redraw(now)
            elif now - self.last_line >= self.every:
                self._line(now)

    def tick(self) -> None:
        """The timer's beat: a line (off a terminal) or a redraw (on one, for
        the compiling note) where nothing was shown for ``every`` seconds."""
        with self.lock:
            if self.closed or self.started is None:
                return
            now = self.clock()
            if self.tty:
                self._redraw(now, force=True)
            elif now - self.last_line >= self.every * 0.999:
                self._line(now)

    def close(self) -> None:
        """Stop the timer and close the bar (a sweep that ended in an error or Ctrl-C)."""
        with self.lock:
            self.closed = True
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if self.bar is not None:
                self.bar.close()

    def _arm(self) -> None:
        period = min(self.every, self.compile_note_after_s) if self.tty else self.every
        self.timer = threading.Timer(period, self._beat)
        self.timer.daemon = True
        self.timer.start()

    def _beat(self) -> None:
        self.tick()
        with self.lock:
            if not self.closed:
                self._arm()

    def _running(self, now: float) -> str:
        what = self.what
        if self.moves:
            what += f", {self.unit} {self.moves}"
        if self.session_started is not None and now - self.session_started >= self.compile_note_after_s:
            what += f" ({_duration(now - self.session_started)}"
            if self.done == 0:  # the first session compiles what every later one reuses
                from luca_gym.compile_cache import cache_dir

                what += f"; compiling: first run only{', cached for next time' if cache_dir() else ''}"
            what += ")"
        return what

    def _line(self, now: float) -> None:
        self._write(f"eval: {self.done}/{self.total} sessions; {_duration(now - self.started)}; running: "
                    f"{self._running(now)}\n")
        self.last_line = now

    def _redraw(self, now: float, force: bool = False) -> None:
        if not force and self.last_redraw is not None and now - self.last_redraw < 0.2:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, unit="session", file=self.stream, dynamic_ncols=True)
        self.bar.n = self.done
        self.bar.set_postfix_str(self._running(now))
        self.last_redraw = now

    def _finish(self, now: float) -> None:
        if self.tty:
            if self.bar is not None:
                self.bar.n = self.done
                self.bar.set_postfix_str("done")
        else:
            self._write(f"eval: {self.done}/{self.total} sessions, done in {_duration(now - self.started)}\n")
        self.close()

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed: progress is not worth a failure
            pass


class TrainProgress:
    """Training progress on stderr, the same for both algorithms: one line if
    the first update takes longer than :attr:`notice_after_s` (instances
    generated and programs compiled: on a first run, up to two minutes), then a line per
    update with the rate since the last line shown (the first also sets up).
    On a terminal the line is redrawn in place; elsewhere (a log) it is
    printed after the first update, at each tenth of the run and at the end.
    ``quiet``: nothing."""

    notice_after_s = 3.0

    def __init__(self, quiet: bool = False, algo: str = "train"):
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self.last = (0, 0.0)
        self.timer = None
        if not quiet:
            from luca_gym.compile_cache import cache_dir

            where = cache_dir()
            cached = f"cached in {where} for next time" if where else "the compilation cache is off"
            note = f"{algo}: setting up: generating training instances and compiling (a first run: up to two minutes; {cached})"
            self.timer = threading.Timer(self.notice_after_s, self._write, (note + "\n",))
            self.timer.daemon = True
            self.timer.start()

    @staticmethod
    def _write(text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed: progress is not worth a failure
            pass

    def close(self) -> None:
        """Cancel the setup notice if it has not shown yet."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def __call__(self, row: dict) -> None:
        self.close()
        cloning = "epoch" in row  # behaviour cloning reports epochs, the learners updates
        update, updates = (row["epoch"], row["epochs"]) if cloning else (row["update"], row["updates"])
        tenth = update * 10 // updates != (update - 1) * 10 // updates
        if self.quiet or not (self.tty or update == 1 or tenth):
            return
        width = 30
        bar = f"[{'#' * int(width * update / updates)}{'.' * (width - int(width * update / updates))}]"
        if cloning:
            line = (f"{bar} epoch {update}/{updates} {row['wall_s']:7.1f}s  cross-entropy {row['cross_entropy']:.3f}  "
                    f"agrees with the teacher {row['accuracy']:.3f}")
        else:
            rate = (row["env_steps"] - self.last[0]) / max(row["wall_s"] - self.last[1], 1e-9)
            self.last = (row["env_steps"], row["wall_s"])
            line = (f"{bar} update {update}/{updates} {row['env_steps']:,} steps "
                    f"{row['wall_s']:7.1f}s {rate / 1e3:5.1f}k steps/s  score {row['mean_score']:.3f}")
        if self.tty:
            self._write(f"\r{line}" + ("\n" if update == updates else ""))
        else:
            self._write(line + "\n")

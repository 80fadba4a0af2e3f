"""Resumable sweeps: :func:`sweep` runs the sessions of a plan that are not
on file yet, appends each as it ends, compiles once per configuration before
going parallel, and runs tool agents concurrently (threads under an asyncio
semaphore, one writer, Ctrl-C stops cleanly)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
import time
from typing import Callable, Iterable

from luca_gym import __version__
from luca_gym import seal as seal_mod
from luca_gym.harness.agents import check_price, make_runner
from luca_gym.harness.spec import SessionSpec, expected_fields, session_key
from luca_gym.harness.results import SESSIONS_FILE, append_record, describe_key, trim_unfinished, folder_lock, read_results
from luca_gym.harness.runner import open_tool_session, python_config, run_session, run_tool_session
from luca_gym.harness.spec import is_tool_agent
from luca_gym.protocol import POLICY, TOOL_AGENT, load, runner_kind
from luca_gym.tools.session import tool_options


def sweep(
    specs: Iterable[SessionSpec],
    out_dir: str,
    policy_factory: Callable[[str], object] | None = None,
    progress: Callable[[int, int, SessionSpec], None] | None = None,
    *,
    sealed=None,
    base_url: str | None = None,
    concurrency: int = 1,
    retries: int | None = None,
    backoff: float | None = None,
    price=None,
    log: Callable[[str], None] | None = None,
    python: bool = False,
    analysis_tools: bool = False,
    request: dict | None = None,
) -> str:
    """Run every session of ``specs`` not yet in ``out_dir``, appending each
    record as it ends. Returns the results file's path.

    ``policy_factory(agent)`` makes the runner of each session (default: the
    harness's :func:`~luca_gym.harness.agents.make_runner` for the session's
    world).

    ``request``: the model agents' request settings (``max_turns``, and what
    their runners send: ``max_tokens``, ``temperature``...), recorded in
    their lines and compared, like the base URL, when a sweep resumes;
    ``max_turns`` caps every tool agent's turns
    (:func:`~luca_gym.harness.runner.run_tool_session`).

    ``sealed`` (:mod:`luca_gym.seal`) runs sealed organisms; ``base_url`` is
    recorded for ``openai:`` agents (pass the one their runner uses). The
    folder is locked for the whole sweep; a line already there from another
    configuration (build, seal, model server, budget) is refused with its file
    and line, never mixed in or counted as done.

    Tool-calling (LLM) agents: a failed provider call is retried ``retries``
    times with exponential ``backoff`` (:func:`~luca_gym.llm.loop.run_agent`),
    and ``price`` ((input, output) USD per million tokens) gives each record its
    ``cost_usd``. ``concurrency`` K > 1 runs up to K of their sessions at once
    (:func:`_run_concurrently`); baseline and learned policies run one at a
    time first (their sessions are compute, not waiting, and a learned policy
    is one shared object). Records are written by this thread alone, whole
    lines in the order sessions end, so an interrupted sweep loses only the
    sessions in flight and a rerun runs exactly those left.

    A session whose provider still fails after its retries is not recorded: a
    line on file is a session its agent played to the end, so a provider's
    outage never enters the scores, and a rerun runs it again. At concurrency
    1 it stops the sweep, as does any error; at K the sweep goes on (a
    ProviderError at the end counts the unrecorded sessions) until K sessions
    in a row give up or a non-retryable error (bad key, unknown model, bad
    request: every session would fail alike) stops it. Sessions in flight then
    finish and are recorded; no new one starts.

    ``progress(i, total, spec)`` is told as each session starts, ``i`` of
    ``total`` done (``spec`` None: all done); where it has a ``step(spec,
    count, unit)`` method, that is told of each move the running session
    makes (a policy's ``act``: ``"call"``; a tool agent's turn: ``"turn"``),
    so a long session shows it is moving (:class:`luca_gym.cli.progress.Progress`).

    ``log`` (e.g. a print to stderr) is told, in one line, how many sessions
    of the plan a resumed sweep found on file and skipped.

    ``python=True`` offers every session the generic ``python`` tool
    (:func:`~luca_gym.harness.runner.run_tool_session`): refused, before
    anything runs, for a world that does not offer it, an unsealed sweep or an
    agent that is a policy rather than a tool agent (:func:`check_python`);
    its lines say ``python: true`` and a folder holds one kind or the other.
    ``analysis_tools=True`` keeps the world's structured analysis tools
    beside it (its lines say ``analysis_tools: true``)."""
    from luca_gym.llm.loop import check_retry

    specs = list(dict.fromkeys(specs))
    seal = seal_mod.make_seal(sealed)
    concurrency = check_concurrency(concurrency)
    check_retry(retries if retries is not None else 0, backoff if backoff is not None else 0)
    price = check_price(price)
    check_python(specs, python, seal, analysis_tools)
    path = os.path.join(out_dir, SESSIONS_FILE)

    step = getattr(progress, "step", None)

    def run(runner, spec, sleep=time.sleep) -> dict:
        if step is not None:
            runner = _reporting(runner, lambda count, unit: step(spec, count, unit))
        if runner_kind(runner) == POLICY:
            return run_session(runner, spec, sealed=seal)
        return run_tool_session(runner, spec, sealed=seal, base_url=base_url, retries=retries, backoff=backoff, price=price,
                                request=request,
                                sleep=sleep, python=python, analysis_tools=analysis_tools)

    with folder_lock(out_dir):
        done = set()
        if os.path.getsize(path):
            results = read_results(path, seal=seal)
            expected = {session_key(s): expected_fields(s) for s in specs}
            config = {"version": __version__, "sealed": None if seal is None else seal.fingerprint, "base_url": base_url,
                      "request": request or None,
                      **python_config(python, analysis_tools)}
            results.check_config(config, expected, agents={s.agent for s in specs})
            done = set(results.keys())
            trim_unfinished(path)
        todo = [s for s in specs if session_key(s) not in done]
        if log is not None and len(todo) < len(specs):
            skipped = len(specs) - len(todo)
            log(f"resumed: {skipped} session{'' if skipped == 1 else 's'} already in {path}, skipped")
        with open(path, "a", encoding="utf-8") as f:
            written = [0]

            def write(record: dict) -> None:
                append_record(f, record, seal)
                written[0] += 1

            def started(spec: SessionSpec) -> None:
                if progress:
                    progress(written[0], len(todo), spec)

            queued = []
            for spec in todo:
                runner = make_runner(spec.agent, world=spec.world) if policy_factory is None else policy_factory(spec.agent)
                if concurrency > 1 and runner_kind(runner) == TOOL_AGENT:
                    queued.append((spec, functools.partial(_stoppable_run, run, runner, spec)))
                    continue
                started(spec)
                write(run(runner, spec))
            if queued:
                started(queued[0][0])
                _compile_once([spec for spec, _ in queued], seal)
            outcome = _run_concurrently(queued, concurrency, write, started) if queued else ([], 0)
            if progress:
                progress(len(todo), len(todo), None)
    _raise_unrecorded(*outcome, concurrency)
    return path


class _ReportingPolicy:
    """A policy (``reset``, ``act``) that reports the count of its calls; everything else is the policy's."""

    def __init__(self, policy, report):
        self._policy, self._report, self._count = policy, report, 0

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def reset(self, *args, **kwargs):
        return self._policy.reset(*args, **kwargs)

    def act(self, *args, **kwargs):
        action = self._policy.act(*args, **kwargs)
        self._count += 1
        self._report(self._count, "call")
        return action


class _ReportingAgent:
    """A tool agent (``agent(messages, specs) -> AgentTurn``) that reports the count of its turns."""

    def __init__(self, agent, report):
        self._agent, self._report, self._count = agent, report, 0

    def __getattr__(self, name):
        return getattr(self._agent, name)

    def __call__(self, *args, **kwargs):
        turn = self._agent(*args, **kwargs)
        self._count += 1
        self._report(self._count, "turn")
        return turn


def _reporting(runner, report):
    """``runner`` telling ``report(count, unit)`` of each move it makes (a fresh count per session)."""
    return _ReportingPolicy(runner, report) if runner_kind(runner) == POLICY else _ReportingAgent(runner, report)


def check_python(specs, python, seal, analysis_tools=False) -> None:
    """ValueError, before anything runs, where ``python`` (offer the python
    tool) cannot be: not a bool, a world of ``specs`` whose tool session does
    not offer it, no seal, or an agent that is a policy (it acts in the
    world's own calls, never in code); or where ``analysis_tools``
    cannot be (:func:`~luca_gym.tools.session.check_analysis_tools`)."""
    from luca_gym import worlds

    if python is False and analysis_tools is False:
        return
    for world in dict.fromkeys(spec.world for spec in specs):
        w = worlds.get(world)
        if w.tools is None:
            raise ValueError(f"python: world {world!r} has no tool session, so no python tool")
        tool_options(load(w.tools), python=python, sealed=seal, analysis_tools=analysis_tools)  # a non-bool is refused here
    for spec in dict.fromkeys((s.world, s.agent) for s in specs):
        if not is_tool_agent(spec[1], spec[0]):
            raise ValueError(f"python: agent {spec[1]!r} is a policy (it acts in world {spec[0]!r}'s own calls, never in "
                             "code); run it without python, into another folder")


def check_concurrency(concurrency) -> int:
    """``concurrency`` an integer >= 1; ValueError naming it otherwise."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency: {concurrency!r}; allowed an integer >= 1 (sessions at once; 1: one after another)")
    return concurrency


def _compile_once(specs, seal) -> None:
    """Compile what the sessions of ``specs`` run, once per organism
    configuration, before they run side by side: JAX does not share a compile
    in progress, so K threads meeting an uncompiled program would compile it
    K times over (measured on 2 CPU cores, a cold cache, 64 sessions in 4
    configurations at concurrency 16: 18 min without this, 66 s with it, 61 s
    one at a time). Each configuration's first organism
    is opened and ended (no agent, nothing recorded); the session that follows
    reuses the organism and the compiled programs."""
    configurations = {(s.world, s.settings): s for s in reversed(specs)}
    for spec in configurations.values():
        open_tool_session(spec, seal).finish("warm-up")


class _Stopped(Exception):
    """The sweep was interrupted while this session ran: it ends, unrecorded."""


def _stoppable_run(run, runner, spec: SessionSpec, stop: threading.Event) -> dict:
    """``run(runner, spec)`` that ends (raising _Stopped) at its next provider
    call or backoff wait once ``stop`` is set."""

    def turn(messages, tools):
        if stop.is_set():
            raise _Stopped
        return runner(messages, tools)

    def sleep(seconds: float) -> None:
        if stop.wait(seconds):
            raise _Stopped

    return run(turn, spec, sleep=sleep)


def _run_concurrently(jobs, concurrency: int, write, started) -> tuple[list, int]:
    """Run ``jobs`` ([(spec, run)], ``run(stop)`` -> record) at most
    ``concurrency`` at once; ``write(record)`` as each ends and ``started(spec)``
    as each begins, both in the calling thread. Returns the sessions that gave
    up on a retryable provider error ([(spec, ProviderError)]) and how many
    were never started; raises the first other error once those in flight end.

    Whole sessions run in threads, each scheduled by asyncio under a semaphore
    of ``concurrency``: an agent is a synchronous callable and a session is
    owned by one thread from start to end (no session state crosses threads),
    while provider calls and backoff waits, nearly all of an LLM session's
    time, release the GIL. Awaiting a thread per provider call instead would
    hop a session between threads for no gain. Interrupted (Ctrl-C cancels the
    asyncio task; a record is written between awaits, so never half), no new
    session starts and those in flight end, unrecorded, at their next provider
    call or backoff wait: this returns once their calls in flight come back
    (a thread cut off inside the simulator at exit can abort the process)."""
    from luca_gym.llm.loop import ProviderError

    stop, threads = threading.Event(), []

    async def main():
        slots = asyncio.Semaphore(concurrency)
        state = {"error": None, "streak": 0, "not_started": 0}
        gave_up = []

        async def one(spec, run):
            async with slots:
                if stop.is_set() or state["error"] is not None or state["streak"] >= concurrency:
                    state["not_started"] += 1
                    return
                started(spec)
                try:
                    record = await _in_thread(functools.partial(run, stop), threads)
                except _Stopped:
                    return
                except ProviderError as exc:
                    if exc.retryable:
                        gave_up.append((spec, exc))
                        state["streak"] += 1
                    elif state["error"] is None:
                        state["error"] = exc
                    return
                except Exception as exc:  # noqa: BLE001 -- kept, and raised once the sessions in flight are recorded
                    if state["error"] is None:
                        state["error"] = exc
                    return
                state["streak"] = 0
                write(record)

        try:
            await asyncio.gather(*(one(spec, run) for spec, run in jobs))
        finally:
            stop.set()  # sessions still running (the sweep was interrupted) end at their next call
        if state["error"] is not None:
            raise state["error"]
        return gave_up, state["not_started"]

    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(main())
        # Called from a running event loop (a notebook): ours runs in a thread of its own.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(asyncio.run, main())
            try:
                return future.result()
            except BaseException:
                stop.set()  # leaving the block waits for the loop, whose sessions now end at their next call
                raise
    finally:
        stop.set()
        for thread in threads:
            thread.join()


async def _in_thread(fn, threads: list):
    """``fn()`` in a thread of its own (appended to ``threads``); its result, or its exception, here."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error) -> None:
        if future.cancelled():
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def work() -> None:
        try:
            outcome = (fn(), None)
        except BaseException as exc:  # noqa: BLE001 -- handed to the awaiting task
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: the sweep was interrupted
            loop.call_soon_threadsafe(settle, *outcome)

    thread = threading.Thread(target=work, name="luca-gym-session")
    threads.append(thread)
    thread.start()
    return await future


def _raise_unrecorded(gave_up: list, not_started: int, concurrency: int) -> None:
    """A ProviderError counting the sessions a concurrent sweep left unrecorded, if any."""
    if not gave_up:
        return
    from luca_gym.llm.loop import ProviderError

    spec, first = gave_up[0]
    stopped = (f"; the sweep stopped after {concurrency} in a row gave up, {not_started} not started" if not_started else "")
    raise ProviderError(
        f"{len(gave_up)} session(s) not recorded, their provider still failing after the retries "
        f"(first: {describe_key(session_key(spec))}: {first}){stopped}",
        retryable=True, cause=first,
    )

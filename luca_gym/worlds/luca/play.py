"""``luca-gym play``: a session at the terminal, through the agents' own dispatcher.

:class:`PlayShell` is a :class:`cmd.Cmd` read-eval-print loop over a
:class:`~luca_gym.worlds.luca.tools.ToolSession`: one verb per call of the paper
(``info``, ``experiment``, ``task``, ``predict``, ``hypothesis``, ``network``,
``diagnose``, ``rescue``, ``end``), each typed line translated by
:func:`parse_call` into the named call an agent would make and sent through
:meth:`ToolSession.call`, which checks it and runs it in the core. Nothing here
decides a rule; a refused call prints the session's own error and costs nothing.

At a terminal, readline gives line editing, history (Up, Down) and Tab
completion of verbs, gene names, signal labels, intervention types
(``GENE=BLOCK|BOOST|DAMPEN``, ``SIGNAL=ACTIVATE``), phenotype names and
malfunction types. ``help CALL`` shows a call's usage with this organism's
names. Replies print as aligned lines; with ``json_output`` each reply is one
JSON object a line instead (the call's result as an agent gets it; a line
that makes no call gives ``{"error": ..., "budget_remaining": ...}``), with no
banner and no prompt, for scripts.

The shell keeps the session's transcript as :attr:`PlayShell.messages`, in
the format of a results line's ``messages`` (:func:`luca_gym.llm.loop.run_agent`,
built by the same helpers): the banner shown (``user``), then per typed line
the line as an assistant message (``tool_calls``: the call it made, none for
a line that makes no call) and what answered it: the call's result as an
agent gets it (``tool``, JSON text), or, for a line that makes no call
(``help``, a typo), the reply printed (``user``). ``quit``, ``exit``, end of
input and empty lines are not in it. Only what the player was shown and
typed; ``luca-gym play --out`` records it with the session.
"""

from __future__ import annotations

import cmd
import json
import shlex
import sys

import numpy as np

from luca_gym.llm.loop import ToolCall, assistant_message, tool_message
from luca_gym.worlds.luca import calls
from luca_gym.worlds.luca.spec import GENE_TYPES, MALFUNCTION_TYPES, SIGNAL_TYPE
from luca_gym.worlds.luca.types import OrganismMeta
from luca_gym.worlds.luca.tools import ToolSession

# Typed verb -> the call it makes (the paper's names, luca_gym.worlds.luca.calls.CALLS).
VERBS = {
    "info": "get_organism_info",
    "experiment": "run_experiment",
    "task": "get_next_prediction_task",
    "predict": "submit_prediction",
    "hypothesis": "submit_hypothesis",
    "network": "submit_network",
    "diagnose": "submit_malfunction_hypothesis",
    "rescue": "test_rescue",
    "end": "end",
}
DIAGNOSIS_TYPES = MALFUNCTION_TYPES[1:]
# Score rows shown first at the end, the rest follow in the session's order.
_FIRST_SCORES = ("composite", "prediction", "diagnosis", "rescue", "network_f1")


def _intervention_types(meta: OrganismMeta, target: str) -> tuple[str, ...]:
    """The types a target takes: a signal ACTIVATE, a gene BLOCK, BOOST or DAMPEN."""
    return (SIGNAL_TYPE,) if target in meta.signal_labels else GENE_TYPES


def _type_hint(meta: OrganismMeta, target: str) -> str:
    options = [f"{target}={t}" for t in _intervention_types(meta, target)]
    return options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"


def _interventions(meta: OrganismMeta, verb: str, words: list[str]) -> dict:
    """``["G002=BLOCK", "quathex-K=ACTIVATE"]`` -> the call's ``interventions``;
    every target needs its type, written out (types in any case)."""
    if not words:
        raise ValueError(
            f"{verb}: give one or more interventions TARGET=TYPE; genes take {', '.join(GENE_TYPES)}, "
            f"signals take {SIGNAL_TYPE}; see help {verb}"
        )
    interventions: dict = {}
    for word in words:
        target, equals, kind = word.partition("=")
        if not equals or not kind or not target:
            name = target or "TARGET"
            raise ValueError(
                f"{verb}: {word[:40]!r} has no intervention type; write {_type_hint(meta, name)}"
                + ("" if target in meta.signal_labels else f" (a signal: {meta.signal_labels[0]}={SIGNAL_TYPE})")
            )
        if target in interventions:
            raise ValueError(f"{verb}: {target[:40]!r} is given twice; give each target once")
        interventions[target] = {"type": kind.upper()}
    return {"interventions": interventions}


def _words_end(words) -> list[str]:
    return [word + " " for word in words]


def _words(verb: str, arg: str) -> list[str]:
    try:
        return shlex.split(arg)
    except ValueError as exc:
        raise ValueError(f"{verb}: {exc}; quote text with matching quotes") from None


def _unquoted(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parse_call(meta: OrganismMeta, verb: str, arg: str) -> tuple[str, dict]:
    """One typed line (``verb`` and the text after it) -> ``(call name,
    arguments)`` for :meth:`ToolSession.call`, which checks the arguments
    against the organism. Raises ValueError, naming the verb, for text that
    makes no call."""
    if verb not in VERBS:
        raise ValueError(f"unknown call {verb[:40]!r}; the calls are {', '.join(VERBS)}; type help")
    name = VERBS[verb]
    if verb == "hypothesis":
        return name, {"text": _unquoted(arg)}
    words = _words(verb, arg)
    if verb in ("experiment", "rescue"):
        return name, _interventions(meta, verb, words)
    if verb == "predict":
        phenotypes = meta.phenotype_names
        if len(words) != len(phenotypes):
            raise ValueError(
                f"predict: give {len(phenotypes)} numbers, one per phenotype ({', '.join(phenotypes)}); got {len(words)}"
            )
        values = []
        for word in words:
            try:
                values.append(float(word))
            except ValueError:
                raise ValueError(f"predict: {word[:40]!r} is not a number; give {len(phenotypes)} numbers in 0..1") from None
        return name, {"predictions": dict(zip(phenotypes, values))}
    if verb == "network":
        edges = []
        for word in words:
            parts = word.split(":")
            if len(parts) != 3:
                raise ValueError(f"network: {word[:40]!r} is not an edge; write GENE:PHENOTYPE:+ or GENE:PHENOTYPE:-")
            edges.append({"gene": parts[0], "phenotype": parts[1], "direction": parts[2]})
        return name, {"edges": edges}
    if verb == "diagnose":
        if len(words) != 2:
            raise ValueError(f"diagnose: give TARGET and TYPE ({', '.join(DIAGNOSIS_TYPES)}), e.g. diagnose G001 LOCK_HI")
        return name, {"target_name": words[0], "malfunction_type": words[1].upper()}
    if words:
        raise ValueError(f"{verb}: takes no arguments; got {' '.join(words)[:40]!r}")
    return name, {}


# -- output ----------------------------------------------------------------------
def _number(value) -> str:
    """A value as shown: floats to 3 decimals, lists item by item."""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.3f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_number(v) for v in value)
    return "-" if value is None else str(value)


def _table(rows: list[tuple], indent: str = "  ") -> str:
    """Rows of cells -> aligned lines (columns padded to their widest cell)."""
    rows = [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    return "\n".join(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def _runs(names: tuple[str, ...], chosen: tuple[str, ...]) -> str:
    """The chosen names in runs: ``G001..G005, G007, G009..G012``."""
    wanted = set(chosen)
    runs, start = [], None
    for i, name in enumerate((*names, None)):
        if name in wanted and start is None:
            start = i
        elif name not in wanted and start is not None:
            runs.append(", ".join(names[start:i]) if i - start <= 2 else f"{names[start]}..{names[i - 1]}")
            start = None
    return ", ".join(runs)


def format_scores(meta: OrganismMeta, scores: dict) -> str:
    """The end-of-session scores as aligned lines, names for the malfunction
    (raw scores, with indices, are named by :func:`luca_gym.worlds.luca.calls.describe_scores`)."""
    shown = dict(scores)
    if not isinstance(shown.get("malfunction_type", ""), str):
        shown = calls.describe_scores(meta, shown)
    if "malfunction_target" in shown and shown["malfunction_target"] is None:
        shown["malfunction_target"] = "none"
    order = [k for k in _FIRST_SCORES if k in shown] + [k for k in shown if k not in _FIRST_SCORES]
    return "scores\n" + _table([(k, _number(shown[k])) for k in order])


# -- the shell -------------------------------------------------------------------
class PlayShell(cmd.Cmd):
    """A read-eval-print loop over one :class:`ToolSession`.

    Args:
        session: the session to play.
        stdin, stdout: text streams; given ``stdin``, lines are read from it
            without readline (tests, pipes); by default the terminal, with
            readline's editing, history and completion when it is a tty.
        json_output: print each reply as one JSON object a line, with no
            banner and no prompt.

    :meth:`run` plays until ``end`` (or the session closing), ``quit``,
    ``exit`` or end of input, and returns the exit code 0. :attr:`messages`:
    the transcript so far (the module's docstring says what it holds).
    """

    prompt = "luca> "

    def __init__(self, session: ToolSession, stdin=None, stdout=None, json_output: bool = False):
        super().__init__(stdin=stdin, stdout=stdout)
        self.session = session
        self.meta = session.meta
        self.json_output = json_output
        self.descriptions = {spec["name"]: spec["description"] for spec in session.tool_specs()}
        self.use_rawinput = stdin is None and sys.stdin.isatty()
        if json_output:
            self.prompt = ""
        self.messages: list[dict] = []  # the transcript: what the player was shown and typed
        self._line: str | None = None  # the typed line being answered, not yet in the transcript

    # -- loop ----------------------------------------------------------------------
    def run(self) -> int:
        intro = None if self.json_output else self.banner()
        if intro:
            self.messages.append({"role": "user", "content": intro})
        while True:
            try:
                self.cmdloop(intro)
                return 0
            except KeyboardInterrupt:
                # Ctrl-C drops the line being typed, as in a shell; quit leaves.
                if not self.json_output:
                    self._say("\n(interrupted: type quit to leave, or end to see the scores)")
                intro = ""

    def banner(self) -> str:
        m, info = self.meta, self.session.organism_info()
        return (
            f"LUCA {m.tier} {m.mode}{' backwards' if m.backwards else ''}: organism {info['organism_id']}, "
            f"{m.n_genes} genes, {len(m.signal_labels)} signals, phenotypes {', '.join(m.phenotype_names)}; "
            f"budget {info['budget_remaining']} of {info['budget_total']}.\n"
            "Type help, or help CALL (e.g. help experiment). Tab completes calls and names."
        )

    def preloop(self):
        if self.use_rawinput:
            try:
                import readline
            except ImportError:
                return
            if "libedit" in (readline.__doc__ or ""):  # macOS: cmd binds GNU readline's syntax only
                readline.parse_and_bind("bind ^I rl_complete")

    def onecmd(self, line):
        """Answer one typed line (its call, help or error), keeping it in the transcript."""
        self._line = line.rstrip("\r\n")
        try:
            return super().onecmd(line)
        finally:
            self._line = None

    def _said(self, reply: str) -> None:
        """The typed line that made no call, and the reply printed, into the transcript."""
        if self._line is not None:
            self.messages += [assistant_message(self._line), {"role": "user", "content": reply}]
            self._line = None

    def parseline(self, line):
        verb, arg, line = super().parseline(line)
        if verb and verb != "EOF":
            verb = verb.lower()
        return verb, arg, line

    def emptyline(self):
        return False  # cmd.Cmd would repeat the last call: an experiment would spend budget again

    def default(self, line):
        if any(ord(c) < 32 or ord(c) == 127 for c in line):
            message = (
                f"{ascii(line.strip())[:40]} is not a call (an arrow or other key sent as text: this input has no "
                "line editing); type help"
            )
        else:
            message = f"unknown call {line.split()[0][:40]!r}; the calls are {', '.join(VERBS)}; type help"
        self._error(message)

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def _error(self, message: str) -> None:
        if self.json_output:
            reply = json.dumps({"error": message, "budget_remaining": self._budget_left()})
        else:
            reply = f"error: {message}"
        self._said(reply)
        self._say(reply)

    def _budget_left(self) -> int:
        return int(self.session.obs["budget_left"])

    def _call(self, verb: str, arg: str) -> bool:
        """Make the call a typed line names; True (stop) once the session has ended."""
        try:
            name, arguments = parse_call(self.meta, verb, arg)
        except ValueError as exc:
            self._error(str(exc))
            return False
        result = self.session.call(name, arguments)
        if self._line is not None:
            call = ToolCall(name, arguments, f"call_{len(self.session.transcript) - 1}")  # its place in the call log
            self.messages += [assistant_message(self._line, [call]), tool_message(call.id, name, result)]
            self._line = None
        if self.json_output:
            self._say(json.dumps(result))
        else:
            self._say(self.format_result(verb, arguments, result))
        return self.session.ended

    # -- the calls -------------------------------------------------------------------
    def do_info(self, arg):
        """info: the organism's genes, signals, phenotypes, baseline and budget (free)."""
        return self._call("info", arg)

    def do_experiment(self, arg):
        """experiment TARGET=TYPE ...: measure the phenotypes under interventions (1 unit)."""
        return self._call("experiment", arg)

    def do_task(self, arg):
        """task: reveal the next held-out prediction task (free)."""
        return self._call("task", arg)

    def do_predict(self, arg):
        """predict V1 V2 ...: one value per phenotype under the current task (free)."""
        return self._call("predict", arg)

    def do_hypothesis(self, arg):
        """hypothesis TEXT: store a free-text hypothesis (free, not scored)."""
        return self._call("hypothesis", arg)

    def do_network(self, arg):
        """network GENE:PHENOTYPE:+|- ...: submit the edges you infer (free)."""
        return self._call("network", arg)

    def do_diagnose(self, arg):
        """diagnose TARGET TYPE: commit the malfunction, one-way (disease mode, free)."""
        return self._call("diagnose", arg)

    def do_rescue(self, arg):
        """rescue TARGET=TYPE ...: test a corrective intervention (disease mode, after diagnose, 1 unit)."""
        return self._call("rescue", arg)

    def do_end(self, arg):
        """end: end the session and see the scores (free)."""
        return self._call("end", arg)

    def do_quit(self, arg):
        """quit: leave without ending the session."""
        return True

    do_exit = do_quit

    def do_EOF(self, arg):
        if self.use_rawinput:
            self._say("")
        return True

    def do_help(self, arg):
        topic = arg.strip().lower()
        if not topic:
            text = self.overview()
        elif topic in VERBS:
            text = self.usage(topic)
        elif topic in ("help", "quit", "exit"):
            text = "help [CALL]: the calls, or one call's usage\nquit, exit: leave without ending the session"
        else:
            self._error(f"help: no call {topic[:40]!r}; the calls are {', '.join(VERBS)}")
            return False
        reply = json.dumps({"help": text}) if self.json_output else text
        self._said(reply)
        self._say(reply)
        return False

    # -- help text ------------------------------------------------------------------
    def _examples(self) -> dict:
        """Example lines for each verb, with this organism's names."""
        m, genes = self.meta, self.session.targetable_genes
        a, b = genes[min(1, len(genes) - 1)], genes[len(genes) // 2]
        signal, p = m.signal_labels[0], m.phenotype_names
        return {
            "info": ["info"],
            "experiment": [f"experiment {a}=BLOCK", f"experiment {a}=BOOST {b}=DAMPEN", f"experiment {signal}={SIGNAL_TYPE}"],
            "task": ["task"],
            "predict": ["predict " + " ".join(["0.5"] * len(p))],
            "hypothesis": [f"hypothesis {a} raises {p[0]} through {b}"],
            "network": [f"network {a}:{p[0]}:+ {b}:{p[-1]}:-"],
            "diagnose": [f"diagnose {a} LOCK_HI", f"diagnose {signal} PERSIST"],
            "rescue": [f"rescue {a}=DAMPEN", f"rescue {b}=BOOST"],
            "end": ["end"],
        }

    def _targets_line(self) -> str:
        m = self.meta
        return (
            f"genes {_runs(m.gene_names, self.session.targetable_genes)} take {', '.join(GENE_TYPES)}; "
            f"signals {', '.join(m.signal_labels)} take {SIGNAL_TYPE}"
        )

    def overview(self) -> str:
        rows = [getattr(self, f"do_{verb}").__doc__.rstrip(".").split(": ", 1) for verb in VERBS]
        rows.append(["help [CALL]", "these lines, or one call's usage and examples"])
        rows.append(["quit | exit", "leave without ending the session"])
        examples = self._examples()
        return "\n".join(
            [
                "calls (an agent's tools; only experiment and rescue cost budget):",
                _table([tuple(row) for row in rows]),
                f"  {self._targets_line()}",
                f"  e.g. {examples['experiment'][1]}  |  {examples['network'][0]}",
                "Tab completes calls, names and types; Up and Down recall earlier lines.",
            ]
        )

    def usage(self, verb: str) -> str:
        """One call's usage, its tool's description and examples with this organism's names."""
        m = self.meta
        doc = getattr(self, f"do_{verb}").__doc__
        lines = [f"{doc.split(': ', 1)[0]}    (the call {VERBS[verb]})", f"  {self.descriptions[VERBS[verb]]}"]
        if verb in ("experiment", "rescue"):
            lines.append(f"  {self._targets_line()}; every target needs its type, as TARGET=TYPE")
        elif verb == "predict":
            lines.append(f"  values in 0..1, in this order: {', '.join(m.phenotype_names)}")
        elif verb == "network":
            lines.append(
                f"  GENE one of {_runs(m.gene_names, self.session.targetable_genes)}; PHENOTYPE one of "
                f"{', '.join(m.phenotype_names)}; + raises it, - lowers it"
            )
        elif verb == "diagnose":
            lines.append(
                f"  TARGET a gene {_runs(m.gene_names, self.session.targetable_genes)} or a signal "
                f"{', '.join(m.signal_labels)}; TYPE LOCK_HI or LOCK_LO (a gene), PERSIST (a signal)"
            )
        lines += [f"  example: {e}" for e in self._examples()[verb]]
        return "\n".join(lines)

    # -- completion -------------------------------------------------------------------
    # A completion that ends a word ends with a space (Python's readline appends none).
    def completenames(self, text, *ignored):
        return [name + " " for name in super().completenames(text.lower(), *ignored) if name != "EOF"]

    def complete_help(self, text, line, begidx, endidx):
        return self._complete(line, text, endidx, lambda token, before: [] if before else _words_end([*VERBS, "quit", "exit"]))

    def _targets(self) -> list[str]:
        return [*self.session.targetable_genes, *self.meta.signal_labels]

    def _complete(self, line: str, text: str, endidx: int, choices) -> list[str]:
        """Completions of the whole word being typed (``choices(word, the
        words between the verb and it)``), cut to the part readline replaces:
        its words break at - = and : too."""
        head = line[:endidx]
        start = max(head.rfind(" "), head.rfind("\t")) + 1
        token, before = head[start:], head[:start].split()[1:]
        cut = len(token) - len(text) if token.endswith(text) else 0
        return [c[cut:] for c in choices(token, before) if c.startswith(token)]

    @staticmethod
    def _staged(token: str, sep: str, stages) -> list[str]:
        """Completions of ``A<sep>B<sep>...``: stage k's options given the
        parts before it; a sole option moves on to the next stage."""
        parts = token.split(sep)
        k = len(parts) - 1
        if k >= len(stages):
            return []
        head = "".join(part + sep for part in parts[:-1])
        options = [head + o for o in stages[k](parts[:-1]) if (head + o).startswith(token)]
        if len(options) == 1 and k + 1 < len(stages):
            return PlayShell._staged(options[0] + sep, sep, stages)
        return _words_end(options) if k + 1 == len(stages) else options

    def _complete_interventions(self, text, line, begidx, endidx):
        def choices(token, before):
            used = {word.partition("=")[0] for word in before}
            stages = (
                lambda parts: [t for t in self._targets() if t not in used],
                lambda parts: list(_intervention_types(self.meta, parts[0])),
            )
            return self._staged(token, "=", stages)

        return self._complete(line, text, endidx, choices)

    complete_experiment = _complete_interventions
    complete_rescue = _complete_interventions

    def complete_network(self, text, line, begidx, endidx):
        stages = (
            lambda parts: list(self.session.targetable_genes),
            lambda parts: list(self.meta.phenotype_names),
            lambda parts: list(calls.DIRECTIONS),
        )
        return self._complete(line, text, endidx, lambda token, before: self._staged(token, ":", stages))

    def complete_diagnose(self, text, line, begidx, endidx):
        options = (_words_end(self._targets()), _words_end(DIAGNOSIS_TYPES))
        return self._complete(line, text, endidx, lambda token, before: options[len(before)] if len(before) < 2 else [])

    def complete_hypothesis(self, text, line, begidx, endidx):
        names = _words_end([*self._targets(), *self.meta.phenotype_names])
        return self._complete(line, text, endidx, lambda token, before: names)

    # -- replies ------------------------------------------------------------------------
    def format_result(self, verb: str, arguments: dict, result: dict) -> str:
        """A call's result as aligned lines (an error as ``error: ...``)."""
        if "error" in result:
            return f"error: {result['error']}"
        budget = f"budget left {result['budget_remaining']} of {self.session.env.params.budget}"
        if verb == "info":
            lines = self._format_info(result)
        elif verb in ("experiment", "rescue"):
            lines = self._format_measurement(verb, result) + [budget]
        elif verb == "task":
            task = " + ".join(f"{item['type']} {gene}" for gene, item in result["interventions"].items())
            zeros = " ".join(["0.5"] * len(self.meta.phenotype_names))
            lines = [
                f"task {result['task_index'] + 1}: {task}",
                f"  answer with predict and one value per phenotype ({', '.join(self.meta.phenotype_names)}), e.g. predict {zeros}",
            ]
        elif verb == "predict":
            lines = ["prediction stored"]
        elif verb == "hypothesis":
            lines = ["hypothesis stored (kept with the session, not scored)"]
        elif verb == "network":
            n = len(arguments["edges"])
            lines = [f"network stored: {n} edge{'' if n == 1 else 's'} (a later network replaces it; scored at the end)"]
        elif verb == "diagnose":
            diagnosis = f"{arguments['target_name']} {arguments['malfunction_type']}"
            lines = [f"diagnosis locked (one-way): {diagnosis}; rescue is now available; the diagnosis is scored at the end"]
        else:
            lines = []
        if result.get("ended"):
            closed = "" if verb == "end" else f" ({result.get('note') or 'the session ended itself'})"
            lines += [f"session over{closed}", format_scores(self.meta, result["scores"])]
        return "\n".join(lines)

    def _format_info(self, info: dict) -> list[str]:
        m = self.meta
        aberrant = set(info.get("aberrant_phenotypes", ()))
        rows = [("phenotype", "baseline", "healthy range", "")]
        for p in m.phenotype_names:
            low, high = info["healthy_phenotype_ranges"][p]
            rows.append((p, _number(info["baseline_phenotypes"][p]), f"{low:.3f}..{high:.3f}", "aberrant" if p in aberrant else ""))
        signals = ", ".join(f"{s['label']} ({s['mode']})" for s in info["signals"])
        return [
            f"organism {info['organism_id']}: {m.tier}, {m.mode}{', backwards' if m.backwards else ''}, {m.n_genes} genes",
            f"  genes you can target: {_runs(m.gene_names, tuple(info['gene_names']))}",
            f"  signals: {signals}",
            _table(rows),
            f"budget left {info['budget_remaining']} of {info['budget_total']}"
            + (f"; calls accepted {info['calls_accepted']} of at most {info['call_limit']}" if {"call_limit", "calls_accepted"} <= set(info) else ""),
        ]

    def _format_measurement(self, verb: str, result: dict) -> list[str]:
        """Phenotype, value, change from the baseline and, in disease mode, whether it is in the healthy range."""
        baseline = dict(zip(self.meta.phenotype_names, np.asarray(self.session.obs["baseline_phenotypes"], float)))
        in_range = result.get("phenotype_in_healthy_range")
        if in_range is None and self.session.env.params.disease:
            # The core's own verdict on this very measurement (the result dict carries it for rescues only).
            in_range = dict(zip(self.meta.phenotype_names, map(bool, np.asarray(self.session.obs["last_in_range"]))))
        rows = [("phenotype", "value", "vs baseline", "")]
        for p, value in result["phenotypes"].items():
            mark = "" if in_range is None else ("in range" if in_range[p] else "out of range")
            rows.append((p, _number(value), f"{value - baseline[p]:+.3f}", mark))
        steps = result["steps"]
        lines = [_table(rows), f"converged in {steps} steps" if result["status"] == "converged" else f"not converged in {steps} steps"]
        if verb == "rescue":
            lines.append(f"restored fraction {_number(result['restored_fraction'])} of the aberrant phenotypes")
        return lines

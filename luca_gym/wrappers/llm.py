"""Language-model agents through the same environment: tools, dispatcher, loop.

:class:`ToolSession` wraps one :class:`~luca_gym.worlds.luca.session.Session` and
exposes the nine calls of the paper (appendices B and C) as tools. One
registry (:data:`TOOLS`) produces the JSON Schemas in the OpenAI, Anthropic
and MCP formats; the dispatcher parses a call's arguments once, checks them
with those same schemas and translates the call into a core action with
:func:`luca_gym.worlds.luca.calls.action_from_call`. Every rule (cost, phase, refusals,
scoring) stays in the core; nothing here re-implements one. ``luca-gym play``
and ``luca-gym mcp`` drive a :class:`ToolSession` too.

``call(name, arguments)`` never raises: a malformed or refused call returns
``{"error": ..., "budget_remaining": ...}`` and changes nothing.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import json
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from luca_gym.worlds.luca import calls, core
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca.spec import GENE_TYPES, HEALTHY_RANGE, MALFUNCTION_TYPES, SIGNAL_TYPE, check_stance, check_vocabulary
from luca_gym.worlds.luca.session import Session
from luca_gym.wrappers.schema import validate

MAX_PAYLOAD = 64 * 1024  # characters of JSON arguments
MAX_HYPOTHESIS = 20_000  # characters of one hypothesis
MAX_HYPOTHESES = 100  # hypotheses kept per session


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    # (session) -> the "properties" of the arguments object, and its required names.
    arguments: Callable[["ToolSession"], tuple[dict, list]]


def _interventions(session: "ToolSession") -> dict:
    return {
        "type": "object",
        "description": "Targets by name: a gene -> {\"type\": BLOCK|BOOST|DAMPEN}, a signal -> {\"type\": \"ACTIVATE\"}.",
        "properties": {
            **{g: {"$ref": "#/$defs/gene"} for g in session.targetable_genes},
            **{s: {"$ref": "#/$defs/signal"} for s in session.meta.signal_labels},
        },
        "additionalProperties": False,
        "minProperties": 1,
    }


def _no_arguments(session):
    return {}, []


TOOLS: tuple[Tool, ...] = (
    Tool(
        "get_organism_info",
        "Free. The organism's targetable genes, signals, phenotypes, baseline phenotypes, healthy ranges, "
        "aberrant phenotypes (disease mode), the budget and the call limit: the session accepts at most "
        "{call_limit} calls other than get_organism_info and submit_hypothesis (refused calls do not count), "
        "then ends itself.",
        _no_arguments,
    ),
    Tool(
        "run_experiment",
        "Costs 1 budget unit. Apply the interventions together and measure the steady-state phenotypes "
        "(with measurement noise). An experiment that perturbs both genes of a held-out prediction task is refused.",
        lambda s: ({"interventions": _interventions(s)}, ["interventions"]),
    ),
    Tool(
        "get_next_prediction_task",
        "Free. Reveal the next held-out two-gene prediction task (answer the current one first).",
        _no_arguments,
    ),
    Tool(
        "submit_prediction",
        "Free. Predict every phenotype's steady-state value under the current prediction task. One submission per task.",
        lambda s: (
            {
                "predictions": {
                    "type": "object",
                    "properties": {p: {"type": "number", "minimum": 0, "maximum": 1} for p in s.meta.phenotype_names},
                    "required": list(s.meta.phenotype_names),
                    "additionalProperties": False,
                }
            },
            ["predictions"],
        ),
    ),
    Tool(
        "submit_hypothesis",
        "Free. Store a free-text causal hypothesis (kept with the session, not scored).",
        lambda s: ({"text": {"type": "string", "minLength": 1, "maxLength": MAX_HYPOTHESIS}}, ["text"]),
    ),
    Tool(
        "submit_network",
        "Free. Submit the gene -> phenotype edges you infer, each with its direction (+ raises, - lowers). "
        "Scored by precision and recall at session end; a later submission replaces an earlier one. "
        "Each submission counts toward the session's limit of {call_limit} accepted calls.",
        lambda s: (
            {
                "edges": {
                    "type": "array",
                    "maxItems": len(s.targetable_genes) * len(s.meta.phenotype_names),
                    "items": {
                        "type": "object",
                        "properties": {
                            "gene": {"enum": list(s.targetable_genes)},
                            "phenotype": {"enum": list(s.meta.phenotype_names)},
                            "direction": {"enum": list(calls.DIRECTIONS)},
                        },
                        "required": ["gene", "phenotype", "direction"],
                        "additionalProperties": False,
                    },
                }
            },
            ["edges"],
        ),
    ),
    Tool(
        "submit_malfunction_hypothesis",
        "Free, disease mode only, ONE-WAY: commit your diagnosis (a gene locked high or low, or a persistently "
        "active signal). It unlocks test_rescue; its score is revealed only when the session ends.",
        lambda s: (
            {
                "target_name": {"enum": list(s.targetable_genes) + list(s.meta.signal_labels)},
                "malfunction_type": {"enum": list(MALFUNCTION_TYPES[1:])},
            },
            ["target_name", "malfunction_type"],
        ),
    ),
    Tool(
        "test_rescue",
        "Costs 1 budget unit, disease mode only, after submit_malfunction_hypothesis. Apply a corrective "
        "intervention; returns the phenotypes, which are in the healthy range, and the restored fraction of the "
        "aberrant phenotypes.",
        lambda s: ({"interventions": _interventions(s)}, ["interventions"]),
    ),
    Tool("end", "Free. End the session and reveal the scores.", _no_arguments),
)
TOOL_NAMES = tuple(t.name for t in TOOLS)
_DEFS = {
    "gene": {
        "type": "object",
        "properties": {"type": {"enum": list(GENE_TYPES)}},
        "required": ["type"],
        "additionalProperties": False,
    },
    "signal": {
        "type": "object",
        "properties": {"type": {"enum": [SIGNAL_TYPE]}},
        "required": ["type"],
        "additionalProperties": False,
    },
}


class ToolSession:
    """One LUCA session driven by named tool calls.

    Args:
        seed: the organism seed.
        tier, mode, n_genes, backwards: the organism's settings.
        vocabulary, stance: the paper's appendix E.2 ablation: gene names
            "invented" (G001...) or "real" (real human gene symbols), and the
            system prompt's stance on biological knowledge, "suppress" (the
            default) or "permit" (:func:`system_prompt`).
        env: a :class:`~luca_gym.worlds.luca.session.Session` (or a LucaEnv)
            built from these same settings, to reuse; by
            default one is built (both through :func:`luca_gym.worlds.luca.calls.open_session`).
        sealed: None (default), a secret, a :class:`luca_gym.seal.Seal` or True
            (``$LUCA_GYM_SECRET``): the organism is generated from its sealed
            seed and ``organism_id`` is opaque, so neither the public seed nor
            the names lead back to it (:mod:`luca_gym.seal`).

    Raises ValueError naming a bad setting and what is allowed.

    A refused call (malformed, or against the rules) changes nothing and
    counts toward nothing. The session accepts at most ``call_limit`` calls
    that reach the core (every call but ``get_organism_info`` and
    ``submit_hypothesis``); the last of them is carried out and then ends the
    session with ``end_reason: "call_limit"``. The prompt and the tool
    descriptions state the limit.
    """

    def __init__(
        self, seed: int = 0, *, tier="medium", mode="healthy", n_genes=20, backwards=False, env: Session | None = None,
        sealed=None, vocabulary="invented", stance="suppress",
    ):
        self.seal = seal_mod.make_seal(sealed)
        self.stance = check_stance(stance)
        self.env, self.obs = calls.open_session(seed, tier, mode, n_genes, backwards, env=env, sealed=self.seal,
                                                vocabulary=vocabulary)
        self.seed = int(seed)
        self.meta = self.env.organism.meta
        self.organism_id = f"org_{self.seed:08d}" if self.seal is None else self.seal.organism_id(self.seed)
        self.targetable_genes = tuple(g for g, t in zip(self.meta.gene_names, self.obs["targetable"]) if t)
        self.hypotheses: list[str] = []
        self.transcript: list[dict] = []
        self.ended = False
        self.truncated = False
        self.end_reason: str | None = None
        self.scores: dict | None = None
        self.total_reward = 0.0
        self._schemas = {tool.name: self._schema(tool) for tool in TOOLS}

    @property
    def call_limit(self) -> int:
        """Accepted calls (those that reach the core) after which the session ends itself."""
        return self.env.params.max_steps

    def system_prompt(self) -> str:
        """The system prompt for this session (mode, call limit, vocabulary and stance)."""
        return system_prompt(self.env.params.disease, self.call_limit, vocabulary=self.meta.vocabulary, stance=self.stance)

    def description(self, tool: "Tool") -> str:
        """A tool's description for this session (the call limit filled in)."""
        return tool.description.replace("{call_limit}", str(self.call_limit))

    # -- schemas -----------------------------------------------------------------
    def _schema(self, tool: Tool) -> dict:
        properties, required = tool.arguments(self)
        schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
        if "interventions" in properties:
            schema["$defs"] = _DEFS
        return schema

    def tool_specs(self) -> list[dict]:
        """Neutral specs: ``{"name", "description", "input_schema"}`` (copies:
        editing one cannot change what the session accepts)."""
        return [
            {"name": t.name, "description": self.description(t), "input_schema": copy.deepcopy(self._schemas[t.name])} for t in TOOLS
        ]

    def tools_openai(self) -> list[dict]:
        return to_openai_tools(self.tool_specs())

    def tools_anthropic(self) -> list[dict]:
        return to_anthropic_tools(self.tool_specs())

    def tools_mcp(self) -> list[dict]:
        return [{"name": s["name"], "description": s["description"], "inputSchema": s["input_schema"]} for s in self.tool_specs()]

    # -- dispatch ----------------------------------------------------------------
    def call(self, name: Any, arguments: Any = None) -> dict:
        """Dispatch one call. Never raises; errors come back as ``{"error": ...}``.

        The arguments are parsed and checked once; what was checked is what
        runs and what the transcript logs, in full (so :class:`ReplayAgent`
        replays it exactly); arguments that failed the check are logged
        abbreviated."""
        logged, checked = arguments, False
        try:
            try:
                args = self._checked(name, arguments)
            except ValueError as exc:
                result = self._error(str(exc))
            else:
                logged, checked = args, True
                result = self._dispatch(name, args)
        except Exception as exc:  # noqa: BLE001 -- hostile input must never escape
            result = self._error(f"internal error while handling the call ({type(exc).__name__}); the session is unchanged")
        self.transcript.append(
            {
                "call": name[:64] if isinstance(name, str) and _is_unicode(name) else f"<{type(name).__name__}>",
                "arguments": self._loggable(logged, abbreviate=not checked),
                "result": result,
                "budget_remaining": result.get("budget_remaining"),
            }
        )
        return result

    def _error(self, message: str) -> dict:
        return {"error": message, "budget_remaining": int(self.obs["budget_left"])}

    @staticmethod
    def _loggable(arguments, abbreviate: bool = True):
        """A copy of the arguments fit for the transcript (later changes by the
        caller cannot alter the log); non-JSON ones, and long ones when
        ``abbreviate`` (checked arguments are at most MAX_PAYLOAD), are abbreviated."""
        try:
            text = arguments if isinstance(arguments, str) else json.dumps(arguments, allow_nan=False)
        except (TypeError, ValueError, RecursionError, OverflowError):
            return "<not JSON-serialisable>"
        if not _is_unicode(text if isinstance(arguments, str) else json.loads(text)):
            return "<not valid Unicode>"
        if abbreviate and len(text) > 2048:
            return text[:2048] + "...<truncated>"
        return text if isinstance(arguments, str) else json.loads(text)

    def parse_arguments(self, arguments: Any) -> dict:
        """Arguments as a dict, from a dict or a JSON string. Raises ValueError."""
        if arguments is None:
            return {}
        if isinstance(arguments, str):
            if len(arguments) > MAX_PAYLOAD:
                raise ValueError(f"arguments: {len(arguments)} characters; at most {MAX_PAYLOAD}")
            try:
                parsed = json.loads(arguments, parse_constant=_reject_constant)
            except json.JSONDecodeError as exc:
                raise ValueError(f"arguments: not valid JSON ({exc.msg})") from None
            except RecursionError:
                raise ValueError("arguments: JSON nested too deeply") from None
            except ValueError as exc:
                if str(exc).startswith("arguments:"):
                    raise
                raise ValueError("arguments: not valid JSON (a number is too large)") from None
        elif isinstance(arguments, dict):
            try:
                text = json.dumps(arguments, allow_nan=False, ensure_ascii=False)
            except ValueError as exc:
                message = str(exc)
                hint = "NaN and Infinity are not allowed" if "float" in message else message[:80]
                raise ValueError(f"arguments: not JSON data ({hint})") from None
            except (TypeError, RecursionError, OverflowError) as exc:
                raise ValueError(f"arguments: not JSON data ({type(exc).__name__}: {str(exc)[:80]})") from None
            if len(text) > MAX_PAYLOAD:
                raise ValueError(f"arguments: {len(text)} characters of JSON; at most {MAX_PAYLOAD}")
            parsed = json.loads(text)
        else:
            raise ValueError(f"arguments: expected a JSON object or a dict, got {type(arguments).__name__}")
        if not isinstance(parsed, dict):
            raise ValueError(f"arguments: expected a JSON object, got {type(parsed).__name__}")
        if not _is_unicode(parsed):
            raise ValueError("arguments: a string holds a lone surrogate (e.g. \\ud800), which is not valid Unicode text")
        return parsed

    def validate(self, name: Any, arguments: Any) -> str | None:
        """None if the call's arguments pass its schema, else the message."""
        try:
            self._checked(name, arguments)
        except ValueError as exc:
            return str(exc)
        return None

    def _checked(self, name: Any, arguments: Any) -> dict:
        """The call's arguments parsed (once) and checked against its schema.
        Raises ValueError naming the tool or argument, the problem and what is allowed."""
        if not isinstance(name, str):
            raise ValueError(f"unknown tool: the name must be a string, got {type(name).__name__}; allowed {', '.join(TOOL_NAMES)}")
        if name not in self._schemas:
            raise ValueError(f"unknown tool {_short(name)}; allowed {', '.join(TOOL_NAMES)}")
        args = self.parse_arguments(arguments)
        error = validate(args, self._schemas[name])
        if error:
            raise ValueError(f"invalid arguments for {name}: {error}")
        return args

    def _dispatch(self, name: str, args: dict) -> dict:
        """Run a checked call: the free calls with no core action here, every other through the core."""
        if name == "get_organism_info":
            return self.organism_info()
        if name == "submit_hypothesis":
            if self.ended:
                return self._error(core.ERROR_MESSAGES[core.ERROR_CODES["session_ended"]])
            if len(self.hypotheses) >= MAX_HYPOTHESES:
                return self._error(f"submit_hypothesis: {MAX_HYPOTHESES} hypotheses already stored; no more are kept")
            self.hypotheses.append(args["text"])
            return {"stored": True, "budget_remaining": int(self.obs["budget_left"])}
        action = calls.action_from_call(self.meta, name, args)
        kind = int(action["kind"])
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.obs = obs
        result = calls.describe_result(self.meta, kind, obs, info)
        self.total_reward += reward
        if terminated or truncated:
            self.ended = True
            self.truncated = truncated
            self.end_reason = "end" if terminated else "call_limit"
            self.scores = info["scores"]
            result["ended"] = True
            result["end_reason"] = self.end_reason
            if truncated:
                result["note"] = f"The session accepted its limit of {self.call_limit} calls and has ended."
            result["scores"] = calls.describe_scores(self.meta, info["scores"])
        return result

    def organism_info(self) -> dict:
        """What get_organism_info returns: public facts only."""
        m, obs = self.meta, self.obs
        info = {
            "organism_id": self.organism_id,
            "gene_names": list(self.targetable_genes),
            "signals": [{"label": s, "mode": mode} for s, mode in zip(m.signal_labels, m.signal_modes)],
            "observable_phenotypes": list(m.phenotype_names),
            "baseline_phenotypes": {p: round(float(v), 6) for p, v in zip(m.phenotype_names, obs["baseline_phenotypes"])},
            "healthy_phenotype_ranges": {p: list(HEALTHY_RANGE) for p in m.phenotype_names},
            "budget_remaining": int(obs["budget_left"]),
            "budget_total": self.env.params.budget,
            "call_limit": self.call_limit,
            "calls_accepted": int(self.env.state.step_count),
        }
        if self.env.params.disease:
            info["aberrant_phenotypes"] = [p for p, a in zip(m.phenotype_names, obs["aberrant"]) if a]
        return info

    def record(self) -> dict:
        """The session as one JSON-ready record (the harness's format)."""
        return {
            "organism_id": self.organism_id,
            "calls": self.transcript,
            "hypotheses": self.hypotheses,
            "scores": self.scores,
            "return": self.total_reward,
            "end_reason": self.end_reason,
        }


def _is_unicode(value) -> bool:
    """Whether every string in ``value`` (JSON data) is valid Unicode text (no lone surrogates)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reject_constant(name: str):
    raise ValueError(f"arguments: {name} is not allowed")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def to_openai_tools(specs: list[dict]) -> list[dict]:
    return [
        {"type": "function", "function": {"name": s["name"], "description": s["description"], "parameters": s["input_schema"]}}
        for s in specs
    ]


def to_anthropic_tools(specs: list[dict]) -> list[dict]:
    return [{"name": s["name"], "description": s["description"], "input_schema": s["input_schema"]} for s in specs]


# -- prompts ---------------------------------------------------------------------
# The vocabulary paragraph by (vocabulary, stance), the paper's appendix E.2
# 2 x 2: each states the truth about the names (real symbols are labels only),
# and suppresses or permits biological knowledge.
_INVENTED_NAMES = (
    "IMPORTANT: every gene name (G001, G002, ...), signal label and phenotype name in this organism is invented. "
    "None refers to a real biological entity"
)
_REAL_NAMES = (
    "IMPORTANT: the gene names are symbols of real human genes (such as TP53), used here as labels for the genes of "
    "this synthetic organism; its signal labels and phenotype names are invented"
)
_EXPERIMENT = "The only way to understand this organism is to experiment on it and reason from what you measure."
_PERMIT = (
    "You may draw on biological knowledge where relevant. What you measure in experiments on this organism is the "
    "evidence to reason from."
)
_VOCABULARY = {
    ("invented", "suppress"): f"{_INVENTED_NAMES}, and knowledge of real biology will not help and may mislead. {_EXPERIMENT}",
    ("invented", "permit"): f"{_INVENTED_NAMES}. {_PERMIT}",
    ("real", "suppress"): f"{_REAL_NAMES}. Knowledge of real biology, of those genes too, will not help and may mislead. {_EXPERIMENT}",
    ("real", "permit"): f"{_REAL_NAMES}. {_PERMIT}",
}
_BUDGET = (
    "BUDGET: each run_experiment and each test_rescue costs 1 unit; every other call is free. Every result "
    "reports budget_remaining. When the budget is spent, experiments and rescues are refused. Measurements carry noise."
)


def system_prompt(disease: bool, call_limit: int | None = None, *, vocabulary: str = "invented", stance: str = "suppress") -> str:
    """The system prompt for healthy or disease mode; ``call_limit`` (the
    session's accepted-call limit, :attr:`ToolSession.call_limit`) is stated when given.
    ``vocabulary`` (the organism's gene names, invented or real) and ``stance``
    (suppress or permit biological knowledge) choose its vocabulary paragraph."""
    vocabulary_paragraph = _VOCABULARY[check_vocabulary(vocabulary), check_stance(stance)]
    lines = [
        "You are an experimental scientist studying a synthetic organism: a network of interacting genes whose "
        "steady state sets a few observable phenotypes. You can BLOCK (force to zero), BOOST (force to maximum) "
        "or DAMPEN (halve) genes, and ACTIVATE external signals, alone or in combination.",
        vocabulary_paragraph,
    ]
    if disease:
        lines += [
            "DISEASE: the organism has exactly one malfunction: a gene locked high (LOCK_HI), a gene locked low "
            "(LOCK_LO), or a signal that is persistently active (PERSIST). It pushes some phenotypes out of their "
            "healthy range. Your goals, in order: (1) diagnose it with submit_malfunction_hypothesis -- this is "
            "ONE-WAY, cannot be revised, and its score is shown only at the end; (2) find a rescue: test_rescue is "
            "available only after the diagnosis and reports how many aberrant phenotypes return to range; "
            "(3) answer the prediction tasks (get_next_prediction_task, then submit_prediction; each phenotype "
            "predicted within 0.10 of the truth earns credit); (4) submit your network and a hypothesis.",
            "Hints: an intervention that repeats a lock (BOOST on a gene locked high, BLOCK on one locked low, "
            "ACTIVATE on a signal already on) changes little. Keep at least 4 units for rescue and predictions.",
        ]
    else:
        lines += [
            "Your goals, in order: (1) predict the phenotypes under held-out two-gene interventions: call "
            "get_next_prediction_task for one task at a time and answer it with submit_prediction; each "
            "phenotype predicted within 0.10 of the truth earns credit; (2) submit the gene -> phenotype network you "
            "infer with submit_network, and a short hypothesis with submit_hypothesis.",
        ]
    limit = (
        f"CALL LIMIT: the session accepts at most {call_limit} calls other than get_organism_info and "
        "submit_hypothesis; refused calls do not count. The last accepted call ends the session."
    )
    lines += [
        _BUDGET + ("" if call_limit is None else "\n\n" + limit),
        "Start with get_organism_info. The two genes of a held-out task cannot be perturbed together in an "
        "experiment: the joint outcome must be predicted from your causal model, and effects are not simply "
        "additive. Call end when you are done.",
    ]
    return "\n\n".join(lines)


# -- the agent loop --------------------------------------------------------------
@dataclass
class ToolCall:
    name: str
    arguments: Any
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")


@dataclass
class AgentTurn:
    """What an agent returns: optional text, the tool calls it makes and, for a
    provider's model, the tokens the call used (``{"input_tokens",
    "output_tokens"}``, each an int or None when the provider did not say)."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict | None = None


# An agent: (messages, tool specs) -> AgentTurn. Messages use a neutral format:
# {"role": "system"|"user", "content"}, {"role": "assistant", "content",
# "tool_calls": [{"id", "name", "arguments"}]}, {"role": "tool", "tool_call_id",
# "name", "content"}.
Agent = Callable[[list, list], AgentTurn]


RETRIES = 5  # times a failed provider call is made again (rate limit, overload, timeout, connection)
BACKOFF_S = 1.0  # seconds before the first retry, doubled at each one (with jitter)
MAX_BACKOFF_S = 60.0


def check_retry(retries, backoff) -> tuple[int, float]:
    """``retries`` a non-negative integer and ``backoff`` a non-negative number
    of seconds; ValueError naming the bad one otherwise."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries: {retries!r}; allowed an integer >= 0 (0: no retry)")
    if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not 0 <= backoff < float("inf"):
        raise ValueError(f"backoff: {backoff!r}; allowed a number of seconds >= 0 (0: retry at once)")
    return retries, float(backoff)


def backoff_delay(attempt: int, backoff: float, rng=random) -> float:
    """Seconds to wait before retrying after failed attempt ``attempt`` (from 0):
    ``backoff * 2**attempt``, at most MAX_BACKOFF_S, times a random factor in
    [0.5, 1), so that sessions throttled together do not retry in step."""
    return min(MAX_BACKOFF_S, backoff * 2**attempt) * (0.5 + 0.5 * rng.random())


def run_agent(
    agent: Agent, session: ToolSession, max_turns: int = 300, *, retries: int = RETRIES, backoff: float = BACKOFF_S,
    sleep: Callable[[float], Any] = time.sleep,
) -> dict:
    """Let ``agent`` drive ``session`` until it ends (or ``max_turns`` turns,
    or a turn with no tool call: then the session is ended for it, and
    ``record["end_reason"]`` says ``"turn_limit"`` or ``"no_tool_call"``).
    Returns the session record; the messages exchanged are in ``record["messages"]``.

    A provider call that fails with a retryable :class:`ProviderError` (rate
    limit, overload, timeout, lost connection, an answer in an unusable shape)
    is made again with the same messages, up to ``retries`` times, ``sleep``
    waiting :func:`backoff_delay` before each: the session is touched only by
    a turn that came back, so a failed call changes nothing. A non-retryable
    error (bad key, unknown model, bad request), or a retryable one that
    outlasts the retries, is raised and the session is left unfinished.

    ``record["usage"]``: ``input_tokens`` and ``output_tokens`` summed over
    the calls that reported them (None if none did), ``provider_calls`` (every
    call, failed ones included), ``retries``, and ``failed_calls``, one
    ``{"turn", "attempt", "error"}`` per failed call (turn and attempt count from 0)."""
    retries, backoff = check_retry(retries, backoff)
    messages: list[dict] = [
        {"role": "system", "content": session.system_prompt()},
        {"role": "user", "content": "A new organism is ready. Begin."},
    ]
    specs = session.tool_specs()
    usage = {"input_tokens": None, "output_tokens": None, "provider_calls": 0, "retries": 0, "failed_calls": []}
    reason = "turn_limit"
    for index in range(max_turns):
        turn = _ask(agent, messages, specs, index, usage, retries, backoff, sleep)
        messages.append(
            {
                "role": "assistant",
                "content": turn.content,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.tool_calls],
            }
        )
        if not turn.tool_calls:
            reason = "no_tool_call"
            break
        for c in turn.tool_calls:
            result = session.call(c.name, c.arguments)
            messages.append(
                {"role": "tool", "tool_call_id": c.id, "name": c.name, "content": json.dumps(result), "is_error": "error" in result}
            )
            if session.ended:
                break
        if session.ended:
            break
    if not session.ended:
        # The harness ends it for the agent, and says why.
        session.call("end", {})
        session.end_reason = reason
    record = session.record()
    record["messages"] = messages
    record["usage"] = usage
    return record


def _ask(agent: Agent, messages: list, specs: list, turn: int, usage: dict, retries: int, backoff: float, sleep) -> AgentTurn:
    """One turn's provider call, retried as :func:`run_agent` says; ``usage`` counts it."""
    for attempt in range(retries + 1):
        usage["provider_calls"] += 1
        try:
            answer = agent(messages, specs)
        except ProviderError as exc:
            _add_tokens(usage, exc.usage)  # a malformed answer's tokens are billed all the same
            usage["failed_calls"].append({"turn": turn, "attempt": attempt, "error": str(exc)})
            if not exc.retryable:
                raise
            if attempt == retries:
                raise ProviderError(f"{exc} (gave up after {attempt + 1} attempts)", retryable=True, cause=exc.cause) from exc
            usage["retries"] += 1
            sleep(backoff_delay(attempt, backoff))
            continue
        _add_tokens(usage, answer.usage)
        return answer


def _add_tokens(usage: dict, reported) -> None:
    for key in ("input_tokens", "output_tokens"):
        value = reported.get(key) if isinstance(reported, dict) else None
        if _is_count(value):
            usage[key] = (usage[key] or 0) + value


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class ReplayAgent:
    """Replays a recorded session call by call: a line of ``sessions.jsonl``
    (``luca-gym eval`` for any agent, baselines included, or ``luca-gym mcp
    --out``). The organism, its noise and the calls are the same, so the
    replay scores exactly as the original (a published session can be
    re-scored, and tests run without a network). ValueError names a record
    that has no calls to replay."""

    def __init__(self, record: dict):
        calls = record.get("calls") if isinstance(record, dict) else None
        if not isinstance(calls, list):
            raise ValueError("record: no 'calls' list; give a session record (one line of sessions.jsonl)")
        script = []
        for i, entry in enumerate(calls):
            if not isinstance(entry, dict) or "call" not in entry:
                raise ValueError(f"record: calls[{i}] has no 'call'")
            script.append((entry["call"], entry.get("arguments", {})))
        self._script = ScriptedAgent(script)

    def __call__(self, messages, tools) -> "AgentTurn":
        return self._script(messages, tools)


class ScriptedAgent:
    """Replays a fixed list of (tool name, arguments) calls, one per turn."""

    def __init__(self, script: list[tuple[str, Any]]):
        self.script = list(script)
        self.turn = 0

    def __call__(self, messages, tools) -> AgentTurn:
        if self.turn >= len(self.script):
            return AgentTurn(content="done")
        name, arguments = self.script[self.turn]
        self.turn += 1
        return AgentTurn(tool_calls=[ToolCall(name, arguments)])


# -- provider adapters (optional extra: pip install "luca-gym[llm]") -----------
# What goes back to a provider is what it accepts even when the model's own
# call was malformed: a tool name in the pattern the APIs allow and arguments
# as JSON text (OpenAI) or an object (Anthropic). What the session saw and the
# error it answered are unchanged.
def _echo_name(name) -> str:
    text = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] if isinstance(name, str) else ""
    return text or "invalid_name"


def _arguments_text(arguments) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments)
    except (TypeError, ValueError, RecursionError, OverflowError):
        return json.dumps(repr(arguments)[:2048])


def _arguments_object(arguments) -> dict:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"_unparsed": _arguments_text(arguments)}


def _openai_messages(messages: list[dict]) -> list[dict]:
    out = []
    for m in messages:
        if m["role"] == "assistant":
            msg = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                msg["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": _echo_name(c["name"]), "arguments": _arguments_text(c["arguments"])}}
                    for c in m["tool_calls"]
                ]
            out.append(msg)
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def _anthropic_messages(messages: list[dict]) -> tuple[str, list[dict]]:
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    out: list[dict] = []
    for m in messages:
        if m["role"] == "user":
            out.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            for c in m.get("tool_calls") or []:
                blocks.append({"type": "tool_use", "id": c["id"], "name": _echo_name(c["name"]), "input": _arguments_object(c["arguments"])})
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "(no content)"}]})
        elif m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if m.get("is_error"):
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return system, out


# -- reading a provider's answer -------------------------------------------------
# An answer is untrusted input. A tool call in the wrong shape (no name,
# arguments a list or a number) goes to the session as it came, which refuses
# it with a clear error, changing nothing; an answer that cannot be read at all
# (no choices, tool calls not a list, content not text) is a failed provider
# call: a retryable ProviderError, retried by run_agent and listed in the record.
class _Unusable(Exception):
    pass


def _field(obj, name: str):
    """``obj.name`` or ``obj[name]`` (SDK objects and plain dicts alike); None when absent."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _kind(value) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"


def _call_id(value) -> str:
    return value if isinstance(value, str) and value else f"call_{uuid.uuid4().hex[:12]}"


def _text(content, where: str) -> str | None:
    """A message's text: a string, None, or a list of text parts (joined)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = [_field(part, "text") for part in content]
        if all(isinstance(t, str) for t in parts):
            return "".join(parts) or None
    raise _Unusable(f"{where} is {_kind(content)}, not text")


def _usage(reported, input_key: str, output_key: str) -> dict | None:
    if reported is None:
        return None
    values = {"input_tokens": _field(reported, input_key), "output_tokens": _field(reported, output_key)}
    return {k: v if _is_count(v) else None for k, v in values.items()}


def _answer(where: str, response, parse, usage_keys: tuple[str, str]) -> AgentTurn:
    """``parse(response)`` -> (content, tool calls) as an AgentTurn with the
    response's token usage; an unreadable answer raises a retryable
    :class:`ProviderError` that keeps the tokens it reported."""
    try:
        usage = _usage(_field(response, "usage"), *usage_keys)
    except Exception:  # noqa: BLE001 -- usage in an odd shape is not counted, the answer still is
        usage = None
    try:
        content, tool_calls = parse(response)
    except Exception as exc:  # noqa: BLE001 -- a provider's answer must never crash the harness
        what = str(exc) if isinstance(exc, _Unusable) else f"{type(exc).__name__}: {str(exc)[:120]}"
        raise ProviderError(f"{where}: malformed response: {what}", retryable=True, usage=usage) from None
    return AgentTurn(content=content, tool_calls=tool_calls, usage=usage)


def _openai_parse(response) -> tuple:
    choices = _field(response, "choices")
    if not isinstance(choices, (list, tuple)) or not choices:
        raise _Unusable(f"choices is {_kind(choices)}, not a non-empty list" if choices is not None else "no choices")
    message = _field(choices[0], "message")
    if message is None:
        raise _Unusable("choices[0] has no message")
    content = _text(_field(message, "content"), "message.content")
    raw = _field(message, "tool_calls")
    raw = [] if raw is None else raw
    if not isinstance(raw, (list, tuple)):
        raise _Unusable(f"message.tool_calls is {_kind(raw)}, not a list")
    tool_calls = []
    for c in raw:
        function = _field(c, "function")
        tool_calls.append(ToolCall(_field(function, "name"), _field(function, "arguments"), _call_id(_field(c, "id"))))
    return content, tool_calls


def _anthropic_parse(response) -> tuple:
    blocks = _field(response, "content")
    if not isinstance(blocks, (list, tuple)):
        raise _Unusable(f"content is {_kind(blocks)}, not a list of blocks")
    texts, tool_calls = [], []
    for b in blocks:
        kind = _field(b, "type")
        if kind == "text":
            texts.append(_text(_field(b, "text"), "a text block's text") or "")
        elif kind == "tool_use":
            tool_calls.append(ToolCall(_field(b, "name"), _field(b, "input"), _call_id(_field(b, "id"))))
    return "".join(texts) or None, tool_calls


class OpenAIChatAgent:
    """An OpenAI-compatible chat-completions model (``base_url`` for local
    servers). The API key is read from ``api_key_env`` when the client is made
    and is never stored on this object or written to a transcript. ``client``:
    an OpenAI client to use instead, e.g. a
    :class:`~luca_gym.wrappers.mock_provider.MockClient`."""

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY", client=None, **kwargs):
        self.model, self.base_url, self.api_key_env, self.kwargs = model, base_url, api_key_env, kwargs
        self._client = client

    def _get_client(self):
        if self._client is None:
            import os

            from openai import OpenAI

            # max_retries=0: run_agent retries (with backoff, counted in the
            # record's usage); the SDK's own silent retries would hide failures.
            self._client = OpenAI(base_url=self.base_url, api_key=os.environ.get(self.api_key_env, "not-set"), max_retries=0)
        return self._client

    def __call__(self, messages, tools) -> AgentTurn:
        where = f"openai:{self.model}" + (f" at {self.base_url}" if self.base_url else "")
        with provider_errors(where):
            response = self._get_client().chat.completions.create(
                model=self.model, messages=_openai_messages(messages), tools=to_openai_tools(tools), **self.kwargs
            )
        return _answer(where, response, _openai_parse, ("prompt_tokens", "completion_tokens"))

    def __repr__(self) -> str:
        return f"OpenAIChatAgent(model={self.model!r}, base_url={self.base_url!r})"


class AnthropicAgent:
    """An Anthropic messages-API model; the key comes from ``api_key_env``."""

    def __init__(self, model: str, api_key_env: str = "ANTHROPIC_API_KEY", client=None, max_tokens: int = 4096, **kwargs):
        self.model, self.api_key_env, self.max_tokens, self.kwargs = model, api_key_env, max_tokens, kwargs
        self._client = client

    def _get_client(self):
        if self._client is None:
            import os

            from anthropic import Anthropic

            self._client = Anthropic(api_key=os.environ.get(self.api_key_env), max_retries=0)  # run_agent retries
        return self._client

    def __call__(self, messages, tools) -> AgentTurn:
        system, msgs = _anthropic_messages(messages)
        where = f"anthropic:{self.model}"
        with provider_errors(where):
            response = self._get_client().messages.create(
                model=self.model, system=system, messages=msgs, tools=to_anthropic_tools(tools), max_tokens=self.max_tokens,
                **self.kwargs,
            )
        return _answer(where, response, _anthropic_parse, ("input_tokens", "output_tokens"))

    def __repr__(self) -> str:
        return f"AnthropicAgent(model={self.model!r})"


LLM_EXTRA = 'pip install "luca-gym[llm]"'


class ProviderError(RuntimeError):
    """A model provider's call failed (unreachable server, bad key, rate
    limit, an answer in an unusable shape...): one line naming the agent, the
    error type and its message.

    ``retryable``: whether the same call may succeed later (rate limit,
    overload, timeout, lost connection, a malformed answer) or not (bad key,
    unknown model, bad request); ``cause``: the SDK's exception, if any;
    ``usage``: the tokens a malformed answer reported (they are billed)."""

    def __init__(self, message: str, *, retryable: bool = False, cause: BaseException | None = None, usage: dict | None = None):
        super().__init__(message)
        self.retryable, self.cause, self.usage = retryable, cause, usage


# HTTP statuses worth retrying: timeout, conflict, too early, rate limit, and
# server errors (529: Anthropic's "overloaded").
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_RETRYABLE_NAMES = ("RateLimit", "Timeout", "Connect", "Overloaded", "InternalServer", "ServiceUnavailable", "RemoteProtocol",
                    "NetworkError", "ReadError", "WriteError")
_PROVIDER_MODULES = ("openai", "anthropic", "httpx", "httpcore")


def _status_code(exc: BaseException) -> int | None:
    for value in (getattr(exc, "status_code", None), getattr(getattr(exc, "response", None), "status_code", None)):
        if _is_count(value):
            return value
    return None


def is_retryable(exc: BaseException) -> bool:
    """Whether a provider's exception may pass if the call is made again: an
    HTTP status in RETRYABLE_STATUS or >= 500; without one, a lost connection
    or a timeout (an OSError, or a type named like the SDKs' RateLimitError,
    APIConnectionError, APITimeoutError...). Told by status and name, so any
    client's exceptions are classed without importing its SDK."""
    status = _status_code(exc)
    if status is not None:
        return status in RETRYABLE_STATUS or status >= 500
    names = [k.__name__ for k in type(exc).__mro__]
    return isinstance(exc, OSError) or any(part in name for name in names for part in _RETRYABLE_NAMES)


@contextlib.contextmanager
def provider_errors(agent: str):
    """Turn an SDK or network exception (or any carrying an HTTP
    ``status_code``) into a one-line :class:`ProviderError`, saying whether it
    is retryable (:func:`is_retryable`); other exceptions pass unchanged."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 -- the SDKs raise many types; each becomes one clear line
        module = type(exc).__module__.split(".")[0]
        if module not in _PROVIDER_MODULES and not isinstance(exc, OSError) and _status_code(exc) is None:
            raise
        message = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ProviderError(f"{agent}: {type(exc).__name__}: {message}", retryable=is_retryable(exc), cause=exc) from exc


def make_agent(spec: str, base_url: str | None = None) -> Agent:
    """``openai:MODEL`` or ``anthropic:MODEL`` -> an agent callable. ValueError
    for an unknown spec or a missing SDK (with the install line)."""
    provider, _, model = spec.partition(":")
    if not model or provider not in ("openai", "anthropic"):
        raise ValueError(f"agent: {spec!r} unknown; allowed openai:MODEL or anthropic:MODEL")
    try:
        importlib.import_module(provider)
    except ImportError:
        raise ValueError(f"agent {spec!r}: the {provider} package is not installed; {LLM_EXTRA}") from None
    if provider == "openai":
        return OpenAIChatAgent(model, base_url=base_url)
    return AnthropicAgent(model)

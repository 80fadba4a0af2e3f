"""LUCA's tools for language-model agents: the nine calls of the paper
(appendices B and C) on :class:`~luca_gym.tools.session.ToolSessionBase`.

:data:`TOOLS` is the one registry the JSON Schemas in the OpenAI, Anthropic
and MCP formats come from; :class:`ToolSession` translates a checked call into
a core action with :func:`luca_gym.worlds.luca.calls.action_from_call` and runs
it on a :class:`~luca_gym.worlds.luca.session.Session`. Every rule (cost,
phase, refusals, scoring) stays in the core; nothing here re-implements one.
``luca-gym play`` and ``luca-gym mcp`` drive a :class:`ToolSession` too.
:func:`system_prompt` is LUCA's prompt (the paper's, with the appendix E.2
vocabulary and stance variants).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from luca_gym import seal as seal_mod
from luca_gym.tools.session import ToolSessionBase
from luca_gym.worlds.luca import calls, core
from luca_gym.worlds.luca.results_schema import output_schema
from luca_gym.worlds.luca.session import Session
from luca_gym.worlds.luca.spec import GENE_TYPES, HEALTHY_RANGE, MALFUNCTION_TYPES, SIGNAL_TYPE, check_stance, check_vocabulary

MAX_HYPOTHESIS = 20_000  # characters of one hypothesis
MAX_HYPOTHESES = 100  # hypotheses kept per session


@dataclass(frozen=True)
class Tool:
    """One of the nine tools: its name, its description and how a session builds its arguments' schema."""
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


class ToolSession(ToolSessionBase):
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
        budget: experiment and rescue units, 1..MAX_BUDGET (``luca-gym eval
            --budget``), or None (default): the paper's N + S + 8.

    Raises ValueError naming a bad setting and what is allowed.

    Parsing, checking and logging of every call are the generic dispatcher's
    (:class:`~luca_gym.tools.session.ToolSessionBase`); this class says what
    LUCA's tools are and how a checked call runs.

    A refused call (malformed, or against the rules) changes nothing and
    counts toward nothing. The session accepts at most ``call_limit`` calls
    that reach the core (every call but ``get_organism_info`` and
    ``submit_hypothesis``); the last of them is carried out and then ends the
    session with ``end_reason: "call_limit"``. The prompt and the tool
    descriptions state the limit.
    """

    world = "luca"
    opening = "A new organism is ready. Begin."
    status_keys = ("budget_remaining",)
    title = "LUCA gym"

    def __init__(
        self, seed: int = 0, *, tier="medium", mode="healthy", n_genes=20, backwards=False, env: Session | None = None,
        sealed=None, vocabulary="invented", stance="suppress", budget=None,
    ):
        super().__init__()
        self.seal = seal_mod.make_seal(sealed)
        self.stance = check_stance(stance)
        self.env, self.obs = calls.open_session(seed, tier, mode, n_genes, backwards, env=env, sealed=self.seal,
                                                vocabulary=vocabulary, budget=budget)
        self.seed = int(seed)
        self.meta = self.env.organism.meta
        self.organism_id = self.instance_id = seal_mod.instance_id(self.seed, self.seal)
        self.targetable_genes = tuple(g for g, t in zip(self.meta.gene_names, self.obs["targetable"]) if t)
        self.hypotheses: list[str] = []
        self.set_specs([{"name": t.name, "description": self.description(t), "input_schema": self._schema(t)} for t in TOOLS])

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

    def dispatch(self, name: str, args: dict) -> dict:
        """Run a checked call: the free calls with no core action here, every other through the core."""
        if name == "get_organism_info":
            return self.organism_info()
        if name == "submit_hypothesis":
            if self.ended:
                return self.error(core.ERROR_MESSAGES[core.ERROR_CODES["session_ended"]])
            if len(self.hypotheses) >= MAX_HYPOTHESES:
                return self.error(f"submit_hypothesis: {MAX_HYPOTHESES} hypotheses already stored; no more are kept")
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

    def status(self) -> dict:
        return {"budget_remaining": int(self.obs["budget_left"])}

    def observation(self) -> dict:
        """What a policy sees (:func:`luca_gym.tools.play.play_policy`): the host session's observation (numpy, bools as int8)."""
        return self.obs

    def record_fields(self) -> dict:
        return {"organism_id": self.organism_id, "budget": self.env.params.budget, "call_limit": self.call_limit,
                "n_alt": (self.scores or {}).get("n_alt")}

    def key_settings(self) -> dict:
        m = self.meta
        return {"tier": m.tier, "mode": m.mode, "n_genes": m.n_genes, "backwards": m.backwards, "vocabulary": m.vocabulary,
                "stance": self.stance}

    def demo_calls(self) -> list[tuple[str, dict]]:
        """A short legal session that ends (:func:`luca_gym.testing.check_world` plays it):
        facts, one experiment, a hypothesis, one prediction, a network, in disease
        mode a diagnosis and a rescue, then ``end``."""
        first, second = self.targetable_genes[:2]
        phenotypes = self.meta.phenotype_names
        calls_ = [
            ("get_organism_info", {}),
            ("run_experiment", {"interventions": {first: {"type": "BLOCK"}}}),
            ("submit_hypothesis", {"text": f"{first} raises {phenotypes[0]}"}),
            ("get_next_prediction_task", {}),
            ("submit_prediction", {"predictions": {p: 0.5 for p in phenotypes}}),
            ("submit_network", {"edges": [{"gene": first, "phenotype": phenotypes[0], "direction": "+"}]}),
        ]
        if self.env.params.disease:
            calls_ += [
                ("submit_malfunction_hypothesis", {"target_name": first, "malfunction_type": "LOCK_HI"}),
                ("test_rescue", {"interventions": {second: {"type": "BOOST"}}}),
            ]
        return calls_ + [("end", {})]

    def annotations(self, name: str) -> dict | None:
        return ANNOTATIONS.get(name)

    def output_schema(self, name: str) -> dict | None:
        return output_schema(self, name)

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


# ToolAnnotations per tool (hints for clients, e.g. to ask before a one-way call).
# readOnly: changes nothing in the session. destructive: one-way or replacing
# (an answer and the diagnosis cannot be revised, ``end`` closes the session, a
# network replaces the last one); the others only add (a measurement, a
# revealed task, a stored hypothesis, a rescue test).
# idempotent: a repeat with the same arguments has no further effect (the core
# refuses a second diagnosis, answer or end, and refusals count toward nothing;
# every accepted call counts toward the call limit). closed world for all.
ANNOTATIONS: dict[str, dict[str, Any]] = {  # the MCP server publishes these
    "get_organism_info": {"title": "Organism facts", "readOnlyHint": True, "idempotentHint": True},
    "run_experiment": {"title": "Run an experiment (1 budget unit)", "readOnlyHint": False, "destructiveHint": False,
                       "idempotentHint": False},
    "get_next_prediction_task": {"title": "Reveal the next prediction task", "readOnlyHint": False,
                                 "destructiveHint": False, "idempotentHint": False},
    "submit_prediction": {"title": "Answer the prediction task (once)", "readOnlyHint": False, "destructiveHint": True,
                          "idempotentHint": True},
    "submit_hypothesis": {"title": "Store a hypothesis", "readOnlyHint": False, "destructiveHint": False,
                          "idempotentHint": False},
    "submit_network": {"title": "Submit the inferred network", "readOnlyHint": False, "destructiveHint": True,
                       "idempotentHint": False},
    "submit_malfunction_hypothesis": {"title": "Commit the diagnosis (one-way)", "readOnlyHint": False,
                                      "destructiveHint": True, "idempotentHint": True},
    "test_rescue": {"title": "Test a rescue (1 budget unit)", "readOnlyHint": False, "destructiveHint": False,
                    "idempotentHint": False},
    "end": {"title": "End the session and reveal the scores", "readOnlyHint": False, "destructiveHint": True,
            "idempotentHint": True},
}


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
VOCABULARY_PARAGRAPHS = {
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
    vocabulary_paragraph = VOCABULARY_PARAGRAPHS[check_vocabulary(vocabulary), check_stance(stance)]
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

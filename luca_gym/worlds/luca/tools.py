"""LUCA's tools for language-model agents: the nine calls of the paper
(appendices B and C) as a tool table on the generic
:class:`~luca_gym.tools.table.TableToolSession`, over LUCA's pure core
(:mod:`luca_gym.worlds.luca.core.protocol`).

Each tool is a handler with a typed signature; its JSON Schema (in the
OpenAI, Anthropic and MCP formats) is built from the signature by the
table's builder, never written beside it, and the dispatcher checks every
call against it before anything runs. A handler translates a checked call
into a core action (:func:`luca_gym.worlds.luca.calls.action_from_call`);
the table steps the core and does the refusal, the reward, the ending (by
``end``, or at the call limit) and the scores, as for every world on it.
Every rule (cost, phase, refusals, scoring) stays in the core; nothing here
re-implements one. ``luca-gym play`` and ``luca-gym mcp`` drive a
:class:`ToolSession` too. :func:`system_prompt` is LUCA's prompt (the
paper's, with the appendix E.2 vocabulary and stance variants).
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any, Literal, TypedDict

from luca_gym import seal as seal_mod
from luca_gym.boundary import to_numpy_observation
from luca_gym.tools.table import Field, Refusal, TableToolSession, per_session, tool, tool_table
from luca_gym.worlds.luca import calls
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.core import ERROR_CODES, protocol
from luca_gym.worlds.luca.results_schema import output_schema
from luca_gym.worlds.luca.spec import GENE_TYPES, HEALTHY_RANGE, MALFUNCTION_TYPES, SIGNAL_TYPE, check_stance, check_vocabulary

MAX_HYPOTHESIS = 20_000  # characters of one hypothesis
MAX_HYPOTHESES = 100  # hypotheses kept per session


# -- what an agent may send ------------------------------------------------------
class GeneIntervention(TypedDict):
    """A gene's intervention (``$defs/gene``)."""

    type: Literal[GENE_TYPES]


class SignalIntervention(TypedDict):
    """A signal's intervention (``$defs/signal``)."""

    type: Literal[SIGNAL_TYPE]


Gene = Annotated[GeneIntervention, Field(ref="gene")]
Signal = Annotated[SignalIntervention, Field(ref="signal")]


def _targets(session: "ToolSession") -> dict:
    """Each target an intervention may name, with its type: the targetable genes, then the signals."""
    return {**{g: Gene for g in session.targetable_genes}, **{s: Signal for s in session.meta.signal_labels}}


# Targets by name, none required, at least one; the published order puts the description second.
Interventions = Annotated[dict[str, Gene | Signal], Field(
    keys=per_session(_targets), optional_keys=True, min_properties=1, key_order=("type", "description"),
    description="Targets by name: a gene -> {\"type\": BLOCK|BOOST|DAMPEN}, a signal -> {\"type\": \"ACTIVATE\"}.")]
Predictions = Annotated[dict[str, Annotated[float, Field(minimum=0, maximum=1)]],
                        Field(keys=per_session(lambda s: s.meta.phenotype_names))]
GeneName = Annotated[Any, Field(enum=per_session(lambda s: s.targetable_genes))]
PhenotypeName = Annotated[Any, Field(enum=per_session(lambda s: s.meta.phenotype_names))]
Direction = Literal[tuple(calls.DIRECTIONS)]


class Edge(TypedDict):
    """A submitted gene -> phenotype edge and its direction (+ raises, - lowers)."""

    gene: GeneName
    phenotype: PhenotypeName
    direction: Direction


# At most every targetable gene to every phenotype; the published order puts maxItems before items.
Edges = Annotated[list[Edge], Field(max_items=per_session(lambda s: len(s.targetable_genes) * len(s.meta.phenotype_names)),
                                    key_order=("type", "maxItems"))]
Target = Annotated[Any, Field(enum=per_session(lambda s: [*s.targetable_genes, *s.meta.signal_labels]))]
Malfunction = Literal[MALFUNCTION_TYPES[1:]]


def _env_config(env, seal, **settings) -> protocol.SessionConfig:
    """The config of a session on ``env`` (a host
    :class:`~luca_gym.worlds.luca.session.Session`, a LucaEnv or a
    :class:`ToolSession`: its params, the call limit and shaping included),
    refused unless it was built from these settings and seal (ValueError
    naming the first that differs)."""
    wanted = LucaConfig(**settings)
    held = getattr(env, "config", None)
    if not isinstance(held, protocol.SessionConfig):
        held = protocol.SessionConfig(env.organism_settings, env.params)
    if wanted.budget is not None and held.params.budget != wanted.budget:
        raise ValueError(f"env: built with budget={held.params.budget}; this session asks for budget={wanted.budget}")
    fingerprint = lambda s: None if s is None else s.fingerprint  # noqa: E731
    names = ("tier", "n_genes", "mode", "backwards")
    built = {**{k: getattr(held.organism, k) for k in names}, "sealed": fingerprint(seal_mod.make_seal(env.seal)),
             "vocabulary": held.organism.vocabulary}
    asked = {**{k: getattr(wanted, k) for k in names}, "sealed": fingerprint(seal), "vocabulary": wanted.vocabulary}
    for name, value in asked.items():
        if built[name] != value:
            raise ValueError(f"env: built with {name}={built[name]!r}; this session asks for {name}={value!r}")
    return protocol.SessionConfig(wanted, held.params)


class ToolSession(TableToolSession):
    """One LUCA session driven by named tool calls.

    Args:
        seed: the organism seed.
        tier, mode, n_genes, backwards: the organism's settings.
        vocabulary, stance: the paper's appendix E.2 ablation: gene names
            "invented" (G001...) or "real" (real human gene symbols), and the
            system prompt's stance on biological knowledge, "suppress" (the
            default) or "permit" (:func:`system_prompt`).
        env: a :class:`~luca_gym.worlds.luca.session.Session` or a LucaEnv
            built from these same settings, whose config to take (its call
            limit, ``max_steps``, and reward shaping) and on which the
            session runs, as it always has: it is opened on the organism and
            holds the session's ``state`` as the calls go. Another
            ToolSession gives its config only. By default the core's config
            (:func:`~luca_gym.worlds.luca.core.protocol.make_config`).
        sealed: None (default), a secret, a :class:`luca_gym.seal.Seal` or True
            (``$LUCA_GYM_SECRET``): the organism is generated from its sealed
            seed and ``organism_id`` is opaque, so neither the public seed nor
            the names lead back to it (:mod:`luca_gym.seal`).
        budget: experiment and rescue units, 1..MAX_BUDGET (``luca-gym eval
            --budget``), or None (default): the paper's N + S + 8.

    Raises ValueError naming a bad setting and what is allowed.

    Parsing, checking and logging of every call are the generic dispatcher's
    (:class:`~luca_gym.tools.session.ToolSessionBase`), the steps, refusals,
    reward, ending and scores the tool table's
    (:class:`~luca_gym.tools.table.TableToolSession`); this class says what
    LUCA's tools are and what their answers hold.

    A refused call (malformed, or against the rules) changes nothing and
    counts toward nothing. The session accepts at most ``call_limit`` calls
    that reach the core (every call but ``get_organism_info`` and
    ``submit_hypothesis``); the last of them is carried out and then ends the
    session with ``end_reason: "call_limit"``. The prompt and the tool
    descriptions state the limit.

    ``state`` is the core's session state, ``instance`` the organism and its
    noise key (host side: never shown), ``config`` the
    :class:`~luca_gym.worlds.luca.core.protocol.SessionConfig`; ``obs`` the
    observation as numpy arrays; ``env`` the host env it runs on, or the
    session itself (either holds ``state``, ``params``, ``organism`` and
    ``seal``).
    """

    core = protocol
    config_class = LucaConfig
    world = "luca"
    id_prefix = "org"
    opening = "A new organism is ready. Begin."
    status_keys = ("budget_remaining",)
    title = "LUCA gym"

    def __init__(
        self, seed: int = 0, *, tier="medium", mode="healthy", n_genes=20, backwards=False, env=None,
        sealed=None, vocabulary="invented", stance="suppress", budget=None,
    ):
        self.stance = check_stance(stance)
        seal = seal_mod.make_seal(sealed)
        settings = {"tier": tier, "mode": mode, "n_genes": n_genes, "backwards": backwards, "vocabulary": vocabulary,
                    "budget": budget}
        options = settings if env is None else {"config": _env_config(env, seal, **settings)}
        self._host = None  # the host env the session runs on (its state kept as the session's), if given one
        super().__init__(seed, sealed=seal, **options)
        self.seed = int(seed)
        self.hypotheses: list[str] = []
        if env is not None and not isinstance(env, ToolSession):
            env.open(self.seed)
            self._host = env
            self.state = self.state

    # -- the session as the host Session showed it ---------------------------------
    @property
    def state(self):
        """The core's session state (:class:`~luca_gym.worlds.luca.core.EnvState`; host side: never shown)."""
        return self._state

    @state.setter
    def state(self, value) -> None:
        self._state = value
        if self._host is not None:
            self._host.state = value

    @property
    def meta(self):
        """The organism's public names and settings (:class:`~luca_gym.worlds.luca.types.OrganismMeta`)."""
        return self.instance.organism.meta

    @property
    def organism(self):
        """The organism (host side: its arrays hold the hidden truth)."""
        return self.instance.organism

    @property
    def params(self):
        """The core's :class:`~luca_gym.worlds.luca.core.EnvParams` (budget, call limit, shaping)."""
        return self.config.params

    @property
    def env(self):
        """The host env the session runs on (``env=``), else the session itself: either holds ``state``,
        ``params``, ``organism`` and ``seal``, where the host Session's were read."""
        return self if self._host is None else self._host

    @property
    def obs(self) -> dict:
        """The observation (the core's ``public_view``), numpy arrays, bools as int8."""
        return to_numpy_observation(protocol.public_view(self.state, self.config))  # jitted there, once per config

    @property
    def organism_id(self) -> str:
        """The organism's id: ``org_<seed>``, opaque when sealed."""
        return self.instance_id

    @cached_property
    def targetable_genes(self) -> tuple[str, ...]:
        """The genes an agent may name (the hard tier's latent genes are not among them)."""
        return tuple(g for g, t in zip(self.meta.gene_names, self.obs["targetable"]) if t)

    @property
    def call_limit(self) -> int:
        """Accepted calls (those that reach the core) after which the session ends itself."""
        return self.params.max_steps

    def system_prompt(self) -> str:
        """The system prompt for this session (mode, call limit, vocabulary and stance)."""
        return system_prompt(self.params.disease, self.call_limit, vocabulary=self.meta.vocabulary, stance=self.stance)

    # -- the tools ---------------------------------------------------------------------
    # MCP ToolAnnotations per tool (hints for clients, e.g. to ask before a one-way
    # call). readOnly: changes nothing in the session. destructive: one-way or
    # replacing (an answer and the diagnosis cannot be revised, ``end`` closes the
    # session, a network replaces the last one); the others only add (a measurement,
    # a revealed task, a stored hypothesis, a rescue test). idempotent: a repeat with
    # the same arguments has no further effect (the core refuses a second diagnosis,
    # answer or end, and refusals count toward nothing; every accepted call counts
    # toward the call limit). Closed world for all.
    def _action(self, name: str, **arguments) -> protocol.Action:
        """A checked call as the core's action."""
        return protocol.to_action(calls.action_from_call(self.meta, name, arguments), self.config)

    @tool(title="Organism facts", readOnlyHint=True, idempotentHint=True)
    def get_organism_info(self):
        """Free. The organism's targetable genes, signals, phenotypes, baseline phenotypes, healthy ranges,
        aberrant phenotypes (disease mode), the budget and the call limit: the session accepts at most
        {c.params.max_steps} calls other than get_organism_info and submit_hypothesis (refused calls do not
        count), then ends itself."""
        return self.organism_info()

    @tool(title="Run an experiment (1 budget unit)", readOnlyHint=False, destructiveHint=False, idempotentHint=False)
    def run_experiment(self, interventions: Interventions):
        """Costs 1 budget unit. Apply the interventions together and measure the steady-state phenotypes
        (with measurement noise). An experiment that perturbs both genes of a held-out prediction task is refused."""
        return self._action("run_experiment", interventions=interventions)

    @tool(title="Reveal the next prediction task", readOnlyHint=False, destructiveHint=False, idempotentHint=False)
    def get_next_prediction_task(self):
        """Free. Reveal the next held-out two-gene prediction task (answer the current one first)."""
        return self._action("get_next_prediction_task")

    @tool(title="Answer the prediction task (once)", readOnlyHint=False, destructiveHint=True, idempotentHint=True)
    def submit_prediction(self, predictions: Predictions):
        """Free. Predict every phenotype's steady-state value under the current prediction task. One submission per task."""
        return self._action("submit_prediction", predictions=predictions)

    @tool(title="Store a hypothesis", readOnlyHint=False, destructiveHint=False, idempotentHint=False)
    def submit_hypothesis(self, text: Annotated[str, Field(min_length=1, max_length=MAX_HYPOTHESIS)]):
        """Free. Store a free-text causal hypothesis (kept with the session, not scored).

        The one call the core never sees: kept here, refused after the end
        in the core's words, at most :data:`MAX_HYPOTHESES` of them."""
        if self.ended:
            raise Refusal(protocol.ERRORS[ERROR_CODES["session_ended"]])
        if len(self.hypotheses) >= MAX_HYPOTHESES:
            raise Refusal(f"submit_hypothesis: {MAX_HYPOTHESES} hypotheses already stored; no more are kept")
        self.hypotheses.append(text)
        return {"stored": True, "budget_remaining": int(self.state.budget_left)}

    @tool(title="Submit the inferred network", readOnlyHint=False, destructiveHint=True, idempotentHint=False)
    def submit_network(self, edges: Edges):
        """Free. Submit the gene -> phenotype edges you infer, each with its direction (+ raises, - lowers).
        Scored by precision and recall at session end; a later submission replaces an earlier one.
        Each submission counts toward the session's limit of {c.params.max_steps} accepted calls."""
        return self._action("submit_network", edges=edges)

    @tool(title="Commit the diagnosis (one-way)", readOnlyHint=False, destructiveHint=True, idempotentHint=True)
    def submit_malfunction_hypothesis(self, target_name: Target, malfunction_type: Malfunction):
        """Free, disease mode only, ONE-WAY: commit your diagnosis (a gene locked high or low, or a persistently
        active signal). It unlocks test_rescue; its score is revealed only when the session ends."""
        return self._action("submit_malfunction_hypothesis", target_name=target_name, malfunction_type=malfunction_type)

    @tool(title="Test a rescue (1 budget unit)", readOnlyHint=False, destructiveHint=False, idempotentHint=False)
    def test_rescue(self, interventions: Interventions):
        """Costs 1 budget unit, disease mode only, after submit_malfunction_hypothesis. Apply a corrective
        intervention; returns the phenotypes, which are in the healthy range, and the restored fraction of the
        aberrant phenotypes."""
        return self._action("test_rescue", interventions=interventions)

    @tool(title="End the session and reveal the scores", readOnlyHint=False, destructiveHint=True, idempotentHint=True)
    def end(self):
        """Free. End the session and reveal the scores."""
        return self._action("end")

    tools = tool_table(get_organism_info, run_experiment, get_next_prediction_task, submit_prediction, submit_hypothesis,
                       submit_network, submit_malfunction_hypothesis, test_rescue, end)

    # -- the answers -----------------------------------------------------------------
    def answer(self, name: str, args: dict) -> dict:
        """What a call the core took returns, by name (:func:`~luca_gym.worlds.luca.calls.describe_result`)."""
        return calls.describe_result(self.meta, calls.CALLS[name], self.obs, {})

    def refused(self, message: str) -> dict:
        """A call the core refused: the budget left, then the core's message (the order LUCA's answers have always had)."""
        return {**self.status(), "error": message}

    def shown_scores(self, scores: dict) -> dict:
        """The scores as an agent reads them: the malfunction by name, figures rounded (:func:`~luca_gym.worlds.luca.calls.describe_scores`)."""
        return calls.describe_scores(self.meta, scores)

    def limit_note(self) -> str:
        return f"The session accepted its limit of {self.call_limit} calls and has ended."

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
            "budget_total": self.params.budget,
            "call_limit": self.call_limit,
            "calls_accepted": int(self.state.step_count),
        }
        if self.params.disease:
            info["aberrant_phenotypes"] = [p for p, a in zip(m.phenotype_names, obs["aberrant"]) if a]
        return info

    def status(self) -> dict:
        return {"budget_remaining": int(self.state.budget_left)}

    def observation(self) -> dict:
        """What a policy sees (:func:`luca_gym.tools.play.play_policy`): the observation (numpy, bools as int8)."""
        return self.obs

    def record_fields(self) -> dict:
        return {"organism_id": self.organism_id, "budget": self.params.budget, "call_limit": self.call_limit,
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
        if self.params.disease:
            calls_ += [
                ("submit_malfunction_hypothesis", {"target_name": first, "malfunction_type": "LOCK_HI"}),
                ("test_rescue", {"interventions": {second: {"type": "BOOST"}}}),
            ]
        return calls_ + [("end", {})]

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


TOOL_NAMES = tuple(ToolSession.tools)  # the nine tools, in the specs' order
ANNOTATIONS: dict[str, dict[str, Any]] = {name: handler.annotations for name, handler in ToolSession.tools.items()}  # MCP's


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

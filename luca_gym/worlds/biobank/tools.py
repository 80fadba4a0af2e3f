"""The biobank world's structured tools, on the generic dispatcher:
:class:`BiobankToolSession`. Each tool is a handler with a typed signature
(a tool table, :func:`~luca_gym.tools.table.tool_table`); its JSON schema is
built from the signature by the table's schema builder
(:func:`~luca_gym.tools.table.spec_of`), never written beside it; the
arguments' types, limits and annotations are :mod:`~.tool_args`. The
session keeps its own class rather than
:class:`~luca_gym.tools.table.TableToolSession`, which steps a pure core:
the biobank has none (a session's state is a release, defined phenotypes,
an experiment log and a sandbox, its answers host-side analyses; see
:mod:`~.envs`), so its handlers answer directly and ``submit``/``end`` set
the scores the oracle gives. Every answer is computed from the released data
(:mod:`~.analysis` over :class:`~.release.Release`), never from the truth;
only ``submit`` reaches the oracle, and its scores come back once the session
has ended.

Tools (all free but ``experiment``):

* ``describe_release``: the tables, their columns, units and missing-value codes;
* ``column_summary``: a column's count, missing values, sentinels and quantiles
  (``diagnoses.icd10``: the codes' counts);
* ``define_phenotype``: a named participant-level phenotype, a weighted sum
  of columns (each standardised or not, optionally logged), optionally
  adjusted for the covariates; the other tools and ``submit`` take its name;
* ``validate_phenotype``: a phenotype's correlation with the clinical
  endpoints (the five-year event, NT-proBNP, a cardiac diagnosis);
* ``association_scan``: each protein's association with a phenotype;
* ``cis_mr``: Wald ratios with each protein's lead cis instrument;
* ``conditional_analysis``: at a variant's locus, the phenotype on the
  locus's cis proteins jointly (two-stage least squares);
* ``survival_association``: a protein's or column's hazard ratio per SD for
  a five-year outcome (cardiovascular event, cardiac or all-cause death), a
  Cox proportional-hazards fit (:func:`~.analysis.cox`), with the events and
  the crude rates by thirds of the exposure;
* ``visit_change``: a measure's change from baseline to the follow-up visit
  (MRI, NT-proBNP or a protein), optionally its annual change against an
  exposure (:func:`~.analysis.paired_change`);
* ``experiment``: a cell perturbation ($150,000) or knockdown ($400,000) of
  a named protein, paid from the session's budget (``budget`` setting), its
  delivery computed by the oracle (:meth:`~.oracle.Oracle.experiment`); every
  request and delivery is kept in the session's audit log, in its record;
* ``submit``: the claims (nominations, each with an optional
  ``outcome_alignment``; rejections; ``abstentions`` on pairs; an optional
  ``scorer_version``, refused unless the scorer's) (ends the session with the scores) and at most one
  phenotype: ``phenotype`` (a name), ``phenotype_values`` (participant id ->
  value, inline: the generic layer bounds a call's arguments to
  :data:`~luca_gym.tools.session.MAX_PAYLOAD` characters, about 2,000
  participants) or, in a session with the python tool, ``phenotype_file``
  (a path relative to the working folder ``/analysis``: a Parquet or CSV
  file with the columns ``participant_id`` and ``value``, the whole cohort
  of any profile; :func:`~.phenotype_file.read_phenotype_file` reads it
  inside the session's sandbox, never decoding it on the host); ``end``: leave without claims (every score 0);
* ``python`` (a session made with ``python=True``, sealed only): a block of
  the agent's own code, run in the generic sandbox
  (:class:`luca_gym.sandbox.Sandbox`) in a working directory that
  keeps its files between blocks and holds the release as Parquet files
  (``release/``, read-only), as the DrugTargetWorld harness does. Free;
  experiments and ``submit`` stay tools outside the sandbox, and the truth
  never enters it (it lives in the oracle, in this process). A session that
  runs code is sealed, so that the public package cannot regenerate its
  world, and the folder's name and paths hold nothing of its seed. It
  allows the harness's 30 turns (calls of any tool; ``turns``), then ends
  truncated; each block's output is cut to the sandbox's limit. It is the
  paper's setting: the python tool, the release, ``experiment``, ``submit``
  and ``end``, without the structured analysis tools above
  (:data:`ANALYSIS_TOOLS`), which ``analysis_tools=True`` keeps beside the
  code. The harness, the tools env and the MCP server ask for both
  generically (:func:`luca_gym.tools.session.tool_options`: ``luca-gym
  eval|mcp --python [--python-analysis-tools]``,
  ``gym.make("luca_gym/BiobankTools-v0", python=True, sealed=...)``).

A phenotype or column is named ``table.column`` (a participant-level numeric
column), ``diagnoses.<ICD-10 code>`` (1 where the participant has the code)
or by a name given to ``define_phenotype``. A call the schema refuses, or
that names something the release does not hold (or a phenotype file that is
missing, malformed or outside the working folder), is refused: it costs
nothing (though, in a session with a turn limit, a call that passed its
schema is a turn all the same) and changes nothing.
"""

from __future__ import annotations

import collections
import math
import re
from typing import Annotated

import numpy as np

from luca_gym import seal as seal_mod
from luca_gym.sandbox import RELEASE, WORKDIR, Limits
from luca_gym.tools.session import PYTHON_TURNS, ToolSessionBase, check_analysis_tools, check_sealed_for_code
from luca_gym.tools.table import Field, per_session, spec_of, tool, tool_table
from luca_gym.validate import check_keys, check_seed
from luca_gym.worlds.biobank import analysis
from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.oracle import (CHANGES, EXPERIMENTS, POINTS, SCORER_VERSION, SURROGATE_PENALTY, Claims,
                                           check_claims, tested_from, zero_scores)
from luca_gym.worlds.biobank.phenotype_file import MAX_PATH, MAX_PHENOTYPE_FILE, read_phenotype_file
from luca_gym.worlds.biobank.tool_args import (ANNOTATIONS, MAX_CONDITIONAL, MAX_DEFINED, MAX_REFERENCE, MAX_TERMS, Abstention,
                                               Adjust, Nomination, Protein, Proteins, Reference, Rejection, Term, Top,
                                               submit_description, submitted_phenotype)
from luca_gym.worlds.biobank.release import CARDIAC_CODES, CODES, COVARIATES, PARTICIPANT_TABLES, SENTINELS
from luca_gym.worlds.biobank.world import make_world

# What a session with the python tool drops unless asked to keep them (the paper's code agents had none of them).
ANALYSIS_TOOLS = ("describe_release", "column_summary", "define_phenotype", "validate_phenotype", "association_scan", "cis_mr",
                  "conditional_analysis", "protein_qc", "survival_association", "visit_change")
OUTCOMES = {"cv_event": "cv_event_time_years", "cardiac_death": "cardiac_death_time_years",
            "all_cause_death": "all_cause_death_time_years"}  # survival_association's outcomes: event column -> its time
MIN_EVENTS = 5  # events a survival fit needs
# visit_change's measures: the visits table's column (or a protein) -> its baseline column
VISIT_BASELINE = {**{c: f"imaging.{c}" for c in ("lvef_pct", "lvedv_ml", "max_wall_thickness_mm", "lv_mass_g", "native_t1_ms",
                                                 "wall_motion_score_index")}, "ntprobnp_pg_ml": "physiology.ntprobnp_pg_ml"}
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_PARTICIPANT = re.compile(r"P[0-9]{6}")


def _number(x, digits: int = 6):
    """A finite float rounded to ``digits`` significant digits, or None (JSON has no NaN)."""
    x = float(x)
    if not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


class BiobankToolSession(ToolSessionBase):
    """One biobank session: world ``seed`` (sealed: of its sealed seed) under
    :class:`~.config.BiobankConfig` settings (``profile``, ``tier``, ``budget``).
    ``python=True`` offers the ``python`` tool (sealed sessions only; ``limits``
    a :class:`~luca_gym.sandbox.Limits`, ``isolation`` the sandbox's,
    ``turns`` the session's bound, the paper harness's 30 by default:
    :meth:`~luca_gym.tools.session.ToolSessionBase.open_sandbox`) and
    ``submit``'s ``phenotype_file``, and drops the structured analysis tools
    (:data:`ANALYSIS_TOOLS`) unless ``analysis_tools=True``. ValueError names
    a bad seed or setting; SandboxUnavailable says why no sandbox can run
    code here."""

    world = "biobank"
    offers_python = True
    analysis_tool_names = ANALYSIS_TOOLS
    opening = "The release is ready. Begin."
    status_keys = ("submissions_left", "budget_left")
    title = "luca-gym biobank"

    def __init__(self, seed: int = 0, *, sealed=None, python: bool = False, limits: Limits | None = None,
                 isolation: str = "auto", turns: int | None = PYTHON_TURNS, analysis_tools: bool = False, **settings):
        super().__init__()
        check_keys(settings, "settings", ("profile", "tier", "budget"))
        self.config = BiobankConfig(**settings)
        self.seal = seal_mod.make_seal(sealed)
        self.seed = check_seed(seed)
        if not isinstance(python, bool):
            raise ValueError(f"python: {python!r} not allowed; True or False")
        check_analysis_tools(type(self), python, analysis_tools)
        if python:  # before the world is generated
            check_sealed_for_code(self.seal)
        world = make_world(self.seed, self.config, self.seal)
        self.release, self._oracle, self._design = world.release, world.oracle, world.design
        self.instance_id = seal_mod.instance_id(self.seed, self.seal, prefix="biobank")
        self.defined: dict[str, np.ndarray] = {}
        self.submitted = False
        self.budget_left = self.config.dollars
        self.audit: list[dict] = []  # every experiment request and delivery, for the record (never an observation)
        self._world_seed = world.world_seed
        self._phenotype_file = python  # submit's phenotype_file: only where the python tool writes files
        self._phenotype_named = not python or analysis_tools  # a defined phenotype to name: only with the structured tools
        self.set_specs([spec_of(handler, self.config, self) for handler in self.tools.values()])
        if python:  # the generic python tool (ToolSessionBase.open_sandbox): sealed only, PYTHON_TURNS turns
            sandbox = self.open_sandbox("The release: one Parquet file per table and data_dictionary.json / .md", limits,
                                        isolation, turns, analysis_tools)
            self.release.write(sandbox.release_dir)

    # -- the generic surface ------------------------------------------------------------
    def system_prompt(self) -> str:
        """The world's rules for an agent: the cohort's sizes, the task, the
        budget and the experiments' prices, the tools that analyse the data
        (the structured tools, the python tool or both, as the session
        offers them), how to name columns and submit a phenotype, the points
        (from the oracle's :data:`~.oracle.POINTS`) and, in a session that
        runs code, its turns. Nothing of the world's design or seed."""
        n = self.config.sizes
        points = ", ".join(f"{name.replace('_', ' ')} {p:g}" for name, p in POINTS.items())
        structured = ("The structured tools analyse the released data for you; describe_release lists it. Name a column as "
                      "table.column (e.g. imaging.lvef_pct), a diagnosis as diagnoses.<ICD-10 code> (e.g. diagnoses.I50.9), or "
                      "a phenotype you defined with define_phenotype. Sentinel codes (-999 not recorded, -1 below the limit of "
                      "detection) count as missing in every tool.")
        code = f"The python tool runs your own code on the release's Parquet files in {WORKDIR}/{RELEASE}"
        by_file = (f"Submit a phenotype computed there as a file: write its columns participant_id and value to a Parquet or "
                   f"CSV file in {WORKDIR} (e.g. df[['participant_id', 'value']].to_parquet('phenotype.parquet', index=False)) "
                   "and give submit phenotype_file='phenotype.parquet'; participants it leaves out count as missing.")
        if self.sandbox is None:
            analysis = structured
        elif self.analysis_tools:
            analysis = f"{structured} {code}; the structured tools do not see its files or variables. {by_file}"
        else:
            analysis = (f"{code} (data_dictionary.md describes the tables, their columns, units and missing-value codes: "
                        "-999 not recorded, -1 below the limit of detection); there are no structured analysis tools. "
                        f"{by_file} submit's phenotype also takes a released column by name (table.column, e.g. "
                        "imaging.lvef_pct).")
        return (
            f"You are analysing a population biobank: {n.participants} participants with covariates, plasma proteomics "
            f"({n.proteins} proteins, PROT_0001 to PROT_{n.proteins:04d}), genotypes ({n.variants} variants), physiology, "
            f"a resting ECG, metabolites, dated diagnoses (by baseline and over follow-up) and five-year outcomes (a "
            f"cardiovascular event, all-cause and cardiac death); {n.imaged} have cardiac MRI and CT measures, {n.imaged // 2} of "
            f"them repeat MRI, NT-proBNP and proteins at a follow-up visit (visits, "
            f"visit_proteins), and {n.rna} have transcripts. "
            "Some cardiac disease runs through this cohort. Its severity is never measured directly: build a participant-level "
            "phenotype that tracks it. Then find the proteins that causally drive the disease (there may be none), and the "
            "direction to move each to treat it (down: lower, inhibit; up: raise, activate). Some proteins are associated with "
            "the disease without causing it.\n\n"
            f"Your experiment budget is ${self.config.dollars:,}: cell perturbation costs $150,000, knockdown $400,000. "
            "Observational genetic direction may fail under pleiotropy or reverse causation, and a marker can improve "
            "measurement while harming patients; experiments can resolve those cases.\n\n"
            + analysis
            + (f" The session allows {self.turn_limit} turns (calls of any tool); then it ends, and without a submission "
               "every score is 0." if self.turn_limit is not None else "")
            + "\n\n"
            "Submit once with submit; the session ends. Points out of 100: "
            f"{points}; nominating a harmful surrogate in the direction that harms patients costs {-SURROGATE_PENALTY:g}, "
            "however it is labelled. Target identification is recall times precision: extra nominations cost. "
            "Outcome alignment labels are optional and count on a driver nominated in its right direction; a wrong label "
            "costs more than none. Where two proteins share one genetic instrument and observation cannot tell which "
            "drives the disease, nominating one earns full credit only when your own experiment, of a kind that can "
            "separate the two, supports it; or abstain on the pair (half credit); an abstention on proteins observation "
            "can tell apart counts as a false nomination. The phenotype earns points only above a held-out baseline. "
            "Rejections name the mechanism that makes a protein look causal; a rejection counts as right only for a "
            "protein the release shows that mechanism fooling, and rejecting a true driver costs."
        )

    def status(self) -> dict:
        """What every answer reports, a refusal too: ``submissions_left`` (1
        until the session ends, then 0), ``budget_left`` (dollars) and, in a
        session with a turn limit (one that runs code), ``turns_left``."""
        if self.turn_limit is not None:
            return {"submissions_left": int(not self.ended), "budget_left": int(self.budget_left),
                    "turns_left": max(self.turn_limit - self.turns, 0)}
        return {"submissions_left": int(not self.ended), "budget_left": int(self.budget_left)}

    def key_settings(self) -> dict:
        """The session's key settings but the seed (``profile``, ``tier``,
        ``budget``), for a results line of a session driven from outside the harness."""
        return self.config.settings()

    def record_fields(self) -> dict:
        """What a results line holds beside its key, calls and scores: the
        instance id (opaque when sealed), the world's design (archetype,
        drivers, tier, planted biases: the report's design table reads it; a
        results line, never an answer to the agent) and the scorer's version."""
        return {"instance_id": self.instance_id, "design": self._design.as_dict(), "scorer_version": SCORER_VERSION}

    def record(self) -> dict:
        """The session as one JSON-ready record: the generic one (calls,
        scores, return, end reason) with the instance id and the audit log of
        experiments (each request and its delivery, in order)."""
        return {"instance_id": self.instance_id, **super().record(), "experiments": [dict(e) for e in self.audit]}

    def annotations(self, name: str) -> dict | None:
        """MCP ToolAnnotations fields of tool ``name`` (:data:`ANNOTATIONS`:
        title and read-only, idempotent and destructive hints), or None."""
        return ANNOTATIONS.get(name)

    def demo_calls(self) -> list[tuple[str, dict]]:
        """Describe, scan against the ejection fraction, submit no nomination with that phenotype."""
        return [("describe_release", {}), ("association_scan", {"phenotype": "imaging.lvef_pct", "top": 3}),
                ("submit", {"nominations": [], "phenotype": "imaging.lvef_pct"})]

    def dispatch(self, name: str, args: dict) -> dict:
        """Run a call whose arguments passed its schema (``python`` runs in the
        generic base): the tool's answer with the status; after the end, or
        where the release refuses a name or the budget a cost, a refusal
        (``{"error": ...}``) that changes nothing."""
        if self.ended:
            return self.error("the session has ended")
        try:
            return self.tools[name](self, **args)
        except ValueError as exc:
            return self.error(f"{name}: {exc}; nothing changed")

    # -- resolving names ----------------------------------------------------------------
    def _allowed_references(self) -> str:
        columns = f"a column 'table.column' of {', '.join(PARTICIPANT_TABLES)}, 'diagnoses.<ICD-10 code>' ({', '.join(CODES)})"
        if "define_phenotype" not in self.tool_names:
            return columns
        return f"{columns} or a phenotype you defined ({', '.join(sorted(self.defined)) or 'none yet'})"

    def resolve(self, reference: str, what: str = "phenotype") -> np.ndarray:
        """float64 (N,) of a column, diagnosis indicator or defined phenotype; ValueError naming what is allowed."""
        if reference in self.defined:
            return self.defined[reference]
        table, _, column = reference.partition(".")
        if table == "diagnoses" and column in CODES:
            d = self.release.tables["diagnoses"]
            has = np.zeros(self.config.sizes.participants)
            has[self._row_of(d["participant_id"][d["icd10"] == column])] = 1.0
            return has
        if table in PARTICIPANT_TABLES and column in self.release.tables[table] and column != "participant_id":
            return self.release.numeric(table, column)
        raise ValueError(f"{what}: {reference[:MAX_REFERENCE]!r} unknown; allowed {self._allowed_references()}")

    def _row_of(self, ids) -> np.ndarray:
        """Participant rows of ids (every id of the release: 'P000001' is row 0)."""
        return np.array([int(i[1:]) - 1 for i in ids], np.int64)

    def _participant_values(self, ids: list, values, what: str) -> np.ndarray:
        """float64 (N,): ``values`` at the rows of participant ``ids`` (strings),
        NaN (missing) for the participants left out; ValueError (``what``)
        for ids the release does not hold or that appear twice."""
        n = self.config.sizes.participants
        unknown = [i for i in ids if not (isinstance(i, str) and _PARTICIPANT.fullmatch(i) and 1 <= int(i[1:]) <= n)]
        if unknown:
            raise ValueError(f"{what}: {_count(len(unknown), 'participant id')} {'is' if len(unknown) == 1 else 'are'} not "
                             f"in the release (first: {str(unknown[0])[:16]!r}; its ids run P000001..P{n:06d})")
        twice = [i for i, k in collections.Counter(ids).items() if k > 1]
        if twice:
            raise ValueError(f"{what}: {_count(len(twice), 'participant id')} appear{'s' if len(twice) == 1 else ''} more "
                             f"than once (first: {twice[0]!r}); give each participant one value")
        out = np.full(n, np.nan)
        out[self._row_of(ids)] = np.asarray(values, np.float64)
        return out

    def _protein_indices(self, names) -> np.ndarray:
        index = {p: i for i, p in enumerate(self.release.proteins)}
        for name in names:
            if name not in index:
                raise ValueError(f"proteins: {name[:16]!r} is not a protein of the release (PROT_0001..PROT_{len(index):04d})")
        if len(set(names)) != len(names):
            raise ValueError("proteins: a protein is named twice")
        return np.array([index[n] for n in names], np.int64)

    # -- the tools ----------------------------------------------------------------------
    @tool(description="Free. The release's tables (rows, columns, units, missing-value codes); give a table for its "
                      "columns only.")
    def describe_release(self, table: Annotated[str, Field(enum=per_session(lambda s: list(s.release.tables)))] | None = None
                         ) -> dict:
        """The agent's ``describe_release`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        dictionary = self.release.dictionary()
        if table is not None:
            return {"table": table, **dictionary["tables"][table], **self.status()}
        tables = [{"table": name, "file": t["file"], "rows": t["rows"], "description": t["description"],
                   "columns": [c for c in t["columns"]] + ([f"{t['column_group']['pattern']} x{t['column_group']['count']}"]
                                                          if "column_group" in t else [])}
                  for name, t in dictionary["tables"].items()]
        return {"release": dictionary["release"], "missing_values": dictionary["missing_values"],
                "cis_window_kb": dictionary["cis_window_kb"], "tables": tables, **self.status()}

    @tool(description="Free. A column's count, missing values, sentinel codes and quantiles (diagnoses.icd10: each code's count).")
    def column_summary(self, column: Reference) -> dict:
        """The agent's ``column_summary`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        if column == "diagnoses.icd10":
            codes, counts = np.unique(self.release.tables["diagnoses"]["icd10"], return_counts=True)
            return {"column": column, "codes": {str(c): int(k) for c, k in zip(codes, counts)},
                    "descriptions": {c: CODES[c] for c in codes}, **self.status()}
        values = self.resolve(column, "column")
        table, _, name = column.partition(".")
        out = {"column": column}
        if table in self.release.rows and name in self.release.tables[table]:  # a released column: its own rows and codes
            raw = np.asarray(self.release.tables[table][name], np.float64)
            coded = np.isin(raw, list(SENTINELS)) if table in ("participants", "physiology") else np.zeros(len(raw), bool)
            out.update(rows=len(raw), missing=int(np.isnan(raw).sum()),
                       sentinels={f"{code:g}": int((raw[coded] == code).sum()) for code in SENTINELS if (raw[coded] == code).any()})
            present = raw[np.isfinite(raw) & ~coded]
        else:  # a diagnosis indicator or a defined phenotype: over every participant
            out.update(rows=len(values), missing=int(np.isnan(values).sum()))
            present = values[np.isfinite(values)]
        out["n"] = int(len(present))
        if len(present):
            q = np.quantile(present, [0.0, 0.25, 0.5, 0.75, 1.0])
            out.update(mean=_number(present.mean()), sd=_number(present.std()), min=_number(q[0]), q25=_number(q[1]),
                       median=_number(q[2]), q75=_number(q[3]), max=_number(q[4]))
        return {**out, **self.status()}

    @tool(description="Free. Define a participant-level phenotype: the weighted sum of columns (each standardised to mean 0, "
                      "SD 1 unless standardize is false; missing where any term is), optionally adjusted for the covariates. "
                      f"Other tools and submit take its name. At most {MAX_DEFINED}; a name given again is replaced.")
    def define_phenotype(self, name: Annotated[str, Field(min_length=1, max_length=32, description="lower case, digits and _")],
                         terms: Annotated[list[Term], Field(min_items=1, max_items=MAX_TERMS)], standardize: bool = True,
                         adjust: Adjust = False) -> dict:
        """The agent's ``define_phenotype`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        if not _NAME.fullmatch(name) or "." in name:
            raise ValueError(f"name: {name[:32]!r} not allowed; lower-case letters, digits and _, starting with a letter")
        if name not in self.defined and len(self.defined) >= MAX_DEFINED:
            raise ValueError(f"name: {MAX_DEFINED} phenotypes are defined already ({', '.join(sorted(self.defined))}); "
                             "give one of their names to replace it")
        total = np.zeros(self.config.sizes.participants)
        for i, term in enumerate(terms):
            values = self.resolve(term["column"], f"terms[{i}].column")
            if term.get("log", False):
                if (values[np.isfinite(values)] <= 0).any():
                    raise ValueError(f"terms[{i}].log: {term['column'][:MAX_REFERENCE]!r} has values <= 0")
                values = np.log(values)
            if standardize:
                sd = np.nanstd(values) if np.isfinite(values).sum() > 1 else 0.0
                if not sd > 0:
                    raise ValueError(f"terms[{i}].column: {term['column'][:MAX_REFERENCE]!r} does not vary; it cannot be standardised")
                values = (values - np.nanmean(values)) / sd
            total = total + term["weight"] * values
        if adjust:
            rows = np.isfinite(total)
            z = np.c_[np.ones(rows.sum()), self.release.covariates()[rows]]
            coef, *_ = np.linalg.lstsq(z, total[rows], rcond=None)
            total[rows] = total[rows] - z @ coef
        n = int(np.isfinite(total).sum())
        if n < 3:
            raise ValueError(f"terms: {n} participants have every term; a phenotype needs at least 3")
        replaced = name in self.defined
        self.defined[name] = total
        present = total[np.isfinite(total)]
        return {"phenotype": name, "replaced": replaced, "n": n, "mean": _number(present.mean()), "sd": _number(present.std()),
                **self.status()}

    @tool(description="Free. A phenotype's Pearson correlation with the clinical endpoints: the five-year cardiovascular "
                      "event, log NT-proBNP and a recorded cardiac diagnosis.")
    def validate_phenotype(self, phenotype: Reference) -> dict:
        """The agent's ``validate_phenotype`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        y = self.resolve(phenotype)
        bnp = self.release.numeric("physiology", "ntprobnp_pg_ml")
        cardiac = np.zeros_like(y)
        d = self.release.tables["diagnoses"]
        cardiac[self._row_of(d["participant_id"][np.isin(d["icd10"], CARDIAC_CODES)])] = 1.0
        endpoints = {"cv_event": self.release.numeric("outcomes", "cv_event"),
                     "log_ntprobnp": np.log(np.where(bnp > 0, bnp, np.nan)), "cardiac_diagnosis": cardiac}
        out = {}
        for name, values in endpoints.items():
            r, n = analysis.correlation(y, values)
            out[name] = {"r": None if r is None else _number(r, 4), "n": n}
        return {"phenotype": phenotype, "n": int(np.isfinite(y).sum()), "endpoints": out, **self.status()}

    @tool(description="Free. Each protein's linear association with a phenotype (beta per NPX unit, SE, p, Benjamini-Hochberg q).")
    def association_scan(self, phenotype: Reference, adjust: Adjust = True, top: Top = 20) -> dict:
        """The agent's ``association_scan`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        y = self.resolve(phenotype)
        beta, se, n, p, q = analysis.association_scan(self.release, y, adjust)
        rows = [{"protein": self.release.proteins[i], "beta": _number(beta[i]), "se": _number(se[i]), "p": _number(p[i]),
                 "q": _number(q[i]), "n": int(n[i])} for i in _order(p)[:top]]
        return {"phenotype": phenotype, "adjusted": adjust, "tested": int(np.isfinite(p).sum()),
                "significant_q05": int((q < 0.05).sum()), "results": rows, **self.status()}

    @tool(description="Free. Mendelian randomisation with each protein's cis instrument (the variant in its cis window most "
                      "associated with it): the Wald ratio (phenotype units per NPX unit), its SE, p, q and the "
                      "instrument's F statistic. All proteins unless named.")
    def cis_mr(self, phenotype: Reference, proteins: Proteins | None = None, adjust: Adjust = True, top: Top = 20) -> dict:
        """The agent's ``cis_mr`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        y = self.resolve(phenotype)
        index = np.arange(len(self.release.proteins)) if proteins is None else self._protein_indices(proteins)
        mr = analysis.cis_mr(self.release, y, index, adjust)
        variants = self.release.variant_ids
        rows = [{"protein": self.release.proteins[index[j]],
                 "instrument": variants[mr["variant"][j]] if mr["variant"][j] >= 0 else None,
                 "instrument_f": _number(mr["f"][j], 4), "beta_exposure": _number(mr["beta_exposure"][j]),
                 "beta_outcome": _number(mr["beta_outcome"][j]), "se_outcome": _number(mr["se_outcome"][j]),
                 "wald_ratio": _number(mr["ratio"][j]), "se": _number(mr["se"][j]), "p": _number(mr["p"][j]),
                 "q": _number(mr["q"][j]), "n": int(mr["n_outcome"][j])} for j in _order(mr["p"])[:top]]
        return {"phenotype": phenotype, "adjusted": adjust, "tested": int(np.isfinite(mr["p"]).sum()),
                "significant_q05": int((mr["q"] < 0.05).sum()), "results": rows, **self.status()}

    @tool(description="Free. At a variant's locus: the phenotype regressed on the locus's cis proteins jointly (two-stage "
                      "least squares, the locus's variants as instruments), beside each protein's single-instrument Wald "
                      "ratio: which proteins the locus's effect runs through. Proteins: those whose cis window holds the "
                      f"variant (the first {MAX_CONDITIONAL}; the others listed as not_tested), unless named (at most "
                      f"{MAX_CONDITIONAL}).")
    def conditional_analysis(self, variant: Annotated[str, Field(max_length=16)], phenotype: Reference,
                             proteins: Annotated[list[Protein], Field(min_items=1, max_items=MAX_CONDITIONAL)] | None = None,
                             adjust: Adjust = True) -> dict:
        """The agent's ``conditional_analysis`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        ids = self.release.variant_ids
        if variant not in ids:
            raise ValueError(f"variant: {variant[:16]!r} is not a variant of the release (the variants table)")
        v = ids.index(variant)
        y = self.resolve(phenotype)
        near, cis = analysis.locus(self.release, v)
        index = cis if proteins is None else self._protein_indices(proteins)
        if not len(index):
            raise ValueError(f"variant: no protein's cis window holds {variant}; name the proteins to test")
        left_out = [self.release.proteins[i] for i in index[MAX_CONDITIONAL:]]
        index = index[:MAX_CONDITIONAL]
        joint = analysis.conditional(self.release, y, v, index, adjust)
        single = analysis.cis_mr(self.release, y, index, adjust)
        table = self.release.tables["variants"]
        rows = [{"protein": self.release.proteins[i], "joint_beta": _number(joint["beta"][j]), "joint_se": _number(joint["se"][j]),
                 "joint_p": _number(joint["p"][j]), "first_stage_f": _number(joint["first_stage_f"][j], 4),
                 "single_instrument": ids[single["variant"][j]] if single["variant"][j] >= 0 else None,
                 "single_wald_ratio": _number(single["ratio"][j]), "single_p": _number(single["p"][j])}
                for j, i in enumerate(index)]
        positions = np.asarray(table["position"])[near]
        return {"variant": variant, "phenotype": phenotype, "adjusted": adjust,
                "locus": {"chromosome": int(table["chromosome"][v]), "start": int(positions.min()), "end": int(positions.max()),
                          "instruments": [ids[i] for i in joint["variants"]]},
                "n": joint["n"], "proteins": rows, **({"not_tested": left_out} if left_out else {}), **self.status()}

    @tool(description="Free. Each protein's quality-control profile: connectivity (mean |r| with the other proteins), "
                      "site_shift (the largest difference of one site's mean from the others', in SDs) and shift_site, "
                      "bimodality (Sarle's coefficient; 1/3 normal, above 0.555 two modes), Pearson r with age, sex, BMI "
                      "and exercise, and imaged_shift (the imaged participants' mean minus the others', in SDs). All "
                      "proteins unless named; rows by sort_by, largest absolute value first (connectivity: smallest first).")
    def protein_qc(self, proteins: Proteins | None = None,
                   sort_by: Annotated[str, Field(enum=analysis.QC_FIELDS)] = "site_shift", top: Top = 20) -> dict:
        """The agent's ``protein_qc`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        qc = analysis.protein_qc(self.release)
        index = np.arange(len(self.release.proteins)) if proteins is None else self._protein_indices(proteins)
        key = qc[sort_by][index]
        order = np.argsort(np.where(np.isfinite(key), key if sort_by == "connectivity" else -np.abs(key), np.inf), kind="stable")
        rows = [{"protein": self.release.proteins[i], **{f: _number(qc[f][i], 4) for f in analysis.QC_FIELDS},
                 "shift_site": int(qc["shift_site"][i])} for i in index[order[:top]]]
        return {"sort_by": sort_by, "tested": int(len(index)), "results": rows, **self.status()}

    def _exposure(self, reference: str) -> np.ndarray:
        """float64 (N,) of a protein named bare (PROT_####) or of any reference :meth:`resolve` takes."""
        if isinstance(reference, str) and reference in self.release.proteins:
            return self.release.numeric("proteins", reference)
        return self.resolve(reference, "exposure")

    @tool(description="Free. A protein's (PROT_####) or a column's or phenotype's association with survival over five "
                      "years: the hazard ratio per SD of the exposure (Cox proportional hazards, Breslow ties), its 95% "
                      "CI, log hazard ratio, SE and p, the participants and events, and the crude event rates per 1,000 "
                      "person-years by thirds of the exposure. Outcomes: cv_event (heart-failure hospitalisation or "
                      "cardiac death), cardiac_death, all_cause_death.")
    def survival_association(self, exposure: Annotated[str, Field(
            min_length=1, max_length=MAX_REFERENCE,
            description="a protein (PROT_####), a column 'table.column', 'diagnoses.<ICD-10 code>' or a phenotype you defined")],
            outcome: Annotated[str, Field(enum=OUTCOMES, description="default cv_event")] = "cv_event",
            adjust: Adjust = True) -> dict:
        """The agent's ``survival_association`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        if not isinstance(outcome, str) or outcome not in OUTCOMES:
            raise ValueError(f"outcome: {str(outcome)[:32]!r} not allowed; allowed {', '.join(OUTCOMES)}")
        x = self._exposure(exposure)
        event = self.release.numeric("outcomes", outcome)
        time = self.release.numeric("outcomes", OUTCOMES[outcome])
        rows = np.isfinite(x) & np.isfinite(event) & np.isfinite(time) & (time > 0)
        n, events = int(rows.sum()), int(event[rows].sum())
        if events < MIN_EVENTS:
            raise ValueError(f"exposure: {n} participants with {str(exposure)[:MAX_REFERENCE]!r} have {events} {outcome} "
                             f"events; a survival fit needs at least {MIN_EVENTS}")
        sd = float(x[rows].std())
        if not sd > 0:
            raise ValueError(f"exposure: {str(exposure)[:MAX_REFERENCE]!r} does not vary")
        z = ((x[rows] - x[rows].mean()) / sd)[:, None]
        if adjust:
            c = self.release.covariates()[rows]
            spread = c.std(0) > 0
            z = np.c_[z, (c[:, spread] - c[:, spread].mean(0)) / c[:, spread].std(0)]
        fit = analysis.cox(time[rows], event[rows] > 0, z)
        beta, se = float(fit["beta"][0]), float(fit["se"][0])
        third = np.quantile(x[rows], [1 / 3, 2 / 3])
        group = np.searchsorted(third, x[rows], side="right")
        rates = {}
        for g, name in enumerate(("lowest_third", "middle_third", "highest_third")):
            at = group == g
            years = float(time[rows][at].sum())
            rates[name] = {"n": int(at.sum()), "events": int(event[rows][at].sum()),
                           "per_1000_person_years": _number(1000 * event[rows][at].sum() / years, 4) if years > 0 else None}
        return {"exposure": exposure, "outcome": outcome, "adjusted": adjust, "n": n, "events": events,
                "person_years": _number(time[rows].sum(), 6), "exposure_sd": _number(sd),
                "hazard_ratio_per_sd": _number(math.exp(beta), 4),
                "ci95": [_number(math.exp(beta - 1.959964 * se), 4), _number(math.exp(beta + 1.959964 * se), 4)],
                "log_hazard_ratio": _number(beta), "se": _number(se), "p": _number(analysis.normal_p(beta / se)[()]) if se > 0 else None,
                "converged": bool(fit["converged"]), "rates_by_exposure": rates,
                "method": "Cox proportional hazards (Breslow ties), per SD of the exposure"
                          + (f"; adjusted for {', '.join(COVARIATES)}" if adjust else ""), **self.status()}

    @tool(description="Free. A measure's change from baseline to the follow-up visit (half the imaged, 2-3.5 years "
                      "on): an MRI measure or ntprobnp_pg_ml of the visits table, or a protein (PROT_####): the paired "
                      "means, the mean change (SE, p) and the mean change per year; with an exposure, the annual change "
                      "regressed on the exposure (per SD; adjusted for the baseline value and, unless adjust is false, "
                      "the covariates).")
    def visit_change(self, measure: Annotated[str, Field(
            min_length=1, max_length=MAX_REFERENCE,
            description="a column of the visits table (e.g. lvef_pct or visits.lvef_pct) or a protein")],
            exposure: Annotated[str, Field(min_length=1, max_length=MAX_REFERENCE,
                                           description="optional: a protein (PROT_####), a column or a phenotype")] | None = None,
            log: Annotated[bool, Field(description="natural log of the measure first (positive values only; "
                                                    "default false)")] = False,
            adjust: Adjust = True) -> dict:
        """The agent's ``visit_change`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        name = measure[len("visits."):] if isinstance(measure, str) and measure.startswith("visits.") else measure
        if name in VISIT_BASELINE:
            baseline, visit = self.resolve(VISIT_BASELINE[name], "measure"), self.release.numeric("visits", name)
        elif name in self.release.proteins:
            baseline, visit = self.release.numeric("proteins", name), self.release.numeric("visit_proteins", name)
        else:
            raise ValueError(f"measure: {str(measure)[:MAX_REFERENCE]!r} unknown; allowed a column of the visits table "
                             f"({', '.join(VISIT_BASELINE)}) or a protein (PROT_0001..PROT_{len(self.release.proteins):04d})")
        x = None if exposure is None else self._exposure(exposure)
        if log:
            for values in (baseline, visit):
                if (values[np.isfinite(values)] <= 0).any():
                    raise ValueError(f"log: {str(measure)[:MAX_REFERENCE]!r} has values <= 0")
            baseline, visit = np.log(baseline), np.log(visit)
        years = self.release.numeric("visits", "visit_years")
        out = analysis.paired_change(baseline, visit, years, x, self.release.covariates() if adjust else None)
        return {"measure": measure, "log": log, **({"exposure": exposure, "adjusted": adjust} if exposure is not None else {}),
                **{k: (int(v) if k in ("n", "exposure_n") else _number(v)) for k, v in out.items()},
                **self.status()}

    @tool(description="Paid from your budget. Lower a protein by 1 SD against a control sharing everything else: "
                      "cell_perturbation ($150,000; n = 120, the first-visit effect, with assay noise) gives the effect on "
                      "the imaging measure of disease (SD of severity, + is worse); knockdown ($400,000; n = 800, "
                      "five-year follow-up, no assay noise) gives that and the effect on the five-year event log hazard. Each an estimate with its SE. "
                      "Refused (costing nothing) over budget.")
    def experiment(self, protein: Protein, kind: Annotated[str, Field(enum=EXPERIMENTS)]) -> dict:
        """The agent's ``experiment`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        if not isinstance(kind, str) or kind not in EXPERIMENTS:
            raise ValueError(f"kind: {str(kind)[:32]!r} not allowed; allowed {', '.join(EXPERIMENTS)}")
        if protein not in self.release.proteins:
            raise ValueError(f"protein: {str(protein)[:16]!r} is not a protein of the release")
        cost = EXPERIMENTS[kind]["cost"]
        if cost > self.budget_left:
            raise ValueError(f"kind: {kind} costs ${cost:,}, over the budget left (${self.budget_left:,})")
        delivery = self._oracle.experiment(self._world_seed, protein, kind, len(self.audit))
        self.budget_left -= cost
        self.audit.append({"index": len(self.audit), "protein": protein, "kind": kind, "cost": cost, "delivery": delivery})
        return {**delivery, "cost": cost, **self.status()}

    @tool(description=per_session(submit_description))
    def submit(self, nominations: Annotated[list[Nomination], Field(max_items=lambda c: c.sizes.proteins)],
               rejections: Annotated[list[Rejection], Field(max_items=lambda c: c.sizes.proteins)] | None = None,
               abstentions: Annotated[list[Abstention], Field(max_items=lambda c: c.sizes.proteins // 2)] | None = None,
               scorer_version: Annotated[str, Field(
                   max_length=8, description=f"optional: the scorer version the claims were written for ({SCORER_VERSION}); "
                                             "claims written for another are refused")] | None = None,
               phenotype: Annotated[str, Field(min_length=1, max_length=MAX_REFERENCE,
                                               description=per_session(submitted_phenotype))] | None = None,
               phenotype_values: Annotated[dict[str, float], Field(max_properties=lambda c: c.sizes.participants)] | None = None,
               phenotype_file: Annotated[str | None, Field(
                   min_length=1, max_length=MAX_PATH, when=per_session(lambda s: s._phenotype_file),
                   description=f"a path relative to {WORKDIR} (e.g. 'phenotype.parquet'): a .parquet or .csv file with "
                               "columns participant_id and value, one row a participant, at most "
                               f"{MAX_PHENOTYPE_FILE >> 20} MiB")] = None) -> dict:
        """The agent's ``submit`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        if scorer_version is not None and scorer_version != SCORER_VERSION:
            raise ValueError(f"scorer_version: claims written for scorer version {scorer_version[:8]!r} are refused; this "
                             f"scorer is version {SCORER_VERSION} ({CHANGES})")
        claims = check_claims(nominations, rejections or [], self.release.proteins, abstentions or [])
        claims = Claims(claims.nominations, claims.rejections, abstentions=claims.abstentions,
                        tested=tested_from(e["delivery"] for e in self.audit))  # the pair logic's "own experiments"
        given = [k for k, v in (("phenotype", phenotype), ("phenotype_values", phenotype_values),
                                ("phenotype_file", phenotype_file)) if v is not None]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)}: give one of them at most")
        values = None
        if phenotype is not None:
            values = self.resolve(phenotype)
        elif phenotype_values is not None:
            values = self._participant_values(list(phenotype_values), list(phenotype_values.values()), "phenotype_values")
        elif phenotype_file is not None:  # only a session with the python tool offers it (its schema)
            if self.sandbox.closed:
                raise ValueError("phenotype_file: the sandbox was closed (its env or server closed the session); "
                                 "its folder is gone")
            n = self.config.sizes.participants
            ids, file_values = read_phenotype_file(self.sandbox, phenotype_file, n, len(f"P{n:06d}"))  # read in the sandbox
            values = self._participant_values(ids, file_values, "phenotype_file")
        scored = claims if values is None else Claims(claims.nominations, claims.rejections, values[self.release.rows["imaging"]],
                                                      claims.abstentions, claims.tested)
        self.scores = self._oracle.score(scored)
        return self._finish()

    @tool(description="End the session without claims (every score 0).")
    def end(self) -> dict:
        """The agent's ``end`` tool (its description, what the agent reads, is
        ``@tool``'s): the answer as a JSON-ready dict."""
        self.scores = zero_scores(self._oracle)
        return self._finish()

    def _finish(self) -> dict:
        self.total_reward = float(self.scores["total"])
        self.ended, self.end_reason = True, "end"
        return {"ended": True, "end_reason": "end", "scores": dict(self.scores), **self.status()}

    tools = tool_table(describe_release, column_summary, define_phenotype, validate_phenotype, association_scan, cis_mr,
                       conditional_analysis, protein_qc, survival_association, visit_change, experiment, submit, end)


def _order(p) -> np.ndarray:
    """Indices by p, smallest first, untested (NaN) last."""
    return np.argsort(np.where(np.isfinite(p), p, np.inf), kind="stable")


def _count(k: int, noun: str) -> str:
    return f"{k} {noun}{'' if k == 1 else 's'}"

"""The biobank world's baselines, as tool agents (callables ``(messages,
tools) -> AgentTurn``, new for each session) that read only what any agent
reads: the messages and the tool specs. Each analysis is one batched tool
call over every protein.

* ``null`` nominates nothing and submits no phenotype: the perfect answer in
  a null world, nothing elsewhere.
* ``correlation-screen`` picks a standard imaging phenotype (below), scans
  every protein's association with it (adjusted for age, sex, BMI and site)
  and nominates those with Benjamini-Hochberg q < :data:`Q` (direction from
  the sign: a protein that rises with disease is to be lowered; confidence
  :data:`SCREEN_CONFIDENCE`, association alone).
* ``cis-mr`` picks the same phenotype and nominates the proteins whose Wald
  ratio with their lead cis instrument has q < :data:`Q` and an instrument F
  of at least :data:`MIN_F` (direction from the ratio's sign; confidence
  :data:`MR_CONFIDENCE`, genetic evidence).
* ``mr-experiments`` runs cis-mr's analysis, then spends the session's
  budget (``budget_left`` in every answer) on experiments: a knockdown where
  the budget allows it, else a cell perturbation, first on the candidates
  that share a cis instrument (T4's pair: the locus cannot tell them apart),
  then on the others by p. A tested candidate whose imaging effect is not
  significant (|z| < :data:`EXPERIMENT_Z`) is dropped (rejected as a shared
  instrument when it was one of a pair); a knockdown whose five-year hazard
  moves against its imaging effect (z >= 1) is the harmful surrogate:
  dropped and rejected as such; a confirmed one is nominated with the
  experiment's direction at :data:`CONFIRMED_CONFIDENCE`. Untested
  candidates keep cis-mr's nomination, so with no budget it is cis-mr.

The standard imaging phenotype: the clinic MRI measure most correlated with
the clinical endpoints (the mean |r| over the five-year event, log NT-proBNP
and a cardiac diagnosis, from ``validate_phenotype``), oriented so that a
higher value is worse disease. Both submit it as their phenotype; it is
usually the held-out baseline measure, so earns no phenotype points.
"""

from __future__ import annotations

import json

import numpy as np

from luca_gym.llm.loop import AgentTurn, ToolCall, tool_results

Q = 0.05  # the false-discovery rate of a nomination
MIN_F = 10.0  # the weakest instrument cis-mr trusts
SCREEN_CONFIDENCE = 0.5
MR_CONFIDENCE = 0.8
CONFIRMED_CONFIDENCE = 0.95
EXPERIMENT_Z = 2.0  # the |z| of an experiment's imaging effect that confirms a candidate
COSTS = {"knockdown": 400_000, "cell_perturbation": 150_000}  # the prices the system prompt states
ALL = 5000  # "top" large enough for every protein (the tools' maximum)


def _call(name: str, arguments: dict, turn: int) -> AgentTurn:
    return AgentTurn(tool_calls=[ToolCall(name, arguments, f"call_{turn}")])


class Null:
    """Submit no nomination and no phenotype."""

    def __call__(self, messages, tools) -> AgentTurn:
        return _call("submit", {"nominations": []}, 0)


class _StandardPhenotype:
    """Find the standard imaging phenotype, run :meth:`analysis` on it, nominate what :meth:`nominate` keeps."""

    analysis = ""
    confidence = 0.0

    def __call__(self, messages, tools) -> AgentTurn:
        results = tool_results(messages)
        turn = len(results)
        imaging = next((r for r in results if r.get("table") == "imaging"), None)
        if imaging is None:
            return _call("describe_release", {"table": "imaging"}, turn)
        measures = [f"imaging.{c}" for c in imaging["columns"] if c != "participant_id"]
        checked = {r["phenotype"]: r["endpoints"] for r in results if "endpoints" in r}
        unchecked = [m for m in measures if m not in checked]
        if unchecked:
            return _call("validate_phenotype", {"phenotype": unchecked[0]}, turn)
        phenotype, orientation = standard_phenotype(checked)
        done = next((r for r in results if "results" in r and r.get("phenotype") == phenotype), None)
        if done is None:
            return _call(self.analysis, {"phenotype": phenotype, "top": ALL}, turn)
        nominations = [{"protein": row["protein"], "direction": "down" if self.sign(row) * orientation > 0 else "up",
                        "confidence": self.confidence} for row in done["results"] if self.keep(row)]
        return _call("submit", {"nominations": nominations, "phenotype": phenotype}, turn)

    def keep(self, row: dict) -> bool:
        raise NotImplementedError

    def sign(self, row: dict) -> float:
        raise NotImplementedError


def standard_phenotype(endpoints: dict) -> tuple[str, float]:
    """(the measure with the largest mean |r| over its endpoints, +1 or -1:
    the sign that makes a higher value worse disease), from
    ``{measure: validate_phenotype's endpoints}``; first in order on ties."""
    def strength(item):
        rs = [e["r"] for e in item[1].values() if e["r"] is not None]
        return sum(abs(r) for r in rs) / max(len(rs), 1)

    measure, chosen = max(endpoints.items(), key=strength)
    total = sum(e["r"] for e in chosen.values() if e["r"] is not None)
    return measure, 1.0 if total >= 0 else -1.0


class CorrelationScreen(_StandardPhenotype):
    """Association with the standard phenotype, q < Q."""

    analysis = "association_scan"
    confidence = SCREEN_CONFIDENCE

    def keep(self, row):
        """Whether a scan row is nominated: significant (q < Q)."""
        return row["q"] is not None and row["q"] < Q

    def sign(self, row):
        """The effect whose sign gives the direction: the observational beta."""
        return row["beta"]


class CisMR(_StandardPhenotype):
    """Wald ratios with the lead cis instruments, q < Q and F >= MIN_F."""

    analysis = "cis_mr"
    confidence = MR_CONFIDENCE

    def keep(self, row):
        """Whether a scan row is nominated: significant (q < Q) with a strong instrument (F >= MIN_F)."""
        return row["q"] is not None and row["q"] < Q and row["instrument_f"] is not None and row["instrument_f"] >= MIN_F

    def sign(self, row):
        """The effect whose sign gives the direction: the Wald ratio."""
        return row["wald_ratio"]


class MRExperiments(CisMR):
    """cis-mr, then experiments on its candidates while the budget lasts (shared-instrument pairs first)."""

    def __call__(self, messages, tools) -> AgentTurn:
        turn = super().__call__(messages, tools)
        if turn.tool_calls[0].name != "submit":
            return turn
        results = tool_results(messages)
        args = turn.tool_calls[0].arguments
        nominated = args["nominations"]
        shared: dict = {}
        done = next(r for r in results if "results" in r and r.get("phenotype") == args["phenotype"])
        for row in done["results"]:
            if self.keep(row):
                shared.setdefault(row["instrument"], []).append(row["protein"])
        paired = {p for group in shared.values() if len(group) > 1 for p in group}
        tested = {r["protein"]: r for r in results if "imaging_effect" in r}
        order = [n["protein"] for n in nominated if n["protein"] in paired] + [n["protein"] for n in nominated if n["protein"] not in paired]
        budget = results[-1].get("budget_left", 0)
        untested = [p for p in order if p not in tested]
        affordable = [k for k in COSTS if COSTS[k] <= budget]
        if untested and affordable:
            return _call("experiment", {"protein": untested[0], "kind": affordable[0]}, len(results))
        keep, rejections = [], []
        for n in nominated:
            r = tested.get(n["protein"])
            if r is None:
                keep.append(n)
                continue
            z = r["imaging_effect"] / r["imaging_se"]
            if "log_hazard_ratio" in r and -r["log_hazard_ratio"] * (1 if z >= 0 else -1) >= r["log_hazard_ratio_se"]:
                rejections.append({"protein": n["protein"], "mechanism": "harmful_surrogate"})
            elif abs(z) < EXPERIMENT_Z:
                if n["protein"] in paired:
                    rejections.append({"protein": n["protein"], "mechanism": "shared_instrument"})
            else:
                keep.append({"protein": n["protein"], "direction": "up" if z > 0 else "down", "confidence": CONFIRMED_CONFIDENCE})
        submit = {**args, "nominations": keep, **({"rejections": rejections} if rejections else {})}
        return _call("submit", submit, len(results))


class NominateNothing(_StandardPhenotype):
    """The trivial answer: the standard phenotype, no nomination, no rejection (a null world's perfect claims)."""

    analysis = "association_scan"

    def keep(self, row):
        """Nothing is nominated."""
        return False

    def sign(self, row):
        """The observational beta (no nomination uses it)."""
        return row["beta"]


class NominateAll(CorrelationScreen):
    """Every protein nominated, its direction from its association's sign, at confidence :data:`SCREEN_CONFIDENCE`."""

    def keep(self, row):
        """Every tested protein."""
        return row["beta"] is not None


class TopAssociation(CorrelationScreen):
    """The single smallest-p covariate-adjusted association with the standard
    phenotype, its sign as the direction, confidence :data:`MR_CONFIDENCE`."""

    confidence = MR_CONFIDENCE

    def keep(self, row):
        """Only the first row of the scan (smallest p)."""
        return row["protein"] == self._first

    def __call__(self, messages, tools):
        scans = [r for r in tool_results(messages) if "results" in r and r["results"]]
        self._first = scans[-1]["results"][0]["protein"] if scans else None
        return super().__call__(messages, tools)


def last_answer(messages) -> dict:
    """The newest tool message as a dict (a refusal as ``{"error": ...}``; {} when there is none)."""
    for m in reversed(messages):
        if m.get("role") == "tool":
            try:
                out = json.loads(m["content"])
            except (TypeError, ValueError):
                return {"error": str(m.get("content"))}
            return out if isinstance(out, dict) else {"error": str(out)}
    return {}


class Scripted:
    """A tool agent written as a generator: :meth:`script` yields ``(tool,
    arguments)`` and receives each answer (a refusal as ``{"error": ...}``);
    it must end with ``submit``. New for each session."""

    def __init__(self):
        self._script = None

    def __call__(self, messages, tools) -> AgentTurn:
        if self._script is None:
            self._script = self.script()
            name, arguments = next(self._script)
        else:
            name, arguments = self._script.send(last_answer(messages))
        return _call(name, arguments, sum(m.get("role") == "tool" for m in messages))

    def script(self):
        """The session as a generator of ``(tool, arguments)`` that receives each answer; it ends with ``submit``."""
        raise NotImplementedError


def validate_measures():
    """A script fragment (``yield from``): ``({"imaging.<measure>": its validate_phenotype endpoints}, budget left)``
    for every clinic MRI measure of the release."""
    imaging = yield "describe_release", {"table": "imaging"}
    checked = {}
    for column in (c for c in imaging["columns"] if c != "participant_id"):
        answer = yield "validate_phenotype", {"phenotype": f"imaging.{column}"}
        checked[f"imaging.{column}"] = answer["endpoints"]
    return checked, imaging.get("budget_left", 0)


def find_standard_phenotype():
    """A script fragment (``yield from``): the standard imaging phenotype and its orientation (:func:`standard_phenotype`)."""
    checked, _ = yield from validate_measures()
    return standard_phenotype(checked)


def robust_z(values) -> np.ndarray:
    """(x - median) / (1.4826 MAD) of float values (NaN stays NaN; a zero MAD gives 0)."""
    x = np.asarray(values, np.float64)
    median = np.nanmedian(x)
    mad = 1.4826 * np.nanmedian(np.abs(x - median))
    return np.where(np.isfinite(x), (x - median) / mad if mad > 0 else 0.0, np.nan)


CUE_Z = 4.0  # how far out (robust z) a protein must sit on a cue for cue-spotter to reject it


class CueSpotter(Scripted):
    """The shortcut audit: rejects, with the mechanism each suggests, the
    outliers of the cue families a generator can leave behind, and runs no
    causal check at all; nominates nothing (the standard phenotype as its
    phenotype). One protein per family, the most extreme, if it sits beyond
    :data:`CUE_Z` robust SDs (families that pick a protein already picked
    are skipped):

    * confounding: the strongest correlation with BMI; exercise_remodelling:
      with exercise; site_batch: the largest site shift among unimodal
      proteins; assay_units: the most bimodal; selection: the largest shift
      among the imaged (all from ``protein_qc``);
    * reverse_causation: the strongest (unadjusted) association with
      NT-proBNP among proteins whose cis-MR is null (p > 0.05);
    * harmful_surrogate: the strongest association with the five-year event
      among the less connected half of the proteome;
    * pleiotropy: the least connected protein with a significant cis-MR (q < 0.05);
    * shared_instrument: of proteins sharing a significant cis instrument, the one with the weaker instrument.

    A generator whose decoys are the only proteins with these traits gives it
    the bias points; a benchmark must not.
    """

    def script(self):
        """The standard phenotype, ``protein_qc``, the NT-proBNP and event scans and cis-MR; then one rejection per cue."""
        phenotype, _ = yield from find_standard_phenotype()
        qc = (yield "protein_qc", {"top": ALL})["results"]
        bnp = (yield "association_scan", {"phenotype": "physiology.ntprobnp_pg_ml", "adjust": False, "top": ALL})["results"]
        event = (yield "association_scan", {"phenotype": "outcomes.cv_event", "top": ALL})["results"]
        mr = (yield "cis_mr", {"phenotype": phenotype, "top": ALL})["results"]
        names = [r["protein"] for r in qc]
        field = {f: robust_z([np.nan if r[f] is None else abs(r[f]) for r in qc]) for f in
                 ("r_bmi", "r_exercise", "site_shift", "bimodality", "imaged_shift")}
        connectivity = {r["protein"]: r["connectivity"] or 0.0 for r in qc}
        mr_p = {r["protein"]: r["p"] for r in mr}
        picks: list[tuple[str | None, str]] = []

        def outlier(z, allowed=None):
            z = np.where([allowed is None or allowed(n) for n in names], z, np.nan)
            i = int(np.nanargmax(z)) if np.isfinite(z).any() else -1
            return names[i] if i >= 0 and z[i] > CUE_Z else None

        unimodal = {r["protein"] for r in qc if (r["bimodality"] or 0) < 0.555}
        picks += [(outlier(field["r_bmi"]), "confounding"), (outlier(field["r_exercise"]), "exercise_remodelling"),
                  (outlier(field["site_shift"], unimodal.__contains__), "site_batch"),
                  (outlier(field["bimodality"]), "assay_units"), (outlier(field["imaged_shift"]), "selection")]
        null_mr = [r for r in bnp if (mr_p.get(r["protein"]) or 0) > 0.05 and r["p"] is not None]
        picks.append((null_mr[0]["protein"] if null_mr else None, "reverse_causation"))
        median = float(np.median(list(connectivity.values())))
        loose = [r for r in event if connectivity.get(r["protein"], 1.0) < median and r["p"] is not None]
        picks.append((loose[0]["protein"] if loose else None, "harmful_surrogate"))
        significant = [r for r in mr if r["q"] is not None and r["q"] < Q]
        if significant:
            picks.append((min(significant, key=lambda r: connectivity.get(r["protein"], 1.0))["protein"], "pleiotropy"))
        by_instrument: dict = {}
        for r in significant:
            by_instrument.setdefault(r["instrument"], []).append(r)
        pairs = [group for group in by_instrument.values() if len(group) > 1]
        if pairs:
            picks.append((min(pairs[0], key=lambda r: r["instrument_f"] or 0.0)["protein"], "shared_instrument"))
        rejections, taken = [], set()
        for protein, mechanism in picks:
            if protein is not None and protein not in taken:
                taken.add(protein)
                rejections.append({"protein": protein, "mechanism": mechanism})
        yield "submit", {"nominations": [], "rejections": rejections, "phenotype": phenotype}


SWEEP = {"bimodality": 0.555, "site_shift": 0.3, "r_bmi": 0.25, "r_exercise": 0.25}  # artefact-sweep's thresholds


class ArtefactSweep(Scripted):
    """A blanket rule that reads no causal evidence: rejects every protein
    ``protein_qc`` shows an artefact on, with the mechanism the artefact
    suggests (bimodal, Sarle's coefficient above 0.555: ``assay_units``; else
    a site shift of 0.3 SD or more: ``site_batch``; else |r| with BMI of 0.25
    or more: ``confounding``; else with exercise: ``exercise_remodelling``),
    and nominates nothing (the standard phenotype as its phenotype). Under
    scorer version 4 such a sweep's rejections of ordinary carriers were
    neutral, so it collected the decoys among them for free; since version 5
    a rejection of a protein that is not a decoy counts against precision
    unless the release shows it fooling the analysis its mechanism targets."""

    def script(self):
        """The standard phenotype, ``protein_qc``, one rejection per carrier."""
        phenotype, _ = yield from find_standard_phenotype()
        qc = (yield "protein_qc", {"top": ALL})["results"]
        rejections = []
        for r in qc:
            field = next((f for f, bound in SWEEP.items() if r[f] is not None
                          and (r[f] > bound if f == "bimodality" else abs(r[f]) >= bound)), None)
            if field is not None:
                mechanism = {"bimodality": "assay_units", "site_shift": "site_batch", "r_bmi": "confounding",
                             "r_exercise": "exercise_remodelling"}[field]
                rejections.append({"protein": r["protein"], "mechanism": mechanism})
        yield "submit", {"nominations": [], "rejections": rejections, "phenotype": phenotype}


class BlanketLabels(CisMR):
    """cis-mr's nominations, each labelled ``aligned`` (the always-aligned labels of DrugTargetWorld S2.8), with no
    outcome evidence read: since world version 10 half of the drivers (all but a delayed one, each with probability
    one half) are misaligned, so the labels must not raise cis-mr's score."""

    label = "aligned"

    def __call__(self, messages, tools) -> AgentTurn:
        turn = super().__call__(messages, tools)
        call = turn.tool_calls[0]
        if call.name == "submit":
            call.arguments["nominations"] = [{**n, "outcome_alignment": self.label} for n in call.arguments["nominations"]]
        return turn


class AssociationPick(Scripted):
    """cis-mr's nominations, but of the candidates that share a lead cis instrument (a pair no observational tool
    separates) only the one with the strongest covariate-adjusted association with log NT-proBNP, nominated alone
    with no experiment. Since world version 10 a pair's non-causal member matches the causal one's association in
    distribution, so the pick is a coin flip."""

    def script(self):
        """The standard phenotype, cis-MR on it, log NT-proBNP's association scan; then the claims."""
        phenotype, orientation = yield from find_standard_phenotype()
        mr = (yield "cis_mr", {"phenotype": phenotype, "top": ALL})["results"]
        yield "define_phenotype", {"name": "log_ntprobnp", "terms": [{"column": "physiology.ntprobnp_pg_ml", "weight": 1.0,
                                                                     "log": True}]}
        obs = {r["protein"]: r for r in (yield "association_scan", {"phenotype": "log_ntprobnp", "top": ALL})["results"]}
        kept = [r for r in mr if CisMR().keep(r)]
        groups: dict = {}
        for r in kept:
            groups.setdefault(r["instrument"], []).append(r)

        def strength(r):
            o = obs.get(r["protein"]) or {}
            return abs(o["beta"] / o["se"]) if o.get("beta") is not None and o.get("se") else 0.0

        picked = [max(g, key=strength) for g in groups.values()]
        nominations = [{"protein": r["protein"], "direction": "down" if r["wald_ratio"] * orientation > 0 else "up",
                        "confidence": MR_CONFIDENCE} for r in picked]
        yield "submit", {"nominations": nominations, "phenotype": phenotype}


BASELINES = {"null": Null, "nominate-nothing": NominateNothing, "nominate-all": NominateAll, "top-association": TopAssociation,
             "cue-spotter": CueSpotter, "artefact-sweep": ArtefactSweep, "blanket-labels": BlanketLabels,
             "association-pick": AssociationPick, "correlation-screen": CorrelationScreen, "cis-mr": CisMR,
             "mr-experiments": MRExperiments}

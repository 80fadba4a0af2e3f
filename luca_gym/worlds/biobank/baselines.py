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


from luca_gym.tools.loop import AgentTurn, ToolCall, tool_results

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


BASELINES = {"null": Null, "correlation-screen": CorrelationScreen, "cis-mr": CisMR, "mr-experiments": MRExperiments}

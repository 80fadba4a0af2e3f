"""``causal-pipeline``: the biobank world's strong scripted reference (as
``model-fit`` is for LUCA), a tool agent that reads only what any agent
reads. Each step is one batched tool call over every protein:

1. **Phenotypes.** The clinic's six MRI measures, each oriented by its
   correlation with the clinical endpoints (``validate_phenotype``); the
   submitted phenotype is their weighted sum with log NT-proBNP (weights:
   the mean |r| with the endpoints), a factor-style score of the imaged.
   Two more for the analyses: the imaging score alone (the imaged) and a
   *clinical* phenotype, log NT-proBNP, measured on the whole cohort (five
   times the imaged, and untouched by anything that distorts imaging).
2. **cis-MR** on the clinical phenotype (the candidates: q < 0.05, F >= 10),
   on the imaging score and on the hard outcome (the five-year event); the
   covariate-adjusted and unadjusted associations with both phenotypes, and
   ``protein_qc``.
3. **The check each bias calls for**:

   * pleiotropy: a candidate whose observational slope is far below its
     Wald ratio (or not significant) acts on disease through its variant,
     not itself;
   * shared instrument: candidates that share their lead variant form a
     pair observation cannot separate (conditional analysis at the locus
     has one instrument for two proteins); without an experiment the
     pipeline abstains on the pair (scorer version 4: half a resolution's
     credit, where a guess is right half the time);
   * harmful surrogate: significant cis-MR on the imaging score, null on
     the clinical phenotype, and the event moving against the imaging;
   * reverse causation: of the proteins associated with the clinical
     phenotype whose cis-MR is null, the one that the candidates' own
     instruments move in the direction of disease (reverse-direction MR:
     ``cis_mr`` with the protein as the outcome);
   * confounding: associated with the clinical phenotype before covariate
     adjustment and not after, with a strong BMI correlation; assay units:
     the same with a bimodal distribution (a unit mixture at a site that is
     sicker); site batch: associated with the imaging score before
     adjustment and not after, with a site shift; exercise remodelling and
     selection: associated with the imaging score and not the clinical
     phenotype, with an exercise correlation or a shift among the imaged.

4. **Experiments** (when the budget allows): knockdowns, first on the
   members of shared-instrument pairs, then on candidates the checks doubt
   (pleiotropy suspects), then on *late* candidates (significant cis-MR on
   the five-year event with a null cis-MR on both baseline phenotypes: a
   driver that may act mostly over follow-up, which a cell perturbation's
   baseline horizon would miss), then on the weaker ones; an experiment's significant
   imaging effect confirms a candidate and gives its direction, a null one
   drops it, and a five-year hazard moving against the imaging rejects it
   as a harmful surrogate.
5. **Claims**: the candidates that survive, the direction from the Wald
   ratio's sign (or the experiment's), confidence by the strength of the
   evidence, the outcome alignment "aligned" where a knockdown's hazard or
   the five-year event's cis-MR agrees significantly (no label otherwise);
   the rejections and abstentions above.
"""

from __future__ import annotations

import numpy as np

from luca_gym.worlds.biobank.baselines import BASELINES as BASE
from luca_gym.worlds.biobank.baselines import ALL, COSTS, MIN_F, Q, Scripted, standard_phenotype, validate_measures

ENDPOINTS = ("cv_event", "cardiac_diagnosis")
# Whole-cohort measures that may join NT-proBNP in the clinical phenotype (those correlated with it at CLINICAL_R).
# (Not the event: a harmful surrogate moves it without moving disease.)
CLINICAL_TERMS = ("physiology.heart_rate_bpm", "physiology.sbp_mmhg", "diagnoses.I50.9", "diagnoses.I42.0",
                  "diagnoses.I42.1", "diagnoses.I50.3", "diagnoses.I25.5")
CLINICAL_R = 0.1
BNP_LOADING = 0.65  # the correlation taken for log NT-proBNP with the disease (a one-factor reading of the measures)
MAX_LOADING = 0.9  # the endpoints that weight the phenotype's terms (not NT-proBNP itself)
STRONG_Q = 1e-3
PROXY_P = 0.01  # a joint effect at a locus this significant carries the locus's signal  # a candidate this significant is nominated at HIGH confidence
HIGH, MEDIUM, CONFIRMED = 0.9, 0.7, 0.95
PLEIOTROPY_RATIO = 0.25  # observational slope / Wald ratio below this: the variant acts on disease, not the protein
NULL_P = 0.05  # an association or MR estimate with p above this is null
REVERSE_CANDIDATES = 3  # proteins tested by reverse-direction MR
ARTEFACT_R = 0.3  # |r| with BMI or exercise that makes a covariate artefact plausible
SHIFT = 0.3  # a site or imaged shift (SDs) worth a rejection
BIMODAL = 0.555  # Sarle's coefficient of a uniform distribution: above it, two modes
EXPERIMENT_Z = 2.0
ALIGNED_Z = 2.0  # the |z| of the outcome evidence (the five-year event's cis-MR, a knockdown's hazard) that labels a nomination


def _by_protein(answer) -> dict:
    return {r["protein"]: r for r in answer["results"]}


def _p(row) -> float:
    return 1.0 if row is None or row.get("p") is None else row["p"]


def _z(row, beta="beta", se="se") -> float:
    if row is None or row.get(beta) is None or not row.get(se):
        return 0.0
    return row[beta] / row[se]


class CausalPipeline(Scripted):
    """The reference pipeline (the module's docstring says each step)."""

    def script(self):
        """Phenotypes, cis-MR, the checks, experiments while the budget lasts, the claims (the module's steps)."""
        checked, budget = yield from validate_measures()  # the measures and their endpoints, as every baseline starts
        weights, loadings = {}, {}
        for measure, endpoints in checked.items():
            rs = [endpoints[e]["r"] for e in ENDPOINTS if endpoints[e]["r"] is not None]
            weights[measure] = float(np.mean(rs)) if rs else 0.0
            r_bnp = endpoints["log_ntprobnp"]["r"]
            loadings[measure] = float(np.clip((r_bnp or 0.0) / BNP_LOADING, -MAX_LOADING, MAX_LOADING))
        imaging_terms = [{"column": m, "weight": round(w, 4)} for m, w in weights.items() if w]
        yield "define_phenotype", {"name": "imaging_score", "terms": imaging_terms}
        # the submitted score: one factor, each standardised term weighted by loading / unique variance, the loadings
        # read off the correlations with log NT-proBNP (itself taken to load BNP_LOADING)
        factor_terms = [{"column": m, "weight": round(lam / (1 - lam * lam), 4)} for m, lam in loadings.items() if lam]
        yield "define_phenotype", {"name": "severity_score", "terms": factor_terms + [
            {"column": "physiology.ntprobnp_pg_ml", "weight": round(BNP_LOADING / (1 - BNP_LOADING**2), 4), "log": True}]}
        # the clinical phenotype: log NT-proBNP with the whole cohort's other measures of the heart, each weighted
        # by its correlation with NT-proBNP (one factor: w = r / (1 - r^2))
        clinical = [{"column": "physiology.ntprobnp_pg_ml", "weight": 1.0, "log": True}]
        for column in CLINICAL_TERMS:
            answer = yield "validate_phenotype", {"phenotype": column}
            r = answer.get("endpoints", {}).get("log_ntprobnp", {}).get("r")
            if r is not None and abs(r) >= CLINICAL_R:
                clinical.append({"column": column, "weight": round(r / (1 - r * r), 4)})
        yield "define_phenotype", {"name": "clinical", "terms": clinical}
        # the reference phenotypes of the scorer's rule for an earned rejection (docs/worlds/biobank.md): log NT-proBNP
        # and the standard MRI measure (the one most correlated with the endpoints; usually the archetype's)
        yield "define_phenotype", {"name": "log_ntprobnp", "terms": [{"column": "physiology.ntprobnp_pg_ml", "weight": 1.0,
                                                                     "log": True}], "standardize": False}
        standard, _ = standard_phenotype(checked)
        reference = {}
        for name in ("log_ntprobnp", standard):
            for adjust in (False, True):
                reference[name, adjust] = _by_protein((yield "association_scan", {"phenotype": name, "adjust": adjust,
                                                                                  "top": ALL}))

        mr = _by_protein((yield "cis_mr", {"phenotype": "clinical", "top": ALL}))
        mr_imaging = _by_protein((yield "cis_mr", {"phenotype": "imaging_score", "top": ALL}))
        mr_event = _by_protein((yield "cis_mr", {"phenotype": "outcomes.cv_event", "top": ALL}))
        obs = _by_protein((yield "association_scan", {"phenotype": "clinical", "top": ALL}))
        qc = _by_protein((yield "protein_qc", {"top": ALL}))

        # candidates: strong cis-MR on the clinical phenotype whose observational association agrees in sign; the
        # weaker ones (q < Q) only where an experiment can confirm them
        def agrees(p):
            return (obs.get(p) or {}).get("beta") is not None and obs[p]["beta"] * mr[p]["wald_ratio"] > 0

        significant = [p for p, r in mr.items() if r["q"] is not None and r["q"] < Q and (r["instrument_f"] or 0) >= MIN_F
                       and agrees(p)]
        candidates = [p for p in significant if mr[p]["q"] < STRONG_Q]
        weaker = [p for p in significant if mr[p]["q"] >= STRONG_Q]
        # LD proxies: at each candidate's locus, the locus's cis proteins jointly (conditional analysis); a candidate
        # whose joint effect is null beside a protein whose effect is not carries its neighbour's signal
        proxies: set = set()
        for p in list(candidates):
            if p in proxies:
                continue
            answer = yield "conditional_analysis", {"variant": mr[p]["instrument"], "phenotype": "clinical"}
            rows = {r["protein"]: r for r in answer.get("proteins", [])}
            carriers = [q for q, r in rows.items() if r["joint_p"] is not None and r["joint_p"] < PROXY_P]
            proxies |= {q for q, r in rows.items() if q in candidates and carriers and q not in carriers
                        and (r["joint_p"] is None or r["joint_p"] > NULL_P)}
        candidates = [p for p in candidates if p not in proxies]
        rejections: dict[str, str] = {}
        # pleiotropy: the observational slope far below the Wald ratio (a variant acting on disease directly gives
        # the protein an observational slope of only its instrument's share of the Wald ratio)
        doubtful = [p for p in candidates if obs[p]["beta"] / mr[p]["wald_ratio"] < PLEIOTROPY_RATIO]
        # a doubtful candidate on the instrument of a candidate that is not: the locus's signal runs through its
        # neighbour (a shared instrument whose observation separates the two)
        sound_variants = {mr[p]["instrument"] for p in candidates if p not in doubtful}
        for p in [p for p in doubtful if mr[p]["instrument"] in sound_variants]:
            doubtful.remove(p)
            candidates.remove(p)
            rejections[p] = "shared_instrument"
        # shared instruments: pairs observation cannot separate
        by_variant: dict = {}
        for p in candidates:
            by_variant.setdefault(mr[p]["instrument"], []).append(p)
        pairs = [sorted(g, key=lambda p: -abs(_z(obs.get(p)))) for g in by_variant.values() if len(g) > 1]

        # late candidates: the five-year event's cis-MR significant, both baseline phenotypes' null (a delayed driver
        # shows over follow-up only; only a knockdown, at the late horizon, can confirm one)
        late = sorted((p for p, r in mr_event.items() if r["q"] is not None and r["q"] < Q and (r["instrument_f"] or 0) >= MIN_F
                       and p not in significant and _p(mr.get(p)) > NULL_P and _p(mr_imaging.get(p)) > NULL_P),
                      key=lambda p: mr_event[p]["q"])
        # experiments while the budget lasts: pairs first, then the doubtful, the late candidates (knockdown only),
        # then the weaker candidates
        tested: dict[str, dict] = {}
        queue = [p for g in pairs for p in g] + [p for p in doubtful if p not in tested]
        queue += late + sorted(weaker, key=lambda p: mr[p]["q"])
        seen = set()
        for p in queue:
            if p in seen:
                continue
            seen.add(p)
            kind = next((k for k in ("knockdown", "cell_perturbation") if COSTS[k] <= budget), None)
            if kind is None or (p in late and kind != "knockdown"):
                break
            answer = yield "experiment", {"protein": p, "kind": kind}
            if "error" in answer:
                break
            tested[p] = answer
            budget = answer.get("budget_left", 0)

        keep: dict[str, tuple[str, float]] = {}
        misaligned: set = set()  # a knockdown (late horizon) against the baseline genetics: the late effect turns
        for p in candidates + [p for p in weaker + late if p in tested]:
            sign = mr[p]["wald_ratio"] or 0.0  # NT-proBNP rises with disease: a positive ratio means the protein worsens it
            direction = "down" if sign > 0 else "up"
            confidence = HIGH if (mr[p]["q"] if mr[p]["q"] is not None else 1.0) < STRONG_Q else MEDIUM
            if p in tested:
                verdict = experiment_verdict(tested[p])
                if verdict == "surrogate":
                    rejections[p] = "harmful_surrogate"
                elif verdict is None and any(p in g for g in pairs):
                    rejections[p] = "shared_instrument"
                elif verdict is None and p in doubtful:
                    rejections[p] = "pleiotropy"
                elif verdict is not None and tested[p]["kind"] == "knockdown" and p not in late and verdict != direction:
                    keep[p] = (direction, CONFIRMED)
                    misaligned.add(p)
                elif verdict is not None:
                    keep[p] = (verdict, CONFIRMED)
                continue
            if p in doubtful:
                confidence = MEDIUM
            keep[p] = (direction, confidence)
        # the untested candidate furthest below its Wald ratio: pleiotropy (one decoy at most carries it)
        suspects = [p for p in doubtful if p in keep and p not in tested and not any(p in g for g in pairs)]
        if suspects:
            worst = min(suspects, key=lambda p: obs[p]["beta"] / mr[p]["wald_ratio"])
            keep.pop(worst)
            rejections[worst] = "pleiotropy"
        abstentions = []
        for group in pairs:  # an untested pair: abstain on its two strongest (observation cannot separate them)
            kept = [p for p in group if p in keep and p not in tested]
            if len(kept) > 1 and not any(p in tested and p in keep for p in group):
                for p in kept[:2]:
                    keep.pop(p)
                for p in kept[2:]:
                    keep.pop(p)
                    rejections[p] = "shared_instrument"
                abstentions.append({"proteins": kept[:2], "reason": "one cis instrument for both; no experiment tested them"})

        # harmful surrogate: imaging MR significant, clinical MR null, the event against the imaging
        for p, r in mr_imaging.items():
            if p in keep or p in rejections or r["q"] is None or r["q"] >= Q or _p(mr.get(p)) <= NULL_P:
                continue
            event = mr_event.get(p)
            if event and event["wald_ratio"] is not None and r["wald_ratio"] * event["wald_ratio"] < 0:  # both oriented: up is worse
                rejections[p] = "harmful_surrogate"
                break
        # reverse causation: the candidates' instruments move an associated, MR-null protein
        drivers = list(keep)
        associated = sorted((p for p, r in obs.items() if r["q"] is not None and r["q"] < Q and _p(mr.get(p)) > NULL_P
                             and p not in keep and p not in rejections and ((mr.get(p) or {}).get("instrument_f") or 0) >= MIN_F),
                            key=lambda p: obs[p]["p"])
        for p in associated[:REVERSE_CANDIDATES] if drivers else ():
            answer = yield "cis_mr", {"phenotype": f"proteins.{p}", "proteins": drivers[:64], "top": ALL}
            if "error" in answer:
                continue
            z = 0.0
            for row in answer["results"]:
                if row["wald_ratio"] is not None and row["se"]:
                    # disease raised by the driver (its clinical ratio's sign) should raise p as p tracks disease
                    expected = np.sign(mr[row["protein"]]["wald_ratio"] * obs[p]["beta"])
                    z += expected * row["wald_ratio"] / row["se"]
            if z / np.sqrt(max(len(answer["results"]), 1)) > 2.0:
                rejections[p] = "reverse_causation"
                break
        # covariate and measurement artefacts, on the reference phenotypes: a discovery at Bonferroni's bar without
        # covariate adjustment that the adjustment removes, with the artefact the mechanism names (the scorer's rule
        # leaves out one covariate at a time: the artefact's trait stands in for it here)
        bar = Q / len(qc)

        def removed(p):
            return any(_p(reference[name, False].get(p)) < bar and _p(reference[name, True].get(p)) > NULL_P
                       for name in ("log_ntprobnp", standard))

        free = [p for p in qc if p not in keep and p not in rejections and _p(mr.get(p)) > NULL_P]
        for p in free:
            profile = qc[p]
            if removed(p) and (profile["bimodality"] or 0) > BIMODAL:
                rejections[p] = "assay_units"
            elif removed(p) and abs(profile["r_bmi"] or 0) >= ARTEFACT_R:
                rejections[p] = "confounding"
            elif removed(p) and abs(profile["site_shift"] or 0) >= SHIFT:
                rejections[p] = "site_batch"
        # exercise remodelling and selection: the standard measure's adjusted association significant, log
        # NT-proBNP's null or the other way, with exercise or with a shift among the imaged
        bnp, std = reference["log_ntprobnp", True], reference[standard, True]

        def imaging_only(p):
            if _p(std.get(p)) >= bar:
                return False
            return _p(bnp.get(p)) > NULL_P or (bnp[p]["beta"] or 0.0) * (std[p]["beta"] or 0.0) < 0

        for p in free:
            if p not in rejections and imaging_only(p) and abs(qc[p]["r_exercise"] or 0) >= ARTEFACT_R:
                rejections[p] = "exercise_remodelling"
        selected = [p for p in free if p not in rejections and imaging_only(p) and abs(qc[p]["imaged_shift"] or 0) >= SHIFT]
        if selected:
            rejections[max(selected, key=lambda p: abs(qc[p]["imaged_shift"]))] = "selection"

        nominations = [{"protein": p, "direction": d, "confidence": c,
                        **({"outcome_alignment": "misaligned"} if p in misaligned else _alignment(p, d, tested, mr_event))}
                       for p, (d, c) in keep.items()]
        yield "submit", {"nominations": nominations, "rejections": [{"protein": p, "mechanism": m} for p, m in rejections.items()],
                         **({"abstentions": abstentions} if abstentions else {}), "phenotype": "severity_score"}


def _alignment(protein: str, direction: str, tested: dict, mr_event: dict) -> dict:
    """The outcome-alignment label of a nomination, where the outcome evidence gives one: a knockdown's five-year
    hazard or, untested, the five-year event's cis-MR, moving with the disease the nominated way ("aligned") or
    against it ("misaligned") with |z| at least ALIGNED_Z; nothing (no label) otherwise."""
    if direction not in ("down", "up"):
        return {}
    sign = 1.0 if direction == "down" else -1.0  # lowering a "down" protein treats: the hazard falls with it
    delivery = tested.get(protein)
    z = None
    if delivery is not None and "log_hazard_ratio" in delivery:
        z = -delivery["log_hazard_ratio"] / delivery["log_hazard_ratio_se"]  # the hazard's fall when the protein falls
    else:
        event = mr_event.get(protein)
        if event and event.get("wald_ratio") is not None and event.get("se"):
            z = event["wald_ratio"] / event["se"]  # the event's rise per SD of the protein
    if z is None or abs(z) < ALIGNED_Z:
        return {}
    return {"outcome_alignment": "aligned" if sign * z > 0 else "misaligned"}


def experiment_verdict(delivery: dict) -> str | None:
    """"down"/"up" (a significant imaging effect of lowering the protein: the
    direction that treats), "surrogate" (the five-year hazard moving against
    the imaging), or None (no effect)."""
    z = delivery["imaging_effect"] / delivery["imaging_se"]
    if "log_hazard_ratio" in delivery and -delivery["log_hazard_ratio"] * np.sign(z) >= delivery["log_hazard_ratio_se"] \
            and abs(z) >= EXPERIMENT_Z:
        return "surrogate"
    if abs(z) < EXPERIMENT_Z:
        return None
    return "down" if z < 0 else "up"


BASELINES = {**BASE, "causal-pipeline": CausalPipeline}

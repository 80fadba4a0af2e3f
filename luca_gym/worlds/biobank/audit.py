"""The evidence audit of a biobank session: what each experiment the agent
paid for told it of which proteins drive the disease, and whether its
submitted claims agree with what its own experiments showed.

The world is regenerated from the line's seed and settings
(:func:`~luca_gym.worlds.biobank.world.make_world` on the line's
``profile``, ``tier`` and ``budget``, as the session that scored it was
opened; a sealed line needs the seal's secret and is not audited: None).

Hypotheses are the candidate drivers: every protein of the release could
drive the disease. The evidence is the experiments' deliveries as the agent
was shown them (each accepted ``experiment`` call's result; the line's audit
log, else the oracle's replay, where a result is missing). Each delivery gets
the world's own verdict (:func:`verdict`, the reference pipeline's rule,
:func:`luca_gym.worlds.biobank.pipeline.experiment_verdict`: |z| of the
imaging effect at least :data:`~luca_gym.worlds.biobank.pipeline.EXPERIMENT_Z`
is significant): *null* rules the protein out; *significant* rules it in;
a knockdown whose imaging effect is significant while its five-year hazard
moves against it (at least one SE) is the world's harmful-surrogate
signature: the marker moves, the patients do not improve, so it rules the
protein out too. A protein's status after its experiments (:func:`status`):
out if any knockdown showed the surrogate signature, else in if any
experiment was significant, else out (a significant effect at either
horizon shows that lowering the protein moves disease; a null at the first
visit does not exclude a late effect). A protein is *live* until its first
accepted experiment. ``ruled_out`` / ``ruled_in`` count, per experiment, the
live protein it put out / in (0 or 1); ``revised`` the decided protein it
moved (a cell perturbation's null overturned by a knockdown).

The claim is the accepted ``submit``: its nominations (a protein name, or a
dict with a ``"protein"`` key; other keys, and other arguments such as
abstentions, are ignored) and rejections (the same). *Evidence ignored* is
the nominated proteins the agent's own experiments had ruled out plus the
rejected proteins they had ruled in; the claim is *consistent* when there are
none. A nomination whose direction is the opposite of the one its
significant experiment showed is counted apart (``direction_contradicted``),
not as evidence ignored.

Against the truth (never shown to the agent): ``truth_ruled_out`` counts
the real drivers ruled out at the end, ``nulls_on_drivers`` lists each null
experiment on a real driver with its kind and horizon (a delayed driver's
baseline weight is a few percent of its late weight, so a cell
perturbation, which reads the ``first visit`` horizon, usually misses it; a
knockdown reads ``five years``), ``nondriver_ruled_in`` the non-drivers ruled
in (the harmful surrogate under a cell perturbation, which has no hazard to
betray it, or a false positive), and ``verdicts_agree`` the share of decided
proteins whose status is the truth.
"""

from __future__ import annotations

import functools

import numpy as np

from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.oracle import EXPERIMENTS, Claims, Nomination
from luca_gym.worlds.biobank.pipeline import experiment_verdict
from luca_gym.worlds.biobank.world import make_world

# The fields of a delivery that the replay compares with what the agent was shown.
DELIVERY_FIELDS = ("kind", "protein", "imaging_effect", "imaging_se", "log_hazard_ratio", "log_hazard_ratio_se")
SETTINGS = ("profile", "tier", "budget")


def world_of(record: dict):
    """The :class:`~luca_gym.worlds.biobank.world.BiobankWorld` of a biobank
    results line, regenerated from its seed and settings (None for a sealed line)."""
    if record.get("sealed"):
        return None
    return _world(record["seed"], BiobankConfig(**{k: record[k] for k in SETTINGS if record.get(k) is not None}))


@functools.lru_cache(maxsize=1)
def _world(seed, config: BiobankConfig):
    # A world is a pure function of its seed and config, and the audit only reads it: the agents of one
    # instance (adjacent in luca_gym.results.audit's order) share one generation; one world held (a paper one is GiBs).
    return make_world(seed, config)


def verdict(delivery: dict) -> str | None:
    """The world's verdict on one experiment's delivery: ``"in"`` (a
    significant imaging effect), ``"out"`` (null, or a knockdown's
    harmful-surrogate signature: significant imaging, the five-year hazard
    against it), or None where the delivery holds no estimate."""
    if not isinstance(delivery, dict):
        return None
    effect, se = delivery.get("imaging_effect"), delivery.get("imaging_se")
    if not isinstance(effect, (int, float)) or not isinstance(se, (int, float)) or not se > 0:
        return None
    judged = experiment_verdict(delivery)
    return "in" if judged in ("down", "up") else "out"


def treating_direction(delivery: dict) -> str | None:
    """The direction a significant delivery shows treats the disease
    (``"down"``: lowering the protein lowers disease; ``"up"``), else None."""
    judged = experiment_verdict(delivery) if verdict(delivery) == "in" else None
    return judged if judged in ("down", "up") else None


def status(verdicts) -> str | None:
    """A protein's status from the verdicts of its experiments in order
    (each ``(kind, delivery)``): ``"out"`` if any knockdown showed the
    harmful-surrogate signature, else ``"in"`` if any was significant, else
    ``"out"``; None (live) without a verdict."""
    judged = [(kind, d, verdict(d)) for kind, d in verdicts]
    judged = [(kind, d, v) for kind, d, v in judged if v is not None]
    if not judged:
        return None
    if any(v == "out" and experiment_verdict(d) == "surrogate" for _, d, v in judged):
        return "out"
    return "in" if any(v == "in" for _, _, v in judged) else "out"


def proteins_named(items) -> list[str]:
    """The protein names of a claim's list: each item a name or a dict with a
    ``"protein"`` key (anything else, and other keys, ignored), first mention kept."""
    out: list[str] = []
    for item in items if isinstance(items, (list, tuple)) else []:
        protein = item if isinstance(item, str) else item.get("protein") if isinstance(item, dict) else None
        if isinstance(protein, str) and protein not in out:
            out.append(protein)
    return out


def _directions(items) -> dict:
    """{protein: direction} of a claim's dict items (first mention kept)."""
    out: dict = {}
    for item in items if isinstance(items, (list, tuple)) else []:
        if isinstance(item, dict) and isinstance(item.get("protein"), str):
            out.setdefault(item["protein"], item.get("direction"))
    return out


def _accepted(call: dict) -> bool:
    return isinstance(call.get("result"), dict) and "error" not in call["result"]


def _same(shown: dict, replayed: dict) -> bool:
    return all(shown.get(k) == replayed.get(k) for k in DELIVERY_FIELDS if k in shown or k in replayed)


def audit(record: dict) -> dict | None:
    """The evidence audit of one biobank results line (None: sealed).
    Returns ``{"hypotheses": "drivers", "n_hypotheses"`` (the release's
    proteins), ``"experiments"``, ``"ruled_out"``, ``"ruled_in"``,
    ``"revised"`` and ``"live_before"`` (per experiment, in order),
    ``"ruled_out_per_experiment"``, ``"decided_per_experiment"`` (out or in;
    None without experiments), ``"claimed"``, ``"consistent"`` and
    ``"evidence_ignored"`` (None without a claim), ``"nominated_ruled_out"``
    and ``"rejected_ruled_in"`` (the proteins behind evidence ignored),
    ``"direction_contradicted"``, ``"decided_at_claim"``, the truth's
    ``"drivers"``, ``"truth_ruled_out"``, ``"delayed_ruled_out"``,
    ``"nulls_on_drivers"``, ``"nondriver_ruled_in"``, ``"verdicts_agree"``,
    and ``"replay_matches"`` (every shown delivery is the oracle's)}."""
    world = world_of(record)
    if world is None:
        return None
    oracle, proteins = world.oracle, list(world.release.proteins)
    logged = [e.get("delivery") for e in record.get("experiments") or [] if isinstance(e, dict)]
    evidence: dict[str, list] = {}
    ruled_out, ruled_in, revised, live_before = [], [], [], []
    nulls_on_drivers = []
    matches, index = True, 0
    claim = None
    for call in record.get("calls") or []:
        if not isinstance(call, dict) or not _accepted(call):
            continue
        name, arguments = call.get("call"), call.get("arguments") or {}
        if name == "submit" and claim is None:
            claim = (arguments, {p: status(v) for p, v in evidence.items()})
            continue
        if name != "experiment":
            continue
        protein, kind = arguments.get("protein"), arguments.get("kind")
        replayed = oracle.experiment(world.world_seed, protein, kind, index) if protein in proteins and kind in EXPERIMENTS else {}
        shown = call["result"] if "imaging_effect" in call["result"] else (logged[index] if index < len(logged) else replayed)
        matches &= _same(shown, replayed)
        index += 1
        if verdict(shown) is None:
            continue
        before = status(evidence.get(protein, []))
        live_before.append(len(proteins) - sum(status(v) is not None for v in evidence.values()))
        evidence.setdefault(protein, []).append((kind, shown))
        after = status(evidence[protein])
        ruled_out.append(int(before is None and after == "out"))
        ruled_in.append(int(before is None and after == "in"))
        revised.append(int(before is not None and after != before))
        if protein in oracle.drivers and verdict(shown) == "out":
            nulls_on_drivers.append({"protein": protein, "kind": kind, "horizon": EXPERIMENTS[kind]["horizon"],
                                     "delayed": protein in oracle.delayed})
    final = {p: status(v) for p, v in evidence.items()}
    decided = {p: s for p, s in final.items() if s is not None}
    agree = [(s == "in") == (p in oracle.drivers) for p, s in decided.items()]

    ignored = consistent = nominated_out = rejected_in = contradicted = decided_at_claim = None
    if claim is not None:
        arguments, known = claim
        nominations, rejections = arguments.get("nominations"), arguments.get("rejections")
        nominated_out = [p for p in proteins_named(nominations) if known.get(p) == "out"]
        rejected_in = [p for p in proteins_named(rejections) if known.get(p) == "in"]
        ignored = len(nominated_out) + len(rejected_in)
        consistent = ignored == 0
        shown_direction = {p: next((treating_direction(d) for _, d in reversed(evidence[p]) if treating_direction(d)), None)
                           for p, s in known.items() if s == "in"}
        contradicted = sum(1 for p, d in _directions(nominations).items() if d in ("down", "up")
                           and shown_direction.get(p) not in (None, d) and known.get(p) == "in")
        decided_at_claim = sum(s is not None for s in known.values())
    n_experiments = len(ruled_out)
    return {
        "hypotheses": "drivers",
        "n_hypotheses": len(proteins),
        "experiments": n_experiments,
        "ruled_out": ruled_out,
        "ruled_in": ruled_in,
        "revised": revised,
        "live_before": live_before,
        "ruled_out_per_experiment": float(np.mean(ruled_out)) if n_experiments else None,
        "decided_per_experiment": float(np.mean(np.add(ruled_out, ruled_in))) if n_experiments else None,
        "claimed": claim is not None,
        "consistent": consistent,
        "evidence_ignored": ignored,
        "nominated_ruled_out": nominated_out,
        "rejected_ruled_in": rejected_in,
        "direction_contradicted": contradicted,
        "decided_at_claim": decided_at_claim,
        "drivers": len(oracle.drivers),
        "truth_ruled_out": sum(p in oracle.drivers for p, s in decided.items() if s == "out"),
        "delayed_ruled_out": sum(p in oracle.delayed for p, s in decided.items() if s == "out"),
        "nulls_on_drivers": nulls_on_drivers,
        "nondriver_ruled_in": sum(p not in oracle.drivers for p, s in decided.items() if s == "in"),
        "verdicts_agree": float(np.mean(agree)) if agree else None,
        "replay_matches": bool(matches),
    }


def association_pick(seeds, config) -> list[bool]:
    """The world's own check that its ambiguous pairs are coin flips to
    observation: for each pair of worlds ``seeds`` designed to carry two (three
    drivers, T4's shared instrument, a delayed driver; the archetypes in turn)
    under ``config``, whether the member with the stronger covariate-adjusted
    association with log NT-proBNP is the causal one (the blanket rule
    ``association-pick`` plays)."""
    from luca_gym.worlds.biobank import analysis
    from luca_gym.worlds.biobank.design import ARCHETYPES, Design
    from luca_gym.worlds.biobank.world import make_world

    right = []
    for i, seed in enumerate(seeds):
        world = make_world(seed, config, design=Design(ARCHETYPES[i % 4], 3, "standard", ("shared_instrument",), 1))
        release = world.release
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log(release.numeric("physiology", "ntprobnp_pg_ml"))
        beta, se, *_ = analysis.association_scan(release, np.where(np.isfinite(y), y, np.nan), True)
        z = np.abs(beta / se)
        index = {p: k for k, p in enumerate(release.proteins)}
        right += [bool(z[index[c]] > z[index[o]]) for c, o in world.oracle.pairs]
    return right


def relabelled_total(record, oracle, label) -> float:
    """A session's total (``record``: a results line) with every nomination of its submission labelled ``label``
    ("aligned" or "misaligned"): only the outcome-alignment part moves (the blanket-label check of the floor test
    and ``benchmarks/biobank_claims.py``; the total floored at 0 as the scorer floors it)."""
    nominations = record["calls"][-1]["arguments"]["nominations"]
    claims = Claims(tuple(Nomination(n["protein"], n["direction"], n["confidence"], label) for n in nominations))
    parts = sum(v for k, v in record["scores"].items() if k in ("target_identification", "causal_confidence", "direction",
                                                                "bias_identification", "phenotype", "surrogate_penalty"))
    return max(0.0, parts + oracle.score(claims)["outcome_alignment"])

"""LUCA's ground floor: the paper's constants and codes, and the validators of
every argument that names an organism or a session (SPEC §1-3).

Everything in the world imports these; nothing restates them. The validators
every world shares (seeds, bools, short reprs of hostile input) live in
:mod:`luca_gym.validate` and are re-exported here.
"""

from __future__ import annotations


from luca_gym.validate import (  # noqa: F401  (re-exported: LUCA's validators in one place)
    DRAWN_SEED_LIMIT,
    SEED_LIMIT,
    is_integer,
    check_bool,
    check_positive_int,
    check_seed,
    short_repr,
)

# -- codes ---------------------------------------------------------------------
# Gene intervention codes (SPEC 1.5). DAMPEN halves the state at every update.
NONE, BLOCK, BOOST, DAMPEN = 0, 1, 2, 3
INTERVENTION_TYPES = ("NONE", "BLOCK", "BOOST", "DAMPEN")
# The interventions an agent may put on a gene, and on a signal.
GENE_TYPES = INTERVENTION_TYPES[1:]
SIGNAL_TYPE = "ACTIVATE"
# Malfunction type codes (SPEC 1.6). Gene locks reuse LOCK_HI / LOCK_LO as
# per-gene codes in ``OrganismArrays.gene_lock``.
NO_MALFUNCTION, LOCK_HI, LOCK_LO, PERSIST = 0, 1, 2, 3
MALFUNCTION_TYPES = ("NONE", "LOCK_HI", "LOCK_LO", "PERSIST")

# -- sizes -----------------------------------------------------------------------
N_PHENOTYPES = 3
N_TASKS = 2
MIN_GENES, MAX_GENES = 4, 4096

# -- thresholds (SPEC §1.6, §1.7, §3) -----------------------------------------------
HEALTHY_LOW = 0.35
HEALTHY_HIGH = 0.65
HEALTHY_RANGE = (HEALTHY_LOW, HEALTHY_HIGH)
# A prediction is right within this distance of the truth; a prediction task's
# joint effect must differ from the additive one by more than it.
ACCURACY_THRESHOLD = 0.10
# A single-gene shift larger than this makes a network edge (and is what a
# measurement can detect, SPEC 1.3 step 12).
NETWORK_SHIFT_THRESHOLD = 0.05
# Two malfunctions are indistinguishable when all phenotypes agree within this
# many times the tier's measurement noise sigma (ours: what one measurement
# cannot tell apart; 0.01 / 0.02 / 0.06 on easy / medium / hard).
N_ALT_NOISE_MULTIPLE = 2.0


def n_alt_tolerance(noise_sigma):
    """The phenotype distance under which two malfunctions count as
    indistinguishable, for a tier's gene-state noise sigma."""
    return N_ALT_NOISE_MULTIPLE * noise_sigma

# -- names of the settings -----------------------------------------------------------
TIER_NAMES = ("easy", "medium", "hard")
MODES = ("healthy", "disease")
# The paper's appendix E.2 ablation: gene names invented (G001...) or real
# human gene symbols, and the system prompt's stance on biological knowledge.
VOCABULARIES = ("invented", "real")
STANCES = ("suppress", "permit")
# Real gene symbols available (luca_gym.worlds.luca.vocabulary.REAL_GENE_NAMES, the
# paper's 50 in three familiarity tiers): an organism of more genes has no
# real-name vocabulary.
N_REAL_GENE_NAMES = 50


# -- validators ----------------------------------------------------------------------
def check_tier(tier) -> str:
    """``tier`` if it is a tier name; ValueError naming the allowed ones otherwise."""
    if not isinstance(tier, str) or tier not in TIER_NAMES:
        raise ValueError(f"tier: {short_repr(tier)} unknown; allowed {', '.join(TIER_NAMES)}")
    return tier


def check_mode(mode) -> str:
    """``mode`` if it is a mode name; ValueError naming the allowed ones otherwise."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode: {short_repr(mode)} unknown; allowed {', '.join(MODES)}")
    return mode


def check_n_genes(n_genes) -> int:
    """``n_genes`` as an int if it is an allowed organism size; ValueError saying the range otherwise."""
    if not is_integer(n_genes):
        raise ValueError(f"n_genes: {short_repr(n_genes)} is not an integer; allowed {MIN_GENES}..{MAX_GENES}")
    if not MIN_GENES <= n_genes <= MAX_GENES:
        raise ValueError(f"n_genes: {n_genes} out of range; allowed {MIN_GENES}..{MAX_GENES}")
    return int(n_genes)


def check_organism(tier, n_genes, mode="healthy", backwards=False) -> tuple[str, int, str, bool]:
    """Validate the settings that, with a seed, name an organism. Returns them normalised."""
    return check_tier(tier), check_n_genes(n_genes), check_mode(mode), check_bool(backwards, "backwards")


def check_vocabulary(vocabulary, n_genes=None) -> str:
    """``"invented"`` or ``"real"``; a real vocabulary only for at most
    :data:`N_REAL_GENE_NAMES` genes (``n_genes``, when given)."""
    if not isinstance(vocabulary, str) or vocabulary not in VOCABULARIES:
        raise ValueError(f"vocabulary: {short_repr(vocabulary)} unknown; allowed {', '.join(VOCABULARIES)}")
    if vocabulary == "real" and n_genes is not None and n_genes > N_REAL_GENE_NAMES:
        raise ValueError(f"vocabulary: 'real' has {N_REAL_GENE_NAMES} real gene names, too few for n_genes={n_genes}; "
                         f"allowed 'real' up to n_genes={N_REAL_GENE_NAMES}, or 'invented'")
    return vocabulary


# The largest budget a config accepts. Not the paper's (it has no maximum): a
# session's state keeps one log row per budget unit (history arrays of
# budget x (N + S) entries, for every env of a batch), and the call limit,
# 4 x budget + 64, is an int32 inside the jit. 65,536 is 14x the default at the
# largest N (4096 + 585 + 8 = 4,689) and keeps one N=4096 session's log near 300 MB.
MAX_BUDGET = 65_536


def check_budget(budget) -> int | None:
    """None (the paper's N + S + 8) or an integer in 1..:data:`MAX_BUDGET`;
    ValueError naming ``budget`` otherwise (a float such as 8.0 too)."""
    if budget is None:
        return None
    if not is_integer(budget) or not 1 <= budget <= MAX_BUDGET:
        raise ValueError(f"budget: {short_repr(budget)} not allowed; an integer in 1..{MAX_BUDGET} "
                         f"(experiment and rescue units; default N + S + 8)")
    return int(budget)


def check_stance(stance) -> str:
    """The system prompt's stance on biological knowledge: ``"suppress"`` (the default) or ``"permit"``."""
    if not isinstance(stance, str) or stance not in STANCES:
        raise ValueError(f"stance: {short_repr(stance)} unknown; allowed {', '.join(STANCES)}")
    return stance



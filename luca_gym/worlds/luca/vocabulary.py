"""The invented vocabulary: labels for modules, signals and phenotypes made of
constructed words, so memorised biology cannot stand in for experiments.

Words are built from fixed syllable tables by a seeded generator; none is a
real gene, protein, pathway or organism name (genes are plain ``G001``...).

The one exception is the paper's vocabulary ablation (appendix E.2):
:func:`real_gene_names` relabels an organism's genes with symbols of real
human genes, drawn from three familiarity tiers (:data:`REAL_GENE_TIERS`).
"""

from __future__ import annotations

import numpy as np

from luca_gym.worlds.luca.spec import N_REAL_GENE_NAMES

_ONSETS = ("b", "d", "f", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "qu", "th", "sk", "tr", "vr")
_NUCLEI = ("a", "e", "i", "o", "u", "ae", "io", "ou")
_CODAS = ("", "n", "r", "x", "l", "sh", "m", "th")
# Suffixes give the phenotypes and signals a readable shape ("velorin-index",
# "quathex-K"); they carry no meaning.
PHENOTYPE_SUFFIXES = ("index", "level", "score", "rate", "state", "tone", "load", "drift")
SIGNAL_SUFFIXES = ("K", "Q", "V", "X", "Z", "zeta", "theta", "sigma", "omega", "kappa")


def invented_word(rng: np.random.Generator, syllables: int = 3) -> str:
    """One constructed word of ``syllables`` syllables."""
    parts = []
    for _ in range(syllables):
        parts.append(_ONSETS[rng.integers(len(_ONSETS))])
        parts.append(_NUCLEI[rng.integers(len(_NUCLEI))])
    parts.append(_CODAS[rng.integers(len(_CODAS))])
    return "".join(parts)


def _unique(rng: np.random.Generator, count: int, make) -> tuple[str, ...]:
    seen: list[str] = []
    while len(seen) < count:
        word = make()
        if word not in seen:
            seen.append(word)
    return tuple(seen)


def gene_names(n_genes: int) -> tuple[str, ...]:
    """``G001``... zero-padded to max(3, digits of N) (SPEC 1.3 step 1)."""
    width = max(3, len(str(n_genes)))
    return tuple(f"G{i + 1:0{width}d}" for i in range(n_genes))


# The ablation's 50 real human gene symbols (HGNC), in three familiarity tiers:
# household names, genes a biologist knows, and genes few would recognise.
REAL_GENE_TIERS = {
    "well-known": ("TP53", "BRCA1", "BRCA2", "MYC", "EGFR", "KRAS", "PTEN", "APC", "RB1", "VEGFA", "TNF", "IL6", "INS",
                   "ESR1", "ERBB2", "BCL2", "MTOR"),
    "mid": ("STAT3", "HIF1A", "SOX2", "FOXO3", "RUNX1", "GATA1", "PAX6", "SMAD4", "CTNNB1", "MDM2", "ATM", "CDK4", "JAK2",
            "NFKB1", "FOXP3", "SHH", "NOTCH1"),
    "obscure": ("ZNF516", "TMEM161B", "SLC35F3", "CCDC88C", "TTC39B", "ANKRD30A", "PRR14L", "LRRC37A", "FAM83B", "ZBTB38",
                "SPATA13", "RNF213", "MAP3K19", "TBC1D8", "ARHGAP29", "DNAH9"),
}
REAL_GENE_NAMES = tuple(name for names in REAL_GENE_TIERS.values() for name in names)


def real_gene_names(rng: np.random.Generator, n_genes: int) -> tuple[str, ...]:
    """``n_genes`` (at most :data:`N_REAL_GENE_NAMES`) distinct real gene
    symbols in a random order: an even share of each familiarity tier (the
    remainder to the better-known tiers: 7/7/6 at N=20, 10/10/10 at N=30),
    each drawn without replacement, then shuffled over the genes, so a
    name's real function says nothing about the gene it labels."""
    if not 0 < n_genes <= N_REAL_GENE_NAMES:
        raise ValueError(f"n_genes: {n_genes}; a real vocabulary names 1..{N_REAL_GENE_NAMES} genes")
    share, extra = divmod(n_genes, len(REAL_GENE_TIERS))
    picked = []
    for i, names in enumerate(REAL_GENE_TIERS.values()):
        count = share + (i < extra)
        picked += [names[k] for k in rng.choice(len(names), count, replace=False)]
    return tuple(picked[k] for k in rng.permutation(n_genes))


def module_names(rng: np.random.Generator, count: int) -> tuple[str, ...]:
    return _unique(rng, count, lambda: f"module-{invented_word(rng, 2)}")


def signal_labels(rng: np.random.Generator, count: int) -> tuple[str, ...]:
    return _unique(
        rng, count, lambda: f"{invented_word(rng, 2)}-{SIGNAL_SUFFIXES[rng.integers(len(SIGNAL_SUFFIXES))]}"
    )


def phenotype_names(rng: np.random.Generator, count: int) -> tuple[str, ...]:
    return _unique(
        rng, count, lambda: f"{invented_word(rng, 2)}-{PHENOTYPE_SUFFIXES[rng.integers(len(PHENOTYPE_SUFFIXES))]}"
    )

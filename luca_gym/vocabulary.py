"""The invented vocabulary: labels for modules, signals and phenotypes made of
constructed words, so memorised biology cannot stand in for experiments.

Words are built from fixed syllable tables by a seeded generator; none is a
real gene, protein, pathway or organism name (genes are plain ``G001``...).
"""

from __future__ import annotations

import numpy as np

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

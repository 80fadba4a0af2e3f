"""LUCA's settings as one value object, in one argument order."""

from __future__ import annotations

from dataclasses import dataclass

from luca_gym.worlds.luca.spec import check_organism, check_vocabulary


@dataclass(frozen=True)
class LucaConfig:
    """The settings that, with a seed, name a LUCA organism (SPEC §1).

    Attributes:
        tier: "easy", "medium" or "hard".
        mode: "healthy" or "disease".
        n_genes: 4..4096 (the paper: 20; its scaling study up to 1280).
        backwards: the sign-inverted organisms of the paper's appendix E.1.
        vocabulary: gene names "invented" (G001...) or "real" (human gene
            symbols, N <= 50; appendix E.2). Names only: the arrays are the same.

    Checked and normalised on construction (ValueError naming the field, the
    value and what is allowed), so a config that exists is a valid one.
    """

    tier: str = "medium"
    mode: str = "healthy"
    n_genes: int = 20
    backwards: bool = False
    vocabulary: str = "invented"

    def __post_init__(self):
        tier, n_genes, mode, backwards = check_organism(self.tier, self.n_genes, self.mode, self.backwards)
        object.__setattr__(self, "tier", tier)
        object.__setattr__(self, "n_genes", n_genes)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "backwards", backwards)
        object.__setattr__(self, "vocabulary", check_vocabulary(self.vocabulary, n_genes))

    @property
    def disease(self) -> bool:
        """True in disease mode."""
        return self.mode == "disease"

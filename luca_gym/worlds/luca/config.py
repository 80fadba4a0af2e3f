"""LUCA's settings as one value object, in one argument order.

``LucaConfig(tier, mode, n_genes, backwards, vocabulary, budget)`` names what,
with a seed, makes an organism, and the session's budget;
:meth:`LucaConfig.organism`, :meth:`LucaConfig.params` and
:meth:`LucaConfig.session` reach the functions that still take the settings
one by one (some of them as tier, n_genes, mode), so a caller never has to
know either order. Inside LUCA the organism's settings travel as one
config: the organism memo (:func:`~luca_gym.worlds.luca.session.config_organism`,
which a session, the flat env and the audit open organisms through) and the
vector envs' episode organisms (:class:`~luca_gym.worlds.luca.pools.EpisodeOrganisms`)
take a ``LucaConfig``.

The budget is not part of a results line's key (``World.session_keys``): a
session records it (``budget``), and a results folder refuses a line whose
budget differs from the run's (``luca-gym eval --budget``: one folder per
budget)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from luca_gym.config import ConfigBase, boolean, setting

from luca_gym.worlds.luca.core import make_params
from luca_gym.worlds.luca.generator import make_organism
from luca_gym.worlds.luca.spec import MAX_BUDGET, check_budget, check_mode, check_n_genes, check_tier, check_vocabulary  # noqa: F401  (MAX_BUDGET re-exported)


def _checked(check):
    """A validator of :mod:`~luca_gym.worlds.luca.spec` (it names its setting itself) as a config field's."""
    return lambda value, name: check(value)


@dataclass(frozen=True)
class LucaConfig(ConfigBase):
    """The settings that, with a seed, name a LUCA organism (SPEC §1).

    Attributes:
        tier: "easy", "medium" or "hard".
        mode: "healthy" or "disease".
        n_genes: 4..4096 (the paper: 20; its scaling study up to 1280).
        backwards: the sign-inverted organisms of the paper's appendix E.1.
        vocabulary: gene names "invented" (G001...) or "real" (human gene
            symbols, N <= 50; appendix E.2). Names only: the arrays are the same.
        budget: the session's experiment and rescue units, 1..MAX_BUDGET, or
            None (default): the paper's N + S + 8. A setting of the session,
            not of the organism.

    Checked and normalised on construction (ValueError naming the field, the
    value and what is allowed), so a config that exists is a valid one.
    Every LUCA setting is static: each fixes a shape (N, the budget's log)
    or a branch of the core (the mode), so the core's step compiles once
    per config, as the core's static :class:`~luca_gym.worlds.luca.core.EnvParams`
    always has.
    """

    tier: str = setting("medium", _checked(check_tier), static=True)
    mode: str = setting("healthy", _checked(check_mode), static=True)
    n_genes: int = setting(20, _checked(check_n_genes), static=True)
    backwards: bool = setting(False, boolean(), static=True)
    vocabulary: str = setting("invented", _checked(check_vocabulary), static=True)
    budget: int | None = setting(None, _checked(check_budget), static=True)

    def __post_init__(self):
        super().__post_init__()
        check_vocabulary(self.vocabulary, self.n_genes)  # a real vocabulary has names for at most 50 genes

    @classmethod
    def organism_settings_of(cls, record: dict) -> "LucaConfig":
        """The organism's settings of a LUCA results line, budget aside (a
        line written before ``backwards`` or ``vocabulary`` existed: forwards,
        invented names)."""
        return cls(tier=record["tier"], mode=record["mode"], n_genes=record["n_genes"],
                   backwards=record.get("backwards", False), vocabulary=record.get("vocabulary", "invented"))

    def organism_settings(self) -> "LucaConfig":
        """These settings without the session's budget: what, with a seed, names an organism."""
        return replace(self, budget=None)

    @property
    def disease(self) -> bool:
        """True in disease mode."""
        return self.mode == "disease"

    def organism(self, seed: int, *, sealed=None):
        """The organism ``seed`` of these settings (:func:`~luca_gym.worlds.luca.generator.make_organism`;
        memoised: :func:`luca_gym.worlds.luca.session.config_organism`)."""
        return make_organism(seed, self.tier, self.n_genes, self.mode, self.backwards, sealed=sealed, vocabulary=self.vocabulary)

    def params(self, **options):
        """The core's :class:`~luca_gym.worlds.luca.core.EnvParams` for these settings
        (``options``: max_steps, shaping, or a budget other than the config's;
        :func:`~luca_gym.worlds.luca.core.make_params`)."""
        return make_params(self.tier, self.n_genes, self.mode, **{"budget": self.budget, **options})

    def session(self, **options):
        """A host :class:`~luca_gym.worlds.luca.session.Session` of these settings (``options``: max_steps, sealed, ...)."""
        from luca_gym.worlds.luca.session import Session  # the session holds its config: imported when used

        return Session(self.tier, self.mode, self.n_genes, self.backwards, vocabulary=self.vocabulary,
                       **{"budget": self.budget, **options})

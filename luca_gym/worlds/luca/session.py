"""One LUCA session on the host: the pure core behind the numpy boundary.

:class:`Session` is what the tool layer and the harness stand on: the
generic host session over LUCA's core (:class:`luca_gym.host.CoreSession`
with :mod:`luca_gym.worlds.luca.core.protocol`; no Gymnasium env), under
LUCA's settings one by one and with its names (``params``, ``organism``,
``organism_settings``: :class:`LucaNames`, which LucaEnv shares). It builds
the config from the settings, opens organism k, steps dict actions through
:func:`~luca_gym.worlds.luca.core.parse_action` and the core, and reveals the scores once the session has ended. It decides no
rule; the core does. :func:`config_organism` (and :func:`cached_organism`, the
same with the settings one by one) is the organism memo beside it.
"""

from __future__ import annotations

from functools import lru_cache

from luca_gym import seal as seal_mod
from luca_gym.boundary import to_python
from luca_gym.host import CoreSession
from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.render import render_text  # noqa: F401  (re-exported: the text picture's old home)
from luca_gym.worlds.luca.types import Organism


@lru_cache(maxsize=512)
def _cached_organism(seed: int, config: LucaConfig, seal) -> Organism:
    return config.organism(seed, sealed=seal)


def config_organism(seed: int, config: LucaConfig, *, sealed=None) -> Organism:
    """The organism ``seed`` of ``config``'s settings (its budget aside),
    memoised: an organism is a pure function of its seed and settings, so
    reusing one is indistinguishable from regenerating it. The seed is
    checked first, so the cache never decides what is valid."""
    return _cached_organism(spec.check_seed(seed), config.organism_settings(), seal_mod.make_seal(sealed))


def cached_organism(seed: int, tier: str, n_genes: int, mode: str = "healthy", backwards: bool = False, *, sealed=None,
                    vocabulary: str = "invented") -> Organism:
    """``make_organism`` memoised (:func:`config_organism`; the settings are
    checked by :class:`~luca_gym.worlds.luca.config.LucaConfig` first)."""
    config = LucaConfig(tier=tier, mode=mode, n_genes=n_genes, backwards=backwards, vocabulary=vocabulary)
    return config_organism(seed, config, sealed=sealed)


def ended_scores(state: core.EnvState | None, params: core.EnvParams) -> dict:
    """The score breakdown of an ended session as Python numbers and lists
    (JSON-ready); refuses while the session is open."""
    if state is None or not bool(state.ended):
        raise RuntimeError("scores are revealed only once the session has ended")
    return to_python(core.session_scores(state, params))


class LucaNames:
    """LUCA's names on a session or env over its core (``config`` a
    :class:`~luca_gym.worlds.luca.core.protocol.SessionConfig`): ``params``,
    ``organism_settings``, ``vocabulary``, ``tier``, ``mode``, ``n_genes``,
    ``backwards`` and ``organism``; shared by :class:`Session` and LucaEnv."""

    def _name_settings(self, tier: str, mode: str, n_genes: int) -> None:
        self.params: core.EnvParams = self.config.params
        # The organism's settings (the budget is the session's: params.budget, any size make_params allows).
        self.organism_settings = self.config.organism.organism_settings()
        self.vocabulary = self.organism_settings.vocabulary
        self.tier, self.mode, self.n_genes, self.backwards = tier, mode, n_genes, self.organism_settings.backwards

    @property
    def organism(self) -> Organism | None:
        """The open session's organism (None before the first one)."""
        return None if self.instance is None else self.instance.organism

    def open(self, organism_seed: int) -> tuple[dict, dict]:
        """Start a session on organism ``organism_seed`` (checked). Returns
        (first observation, ``{"organism_seed", "budget"}``)."""
        return super().open(organism_seed)


class Session(LucaNames, CoreSession):
    """One LUCA session at a time, over the pure core: the generic host
    session (:class:`~luca_gym.host.CoreSession`) of LUCA's core, not a
    Gymnasium env (LucaEnv is one).

    Args:
        tier, mode, n_genes, backwards, vocabulary: the organism's settings
            (:class:`~luca_gym.worlds.luca.config.LucaConfig`).
        budget: experiment and rescue units (default N + S + 8, paper Table 5).
        max_steps: accepted calls before truncation (default 4 x budget + 64).
        dense_shaping, shaping_scale, shaping_gamma: potential-based shaping
            (:func:`~luca_gym.worlds.luca.core.make_params`).
        sealed: None, a secret, a :class:`luca_gym.seal.Seal` or True
            (``$LUCA_GYM_SECRET``): organism k is generated from its sealed seed.

    :meth:`open` starts a session on organism k; :meth:`step` takes a dict
    action (ValueError naming the field for a malformed one, nothing spent) and
    returns ``(obs, reward, terminated, truncated, info)`` with numpy arrays and
    Python scalars; ``info["scores"]`` appears once the session has ended, and
    :meth:`scores` gives them then (it refuses while the session is open).
    """

    def __init__(self, tier: str = "medium", mode: str = "healthy", n_genes: int = 20, backwards: bool = False, *,
                 max_steps: int | None = None, dense_shaping: bool = False, shaping_scale: float = 0.1,
                 shaping_gamma: float = 1.0, budget: int | None = None, sealed=None, vocabulary: str = "invented"):
        super().__init__("luca", sealed=sealed, tier=tier, mode=mode, n_genes=n_genes, backwards=backwards,
                         vocabulary=vocabulary, budget=budget, max_steps=max_steps, dense_shaping=dense_shaping,
                         shaping_scale=shaping_scale, shaping_gamma=shaping_gamma)
        self._name_settings(tier, mode, n_genes)

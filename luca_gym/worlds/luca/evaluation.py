"""LUCA's side of the harness: what the generic harness (:mod:`luca_gym.harness`)
asks of the world through its :class:`~luca_gym.protocol.World` entries.

* :data:`play_policy` -- one session of a baseline or learned policy
  (``World.play``): the generic policy loop over LUCA's tool session
  (:class:`LucaPolicyLoop`), so its record is written as a model's is.
* :func:`expected_fields` -- the budget and call limit a session of given
  settings records (``World.expected_fields``), the config's ``budget``
  (``luca-gym eval --budget``) or the paper's default.
* :func:`check_settings` -- the prompt's stance, which the config does not
  hold (``World.check_settings``).
* :func:`luca_spec` and the key and score field names, for code that speaks
  of LUCA's sessions.
"""

from __future__ import annotations

from luca_gym.protocol import SessionSpec
from luca_gym.tools.play import PolicyLoop
from luca_gym.worlds.luca import WORLD, calls
from luca_gym.worlds.luca.spec import check_budget
from luca_gym.worlds.luca.core import make_params, parse_action
from luca_gym.worlds.luca.spec import check_stance
from luca_gym.worlds.luca.tools import ToolSession

# A results line names its session by the world's key fields; LUCA's:
KEY_FIELDS = ("agent", *WORLD.session_keys)
# Key fields added after records were first written: a line without one reads
# as this value (a session of the default condition).
KEY_DEFAULTS = dict(WORLD.key_defaults)
REQUIRED_KEY_FIELDS = tuple(k for k in KEY_FIELDS if k not in KEY_DEFAULTS)
SCORE_FIELDS = ("composite", "prediction", "diagnosis", "rescue")
STRATEGY_FIELDS = ("budget_fraction", "single_gene_fraction", "gene_coverage", "block_fraction", "redundancy", "commit_point")


def luca_spec(agent: str, tier: str, mode: str, n_genes: int, seed: int, backwards: bool = False,
              vocabulary: str = "invented", stance: str = "suppress") -> SessionSpec:
    """A LUCA session's spec. ``vocabulary``: gene names, invented or real;
    ``stance``: the prompt's stance on biological knowledge (tool-calling
    agents); both the paper's appendix E.2."""
    settings = (("tier", tier), ("mode", mode), ("n_genes", n_genes), ("backwards", backwards), ("vocabulary", vocabulary),
                ("stance", stance))
    return SessionSpec(agent, seed, WORLD.name, settings)


def check_settings(stance: str = "suppress", **_) -> None:
    """The settings a results key holds that :class:`~luca_gym.worlds.luca.config.LucaConfig` does not: the stance."""
    check_stance(stance)


def expected_fields(tier: str, mode: str, n_genes: int, budget: int | None = None, **_) -> dict:
    """The budget (``budget``, else the paper's default) and call limit of a session of these settings."""
    params = make_params(tier, n_genes, mode, budget=check_budget(budget))
    return {"budget": params.budget, "call_limit": params.max_steps}


class LucaPolicyLoop(PolicyLoop):
    """The generic policy loop (:class:`~luca_gym.tools.play.PolicyLoop`)
    over LUCA's tool session, for LUCA's policies: they ``reset(params,
    seed)`` with the session's :class:`~luca_gym.worlds.luca.core.EnvParams`,
    see the host session's observation (numpy, bools as int8) and act with
    core dict actions (``{"kind", "gene_codes", ...}``), each played as the
    tool call it is (:func:`~luca_gym.worlds.luca.calls.describe_action`), so
    a baseline's calls are the tool session's transcript, as a model's are.
    ``env``, if given, is a host :class:`~luca_gym.worlds.luca.session.Session`
    (or a LucaEnv) of these settings, which the tool session takes."""

    def open(self, seed: int, *, env=None, sealed=None, **settings):
        return self.session_class(seed, env=env, sealed=sealed, **settings)

    def params(self, session):
        return session.env.params

    def policy_call(self, session, action) -> tuple:
        """The action as the tool call it is; a malformed action (not a dict, a
        field unknown or of the wrong shape, dtype or range) raises the core's
        ValueError naming the field, as the host session always has."""
        parse_action(action, session.env.params)
        call = calls.describe_action(session.meta, action)
        return call["call"], call["arguments"]

    def call_limit(self, session) -> int:
        return session.call_limit


# World.play of LUCA: one session of a baseline or learned policy (``reset(params, seed)``,
# ``act(obs) -> dict action``) on organism ``seed``, with the settings as keywords (tier, mode,
# n_genes, backwards, vocabulary, stance: the prompt's, which a policy never reads; budget:
# experiment and rescue units, None for the paper's N + S + 8). Returns the record's parts
# (see :class:`luca_gym.protocol.World`).
play_policy = LucaPolicyLoop(ToolSession)


__all__ = ["KEY_DEFAULTS", "KEY_FIELDS", "REQUIRED_KEY_FIELDS", "SCORE_FIELDS", "STRATEGY_FIELDS", "check_settings",
           "expected_fields", "LucaPolicyLoop", "luca_spec", "play_policy"]

"""LUCA's side of the harness: what the generic harness (:mod:`luca_gym.harness`)
asks of the world through its :class:`~luca_gym.protocol.World` entries.

* :func:`play_policy` -- one session of a baseline or learned policy on the
  host session (``World.play``), with the calls described by name.
* :func:`expected_fields` -- the budget and call limit a session of given
  settings records (``World.expected_fields``), the config's ``budget``
  (``luca-gym eval --budget``) or the paper's default.
* :func:`check_settings` -- the prompt's stance, which the config does not
  hold (``World.check_settings``).
* :func:`luca_spec` and the key and score field names, for code that speaks
  of LUCA's sessions.
"""

from __future__ import annotations


from luca_gym import seal as seal_mod
from luca_gym.protocol import SessionSpec
from luca_gym.worlds.luca import WORLD, calls
from luca_gym.worlds.luca.spec import check_budget
from luca_gym.worlds.luca.core import make_params
from luca_gym.worlds.luca.spec import check_stance

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


def play_policy(policy, seed: int, *, env=None, max_calls: int | None = None, sealed=None, tier: str, mode: str,
                n_genes: int, backwards: bool = False, vocabulary: str = "invented", stance: str = "suppress",
                budget: int | None = None) -> dict:
    """Run one session of ``policy`` (``reset(params, seed)``, ``act(obs) ->
    dict action``) on organism ``seed``, with ``budget`` experiment and
    rescue units (None: the paper's N + S + 8). ``env``, if given, must be a
    :class:`~luca_gym.worlds.luca.session.Session` of these settings (and
    ``sealed``; and ``budget`` where one is given). The stance is the prompt's: a policy reads no
    prompt. Returns the record's parts (see :class:`luca_gym.protocol.World`)."""
    seal = seal_mod.make_seal(sealed)
    env, obs = calls.open_session(seed=seed, tier=tier, mode=mode, n_genes=n_genes, backwards=backwards,
                                  vocabulary=vocabulary, env=env, sealed=seal, budget=budget)
    meta = env.organism.meta
    policy.reset(env.params, seed)
    log, total = [], 0.0
    limit = max_calls or env.params.max_steps
    for _ in range(limit):
        action = policy.act(obs)
        record = calls.describe_action(meta, action)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        record["result"] = calls.describe_result(meta, int(action["kind"]), obs, info)
        record["budget_remaining"] = int(obs["budget_left"])
        log.append(record)
        if terminated or truncated:
            break
    else:
        raise RuntimeError(f"the policy did not end the session within {limit} calls")
    fields = {"organism_id": seal_mod.instance_id(seed, seal), "budget": env.params.budget,
              "call_limit": env.params.max_steps, "n_alt": info["scores"]["n_alt"]}
    return {"fields": fields, "calls": log, "scores": info["scores"], "return": total, "truncated": bool(truncated),
            "end_reason": "call_limit" if truncated else "end"}


__all__ = ["KEY_DEFAULTS", "KEY_FIELDS", "REQUIRED_KEY_FIELDS", "SCORE_FIELDS", "STRATEGY_FIELDS", "check_settings",
           "expected_fields", "luca_spec", "play_policy"]

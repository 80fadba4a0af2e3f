"""Agents by name: baselines, ``openai:MODEL`` / ``anthropic:MODEL`` tool
agents, ``mock`` (an offline scripted model behind the same provider path), learned agents (``ppo:RUN_DIR``, ``sb3:FILE.zip``) and a user's own
tool agent (``module:attribute``, :func:`is_module_agent`):
:func:`check_agent` and :func:`make_runner`; token prices and session cost."""

from __future__ import annotations

import importlib
import os
import re
import sys

from luca_gym import worlds

RL_EXTRA = 'pip install -e ".[rl]"'


def check_price(price) -> tuple[float, float] | None:
    """None, or ``(input, output)`` USD per million tokens, each a number >= 0;
    ValueError naming the bad value otherwise."""
    if price is None:
        return None
    try:
        values = tuple(price)
    except TypeError:
        values = ()
    ok = len(values) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf") for v in values)
    if not ok:
        raise ValueError(f"price: {price!r}; allowed (input, output) USD per million tokens, two numbers >= 0, e.g. 2.5,10")
    return float(values[0]), float(values[1])


def session_cost(usage: dict | None, price) -> float | None:
    """USD for a session's tokens at ``price`` (input, output) USD per million
    tokens; None without a price or when no call reported its tokens."""
    if price is None or not usage or (usage.get("input_tokens") is None and usage.get("output_tokens") is None):
        return None
    tokens = (usage.get("input_tokens") or 0, usage.get("output_tokens") or 0)
    return round((tokens[0] * price[0] + tokens[1] * price[1]) / 1e6, 6)


MOCK_AGENT = "mock"


def is_llm_agent(name: str) -> bool:
    """Whether an agent spec names a language model (``openai:`` or
    ``anthropic:``, or ``mock``: a scripted model behind the same provider
    path, :func:`luca_gym.llm.mock.mock_agent`)."""
    return str(name).startswith(("openai:", "anthropic:")) or name == MOCK_AGENT


def is_learned_agent(name: str) -> bool:
    """``ppo:RUN_DIR`` (a run folder of ``luca-gym train --algo ppo``) or
    ``sb3:FILE.zip`` (the model.zip, or its run folder, of ``--algo maskable-ppo``)."""
    return str(name).startswith(("ppo:", "sb3:"))


KNOWN_PREFIXES = ("openai", "anthropic", "ppo", "sb3")
_MODULE_AGENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def is_module_agent(name: str) -> bool:
    """Whether an agent spec names a user's agent factory, ``module.path:attribute``:
    a spec with a colon whose prefix is none of :data:`KNOWN_PREFIXES`."""
    return isinstance(name, str) and ":" in name and name.partition(":")[0] not in KNOWN_PREFIXES


def load_module_agent(name: str):
    """The factory ``module:attribute`` names (the current folder is searched
    after the installed packages, as ``python -m`` would find a module there);
    ValueError in one line for a malformed spec, a module that does not import,
    a missing attribute or one that is not callable."""
    if not _MODULE_AGENT.fullmatch(name):
        raise ValueError(f"agent: {name[:80]!r} is not module.path:attribute (e.g. my_agents:make_agent)")
    module_name, _, attribute = name.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any failure to import is one line, not a traceback
        raise ValueError(f"agent {name!r}: module {module_name!r} does not import ({type(exc).__name__}: {exc})") from None
    factory = getattr(module, attribute, None)
    if factory is None:
        raise ValueError(f"agent {name!r}: module {module_name!r} has no attribute {attribute!r}")
    if not callable(factory):
        raise ValueError(f"agent {name!r}: {attribute!r} is not callable; give a factory that returns an agent")
    return factory


def agents_allowed(world) -> str:
    """The agent names ``world`` takes, for messages: its baselines, the tool
    agents where it has tools, the learned agents where it has a flat codec."""
    world = worlds.get(world)
    names = list(world.baseline_policies())
    if world.tools is not None:
        names += ["openai:MODEL", "anthropic:MODEL", MOCK_AGENT, "module:attribute (your agent factory)"]
    if _takes_learned(world):
        names += ["ppo:RUN_DIR", "sb3:FILE.zip"]
    return ", ".join(names[:-1]) + (" or " if len(names) > 1 else "") + names[-1] if names else "none"


def _takes_learned(world) -> bool:
    return world.flat is not None and world.play is not None


def check_agent(name, world) -> str:
    """One of ``world``'s baselines, ``openai:MODEL``, ``anthropic:MODEL`` or
    a user's ``module:attribute`` agent factory (a world with tools), ``ppo:RUN_DIR`` (an existing folder) or
    ``sb3:FILE.zip`` (an existing file or run folder; a world with a flat
    codec and a policy runner); ValueError otherwise."""
    world = worlds.get(world)
    baselines = world.baseline_policies()
    if is_module_agent(name) and name not in baselines:
        if world.tools is None:
            raise ValueError(f"agent {str(name)[:80]!r}: world {world.name!r} has no tools, so it takes no tool agent of yours")
        load_module_agent(name)
        return name
    known = isinstance(name, str) and (
        name in baselines
        or (is_llm_agent(name) and world.tools is not None and (name == MOCK_AGENT or name.partition(":")[2]))
        or (is_learned_agent(name) and _takes_learned(world) and name.partition(":")[2])
    )
    if not known:
        raise ValueError(f"agent: {str(name)[:40]!r} unknown for world {world.name!r}; allowed {agents_allowed(world)}")
    algo, _, path = name.partition(":")
    if algo == "ppo" and not os.path.isdir(path):
        raise ValueError(f"agent {name!r}: no such run folder {path!r}; write one with `luca-gym train --algo ppo --out {path}`")
    if algo == "sb3" and not os.path.exists(path):
        raise ValueError(f"agent {name!r}: no such file {path!r}; write one with `luca-gym train --algo maskable-ppo --out DIR` "
                         f"(DIR/model.zip)")
    return name


def make_runner(name: str, base_url: str | None = None, *, world, request: dict | None = None):
    """A baseline (a policy or a tool agent, new for each session); an LLM
    agent callable for ``openai:MODEL`` / ``anthropic:MODEL`` / ``mock``
    (sending ``request`` settings, :func:`luca_gym.llm.providers.check_request`);
    a user's agent from its ``module:attribute`` factory (called with
    ``base_url=`` where one is given: ValueError if it takes none, rather than
    drop it); or a learned agent's :class:`~luca_gym.agents.FlatPolicy`
    loaded from ``ppo:RUN_DIR`` or ``sb3:FILE.zip`` (ValueError names a
    missing or corrupt checkpoint, or the missing ``rl`` extra)."""
    world = worlds.get(world)
    check_agent(name, world)
    if is_module_agent(name) and name not in world.baseline_policies():
        factory = load_module_agent(name)
        agent = factory() if base_url is None else _with_base_url(name, factory, base_url)
        if not callable(agent):
            raise ValueError(f"agent {name!r}: its factory returned {type(agent).__name__}, not an agent "
                             "((messages, tool_specs) -> AgentTurn)")
        return agent
    if is_llm_agent(name):
        from luca_gym.llm.providers import make_agent

        return make_agent(name, base_url, request=request)
    if is_learned_agent(name):
        algo, _, path = name.partition(":")
        if algo == "ppo":
            from luca_gym.agents import ppo

            return ppo.load(path)
        try:
            from luca_gym.agents.sb3 import load_policy
        except ImportError as exc:
            raise ValueError(f"agent {name!r}: needs the rl extra ({exc}); {RL_EXTRA}") from None
        return load_policy(path)
    return world.baseline_policies()[name]()


def _with_base_url(name: str, factory, base_url: str):
    """``factory(base_url=base_url)``; ValueError where the factory takes no such argument."""
    import inspect

    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        parameters = {}
    takes = "base_url" in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if not takes:
        raise ValueError(f"agent {name!r}: --base-url {base_url} given, but its factory takes no base_url argument; "
                         "add one (def factory(base_url=None): ...) or leave --base-url out")
    return factory(base_url=base_url)

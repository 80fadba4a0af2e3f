"""``LucaToolsEnv`` (``luca_gym/LucaTools-v0``): the language-model tool
interface as a Gymnasium env, for LLM-for-RL frameworks that drive text
environments.

The observation is the conversation so far as text: the system prompt, the
tool specs (JSON), then each tool call and its result (JSON). The action is
one tool call as text, ``{"name": ..., "arguments": {...}}``. The env is a
thin layer over :class:`~luca_gym.wrappers.llm.ToolSession`: the same
registry, schemas, dispatcher and rules, so a scripted sequence of calls
scores the same through either (tested). The reward is the change in the
session's return, so the undiscounted return equals the composite score, as
in every other env. A malformed action gets the session's clear error as its
tool result, costs nothing and changes nothing; like every refused call, it
never ends the episode (bound episodes of refusals with
``gymnasium.wrappers.TimeLimit``). ``terminated`` when the agent ends the
session; ``truncated`` when the call limit ends it.
"""

from __future__ import annotations

import json
import string

import gymnasium as gym
from gymnasium import spaces

from luca_gym.envs.luca_env import organism_seed_of
from luca_gym.worlds.luca.spec import check_stance
from luca_gym.worlds.luca.session import Session
from luca_gym.wrappers.llm import MAX_PAYLOAD, ToolSession

OPENING = "A new organism is ready. Begin."
MAX_TEXT = 1 << 24  # characters of the conversation (the space's bound; a whole session is far below it)
CHARSET = frozenset(string.printable)  # JSON is written with ASCII escapes


def parse_tool_call(text) -> tuple[object, object]:
    """``'{"name": ..., "arguments": {...}}'`` -> (name, arguments), or
    ValueError naming what is wrong; the session checks name and arguments."""
    if not isinstance(text, str):
        raise ValueError(f"action: expected text, got {type(text).__name__}")
    if len(text) > MAX_PAYLOAD + 1024:
        raise ValueError(f"action: {len(text)} characters; at most {MAX_PAYLOAD + 1024}")
    try:
        call = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError('action: not JSON; write one tool call as {"name": TOOL, "arguments": {...}}') from None
    if not isinstance(call, dict) or "name" not in call or not set(call) <= {"name", "arguments"}:
        raise ValueError('action: expected an object {"name": TOOL, "arguments": {...}} (arguments optional)')
    return call["name"], call.get("arguments", {})


class LucaToolsEnv(gym.Env):
    """One LUCA session per episode, driven by tool calls as text.

    Args:
        tier, mode, n_genes, backwards, budget, max_steps, sealed, vocabulary: as
            :class:`~luca_gym.envs.LucaEnv` (``max_steps`` is the session's
            call limit, stated in the prompt).
        stance: the prompt's stance on biological knowledge, "suppress" or
            "permit" (:class:`~luca_gym.wrappers.llm.ToolSession`).
        render_mode: None or "ansi" (the conversation).

    ``reset(seed=...)`` seeds the draw of organism seeds; ``options={
    "organism_seed": k}`` pins organism k. ``info`` holds the last call's
    ``result`` (a dict) and, once the session has ended, ``scores`` (names,
    4 decimals, as the agent is shown) and ``end_reason``.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, tier="medium", mode="healthy", n_genes=20, backwards=False, budget=None, max_steps=None,
                 sealed=None, render_mode=None, vocabulary="invented", stance="suppress"):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: {render_mode!r} not supported; allowed None or 'ansi'")
        # One Session, reused by every episode's ToolSession (it checks the settings).
        self._env = Session(tier=tier, mode=mode, n_genes=n_genes, backwards=backwards, budget=budget, max_steps=max_steps,
                          sealed=sealed, vocabulary=vocabulary)
        self.tier, self.mode, self.n_genes, self.backwards = tier, mode, n_genes, bool(backwards)
        self.vocabulary, self.stance = self._env.vocabulary, check_stance(stance)
        self.render_mode = render_mode
        self.observation_space = spaces.Text(MAX_TEXT, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(MAX_PAYLOAD + 1024, min_length=0, charset=CHARSET)
        self.session: ToolSession | None = None
        self._parts: list[str] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        organism_seed = organism_seed_of(self, options)  # as every single env draws or pins it
        self.session = ToolSession(organism_seed, tier=self.tier, mode=self.mode, n_genes=self.n_genes,
                                   backwards=self.backwards, env=self._env, sealed=self._env.seal,
                                   vocabulary=self.vocabulary, stance=self.stance)
        self._parts = [
            "[system]\n" + self.session.system_prompt(),
            "[tools]\n" + json.dumps(self.session.tool_specs()),
            "[user]\n" + OPENING,
        ]
        return self._observation(), {"organism_seed": organism_seed, "organism_id": self.session.organism_id}

    def step(self, action):
        if self.session is None:
            raise RuntimeError("step() called before reset()")
        before = self.session.total_reward
        try:
            name, arguments = parse_tool_call(action)
        except ValueError as exc:
            result = {"error": str(exc), "budget_remaining": int(self.session.obs["budget_left"])}
            shown = {"name": None, "raw": action if isinstance(action, str) else repr(action)}
        else:
            result = self.session.call(name, arguments)  # never raises; checks and rules live there
            shown = {"name": name if isinstance(name, str) else repr(name), "arguments": arguments}
        self._parts.append("[assistant tool call]\n" + _ascii_json(shown, limit=4096))
        self._parts.append("[tool result]\n" + _ascii_json(result))
        reward = float(self.session.total_reward - before)
        ended = bool(result.get("ended"))
        info = {"result": result}
        if ended:
            info["scores"], info["end_reason"] = result["scores"], result["end_reason"]
        terminated = ended and result.get("end_reason") == "end"
        truncated = ended and not terminated
        return self._observation(), reward, terminated, truncated, info

    def _observation(self) -> str:
        return "\n\n".join(self._parts)

    def render(self):
        return self._observation() if self.render_mode == "ansi" and self.session is not None else None


def _ascii_json(value, limit: int | None = None) -> str:
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        text = json.dumps(repr(value))
    if limit is not None and len(text) > limit:
        text = text[:limit] + "...<truncated>"
    return text

"""One policy loop for every world: a scripted or learned policy
(``reset``/``act``) plays through the same tool session a tool agent or a
model plays, so a baseline's record and a model's are written by the same
code (the session's transcript, its ending, its scores).

:class:`PolicyLoop` is that loop over a world's tool session class, and a
world's ``World.play`` (:func:`table_play`). Its defaults fit a policy that
acts in tool calls (``act(observation) -> {"tool", "arguments"}``, the
graph worlds' and the coin world's); a world whose policies act in its core's
own terms says how, in a subclass, and nothing else changes (LUCA's
:data:`luca_gym.worlds.luca.evaluation.play_policy`: its policies act with
core dict actions, each the tool call :func:`~luca_gym.worlds.luca.calls.describe_action`
names):

* :meth:`PolicyLoop.open` -- the tool session of a seed and settings;
* :meth:`PolicyLoop.params` -- what ``policy.reset(params, seed)`` is given;
* :meth:`PolicyLoop.policy_call` -- a policy's action as ``(tool, arguments)``;
* :meth:`PolicyLoop.call_limit` -- the calls a policy may make before the
  loop gives up on it (``RuntimeError``).

The session needs ``observation()`` (what the policy sees) and the tool
session's ``call``, ``ended``, ``transcript``, ``scores``,
``total_reward``, ``truncated``, ``end_reason`` and ``record_fields()``.
"""

from __future__ import annotations

CALL_LIMIT = 1000  # calls a policy may make before the loop gives up on it, where the session names no limit


class PolicyLoop:
    """``World.play`` over tool sessions of ``session_class``: called as
    ``loop(policy, seed, *, env=None, max_calls=None, sealed=None,
    **settings)``, it plays one session of ``policy`` and returns the
    record's parts (:class:`luca_gym.protocol.World`: ``fields``, ``calls``,
    ``scores``, ``return``, ``truncated``, ``end_reason``)."""

    def __init__(self, session_class):
        self.session_class = session_class

    def open(self, seed: int, *, env=None, sealed=None, **settings):
        """The tool session: ``env``, if given, one already open on these settings."""
        return env if env is not None else self.session_class(seed, sealed=sealed, **settings)

    def params(self, session):
        """What ``policy.reset`` is given: the session's config."""
        return session.config

    def policy_call(self, session, action) -> tuple:
        """A policy's action as ``(tool name, arguments)``: the action is ``{"tool", "arguments"}``."""
        return action["tool"], action["arguments"]

    def call_limit(self, session) -> int:
        """The config's ``max_calls`` where it has one, else :data:`CALL_LIMIT`."""
        return getattr(session.config, "max_calls", None) or CALL_LIMIT

    def __call__(self, policy, seed: int, *, env=None, max_calls: int | None = None, sealed=None, **settings) -> dict:
        """One session of ``policy`` (``reset(params, seed)``, then ``act(observation)``
        until the session ends) through the tool session's calls, refusals and
        transcript, as a tool agent's; RuntimeError for a policy that does not
        end it within ``max_calls`` calls (default :meth:`call_limit`)."""
        session = self.open(seed, env=env, sealed=sealed, **settings)
        policy.reset(self.params(session), seed)
        limit = max_calls or self.call_limit(session)
        for _ in range(limit):
            session.call(*self.policy_call(session, policy.act(session.observation())))
            if session.ended:
                break
        else:
            raise RuntimeError(f"the policy did not end the session within {limit} calls")
        return {"fields": session.record_fields(), "calls": session.transcript, "scores": session.scores,
                "return": session.total_reward, "truncated": bool(session.truncated), "end_reason": session.end_reason}


def play_policy(session_class, policy, seed: int, *, env=None, max_calls: int | None = None, sealed=None,
                **settings) -> dict:
    """One session of ``policy`` (``reset(config, seed)``, then
    ``act(observation) -> {"tool", "arguments"}`` until the session ends) on
    a tool session of ``session_class`` (``env``, if given, one already open
    on these settings), through the same calls, refusals and transcript as a
    tool agent's: :class:`PolicyLoop` with its defaults. Returns the record's
    parts, as ``World.play`` does (:class:`luca_gym.protocol.World`);
    RuntimeError for a policy that does not end the session within
    ``max_calls`` calls (default: the config's ``max_calls`` where it has
    one, else :data:`CALL_LIMIT`). The session needs ``config``,
    ``observation()`` and the base's ``call``: a
    :class:`~luca_gym.tools.table.TableToolSession`, or a world's own."""
    return PolicyLoop(session_class)(policy, seed, env=env, max_calls=max_calls, sealed=sealed, **settings)


def table_play(session_class) -> PolicyLoop:
    """``World.play`` of a world whose tool session is ``session_class`` and
    whose policies act in tool calls: :class:`PolicyLoop` over it."""
    return PolicyLoop(session_class)


__all__ = ["CALL_LIMIT", "PolicyLoop", "play_policy", "table_play"]

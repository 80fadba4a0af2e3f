"""One policy loop for every world: :func:`play_policy` plays a scripted
policy (``reset``/``act``) through the same tool session a tool agent or a
model plays, so a baseline's record and a model's are written by the same
code (the session's transcript). A world's ``World.play`` is
:func:`table_play` of its tool session class.
"""

from __future__ import annotations

from functools import partial

CALL_LIMIT = 1000  # calls a policy may make before play_policy gives up on it


def play_policy(session_class, policy, seed: int, *, env=None, max_calls: int | None = None, sealed=None,
                **settings) -> dict:
    """One session of ``policy`` (``reset(config, seed)``, then
    ``act(observation) -> {"tool", "arguments"}`` until the session ends) on
    a tool session of ``session_class`` (``env``, if given, one already open
    on these settings), through the same calls, refusals and transcript as a
    tool agent's. Returns the record's parts, as ``World.play`` does
    (:class:`luca_gym.protocol.World`); RuntimeError for a policy that does not
    end the session within ``max_calls`` calls (default: the config's
    ``max_calls`` where it has one, else :data:`CALL_LIMIT`). The session
    needs ``config``, ``observation()`` and the base's ``call``: a
    :class:`~luca_gym.tools.table.TableToolSession`, or a world's own (the
    graph worlds')."""
    session = env if env is not None else session_class(seed, sealed=sealed, **settings)
    policy.reset(session.config, seed)
    limit = max_calls or getattr(session.config, "max_calls", None) or CALL_LIMIT
    for _ in range(limit):
        call = policy.act(session.observation())
        session.call(call["tool"], call["arguments"])
        if session.ended:
            break
    else:
        raise RuntimeError(f"the policy did not end the session within {limit} calls")
    return {"fields": session.record_fields(), "calls": session.transcript, "scores": session.scores,
            "return": session.total_reward, "truncated": False, "end_reason": session.end_reason}


def table_play(session_class):
    """``World.play`` of a world whose tool session is ``session_class``: :func:`play_policy` over it."""
    return partial(play_policy, session_class)


__all__ = ["CALL_LIMIT", "play_policy", "table_play"]

"""A learned agent as a harness policy: it reads the session's observation,
encodes it as the flat vector and mask (the world's flat codec,
:class:`luca_gym.protocol.FlatCodec`), lets the learned ``choose`` pick one of
the K flat actions, and decodes that into the session's action (LUCA's values
come from the codec's analyst). Nothing here reads hidden state."""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np

from luca_gym.protocol import FlatCodec
from luca_gym.validate import short_repr


class FlatPolicy:
    """A harness policy over a world's flat action space.

    Args:
        name: the agent's name in result files (e.g. ``ppo:runs/easy``).
        choose: ``(vector float32 (D,), mask bool (K,), rng) -> int``, the
            learned part; it must pick a legal index (mask True).
        codec: the world's flat codec the agent was trained on; each session
            plays through ``codec.for_session(params)``.
    """

    def __init__(self, name: str, choose: Callable[[np.ndarray, np.ndarray, np.random.Generator], int], codec: FlatCodec):
        if not isinstance(codec, FlatCodec):
            raise ValueError(f"codec: {short_repr(codec)} is not a flat codec (luca_gym.protocol.FlatCodec)")
        self.name, self.choose, self.codec = name, choose, codec

    @property
    def analyst(self) -> str | None:
        """The codec's analyst, where its world has one (LUCA's)."""
        return getattr(self.codec, "analyst", None)

    def reset(self, params, seed: int) -> None:
        """Start a session of these settings: the codec for them and a fresh generator from ``seed``."""
        self.session_codec = self.codec.for_session(params)
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict) -> dict:
        """The session's action for ``obs``: the flat choice, decoded for the
        host session. A choice the codec keeps to itself (``decode`` returns
        None: the graph worlds' raw codec editing the learner's matrix) is
        followed by another, until one is a call of the session; the codec
        bounds how many it keeps."""
        while True:
            vector, legal = jax.device_get(self.session_codec.encode(obs))
            index = int(self.choose(np.asarray(vector), np.asarray(legal, bool), self.rng))
            call = self.session_codec.decode(index, obs)
            if call is not None:
                return call

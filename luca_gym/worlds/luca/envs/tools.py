"""``LucaToolsEnv``: LUCA's tools as a text env (``luca_gym/LucaTools-v0``), the
generic :class:`~luca_gym.envs.tools.ToolsEnv` with LUCA's settings in the
signature, one organism per episode."""

from __future__ import annotations

from luca_gym.envs.tools import ToolsEnv
from luca_gym.validate import check_render_mode
from luca_gym.worlds.luca.session import Session
from luca_gym.worlds.luca.spec import check_stance
from luca_gym.worlds.luca.tools import ToolSession


class LucaToolsEnv(ToolsEnv):
    """LUCA's tools as a text env, one organism per episode.

    Args:
        tier, mode, n_genes, backwards, budget, max_steps, sealed, vocabulary: as
            :class:`~luca_gym.worlds.luca.envs.LucaEnv` (``max_steps`` is the session's
            call limit, stated in the prompt).
        stance: the prompt's stance on biological knowledge, "suppress" or
            "permit" (:class:`~luca_gym.worlds.luca.tools.ToolSession`).
        render_mode: None or "ansi" (the conversation).

    ``options={"organism_seed": k}`` pins organism k; ``info`` at reset also
    carries ``organism_id``.
    """

    seed_option = "organism_seed"
    seed_aliases = ()  # as LucaEnv: organism_seed only

    def __init__(self, tier="medium", mode="healthy", n_genes=20, backwards=False, budget=None, max_steps=None,
                 sealed=None, render_mode=None, vocabulary="invented", stance="suppress", python=False):
        check_render_mode(render_mode)
        # One Session, reused by every episode's ToolSession (it checks the settings).
        self._env = Session(tier=tier, mode=mode, n_genes=n_genes, backwards=backwards, budget=budget, max_steps=max_steps,
                            sealed=sealed, vocabulary=vocabulary)
        super().__init__("luca", render_mode=render_mode, sealed=self._env.seal, python=python, tier=tier, mode=mode,
                         n_genes=n_genes, backwards=backwards, vocabulary=vocabulary)  # python=True: refused, with why
        self.tier, self.mode, self.n_genes, self.backwards = tier, mode, n_genes, bool(backwards)
        self.vocabulary, self.stance = self._env.vocabulary, check_stance(stance)

    def _new_session(self, seed: int) -> ToolSession:
        return ToolSession(seed, tier=self.tier, mode=self.mode, n_genes=self.n_genes, backwards=self.backwards,
                           env=self._env, sealed=self._env.seal, vocabulary=self.vocabulary, stance=self.stance)

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs, {"organism_seed": info["organism_seed"], "organism_id": self.session.organism_id,
                     "messages": info["messages"], "tools": info["tools"]}

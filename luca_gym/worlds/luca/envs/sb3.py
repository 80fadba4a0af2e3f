"""``LucaSB3VecEnv``: many LUCA sessions on the flat encodings as one
stable-baselines3 ``VecEnv``: the generic
:class:`luca_gym.envs.sb3_vec.FlatSB3VecEnv` over LUCA's flat codec, with
LUCA's settings as arguments, organisms generated backwards or sealed on
request, ``organism_seed`` for the instance seed and the four scores of an
ended session in its info.

Each new episode's organism is drawn, by default, from a pool of the
organisms of seeds ``min_organism_seed .. min_organism_seed + pool_size - 1``
(from 10 000 up, so never the evaluation seeds 0-19 of the paper's tables),
generated once and stored beside the compilation cache, with a fresh noise
key per episode (:mod:`luca_gym.worlds.luca.pools`); ``organisms="fresh"``
draws a new seed from ``[min_organism_seed, spec.DRAWN_SEED_LIMIT)`` per
episode and generates its organism ahead of need. Both are LUCA's instance
source (:class:`~luca_gym.worlds.luca.pools.EpisodeOrganisms`, the generic
:class:`luca_gym.pools.InstanceSource`), which the generic env draws from.

Needs the ``rl`` extra (``pip install 'luca-gym[rl]'``).
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

from luca_gym.envs.sb3_vec import GENERATION_BATCH, TRAINING_SEED_LOW, FlatSB3VecEnv, check_min_seed
from luca_gym import seal as seal_mod
from luca_gym.worlds.luca import core, spec
from luca_gym.worlds.luca.core import flat
from luca_gym.worlds.luca.functional import LucaFlatCodec, organism_batch
from luca_gym.worlds.luca.config import LucaConfig
from luca_gym.worlds.luca.pools import DEFAULT_POOL_SIZE, EpisodeOrganisms

__all__ = ["LucaSB3VecEnv", "TRAINING_SEED_LOW", "GENERATION_BATCH", "SCORE_NAMES"]

SCORE_NAMES = ("composite", "prediction", "diagnosis", "rescue")

_batched_scores = jax.jit(jax.vmap(partial(core.session_scores, network=False), in_axes=(0, None)), static_argnums=1)


class LucaSB3VecEnv(FlatSB3VecEnv):
    """``num_envs`` LUCA sessions on the flat action space, for SB3.

    Args:
        num_envs: the batch size B.
        tier: and mode, n_genes, budget, analyst, backwards, max_steps,
            dense_shaping, shaping_scale, shaping_gamma, sealed: as
            :class:`~luca_gym.worlds.luca.envs.LucaFlatEnv`.
        organisms: ``"pool"`` (default: each new episode on an organism drawn
            uniformly from the pool, with a fresh noise key from the env's
            RNG) or ``"fresh"`` (a new organism every episode).
        pool_size: the pool's organisms, seeds min_organism_seed ..
            min_organism_seed + pool_size - 1 (default 1024; generated at the
            first reset, about 3 s for medium, 65 s for hard disease on a
            2-core CPU, then read from the store).
        min_organism_seed: the pool's first seed; fresh organism seeds are
            drawn uniformly from [min_organism_seed, spec.DRAWN_SEED_LIMIT).
            The default 10 000 keeps training organisms apart from the
            evaluation seeds 0-19.
        generation_batch: ``organisms="fresh"``: the fewest organisms
            generated in one call. Fresh organisms are generated ahead in
            batches of this many times a power of two, and each is used once.
            On an accelerator, whose generator calls hold 256, pass 256.
        seed: seeds the draw of organism seeds (``seed()`` before a
            ``reset()`` reseeds it, SB3's convention).

    Spaces as the single env's: observations float32 (B, D), actions int
    (B,) in [0, K), ``action_masks()`` bool (B, K). ``reset()`` and every
    step return numpy. ``set_options([{"organism_seed": k}, ...])`` pins
    organisms for the next ``reset()`` (with the seed's own noise key, as
    :class:`~luca_gym.worlds.luca.envs.LucaFlatEnv` opens them).

    ``infos[i]`` holds ``error_code`` (0: accepted; a masked action is
    refused at no cost); where sub-env i's episode ended on this step, also
    ``terminal_observation`` (float32 (D,)), ``episode`` (``r`` return, ``l``
    length, ``t`` seconds since construction: SB3's Monitor format),
    ``TimeLimit.truncated``, ``score`` and ``composite`` (the headline),
    ``scores`` (composite, prediction, diagnosis, rescue) and
    ``organism_seed``. ``reset_infos[i]`` holds ``organism_seed``.
    """

    seed_name = "organism_seed"

    def __init__(
        self,
        num_envs: int,
        tier: str = "medium",
        mode: str = "healthy",
        n_genes: int = 20,
        budget: int | None = None,
        analyst: str = "logit-additive",
        backwards: bool = False,
        max_steps: int | None = None,
        dense_shaping: bool = False,
        shaping_scale: float = 0.1,
        shaping_gamma: float = 1.0,
        min_organism_seed: int = TRAINING_SEED_LOW,
        generation_batch: int = GENERATION_BATCH,
        seed: int | None = None,
        sealed=None,
        organisms: str = "pool",
        pool_size: int = DEFAULT_POOL_SIZE,
    ):
        num_envs = spec.check_positive_int(num_envs, "num_envs")
        self.seal = seal_mod.make_seal(sealed)
        self.params = core.make_params(
            tier, n_genes, mode, budget=budget, max_steps=max_steps, dense_shaping=dense_shaping,
            shaping_scale=shaping_scale, shaping_gamma=shaping_gamma,
        )
        self.backwards = spec.check_bool(backwards, "backwards")
        codec = LucaFlatCodec(self.params, tier, analyst)  # checks the analyst
        generation_batch = spec.check_positive_int(generation_batch, "generation_batch")
        low = check_min_seed(min_organism_seed, "min_organism_seed")
        # Each new episode's organism (and noise key) from LUCA's instance source:
        # the disk-stored pool, each episode with a fresh noise key, or fresh organisms with their own.
        source = EpisodeOrganisms(organisms, LucaConfig(tier=tier, mode=mode, n_genes=n_genes, backwards=self.backwards),
                                  self.seal, pool_size=pool_size, pool_start=low, generation_batch=generation_batch, low=low)
        super().__init__(codec, num_envs, min_instance_seed=low, generation_batch=generation_batch, seed=seed,
                         source=source)
        self.tier, self.mode, self.n_genes, self.analyst = tier, mode, n_genes, analyst
        self.layout = flat.layout(self.params)
        self.episodes = source
        self.organisms = source.organisms
        self.pool_size = source.pool_size if self.organisms == "pool" else None

    @property
    def min_organism_seed(self) -> int:
        return self.min_instance_seed

    @property
    def organism_seeds(self) -> np.ndarray:
        """int64 (B,): the organism seed of each sub-env's session."""
        return self.instance_seeds

    def _instances(self, seeds: np.ndarray):
        return jax.device_get(organism_batch(seeds, self.tier, self.n_genes, self.mode, self.backwards, sealed=self.seal))

    def _ended_info(self, state, rows: np.ndarray) -> list[dict]:
        scores = jax.device_get(_batched_scores(state, self.params))
        out = []
        for i in rows:
            named = {name: float(scores[name][i]) for name in SCORE_NAMES}
            out.append({"score": named["composite"], "composite": named["composite"], "scores": named})
        return out

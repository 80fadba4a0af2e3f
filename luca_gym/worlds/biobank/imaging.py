"""Synthetic cine MRI: for each imaged participant, a short-axis cine stack
of :data:`FRAMES` frames of :data:`PIXELS` x :data:`PIXELS` uint8 pixels
(:data:`PIXEL_MM` mm each) over one cardiac cycle, end-diastole first
(:func:`cine`; DrugTargetWorld S1.3: the archetypes express disease as
chamber dilation in DCM, wall thickening in HCM, tissue signal in HFpEF and
impaired regional motion in ischemic disease).

What an image shows (every coefficient a design choice): a ring-shaped left
ventricle, a bright blood pool inside a darker myocardium on a dark
background, rendered from the participant's heart as it is (the generator's
``heart``: the noise-free MRI pattern of the six clinic measures, along the
archetype's loadings on severity, the covariates and the planted imaging
biases T5, T6 and T8) plus the participant's own anatomy (:data:`ANATOMY_SD`
per measure, no disease in it). The six standardised measures set:

* cavity size (``lvedv``): end-diastolic cavity radius 8 px x exp(0.1 z);
* wall thickness (``max_wall_thickness``): 3.2 px x exp(0.15 z) at
  end-diastole, the septum (the image's left) up to 35% thicker as z
  rises past 1 (asymmetric hypertrophy); the myocardium's area is kept
  through the cycle, so the wall thickens as the cavity shrinks;
* contraction (``lvef``): the cavity radius shortens by 0.37 x exp(0.12 z)
  (at least 0.03, at most 0.6) at end-systole (frame FRAMES / 2);
* regional motion (``wall_motion_score_index``): a coronary territory
  (anterior, lateral or inferior, drawn per participant) whose shortening
  falls by sigmoid(1.6 (z - 1)) (hypokinesia);
* texture (``native_t1``): the myocardium's signal (0.35 + 0.04 z) and its
  patchiness (angular harmonics that move with the wall, amplitude
  0.03 + 0.03 softplus(z));
* ``lv_mass`` follows from the cavity and the wall; no separate term.

Each scanner has its own gain (:data:`SITE_GAIN`), and every pixel its
acquisition noise (Gaussian, SD :data:`NOISE_SD` of full scale, cut at 2.66 SD). T5 (the imaging-site batch
effect): in a world that carries it, the scanner of T5's site (drawn per world) also distorts space,
stretching its images :data:`SITE_STRETCH` along the image's rows (and its
clinic measures, read from those images, shift along the disease pattern:
the ``heart`` already holds that shift). Pixels are float32 in [0, 1],
quantised to uint8 (0-255).

The images draw from their own key (:data:`IMAGING_KEY` folded into the
world key) and each participant's from its row index, so a world's images
are a pure function of (seed, config), no other value of the world depends
on them, and a participant's stack is the same however the stacks are batched.
No measure derived from the images is released beyond the clinic's six.
"""

from __future__ import annotations

from functools import partial
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np

FRAMES = 8
PIXELS = 32
PIXEL_MM = 3.0
IMAGING_KEY = 0x1A6E  # folded into the world key: the images' own draws
ANATOMY_SD = 0.35  # the participant's own anatomy, per standardised measure
NOISE_SD = 0.03  # acquisition noise, of full scale
SITE_GAIN = (1.0, 0.94, 1.05, 0.97)  # each site's scanner (sites 1-4)
SITE_STRETCH = 1.15  # T5: the batch site's scanner stretches its images along the rows
BLOOD, BACKGROUND = 0.85, 0.06  # signal of the blood pool and of what surrounds the heart
TERRITORIES = (np.pi / 2, 0.0, -np.pi / 2)  # anterior, lateral, inferior (radians; the septum lies at pi)
HARMONICS = 6  # of the myocardial texture
BATCH = 512  # participants rendered at a time (memory; the values do not depend on it)
EDGE_PX = 0.5  # width of the partial-volume edge
# Acquisition noise: a random byte through the normal quantiles of its 256 equal slices (a Gaussian cut at 2.66 SD,
# far finer than the uint8 output): a quarter of the random bits of normal(), whose draws cost the images half their time
_NOISE_QUANTILES = np.array([NormalDist().inv_cdf((i + 0.5) / 256) for i in range(256)], np.float32)


def _stack(key, heart, gain, stretch):
    """One participant's stack, float32 (FRAMES, PIXELS, PIXELS) in [0, 1],
    from ``heart`` float32 (6,) (the standardised MRI pattern), ``gain``
    float32 () and ``stretch`` float32 () (1 unless distorted by T5)."""
    k = jax.random.split(key, 7)
    f32 = jnp.float32
    z = heart + ANATOMY_SD * jax.random.normal(k[0], (6,), f32)
    lvef, lvedv, wall, _mass, t1, wall_motion = z
    cavity = 8.0 * jnp.exp(0.1 * lvedv)
    shortening = jnp.clip(0.37 * jnp.exp(0.12 * lvef), 0.03, 0.6)
    hypokinesia = jax.nn.sigmoid(1.6 * (wall_motion - 1.0))
    territory = jnp.asarray(TERRITORIES, f32)[jax.random.randint(k[1], (), 0, len(TERRITORIES))]
    territory = territory + 0.3 * jax.random.normal(k[2], (), f32)
    centre = (PIXELS - 1) / 2 + jax.random.uniform(k[3], (2,), f32, -1.0, 1.0)
    asymmetry = 0.35 * jax.nn.sigmoid(1.5 * (wall - 1.0))
    texture_amplitude = 0.03 + 0.03 * jax.nn.softplus(t1)
    phases = jax.random.uniform(k[4], (2, HARMONICS), f32, 0.0, 2 * np.pi)
    weights = jax.random.normal(k[5], (2, HARMONICS), f32) / jnp.sqrt(HARMONICS)

    rows, cols = jnp.meshgrid(jnp.arange(PIXELS, dtype=f32), jnp.arange(PIXELS, dtype=f32), indexing="ij")
    x = (cols - centre[1]) / stretch  # T5: the scanner stretches space along the rows
    y = centre[0] - rows
    r = jnp.hypot(x, y)
    theta = jnp.arctan2(y, x)
    wall_px = 3.2 * jnp.exp(0.15 * wall) * (1.0 + asymmetry * jnp.cos(theta - np.pi))
    outer = jnp.minimum(cavity + wall_px, PIXELS / 2 - 1.0)
    myocardium = jnp.maximum(outer**2 - cavity**2, 1.0)  # kept through the cycle (the wall thickens as the cavity shrinks)
    gap = jnp.mod(theta - territory + np.pi, 2 * np.pi) - np.pi  # the angle from the territory's centre
    local = shortening * (1.0 - hypokinesia * jnp.exp(-(gap**2) / (2 * 0.6**2)))
    contraction = (1.0 - jnp.cos(2 * np.pi * jnp.arange(FRAMES, dtype=f32) / FRAMES))[:, None, None] / 2
    inner = cavity * (1.0 - contraction * local)  # (FRAMES, PIXELS, PIXELS)
    outer = jnp.sqrt(inner**2 + myocardium)
    depth = jnp.clip((r - inner) / (outer - inner), 0.0, 1.0)  # 0 at the endocardium, 1 at the epicardium
    harmonics = jnp.arange(1, HARMONICS + 1, dtype=f32)[:, None, None]
    waves = (weights[:, :, None, None] * jnp.cos(harmonics * theta + phases[:, :, None, None])).sum(1)  # (2, PIXELS, PIXELS)
    pattern = waves[0] + waves[1] * (2 * depth - 1)  # the texture moves with the wall: angle and depth in it
    muscle = 0.35 + 0.04 * t1 + texture_amplitude * pattern
    in_blood = jax.nn.sigmoid((inner - r) / EDGE_PX)
    in_heart = jax.nn.sigmoid((outer - r) / EDGE_PX)
    signal = in_blood * BLOOD + (in_heart - in_blood) * muscle + (1.0 - in_heart) * BACKGROUND
    words = jax.random.bits(k[6], (FRAMES * PIXELS * PIXELS // 4,), jnp.uint32)  # a byte a pixel: a quarter of normal()'s draws
    levels = (words[:, None] >> jnp.arange(0, 32, 8, dtype=jnp.uint32)) & 255
    noise = NOISE_SD * jnp.asarray(_NOISE_QUANTILES)[levels.reshape(FRAMES, PIXELS, PIXELS)]
    return jnp.clip(gain * signal + noise, 0.0, 1.0)


@jax.jit
def _cine(key, heart, site, participant, distorted):
    keys = jax.vmap(partial(jax.random.fold_in, jax.random.fold_in(key, IMAGING_KEY)))(participant)
    gain = jnp.asarray(SITE_GAIN, jnp.float32)[site]
    stretch = jnp.where(distorted, jnp.float32(SITE_STRETCH), jnp.float32(1.0))

    def one(args):
        return jnp.round(255.0 * _stack(*args)).astype(jnp.uint8)

    return jax.lax.map(one, (keys, heart, gain, stretch), batch_size=min(BATCH, heart.shape[0]))


def cine(world_key, heart, site, participant, distorted) -> np.ndarray:
    """The cine stacks of the imaged: uint8 (NI, FRAMES, PIXELS, PIXELS),
    from ``world_key`` (the world's root key, :func:`~.generator.world_key`),
    ``heart`` float32 (NI, 6) (the generator's noise-free MRI pattern of the
    imaged), ``site`` int32 (NI,) (0-3), ``participant`` int32 (NI,) (their
    row indices) and ``distorted`` bool (NI,) (imaged at T5's distorting
    scanner). One compile per profile."""
    out = _cine(world_key, jnp.asarray(heart, jnp.float32), jnp.asarray(site, jnp.int32), jnp.asarray(participant, jnp.int32),
                jnp.asarray(distorted, bool))
    return np.asarray(jax.device_get(out))

"""LUCA's pictures of a session: :func:`render_text` (``render_mode="ansi"``)
and :func:`render_rgb` (``"rgb_array"``), both of the public observation only.

The core's ``render`` (:func:`luca_gym.worlds.luca.core.protocol.render`),
and so every LUCA env (the generic :class:`~luca_gym.envs.core.CoreEnv`
under :class:`~luca_gym.worlds.luca.envs.LucaEnv`, the flat env), draws with
these; the text needs the organism's names (its ``meta``), the picture only
the state.
"""

from __future__ import annotations

import jax
import numpy as np

from luca_gym.boundary import to_numpy_observation
from luca_gym.worlds.luca import core
from luca_gym.worlds.luca.spec import INTERVENTION_TYPES
from luca_gym.worlds.luca.types import Organism

RGB_SHAPE = (112, 160, 3)  # height, width, RGB: even sides, as video encoders want
_observe = jax.jit(core.observe, static_argnums=1)  # eager, observe runs op by op: 16 ms a frame, jitted 1 ms

# render_rgb's palette and layout (pixel rows and columns).
_WHITE, _TRACK, _GREEN, _GREY, _BLUE = (255, 255, 255), (232, 232, 232), (60, 160, 80), (150, 150, 150), (50, 100, 200)
_RED, _BAND, _LATENT, _RUN, _TASK = (200, 50, 50), (214, 240, 214), (190, 190, 190), (40, 40, 40), (240, 150, 30)
_MARGIN, _BUDGET_ROWS, _PLOT_TOP, _PLOT_BOTTOM, _TASK_ROWS, _GRID_TOP, _CELL = 4, (4, 12), 18, 78, (81, 83), 84, 6


def render_rgb(state: core.EnvState, params: core.EnvParams) -> np.ndarray:
    """The session as a picture of its public observation: uint8
    ``RGB_SHAPE`` (112, 160, 3), the same for the same observation.

    From the top: the budget left (green, the full width being the whole
    budget); per phenotype, the healthy range (pale green band) behind its
    baseline (grey bar; red where aberrant) and its last measurement (blue),
    height = value in [0, 1]; an orange tick over the current task's two
    genes; the experiments run (dark cells), one row per single intervention
    (BLOCK, BOOST, DAMPEN) with the genes across, latent genes light grey, and
    a last row of the signals activated. The frame turns red once the session
    has ended. With more genes than the 152 columns, a column shows a group of
    genes (dark if any of them was tested).
    """
    obs = jax.device_get(_observe(state, params))
    _, width, _ = RGB_SHAPE
    inner = width - 2 * _MARGIN
    image = np.full(RGB_SHAPE, _WHITE, np.uint8)
    left, right = _MARGIN, width - _MARGIN

    top, bottom = _BUDGET_ROWS
    image[top:bottom, left:right] = _TRACK
    image[top:bottom, left:left + round(inner * int(obs["budget_left"]) / params.budget)] = _GREEN

    span = _PLOT_BOTTOM - _PLOT_TOP
    level = lambda value: _PLOT_BOTTOM - round(span * float(np.clip(value, 0.0, 1.0)))  # noqa: E731
    group = inner // len(obs["baseline_phenotypes"])
    for p, (baseline, last) in enumerate(zip(obs["baseline_phenotypes"], obs["last_phenotypes"])):
        x = left + p * group
        low, high = obs["healthy_range"][p]
        image[level(high):level(low), x + 2:x + group - 2] = _BAND
        image[level(baseline):_PLOT_BOTTOM, x + 6:x + group // 2 - 2] = _RED if obs["aberrant"][p] else _GREY
        image[level(last):_PLOT_BOTTOM, x + group // 2 + 2:x + group - 6] = _BLUE

    def columns(values: np.ndarray) -> np.ndarray:
        """bool (inner, ...): ``values`` (count, ...) spread over the inner columns, any() over a group."""
        starts = np.arange(inner) * len(values) // inner
        return np.logical_or.reduceat(values.astype(bool), starts, axis=0)

    task = np.zeros(params.n_genes, bool)
    task[obs["task_genes"][obs["task_genes"] >= 0]] = True
    image[_TASK_ROWS[0]:_TASK_ROWS[1], left:right][:, columns(task)] = _TASK
    tested = obs["single_mask"]
    for row, run in enumerate([*tested.T, None]):
        y = _GRID_TOP + row * _CELL
        cells = image[y:y + _CELL - 1, left:right]
        if run is None:  # the signals' row
            cells[:] = np.where(columns(obs["signal_mask"])[:, None], _RUN, _TRACK)
            continue
        cells[:] = _TRACK
        cells[:, ~columns(obs["targetable"])] = _LATENT
        cells[:, columns(run)] = _RUN
    edge = _RED if obs["ended"] else _GREY
    image[:2], image[-2:], image[:, :2], image[:, -2:] = edge, edge, edge, edge
    return image


def render_text(state: core.EnvState, params: core.EnvParams, organism: Organism) -> str:
    """The session as text (public information only)."""
    m = organism.meta
    obs = to_numpy_observation(core.observe(state, params))
    fmt = lambda v: "[" + ", ".join(f"{float(x):.3f}" for x in v) + "]"  # noqa: E731
    lines = [
        f"LUCA {m.tier} {m.mode} N={m.n_genes}  budget {int(obs['budget_left'])}/{params.budget}  "
        f"calls {int(state.step_count)}{'  [ended]' if obs['ended'] else ''}",
        f"phenotypes {', '.join(m.phenotype_names)}",
        f"baseline  {fmt(obs['baseline_phenotypes'])}"
        + (f"  aberrant {[n for n, a in zip(m.phenotype_names, obs['aberrant']) if a]}" if params.disease else ""),
        f"last      {fmt(obs['last_phenotypes'])}  steps {int(obs['last_steps'])}"
        + ("" if obs["last_converged"] else " (not converged)"),
    ]
    code = int(obs["last_error"])
    if code:
        lines.append(f"last call refused: {core.ERROR_MESSAGES[code]}")
    tested = obs["single_mask"]
    for g in np.flatnonzero(tested.any(axis=1)):
        for c in np.flatnonzero(tested[g]):
            lines.append(f"  {INTERVENTION_TYPES[core.SINGLE_TYPES[c]]:<6} {m.gene_names[g]}: {fmt(obs['single_results'][g, c])}")
    for k in np.flatnonzero(obs["signal_mask"]):
        lines.append(f"  ACTIVATE {m.signal_labels[k]}: {fmt(obs['signal_results'][k])}")
    if int(obs["task_index"]) >= 0:
        genes = [m.gene_names[g] for g in obs["task_genes"]]
        types = [INTERVENTION_TYPES[c] for c in obs["task_codes"]]
        lines.append(f"task {int(obs['task_index']) + 1}: {types[0]} {genes[0]} + {types[1]} {genes[1]}")
    if params.disease:
        lines.append(f"diagnosis committed: {bool(obs['diagnosis_committed'])}")
    return "\n".join(lines)


__all__ = ["RGB_SHAPE", "render_rgb", "render_text"]

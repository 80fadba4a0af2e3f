"""The biobank world's synthetic cine MRI: deterministic per
seed, shaped by archetype and severity as designed, distorted at T5's site,
released without naming the truth."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from luca_gym.worlds.biobank.config import BiobankConfig
from luca_gym.worlds.biobank.design import Design, planted
from luca_gym.worlds.biobank.generator import IMAGING, T5, cohort, world_key
from luca_gym.worlds.biobank.imaging import FRAMES, PIXELS, SITE_STRETCH, cine
from luca_gym.worlds.biobank.release import TRUTH_WORDS, build_release, check_no_truth

CONFIG = BiobankConfig(profile="tiny")
SEED = 4100
ARCHETYPE_WORLDS = {  # one world per archetype (the DCM one carries T5, the others do not)
    "DCM": (SEED, Design("DCM", 2, "standard", planted("T5"))),
    "HCM": (SEED + 1, Design("HCM", 2, "standard")),
    "HFpEF": (SEED + 2, Design("HFpEF", 2, "standard")),
    "ischemic": (SEED + 3, Design("ischemic", 2, "standard")),
}
BLOOD, HEART = 150, 50  # uint8 thresholds: blood pool (0.85 of full scale), myocardium (0.35) over background (0.06)
END_SYSTOLE = FRAMES // 2


@pytest.fixture(scope="module")
def cohorts():
    return {name: cohort(seed, design, CONFIG.sizes) for name, (seed, design) in ARCHETYPE_WORLDS.items()}


def measures(cine: np.ndarray) -> dict:
    """What an analyst measures from stacks uint8 (NI, FRAMES, PIXELS, PIXELS):
    each float64 (NI,)."""
    blood, heart = cine > BLOOD, cine > HEART
    area = blood.sum((2, 3)).astype(np.float64)
    rows, cols = np.meshgrid(np.arange(PIXELS), np.arange(PIXELS), indexing="ij")

    def centroid(mask):
        n = mask.sum((1, 2))
        return np.stack([(mask * rows).sum((1, 2)) / n, (mask * cols).sum((1, 2)) / n], 1)

    def spread(mask, coordinate):
        n = mask.sum((1, 2))
        mean = (mask * coordinate).sum((1, 2)) / n
        return np.sqrt((mask * (coordinate - mean[:, None, None]) ** 2).sum((1, 2)) / n)

    cavity = np.sqrt(area[:, 0] / np.pi)
    muscle = heart[:, 0] & ~blood[:, 0]
    return {
        "cavity": cavity,
        "wall": np.sqrt(heart[:, 0].sum((1, 2)) / np.pi) - cavity,
        "ejection": 1.0 - area[:, END_SYSTOLE] / area[:, 0],
        "muscle_signal": (cine[:, 0] * muscle).sum((1, 2)) / muscle.sum((1, 2)),
        # a hypokinetic territory keeps its wall out at end-systole: the blood pool's centre moves towards it
        "regional": np.hypot(*(centroid(blood[:, END_SYSTOLE]) - centroid(blood[:, 0])).T) / cavity,
        "stretch": spread(blood[:, 0], cols) / spread(blood[:, 0], rows),
    }


def _r(x, y) -> float:
    return float(np.corrcoef(x, y)[0, 1])


def test_images_are_a_pure_function_of_the_seed(cohorts):
    seed, design = ARCHETYPE_WORLDS["DCM"]
    first = cohorts["DCM"]["cine"]
    assert first.shape == (CONFIG.sizes.imaged, FRAMES, PIXELS, PIXELS) and first.dtype == np.uint8
    assert np.array_equal(cohort(seed, design, CONFIG.sizes)["cine"], first)
    assert not np.array_equal(cohort(seed + 10, design, CONFIG.sizes)["cine"], first)
    c = cohorts["DCM"]  # a participant's stack is its own: the same rendered alone as in the whole cohort
    site = c["site"][c["imaged"]]
    some = slice(10, 15)
    alone = cine(world_key(np.array([0, seed], np.uint32)), c["heart"][some], site[some], c["imaged"][some],
                 c["carried"][T5] & (site[some] == c["batch_site"]))
    assert np.array_equal(alone, first[some])
    assert first.min() < 30 and first.max() > 200 and (first == 0).mean() < 0.05 and (first == 255).mean() < 0.05  # range used, not clipped


def test_size_wall_motion_and_texture_follow_archetype_and_severity(cohorts):
    r = {}
    for name, c in cohorts.items():
        severity = c["severity"][c["imaged"]]
        r[name] = {k: _r(v, severity) for k, v in measures(c["cine"]).items()}
    assert r["DCM"]["cavity"] > 0.4 and r["DCM"]["ejection"] < -0.5  # dilation, failing ejection
    assert r["HCM"]["wall"] > 0.4 and r["HCM"]["cavity"] < 0  # thickening, a smaller cavity
    assert r["HFpEF"]["muscle_signal"] > 0.4 and r["HFpEF"]["ejection"] > -0.6  # the tissue; ejection preserved
    assert r["ischemic"]["regional"] > 0.4 and r["ischemic"]["regional"] > r["HCM"]["regional"] + 0.2  # regional motion
    # each archetype's own sign shows most strongly in its own world
    assert r["DCM"]["cavity"] > max(r[a]["cavity"] for a in ("HCM", "HFpEF"))
    assert r["HCM"]["wall"] > max(r[a]["wall"] for a in ("DCM", "ischemic"))
    assert r["HFpEF"]["muscle_signal"] > max(r[a]["muscle_signal"] for a in ("DCM", "HCM", "ischemic"))


def test_the_t5_site_distortion_shows_in_its_world_only(cohorts):
    for name, carried in (("DCM", True), ("HCM", False)):
        c = cohorts[name]
        site = c["site"][c["imaged"]]
        m = measures(c["cine"])
        batch, others = m["stretch"][site == c["batch_site"]].mean(), m["stretch"][site != c["batch_site"]].mean()
        assert abs(others - 1.0) < 0.03, name
        if carried:
            assert batch > 1.0 + 0.6 * (SITE_STRETCH - 1.0)
            severity = c["severity"][c["imaged"]]  # and the site's cavities are larger than severity explains
            fit = np.polyfit(severity, m["cavity"], 1)
            residual = m["cavity"] - np.polyval(fit, severity)
            assert residual[site == c["batch_site"]].mean() > residual[site != c["batch_site"]].mean() + 0.3
        else:
            assert abs(batch - 1.0) < 0.03


def test_the_release_carries_the_images_and_no_truth(cohorts, tmp_path):
    seed, design = ARCHETYPE_WORLDS["HCM"]
    c = cohorts["HCM"]
    release = build_release(c, design, seed, CONFIG.sizes)
    check_no_truth(release)
    release.write(str(tmp_path))
    table = pd.read_parquet(tmp_path / "cine_mri.parquet")
    assert list(table.columns) == ["participant_id", "frames"]
    dictionary = json.loads((tmp_path / "data_dictionary.json").read_text())
    recipe = dictionary["tables"]["cine_mri"]["columns"]["frames"]["description"].split("as an array: ")[1].split(" (")[0]
    frames = eval(recipe, {"__builtins__": {}, "numpy": np, "table": table})  # the dictionary's own recipe loads them
    assert np.array_equal(frames, c["cine"])
    assert list(table["participant_id"]) == list(pd.read_parquet(tmp_path / "imaging.parquet")["participant_id"])
    # the clinic's six measures and nothing else derived from the images
    assert list(pd.read_parquet(tmp_path / "imaging.parquet").columns) == ["participant_id", *IMAGING]
    for name in os.listdir(tmp_path):
        if name.endswith((".json", ".md")):
            text = (tmp_path / name).read_text().lower()
            assert not [w for w in TRUTH_WORDS if w in text], name

"""The release: what an analyst of a biobank world is given, as tables of
columns (:class:`Release`), with its data dictionary, written as Parquet
files by :meth:`Release.write`.

Tables (one row per participant unless said; ``participant_id`` "P000001"...):

* ``participants``: age, sex, BMI, assessment site, exercise;
* ``imaging``: the imaged participants' six clinic-reported MRI measures;
* ``cine_mri``: the imaged participants' cine MRI, one row each: a
  short-axis stack of 8 frames of 32 x 32 uint8 pixels (3 mm) over one
  cardiac cycle from end-diastole, as raw bytes (:data:`CINE_RECIPE` loads
  them as an array; :mod:`~.imaging` draws them);
* ``physiology``: blood pressure, heart rate, NT-proBNP;
* ``ecg``: every participant's resting 12-lead ECG summary (QRS duration,
  QTc, heart rate, Sokolow-Lyon voltage, PR interval; world version 8);
* ``ct``: the imaged participants' cardiac CT (coronary calcium, epicardial
  fat, LV mass; world version 8);
* ``metabolites``: eight blood metabolites;
* ``proteins``: one column per protein (``PROT_0001``...), NPX (log2) units;
* ``transcripts``: a subset of participants, one column per gene (``GENE_0001``...);
* ``genotypes``: one column per variant (``rs...``), effect-allele counts 0/1/2;
* ``diagnoses``: one row per ICD-10 code recorded by baseline, with its date
  (``years_from_baseline``, 0 or negative; world version 8);
* ``follow_up_diagnoses``: the codes recorded in the five years after
  baseline (hospital records up to death or loss to follow-up), dated: a
  heart-failure hospitalisation at its cardiovascular event's time, new
  cardiomyopathy, hypertension and diabetes (world version 8);
* ``outcomes``: a five-year cardiovascular event and its time, and survival
  over five years (all-cause and cardiac death, each with its time);
* ``visits``: the follow-up visit of half the imaged participants (2-3.5
  years after baseline): the six MRI measures again and NT-proBNP;
  ``visit_proteins``: their plasma proteins at that visit;
* ``protein_annotation`` (one row per protein: its gene and where it lies)
  and ``variants`` (one row per variant: where it lies, its alleles).

Missing values are Parquet nulls (NaN in pandas and in the tools), except the
documented sentinel codes (:data:`SENTINELS`): ``-999`` for a value not
recorded (exercise, physiology) and ``-1`` for an NT-proBNP below the assay's
limit of detection (15 pg/mL). The tools treat a sentinel as missing.

Nothing of the world's truth is here: no latent severity, no driver, effect
or design, no allele frequency or causal variant; :func:`check_no_truth` is
the test's guard.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from luca_gym.worlds.biobank.config import BLOCK, Sizes
from luca_gym.worlds.biobank.design import ARCHETYPES, design_rng
from luca_gym.worlds.biobank.generator import CT, ECG, IMAGING, METABOLITES
from luca_gym.worlds.biobank.imaging import FRAMES, PIXEL_MM, PIXELS

NOT_RECORDED, BELOW_LOD = -999.0, -1.0
SENTINELS = {NOT_RECORDED: "not recorded", BELOW_LOD: "below the limit of detection (15 pg/mL)"}
NTPROBNP_LOD = 15.0
WINDOW_KB = 250  # a protein's cis window: variants within this many kb of its gene's start
CARDIOMYOPATHY_CODES = {"DCM": "I42.0", "HCM": "I42.1", "HFpEF": "I50.3", "ischemic": "I25.5"}
CODES = {
    "I42.0": "dilated cardiomyopathy", "I42.1": "obstructive hypertrophic cardiomyopathy",
    "I50.3": "diastolic (congestive) heart failure", "I25.5": "ischaemic cardiomyopathy",
    "I50.9": "heart failure, unspecified", "I10": "essential (primary) hypertension",
    "E11": "type 2 diabetes mellitus", "E66": "obesity",
}
CARDIAC_CODES = ("I42.0", "I42.1", "I50.3", "I25.5", "I50.9")
# Participant-level tables a phenotype or covariate may come from (the wide ones included).
PARTICIPANT_TABLES = ("participants", "imaging", "physiology", "metabolites", "outcomes", "proteins", "transcripts", "visits",
                      "visit_proteins", "ecg", "ct")
COVARIATES = ("age_years", "sex", "bmi_kg_m2", "site")  # what "adjust" adjusts for
CINE_RECIPE = (f"numpy.frombuffer(b''.join(table['frames']), numpy.uint8).reshape(-1, {FRAMES}, {PIXELS}, {PIXELS}) "
               "(participant, frame, row, column)")
# Words no released name may hold (the guard of check_no_truth).
TRUTH_WORDS = ("severity", "driver", "causal", "effect_size", "archetype", "latent", "truth", "design", "maf")

_COLUMNS = {  # (unit, description) of every narrow column
    "participants": {
        "participant_id": ("", "participant identifier"),
        "age_years": ("years", "age at the baseline assessment"),
        "sex": ("0 female, 1 male", "sex"),
        "bmi_kg_m2": ("kg/m2", "body-mass index"),
        "site": ("1-4", "assessment and imaging site"),
        "exercise_hours_per_week": ("hours/week", "self-reported moderate or vigorous exercise; -999 not answered"),
    },
    "imaging": {
        "participant_id": ("", "participant identifier"),
        "lvef_pct": ("%", "left-ventricular ejection fraction"),
        "lvedv_ml": ("mL", "left-ventricular end-diastolic volume"),
        "max_wall_thickness_mm": ("mm", "maximal left-ventricular wall thickness"),
        "lv_mass_g": ("g", "left-ventricular mass"),
        "native_t1_ms": ("ms", "myocardial native T1 time"),
        "wall_motion_score_index": ("1 = normal", "wall-motion score index (mean of the 17 segments' scores)"),
    },
    "cine_mri": {
        "participant_id": ("", "participant identifier"),
        "frames": (f"uint8 bytes ({FRAMES} x {PIXELS} x {PIXELS})",
                   f"short-axis cine MRI, mid-ventricular slice: {FRAMES} frames over one cardiac cycle from end-diastole "
                   f"(frame 0), each {PIXELS} x {PIXELS} pixels of {PIXEL_MM:g} mm, row-major, signal 0-255; "
                   f"as an array: {CINE_RECIPE}"),
    },
    "physiology": {
        "participant_id": ("", "participant identifier"),
        "sbp_mmhg": ("mmHg", "systolic blood pressure; -999 not recorded"),
        "dbp_mmhg": ("mmHg", "diastolic blood pressure; -999 not recorded"),
        "heart_rate_bpm": ("beats/min", "resting heart rate; -999 not recorded"),
        "ntprobnp_pg_ml": ("pg/mL", "NT-proBNP; -1 below the limit of detection (15 pg/mL), -999 not recorded"),
    },
    "ecg": {
        "participant_id": ("", "participant identifier"),
        "qrs_ms": ("ms", "QRS duration; missing: no ECG recorded"),
        "qtc_ms": ("ms", "QT interval corrected for heart rate (Bazett)"),
        "heart_rate_bpm": ("beats/min", "ventricular rate during the ECG"),
        "sokolow_lyon_mv": ("mV", "Sokolow-Lyon voltage (S in V1 + the larger R in V5 or V6)"),
        "pr_ms": ("ms", "PR interval"),
    },
    "ct": {
        "participant_id": ("", "participant identifier"),
        "coronary_calcium_agatston": ("Agatston units", "coronary artery calcium score (0: none detected); missing: null"),
        "epicardial_fat_ml": ("mL", "epicardial adipose tissue volume"),
        "lv_mass_g": ("g", "left-ventricular mass (contrast CT)"),
    },
    "metabolites": {
        "participant_id": ("", "participant identifier"),
        "ldl_mmol_l": ("mmol/L", "LDL cholesterol"), "hdl_mmol_l": ("mmol/L", "HDL cholesterol"),
        "triglycerides_mmol_l": ("mmol/L", "triglycerides"), "glucose_mmol_l": ("mmol/L", "fasting glucose"),
        "creatinine_umol_l": ("umol/L", "serum creatinine"), "crp_mg_l": ("mg/L", "C-reactive protein"),
        "urate_umol_l": ("umol/L", "serum urate"), "lactate_mmol_l": ("mmol/L", "lactate"),
    },
    "outcomes": {
        "participant_id": ("", "participant identifier"),
        "cv_event": ("0/1", "a cardiovascular event (cardiovascular death or heart-failure hospitalisation) within follow-up"),
        "cv_event_time_years": ("years", "time from baseline to the event, or to the end of follow-up (at most 5)"),
        "all_cause_death": ("0/1", "death from any cause within five years (registry linkage: no loss to follow-up)"),
        "all_cause_death_time_years": ("years", "time from baseline to death, or 5 (censored at five years)"),
        "cardiac_death": ("0/1", "cardiac death within five years"),
        "cardiac_death_time_years": ("years", "time from baseline to cardiac death, or to censoring: death from another "
                                              "cause or five years"),
    },
    "visits": {
        "participant_id": ("", "participant identifier"),
        "visit_years": ("years", "time from baseline to the follow-up visit"),
        **{f"{name}": (unit, f"{text} at the follow-up visit") for name, (unit, text) in (
            ("lvef_pct", ("%", "left-ventricular ejection fraction")), ("lvedv_ml", ("mL", "left-ventricular end-diastolic volume")),
            ("max_wall_thickness_mm", ("mm", "maximal left-ventricular wall thickness")), ("lv_mass_g", ("g", "left-ventricular mass")),
            ("native_t1_ms", ("ms", "myocardial native T1 time")),
            ("wall_motion_score_index", ("1 = normal", "wall-motion score index (mean of the 17 segments' scores)")),
            ("ntprobnp_pg_ml", ("pg/mL", "NT-proBNP; missing: null")))},
    },
    "diagnoses": {
        "participant_id": ("", "participant identifier"),
        "icd10": ("ICD-10 code", "a recorded diagnosis (one row per participant and code); codes: "
                  + "; ".join(f"{c} {d}" for c, d in CODES.items())),
        "years_from_baseline": ("years", "when the code was first recorded, from the baseline assessment (0 or negative)"),
    },
    "follow_up_diagnoses": {
        "participant_id": ("", "participant identifier"),
        "icd10": ("ICD-10 code", "a diagnosis recorded after baseline (one row per participant and code); codes as "
                  "in diagnoses: I50.9 at a heart-failure hospitalisation (known before or not), new cardiomyopathy, "
                  "hypertension and diabetes"),
        "years_from_baseline": ("years", "when it was recorded, from the baseline assessment (above 0, at most 5)"),
    },
    "protein_annotation": {
        "protein": ("", "protein (a column of the proteins table)"),
        "gene": ("", "its gene (a column of the transcripts table)"),
        "chromosome": ("1-22", "the gene's chromosome"),
        "tss_position": ("bp", "the gene's transcription start"),
    },
    "variants": {
        "variant_id": ("", "variant (a column of the genotypes table)"),
        "chromosome": ("1-22", "chromosome"),
        "position": ("bp", "position"),
        "effect_allele": ("A/C/G/T", "the allele the genotypes count"),
        "other_allele": ("A/C/G/T", "the other allele"),
    },
}
_WIDE = {
    "proteins": ("PROT_####", "NPX (log2)", "plasma protein level, one column per protein (protein_annotation); missing: null"),
    "transcripts": ("GENE_####", "log2 CPM", "whole-blood transcript level, one column per gene (protein_annotation)"),
    "genotypes": ("rs#######", "effect-allele count 0/1/2", "genotype, one column per variant (variants)"),
    "visit_proteins": ("PROT_####", "NPX (log2)", "plasma protein level at the follow-up visit, one column per protein; missing: null"),
}
_DESCRIPTIONS = {
    "participants": "baseline covariates, one row per participant",
    "imaging": "cardiac MRI measures as reported by the clinic, imaged participants only",
    "cine_mri": "cardiac cine MRI images, one row per imaged participant",
    "physiology": "baseline physiology, one row per participant",
    "ecg": "resting 12-lead ECG at baseline, one row per participant; missing: null",
    "ct": "cardiac CT, imaged participants only; missing: null",
    "metabolites": "blood metabolites, one row per participant; missing: null",
    "proteins": "plasma proteomics, one row per participant",
    "transcripts": "whole-blood transcriptomics, a subset of participants",
    "genotypes": "genotypes, one row per participant",
    "diagnoses": "diagnoses (ICD-10) recorded by baseline, one row per participant and code, dated",
    "follow_up_diagnoses": "diagnoses (ICD-10) recorded in the five years after baseline, one row per participant and code, dated",
    "outcomes": "five-year follow-up, one row per participant",
    "visits": "the follow-up visit (repeat MRI measures and NT-proBNP) of half the imaged participants, one row each",
    "visit_proteins": "plasma proteomics at the follow-up visit, one row per participant of the visits table",
    "protein_annotation": "one row per protein",
    "variants": "one row per genotyped variant",
}


@dataclass
class Release:
    """A world's released data.

    Attributes:
        tables: table name -> {column name -> 1-D numpy array} (float32 with
            NaN for a missing value, int8 / int32 codes, str ids, object arrays of
            bytes for the cine images), in file order.
        rows: table name -> int64 (rows,): each row's participant index
            (0..N-1; the row of ``participants``), for participant-level tables.
        sizes: the profile's :class:`~.config.Sizes`.
        proteins, genes, variant_ids: names, in column order.
    """

    tables: dict
    rows: dict
    sizes: Sizes
    proteins: tuple
    genes: tuple
    variant_ids: tuple
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def participant_ids(self) -> np.ndarray:
        return self.tables["participants"]["participant_id"]

    def numeric(self, table: str, column: str) -> np.ndarray:
        """float64 (N,): a participant-level column over every participant, NaN
        where the participant has no row, the value is missing or a sentinel."""
        key = ("numeric", table, column)
        if key not in self._cache:
            out = np.full(self.sizes.participants, np.nan)
            values = np.asarray(self.tables[table][column], np.float64)
            if table in ("participants", "physiology"):
                values = np.where(np.isin(values, list(SENTINELS)), np.nan, values)
            out[self.rows[table]] = values
            out.setflags(write=False)  # shared by every session of the world: nobody may write into it
            self._cache[key] = out
        return self._cache[key]

    def matrix(self, table: str) -> np.ndarray:
        """float64 (N, columns): ``proteins`` or ``transcripts`` over every participant (NaN where absent or missing)."""
        key = ("matrix", table)
        if key not in self._cache:
            names = {"proteins": self.proteins, "transcripts": self.genes}[table]
            out = np.full((self.sizes.participants, len(names)), np.nan)
            out[self.rows[table]] = np.stack([np.asarray(self.tables[table][c], np.float64) for c in names], 1)
            out.setflags(write=False)
            self._cache[key] = out
        return self._cache[key]

    def genotypes(self) -> np.ndarray:
        """int8 (N, V): the genotypes table as a matrix (complete: no genotype is missing)."""
        if "genotypes" not in self._cache:
            matrix = np.stack([self.tables["genotypes"][c] for c in self.variant_ids], 1)
            matrix.setflags(write=False)
            self._cache["genotypes"] = matrix
        return self._cache["genotypes"]

    def covariates(self) -> np.ndarray:
        """float64 (N, 6): age, sex, BMI and site indicators (sites 2-4), the adjustment set."""
        t = self.tables["participants"]
        site = np.asarray(t["site"])
        return np.stack([t["age_years"], t["sex"], t["bmi_kg_m2"], *(site == s for s in (2, 3, 4))], 1).astype(np.float64)

    def numeric_columns(self) -> dict:
        """table -> the participant-level numeric columns a phenotype may name (wide tables: their columns)."""
        out = {}
        for table in PARTICIPANT_TABLES:
            out[table] = [c for c in self.tables[table] if c != "participant_id"]
        return out

    def dictionary(self) -> dict:
        """The data dictionary (JSON-ready): every table's file, rows, description and columns."""
        tables = {}
        for name, columns in self.tables.items():
            entry = {"file": f"{name}.parquet", "rows": len(next(iter(columns.values()))), "description": _DESCRIPTIONS[name]}
            if name in _WIDE:
                pattern, unit, description = _WIDE[name]
                entry["columns"] = {"participant_id": {"type": "string", "unit": "", "description": "participant identifier"}}
                entry["column_group"] = {"pattern": pattern, "count": len(columns) - 1, "type": _type(columns[next(c for c in columns if c != 'participant_id')]),
                                         "unit": unit, "description": description}
            else:
                entry["columns"] = {c: {"type": _type(v), "unit": _COLUMNS[name][c][0], "description": _COLUMNS[name][c][1]}
                                    for c, v in columns.items()}
            tables[name] = entry
        n = self.sizes
        return {
            "release": {"participants": n.participants, "imaged": n.imaged, "proteins": n.proteins, "variants": n.variants,
                        "with_transcripts": n.rna, "follow_up_years": 5, "with_follow_up_visit": n.imaged // 2,
                        "with_ecg": n.participants, "with_ct": n.imaged},
            "missing_values": ("Parquet null (NaN in pandas) marks a missing value; sentinel codes mark the rest: "
                               + "; ".join(f"{code:g} = {text}" for code, text in SENTINELS.items())
                               + " (participants.exercise_hours_per_week and the physiology table)."),
            "cis_window_kb": WINDOW_KB,
            "tables": tables,
        }

    def write(self, folder: str) -> list[str]:
        """Write every table as ``<table>.parquet`` (zstd) and the data
        dictionary as ``data_dictionary.json`` and ``.md`` into ``folder``
        (made if missing). Returns the paths written. Same release, same bytes."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        os.makedirs(folder, exist_ok=True)
        paths = []
        for name, columns in self.tables.items():
            arrays = {c: pa.array(v, mask=np.isnan(v)) if v.dtype.kind == "f" else pa.array(v) for c, v in columns.items()}
            path = os.path.join(folder, f"{name}.parquet")
            pq.write_table(pa.table(arrays), path, compression="zstd")
            paths.append(path)
        dictionary = self.dictionary()
        path = os.path.join(folder, "data_dictionary.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(dictionary, f, indent=1)
        paths.append(path)
        path = os.path.join(folder, "data_dictionary.md")
        with open(path, "w", encoding="utf-8") as f:
            f.write(dictionary_markdown(dictionary))
        paths.append(path)
        return paths


def _type(values: np.ndarray) -> str:
    if values.dtype.kind == "O" and len(values) and isinstance(values[0], bytes):
        return "binary"
    return {"f": "float32", "i": str(values.dtype), "U": "string", "O": "string"}[values.dtype.kind]


def dictionary_markdown(dictionary: dict) -> str:
    """The data dictionary as markdown."""
    r = dictionary["release"]
    lines = ["# Data dictionary", "",
             f"{r['participants']} participants ({r['imaged']} imaged, {r['with_transcripts']} with transcripts), "
             f"{r['proteins']} proteins, {r['variants']} variants, {r['follow_up_years']} years of follow-up.", "",
             f"Missing values: {dictionary['missing_values']}", "",
             f"A protein's cis window: variants within {dictionary['cis_window_kb']} kb of its gene's transcription start.", ""]
    for name, t in dictionary["tables"].items():
        lines += [f"## {name} (`{t['file']}`, {t['rows']} rows)", "", t["description"], "", "| column | type | unit | description |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {c} | {e['type']} | {e['unit']} | {e['description']} |" for c, e in t["columns"].items()]
        if "column_group" in t:
            g = t["column_group"]
            lines.append(f"| {g['pattern']} ({g['count']} columns) | {g['type']} | {g['unit']} | {g['description']} |")
        lines.append("")
    return "\n".join(lines)


def _rounded(values, decimals: int, low=None, high=None) -> np.ndarray:
    values = np.asarray(values, np.float64)
    if low is not None or high is not None:
        values = np.clip(values, low, high)
    return np.round(values, decimals).astype(np.float32)


def _imaging_units(z) -> tuple:
    """The six MRI measures in clinic units from their standardised scale (NI, 6)."""
    return (_rounded(60 + 7 * z[:, 0], 1, 10, 80), _rounded(150 + 32 * z[:, 1], 1, 60, None), _rounded(10 + 1.8 * z[:, 2], 1, 5, None),
            _rounded(125 + 28 * z[:, 3], 1, 50, None), _rounded(1000 + 40 * z[:, 4], 0), _rounded(1 + 0.12 * np.exp(0.9 * z[:, 5]), 2))


def _ecg_units(z) -> tuple:
    """The five ECG measures in clinic units from their standardised scale (N, 5)."""
    return (_rounded(92 + 11 * z[:, 0], 0, 60, None), _rounded(418 + 22 * z[:, 1], 0, 320, None), _rounded(68 + 10 * z[:, 2], 0, 35, None),
            _rounded(2.4 + 0.7 * z[:, 3], 2, 0.2, None), _rounded(158 + 22 * z[:, 4], 0, 80, None))


def _ct_units(z) -> tuple:
    """The three CT measures in clinic units from their standardised scale (NI, 3): the calcium score is 0 for
    about half (none detected) and skewed above."""
    return (_rounded(np.maximum(np.exp(3.0 + 1.6 * z[:, 0]) - 20.0, 0.0), 0), _rounded(np.exp(np.log(95.0) + 0.35 * z[:, 1]), 1),
            _rounded(128 + 28 * z[:, 2], 1, 50, None))


# When a code recorded by baseline was first recorded: up to this many years before (uniform), by the code's kind.
RECORD_SPAN = {"cardiomyopathy": 6.0, "I50.9": 4.0, "I10": 15.0, "E11": 12.0, "E66": 15.0}
# Incidence after baseline (per year) of hypertension and diabetes: base rate and log-rate slope per SD of
# systolic pressure / fasting glucose; new cardiomyopathy where the disease five years on crosses the baseline's threshold.
INCIDENCE = {"I10": (0.025, 0.6), "E11": (0.006, 1.0)}


def _dated_records(c: dict, design, baseline_pairs: list, glucose) -> tuple[np.ndarray, list]:
    """The baseline codes' dates (float32, one per pair of ``baseline_pairs``, 0 or negative) and the codes after
    baseline: sorted (participant, code, years) with years in (0, 5], from :func:`~.generator.follow_up`'s draws.

    After baseline: a heart-failure hospitalisation (the cardiovascular event that is not a cardiac death, unless
    death came first) is recorded at the event's time as I50.9 (whether or not the code was recorded before); the
    archetype's cardiomyopathy where the disease five years on crosses the baseline's threshold, and hypertension and
    diabetes by :data:`INCIDENCE` (these three only where not recorded by baseline). Records stop at death or the end of the event's follow-up (loss to follow-up or five years)."""
    u, noise = np.asarray(c["record_draw"], np.float64), np.asarray(c["record_noise"], np.float64)
    archetype_code = CARDIOMYOPATHY_CODES[design.archetype]
    kinds = {**{code: ("cardiomyopathy", 0) for code in CARDIOMYOPATHY_CODES.values()}, "I50.9": ("I50.9", 1), "I10": ("I10", 2),
             "E11": ("E11", 3), "E66": ("E66", 4)}
    dates = np.array([-np.round(RECORD_SPAN[kinds[code][0]] * u[i, kinds[code][1]], 2) + 0.0 for i, code in baseline_pairs],
                     np.float32)
    has = {code: np.zeros(len(u), bool) for code in (archetype_code, "I10", "E11")}
    for i, code in baseline_pairs:
        if code in has:
            has[code][i] = True
    event, event_time = np.asarray(c["event"], bool), np.asarray(c["event_time"], np.float64)
    death, death_time = np.asarray(c["all_cause_death"], bool), np.asarray(c["death_time"], np.float64)
    cardiac_death, cardiac_time = np.asarray(c["cardiac_death"], bool), np.asarray(c["cardiac_death_time"], np.float64)
    end = np.minimum(np.where(death, death_time, 5.0), np.where(event, 5.0, event_time))
    later = []
    hospitalised = event & ~(cardiac_death & (cardiac_time == event_time)) & ~(death & (death_time < event_time))
    later += [(i, "I50.9", event_time[i]) for i in np.flatnonzero(hospitalised)]
    onset = ~has[archetype_code] & (np.asarray(c["late_severity"], np.float64) + 0.6 * noise[:, 0] > 1.5)
    later += [(i, archetype_code, u[i, 5] * end[i]) for i in np.flatnonzero(onset)]
    sbp_z = (np.asarray(c["sbp"], np.float64) - 128.0) / 14.0
    glucose = np.log(np.asarray(glucose, np.float64))
    glucose_z = (glucose - glucose.mean()) / glucose.std()
    for code, z, column in (("I10", sbp_z, 6), ("E11", glucose_z, 7)):
        rate, slope = INCIDENCE[code]
        t = -np.log(np.maximum(u[:, column], 1e-12)) / (rate * np.exp(slope * z))
        later += [(i, code, t[i]) for i in np.flatnonzero(~has[code] & (t < end))]
    first = {}
    for i, code, t in later:
        t = float(max(np.round(t, 3), 0.001))
        if (i, code) not in first or t < first[(i, code)]:
            first[(i, code)] = t
    return dates, sorted((i, code, t) for (i, code), t in first.items())


def _missing(values, mask) -> np.ndarray:
    return np.where(mask, np.nan, values).astype(np.float32)


def _as_bytes(stacks: np.ndarray) -> np.ndarray:
    """object (NI,): each participant's uint8 stack as its C-order bytes (a Parquet binary column)."""
    out = np.empty(len(stacks), object)
    out[:] = [stack.tobytes() for stack in np.ascontiguousarray(stacks)]
    return out


def build_release(c: dict, design, world_seed: int, sizes: Sizes) -> Release:
    """The release of cohort ``c`` (:func:`~.generator.cohort`'s arrays) of a
    world of ``design`` drawn from ``world_seed`` under profile ``sizes``."""
    n, p, v = sizes.participants, sizes.proteins, sizes.variants
    rng = design_rng(world_seed, "names")
    ids = np.array([f"P{i + 1:06d}" for i in range(n)])
    proteins = tuple(f"PROT_{i + 1:04d}" for i in range(p))
    genes = tuple(f"GENE_{i + 1:04d}" for i in range(p))
    variant_ids = tuple(f"rs{r}" for r in rng.choice(9_000_000, v, replace=False) + 1_000_000)
    everyone = np.arange(n)
    exercise = np.where(c["exercise_missing"], NOT_RECORDED, _rounded(c["exercise"], 1))

    # imaging: clinic units from the standardised scale
    units = _imaging_units(c["imaging"][c["imaged"]])
    imaging = {"participant_id": ids[c["imaged"]],
               **{name: _missing(u, c["imaging_missing"][c["imaged"], j]) for j, (name, u) in enumerate(zip(IMAGING, units))}}
    visited = c["visited"]
    visits = {"participant_id": ids[visited], "visit_years": _rounded(c["visit_years"], 2),
              **{name: _missing(u, c["visit_imaging_missing"][:, j])
                 for j, (name, u) in enumerate(zip(IMAGING, _imaging_units(c["visit_imaging"])))},
              "ntprobnp_pg_ml": _rounded(np.exp(c["visit_log_ntprobnp"]), 1)}
    visit_npx = _missing(np.round(c["visit_npx"], 3), c["visit_protein_missing"])

    unrecorded = c["physiology_missing"]
    ntprobnp = np.exp(c["log_ntprobnp"])
    physiology = {
        "participant_id": ids,
        "sbp_mmhg": np.where(unrecorded, NOT_RECORDED, _rounded(c["sbp"], 0)).astype(np.float32),
        "dbp_mmhg": np.where(unrecorded, NOT_RECORDED, _rounded(c["dbp"], 0)).astype(np.float32),
        "heart_rate_bpm": np.where(unrecorded, NOT_RECORDED, _rounded(c["heart_rate"], 0, 35, None)).astype(np.float32),
        "ntprobnp_pg_ml": np.where(unrecorded, NOT_RECORDED, np.where(ntprobnp < NTPROBNP_LOD, BELOW_LOD, _rounded(ntprobnp, 1)))
        .astype(np.float32),
    }

    m = c["metabolites"]
    metabolite_units = (3.2 + 0.9 * m[:, 0], np.exp(np.log(1.4) + 0.25 * m[:, 1]), np.exp(np.log(1.5) + 0.45 * m[:, 2]),
                        np.exp(np.log(5.4) + 0.15 * m[:, 3]), np.exp(np.log(80) + 0.2 * m[:, 4]), np.exp(np.log(1.8) + 0.9 * m[:, 5]),
                        320 + 75 * m[:, 6], np.exp(np.log(1.1) + 0.3 * m[:, 7]))
    metabolites = {"participant_id": ids, **{name: _missing(_rounded(u, 2, 0.05, None), c["metabolite_missing"][:, j])
                                              for j, (name, u) in enumerate(zip(METABOLITES, metabolite_units))}}

    npx = _missing(np.round(c["protein_npx"], 3), c["protein_missing"])
    transcripts_log2 = np.round(5.0 + 1.5 * c["transcripts"], 3).astype(np.float32)

    # diagnoses: the archetype's code and heart failure from severity (noisy), risk-factor codes, miscoding
    severity, noise, draw = c["severity"], c["diagnosis_noise"], c["diagnosis_draw"]
    codes = [(severity + 0.6 * noise[:, 0] > 1.5, CARDIOMYOPATHY_CODES[design.archetype]),
             (severity + 0.6 * noise[:, 1] > 1.9, "I50.9"),
             ((c["sbp"] > 140) & (draw[:, 0] < 0.8) & ~unrecorded, "I10"),
             (metabolite_units[3] > 7.0, "E11"),
             ((c["bmi"] >= 30) & (draw[:, 1] < 0.6), "E66")]
    miscoded = draw[:, 2] < 0.015
    wrong = np.array([CARDIOMYOPATHY_CODES[a] for a in ARCHETYPES])[np.minimum((draw[:, 2] / 0.015 * 4).astype(int), 3)]
    pairs = [(i, code) for mask, code in codes for i in np.flatnonzero(mask)]
    pairs += [(i, code) for i, code in zip(np.flatnonzero(miscoded), wrong[miscoded])]
    pairs = sorted(set(pairs))
    diagnoses = {"participant_id": ids[[i for i, _ in pairs]].astype(str), "icd10": np.array([code for _, code in pairs], dtype=str)}
    dates, later = _dated_records(c, design, pairs, metabolite_units[3])
    diagnoses["years_from_baseline"] = dates
    follow_up_diagnoses = {"participant_id": ids[[i for i, _, _ in later]].astype(str),
                           "icd10": np.array([code for _, code, _ in later], dtype=str),
                           "years_from_baseline": np.array([t for _, _, t in later], np.float32)}
    ecg = {"participant_id": ids, **{name: _missing(u, c["ecg_missing"]) for name, u in zip(ECG, _ecg_units(c["ecg"]))}}
    ct = {"participant_id": ids[c["imaged"]],
          **{name: _missing(u, c["ct_missing"][:, j]) for j, (name, u) in enumerate(zip(CT, _ct_units(c["ct"])))}}

    # where genes and variants lie: block b on chromosome 1 + 22b/B, blocks 1.5 Mb apart, variants 25 kb apart
    blocks = v // BLOCK
    block = np.arange(v) // BLOCK
    chromosome = 1 + block * 22 // blocks
    first_on_chromosome = np.searchsorted(chromosome, chromosome)
    position = (1_000_000 + (block - first_on_chromosome // BLOCK) * 1_500_000
                + (np.arange(v) % BLOCK) * 25_000 + rng.integers(0, 5_000, v))
    alleles = np.array([rng.choice(list("ACGT"), 2, replace=False) for _ in range(v)])
    tss = position[c["cis_variant"]] + rng.integers(-20_000, 20_001, p)

    tables = {
        "participants": {"participant_id": ids, "age_years": _rounded(c["age"], 1), "sex": c["sex"].astype(np.int8),
                         "bmi_kg_m2": _rounded(c["bmi"], 1), "site": (c["site"] + 1).astype(np.int8),
                         "exercise_hours_per_week": exercise.astype(np.float32)},
        "imaging": imaging,
        "cine_mri": {"participant_id": ids[c["imaged"]], "frames": _as_bytes(c["cine"])},
        "ct": ct,
        "physiology": physiology,
        "ecg": ecg,
        "metabolites": metabolites,
        "proteins": {"participant_id": ids, **{name: npx[:, j] for j, name in enumerate(proteins)}},
        "transcripts": {"participant_id": ids[c["rna"]], **{name: transcripts_log2[:, j] for j, name in enumerate(genes)}},
        "genotypes": {"participant_id": ids, **{name: c["genotypes"][:, j] for j, name in enumerate(variant_ids)}},
        "diagnoses": diagnoses,
        "follow_up_diagnoses": follow_up_diagnoses,
        "outcomes": {"participant_id": ids, "cv_event": c["event"].astype(np.int8),
                     "cv_event_time_years": _rounded(c["event_time"], 3),
                     "all_cause_death": c["all_cause_death"].astype(np.int8), "all_cause_death_time_years": _rounded(c["death_time"], 3),
                     "cardiac_death": c["cardiac_death"].astype(np.int8),
                     "cardiac_death_time_years": _rounded(c["cardiac_death_time"], 3)},
        "visits": visits,
        "visit_proteins": {"participant_id": ids[visited], **{name: visit_npx[:, j] for j, name in enumerate(proteins)}},
        "protein_annotation": {"protein": np.array(proteins), "gene": np.array(genes),
                               "chromosome": chromosome[c["cis_variant"]].astype(np.int8), "tss_position": tss.astype(np.int64)},
        "variants": {"variant_id": np.array(variant_ids), "chromosome": chromosome.astype(np.int8), "position": position.astype(np.int64),
                     "effect_allele": alleles[:, 0], "other_allele": alleles[:, 1]},
    }
    rows = {"participants": everyone, "imaging": c["imaged"].astype(np.int64), "cine_mri": c["imaged"].astype(np.int64),
            "physiology": everyone, "metabolites": everyone,
            "proteins": everyone, "transcripts": c["rna"].astype(np.int64), "genotypes": everyone, "outcomes": everyone,
            "visits": visited.astype(np.int64), "visit_proteins": visited.astype(np.int64), "ecg": everyone,
            "ct": c["imaged"].astype(np.int64)}
    return Release(tables, rows, sizes, proteins, genes, variant_ids)


def check_no_truth(release: Release) -> None:
    """AssertionError if a released table or column name holds a word of :data:`TRUTH_WORDS`."""
    for name, columns in release.tables.items():
        for column in (name, *columns):
            hit = [w for w in TRUTH_WORDS if w in column.lower()]
            assert not hit, f"release: {name}.{column} names {hit}"

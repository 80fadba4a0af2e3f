"""The arguments of the biobank's tools, as types: the limits, the
annotated scalars (a protein, a column or phenotype reference, a scan's
``adjust`` and ``top``) and the claims' objects (nominations, rejections,
abstentions, a defined phenotype's terms), from which the tool table's
builder (:func:`~luca_gym.tools.table.spec_of`) makes each tool's JSON schema,
and the tools' MCP annotations. Apart from the session
(:mod:`~luca_gym.worlds.biobank.tools`), which answers the calls: what an
agent may send is read here, what it gets back there.
"""

from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict

from luca_gym.sandbox import WORKDIR
from luca_gym.tools.table import Field
from luca_gym.worlds.biobank.design import MECHANISMS
from luca_gym.worlds.biobank.oracle import ALIGNMENTS, DIRECTIONS, MAX_REASON
from luca_gym.worlds.biobank.release import COVARIATES

MAX_DEFINED = 16  # phenotypes a session may define
MAX_TERMS = 32  # columns in one defined phenotype
MAX_TOP = 5000  # rows a scan may return
MAX_CONDITIONAL = 8  # proteins in one conditional analysis
MAX_REFERENCE = 64  # characters of a column or phenotype reference

Protein = Annotated[str, Field(max_length=16)]
Reference = Annotated[str, Field(min_length=1, max_length=MAX_REFERENCE,
                                 description="a column 'table.column', 'diagnoses.<ICD-10 code>' or a phenotype you defined")]
Adjust = Annotated[bool, Field(description=f"adjust for {', '.join(COVARIATES)} (default true)")]
Top = Annotated[int, Field(minimum=1, maximum=MAX_TOP, description="rows returned, smallest p first (default 20)")]
Proteins = Annotated[list[Protein], Field(min_items=1, max_items=lambda c: c.sizes.proteins)]


class Nomination(TypedDict):
    """A protein claimed to drive the disease."""

    protein: Protein
    direction: Annotated[str, Field(enum=DIRECTIONS, description="how to move the protein to treat the disease: down (lower "
                                                                 "it, inhibit), up (raise it), unknown")]
    confidence: Annotated[float, Field(minimum=0, maximum=1,
                                       description="your probability that the protein causally drives the disease")]
    outcome_alignment: NotRequired[Annotated[str, Field(
        enum=ALIGNMENTS, description="optional: aligned (moving it as nominated improves both the disease phenotype and hard "
                                     "outcomes) or misaligned (it improves one and harms the other); left out: no credit, no "
                                     "penalty; a wrong label costs more")]]


class Rejection(TypedDict):
    """A protein claimed only to look causal, with the mechanism."""

    protein: Protein
    mechanism: Annotated[str, Field(enum=MECHANISMS, description="why it looks causal but is not")]


class Abstention(TypedDict):
    """A pair of proteins the evidence cannot tell apart."""

    proteins: Annotated[list[Protein], Field(items=2, description="two proteins the evidence cannot tell apart (one drives the "
                                                                  "disease, one not)")]
    reason: Annotated[str, Field(min_length=1, max_length=MAX_REASON)]


class Term(TypedDict):
    """One column of a defined phenotype, with its weight."""

    column: Reference
    weight: Annotated[float, Field(minimum=-1e6, maximum=1e6)]
    log: NotRequired[Annotated[bool, Field(description="take the natural log first (positive values only; default false)")]]


def submit_description(session) -> str:
    """submit's description for ``session`` (the phenotype file is offered with the python tool only)."""
    return ("Submit your claims once; the session ends with the scores. nominations: proteins you claim drive the disease, with "
            "the direction to move each, your confidence and optionally its outcome alignment; rejections: proteins you claim "
            "only look causal, with the mechanism; abstentions: pairs of proteins you cannot tell apart, with the reason; the "
            "phenotype, scored by how well it tracks the disease in the imaged participants: phenotype (a name), "
            "phenotype_values (participant id -> value)"
            + (f" or phenotype_file (a Parquet or CSV file you wrote in {WORKDIR}, columns participant_id and value; "
               "participants it leaves out count as missing)" if session._phenotype_file else "")
            + ", one of them at most.")


def submitted_phenotype(session) -> str:
    """submit's phenotype: without the structured tools there is no defined phenotype to name."""
    if not session._phenotype_named:
        return "a column 'table.column' or 'diagnoses.<ICD-10 code>'"
    return "a column 'table.column', 'diagnoses.<ICD-10 code>' or a phenotype you defined"


# The tools' MCP annotations (the MCP server publishes them).
ANNOTATIONS = {
    "describe_release": {"title": "Describe the release", "readOnlyHint": True, "idempotentHint": True},
    "column_summary": {"title": "Summarise a column", "readOnlyHint": True, "idempotentHint": True},
    "define_phenotype": {"title": "Define a phenotype", "readOnlyHint": False, "idempotentHint": True},
    "validate_phenotype": {"title": "Check a phenotype against clinical endpoints", "readOnlyHint": True, "idempotentHint": True},
    "association_scan": {"title": "Protein association scan", "readOnlyHint": True, "idempotentHint": True},
    "cis_mr": {"title": "cis Mendelian randomisation", "readOnlyHint": True, "idempotentHint": True},
    "conditional_analysis": {"title": "Conditional analysis at a locus", "readOnlyHint": True, "idempotentHint": True},
    "protein_qc": {"title": "Proteomics quality control", "readOnlyHint": True, "idempotentHint": True},
    "survival_association": {"title": "Survival association (Cox)", "readOnlyHint": True, "idempotentHint": True},
    "visit_change": {"title": "Change between baseline and the follow-up visit", "readOnlyHint": True, "idempotentHint": True},
    "experiment": {"title": "Run a paid experiment", "readOnlyHint": False, "idempotentHint": False},
    "submit": {"title": "Submit the claims (ends the session)", "readOnlyHint": False, "destructiveHint": True,
               "idempotentHint": False},
    "end": {"title": "End without claims (every score 0)", "readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
    "python": {"title": "Run Python in the sandbox", "readOnlyHint": False, "idempotentHint": False, "openWorldHint": False},
}

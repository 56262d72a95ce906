"""A claim's results file as typed records: what the claim runner writes and the report reads.

``claims/<run_id>.json`` is one :class:`ClaimRecord`: the claim's words (paper, reference, kind,
statement), its verdict and how it was decided, its cases (:class:`CaseRecord`, each with its
:class:`FitRecord`, its statistical tests :class:`DecisionRecord` and the margins of the paper's
hypotheses on it :class:`MarginRecord`), the perturbation run beside it (:class:`PowerRecord`),
its positive control (:class:`ControlRecord`), its readings (:class:`ReadingRecord`) and the
hypotheses it declares (:class:`HypothesisRecord`).

The writer (``theory_checks.claim_results``) builds a :class:`ClaimRecord` and writes
:meth:`Record.to_json`; a reader parses a file that :func:`results_format.claim_file.
read_claim_record` has checked (its schema, its re-derived verdict, its seal) with
:meth:`Record.from_json`, once, and reads attributes (:mod:`results_format.typed_json`). The
fields are declared in the order the files have always had their keys, and the optional ones
left out when the writer always left them out, so a file written through the record has the
bytes it had before.

Numbers are kept as the file has them (an ``int`` stays an ``int``), so that a record read and
written again gives the same bytes; the fields of the parts no schema checks (a hypothesis's
margin, a reading's verdict) may hold what a damaged file put there, which is why the report
still reads them through its number and flag parsers.

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from results_format.typed_json import NOT_IN_FILE
from results_format.typed_json import OMITTED_EMPTY
from results_format.typed_json import OPTIONAL
from results_format.typed_json import Record
from results_format.typed_json import many_of
from results_format.typed_json import one_of
from results_format.typed_json import parsed
from results_format.typed_json import values


@dataclasses.dataclass(frozen=True, kw_only=True)
class EstimateRecord(Record):
    """An estimated ``quantity``: the first fields of a fit and of a statistical test."""

    quantity: str = ""
    estimate: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitRecord(EstimateRecord):
    """A fitted rate or exponent beside its theory (``cases[i].fit``, ``fits[j]``)."""

    ci_low: float | None = None
    ci_high: float | None = None
    theory: float | None = None
    tolerance: float | None = None
    #: the level of the interval (``None``: a fit on exact data, which has no interval)
    confidence: float | None = None
    #: the fit's residual on exact data
    residual: float | None = None
    #: "exact" or "monte carlo"
    basis: str | None = None
    #: the case's problem (in the claim's ``fits`` list only)
    problem_id: str | None = dataclasses.field(default=None, metadata=OPTIONAL)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecisionRecord(EstimateRecord):
    """One statistical test (``cases[i].decisions[j]``): the interval of ``quantity`` at
    ``rate`` against the region the claim allows."""

    low: float | None = None
    high: float | None = None
    region_low: float | None = None
    region_high: float | None = None
    rate: float | None = None
    outcome: str = ""
    #: for an undecided test: about how many times the samples would decide it
    budget_factor: float | None = None
    #: the statistic the interval was computed from (its method, n, variance, ...)
    method: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class HypothesisRecord(Record):
    """A hypothesis of the paper the claim declares."""

    name: str = ""
    statement: str = ""
    reference: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MarginRecord(HypothesisRecord):
    """A hypothesis of the paper on one case: its margin (the relative room left, >= 0
    inside)."""

    margin: float | None = None
    holds: bool | None = None

    @property
    def inside(self) -> bool:
        """Whether the case lies inside the hypothesis: as recorded, else from its margin."""
        if self.holds is not None:
            return self.holds
        return self.margin is not None and self.margin >= 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class CaseRecord(Record):
    """One recorded case (``cases[i]``; a counterexample file's body has its fields too)."""

    problem_id: str = ""
    #: the problem's family and knobs (what rebuilds it)
    spec: Mapping[str, Any] | None = None
    params: Mapping[str, Any] | None = None
    measured: float | None = None
    bound: float | None = None
    passed: bool | None = None
    relation: str = ""
    outcome: str = ""
    fit: FitRecord | None = dataclasses.field(default=None, metadata=parsed(one_of(FitRecord)))
    details: Mapping[str, Any] | None = None
    #: how ``passed`` follows from the numbers (its rule and slack)
    comparison: Mapping[str, Any] | None = None
    decisions: tuple[DecisionRecord, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(DecisionRecord), **OMITTED_EMPTY)
    )
    #: a statistical case's Monte Carlo design (seed, scale, false-failure rate)
    design: Mapping[str, Any] | None = dataclasses.field(default=None, metadata=OPTIONAL)
    #: the same case measured again on fresh seeds, after a first stage that failed
    confirmation: CaseRecord | None = dataclasses.field(
        default=None, metadata=parsed(lambda value: one_of(CaseRecord)(value), **OPTIONAL)
    )
    hypotheses: tuple[MarginRecord, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(MarginRecord), **OMITTED_EMPTY)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PowerRecord(Record):
    """The claim's perturbation (a wrong estimator it must catch), run beside the verdict."""

    name: str = ""
    description: str = ""
    verdict: str = ""
    caught: bool | None = None
    profile: str = ""
    seconds: float | None = None
    counterexample: CaseRecord | None = dataclasses.field(
        default=None, metadata=parsed(one_of(CaseRecord))
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControlRecord(Record):
    """The positive control of a claim that fails (a case where the same check holds)."""

    outcome: str = ""
    holds: bool | None = None
    #: why the control is no control (it lies outside the paper's hypotheses)
    reason: str | None = dataclasses.field(default=None, metadata=OPTIONAL)
    seconds: float | None = None
    #: the hypotheses' margins of a control outside them
    hypotheses: tuple[MarginRecord, ...] | None = dataclasses.field(
        default=None, metadata=parsed(many_of(MarginRecord), **OPTIONAL)
    )
    case: CaseRecord | None = dataclasses.field(
        default=None, metadata=parsed(one_of(CaseRecord), **OPTIONAL)
    )
    #: the outcome under each reading, by name
    readings: Mapping[str, str] | None = dataclasses.field(default=None, metadata=OPTIONAL)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReadingRecord(Record):
    """One reading of the statement, checked on the same cases, and its verdict."""

    name: str = ""
    statement: str = ""
    verdict: str = ""
    #: what the claim declares for it: "holds", "fails" or ``None`` (either)
    expected: str | None = None
    n_cases: int | None = None
    counterexample: CaseRecord | None = dataclasses.field(
        default=None, metadata=parsed(one_of(CaseRecord))
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class EstimatorEntryRecord(Record):
    """What a run records of its estimator's registry entry."""

    #: the paper (for a library's adapter, the library)
    paper: str | None = None
    reference: str | None = None
    #: whether it is one of the testbed's own estimators
    builtin: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecidedOnRecord(Record):
    """For a claim its profile cannot decide: the profile that does, and the measured wall
    time of its command."""

    profile: str | None = None
    seconds: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComputedByRecord(Record):
    """The code and the device that computed a record."""

    git_commit: str | None = None
    device: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClaimRecord(Record):
    """``claims/<run_id>.json``: one run of a claim on one estimator (see the module
    docstring; :data:`results_format.claim_file.CLAIM_RESULT_SCHEMA` lists the fields every
    file must have, with their kinds). A row of the report without results (a claim "not
    checked", or whose file is "not trusted") is a record with the claim's words only
    (:meth:`words_only`)."""

    id: str = ""
    claim: str = ""
    estimator: str = ""
    #: the estimator's registry entry: its paper (a library for an adapter), reference, builtin
    estimator_entry: EstimatorEntryRecord | None = dataclasses.field(
        default=None, metadata=parsed(one_of(EstimatorEntryRecord))
    )
    paper: str = ""
    reference: str = ""
    kind: str = ""
    #: what the claim checks (:data:`results_format.verdicts.ABOUTS`)
    about: str = ""
    #: the claim of the result a proof step, formula or sentence serves
    serves: str | None = None
    power_from: tuple[str, ...] = dataclasses.field(default=(), metadata=parsed(values))
    statement: str = ""
    estimators: tuple[str, ...] = dataclasses.field(default=(), metadata=parsed(values))
    corrects: str | None = None
    expected: str = ""
    notes: str = ""
    expected_verdicts: tuple[str, ...] = dataclasses.field(default=(), metadata=parsed(values))
    verdict: str = ""
    as_expected: bool | None = None
    decision: str = ""
    false_fail_rate: float | None = None
    case_false_fail_rate: float | None = None
    calibration_seed: int | None = None
    profile: str | None = None
    fingerprint: str | None = None
    n_cases: int = 0
    n_undecided: int = 0
    n_unconfirmed: int = 0
    n_rejected: int = 0
    n_outside_hypotheses: int = 0
    outside_hypotheses: tuple[str, ...] = dataclasses.field(default=(), metadata=parsed(values))
    seconds: float | None = None
    #: the counterexample file, relative to the results folder
    counterexample: str | None = None
    cases: tuple[CaseRecord, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(CaseRecord))
    )
    unconfirmed: tuple[CaseRecord, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(CaseRecord))
    )
    fits: tuple[FitRecord, ...] = dataclasses.field(default=(), metadata=parsed(many_of(FitRecord)))
    #: the series CSV, relative to the results folder
    series_file: str | None = None
    power: PowerRecord | None = dataclasses.field(
        default=None, metadata=parsed(one_of(PowerRecord))
    )
    positive_control: ControlRecord | None = dataclasses.field(
        default=None, metadata=parsed(one_of(ControlRecord))
    )
    #: the outcomes at the values of the parameters the testbed adds to the paper's setting
    added_parameters: tuple[Mapping[str, Any], ...] | None = dataclasses.field(
        default=None, metadata=parsed(values, **OPTIONAL)
    )
    #: where the run comes from ("built-in", "plugin ...", "library ...")
    origin: str | None = None
    #: for a claim this profile cannot decide: the profile that does and its measured time
    decided_on: DecidedOnRecord | None = dataclasses.field(
        default=None, metadata=parsed(one_of(DecidedOnRecord))
    )
    hypotheses: tuple[HypothesisRecord, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(HypothesisRecord))
    )
    readings: tuple[ReadingRecord, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(ReadingRecord))
    )
    holding_readings: Any = None
    #: how a table number's protocol differs from the paper's scale
    scale: str | None = None
    #: the commit and the device that computed the record
    computed_by: ComputedByRecord | None = dataclasses.field(
        default=None, metadata=parsed(one_of(ComputedByRecord))
    )
    #: the companion files (relative path -> sha256 of their bytes)
    files: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: the seal over the content (:func:`results_format.validation.seal`)
    content_sha256: str | None = dataclasses.field(default=None, metadata=OPTIONAL)
    #: a row without results: whether the claim is the testbed's own (``metadata.json``'s
    #: registry says)
    builtin: bool | None = dataclasses.field(default=None, metadata=NOT_IN_FILE)
    #: a row whose file is not trusted: why
    trust_problem: str | None = dataclasses.field(default=None, metadata=NOT_IN_FILE)

    @property
    def measured(self) -> bool:
        """Whether the row shows a results file (not a claim "not checked" or "not
        trusted")."""
        return self.fingerprint is not None

    @property
    def statistical(self) -> bool:
        return self.decision == "statistical"

    @classmethod
    def words_only(
        cls,
        run_id: str,
        verdict: str,
        words: Mapping[str, Any] | None,
        trust_problem: str | None = None,
    ) -> ClaimRecord:
        """A row without results: the claim's words from ``words`` (an entry of the registry
        ``metadata.json`` records), its id and its verdict ("not checked", "not trusted")."""
        shown = {k: v for k, v in (words or {}).items() if k in WORDS}
        return dataclasses.replace(
            cls.from_json(shown),
            id=run_id,
            verdict=verdict,
            builtin=shown.get("builtin"),
            trust_problem=trust_problem,
            extra={},
        )


#: What a row without results keeps of the registry's entry: the claim's words.
WORDS: tuple[str, ...] = (
    "paper",
    "reference",
    "kind",
    "statement",
    "estimators",
    "estimator",
    "expected",
    "decision",
    "corrects",
    "origin",
    "builtin",
)

__all__ = [
    "WORDS",
    "CaseRecord",
    "ClaimRecord",
    "ComputedByRecord",
    "DecidedOnRecord",
    "EstimatorEntryRecord",
    "ControlRecord",
    "DecisionRecord",
    "EstimateRecord",
    "FitRecord",
    "HypothesisRecord",
    "MarginRecord",
    "PowerRecord",
    "ReadingRecord",
    "Record",
]

"""The results folder's other files as typed records, for their readers (the report).

Each record is read once from a file its check has believed (:mod:`results_format.records`,
:mod:`results_format.validation`) and read by attribute after that
(:mod:`results_format.typed_json`):

- ``metadata.json``: :class:`ResultsMetadata` (commit, device, profile, package versions, when
  the results were written; :func:`results_format.records.metadata_problem`);
- ``calibration/summary.json``: :class:`CalibrationSummary` of :class:`CalibrationRow`
  (:func:`results_format.records.calibration_summary_problem`, whose schema lists the kinds);
- ``mutation/summary.json``: :class:`MutationSummary` of :class:`MutantRow`
  (:func:`results_format.records.mutation_summary_problem`);
- ``communication.json``: :class:`CommunicationTable` of :class:`CommunicationRow` (sealed,
  written by ``testbed_app.communication``);
- ``replication/<experiment>.json``: :class:`ReplicationRecord` of :class:`ReplicationRow`
  (:data:`results_format.REPLICATION_SCHEMA`, :func:`results_format.replication.
  replication_problem`);
- ``bench/<benchmark>.json``: :class:`BenchRecord` of :class:`BenchTarget`
  (:data:`results_format.BENCH_SCHEMA`);
- ``comparison/rounds_to_error.json``: :class:`RoundsToError` of :class:`ComparisonRow`
  (written by ``theory_checks.comparison.table``; the fields the report shows, the others kept
  in ``extra``).

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from results_format.typed_json import Record
from results_format.typed_json import many_of
from results_format.typed_json import one_of
from results_format.typed_json import one_or_empty
from results_format.typed_json import parsed
from results_format.typed_json import values


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResultsMetadata(Record):
    """``metadata.json`` of a results folder (the fields the report shows)."""

    git_commit: str | None = None
    #: package -> version
    versions: Mapping[str, Any] | None = None
    device: str | None = None
    #: the profile's settings (its ``name`` first); a name alone in older folders
    profile: Mapping[str, Any] | str | None = None
    #: how Hypothesis drew the cases
    hypothesis: str | None = None
    written: str | None = None

    @property
    def profile_name(self) -> str | None:
        """The profile's name, whether recorded with its settings or alone."""
        if isinstance(self.profile, Mapping):
            return self.profile.get("name")
        return self.profile


@dataclasses.dataclass(frozen=True, kw_only=True)
class CalibrationRow(Record):
    """One statistical claim run under independent seeds (``calibration/summary.json``'s
    ``claims[i]``)."""

    claim: str = ""
    #: "holds" or "fails": what the claim is expected to give
    expected: str = ""
    profile: str = ""
    seeds: int = 0
    stated_rate: float | None = None
    false_failures: int = 0
    refuted: int = 0
    undecided: int = 0
    #: verdict -> number of seeds
    verdicts: Mapping[str, int] | None = None
    #: the exact 95% Clopper-Pearson interval of the rate of "fails as stated"
    rate_low: float | None = None
    rate_high: float | None = None
    consistent: bool | None = None
    seconds: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CalibrationSummary(Record):
    """``calibration/summary.json`` (``testbed calibrate``)."""

    profile: str = ""
    seeds: int = 0
    confidence: float | None = None
    claims: tuple[CalibrationRow, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(CalibrationRow))
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class MutantRow(Record):
    """One mutant of the catalogue and what became of it (``mutation/summary.json``'s
    ``mutants[i]``)."""

    mutant: str = ""
    family: str = ""
    kind: str = ""
    description: str = ""
    #: "killed", "survived" or "equivalent"
    status: str = ""
    #: the claims that killed it, "(error)" after one whose check refused it
    killed_by: tuple[str, ...] = dataclasses.field(default=(), metadata=parsed(values))
    #: why no claim can tell it from the correct code ("" when it is not declared equivalent)
    equivalent: str = ""
    claims_run: int = 0
    planned: int = 0
    cases_passed_before_kill: int | None = None
    seconds: float | None = None
    as_expected: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class MutationCounts(Record):
    """The summary's counts of its rows (and, in ``extra``, "not as expected")."""

    mutants: int | None = None
    killed: int | None = None
    equivalent: int | None = None
    survived: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class MutationSummary(Record):
    """``mutation/summary.json`` (``testbed mutate``)."""

    profile: str = ""
    #: the number of mutants in the catalogue
    catalogue: int = 0
    counts: MutationCounts = dataclasses.field(
        default_factory=MutationCounts, metadata=parsed(one_or_empty(MutationCounts))
    )
    mutants: tuple[MutantRow, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(MutantRow))
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommunicationRow(Record):
    """One algorithm's communication per outer iteration: the ledger's count against the
    paper's formula (``communication.json``'s ``rows[i]``; the fields the report shows, the
    others kept in ``extra``)."""

    algorithm: str | None = None
    paper: str | None = None
    formula: str | None = None
    formula_parameters: Mapping[str, Any] | None = None
    #: where the formula is printed (a paper's table, or derived here)
    formula_source: str | None = None
    formula_value: float | None = None
    #: the formula at each iteration's drawn parameters (a random truncation)
    formula_per_iteration: tuple[float, ...] = dataclasses.field(
        default=(), metadata=parsed(values)
    )
    measured_rounds: tuple[float, ...] = dataclasses.field(default=(), metadata=parsed(values))
    agrees: bool | None = None
    floats_per_round: float | None = None
    floats_per_iteration: float | None = None
    note: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommunicationTable(Record):
    """``communication.json`` (``testbed check``)."""

    iterations: int | None = None
    rows: tuple[CommunicationRow, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(CommunicationRow))
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicationRow(Record):
    """One number of a paper's table against the testbed's (``rows[i]``)."""

    setting: str = ""
    metric: str = ""
    paper_value: float | str | None = None
    #: ``None``: the target was not reached; "diverged at step k": the run diverged
    testbed_value: float | str | None = None
    unit: str = ""
    #: the setting's differences from the paper's, stated honestly
    differences: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicationMetadata(Record):
    """Where a replication ran and how it ended (its ``metadata``; the rest kept in
    ``extra``)."""

    dataset: str | None = None
    device: str | None = None
    #: "completed", "partial: ...", "diverged ..."
    status: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplicationRecord(Record):
    """``replication/<experiment>.json`` (``testbed run``)."""

    experiment: str = ""
    paper: str = ""
    table: str = ""
    metadata: ReplicationMetadata | None = dataclasses.field(
        default=None, metadata=parsed(one_of(ReplicationMetadata))
    )
    rows: tuple[ReplicationRow, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(ReplicationRow))
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchTarget(Record):
    """A benchmark's speed target and what was measured."""

    name: str = ""
    measured: float | None = None
    #: "at_least" or "at_most"
    direction: str = ""
    target: float | None = None
    met: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchRecord(Record):
    """``bench/<benchmark>.json`` (``benchmarks/run.py``)."""

    benchmark: str = ""
    description: str = ""
    #: cpu, cores, device, torch (and ``quick`` for a smoke run)
    machine: Any = None
    #: flat scalars, one row per measured case (the columns differ per benchmark)
    rows: tuple[Any, ...] = dataclasses.field(default=(), metadata=parsed(values))
    targets: tuple[BenchTarget, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(BenchTarget))
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComparisonTarget(Record):
    """The one target of the rounds-to-target comparisons, and when a run reached it."""

    quantity: str | None = None
    value: float | None = None
    reached: str | None = None
    round_budget: int | None = None
    #: the rounds a run that does not reach counts
    cap: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuningRule(Record):
    """How every algorithm's outer step is tuned the same way."""

    step: str | None = None
    grid: Any = None
    selection: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComparisonSeed(Record):
    """One problem of a comparison: the candidate's rounds over the baseline's."""

    ratio: float | None = None
    #: the baseline solves the problem in one outer iteration (outside the claims' population)
    fednest_one_iteration: bool | None = None
    note: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComparisonRow(Record):
    """One comparison of two algorithms (``comparisons[i]``)."""

    rule: str | None = None
    candidate: str | None = None
    baseline: str | None = None
    claim: str = ""
    source: str = ""
    setting: str = ""
    #: "candidate", "baseline" -> rounds per outer iteration
    rounds_per_iteration: Mapping[str, Any] | None = None
    #: the tuned step of each role ("candidate": {"multiple": c, ...})
    tuning: Mapping[str, Any] | None = None
    #: whether a paper claims it (else a context row)
    claimed: bool | None = None
    per_seed: tuple[ComparisonSeed, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(ComparisonSeed))
    )
    geometric_mean_ratio: float | None = None
    interval_95: Any = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoundsToError(Record):
    """``comparison/rounds_to_error.json`` (``testbed check``)."""

    target: ComparisonTarget = dataclasses.field(
        default_factory=ComparisonTarget, metadata=parsed(one_or_empty(ComparisonTarget))
    )
    tuning_rule: TuningRule = dataclasses.field(
        default_factory=TuningRule, metadata=parsed(one_or_empty(TuningRule))
    )
    comparisons: tuple[ComparisonRow, ...] = dataclasses.field(
        default=(), metadata=parsed(many_of(ComparisonRow))
    )


__all__ = [
    "BenchRecord",
    "BenchTarget",
    "CalibrationRow",
    "CalibrationSummary",
    "CommunicationRow",
    "CommunicationTable",
    "ComparisonRow",
    "ComparisonSeed",
    "ComparisonTarget",
    "MutantRow",
    "MutationCounts",
    "MutationSummary",
    "ReplicationMetadata",
    "ReplicationRecord",
    "ReplicationRow",
    "RoundsToError",
    "TuningRule",
    "ResultsMetadata",
]

"""One claim's row of the report: its line in its paper's table and its detail.

A :class:`Row` reads the claim's typed record (:class:`~results_format.claim_record.
ClaimRecord`) through its :class:`~reports.claims_table.ClaimSection` and gives every cell the
templates show: the verdict and what the testbed expected, the measured figure, the slack and
kill set (:mod:`results_format.evidence`), the hypotheses and readings
(:mod:`reports.hypotheses_text`), the perturbation or positive control and the undecided tests
(:func:`decision_lines`), and for an undecided claim the command that decides it
(:func:`decide_command`). :mod:`reports.page_context` groups the rows into the page.
"""

from __future__ import annotations

import dataclasses
import json
import math
from operator import attrgetter

from reports.claims_table import VERDICT_CLASSES
from reports.claims_table import ClaimSection
from reports.claims_table import decision_text
from reports.claims_table import expectation
from reports.claims_table import fit_rows
from reports.claims_table import number_text
from reports.hypotheses_text import hypothesis_lines
from reports.hypotheses_text import reading_lines
from reports.hypotheses_text import refutation_summary
from reports.results_reading import NOT_CHECKED
from reports.results_reading import NOT_TRUSTED
from reports.results_reading import as_float
from results_format.claim_record import CaseRecord
from results_format.claim_record import ClaimRecord
from results_format.claim_record import DecidedOnRecord
from results_format.claim_record import DecisionRecord
from results_format.evidence import claim_slack
from results_format.evidence import evidence_text
from results_format.verdicts import ABOUTS
from results_format.verdicts import added_parameters_text
from results_format.verdicts import readings_text
from results_format.verdicts import refutation_class

FAILS = "fails as stated"


@dataclasses.dataclass(frozen=True)
class DecideCommand:
    """The run that decides an undecided claim, and what it takes."""

    command: str
    seconds: float | None

    @property
    def duration(self) -> str:
        if self.seconds is None or not math.isfinite(self.seconds):
            return "time not measured"
        return _duration(self.seconds)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"about {seconds:.0f} s"
    return f"about {seconds / 60:.1f} min"


@dataclasses.dataclass
class Row:
    """One claim run: its line in its paper's table and its detail."""

    section: ClaimSection
    paper: str
    verdict: str
    basis: str
    power: str
    calibration: str
    corrects: ClaimSection | None = None
    corrected_by: list[ClaimSection] = dataclasses.field(default_factory=list)
    #: the name shown at a glance: the id without its paper's prefix
    short: str = ""
    decide: DecideCommand | None = None
    #: the claim that checks the result a proof step, formula or sentence serves
    serves: ClaimSection | None = None
    #: the mutants ``testbed mutate`` recorded by the claim that killed them (None: not run)
    kills: dict[str, list[str]] | None = None

    # The section's and the record's fields, under the names the templates read
    claim = property(attrgetter("section.claim"))
    id = property(attrgetter("section.id"))
    anchor = property(attrgetter("section.anchor"))
    row_anchor = property(attrgetter("section.row_anchor"))
    statement = property(attrgetter("section.claim.statement"))
    reference = property(attrgetter("section.claim.reference"))
    kind = property(attrgetter("section.claim.kind"))
    #: What the claim checks (:data:`results_format.verdicts.ABOUTS`).
    about = property(attrgetter("section.claim.about"))
    notes = property(attrgetter("section.claim.notes"))

    @property
    def slack(self) -> str:
        """The per-paper table's slack cell: the room the tightest case of a "holds" leaves
        (:func:`results_format.evidence.claim_slack`), "-" for other verdicts."""
        slack = claim_slack(self.claim.to_json())
        return slack.short if slack is not None else "-"

    @property
    def evidence(self) -> str:
        """The claim detail's evidence: slack, companions of a loose bound, kill set."""
        if self.verdict in (NOT_CHECKED, NOT_TRUSTED):
            return ""
        return evidence_text(self.claim.to_json(), self.kills)

    @property
    def verdict_class(self) -> str:
        return VERDICT_CLASSES.get(self.verdict, "verdict-unknown")

    @property
    def expectation(self) -> tuple[str, str, str]:
        """(short text, long text, CSS class) of the verdict against the testbed's record."""
        return expectation(self.claim)

    @property
    def measured(self) -> str:
        """The row's measured figure: the worst case against the theory, or, for an undecided
        claim, the run that decides it."""
        if self.decide is not None:
            return f"decided by {self.decide.command} ({self.decide.duration})"
        return self.section.worst

    @property
    def line_statement(self) -> str:
        """The statement for a one-line row, a correction naming the claim it corrects."""
        if self.corrects is not None:
            return f"corrects {self.corrects.id}: {self.statement}"
        return self.statement

    @property
    def refutation(self) -> str:
        """For a claim that fails as stated: a substantive refutation, an erratum or a table
        number (:func:`results_format.verdicts.refutation_class`); "" otherwise."""
        if self.verdict != FAILS or self.about not in ABOUTS:
            return ""
        return refutation_class(self.about)

    @property
    def estimators(self) -> str:
        return ", ".join(self.claim.estimators)

    @property
    def decision(self) -> str:
        return decision_text(self.claim)

    @property
    def decision_lines(self) -> list[str]:
        return decision_lines(self.claim)

    @property
    def fit_rows(self) -> list[tuple[str, ...]]:
        return fit_rows(self.claim)

    @property
    def hypotheses(self) -> list[str]:
        """The paper's hypotheses with their margins on the case the verdict rests on."""
        return hypothesis_lines(self.claim)

    @property
    def readings(self) -> list[str]:
        """The statement's readings with the verdict under each."""
        return reading_lines(self.claim)

    @property
    def added_parameters(self) -> str:
        """The outcome at each measured value of the parameters the testbed adds to the paper's
        setting (shown beside the verdict; empty when the claim declares none)."""
        return added_parameters_text(self.claim.added_parameters or ())

    @property
    def reading_verdicts(self) -> str:
        """The verdict under each reading, by name, in one phrase (shown beside the verdict
        wherever it appears; empty for a claim read one way)."""
        return readings_text(r.to_json() for r in self.claim.readings)

    @property
    def refutation_summary(self) -> str:
        return refutation_summary(self.claim)

    @property
    def scale(self) -> str:
        """For a number from a paper's table: how the claim's protocol differs from the
        paper's scale."""
        return self.claim.scale or ""


def decision_lines(c: ClaimRecord) -> list[str]:
    """The perturbation or positive control, and each undecided case with the budget that
    would decide it."""
    lines = []
    power = c.power
    if power is not None:
        lines.append(
            f"Perturbation ({'caught' if power.caught else 'NOT caught'},"
            f" verdict on it: {power.verdict}): {power.name}: {power.description}"
        )
    control = c.positive_control
    if control is not None:
        case = control.case or CaseRecord(problem_id="?")
        lines.append(
            f"Positive control: on {case.problem_id} "
            f"{json.dumps(case.params or {}, sort_keys=True)} the same check "
            f"says {control.outcome} (measured "
            f"{number_text(case.measured)} vs {number_text(case.bound)})."
        )
    for case in c.cases:
        if case.outcome != "undecided":
            continue
        for d in case.decisions:
            if d.outcome == "undecided":
                lines.append(_undecided_line(case, d))
    return lines


def _undecided_line(case: CaseRecord, d: DecisionRecord) -> str:
    """An undecided test: its interval against the region, and the budget that would decide
    it."""
    factor = as_float(d.budget_factor)
    budget = (
        f"about {number_text(factor, 2)}x the samples would decide it"
        if math.isfinite(factor)
        else "the estimate sits on the edge"
    )
    return (
        f"Undecided on {case.problem_id}: {d.quantity} "
        f"{number_text(d.estimate, 4)}, "
        f"interval [{number_text(d.low, 4)}, "
        f"{number_text(d.high, 4)}] "
        f"at rate {number_text(d.rate, 2)} "
        f"against [{number_text(d.region_low, 4)}, "
        f"{number_text(d.region_high, 4)}]; {budget}."
    )


def decide_command(claim: ClaimRecord, results: str) -> DecideCommand | None:
    """For an undecided claim: ``testbed check`` on the profile that decides it (recorded as
    ``decided_on`` when its profile cannot decide it by design; else the thorough profile, with
    more samples), with the measured time when the claim records one."""
    if claim.verdict != "undecided":
        return None
    decided = claim.decided_on or DecidedOnRecord()
    profile = decided.profile or "thorough"
    seconds = as_float(decided.seconds)
    where = f" --results {results}" if results and results != "results" else ""
    return DecideCommand(
        f"testbed check --profile {profile} --claim {claim.id}{where}",
        seconds if math.isfinite(seconds) else None,
    )

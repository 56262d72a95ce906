"""The claims tables: each claim's worst case, its table cells and the verdict summary.

:class:`ClaimSection` is what the report shows about one claim; the helpers here turn a claim's
JSON into the text of its table row (worst case, cases, decision, power) and its fit rows.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from reports.figure_spec import claim_fits
from reports.results_reading import NOT_CHECKED
from reports.results_reading import NOT_TRUSTED
from reports.results_reading import as_float
from results_format.claim_record import CaseRecord
from results_format.claim_record import ClaimRecord
from results_format.claim_record import FitRecord
from results_format.populations import counted
from results_format.populations import split
from results_format.summary_records import CalibrationRow
from results_format.summary_records import ResultsMetadata
from results_format.verdicts import ABOUTS
from results_format.verdicts import ERRATUM
from results_format.verdicts import SUBSTANTIVE
from results_format.verdicts import TABLE_NUMBER
from results_format.verdicts import refutation_counts

PAPER_ORDER = ("Classical", "FedNest", "AggITD", "FedMSA", "HGP")
VERDICT_CLASSES = {
    "holds": "verdict-holds",
    "fails as stated": "verdict-fails",
    "holds once corrected": "verdict-corrected",
    "undecided": "verdict-undecided",
    "not checked": "verdict-unknown",
    "not trusted": "verdict-unknown",
}


@dataclasses.dataclass
class ClaimSection:
    """What the report shows about one claim."""

    claim: ClaimRecord
    worst: str
    figure: str | None = None
    counterexample: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    #: every file of the counterexample copied into the report (the JSON, its arrays)
    counterexample_files: list[str] = dataclasses.field(default_factory=list)
    #: the worst case's problem in words
    worst_title: str = ""
    caption: str = ""
    alt: str = ""
    #: per panel, the roles of the artists drawn, scales and labels (the figure manifest's)
    artists: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def id(self) -> str:
        return self.claim.id

    @property
    def anchor(self) -> str:
        return "claim-" + re.sub(r"[^A-Za-z0-9_-]", "-", self.id)

    @property
    def row_anchor(self) -> str:
        """The claim's row in its paper's summary table."""
        return "row-" + re.sub(r"[^A-Za-z0-9_-]", "-", self.id)


# --------------------------------------------------------------------------- worst case


def _ratio(case: CaseRecord) -> float:
    """measured / bound for a "<=" relation (bound / measured for ">=")."""
    measured, bound = as_float(case.measured), as_float(case.bound)
    if _lower_bound(case):
        measured, bound = bound, measured
    if math.isnan(measured) or math.isnan(bound):
        return math.nan
    if bound > 0:
        return measured / bound
    return math.inf if measured > 0 else 0.0


def _lower_bound(case: CaseRecord) -> bool:
    """The relation asks measured >= bound (or >): its comparison (after a "quantity:" prefix)
    names ">" and no "<=" ("fraction with ratio <= 0.1: > 1/2" bounds the fraction below)."""
    relation = case.relation.rsplit(":", 1)[-1]
    return ">" in relation.replace("->", "") and "<=" not in relation


def within_slack(case: CaseRecord) -> bool:
    """A passed bound case whose measured value is above its bound: it passed only by the
    check's round-off slack (say a 1e-16 error against a bound of 0)."""
    return (
        case.fit is None
        and case.outcome == "holds"
        and "<=" in case.relation
        and _ratio(case) > 1.0
    )


def _severity(case: CaseRecord) -> tuple[bool, bool, float]:
    """Sort key, larger = worse: failed first, then the largest measured/bound ratio.

    A fit is scored by ``|estimate - theory| / tolerance``. Passed cases within round-off
    slack (see :func:`within_slack`) rank below every case whose ratio says something about
    the bound; they are the worst case only when no other case is left.
    """
    failed = case.outcome == "fails"
    fit = case.fit
    if fit is not None:
        tol = as_float(fit.tolerance)
        gap = abs(as_float(fit.estimate) - as_float(fit.theory))
        score = gap / tol if tol > 0 else (math.inf if gap > 0 else 0.0)
    else:
        score = _ratio(case)
    if math.isnan(score):
        score = math.inf
    meaningful = failed or not within_slack(case)
    return (failed, meaningful, score if math.isfinite(score) else 0.0)


def worst_case(claim: ClaimRecord) -> CaseRecord | None:
    """The claim's worst case (see :func:`_severity`); ties go to the first listed."""
    cases = claim.cases
    if not cases:
        return None
    worst = max(range(len(cases)), key=lambda i: (_severity(cases[i]), -i))
    return cases[worst]


def number_text(value: Any, digits: int = 3) -> str:
    """``value`` (a number or its text) to ``digits`` significant digits; "n/a" when
    unreadable, "inf"/"-inf" when infinite."""
    x = as_float(value)
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}g}"


def worst_case_text(case: CaseRecord | None) -> str:
    """The measured figure against the theory for one case, as one line of text."""
    if case is None:
        return "no cases"
    fit = case.fit
    if fit is not None:
        return (
            f"fitted slope {number_text(fit.estimate, 4)} ({interval_text(fit)}) "
            f"vs theory {number_text(fit.theory, 4)}"
        )
    measured, bound = as_float(case.measured), as_float(case.bound)
    text = f"{number_text(measured)} vs bound {number_text(bound)} ({case.relation})"
    if bound > 0 and math.isfinite(measured):
        text += f", ratio {number_text(measured / bound)}"
    if within_slack(case):
        text += "; passed within the check's round-off slack"
    return text


# --------------------------------------------------------------------------- table cells


def cases_text(claim: ClaimRecord) -> str:
    """What the verdict rests on: the cases that held or were undecided, and, for a refuted
    claim, that the verdict comes from the saved counterexample (so "0 cases" never stands
    unexplained)."""
    if claim.verdict == NOT_CHECKED:
        return "not checked: no results file for this claim"
    if claim.verdict == NOT_TRUSTED:
        return f"not trusted, not shown: {claim.trust_problem}"
    held = claim.n_cases
    parts = [f"{held} case{'s' if held != 1 else ''} held"]
    if claim.n_undecided:
        parts.append(f"{claim.n_undecided} undecided")
    if claim.counterexample:
        confirmed = " and confirmed on fresh seeds" if claim.statistical else ""
        if held == 0:
            parts = [
                "refuted on the saved counterexample, replayed before any drawn case"
                f"{confirmed}; the check stops at the first failure, so no other case was "
                "measured"
            ]
        else:
            parts.append(f"then refuted on the saved counterexample{confirmed}")
    if claim.n_rejected:
        parts.append(f"{claim.n_rejected} drawn cases not measurable")
    return "; ".join(parts)


def expectation(claim: ClaimRecord) -> tuple[str, str, str]:
    """The verdict against what the testbed has established about the claim: a short text for
    the one-line row, a sentence for the detail, and its CSS class.

    A verdict "fails as stated" that the testbed expected is a known erratum reproduced, never
    "expected: yes" (which read as if the paper's statement were expected to hold); a verdict
    the testbed did not expect says so in capitals; "not checked" is neither.
    """
    verdict = claim.verdict
    if verdict == NOT_CHECKED:
        return ("not checked", "not checked: no results file for this claim", "muted")
    if verdict == NOT_TRUSTED:
        return ("not trusted", f"not trusted, not shown: {claim.trust_problem}", "muted")
    flag = claim.as_expected
    if flag is None:
        return ("n/a", "the results file does not record what the testbed expected", "muted")
    if not flag:
        record = claim.expected_verdicts or (claim.expected,)
        established = " or ".join(str(v) for v in record if v)
        return (
            f"NOT as recorded ({established})",
            f"NOT what the testbed has established ({established}): a departure to investigate",
            "expected-no",
        )
    if verdict == "fails as stated":
        return (
            "known erratum",
            "a known erratum: the testbed refuted this statement before, "
            "and this run refuted it again",
            "expected-yes",
        )
    if verdict == "undecided":
        return (
            "by design",
            "undecided by design on this profile (its budget is a smoke run "
            "of the code path); the command given decides it",
            "muted",
        )
    return ("as expected", "the verdict the testbed has established", "expected-yes")


def decision_text(claim: ClaimRecord) -> str:
    """How the verdict was decided: float64 tolerances, or intervals at a stated rate."""
    if not claim.statistical:
        return "deterministic (float64, round-off tolerances)"
    rate = as_float(claim.false_fail_rate)
    per_case = as_float(claim.case_false_fail_rate)
    text = f"statistical: false-failure rate {number_text(rate, 2)} per claim"
    if math.isfinite(per_case):
        text += f" ({number_text(per_case, 2)} per case, Bonferroni)"
    if claim.n_unconfirmed:
        text += f"; {claim.n_unconfirmed} first-stage failure(s) not confirmed on fresh seeds"
    return text


def power_text(claim: ClaimRecord) -> str:
    """The check's power (a holds claim: its perturbation caught) or its positive control (a
    claim that fails as stated: a case where the same check holds)."""
    power, control = claim.power, claim.positive_control
    parts = []
    if power is not None:
        parts.append(f"{'caught' if power.caught else 'NOT caught'}: {power.name}")
    if control is not None:
        parts.append(
            "positive control "
            + ("holds" if control.holds else f"does NOT hold ({control.outcome})")
        )
    return "; ".join(parts) if parts else "—"


def calibration_text(claim: ClaimRecord, calibration: dict[str, CalibrationRow] | None) -> str:
    """The claim's row of the calibration table (``testbed calibrate``): false failures (or,
    for a claim expected to fail, refutations) over independent seeds against the stated rate."""
    if not claim.statistical:
        return "n/a (deterministic)"
    if calibration is None:
        return "not calibrated (`testbed calibrate --seeds 300`)"
    row = calibration.get(claim.id)
    if row is None:
        return "not in the calibration run"
    what = "refutations" if row.expected == "fails" else "false failures"
    text = (
        f"{row.refuted}/{row.seeds} {what} [{number_text(row.rate_low)}, "
        f"{number_text(row.rate_high)}] vs stated {number_text(row.stated_rate)}"
    )
    if row.consistent is not None:
        text += "; consistent" if row.consistent else "; NOT consistent"
    if row.undecided:
        text += f"; {row.undecided} undecided"
    return text


def header_fields(meta: ResultsMetadata) -> list[tuple[str, str]]:
    """The report header's (label, value) rows from the results' ``metadata.json``: profile,
    commit, package versions, when the results were written (and the Hypothesis settings)."""
    profile = meta.profile
    if isinstance(profile, Mapping):
        extra = ", ".join(f"{k}={v}" for k, v in profile.items() if k != "name")
        profile_text = f"{profile.get('name', '?')}" + (f" ({extra})" if extra else "")
    else:
        profile_text = str(profile) if profile else "unknown"
    versions = meta.versions
    versions_text = (
        ", ".join(f"{k} {v}" for k, v in versions.items())
        if isinstance(versions, Mapping)
        else "unknown"
    )
    fields = [
        ("Git commit", _or_unknown(meta.git_commit)),
        ("Profile", profile_text),
        ("Package versions", versions_text),
        ("Results written", _or_unknown(meta.written)),
    ]
    if meta.hypothesis:
        fields.append(("Hypothesis", str(meta.hypothesis)))
    return fields


def _or_unknown(value: object) -> str:
    return "unknown" if value is None else str(value)


def summary_sentence(sections: Sequence[ClaimSection]) -> str:
    """One sentence under the matrix: the claims of the papers, the comparisons and the runs on
    enrolled variants counted apart (:mod:`results_format.populations`), those checked as
    expected, and the checks' power. A claim "not checked" is counted apart, never as
    expected."""
    claims = [s.claim for s in sections]
    checked = [c for c in claims if c.verdict not in (NOT_CHECKED, NOT_TRUSTED)]
    unexpected = sum(1 for c in checked if c.as_expected is False)
    expected = sum(1 for c in checked if c.as_expected is True)
    missed = sum(1 for c in claims if c.power is not None and c.power.caught is False)
    controls = sum(
        1 for c in claims if c.positive_control is not None and c.positive_control.holds is False
    )
    checked_ids = {c.id for c in checked}
    populations = ", ".join(
        f"{counted(len(ids), which)} ({sum(i in checked_ids for i in ids)} checked)"
        for which, ids in split(c.id for c in claims).items()
        if ids
    )
    text = (
        f"{populations or 'nothing'}: {expected} as the testbed expects, {unexpected} "
        "verdict(s) differ from what the testbed expects"
    )
    refuted = refutation_counts(c.to_json() for c in checked if c.about in ABOUTS)
    if any(refuted.values()):
        # short: the first screen's lists must fit one screen; the groups' badges and the
        # sections below name the classes in full
        text += (
            f"; failing as stated: {refuted[SUBSTANTIVE]} substantive refutation(s), "
            f"{refuted[ERRATUM]} erratum/errata, {refuted[TABLE_NUMBER]} table "
            "number(s)"
        )
    untrusted = sum(1 for c in claims if c.verdict == NOT_TRUSTED)
    if len(claims) - untrusted > len(checked):
        text += f"; {len(claims) - untrusted - len(checked)} not checked (not counted as expected)"
    if untrusted:
        text += (
            f"; {untrusted} results file(s) not trusted (edited or damaged: not shown, not counted)"
        )
    if missed or controls:
        text += f"; {missed} perturbation(s) not caught, {controls} positive control(s) failing"
    return text + "."


TABLE_HEAD = ("Claim", "Verdict", "Measured against the theory", "Slack", "Statement")
FIT_HEAD = ("Case", "Quantity", "Fitted", "Interval or residual", "Theory", "Tolerance", "Outcome")


def level_text(level: float) -> str:
    """A confidence level as a percentage with the digits it has (0.999 is 99.9%, not 100%)."""
    return f"{100 * level:.6g}%"


def interval_text(fit: FitRecord) -> str:
    """What the fit record says about its uncertainty: a fit residual when it carries one (a
    fit on exact data), else its interval with the level it was computed at; an interval of
    zero width without a level below 1 is a fit on exact data with nothing recorded."""
    residual = as_float(fit.residual)
    if math.isfinite(residual):
        return f"exact data, fit residual {number_text(residual, 2)}"
    low, high = as_float(fit.ci_low), as_float(fit.ci_high)
    level = as_float(fit.confidence)
    if low == high and not (math.isfinite(level) and level < 1.0):
        return "exact data (no interval)"
    text = f"[{number_text(low, 4)}, {number_text(high, 4)}]"
    if math.isfinite(level):
        text += f" ({level_text(level)})"
    return text


def fit_rows(claim: ClaimRecord) -> list[tuple[str, ...]]:
    """One row per fit, numbered as the figure's fit panel numbers them; the outcome is the
    case's decision (an undecided case is "undecided", never "yes")."""
    rows: list[tuple[str, ...]] = []
    for number, (fit, outcome, _) in enumerate(claim_fits(claim), start=1):
        est, theory, tol = (as_float(v) for v in (fit.estimate, fit.theory, fit.tolerance))
        rows.append(
            (
                f"{number}: {fit.problem_id}",
                fit.quantity,
                number_text(est, 4),
                interval_text(fit),
                number_text(theory, 4),
                number_text(tol, 3),
                outcome,
            )
        )
    return rows

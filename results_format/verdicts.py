"""The verdict vocabulary and the rules that turn measurements into a verdict.

Used both by the claim runner that decides (``theory_checks``) and by everything that reads a
``claims/<run_id>.json`` back (the resume of ``testbed check``, the report, ``testbed audit``:
:mod:`results_format.claim_checks`), so the rule that wrote a verdict is the rule that checks it:

- a statistical test's outcome from its interval and its allowed region
  (:func:`interval_outcome`), a case's from its tests (:func:`combine`) or, for a deterministic
  claim, from its comparison (:func:`comparison_holds`);
- the claim's verdict from its cases' outcomes (:func:`verdict_of`): a failing case (its saved
  counterexample) makes it "fails as stated"; an undecided case, or no case at all,
  "undecided"; else "holds" ("holds once corrected" for a corrected claim); over its readings
  (:func:`verdict_over_readings`);
- what a claim checks (:data:`ABOUTS`) and how a refutation of it counts
  (:func:`refutation_class`).

The claim file's schema is :mod:`results_format.claim_schema`, its checks
:mod:`results_format.claim_checks` and :mod:`results_format.claim_file`, its typed record
:mod:`results_format.claim_record`. Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

#: A claim's verdicts (the report's words).
VERDICTS: tuple[str, ...] = ("holds", "fails as stated", "holds once corrected", "undecided")
#: A case's (and a statistical test's) outcomes.
OUTCOMES: tuple[str, ...] = ("holds", "fails", "undecided")
#: How a claim is decided.
DECISIONS: tuple[str, ...] = ("deterministic", "statistical")
#: What a claim checks (its ``about``): a result the paper states (a theorem, lemma,
#: corollary or proposition, or one it cites), a step of a proof or a printed formula (an
#: equation, an algorithm's line, a constant, a count in a table of complexities, or a formula
#: derived here that a result rests on), a sentence of the text, or a number of an experiment's
#: table or figure. A refutation of the first is a substantive one; of the second or third, an
#: erratum (the result it serves is checked apart); of the last, a table number.
ABOUT_RESULT = "stated result"
ABOUT_STEP = "proof step or formula"
ABOUT_SENTENCE = "informal sentence"
ABOUT_TABLE = "table number"
ABOUTS: tuple[str, ...] = (ABOUT_RESULT, ABOUT_STEP, ABOUT_SENTENCE, ABOUT_TABLE)
#: How a "fails as stated" counts, by what the claim checks (:func:`refutation_class`).
SUBSTANTIVE, ERRATUM, TABLE_NUMBER = "substantive refutation", "erratum", "table number"
REFUTATION_CLASSES: tuple[str, ...] = (SUBSTANTIVE, ERRATUM, TABLE_NUMBER)
#: How a case's ``passed`` follows from its recorded numbers (:func:`comparison_holds`).
COMPARISON_RULES: tuple[str, ...] = ("at_most", "at_least", "within", "compound")


# --------------------------------------------------------------------------- the rules


def _finite(*values: Any) -> bool:
    return all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values
    )


def interval_outcome(
    low: Any, high: Any, estimate: Any, region_low: float, region_high: float
) -> str:
    """A statistical test's outcome: "fails" when its interval ``[low, high]`` lies outside the
    allowed region ``[region_low, region_high]``, "holds" when inside it, else "undecided" (and
    "undecided" when the interval or the estimate is not finite)."""
    if not _finite(low, high, estimate):
        return "undecided"
    if low > region_high or high < region_low:
        return "fails"
    if low >= region_low and high <= region_high:
        return "holds"
    return "undecided"


def combine(outcomes: Iterable[str]) -> str:
    """A case (or a claim) fails if any part fails, is undecided if any part is, else holds."""
    seen = set(outcomes)
    if "fails" in seen:
        return "fails"
    if "undecided" in seen:
        return "undecided"
    return "holds"


def comparison_holds(
    rule: str, measured: float, bound: float, slack: float, fit: Mapping[str, Any] | None
) -> bool | None:
    """Whether a case's comparison holds under ``rule``:

    - "at_most": ``measured <= bound + slack``;
    - "at_least": ``measured >= bound - slack``;
    - "within": the case's fit agrees with the theory, ``|estimate - theory| <= tolerance``,
      the fit's estimate and theory being the case's measured and bound;
    - "compound": ``None``: the check's pass rests on more than these two numbers (every point
      of a grid, several conditions at once), which only measuring the case again checks
      (``testbed audit``).

    A recorded case passes exactly when its comparison holds (:func:`comparison_problem`)."""
    if rule == "at_most":
        return measured <= bound + slack
    if rule == "at_least":
        return measured >= bound - slack
    if rule == "within":
        return (
            fit is not None
            and fit.get("estimate") == measured
            and fit.get("theory") == bound
            and _finite(fit.get("estimate"), fit.get("theory"), fit.get("tolerance"))
            and abs(fit["estimate"] - fit["theory"]) <= fit["tolerance"]
        )
    return None


def comparison_for(
    relation: str,
    measured: float,
    bound: float,
    passed: bool,
    slack: float,
    fit: Mapping[str, Any] | None,
    rule: str | None = None,
) -> dict[str, Any]:
    """The ``comparison`` a writer records for a case: ``rule`` when the check names one, else
    read from ``relation`` ("within" for a fit's ``|... - ...|``, "at_least" for a lower
    bound, "at_most" otherwise); "compound" whenever ``passed`` is not what the rule gives on
    these numbers (the check decided on more than them)."""
    if rule is None:
        text = relation.rsplit(":", 1)[-1]
        if fit is not None and "|" in text:
            rule = "within"
        elif ">" in text.replace("->", "") and "<=" not in text:
            rule = "at_least"
        else:
            rule = "at_most"
    if rule not in COMPARISON_RULES:
        raise ValueError(f"unknown comparison rule {rule!r}; known: {COMPARISON_RULES}")
    if comparison_holds(rule, measured, bound, slack, fit) is not bool(passed):
        rule = "compound"
    return {"rule": rule, "slack": float(slack)}


def verdict_over_readings(verdicts: Iterable[str]) -> str:
    """A claim read several ways (its readings, each checked on the same cases): the first
    reading that holds gives the verdict; "fails as stated" only when every reading fails; else
    "undecided"."""
    seen = list(verdicts)
    holding = [v for v in seen if v in ("holds", "holds once corrected")]
    if holding:
        return holding[0]
    if seen and all(v == "fails as stated" for v in seen):
        return "fails as stated"
    return "undecided"


def reading_as_expected(verdict: str, expected: str | None, claim_expected: Iterable[str]) -> bool:
    """Whether a reading's verdict is the one the claim declares for it: ``expected`` "fails"
    needs "fails as stated", "holds" a holding verdict, ``None`` anything; "undecided" is as
    expected where the claim's own expected verdicts allow it (a profile that cannot decide)."""
    if expected is None:
        return True
    if verdict == "undecided":
        return "undecided" in claim_expected
    return (verdict == "fails as stated") == (expected == "fails")


def readings_as_expected(
    readings: Iterable[Mapping[str, Any]], claim_expected: Iterable[str]
) -> bool:
    """Every recorded reading (``{"verdict", "expected"}``) as the claim declares it."""
    allowed = list(claim_expected)
    return all(
        reading_as_expected(str(r.get("verdict")), r.get("expected"), allowed)
        for r in readings
        if isinstance(r, Mapping)
    )


def readings_text(readings: Iterable[Mapping[str, Any]]) -> str:
    """A claim's verdict under each of its readings, by name, in one phrase, the readings with
    one verdict together: "fails as stated under R1 / R2; holds under R3" (empty for a claim
    read one way). Every place that shows the
    verdict of a claim with readings shows this beside it, so that a "holds" reached under one
    reading never hides the readings that fail, nor a refutation the readings it covers."""
    grouped: dict[str, list[str]] = {}
    for r in readings:
        if isinstance(r, Mapping):
            grouped.setdefault(str(r.get("verdict", "?")), []).append(str(r.get("name", "?")))
    return "; ".join(f"{verdict} under {' / '.join(names)}" for verdict, names in grouped.items())


def added_parameters_text(records: Iterable[Mapping[str, Any]]) -> str:
    """The outcome of a claim's check at each measured value of each parameter the testbed adds
    to the paper's setting, in one phrase: "ridge mu (the claim's cases: 0.01, 0.5): holds at
    0.001 (0.9934 vs 0.99), ..." (empty when none is declared)."""
    parts = []
    for record in records:
        if not isinstance(record, Mapping):
            continue
        at = []
        for o in record.get("outcomes") or []:
            if not isinstance(o, Mapping):
                continue
            measured, bound = o.get("measured"), o.get("bound")
            extra = "".join(
                f"; {key} {value:.4g}"
                for key, value in (o.get("shown") or {}).items()
                if _finite(value)
            )
            numbers = f" ({measured:.4g} vs {bound:.4g}{extra})" if _finite(measured, bound) else ""
            at.append(f"{o.get('outcome', '?')} at {o.get('value', '?')}{numbers}")
        checked = ", ".join(str(v) for v in record.get("checked") or [])
        parts.append(f"{record.get('name', '?')} (the claim's cases: {checked}): " + ", ".join(at))
    return "; ".join(parts)


def verdict_of(outcomes: Iterable[str], corrects: bool) -> str:
    """A claim's verdict from its cases' outcomes: a failing case -> "fails as stated"; an
    undecided case, or none at all -> "undecided"; else "holds" ("holds once corrected" when
    the claim corrects another)."""
    seen = list(outcomes)
    if "fails" in seen:
        return "fails as stated"
    if "undecided" in seen or not seen:
        return "undecided"
    return "holds once corrected" if corrects else "holds"


def refutation_class(about: str) -> str:
    """How a claim about ``about`` (one of :data:`ABOUTS`) counts when it fails as stated: a
    stated result refuted is a substantive refutation; a proof step, a printed formula or an
    informal sentence refuted is an erratum (the result it serves may still hold); a table's
    number refuted is a table number (a replication, decided at the paper's scale)."""
    if about == ABOUT_RESULT:
        return SUBSTANTIVE
    if about in (ABOUT_STEP, ABOUT_SENTENCE):
        return ERRATUM
    if about == ABOUT_TABLE:
        return TABLE_NUMBER
    raise ValueError(f"unknown class {about!r}; known: {', '.join(ABOUTS)}")


def refutation_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The "fails as stated" verdicts among ``records`` (claim results, or anything with
    ``verdict`` and ``about``), counted by :func:`refutation_class`, every class present."""
    counts = dict.fromkeys(REFUTATION_CLASSES, 0)
    for record in records:
        if record.get("verdict") == "fails as stated":
            counts[refutation_class(str(record.get("about")))] += 1
    return counts


__all__ = [
    "ABOUTS",
    "ABOUT_RESULT",
    "ABOUT_SENTENCE",
    "ABOUT_STEP",
    "ABOUT_TABLE",
    "COMPARISON_RULES",
    "DECISIONS",
    "ERRATUM",
    "OUTCOMES",
    "REFUTATION_CLASSES",
    "SUBSTANTIVE",
    "TABLE_NUMBER",
    "VERDICTS",
    "added_parameters_text",
    "combine",
    "comparison_for",
    "comparison_holds",
    "interval_outcome",
    "reading_as_expected",
    "readings_as_expected",
    "readings_text",
    "refutation_class",
    "refutation_counts",
    "verdict_of",
    "verdict_over_readings",
]

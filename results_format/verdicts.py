"""A claim's results file: its schema, and its verdict recomputed from its recorded cases.

The vocabulary (:data:`VERDICTS`, :data:`OUTCOMES`) and the three rules that turn measurements
into a verdict live here, used both by the claim runner that decides (``theory_checks``) and by
everything that reads a ``claims/<run_id>.json`` back (the resume of ``testbed check``, the
report), so the rule that wrote a verdict is the rule that checks it:

- a statistical test's outcome from its interval and its allowed region
  (:func:`interval_outcome`), a case's from its tests (:func:`combine`) or, for a deterministic
  claim, from its comparison;
- the claim's verdict from its cases' outcomes (:func:`verdict_of`): a failing case (its saved
  counterexample) makes it "fails as stated"; an undecided case, or no case at all,
  "undecided"; else "holds" ("holds once corrected" for a corrected claim).

:func:`claim_file_problem` says why a claim's results file cannot be believed: a field of the
wrong type, a verdict outside the vocabulary, a measured number that is NaN, a recorded outcome,
verdict or ``as_expected`` other than the one its cases give, counts that disagree with the
cases, a seal that does not match the content (:mod:`results_format.validation`), a companion
file (series CSV, counterexample) outside the results folder or whose bytes differ from the
digest recorded. Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from statistics import NormalDist
from typing import Any

from results_format.layout import CLAIMS
from results_format.paths import UnsafePath, inside
from results_format.validation import (
    field_problems,
    file_digest,
    kind_problem,
    seal_problem,
)

#: A claim's verdicts (the report's words).
VERDICTS: tuple[str, ...] = ("holds", "fails as stated", "holds once corrected", "undecided")
#: A case's (and a statistical test's) outcomes.
OUTCOMES: tuple[str, ...] = ("holds", "fails", "undecided")
#: How a claim is decided.
DECISIONS: tuple[str, ...] = ("deterministic", "statistical")
#: The key of the companion files' digests in a claim's results file.
FILES_KEY = "files"

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

#: ``claims/<run_id>.json`` (written by ``theory_checks.claim_results``; the keys the testbed
#: reads back, with their kinds; more keys may be present).
CLAIM_RESULT_SCHEMA: dict[str, Any] = {
    "id": "str",
    "claim": "str",
    "estimator": "str",
    "paper": "str",
    "reference": "str",
    "kind": "str",
    "about": ABOUTS,
    "serves": "str|null",
    "power_from": "list",
    "statement": "str",
    "estimators": "list",
    "corrects": "str|null",
    "expected": "str",
    "expected_verdicts": "list",
    "verdict": VERDICTS,
    "as_expected": "bool",
    "decision": DECISIONS,
    "profile": "str",
    "fingerprint": "str",
    "n_cases": "count",
    "n_undecided": "count",
    "n_unconfirmed": "count",
    "n_rejected": "count",
    "seconds": "finite",
    "counterexample": "str|null",
    "cases": "list",
    "unconfirmed": "list",
    "fits": "list",
    "series_file": "str",
    "power": "object|null",
    "positive_control": "object|null",
    FILES_KEY: "object",
}
#: One recorded case (``cases[i]``; also a confirmation, a counterexample file's body).
CASE_SCHEMA: dict[str, Any] = {
    "problem_id": "str",
    "spec": "object",
    "params": "object",
    "measured": "number",
    "bound": "number",
    "passed": "bool",
    "relation": "str",
    "outcome": OUTCOMES,
    "fit": "object|null",
    "details": "object",
    "comparison": "object",
}
#: How a case's ``passed`` follows from its recorded numbers (``cases[i].comparison``): its
#: rule (:data:`COMPARISON_RULES`) and the check's round-off slack.
COMPARISON_SCHEMA: dict[str, Any] = {
    "rule": ("at_most", "at_least", "within", "compound"),
    "slack": "finite",
}
#: The rules of :func:`comparison_holds`.
COMPARISON_RULES: tuple[str, ...] = COMPARISON_SCHEMA["rule"]
#: One statistical test's decision (``cases[i].decisions[j]``). Interval ends may be infinite
#: (an open side of the region) or not finite at all (then the test is undecided).
DECISION_SCHEMA: dict[str, Any] = {
    "quantity": "str",
    "estimate": "float|null",
    "low": "float|null",
    "high": "float|null",
    "region_low": "number",
    "region_high": "number",
    "rate": "finite",
    "outcome": OUTCOMES,
}
#: A fit (``cases[i].fit``, ``fits[j]``).
FIT_SCHEMA: dict[str, Any] = {
    "quantity": "str",
    "estimate": "finite",
    "ci_low": "number|null",
    "ci_high": "number|null",
    "theory": "finite",
    "tolerance": "number",
}
#: ``counterexamples/<run_id>.json``: the failing case, with the claim it refutes.
COUNTEREXAMPLE_SCHEMA: dict[str, Any] = {
    "claim": "str",
    "profile": "str",
    "decision": DECISIONS,
    **CASE_SCHEMA,
}
#: The columns of ``series/<run_id>.csv`` that the report reads.
SERIES_COLUMNS_READ: tuple[str, ...] = ("problem_id", "series", "step", "value")


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


def comparison_problem(case: Mapping[str, Any], where: str) -> str | None:
    """Why a schema-valid case's ``passed`` is not what its comparison gives on its recorded
    numbers (:func:`comparison_holds`), or ``None``."""
    comparison = case["comparison"]
    found = field_problems(comparison, COMPARISON_SCHEMA, f"{where}.comparison")
    if found:
        return found[0]
    rule, slack = comparison["rule"], comparison["slack"]
    if slack < 0:
        return f"{where}.comparison.slack is {slack}, a slack is >= 0"
    holds = comparison_holds(rule, case["measured"], case["bound"], slack, case["fit"])
    if holds is None or holds == case["passed"]:
        return None
    what = (
        "its fit"
        if rule == "within"
        else f"measured {case['measured']:.6g} against bound {case['bound']:.6g}"
    )
    return (
        f"{where}.passed is {str(case['passed']).lower()}, but {what} ({rule}, slack "
        f"{slack:.3g}) gives {str(holds).lower()}"
    )


#: The interval half-widths :func:`interval_problem` recomputes, by the evidence's method
#: (``theory_checks.decision``): the ones whose quantile the standard library has.
def _half_width(method: Mapping[str, Any], side_rate: float) -> float | None:
    name = str(method.get("method", ""))
    looks = method.get("looks")
    if name.startswith("SpentRate(") and isinstance(looks, int) and looks >= 1:
        return _half_width({**method, "method": name[len("SpentRate(") : -1]}, side_rate / looks)
    try:
        if name == "Hoeffding":
            return float(method["value_range"]) * math.sqrt(
                math.log(1.0 / side_rate) / (2.0 * method["n"])
            )
        if name == "EmpiricalBernstein":
            log_term = math.log(2.0 / side_rate)
            return math.sqrt(2.0 * method["variance"] * log_term / method["n"]) + 7.0 * method[
                "value_range"
            ] * log_term / (3.0 * (method["n"] - 1))
        if name == "Normal":
            return NormalDist().inv_cdf(1.0 - side_rate) * float(method["std_error"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return math.nan
    return None


# Why 1e-9: the writer computed the same formula in float64 (scipy's normal quantile and the
# standard library's agree to about 1e-15); an edited interval moves by far more.
INTERVAL_RTOL = 1e-9


def interval_problem(decision: Mapping[str, Any], rate: float | None, where: str) -> str | None:
    """Why a schema-valid statistical decision's numbers do not fit together, or ``None``: its
    rate must be the case's (``rate``, the claim's split over its planned cases) split over the
    case's tests; its finite interval must hold its estimate; where the standard library has
    the quantile (Hoeffding, empirical Bernstein, normal), its half-width is recomputed from
    the recorded statistic (``method``) at the rate, split over the region's bounded sides."""
    if rate is not None and not math.isclose(decision["rate"], rate, rel_tol=1e-12):
        return f"{where}.rate is {decision['rate']:.6g}, the case's tests are decided at {rate:.6g}"
    low, high, estimate = decision["low"], decision["high"], decision["estimate"]
    if not _finite(low, high, estimate):
        return None
    if not low <= estimate <= high:
        return f"{where}: its interval [{low:.6g}, {high:.6g}] does not hold its estimate"
    method = decision.get("method")
    if not isinstance(method, dict):
        return f"{where}.method is missing: its interval cannot be re-derived"
    sides = sum(math.isfinite(e) for e in (decision["region_low"], decision["region_high"]))
    if sides == 0 or not decision["rate"] > 0:
        return f"{where}: a test needs a bounded region and a rate > 0"
    half = _half_width(method, decision["rate"] / sides)
    if half is None:
        return None
    expected = (estimate - half, estimate + half)
    if not all(
        math.isclose(a, b, rel_tol=INTERVAL_RTOL, abs_tol=INTERVAL_RTOL * abs(half))
        for a, b in zip((low, high), expected, strict=True)
    ):
        return (
            f"{where}: its interval [{low:.6g}, {high:.6g}] is not the {method['method']} "
            f"interval of its statistic, [{expected[0]:.6g}, {expected[1]:.6g}]"
        )
    return None


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


# --------------------------------------------------------------------------- checking a file


def _case_outcome(
    case: dict[str, Any],
    statistical: bool,
    where: str,
    problems: list[str],
    rate: float | None = None,
) -> str | None:
    """The outcome ``case``'s own record gives (its decisions, its comparison, its
    confirmation), adding to ``problems`` what does not fit; ``None`` when it cannot be told.
    ``rate``: the case's false-failure rate, which its tests split (``None``: not checked)."""
    found = field_problems(case, CASE_SCHEMA, where)
    if found:
        problems.extend(found)
        return None
    measured = case["measured"]
    if not math.isfinite(measured) and case["outcome"] != "fails":
        problems.append(
            f"{where}.measured is {measured}, a case that holds or is undecided "
            "measures a finite number"
        )
    fit = case["fit"]
    if fit is not None:
        problems.extend(field_problems(fit, FIT_SCHEMA, f"{where}.fit"))
        if problems:
            return None
    compared = comparison_problem(case, where)
    if compared is not None:
        problems.append(compared)
        return None
    decisions = case.get("decisions", [])
    if not isinstance(decisions, list):
        problems.append(f"{where}.decisions is not a list")
        return None
    if not statistical:
        if decisions:
            problems.append(f"{where}: a deterministic claim's case records statistical tests")
        own = "holds" if case["passed"] else "fails"
    else:
        outcomes = []
        for j, decision in enumerate(decisions):
            label = f"{where}.decisions[{j}]"
            found = field_problems(decision, DECISION_SCHEMA, label)
            if found:
                problems.extend(found)
                return None
            outcome = interval_outcome(
                decision["low"],
                decision["high"],
                decision["estimate"],
                decision["region_low"],
                decision["region_high"],
            )
            if outcome != decision["outcome"]:
                problems.append(
                    f"{label}.outcome is {decision['outcome']!r}, its interval gives {outcome!r}"
                )
                return None
            interval = interval_problem(
                decision, None if rate is None else rate / len(decisions), label
            )
            if interval is not None:
                problems.append(interval)
                return None
            outcomes.append(outcome)
        if case["passed"] and not decisions:
            problems.append(f"{where}: a statistical case that passed records no test")
            return None
        own = combine(outcomes) if case["passed"] else "fails"
    confirmation = case.get("confirmation")
    if confirmation is not None:
        if own != "fails":
            problems.append(
                f"{where}: a confirmation is recorded for a first stage that did not fail"
            )
            return None
        own = (
            _case_outcome(confirmation, statistical, f"{where}.confirmation", problems, rate) or ""
        )
        if not own:
            return None
    if own != case["outcome"]:
        problems.append(f"{where}.outcome is {case['outcome']!r}, its record gives {own!r}")
        return None
    return own


def recomputed_problems(data: Mapping[str, Any]) -> list[str]:
    """What in a schema-valid claim record disagrees with its own cases: the one re-derivation
    of a claim file, run whenever one is read (``testbed check``'s resume, the report,
    ``verify``, ``audit``). Each case's outcome from its numbers (its comparison, and for a
    statistical case its tests' intervals, regions and rates), the confirmations, the counts,
    the verdict from the outcomes and from the readings (each reading's counterexample
    re-derived too), ``as_expected``, and the power run's and the positive control's own
    outcomes. A record whose numbers were edited together with its outcomes re-derives: only
    measuring again (``testbed audit``) shows it."""
    problems: list[str] = []
    statistical = data["decision"] == "statistical"
    rate = data.get("case_false_fail_rate")
    rate = rate if statistical and _finite(rate) else None
    outcomes = []
    for i, case in enumerate(data["cases"]):
        outcome = _case_outcome(case, statistical, f"cases[{i}]", problems, rate)
        if outcome is None:
            return problems
        outcomes.append(outcome)
    for i, case in enumerate(data["unconfirmed"]):
        if _case_outcome(case, statistical, f"unconfirmed[{i}]", problems, rate) is None:
            return problems
    if data["n_unconfirmed"] != len(data["unconfirmed"]):
        problems.append(
            f"n_unconfirmed is {data['n_unconfirmed']}, {len(data['unconfirmed'])} "
            "unconfirmed cases are recorded"
        )
    problems += _runs_beside_problems(data, statistical)
    if problems:
        return problems
    counts = {"n_cases": outcomes.count("holds"), "n_undecided": outcomes.count("undecided")}
    for key, count in counts.items():
        if data[key] != count:
            problems.append(f"{key} is {data[key]}, the recorded cases give {count}")
    failing = outcomes.count("fails")
    if failing > 1:
        problems.append(
            f"{failing} failing cases recorded; a refuted claim records one, its counterexample"
        )
    if (failing == 1) != (data["counterexample"] is not None):
        problems.append(
            "a counterexample is recorded without a failing case"
            if failing == 0
            else "a failing case is recorded without its counterexample file"
        )
    verdict = verdict_of(outcomes, bool(data["corrects"]))
    if data["verdict"] != verdict:
        problems.append(f"verdict is {data['verdict']!r}, its recorded cases give {verdict!r}")
    readings = data.get("readings") or []
    if readings:
        problems += _readings_problems(readings, data, statistical)
    expected = data["expected_verdicts"]
    bad = [v for v in expected if v not in VERDICTS]
    if bad:
        problems.append(f"expected_verdicts holds {bad[0]!r}, not a verdict")
    elif data["as_expected"] != (data["verdict"] in expected):
        if data["verdict"] not in expected or not readings:
            problems.append(
                f"as_expected is {str(data['as_expected']).lower()}, but verdict "
                f"{data['verdict']!r} is "
                f"{'' if data['verdict'] in expected else 'not '}"
                f"among the expected {expected}"
            )
        elif readings_as_expected(readings, expected):
            problems.append(
                "as_expected is false, but the verdict and every reading's are the expected ones"
            )
    elif data["as_expected"] and readings and not readings_as_expected(readings, expected):
        problems.append("as_expected is true, but a reading's verdict is not the one it declares")
    return problems


def _readings_problems(readings: Any, data: Mapping[str, Any], statistical: bool) -> list[str]:
    """A claim read several ways: each reading's verdict from its counterexample (re-derived:
    a reading fails exactly when it records a failing case) and its case count, the claim's
    verdict over the readings, and the recorded cases being those of the reading that gives
    the verdict."""
    if not isinstance(readings, list) or not all(
        isinstance(r, dict) and r.get("verdict") in VERDICTS for r in readings
    ):
        return ["readings holds a reading without a verdict"]
    problems: list[str] = []
    for j, reading in enumerate(readings):
        where = f"readings[{j}]"
        counterexample = reading.get("counterexample")
        n_cases = reading.get("n_cases")
        if not isinstance(n_cases, int) or isinstance(n_cases, bool) or n_cases < 0:
            problems.append(f"{where}.n_cases is not a count")
            continue
        failing = False
        if counterexample is not None:
            if (
                _case_outcome(counterexample, statistical, f"{where}.counterexample", problems)
                is None
            ):
                continue
            failing = counterexample["outcome"] == "fails"
        if (reading["verdict"] == "fails as stated") != failing:
            problems.append(
                f"{where}.verdict is {reading['verdict']!r}, but it records "
                f"{'a' if failing else 'no'} failing case"
            )
        elif reading["verdict"] in ("holds", "holds once corrected") and n_cases == 0:
            problems.append(f"{where}.verdict is {reading['verdict']!r} on no case")
    if problems:
        return problems
    verdict = verdict_over_readings(r["verdict"] for r in readings)
    if data["verdict"] != verdict:
        return [f"verdict is {data['verdict']!r}, its readings give {verdict!r}"]
    chosen = next(r for r in readings if r["verdict"] == verdict)
    if chosen["n_cases"] != data["n_cases"]:
        return [
            f"n_cases is {data['n_cases']}, the reading {chosen.get('name')!r} that gives "
            f"the verdict counts {chosen['n_cases']}"
        ]
    return []


def _runs_beside_problems(data: Mapping[str, Any], statistical: bool) -> list[str]:
    """The power run (the perturbation: "caught" exactly when it was refuted, its
    counterexample re-derived) and the positive control (its case re-derived, "holds" exactly
    when its outcome is) recorded beside the verdict."""
    problems: list[str] = []
    power = data["power"]
    if power is not None:
        if power.get("verdict") not in VERDICTS:
            problems.append("power.verdict is not a verdict")
        elif power.get("caught") is not (power["verdict"] == "fails as stated"):
            problems.append(
                f"power.caught is {power.get('caught')}, its verdict is {power['verdict']!r}"
            )
        counterexample = power.get("counterexample")
        if (
            not problems
            and counterexample is not None
            and _case_outcome(counterexample, statistical, "power.counterexample", problems)
            != "fails"
        ):
            problems.append("power.counterexample is not a failing case")
    control = data["positive_control"]
    if control is not None:
        outcome = control.get("outcome")
        if control.get("holds") is not (outcome == "holds"):
            problems.append(
                f"positive_control.holds is {control.get('holds')}, its outcome is {outcome!r}"
            )
        elif isinstance(control.get("case"), dict) and outcome in OUTCOMES:
            readings = control.get("readings")
            if not readings:  # with readings its outcome is over the readings' cases
                own = _case_outcome(control["case"], statistical, "positive_control.case", problems)
                if own is not None and own != outcome:
                    problems.append(
                        f"positive_control.outcome is {outcome!r}, its case gives {own!r}"
                    )
            elif isinstance(readings, dict) and outcome != (
                "holds"
                if "holds" in readings.values()
                else "undecided"
                if "undecided" in readings.values()
                else "fails"
            ):
                problems.append(
                    f"positive_control.outcome is {outcome!r}, its readings give another"
                )
    return [p for p in problems if p]


def companion_problems(data: Mapping[str, Any], results_dir: Path, where: str) -> list[str]:
    """The companion files a claim record lists (series CSV, counterexample JSON and arrays):
    each inside the results folder and with the bytes whose digest was recorded."""
    problems = []
    files = data[FILES_KEY]
    named = {data["series_file"], *([data["counterexample"]] if data["counterexample"] else [])}
    missing = sorted(named - set(files))
    if missing:
        problems.append(f"{FILES_KEY} does not list {missing[0]}")
    for relative, digest in sorted(files.items()):
        try:
            path = inside(results_dir, relative, f"{where}: {FILES_KEY}")
        except UnsafePath as error:
            problems.append(str(error).removeprefix(f"{where}: "))
            continue
        try:
            data_bytes = path.read_bytes()
        except OSError as error:
            problems.append(f"{relative} cannot be read ({error.strerror or error})")
            continue
        if file_digest(data_bytes) != digest:
            problems.append(f"{relative} differs from the file this result was written with")
        elif relative == data["counterexample"]:
            problems += _counterexample_problems(data_bytes, data, relative)
    return problems


def _counterexample_problems(data: bytes, claim: Mapping[str, Any], relative: str) -> list[str]:
    """A counterexample file's content against :data:`COUNTEREXAMPLE_SCHEMA`: the failing case
    of ``claim``'s record, re-derived, and the very case the record lists as failing."""
    import json

    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        return [f"{relative} is not JSON ({error})"]
    problems = field_problems(record, COUNTEREXAMPLE_SCHEMA, relative)
    if problems:
        return problems
    if record["claim"] != claim["claim"] or record["outcome"] != "fails":
        return [f"{relative} is not a failing case of {claim['claim']}"]
    if _case_outcome(record, record["decision"] == "statistical", relative, problems) is None:
        return problems
    failing = [c for c in claim["cases"] if c.get("outcome") == "fails"]
    if not failing or any(record.get(k) != failing[0].get(k) for k in CASE_SCHEMA):
        return [f"{relative} is not the failing case the claim file records"]
    return []


def claim_file_problem(
    data: Any, results_dir: Path | None = None, stem: str | None = None
) -> str | None:
    """Why the claim results record ``data`` (read from ``claims/<stem>.json`` under
    ``results_dir``) cannot be believed, or ``None``: see the module docstring. Without
    ``results_dir`` the companion files are not checked."""
    problems = field_problems(data, CLAIM_RESULT_SCHEMA)
    if not problems:
        if stem is not None and data["id"] != stem:
            problems.append(f"id is {data['id']!r} but the file is named {stem}.json")
        for key in ("estimators", "expected_verdicts"):
            if not all(isinstance(v, str) for v in data[key]):
                problems.append(f"{key} holds a value that is not a string")
        for j, fit in enumerate(data["fits"]):
            problems.extend(field_problems(fit, FIT_SCHEMA, f"fits[{j}]"))
        problems += computed_by_problems(data)
        if not problems:
            problems = recomputed_problems(data)
    if not problems:
        sealed = seal_problem(data)
        if sealed is not None:
            problems.append(sealed)
    if not problems and results_dir is not None:
        problems = companion_problems(
            data, Path(results_dir), f"{CLAIMS}/{stem or data['id']}.json"
        )
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0] + more


def computed_by_problems(data: Mapping[str, Any]) -> list[str]:
    """``computed_by`` (the commit and device that computed a record; absent from records
    written before it existed) must be an object of strings."""
    found = data.get("computed_by")
    if found is None or (
        isinstance(found, dict)
        and all(isinstance(found.get(k), str) for k in ("git_commit", "device"))
    ):
        return []
    return [
        kind_problem(found, "object", "computed_by")
        or "computed_by is not an object with the strings git_commit and device"
    ]


#: The start of :func:`read_claim_file`'s reason for a file of ``claims/`` that holds no claim
#: result at all (a list, or an object with none of :data:`CLAIM_MARKS`): a foreign file
#: (notes, another tool's output), which the report names and leaves out of its counts unless
#: a claim of that name is registered (then it is a damaged claim file).
NOT_A_CLAIM_RESULT = "not a claim result"
#: Keys of which a claim result holds at least one, however damaged.
CLAIM_MARKS: tuple[str, ...] = ("id", "claim", "verdict", "cases")


def read_claim_file(path: Path, results_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``claims/<run_id>.json`` read and checked: ``(record, None)`` when it can be believed,
    ``(None, reason)`` when not (unreadable, not a claim result, or
    :func:`claim_file_problem`)."""
    import json

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        return None, f"unreadable ({type(error).__name__}: {reason})"
    if not isinstance(data, dict):
        return None, f"{NOT_A_CLAIM_RESULT} (a JSON {type(data).__name__})"
    if not any(key in data for key in CLAIM_MARKS):
        return None, f"{NOT_A_CLAIM_RESULT} (an object without {', '.join(CLAIM_MARKS)})"
    problem = claim_file_problem(data, results_dir, Path(path).stem)
    if problem is not None:
        return None, f"not trusted: {problem}"
    return data, None


def untrusted_claim_files(results_dir: Path) -> list[tuple[Path, str]]:
    """Every ``claims/*.json`` under ``results_dir`` that cannot be believed, with the reason
    (:func:`read_claim_file`); ``testbed check`` reruns those claims, the report shows them
    "not trusted"."""
    bad = []
    for path in sorted((Path(results_dir) / CLAIMS).glob("*.json")):
        _, reason = read_claim_file(path, results_dir)
        if reason is not None:
            bad.append((path, reason))
    return bad


__all__ = [
    "ABOUTS",
    "ABOUT_RESULT",
    "ABOUT_SENTENCE",
    "ABOUT_STEP",
    "ABOUT_TABLE",
    "CASE_SCHEMA",
    "CLAIM_MARKS",
    "CLAIM_RESULT_SCHEMA",
    "COMPARISON_RULES",
    "COMPARISON_SCHEMA",
    "COUNTEREXAMPLE_SCHEMA",
    "DECISIONS",
    "DECISION_SCHEMA",
    "ERRATUM",
    "FILES_KEY",
    "FIT_SCHEMA",
    "NOT_A_CLAIM_RESULT",
    "OUTCOMES",
    "REFUTATION_CLASSES",
    "SERIES_COLUMNS_READ",
    "SUBSTANTIVE",
    "TABLE_NUMBER",
    "VERDICTS",
    "added_parameters_text",
    "claim_file_problem",
    "combine",
    "companion_problems",
    "comparison_for",
    "comparison_holds",
    "comparison_problem",
    "computed_by_problems",
    "interval_outcome",
    "interval_problem",
    "read_claim_file",
    "reading_as_expected",
    "readings_as_expected",
    "readings_text",
    "recomputed_problems",
    "refutation_class",
    "refutation_counts",
    "untrusted_claim_files",
    "verdict_of",
    "verdict_over_readings",
]

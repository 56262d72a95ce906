"""A claim record re-derived from its own cases: what a schema-valid file must agree with.

Every reader of a ``claims/<run_id>.json`` (the resume of ``testbed check``, the report,
``testbed verify``, ``testbed audit``) runs :func:`recomputed_problems` before it believes the
file: each case's outcome from its numbers (its comparison, :func:`comparison_problem`; for a
statistical case its tests' intervals, regions and rates, :func:`interval_problem`), the
confirmations, the counts, the verdict from the outcomes and from the readings, ``as_expected``,
and the power run's and the positive control's own outcomes, each with the rules of
:mod:`results_format.verdicts`. Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

from results_format.claim_schema import CASE_SCHEMA
from results_format.claim_schema import COMPARISON_SCHEMA
from results_format.claim_schema import DECISION_SCHEMA
from results_format.claim_schema import FIT_SCHEMA
from results_format.validation import field_problems
from results_format.verdicts import OUTCOMES
from results_format.verdicts import VERDICTS
from results_format.verdicts import combine
from results_format.verdicts import comparison_holds
from results_format.verdicts import interval_outcome
from results_format.verdicts import readings_as_expected
from results_format.verdicts import verdict_of
from results_format.verdicts import verdict_over_readings


def _finite(*values: Any) -> bool:
    return all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values
    )


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


def case_outcome(
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
        own: str | None = "holds" if case["passed"] else "fails"
    else:
        own = _tests_outcome(case, decisions, where, problems, rate)
        if own is None:
            return None
    confirmation = case.get("confirmation")
    if confirmation is not None:
        if own != "fails":
            problems.append(
                f"{where}: a confirmation is recorded for a first stage that did not fail"
            )
            return None
        own = case_outcome(confirmation, statistical, f"{where}.confirmation", problems, rate) or ""
        if not own:
            return None
    if own != case["outcome"]:
        problems.append(f"{where}.outcome is {case['outcome']!r}, its record gives {own!r}")
        return None
    return own


def _tests_outcome(
    case: Mapping[str, Any],
    decisions: list[Any],
    where: str,
    problems: list[str],
    rate: float | None,
) -> str | None:
    """A statistical case's first-stage outcome from its tests: each test's outcome from its
    interval and region, its interval from its statistic at its share of ``rate``, combined;
    "fails" when the case's deterministic parts failed (``passed`` false). ``None``, with the
    problem added, when a test does not fit."""
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
    return combine(outcomes) if case["passed"] else "fails"


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
        outcome = case_outcome(case, statistical, f"cases[{i}]", problems, rate)
        if outcome is None:
            return problems
        outcomes.append(outcome)
    for i, case in enumerate(data["unconfirmed"]):
        if case_outcome(case, statistical, f"unconfirmed[{i}]", problems, rate) is None:
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
                case_outcome(counterexample, statistical, f"{where}.counterexample", problems)
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
            and case_outcome(counterexample, statistical, "power.counterexample", problems)
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
                own = case_outcome(control["case"], statistical, "positive_control.case", problems)
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


__all__ = ["comparison_problem", "interval_problem", "recomputed_problems", "case_outcome"]

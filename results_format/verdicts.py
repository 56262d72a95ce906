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
from typing import Any

from results_format.layout import CLAIMS
from results_format.paths import UnsafePath, inside
from results_format.validation import field_problems, file_digest, seal_problem

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
    "id": "str", "claim": "str", "estimator": "str", "paper": "str", "reference": "str",
    "kind": "str", "about": ABOUTS, "serves": "str|null", "power_from": "list",
    "statement": "str",
    "estimators": "list", "corrects": "str|null",
    "expected": "str", "expected_verdicts": "list", "verdict": VERDICTS, "as_expected": "bool",
    "decision": DECISIONS, "profile": "str", "fingerprint": "str", "n_cases": "count",
    "n_undecided": "count", "n_unconfirmed": "count", "n_rejected": "count",
    "seconds": "finite", "counterexample": "str|null", "cases": "list", "unconfirmed": "list",
    "fits": "list", "series_file": "str", "power": "object|null",
    "positive_control": "object|null", FILES_KEY: "object",
}
#: One recorded case (``cases[i]``; also a confirmation, a counterexample file's body).
CASE_SCHEMA: dict[str, Any] = {
    "problem_id": "str", "spec": "object", "params": "object", "measured": "number",
    "bound": "number", "passed": "bool", "relation": "str", "outcome": OUTCOMES,
    "fit": "object|null", "details": "object",
}
#: One statistical test's decision (``cases[i].decisions[j]``). Interval ends may be infinite
#: (an open side of the region) or not finite at all (then the test is undecided).
DECISION_SCHEMA: dict[str, Any] = {
    "quantity": "str", "estimate": "float|null", "low": "float|null", "high": "float|null",
    "region_low": "number", "region_high": "number", "rate": "finite", "outcome": OUTCOMES,
}
#: A fit (``cases[i].fit``, ``fits[j]``).
FIT_SCHEMA: dict[str, Any] = {
    "quantity": "str", "estimate": "finite", "ci_low": "number|null", "ci_high": "number|null",
    "theory": "finite", "tolerance": "number",
}
#: ``counterexamples/<run_id>.json``: the failing case, with the claim it refutes.
COUNTEREXAMPLE_SCHEMA: dict[str, Any] = {"claim": "str", "profile": "str",
                                         "decision": DECISIONS, **CASE_SCHEMA}
#: The columns of ``series/<run_id>.csv`` that the report reads.
SERIES_COLUMNS_READ: tuple[str, ...] = ("problem_id", "series", "step", "value")


# --------------------------------------------------------------------------- the rules


def _finite(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in values)


def interval_outcome(low: Any, high: Any, estimate: Any, region_low: float,
                     region_high: float) -> str:
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


def _case_outcome(case: dict[str, Any], statistical: bool, where: str,
                  problems: list[str]) -> str | None:
    """The outcome ``case``'s own record gives (its decisions, its comparison, its
    confirmation), adding to ``problems`` what does not fit; ``None`` when it cannot be told."""
    found = field_problems(case, CASE_SCHEMA, where)
    if found:
        problems.extend(found)
        return None
    measured = case["measured"]
    if not math.isfinite(measured) and case["outcome"] != "fails":
        problems.append(f"{where}.measured is {measured}, a case that holds or is undecided "
                        "measures a finite number")
    fit = case["fit"]
    if fit is not None:
        problems.extend(field_problems(fit, FIT_SCHEMA, f"{where}.fit"))
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
            outcome = interval_outcome(decision["low"], decision["high"], decision["estimate"],
                                       decision["region_low"], decision["region_high"])
            if outcome != decision["outcome"]:
                problems.append(f"{label}.outcome is {decision['outcome']!r}, its interval "
                                f"gives {outcome!r}")
                return None
            outcomes.append(outcome)
        if case["passed"] and not decisions:
            problems.append(f"{where}: a statistical case that passed records no test")
            return None
        own = combine(outcomes) if case["passed"] else "fails"
    confirmation = case.get("confirmation")
    if confirmation is not None:
        if own != "fails":
            problems.append(f"{where}: a confirmation is recorded for a first stage that did "
                            "not fail")
            return None
        own = _case_outcome(confirmation, statistical, f"{where}.confirmation", problems) or ""
        if not own:
            return None
    if own != case["outcome"]:
        problems.append(f"{where}.outcome is {case['outcome']!r}, its record gives {own!r}")
        return None
    return own


def recomputed_problems(data: Mapping[str, Any]) -> list[str]:
    """What in a schema-valid claim record disagrees with its own cases: each case's outcome
    (from its tests or comparison), the counts, the verdict and ``as_expected``."""
    problems: list[str] = []
    statistical = data["decision"] == "statistical"
    outcomes = []
    for i, case in enumerate(data["cases"]):
        outcome = _case_outcome(case, statistical, f"cases[{i}]", problems)
        if outcome is None:
            return problems
        outcomes.append(outcome)
    for i, case in enumerate(data["unconfirmed"]):
        if _case_outcome(case, statistical, f"unconfirmed[{i}]", problems) is None:
            return problems
    counts = {"n_cases": outcomes.count("holds"), "n_undecided": outcomes.count("undecided")}
    for key, count in counts.items():
        if data[key] != count:
            problems.append(f"{key} is {data[key]}, the recorded cases give {count}")
    failing = outcomes.count("fails")
    if failing > 1:
        problems.append(f"{failing} failing cases recorded; a refuted claim records one, its "
                        "counterexample")
    if (failing == 1) != (data["counterexample"] is not None):
        problems.append("a counterexample is recorded without a failing case" if failing == 0
                        else "a failing case is recorded without its counterexample file")
    verdict = verdict_of(outcomes, bool(data["corrects"]))
    if data["verdict"] != verdict:
        problems.append(f"verdict is {data['verdict']!r}, its recorded cases give {verdict!r}")
    readings = data.get("readings") or []
    if readings:
        if not all(isinstance(r, dict) and r.get("verdict") in VERDICTS for r in readings):
            problems.append("readings holds a reading without a verdict")
        elif data["verdict"] != verdict_over_readings(r["verdict"] for r in readings):
            problems.append(f"verdict is {data['verdict']!r}, its readings give "
                            f"{verdict_over_readings(r['verdict'] for r in readings)!r}")
    expected = data["expected_verdicts"]
    bad = [v for v in expected if v not in VERDICTS]
    if bad:
        problems.append(f"expected_verdicts holds {bad[0]!r}, not a verdict")
    elif data["as_expected"] != (data["verdict"] in expected):
        problems.append(f"as_expected is {str(data['as_expected']).lower()}, but verdict "
                        f"{data['verdict']!r} is {'' if data['verdict'] in expected else 'not '}"
                        f"among the expected {expected}")
    return problems


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
            problems += _counterexample_problems(data_bytes, data["claim"], relative)
    return problems


def _counterexample_problems(data: bytes, claim: str, relative: str) -> list[str]:
    """A counterexample file's content against :data:`COUNTEREXAMPLE_SCHEMA`: the failing case
    of ``claim``."""
    import json

    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        return [f"{relative} is not JSON ({error})"]
    problems = field_problems(record, COUNTEREXAMPLE_SCHEMA, relative)
    if not problems and (record["claim"] != claim or record["outcome"] != "fails"):
        problems.append(f"{relative} is not a failing case of {claim}")
    return problems


def claim_file_problem(data: Any, results_dir: Path | None = None,
                       stem: str | None = None) -> str | None:
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
        if not problems:
            problems = recomputed_problems(data)
    if not problems:
        sealed = seal_problem(data)
        if sealed is not None:
            problems.append(sealed)
    if not problems and results_dir is not None:
        problems = companion_problems(data, Path(results_dir),
                                      f"{CLAIMS}/{stem or data['id']}.json")
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0] + more


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
        return None, f"not a claim result (a JSON {type(data).__name__})"
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


__all__ = ["ABOUTS", "ABOUT_RESULT", "ABOUT_SENTENCE", "ABOUT_STEP", "ABOUT_TABLE", "CASE_SCHEMA",
           "CLAIM_RESULT_SCHEMA", "COUNTEREXAMPLE_SCHEMA", "DECISIONS", "DECISION_SCHEMA",
           "ERRATUM", "FILES_KEY", "FIT_SCHEMA", "OUTCOMES", "REFUTATION_CLASSES",
           "SERIES_COLUMNS_READ", "SUBSTANTIVE", "TABLE_NUMBER", "VERDICTS", "claim_file_problem",
           "combine", "companion_problems", "interval_outcome", "read_claim_file",
           "recomputed_problems", "refutation_class", "refutation_counts",
           "untrusted_claim_files", "verdict_of", "verdict_over_readings"]

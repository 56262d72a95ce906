"""The schema of a claim's results file, ``claims/<run_id>.json``, and of its companions.

Each schema maps a key to its kinds (:mod:`results_format.validation`); the claim file's
typed record is :mod:`results_format.claim_record`, its checks
:mod:`results_format.claim_checks` (the recomputed outcomes and verdict) and
:mod:`results_format.claim_file` (the whole file, its seal and companions).
Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

from typing import Any

from results_format.verdicts import ABOUTS
from results_format.verdicts import COMPARISON_RULES
from results_format.verdicts import DECISIONS
from results_format.verdicts import OUTCOMES
from results_format.verdicts import VERDICTS

#: The key of the companion files' digests in a claim's results file.
FILES_KEY = "files"

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
#: rule (:data:`~results_format.verdicts.COMPARISON_RULES`) and the check's round-off slack.
COMPARISON_SCHEMA: dict[str, Any] = {
    "rule": COMPARISON_RULES,
    "slack": "finite",
}
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

__all__ = [
    "CASE_SCHEMA",
    "CLAIM_RESULT_SCHEMA",
    "COMPARISON_SCHEMA",
    "COUNTEREXAMPLE_SCHEMA",
    "DECISION_SCHEMA",
    "FILES_KEY",
    "FIT_SCHEMA",
    "SERIES_COLUMNS_READ",
]

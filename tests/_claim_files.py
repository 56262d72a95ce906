"""Claim results files written by tests the way ``theory_checks.claim_results`` writes them.

The report believes a claim file only when it passes ``results_format.verdicts``' checks (its
schema, a verdict recomputed from its own cases, its companion files' digests and its seal), so a
test that builds a small results folder by hand states the parts it cares about and lets
:func:`write_claim_file` fill in the rest consistently.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from results_format.validation import file_digest
from results_format.validation import seal
from results_format.verdicts import comparison_for
from theory_checks.calibration import CALIBRATION_CONFIDENCE
from theory_checks.claim_results import SERIES_COLUMNS
from theory_checks.decision import clopper_pearson

#: What a test's expected word means as a verdict (``holds`` of a correction: once corrected).
_EXPECTED = {"holds": "holds", "fails": "fails as stated"}


def _expected_verdicts(record: dict[str, Any]) -> list[str]:
    word = _EXPECTED.get(record.get("expected", "holds"), "holds")
    if word == "holds" and record.get("corrects"):
        word = "holds once corrected"
    if record.get("as_expected", True) and record["verdict"] != word:
        return [record["verdict"]]
    return [word]


def write_claim_file(results: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as ``results/claims/<id>.json``: the keys it leaves out filled from its
    cases (each case's outcome from ``passed`` and its comparison as the writer records it,
    the counts, the decision, the expected verdicts), its counterexample file written from its
    failing case, the digests of its series and counterexample files as they are on disk, and
    its seal. Companion files a test
    wants present must exist before this call; a missing series file stays missing (and the
    report does not trust the claim)."""
    record: dict[str, Any] = {
        "claim": data["id"].split("@")[0],
        "estimator": (data.get("estimators") or [""])[0],
        "decision": "deterministic",
        "n_unconfirmed": 0,
        "unconfirmed": [],
        "power": None,
        "positive_control": None,
        **data,
    }
    record["cases"] = [recorded(case) for case in record["cases"]]
    control = record.get("positive_control")
    if isinstance(control, dict) and isinstance(control.get("case"), dict):
        record["positive_control"] = {**control, "case": recorded(control["case"])}
    outcomes = [case["outcome"] for case in record["cases"]]
    record.setdefault("n_cases", outcomes.count("holds"))
    record.setdefault("n_undecided", outcomes.count("undecided"))
    record.setdefault("expected_verdicts", _expected_verdicts(record))
    files: dict[str, str] = {}
    if record.get("counterexample"):
        failing = next(case for case in record["cases"] if case["outcome"] == "fails")
        path = results / record["counterexample"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "claim": record["claim"],
                    "profile": record["profile"],
                    "decision": record["decision"],
                    **failing,
                }
            )
        )
    for relative in (record["series_file"], record.get("counterexample")):
        if relative:
            for path in (results / relative, (results / relative).with_suffix(".npz")):
                if path.is_file():
                    files[path.relative_to(results).as_posix()] = file_digest(path.read_bytes())
    record.setdefault("files", files)
    target = results / "claims" / f"{record['id']}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(seal(record)))
    return target


def recorded(case: dict[str, Any]) -> dict[str, Any]:
    """A case of :func:`case_record` as the runner records it: its outcome from ``passed`` and
    its comparison (how ``passed`` follows from its numbers) added where the case leaves them
    out."""
    return {
        "outcome": "holds" if case["passed"] else "fails",
        "comparison": comparison_for(
            case["relation"], case["measured"], case["bound"], case["passed"], 0.0, case["fit"]
        ),
        **case,
    }


def calibration_row(
    claim: str, expected: str, refuted: int, undecided: int, seeds: int = 20
) -> dict[str, Any]:
    """One claim's row of ``calibration/summary.json`` (stated rate 1e-3, consistent) as a test
    states it, with the interval ``testbed calibrate`` gives ``refuted`` of ``seeds`` (95%
    Clopper-Pearson, :func:`theory_checks.decision.clopper_pearson`);
    :func:`write_calibration_summary` fills in the rest."""
    rate_low, rate_high = clopper_pearson(refuted, seeds, (1.0 - CALIBRATION_CONFIDENCE) / 2.0)
    return {
        "claim": claim,
        "expected": expected,
        "seeds": seeds,
        "refuted": refuted,
        "undecided": undecided,
        "rate_low": rate_low,
        "rate_high": rate_high,
        "stated_rate": 1e-3,
        "consistent": True,
    }


def write_calibration_summary(
    results: Path, rows: list[dict[str, Any]], seeds: int = 20, profile: str = "fast"
) -> Path:
    """Write ``results/calibration/summary.json`` of ``rows`` (:func:`calibration_row`) as
    ``testbed calibrate --seeds SEEDS`` does, with the per-claim records it summarizes
    (``calibration/<claim>.json``, sealed): each row's verdict counts (the refuted and
    undecided seeds, the rest the expected verdict), its false failures, profile and time filled
    in where the test leaves them out, and the seal."""
    summary = {"profile": profile, "seeds": seeds, "claims": rows}
    rows = []
    for row in summary["claims"]:
        settled = "holds" if row["expected"] == "holds" else "fails as stated"
        counts = {"fails as stated": row["refuted"], "undecided": row["undecided"]}
        counts[settled] = counts.get(settled, 0) + row["seeds"] - row["refuted"] - row["undecided"]
        rows.append(
            {
                "profile": summary["profile"],
                "seconds": 1.0,
                "false_failures": row["refuted"] if row["expected"] == "holds" else 0,
                "verdicts": {k: v for k, v in counts.items() if v},
                **row,
            }
        )
    record = {"confidence": 0.95, **summary, "claims": rows}
    for row in rows:  # the per-claim records the summary is recomputed from
        verdicts = [v for v, n in row["verdicts"].items() for _ in range(n)]
        runs = [
            {"seed": k, "verdict": v, "n_undecided": 0, "n_unconfirmed": 0, "seconds": 1.0}
            for k, v in enumerate(verdicts)
        ]
        path = results / "calibration" / f"{row['claim']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                seal(
                    {
                        "claim": row["claim"],
                        "fingerprint": "0" * 16,
                        "profile": row["profile"],
                        "runs": runs,
                    }
                )
            )
        )
    target = results / "calibration" / "summary.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(seal(record)))
    return target


def case_record(
    pid: str,
    measured: float,
    bound: float,
    passed: bool,
    relation: str = "<=",
    fit: dict | None = None,
) -> dict:
    """One recorded case of a deterministic claim, its keys as the runner writes them but the
    outcome (:func:`write_claim_file` adds it)."""
    return {
        "problem_id": pid,
        "spec": {"seed": 0},
        "params": {"point_seed": 0},
        "measured": measured,
        "bound": bound,
        "passed": passed,
        "relation": relation,
        "fit": fit,
        "details": {},
    }


def claim_record(
    cid: str,
    paper: str,
    kind: str,
    verdict: str,
    cases: list[dict],
    fits: list[dict] | None = None,
    counterexample: str | None = None,
    **fields: Any,
) -> dict:
    """A claim's results record of the toy paper ``paper`` (on aid-neumann, fast profile), with
    ``fields`` set over its keys; :func:`write_claim_file` fills in what it leaves out."""
    return {
        "id": cid,
        "paper": paper,
        "reference": f"{paper} Lemma 1",
        "kind": kind,
        "about": "stated result",
        "serves": None,
        "power_from": [],
        "statement": "||e_N|| <= C q^N",
        "estimators": ["aid-neumann"],
        "corrects": None,
        "expected": "fails" if verdict == "fails as stated" else "holds",
        "notes": "",
        "verdict": verdict,
        "as_expected": True,
        "profile": "fast",
        "fingerprint": "0" * 16,
        "n_rejected": 0,
        "seconds": 0.1,
        "counterexample": counterexample,
        "cases": cases,
        "fits": fits or [],
        "series_file": f"series/{cid}.csv",
        **fields,
    }


def refutation(cid: str, paper: str, kind: str, cases: list[dict], **fields: Any) -> dict:
    """A claim's record that fails as stated on ``cases`` (one of them failing), its
    counterexample saved as ``counterexamples/<cid>.json`` (:func:`claim_record`)."""
    return claim_record(
        cid,
        paper,
        kind,
        "fails as stated",
        cases,
        counterexample=f"counterexamples/{cid}.json",
        **fields,
    )


def correction(cid: str, corrects: str, case: dict, **fields: Any) -> dict:
    """A FedNest bias bound that holds once corrected on its one ``case``, the correction of
    claim ``corrects`` (:func:`claim_record`)."""
    return claim_record(
        cid, "FedNest", "bias_bound", "holds once corrected", [case], corrects=corrects, **fields
    )


def write_series(path: Path, cid: str, estimator: str, rows: list[tuple]) -> None:
    """``series/<cid>.csv`` in the runner's columns; rows: (problem_id, series, step_name, step,
    value, oracle_calls)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SERIES_COLUMNS)
        for pid, series, step_name, step, value, oracle in rows:
            writer.writerow(
                [
                    cid,
                    estimator,
                    pid,
                    0,
                    '{"point_seed": 0}',
                    series,
                    step_name,
                    step,
                    value,
                    oracle,
                    0,
                ]
            )


def register_unchecked(
    results: Path,
    cid: str,
    paper: str = "FedNest",
    kind: str = "bias_bound",
    estimator: str = "fedihgp",
    **entries: Any,
) -> None:
    """Record ``cid`` in ``metadata.json``'s ``claims_registered`` (a claim the registry holds
    and the run did not check), with ``entries`` added to its row."""
    meta = json.loads((results / "metadata.json").read_text())
    meta["claims_registered"] = [
        {
            "id": cid,
            "paper": paper,
            "reference": "r",
            "kind": kind,
            "statement": "s",
            "estimators": [estimator],
            "expected": "holds",
            **entries,
        }
    ]
    (results / "metadata.json").write_text(json.dumps(meta))

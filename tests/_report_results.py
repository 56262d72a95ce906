"""A tiny results folder of five claims in the layout ``theory_checks.runner`` writes: what the
report tests build their pages from (tests/test_report.py, tests/test_report_glance.py,
tests/test_report_libraries.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests._claim_files import case_record
from tests._claim_files import claim_record
from tests._claim_files import refutation
from tests._claim_files import write_claim_file
from tests._claim_files import write_series

FAILING = "fednest.toy.bias_bound"  # fails as stated, with a counterexample
BOUND = "classical.toy.error_bound"  # measured against a bound, with oracle calls
RATE = "classical.toy.linear_rate"  # fitted and theoretical rates
NO_FILE = "classical.toy.identity_no_file"  # series file missing
EMPTY = "classical.toy.identity_empty"  # series file with a header only
CLAIMS = (FAILING, BOUND, RATE, NO_FILE, EMPTY)


def make_results(root: Path) -> Path:
    """A tiny results directory in the layout that theory_checks.runner writes."""
    (root / "claims").mkdir(parents=True)
    (root / "metadata.json").write_text(
        json.dumps(
            {
                "git_commit": "abc123",
                "versions": {"python": "3.11", "numpy": "2.0"},
                "profile": {"name": "fast", "max_examples": 8},
                "hypothesis": "derandomize=True",
                "written": "2026-01-01T00:00:00",
            }
        )
    )
    _write_series_files(root)
    # after the series files: a claim file records their digests
    for data in _claim_records().values():
        write_claim_file(root, data)
    (root / "series" / f"{NO_FILE}.csv").unlink()  # lost after the claim file was written
    return root


def _claim_records() -> dict[str, dict]:
    """The records of :data:`CLAIMS`: a refutation, a bound, a fitted rate, two identities."""
    fit = {
        "quantity": "log error per step",
        "estimate": -0.69,
        "ci_low": -0.70,
        "ci_high": -0.68,
        "theory": -0.693,
        "tolerance": 0.035,
        "confidence": 0.95,
    }
    identity = [case_record("p.a", 1e-16, 1e-10, True)]
    return {
        FAILING: refutation(
            FAILING,
            "FedNest",
            "bias_bound",
            [case_record("p.a", 0.1, 0.2, True), case_record("p.b", 0.9, 0.3, False)],
        ),
        BOUND: claim_record(
            BOUND,
            "Classical",
            "bias_bound",
            "holds",
            [
                case_record("p.a", 0.1, 0.5, True),
                case_record("p.b", 0.3, 0.4, True),
                case_record("p.c", 1e-16, 0.0, True),
            ],
        ),
        RATE: claim_record(
            RATE,
            "Classical",
            "linear_rate",
            "holds",
            [case_record("p.a", -0.69, -0.693, True, "|fit - theory| <=", fit)],
            fits=[fit | {"problem_id": "p.a"}],
        ),
        NO_FILE: claim_record(NO_FILE, "Classical", "exact_identity", "holds", identity),
        EMPTY: claim_record(EMPTY, "Classical", "exact_identity", "holds", identity),
    }


def _write_series_files(root: Path) -> None:
    """The claims' series: two problems of the refutation, three of the bound (one bound 0), the
    rate's measured, fitted and theory series, and header-only files of the identities."""
    # The failing claim uses an estimator with no entry in STYLES (fallback colour).
    write_series(
        root / "series" / f"{FAILING}.csv",
        FAILING,
        "toy-estimator",
        [
            (pid, series, "neumann_terms", n, value, n)
            for pid, scale in (("p.a", 1.0), ("p.b", 3.0))
            for n in range(1, 6)
            for series, value in (("measured", scale * 0.5**n), ("bound", 0.5**n))
        ],
    )
    write_series(
        root / "series" / f"{BOUND}.csv",
        BOUND,
        "aid-neumann",
        [
            (pid, series, "neumann_terms", n, value, 2 * n)
            for pid in ("p.a", "p.b", "p.c")
            for n in range(1, 8)
            for series, value in (
                ("measured", f"np.float64({0.3 * 0.6**n!r})"),
                ("bound", 0.0 if pid == "p.c" else 0.6**n),
            )
        ],
    )
    write_series(
        root / "series" / f"{RATE}.csv",
        RATE,
        "aid-cg",
        [
            ("p.a", series, "iteration", t, value, t if series == "measured" else 0)
            for t in range(10)
            for series, value in (
                ("measured", 0.5**t),
                ("fitted", 0.98 * 0.5**t),
                ("theory", 0.5**t),
            )
        ],
    )
    for cid in (EMPTY, NO_FILE):
        write_series(root / "series" / f"{cid}.csv", cid, "aid-neumann", [])

"""A claim's results file is one typed record (results_format/claim_record.py), shared by the
writer and the readers.

The claim runner builds a :class:`ClaimRecord` and writes its JSON; the report parses a checked
file into the same record once and reads attributes, not string keys. The files must keep the
bytes they had before the record existed (the resume and ``testbed audit`` compare them, and a
results folder written before must still read), so a record read from a file and written again
gives the file's bytes, key order included.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.figure_spec import KIND_LABELS
from results_format.claim_file import read_claim_record
from results_format.claim_kinds import BOUND_KINDS
from results_format.claim_kinds import CLAIM_KINDS
from results_format.claim_kinds import RATE_KINDS
from results_format.claim_kinds import RATE_LAWS
from results_format.claim_record import CaseRecord
from results_format.claim_record import ClaimRecord
from results_format.claim_record import ControlRecord
from results_format.claim_record import FitRecord
from results_format.claim_record import PowerRecord
from results_format.claim_record import ReadingRecord
from results_format.summary_records import CalibrationSummary
from results_format.summary_records import CommunicationTable
from results_format.summary_records import MutationSummary
from results_format.summary_records import ResultsMetadata
from testbed_app.cli import main
from theory_checks import claim as claim_module
from theory_checks.registry import CLAIM_DB

#: a claim that holds (its perturbation caught) and one that fails as stated under two readings
#: (its counterexample saved): between them every part of the record is written
CLAIMS = ("classical.cg.exact_after_dim_y", "aggitd.alg1.as_printed")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("results")
    argv = ["check", "--claim", *CLAIMS, "--claims-only", "--quiet", "--results", str(results)]
    assert main(argv) == 0
    return results


def test_a_written_claim_file_is_its_record_and_back(written) -> None:
    paths = sorted((written / "claims").glob("*.json"))
    assert {p.stem for p in paths} == set(CLAIMS)
    for path in paths:
        text = path.read_text()
        record = ClaimRecord.from_json(json.loads(text))
        assert json.dumps(record.to_json(), indent=2) == text, path.name
        assert record.extra == {}, f"{path.name}: keys the record does not declare"


def test_the_report_reads_typed_parts(written) -> None:
    holds, _ = read_claim_record(written / "claims" / f"{CLAIMS[0]}.json", written)
    fails, _ = read_claim_record(written / "claims" / f"{CLAIMS[1]}.json", written)
    assert holds is not None and fails is not None
    assert holds.verdict == "holds" and holds.measured and holds.n_cases == len(holds.cases) > 0
    assert all(isinstance(c, CaseRecord) for c in holds.cases)
    assert isinstance(holds.power, PowerRecord) and holds.power.caught is True
    assert fails.verdict == "fails as stated" and fails.counterexample
    assert [type(r) for r in fails.readings] == [ReadingRecord] * len(fails.readings) != []
    assert all(r.counterexample is not None for r in fails.readings)
    failing = [c for c in fails.cases if c.outcome == "fails"]
    assert len(failing) == 1 and failing[0].hypotheses and failing[0].hypotheses[0].name


def test_a_file_that_is_not_believed_gives_no_record(written, tmp_path) -> None:
    path = written / "claims" / f"{CLAIMS[0]}.json"
    data = json.loads(path.read_text())
    data["n_cases"] += 1
    edited = tmp_path / "claims" / path.name
    edited.parent.mkdir()
    edited.write_text(json.dumps(data, indent=2))
    record, reason = read_claim_record(edited, written)
    assert record is None and reason is not None and reason.startswith("not trusted: n_cases")


def test_optional_keys_are_written_as_the_writer_always_did() -> None:
    # a case's tests and margins are left out when there are none ...
    case = CaseRecord(problem_id="p", outcome="holds")
    assert "decisions" not in case.to_json() and "hypotheses" not in case.to_json()
    assert "confirmation" not in case.to_json() and case.to_json()["fit"] is None
    # ... a control outside the hypotheses lists its margins even when none were measured
    control = ControlRecord(outcome="outside hypotheses", holds=False, reason="r", hypotheses=())
    assert control.to_json()["hypotheses"] == []
    assert "case" not in control.to_json() and "readings" not in control.to_json()
    # a fit names its problem only in the claim's list of fits
    assert "problem_id" not in FitRecord(quantity="q").to_json()
    # added parameters: absent when the claim declares none, written even when empty
    assert "added_parameters" not in ClaimRecord().to_json()
    assert ClaimRecord(added_parameters=()).to_json()["added_parameters"] == []


def test_keys_a_record_does_not_declare_are_kept_after_the_declared_ones() -> None:
    data = {"newer": 1, "problem_id": "p", "outcome": "fails"}
    case = CaseRecord.from_json(data)
    assert case.extra == {"newer": 1} and case.problem_id == "p"
    assert list(case.to_json())[-1] == "newer"


def test_a_row_without_results_keeps_the_claims_words_only() -> None:
    entry = {"id": "x.y.z", "paper": "P", "kind": "bias_bound", "builtin": False, "cases": [1]}
    row = ClaimRecord.words_only("x.y.z", "not trusted", entry, "edited")
    assert (row.id, row.paper, row.kind, row.verdict) == ("x.y.z", "P", "bias_bound", "not trusted")
    assert row.builtin is False and row.trust_problem == "edited"
    assert row.cases == () and not row.measured
    assert "builtin" not in row.to_json() and "trust_problem" not in row.to_json()


def test_claim_kinds_are_declared_once() -> None:
    assert claim_module.CLAIM_KINDS is CLAIM_KINDS
    assert {c.kind for c in CLAIM_DB} <= set(CLAIM_KINDS)
    assert set(RATE_KINDS) == set(RATE_LAWS) <= set(BOUND_KINDS) <= set(CLAIM_KINDS)
    # the report has a y label for every kind
    assert set(KIND_LABELS) == set(CLAIM_KINDS)


def test_the_other_files_are_read_as_records_once() -> None:
    """metadata.json, the calibration and mutation summaries and communication.json are parsed
    into records too (results_format/summary_records.py): nested rows typed, a key the report
    does not read kept aside, a profile recorded by its name alone still named."""
    meta = ResultsMetadata.from_json({"git_commit": "abc", "profile": {"name": "fast", "k": 1}})
    assert meta.profile_name == "fast" and ResultsMetadata(profile="thorough").profile_name == (
        "thorough"
    )
    summary = MutationSummary.from_json(
        {
            "profile": "fast",
            "catalogue": 3,
            "counts": {"mutants": 1, "killed": 1, "not as expected": 0},
            "mutants": [{"mutant": "m", "status": "killed", "killed_by": ["c (error)"]}],
        }
    )
    assert summary.counts.killed == 1 and summary.counts.extra == {"not as expected": 0}
    assert summary.mutants[0].killed_by == ("c (error)",)
    table = CommunicationTable.from_json(
        {"iterations": 2, "rows": [{"algorithm": "a", "measured_rounds": [3, 3], "x": 1}, 7]}
    )
    assert [r.algorithm for r in table.rows] == ["a"] and table.rows[0].measured_rounds == (3, 3)
    assert table.rows[0].extra == {"x": 1}
    calibration = CalibrationSummary.from_json({"seeds": 20, "claims": [{"claim": "c"}]})
    assert calibration.claims[0].claim == "c" and calibration.claims[0].consistent is None

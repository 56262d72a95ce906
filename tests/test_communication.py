"""The measuring steps behind the report's communication and rounds-to-error sections."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from testbed import communication, comparison_runs, registry


@pytest.mark.parametrize("name, formula", [
    ("fednest", "2T + N' + 3"), ("lfednest", "T + 1"), ("fbo-aggitd", "2N + 3"),
    ("fedmsa", "2"), ("hgp-personalization", "M S + T"),
])
def test_ledger_rounds_equal_the_papers_formula(name, formula):
    row = communication.measure(registry.get_estimator(name))
    assert row["formula"] == formula
    assert len(row["measured_rounds"]) == communication.ITERATIONS
    assert row["measured_rounds"] == row["formula_per_iteration"]
    assert row["agrees"] is True
    assert row["floats_per_round"] > 0


def test_every_registered_algorithm_has_a_formula():
    algorithms = [i for i in registry.ESTIMATOR_DB if i.role == "algorithm"]
    assert algorithms
    missing = [i.name for i in algorithms if communication.paper_formula(i.build()) is None]
    assert not missing, f"no paper formula for {missing}: add one to testbed/communication.py"


def test_a_wrong_formula_is_reported_as_disagreeing(monkeypatch):
    real = communication.paper_formula

    def off_by_one(algorithm):
        f = real(algorithm)
        return dataclasses.replace(f, value=f.value + 1)

    monkeypatch.setattr(communication, "paper_formula", off_by_one)
    row = communication.measure(registry.get_estimator("fedmsa"))
    assert row["agrees"] is False and row["formula_value"] == row["measured_rounds"][0] + 1


def test_summary_ratios_against_the_papers_claims():
    def rows(name, errors):
        return [{"algorithm": name, "problem_id": "p", "seed": 0, "iteration": k,
                 "comm_rounds": 10 * k, "oracle_calls": 0, "floats_sent": 0,
                 "hypergradient_error": e, "suboptimality": e}
                for k, e in enumerate(errors)]

    data = comparison_runs.summarise(
        rows("fednest", [math.nan, 0.5, 0.5, 0.5, 0.005])  # reaches both targets at 40 rounds
        + rows("fedmsa", [math.nan, 0.001])  # at 10 rounds: ratio 0.25, not <= 0.1
        + rows("fbo-aggitd", [math.nan, 0.9]))  # never
    ratios = {(r["algorithm"], r["target"]): r for r in data["ratios"]}
    fedmsa = ratios[("fedmsa", "rounds_to_error")]
    assert fedmsa["ratio_to_fednest"] == pytest.approx(0.25)
    assert fedmsa["claim_holds"] is False and fedmsa["paper_bound"] == 0.1
    aggitd = ratios[("fbo-aggitd", "rounds_to_suboptimality")]
    assert aggitd["ratio_to_fednest"] is None and aggitd["claim_holds"] is False
    json.dumps(data, allow_nan=False)  # strict JSON: no inf or nan in the summary


def test_rounds_to_error_runs_resume(tmp_path, monkeypatch):
    # why these settings: two cheap FedMSA runs of a few rounds exercise the files, not numbers
    monkeypatch.setattr(comparison_runs, "ALGORITHMS", ("fedmsa",))
    monkeypatch.setattr(comparison_runs, "SEEDS", (0, 1))
    monkeypatch.setattr(comparison_runs, "ROUND_BUDGET", 6)
    summary = comparison_runs.run_all(tmp_path, progress=False)
    data = json.loads(summary.read_text())
    assert {r["seed"] for r in data["runs"]} == {0, 1}
    first = (tmp_path / "comparison" / "rounds_to_error.csv").read_text()
    assert first.splitlines()[0].split(",") == list(comparison_runs.COLUMNS)

    def boom(name, seed):
        raise AssertionError("a finished run was rerun")

    monkeypatch.setattr(comparison_runs, "trajectory", boom)
    comparison_runs.run_all(tmp_path, progress=False)
    assert (tmp_path / "comparison" / "rounds_to_error.csv").read_text() == first
    monkeypatch.setattr(comparison_runs, "ROUND_BUDGET", 8)  # a changed definition reruns
    with pytest.raises(AssertionError, match="rerun"):
        comparison_runs.run_all(tmp_path, progress=False)


def test_communication_table_resumes(tmp_path, monkeypatch):
    # the measurement itself is tested above; here only the file and the resume logic
    monkeypatch.setattr(communication, "measure", lambda info: {"algorithm": info.name})
    path = communication.write_table(tmp_path, progress=False)
    rows = json.loads(path.read_text())["rows"]
    assert [r["algorithm"] for r in rows] == [
        i.name for i in registry.ESTIMATOR_DB if i.role == "algorithm"]
    monkeypatch.setattr(communication, "measure", lambda info: pytest.fail("rerun"))
    assert communication.write_table(tmp_path, progress=False) == path
    monkeypatch.setattr(communication, "ITERATIONS", 6)  # a changed definition reruns
    with pytest.raises(pytest.fail.Exception, match="rerun"):
        communication.write_table(tmp_path, progress=False)

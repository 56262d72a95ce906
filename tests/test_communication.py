"""The measuring steps behind the report's communication and rounds-to-error sections."""

from __future__ import annotations

import dataclasses
import json

import pytest

from testbed import registry
from testbed_app import communication


@pytest.mark.parametrize(
    "name, formula",
    [
        ("fednest", "2T + N' + 3"),
        ("lfednest", "T + 1"),
        ("fbo-aggitd", "2N + 3"),
        ("fedmsa", "2"),
        ("hgp-personalization", "M S + T"),
    ],
)
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
    missing = [i.name for i in algorithms if i.build().rounds_formula() is None]
    assert not missing, f"no paper formula for {missing}: give the class a rounds_formula()"


def test_a_wrong_formula_is_reported_as_disagreeing(monkeypatch):
    from testbed.algorithms.fedmsa import FedMSA

    real = FedMSA.rounds_formula

    def off_by_one(self):
        f = real(self)
        return dataclasses.replace(f, text=f.text + " + 1")

    monkeypatch.setattr(FedMSA, "rounds_formula", off_by_one)
    row = communication.measure(registry.get_estimator("fedmsa"))
    assert row["agrees"] is False and row["formula_value"] == row["measured_rounds"][0] + 1


def test_rounds_per_iteration_is_the_formula_evaluated():
    for info in registry.ESTIMATOR_DB:
        if info.role != "algorithm":
            continue
        algorithm = info.build()
        formula = algorithm.rounds_formula()
        if formula is None or formula.unit != "rounds":
            continue
        drawn = {"N'": formula.parameters.get("N", 0)}  # FedNest's budget under random N'
        assert algorithm.rounds_per_iteration() == formula.value(**drawn), info.name


def test_communication_table_resumes(tmp_path, monkeypatch):
    # the measurement itself is tested above; here only the file and the resume logic
    monkeypatch.setattr(communication, "measure", lambda info: {"algorithm": info.name})
    path = communication.write_table(tmp_path, progress=False)
    rows = json.loads(path.read_text())["rows"]
    assert [r["algorithm"] for r in rows] == [
        i.name for i in registry.ESTIMATOR_DB if i.role == "algorithm"
    ]
    monkeypatch.setattr(communication, "measure", lambda info: pytest.fail("rerun"))
    assert communication.write_table(tmp_path, progress=False) == path
    monkeypatch.setattr(communication, "ITERATIONS", 6)  # a changed definition reruns
    with pytest.raises(pytest.fail.Exception, match="rerun"):
        communication.write_table(tmp_path, progress=False)

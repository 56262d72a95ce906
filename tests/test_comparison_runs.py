"""The rounds-to-target table: the shared definitions read off recorded runs, the summary's
schema (new keys and the earlier ones), and resuming."""

from __future__ import annotations

import json
import math

import pytest

from tests._comparison_files import comparison_run
from theory_checks.comparison import reaching
from theory_checks.comparison import runs as runs
from theory_checks.comparison import table


def _aggitd_run(role, seed, values, rounds_per_iteration):
    # no hypergradient error recorded (NaN): the summary must still be strict JSON
    return comparison_run(
        "aggitd", role, seed, values, rounds_per_iteration, hypergradient_error=math.nan
    )


def test_summary_ratios_use_the_shared_target_and_the_cap():
    held = [1.0, 0.5, 0.05, 0.04, 0.03, 0.02]  # below from iteration 2 on, held to 2R
    rows = (
        _aggitd_run("candidate", 0, held, 13)  # R = 26
        + _aggitd_run("baseline", 0, held, 18)  # R = 36
        + _aggitd_run("candidate", 1, [1.0, 0.05, 0.5, 0.5], 13)  # a dip: never
        + _aggitd_run("baseline", 1, held, 18)
    )
    data = table.summarise(rows, {})
    json.dumps(data, allow_nan=False)  # strict JSON
    (tuned,) = [
        c for c in data["comparisons"] if c["comparison"] == "aggitd" and c["rule"] == "tuned"
    ]
    first, second = tuned["per_seed"]
    assert first["ratio"] == pytest.approx(26 / 36) and first["note"] == ""
    assert second["candidate_rounds"] is None
    assert second["ratio"] == pytest.approx(reaching.CAP / 36)  # the cap, not the dip
    assert "does not reach" in second["note"]
    assert tuned["geometric_mean_ratio"] == pytest.approx(math.sqrt(26 / 36 * reaching.CAP / 36))
    low, high = tuned["interval_95"]
    assert low < tuned["geometric_mean_ratio"] < high
    assert tuned["rounds_per_iteration"] == {"candidate": 13, "baseline": 18}
    # the earlier schema's keys, for readers of the old report
    holds = {
        (r["seed"], r["rule"]): r["claim_holds"]
        for r in data["ratios"]
        if r["comparison"] == "aggitd"
    }
    assert holds == {(0, "tuned"): True, (1, "tuned"): False}
    assert data["error_target"] == data["suboptimality_target"] == reaching.TARGET
    assert {"algorithms", "seeds", "round_budget", "runs", "ratios"} <= set(data)


def test_table_runs_resume_and_rerun_when_a_definition_changes(tmp_path, monkeypatch):
    # why these settings: one cheap comparison (LFedNest, T = 1) on one seed and one tuning
    # problem exercises the files, not the numbers
    monkeypatch.setattr(runs, "TABLE", {"lfednest": runs.TABLE["lfednest"]})
    monkeypatch.setattr(table, "SEEDS", (0,))
    monkeypatch.setattr(table, "TUNING_SEEDS", (1000,))
    summary = table.run_all(tmp_path, progress=False)
    data = json.loads(summary.read_text())
    assert {(c["comparison"], c["rule"]) for c in data["comparisons"]} == {
        ("lfednest", "tuned"),
        ("lfednest", "prescribed"),
    }
    csv_text = (tmp_path / "comparison" / "rounds_to_error.csv").read_text()
    assert csv_text.splitlines()[0].split(",") == list(table.COLUMNS)

    def boom(*args, **kwargs):
        raise AssertionError("a finished run was rerun")

    monkeypatch.setattr(table, "table_run", boom)
    monkeypatch.setattr(table, "table_tuning", boom)
    table.run_all(tmp_path, progress=False)
    assert (tmp_path / "comparison" / "rounds_to_error.csv").read_text() == csv_text
    monkeypatch.setattr(reaching, "ROUND_BUDGET", 400)  # a changed definition reruns
    with pytest.raises(AssertionError, match="rerun"):
        table.run_all(tmp_path, progress=False)

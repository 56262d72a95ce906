"""The report's extra sections render from results files in their documented schemas, and say
"not run" when the files are absent."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from reports.build import build_report
from results_format import BENCH_SCHEMA
from results_format import REPLICATION_SCHEMA
from results_format.validation import seal
from tests._comparison_files import write_comparison

REPLICATION = {
    "experiment": "aggitd-table2-iid-tau1",
    "paper": "AggITD",
    "table": "AggITD Table 2",
    "metadata": {"dataset": "digits", "device": "cpu"},
    "rows": [
        {
            "setting": "iid, tau = 1",
            "metric": "rounds to 90% test accuracy",
            "paper_value": 140,
            "testbed_value": 152.0,
            "unit": "rounds",
            "differences": "digits instead of MNIST",
        },
        {
            "setting": "non-iid, tau = 5",
            "metric": "rounds to 90% test accuracy",
            "paper_value": "about 300",
            "testbed_value": None,
            "unit": "rounds",
            "differences": "none",
        },
    ],
    # no run folder beside it here: the seal vouches for the record alone
    "metrics_rows_sha256": "0" * 64,
}
REPLICATION = seal(REPLICATION)
BENCH = {
    "benchmark": "oracle-throughput",
    "description": "HVPs per second, batched clients",
    "machine": {"cpu": "toy", "cores": 2, "device": "cpu", "torch": "2.13"},
    "rows": [{"clients": 8, "hvp_per_s": 1234.5}, {"clients": 64, "hvp_per_s": 8000.25}],
    "targets": [
        {
            "name": "64-client speed-up",
            "measured": 6.48,
            "target": 4.0,
            "direction": "at_least",
            "met": True,
        },
        {
            "name": "memory (GB)",
            "measured": 3.0,
            "target": 2.0,
            "direction": "at_most",
            "met": False,
        },
    ],
}
COMMUNICATION = {
    "fingerprint": "x",
    "iterations": 2,
    "seed": 0,
    "rows": [
        {
            "algorithm": "fednest",
            "paper": "FedNest",
            "formula": "2T + N' + 3",
            "formula_parameters": {"T": 5, "N": 10},
            "formula_source": "FedNest Table 2",
            "formula_value": None,
            "formula_per_iteration": [21, 19],
            "declared": 23,
            "measured_rounds": [21, 19],
            "agrees": True,
            "floats_per_round": 64.5,
            "floats_per_iteration": 1290.0,
            "note": "N' drawn per iteration",
        },
        {
            "algorithm": "toy-algorithm",
            "paper": "Toy",
            "formula": "2N + 3",
            "formula_parameters": {"N": 1},
            "formula_source": "Toy Table 1",
            "formula_value": 5,
            "formula_per_iteration": [5, 5],
            "declared": 5,
            "measured_rounds": [6, 6],
            "agrees": False,
            "floats_per_round": 10.0,
            "floats_per_iteration": 60.0,
            "note": "",
        },
    ],
}


def _minimal_results(root: Path) -> Path:
    """One claim without series (no claim figure to draw: these tests are about sections)."""
    (root / "claims").mkdir(parents=True)
    (root / "claims" / "c.json").write_text(json.dumps({"id": "c", "cases": []}))
    return root


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("sections")
    results = _minimal_results(root / "results")
    for folder, name, data in (
        ("replication", "aggitd-table2.json", REPLICATION),
        ("bench", "oracle.json", BENCH),
    ):
        (results / folder).mkdir()
        (results / folder / name).write_text(json.dumps(data))
    (results / "bench" / "broken.json").write_text(json.dumps({"benchmark": "b"}))
    (results / "communication.json").write_text(json.dumps(seal(COMMUNICATION)))
    write_comparison(results)
    index = build_report(results, root / "out")
    return (
        index,
        index.read_text(encoding="utf-8"),
        (index.parent / "report.md").read_text(encoding="utf-8"),
    )


def test_schemas_are_the_documented_ones():
    assert set(REPLICATION) == set(REPLICATION_SCHEMA)
    assert set(BENCH) == set(BENCH_SCHEMA)


def test_replication_and_bench_tables(full):
    _, text, markdown = full
    for page in (text, markdown):
        assert "AggITD Table 2" in page and "digits instead of MNIST" in page
        assert "152" in page and "about 300" in page and "not reached" in page
        assert "oracle-throughput" in page and "8000.25" in page and "64-client speed-up" in page
        assert "at least" in page and "at most" in page
        assert "broken.json: missing keys" in page
    assert '<td class="expected-no">NO</td>' in text  # the unmet bench target stands out


def test_communication_table_shows_formula_measurement_and_disagreement(full):
    _, text, markdown = full
    for page in (html.unescape(text), markdown):
        assert "2T + N' + 3 (T = 5, N = 10)" in page
        assert "per iteration: 21, 19" in page
        assert "64.5" in page and "1290" in page
    assert re.search(
        r"<td>toy-algorithm</td>.*?<td[^>]*>6, 6</td>"
        r'<td class="expected-no">NO</td>',
        text,
    )


def test_an_edited_communication_table_is_not_shown(tmp_path):
    """communication.json is sealed (every file read back carries a seal): a
    measured round count edited by hand is named, not shown."""
    from reports.sections import communication

    edited = json.loads(json.dumps(seal(COMMUNICATION)))
    edited["rows"][0]["measured_rounds"] = [99, 99]
    (tmp_path / "communication.json").write_text(json.dumps(edited))
    section = communication(tmp_path)
    assert (
        not section.tables
        and "communication.json not trusted (its content differs" in section.notes[0]
    )


def test_rounds_to_error_table_and_figure(full):
    index, text, markdown = full
    for page in (html.unescape(text), markdown):
        # one target definition, stated, shared with the claims
        assert "relative stationarity ||grad h(x_k)|| / ||grad h(x_0)|| <= 0.1" in page
        assert "stays <= the target at every later iteration" in page
    # FedMSA: from round 10 vs FedNest's 30: ratio 1/3; the dip of FBO-AggITD does not count
    assert re.search(r"<td>fedmsa vs fednest</td><td>tuned</td>.*?<td>0.33</td>", text)
    assert "fbo-aggitd does not reach (capped)" in text
    figure = index.parent / "figures" / "comparison.rounds_to_error.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "figures/comparison.rounds_to_error.png" in markdown


def test_an_old_rounds_to_error_file_asks_for_a_rerun(tmp_path):
    results = _minimal_results(tmp_path / "results")
    (results / "comparison").mkdir()
    (results / "comparison" / "rounds_to_error.json").write_text(
        json.dumps({"algorithms": ["fednest"], "runs": [], "ratios": []})
    )
    text = build_report(results, tmp_path / "out").read_text(encoding="utf-8")
    assert "older format" in text and "testbed check --fresh" in text


def test_absent_files_say_not_run(tmp_path):
    index = build_report(_minimal_results(tmp_path / "results"), tmp_path / "out")
    text = index.read_text(encoding="utf-8")
    for section in ("communication", "rounds-to-error", "replication", "bench"):
        match = re.search(rf'<section class="extra" id="{section}">(.*?)</section>', text, re.S)
        assert match and "not run" in match.group(1), section

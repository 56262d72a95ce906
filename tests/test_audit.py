"""A results folder anyone can audit (issue 33): each forgery of the issue reproduced first.

A claim file edited by hand and resealed with the project's own public ``seal`` was believed:
a case measured 0.37 against a bound of 1e-10 with ``passed`` left true was reused by ``check``
and reported "holds"; a refuted claim rewritten as holding was shown as holding; a calibration
summary resealed to say 5000 seeds was shown while its record held 2; an edited mutation record
was resumed unmeasured. Now every outcome is re-derived from the recorded numbers whenever a
file is read, every record is sealed and its summary recomputed from it, and ``testbed audit``
measures the folder again: a forgery consistent in its numbers and outcomes re-derives, and only
measuring again shows it (docs/audit.md).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from results_format.claim_file import claim_file_problem
from results_format.validation import file_digest
from results_format.validation import seal
from testbed_app.audit import DEFAULT_SAMPLE
from testbed_app.cli import main
from tests._cli_runs import calibrate_argv
from tests._cli_runs import copy_results

HOLDS = "classical.cg.exact_after_dim_y"
STATISTICAL = "fednest.lemma22.abs_error_per_sample"
FAILS = "fednest.lemma22.paper_constant"
AS_PRINTED = "aggitd.alg1.as_printed"  # refuted, with readings
MUTANT = "aid-cg.iterations_minus_one"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A results folder of four claims, a calibration of two seeds and one mutant, made once
    and copied by each test."""
    results = tmp_path_factory.mktemp("audited")
    common = ["--results", str(results), "--quiet", "--profile", "fast"]
    assert main(["check", "--claim", HOLDS, STATISTICAL, FAILS, AS_PRINTED, *common]) == 0
    assert main(["calibrate", "--claim", STATISTICAL, "--seeds", "2", *common]) == 0
    assert main(["mutate", "--mutant", MUTANT, *common]) == 0
    return results


def _tree(results: Path) -> dict[str, str]:
    return {
        p.relative_to(results).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(results.rglob("*"))
        if p.is_file()
    }


def _audit(results: Path, capsys, *options: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    status = main(["audit", str(results), *options])
    return status, capsys.readouterr().out.splitlines()


def _line(lines: list[str], name: str) -> str:
    found = [line for line in lines if line.startswith(f"{name}: ")]
    assert len(found) == 1, lines
    return found[0]


def _claim(results: Path, claim: str) -> tuple[Path, dict]:
    path = results / "claims" / f"{claim}.json"
    return path, json.loads(path.read_text())


def test_audit_reproduces_every_claim_and_summary_and_writes_nothing(tmp_path, folder, capsys):
    results = copy_results(folder, tmp_path)
    before = _tree(results)
    status, lines = _audit(results, capsys)
    assert status == 0, lines
    for claim in (HOLDS, STATISTICAL, FAILS, AS_PRINTED):
        assert "reproduced" in _line(lines, claim)
    assert "counterexample fails again, measured 0.442" in _line(lines, AS_PRINTED)
    assert f"{DEFAULT_SAMPLE} of 8 passing or undecided case(s) measured again" in _line(
        lines, HOLDS
    )
    assert "reproduced (2 seed(s) run again)" in _line(lines, f"calibration/{STATISTICAL}.json")
    assert "reproduced from its 1 record(s)" in _line(lines, "calibration/summary.json")
    assert "reproduced (its kill run again)" in _line(lines, f"mutation/{MUTANT}.json")
    assert "reproduced from its 1 record(s)" in _line(lines, "mutation/summary.json")
    assert lines[-1].endswith("8 reproduced, 0 differ")  # 4 claims, 2 records, 2 summaries
    assert _tree(results) == before  # nothing written into the audited folder
    status, lines = _audit(results, capsys, "--all", "--seed", "3")
    assert status == 0 and "8 of 8 passing" in _line(lines, HOLDS)


def _measured_037(data: dict) -> None:
    for case in data["cases"]:
        case["measured"] = 0.37  # bound 1e-10, passed left true


def test_an_edited_measurement_resealed_is_not_trusted_rerun_and_flagged(tmp_path, folder, capsys):
    """The issue's first forgery: every case's measured 0 -> 0.37, resealed."""
    results = copy_results(folder, tmp_path)
    path, data = _claim(results, HOLDS)
    _measured_037(data)
    path.write_text(json.dumps(seal(data)))
    status, lines = _audit(results, capsys)
    assert status == 1
    assert _line(lines, HOLDS) == (
        f"{HOLDS}: differs: not trusted: cases[0].passed is true, but measured 0.37 against "
        "bound 1e-10 (at_most, slack 0) gives false"
    )
    capsys.readouterr()
    out = tmp_path / "report"
    assert main(["report", "--results", str(results), "--out", str(out), "--quiet"]) == 0
    assert f"{path}: not trusted: cases[0].passed is true" in capsys.readouterr().err
    assert "0.37 vs bound" not in (out / "report.md").read_text()
    assert main(["check", "--claim", HOLDS, "--results", str(results), "--quiet"]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if str(path) in line]
    assert len(err) == 1 and "measured 0.37 against bound 1e-10" in err[0]
    assert claim_file_problem(json.loads(path.read_text()), results, HOLDS) is None  # rerun


def test_a_holding_claim_forged_into_a_consistent_refutation_is_caught_by_the_replay(
    tmp_path, folder, capsys
):
    """A refutation forged consistently (numbers, outcomes, counts, counterexample file and its
    digest, the seal): it re-derives, so check believes it; the audit replays the
    counterexample, which holds."""
    results = copy_results(folder, tmp_path)
    path, data = _claim(results, HOLDS)
    case = data["cases"].pop(0)
    case.update(measured=0.37, passed=False, outcome="fails")
    data["cases"].append(case)
    counterexample = f"counterexamples/{HOLDS}.json"
    body = json.dumps({"claim": HOLDS, "profile": "fast", "decision": "deterministic", **case})
    (results / counterexample).write_text(body)
    data["files"][counterexample] = file_digest(body.encode())
    data.update(
        verdict="fails as stated",
        expected_verdicts=["fails as stated"],
        as_expected=True,
        n_cases=len(data["cases"]) - 1,
        counterexample=counterexample,
    )
    path.write_text(json.dumps(seal(data)))
    assert claim_file_problem(json.loads(path.read_text()), results, HOLDS) is None
    status, lines = _audit(results, capsys, "--sample", "0")
    assert status == 1
    line = _line(lines, HOLDS)
    assert line.startswith(
        f"{HOLDS}: differs: counterexample {case['problem_id']}: recorded "
        "fails (measured 0.37), again holds (measured "
    )


def _as_holding(data: dict, measured: float | None) -> None:
    """``aggitd.alg1.as_printed`` rewritten as holding: its failing case passed, the verdict,
    counts, readings and expected verdicts with it (and its number, when given)."""
    case = data["cases"][0]
    case.update(passed=True, outcome="holds")
    if measured is not None:
        case["measured"] = measured
    for reading in data["readings"]:
        reading.update(verdict="holds", n_cases=1, counterexample=None)
    data.update(
        verdict="holds",
        expected_verdicts=["holds"],
        as_expected=True,
        n_cases=1,
        counterexample=None,
        holding_readings=[r["name"] for r in data["readings"]],
        files={k: v for k, v in data["files"].items() if k.startswith("series/")},
    )


def test_a_refuted_claim_rewritten_as_holding_is_not_trusted_or_flagged(tmp_path, folder, capsys):
    results = copy_results(folder, tmp_path)
    path, data = _claim(results, AS_PRINTED)
    _as_holding(data, None)
    path.write_text(json.dumps(seal(data)))
    status, lines = _audit(results, capsys)
    assert (
        status == 1
        and "cases[0].passed is true, but measured 0.441759 against bound 1e-10"
        in _line(lines, AS_PRINTED)
    )
    # its number changed too: it re-derives, and measuring the case again shows it fails
    path, data = _claim(copy_results(folder, tmp_path / "again"), AS_PRINTED)
    _as_holding(data, 0.0)
    path.write_text(json.dumps(seal(data)))
    assert claim_file_problem(json.loads(path.read_text()), path.parent.parent, AS_PRINTED) is None
    status, lines = _audit(path.parent.parent, capsys)
    assert status == 1 and (
        "recorded holds (measured 0), again fails (measured 0.441759 vs bound 1e-10)"
    ) in _line(lines, AS_PRINTED)


def test_a_calibration_summary_resealed_to_say_5000_seeds_is_not_shown(tmp_path, folder, capsys):
    results = copy_results(folder, tmp_path)
    path = results / "calibration" / "summary.json"
    data = json.loads(path.read_text())
    data["seeds"] = 5000
    data["claims"][0].update(
        seeds=5000,
        verdicts={"holds once corrected": 5000},
        refuted=0,
        undecided=0,
        false_failures=0,
        rate_low=0.0,
        rate_high=7.4e-4,
        consistent=True,
    )
    path.write_text(json.dumps(seal(data)))
    out = tmp_path / "report"
    capsys.readouterr()
    assert main(["report", "--results", str(results), "--out", str(out), "--quiet"]) == 0
    page = (out / "report.md").read_text()
    assert (
        "calibration/summary.json not trusted (claims[0] (fednest.lemma22.abs_error_per_"
        "sample) says 5000 seeds {'holds once corrected': 5000}, its record holds 2 "
        "{'holds once corrected': 2})"
    ) in page
    assert "| 5000 |" not in page  # its numbers are not shown
    status, lines = _audit(results, capsys, "--sample", "0")
    assert status == 1 and "its record holds 2" in _line(lines, "calibration/summary.json")


def test_a_calibration_record_with_an_edited_seed_verdict_is_not_believed(tmp_path, folder, capsys):
    """Before: the table showed "1 of 2", NO. The record is sealed: the edited seed is not
    believed, the summary is not shown, and calibrate runs the seeds again."""
    results = copy_results(folder, tmp_path)
    record = results / "calibration" / f"{STATISTICAL}.json"
    data = json.loads(record.read_text())
    data["runs"][1]["verdict"] = "fails as stated"
    record.write_text(json.dumps(data))
    out = tmp_path / "report"
    capsys.readouterr()
    assert main(["report", "--results", str(results), "--out", str(out), "--quiet"]) == 0
    assert (
        "its record is not trusted (its content differs from its content_sha256"
        in (out / "report.md").read_text()
    )
    status, lines = _audit(results, capsys, "--sample", "0")
    assert status == 1 and "not trusted" in _line(lines, f"calibration/{STATISTICAL}.json")
    assert main(calibrate_argv(results, STATISTICAL, 2)) == 0
    captured = capsys.readouterr()
    assert f"{record}: not trusted" in captured.err and "NO" not in captured.out
    assert [r["verdict"] for r in json.loads(record.read_text())["runs"]] == [
        "holds once corrected"
    ] * 2


def test_a_seed_verdict_forged_in_record_and_summary_is_caught_by_running_it_again(
    tmp_path, folder, capsys
):
    """A forgery consistent between a calibration record and its summary, both resealed: they
    agree, so only running the seed again shows it."""
    results = copy_results(folder, tmp_path)
    record = results / "calibration" / f"{STATISTICAL}.json"
    data = json.loads(record.read_text())
    data["runs"][1]["verdict"] = "fails as stated"
    record.write_text(json.dumps(seal(data)))
    summary = results / "calibration" / "summary.json"
    data = json.loads(summary.read_text())
    data["claims"][0].update(
        verdicts={"holds once corrected": 1, "fails as stated": 1},
        refuted=1,
        false_failures=1,
        rate_low=0.0126,
        rate_high=0.987,
        consistent=False,
    )
    summary.write_text(json.dumps(seal(data)))
    status, lines = _audit(results, capsys, "--sample", "2")
    assert "reproduced from its 1 record(s)" in _line(lines, "calibration/summary.json")
    assert status == 1 and _line(lines, f"calibration/{STATISTICAL}.json").endswith(
        "differs: seed 1: verdict 'fails as stated' recorded, 'holds once corrected' again"
    )


@pytest.mark.parametrize("reseal", [False, True], ids=["naive edit", "resealed edit"])
def test_a_mutation_record_edited_to_survive_is_measured_again(tmp_path, folder, capsys, reseal):
    """Before: ``killed = false`` in the record resumed "1 survived", exit 1, unmeasured."""
    results = copy_results(folder, tmp_path)
    record = results / "mutation" / f"{MUTANT}.json"
    data = json.loads(record.read_text())
    for run in data["runs"]:
        run["killed"] = False
    data.update(status="survived", killed_by=[])
    record.write_text(json.dumps(seal(data) if reseal else data))
    status, lines = _audit(results, capsys, "--sample", "0")
    assert status == 1 and "not trusted" in _line(lines, f"mutation/{MUTANT}.json")
    assert (
        main(
            [
                "mutate",
                "--mutant",
                MUTANT,
                "--results",
                str(results),
                "--quiet",
                "--profile",
                "fast",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    reason = "runs[0].killed is false, its verdict 'fails as stated' gives true"
    assert f"{record}: not trusted ({reason}); its claims are run again" in captured.err
    assert "1 mutants: 1 killed" in captured.out
    assert json.loads(record.read_text())["status"] == "killed"


@pytest.mark.parametrize("computed_by", ["abc", ["cfdb04f", "cpu"]], ids=["string", "list"])
def test_computed_by_of_the_wrong_type_is_not_trusted_in_one_line(
    tmp_path, folder, capsys, computed_by
):
    """Before: every check of the folder crashed (AttributeError: no attribute 'get')."""
    results = copy_results(folder, tmp_path)
    path, data = _claim(results, FAILS)
    data["computed_by"] = computed_by
    path.write_text(json.dumps(seal(data)))
    capsys.readouterr()
    assert main(["check", "--claim", FAILS, "--results", str(results), "--quiet"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if str(path) in line]
    assert len(notes) == 1 and "not trusted: computed_by is" in notes[0]
    assert "expected an object" in notes[0] and notes[0].endswith("rerun")
    assert isinstance(json.loads(path.read_text())["computed_by"], dict)


def test_foreign_json_files_in_claims_are_named_not_counted(tmp_path, folder, capsys):
    """Before: two foreign files counted "2 claims" and the report advised
    ``check --claim notes``."""
    results = copy_results(folder, tmp_path)
    (results / "claims" / "notes.json").write_text('{"note": "checked on my laptop"}')
    (results / "claims" / "list.json").write_text("[1, 2]")
    out = tmp_path / "report"
    capsys.readouterr()
    assert main(["report", "--results", str(results), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert (
        "notes.json: not a claim result (an object without id, claim, verdict, cases); "
        "a foreign file" in err
    )
    page = (out / "report.md").read_text()
    assert "check --claim notes" not in page and "check --claim list" not in page
    assert "notes.json: not a claim result" in page and "not trusted" not in page
    status, lines = _audit(results, capsys, "--sample", "0")
    assert status == 0 and "claims/notes.json: foreign, not audited" in "\n".join(lines)
    only = tmp_path / "only"
    (only / "claims").mkdir(parents=True)
    shutil.copy(results / "claims" / "notes.json", only / "claims")
    shutil.copy(results / "claims" / "list.json", only / "claims")
    assert main(["report", "--results", str(only), "--out", str(out), "--quiet"]) == 2
    *warnings, error = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 2 and all("a foreign file" in w for w in warnings)
    assert error.startswith("testbed: error: no claim results")
    assert "its 2 JSON file(s) are foreign (list.json, notes.json)" in error


def test_a_case_that_cannot_be_rebuilt_is_a_difference_not_a_crash(tmp_path, folder, capsys):
    results = copy_results(folder, tmp_path)
    path, data = _claim(results, HOLDS)
    data["cases"][0]["spec"]["family"] = "NoSuchFamily"
    path.write_text(json.dumps(seal(data)))
    status, lines = _audit(results, capsys, "--all")
    assert status == 1
    line = _line(lines, HOLDS)
    assert f"differs: {data['cases'][0]['problem_id']} cannot be measured again (" in line


@pytest.mark.parametrize(
    ("make", "options", "reason"),
    [
        (lambda p: p, [], "no such results folder"),
        (lambda p: (p.write_text("x"), p)[1], [], "no such results folder"),
        (lambda p: (p.mkdir(), p)[1], [], "is not a results folder"),
        (
            lambda p: (p.mkdir(), (p / "claims").mkdir(), p)[1],
            ["--all", "--sample", "3"],
            "--all and --sample exclude each other",
        ),
    ],
    ids=["missing", "a file", "no claims folder", "all and sample"],
)
def test_audit_bad_input_is_one_line_exit_2(tmp_path, capsys, make, options, reason):
    target = make(tmp_path / "r")
    capsys.readouterr()
    assert main(["audit", str(target), *options]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and reason in err


def test_audit_help_states_its_default_sample(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    assert f"(default {DEFAULT_SAMPLE};" in capsys.readouterr().out

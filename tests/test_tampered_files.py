"""Results files checked before they are believed (each kind of edit a reader could be fooled
by, reproduced here): a claim file whose verdict, ``as_expected``, a measurement or a count
was edited is rerun by ``testbed check`` with a one-line note naming it and shown "not trusted"
(never as measured) by the report; an edited ``metrics.csv`` (a row repeated, an accuracy
changed) stops a resumed run naming the file instead of feeding a wrong replication row; an
edited replication record, calibration summary, checkpoint or baseline is named and not used.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
import torch

from results_format.claim_file import claim_file_problem
from results_format.validation import seal
from testbed_app.cli import main
from testbed_app.experiments import runner
from testbed_app.experiments.config import load_config
from tests._cli_runs import calibrate_argv
from tests._cli_runs import check_argv
from tests._cli_runs import checked_folder
from tests._cli_runs import copy_results
from tests.test_experiments import write

# a deterministic claim that holds (8 cases, a few seconds with its perturbation), a
# statistical one (recorded decisions; a fraction of a second) and one that fails as stated
HOLDS = "classical.cg.exact_after_dim_y"
STATISTICAL = "fednest.lemma22.abs_error_per_sample"
FAILS = "fednest.lemma22.paper_constant"


def _check(results: Path, *claims: str) -> int:
    checked = list(claims or (HOLDS, STATISTICAL, FAILS))
    return main(check_argv(results, checked, "--quiet", "--profile", "fast"))


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> Path:
    """Results of the three claims above, checked once and copied by each test."""
    return checked_folder(tmp_path_factory, [HOLDS, STATISTICAL, FAILS])


def _edit(results: Path, claim: str, change, *, reseal: bool = False) -> Path:
    """Apply ``change`` to a claim file's JSON; ``reseal``: recompute its seal as a careful
    forger would (the recomputed verdict must still catch the edit)."""
    path = results / "claims" / f"{claim}.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(seal(data) if reseal else data, indent=2))
    return path


def _report(results: Path, out: Path, capsys) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["report", "--results", str(results), "--out", str(out), "--quiet"]) == 0
    return (out / "report.md").read_text(), capsys.readouterr().err


def _row(page: str, claim: str) -> str:
    """The verdict cell of ``claim``'s row in the Markdown report's summary table."""
    rows = [line for line in page.splitlines() if line.startswith("|") and f"{claim}" in line]
    assert rows, f"no row of {claim}"
    return rows[0].split(" | ")[1]


TAMPERINGS = {
    "verdict flipped to fails with every case holding": (
        HOLDS,
        lambda d: d.update(verdict="fails as stated", as_expected=False),
        "verdict is 'fails as stated', its recorded cases give 'holds'",
    ),
    "an unknown verdict string": (
        HOLDS,
        lambda d: d.update(verdict="proven beyond doubt"),
        "verdict is 'proven beyond doubt', not one of 'holds'",
    ),
    "NaN in a measurement": (
        HOLDS,
        lambda d: d["cases"][0].update(measured=math.nan),
        "cases[0].measured is NaN, expected a number (not NaN)",
    ),
    "NaN in a statistical test's estimate": (
        STATISTICAL,
        lambda d: d["cases"][0]["decisions"][0].update(estimate=math.nan),
        "cases[0].decisions[0].outcome is 'holds', its interval gives 'undecided'",
    ),
    "a statistical interval moved outside its region": (
        STATISTICAL,
        lambda d: d["cases"][0]["decisions"][0].update(low=1e300, high=1e301),
        "its interval gives 'fails'",
    ),
    "a statistical interval narrowed, its outcome kept": (
        STATISTICAL,
        lambda d: d["cases"][0]["decisions"][0].update(
            low=d["cases"][0]["decisions"][0]["low"] + 1e-3
        ),
        "is not the SpentRate(Hoeffding) interval of its statistic",
    ),
    "as_expected flipped": (
        HOLDS,
        lambda d: d.update(as_expected=False),
        "as_expected is false, but verdict 'holds' is among the expected",
    ),
    "n_cases a string": (
        HOLDS,
        lambda d: d.update(n_cases="eight"),
        "n_cases is 'eight', expected a count",
    ),
    "the case list of the wrong type": (
        HOLDS,
        lambda d: d.update(cases={"0": "holds"}),
        'cases is {"0": "holds"}',
    ),
    "a counterexample's case edited to hold, the count with it": (
        FAILS,
        lambda d: (
            d["cases"][-1].update(passed=True, outcome="holds"),
            d.update(n_cases=d["n_cases"] + 1),
        ),
        "passed is true, but measured 0.0950357 against bound 0 (at_most",
    ),
}


@pytest.mark.parametrize("reseal", [False, True], ids=["naive edit", "resealed edit"])
@pytest.mark.parametrize("label", list(TAMPERINGS))
def test_tampered_claim_file_is_rerun_by_check_with_a_note(
    tmp_path, checked, capsys, label, reseal
):
    claim, change, reason = TAMPERINGS[label]
    results = copy_results(checked, tmp_path)
    path = _edit(results, claim, change, reseal=reseal)
    capsys.readouterr()
    assert _check(results, claim) == 0  # exit 1 before, for the flipped as_expected
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if str(path) in line]
    assert len(notes) == 1 and "not trusted" in notes[0] and notes[0].endswith("rerun")
    assert reason in notes[0] or not reseal and "content_sha256" in notes[0]
    rerun = json.loads(path.read_text())
    assert claim_file_problem(rerun, results, claim) is None  # measured again, believed
    assert (
        rerun["verdict"]
        == json.loads((checked / "claims" / f"{claim}.json").read_text())["verdict"]
    )


@pytest.mark.parametrize(
    "label",
    [
        "verdict flipped to fails with every case holding",
        "an unknown verdict string",
        "NaN in a measurement",
        "n_cases a string",
        "the case list of the wrong type",
    ],
)
def test_tampered_claim_file_is_not_shown_as_measured_in_the_report(
    tmp_path, checked, capsys, label
):
    claim, change, reason = TAMPERINGS[label]
    results = copy_results(checked, tmp_path)
    _edit(results, claim, change, reseal=True)
    page, err = _report(results, tmp_path / "report", capsys)
    assert f"claims/{claim}.json: not trusted" in err
    row = _row(page, claim)
    assert "not trusted" in row and "fails as stated" not in row
    # the edited value appears only where the note quotes it as the reason
    assert all("not trusted" in line for line in page.splitlines() if "proven beyond doubt" in line)
    assert reason.split(",")[0] in page  # the note says why
    assert not (tmp_path / "report" / "figures" / f"{claim}.png").exists()
    assert "not trusted" not in _row(page, FAILS)  # the others are shown as measured


def test_a_claim_file_saved_under_another_claims_name_is_not_trusted(tmp_path, checked, capsys):
    results = copy_results(checked, tmp_path)
    shutil.copy(results / "claims" / f"{HOLDS}.json", results / "claims" / f"{FAILS}.json")
    page, err = _report(results, tmp_path / "report", capsys)
    assert f"id is '{HOLDS}' but the file is named {FAILS}.json" in err
    assert "not trusted" in _row(page, FAILS)


@pytest.mark.parametrize("companion", ["series", "counterexample json", "counterexample npz"])
def test_an_edited_companion_file_makes_its_claim_untrusted(tmp_path, checked, capsys, companion):
    results = copy_results(checked, tmp_path)
    relative = {
        "series": f"series/{FAILS}.csv",
        "counterexample json": f"counterexamples/{FAILS}.json",
        "counterexample npz": f"counterexamples/{FAILS}.npz",
    }[companion]
    with (results / relative).open("ab") as handle:
        handle.write(b" ")
    page, err = _report(results, tmp_path / "report", capsys)
    assert f"{relative} differs from the file this result was written with" in err
    assert "not trusted" in _row(page, FAILS)
    capsys.readouterr()
    assert _check(results, FAILS) == 0
    assert "rerun" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["path only", "path and digest forged"])
def test_a_counterexample_path_outside_the_results_is_never_copied(tmp_path, checked, capsys, how):
    """``"counterexample": "../../secret_keys.json"``: the report neither copies nor links it."""
    from results_format.validation import file_digest

    results = copy_results(checked, tmp_path / "deep" / "er")
    secret = tmp_path / "deep" / "secret_keys.json"
    secret.write_text('{"key": "SECRET-123"}')
    escape = "../../secret_keys.json"
    assert (results / escape).resolve() == secret.resolve()

    def change(data):
        data["counterexample"] = escape
        if how != "path only":
            data["files"][escape] = file_digest(secret.read_bytes())

    _edit(results, FAILS, change, reseal=True)
    out = tmp_path / "report"
    page, err = _report(results, out, capsys)
    assert "not trusted" in _row(page, FAILS)
    assert "outside the results folder" in err or "does not list" in err
    copied = [p for p in out.rglob("*") if p.is_file() and b"SECRET-123" in p.read_bytes()]
    assert copied == []  # not copied, and not linked:
    assert not re.search(r'(href|src)="[^"]*secret_keys', (out / "index.html").read_text())
    assert "](../../secret_keys.json)" not in page


# ------------------------------------------------------------------------------ runs


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory) -> dict[str, object]:
    """The tiny config (threshold 0.1: reached at step 1) with a higher threshold, so that
    the replication row depends on which row first reaches it; a straight 3-step run and a
    2-step run (checkpoint every step) to resume."""
    root = tmp_path_factory.mktemp("partial")
    edits = {"run.checkpoint_every": 1, "replication.threshold": 0.99}
    path = write(root, edits)
    runner.run_experiment(load_config(path), root / "straight", progress=False)
    runner.run_experiment(load_config(path, {"run.steps": 2}), root / "partial", progress=False)
    return {
        "root": root,
        "edits": edits,
        "straight": (root / "straight" / "runs" / "tiny" / "metrics.csv").read_bytes(),
        "replication": json.loads((root / "straight" / "replication" / "tiny.json").read_text()),
    }


def _resume_copy(tmp_path: Path, partial_run: dict) -> tuple[Path, Path]:
    path = write(tmp_path, partial_run["edits"])
    shutil.copytree(Path(partial_run["root"]) / "partial", tmp_path / "results")
    return path, tmp_path / "results" / "runs" / "tiny"


def test_a_duplicated_metrics_row_stops_the_run_naming_the_line(tmp_path, partial_run, capsys):
    path, folder = _resume_copy(tmp_path, partial_run)
    metrics = folder / "metrics.csv"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join([*lines[:3], lines[2]]))  # steps 1, 2, 2
    args = ["run", str(path), "--results", str(tmp_path / "results"), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "metrics.csv: line 4 repeats step 2" in err
    assert "--recover" in err
    assert main([*args, "--recover"]) == 0  # set aside, resumed from the last good state
    assert metrics.read_bytes() == partial_run["straight"]


def test_a_tampered_accuracy_never_reaches_the_replication_row(tmp_path, partial_run, capsys):
    """Row 1's accuracy raised to 1.0: the run used to resume and report the threshold
    reached after row 1's rounds; now the rows no longer match the checkpoint's record."""
    path, folder = _resume_copy(tmp_path, partial_run)
    metrics = folder / "metrics.csv"
    lines = metrics.read_text().splitlines(keepends=True)
    header = lines[0].strip().split(",")
    fields = lines[1].strip().split(",")
    fields[header.index("test_accuracy")] = "1"
    metrics.write_text("".join([lines[0], ",".join(fields) + "\n", *lines[2:]]))
    replication = tmp_path / "results" / "replication" / "tiny.json"
    partial = replication.read_bytes()  # the 2-step run's record ("partial")
    args = ["run", str(path), "--results", str(tmp_path / "results"), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "metrics.csv rows 1..2 differ from those checkpoint.pt was written after" in err
    assert replication.read_bytes() == partial  # no record computed from the edited rows
    assert main([*args, "--recover"]) == 0
    assert metrics.read_bytes() == partial_run["straight"]
    record = json.loads((tmp_path / "results" / "replication" / "tiny.json").read_text())
    assert record["rows"] == partial_run["replication"]["rows"]


def test_an_edited_replication_row_is_not_shown(tmp_path, partial_run, capsys):
    results = tmp_path / "results"
    shutil.copytree(Path(partial_run["root"]) / "straight", results)
    path = results / "replication" / "tiny.json"
    record = json.loads(path.read_text())
    true_value = record["rows"][0]["testbed_value"]
    record["rows"][0]["testbed_value"] = 1.0
    for reseal in (False, True):
        path.write_text(json.dumps(seal(record) if reseal else record))
        assert (
            main(["check", "--claim", HOLDS, "--results", str(results), "--quiet", "--claims-only"])
            == 0
        )
        page, _ = _report(results, tmp_path / "report", capsys)
        assert "replication/tiny.json not trusted" in page
        assert (
            f"its run's metrics give {true_value}" in page if reseal else "content_sha256" in page
        )


# ------------------------------------------------------------------------------ checkpoints


def _checkpoint(folder: Path) -> dict:
    return torch.load(folder / "checkpoint.pt", weights_only=True)


def _save(folder: Path, raw: dict, reseal: bool) -> None:
    from testbed_app.experiments.checkpoints import SEAL
    from testbed_app.experiments.checkpoints import content_seal

    if reseal:
        raw[SEAL] = content_seal(raw)
    torch.save(raw, folder / "checkpoint.pt")


def _shorten_first_tensor(state):
    """The first tensor of ``state`` (depth first) one entry short, in place."""
    if isinstance(state, dict):
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and value.numel() > 1:
                state[key] = value.reshape(-1)[:-1].clone()
                return True
            if isinstance(value, (dict, list)) and _shorten_first_tensor(value):
                return True
    if isinstance(state, list):
        for i, value in enumerate(state):
            if isinstance(value, torch.Tensor) and value.numel() > 1:
                state[i] = value.reshape(-1)[:-1].clone()
                return True
            if isinstance(value, (dict, list)) and _shorten_first_tensor(value):
                return True
    return False


@pytest.mark.parametrize(
    ("label", "reseal"),
    [
        ("step edited", False),
        ("step edited", True),
        ("a tensor one entry short", False),
        ("a tensor one entry short", True),
    ],
)
def test_an_edited_checkpoint_is_named_with_recover(tmp_path, partial_run, capsys, label, reseal):
    path, folder = _resume_copy(tmp_path, partial_run)
    raw = _checkpoint(folder)
    if label == "step edited":
        raw["step"] = 1
    else:
        assert _shorten_first_tensor(raw["experiment"])
    _save(folder, raw, reseal)
    args = ["run", str(path), "--results", str(tmp_path / "results"), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "checkpoint.pt" in err and "--recover" in err
    if not reseal:
        assert "differs from its seal" in err
    elif label == "a tensor one entry short":
        assert "does not fit this experiment" in err and "shape" in err
    else:  # a resealed step 1 behind step-2 rows: resumed from step 1, the rows recomputed
        pass
    if reseal and label == "step edited":
        return
    assert main([*args, "--recover"]) == 0
    assert (folder / "metrics.csv").read_bytes() == partial_run["straight"]


def test_a_checkpoint_of_another_algorithm_is_named_not_an_attribute_error(tmp_path, capsys):
    """An FBO-AggITD checkpoint given to a FedNest run (its config fingerprint and metrics
    digest forged to match, resealed): one line naming the checkpoint and --recover."""
    fednest = write(tmp_path, {"run.steps": 1})
    (tmp_path / "other").mkdir()
    aggitd = write(
        tmp_path / "other",
        {
            "run.steps": 1,
            "algorithm": {
                "name": "fbo-aggitd",
                "inner_steps": 1,
                "local_steps": 1,
                "inner_step_size": 0.05,
                "outer_step_size": 0.05,
                "neumann_step_size": 0.05,
            },
        },
    )
    runner.run_experiment(load_config(aggitd), tmp_path / "aggitd", progress=False)
    runner.run_experiment(load_config(fednest), tmp_path / "results", progress=False)
    folder = tmp_path / "results" / "runs" / "tiny"
    raw = torch.load(tmp_path / "aggitd" / "runs" / "tiny" / "checkpoint.pt", weights_only=True)
    own = _checkpoint(folder)
    raw["fingerprint"], raw["metrics_rows_sha256"] = own["fingerprint"], own["metrics_rows_sha256"]
    _save(folder, raw, reseal=True)
    capsys.readouterr()
    assert (
        main(
            ["run", str(fednest), "--results", str(tmp_path / "results"), "--quiet", "--steps", "2"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "AttributeError" not in err.split(":")[0]
    assert "checkpoint.pt: does not fit this experiment" in err and "--recover" in err


# ------------------------------------------------------------------------------ other files


def test_metadata_json_that_is_a_list_is_a_note(tmp_path, checked, capsys, partial_run):
    results = copy_results(checked, tmp_path)
    (results / "metadata.json").write_text("[]")
    page, _ = _report(results, tmp_path / "report", capsys)
    assert "metadata.json not used (it is a JSON list, expected an object)" in page
    run_root = tmp_path / "run"
    run_root.mkdir()
    path, folder = _resume_copy(run_root, partial_run)
    (folder / "metadata.json").write_text("[1, 2]")
    capsys.readouterr()
    assert main(["run", str(path), "--results", str(run_root / "results"), "--quiet"]) == 0
    assert (folder / "metrics.csv").read_bytes() == partial_run["straight"]


def test_calibration_summary_with_strings_is_not_shown(tmp_path, checked, capsys):
    results = copy_results(checked, tmp_path)
    capsys.readouterr()
    assert main(calibrate_argv(results, STATISTICAL, 2)) == 0
    summary = results / "calibration" / "summary.json"
    data = json.loads(summary.read_text())
    data["claims"][0].update(seeds="twenty", refuted="none")
    summary.write_text(json.dumps(data))
    page, _ = _report(results, tmp_path / "report", capsys)
    assert "calibration/summary.json not trusted (claims[0].seeds is 'twenty'" in page
    data["claims"][0].update(seeds=2, refuted=0, consistent=False)  # a flag that lies
    summary.write_text(json.dumps(seal(data)))
    page, _ = _report(results, tmp_path / "report", capsys)
    assert "consistent is false, its numbers give true" in page


def test_a_calibration_record_with_a_seed_twice_is_run_again(tmp_path, checked, capsys):
    results = copy_results(checked, tmp_path)
    args = calibrate_argv(results, STATISTICAL, 2)
    assert main(args) == 0
    record = results / "calibration" / f"{STATISTICAL}.json"
    data = json.loads(record.read_text())
    data["runs"][1]["seed"] = 0
    record.write_text(json.dumps(seal(data)))  # resealed: the duplicate itself is caught
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"{record}: not trusted (seed 0 is recorded twice); that seed is run again" in err
    assert [r["seed"] for r in json.loads(record.read_text())["runs"]] == [0, 1]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[]", "is a JSON list, expected an object"),
        (
            '{"format": 2, "entries": {"aid-cg": {"bilevel": {"error": {"per_seed": [["x"]], '
            '"statistic": "mean", "df": 0}}}}}',
            "per_seed holds something other than lists",
        ),
    ],
)
def test_a_malformed_regress_baseline_is_one_line_before_any_work(
    tmp_path, capsys, content, reason
):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(content)
    capsys.readouterr()
    assert main(["regress", "--estimator", "aid-cg", "--baseline", str(baseline), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(baseline) in err and reason in err

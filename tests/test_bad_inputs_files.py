"""Corrupt, torn, foreign and malicious results files, interruptions and divergence: each gets
an error naming the file and the way on, or is repaired with a note; nothing is lost, and a
resumed run still writes the same metrics, byte for byte, as an uninterrupted one."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import torch

from testbed_app.cli import main
from testbed_app.experiments import runner
from testbed_app.experiments.config import ConfigError
from testbed_app.experiments.config import load_config
from testbed_app.experiments.replication import final_value
from tests._cli_runs import check_argv
from tests._cli_runs import checked_folder
from tests._cli_runs import copy_results
from tests.test_experiments import write

# ------------------------------------------------------------------------------ helpers
#
# Runs are the costly part (a digits MLP step takes a fraction of a second), so each layout is
# run once per module and copied into every test's own temporary folder.


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, object]:
    """Uninterrupted 3-step metrics and 2-step run folders (checkpoints every 2 and every 1)."""
    out: dict[str, object] = {}
    for label, edits in (("every2", None), ("every1", {"run.checkpoint_every": 1})):
        root = tmp_path_factory.mktemp(label)
        path = write(root, edits)
        runner.run_experiment(load_config(path), root / "straight", progress=False)
        out[f"{label}.straight"] = (
            root / "straight" / "runs" / "tiny" / "metrics.csv"
        ).read_bytes()
        runner.run_experiment(load_config(path, {"run.steps": 2}), root / "partial", progress=False)
        out[f"{label}.partial"] = root / "partial"
    return out


def _first_run(tmp_path: Path, runs: dict, label: str = "every2") -> tuple[Path, Path]:
    """A copy of the 2-step run in ``tmp_path``; returns (config path, run folder)."""
    edits = {"run.checkpoint_every": 1} if label == "every1" else None
    path = write(tmp_path, edits)
    shutil.copytree(runs[f"{label}.partial"], tmp_path / "results")
    return path, tmp_path / "results" / "runs" / "tiny"


class _Payload:
    """A pickle whose loading runs a shell command (what a crafted checkpoint does)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


# ------------------------------------------------------------------------------ checkpoints


def test_crafted_checkpoint_does_not_run_its_code(tmp_path, runs):
    path, folder = _first_run(tmp_path, runs)
    marker = tmp_path / "pwned"
    torch.save({"version": 1, "step": 1, "payload": _Payload(marker)}, folder / "checkpoint.pt")
    metrics = (folder / "metrics.csv").read_bytes()
    with pytest.raises(
        runner.CheckpointError,
        match=r"checkpoint\.pt: not a readable "
        r"checkpoint.*--recover",
    ):
        runner.run_experiment(load_config(path), tmp_path / "results", progress=False)
    assert not marker.exists()  # the command did not run
    assert (folder / "metrics.csv").read_bytes() == metrics  # nothing lost


@pytest.mark.parametrize(
    "damage",
    ["truncated", "garbage", "empty", "foreign dict", "old format", "a tensor", "unknown class"],
)
def test_corrupt_or_foreign_checkpoint_is_named_and_nothing_deleted(tmp_path, runs, damage):
    path, folder = _first_run(tmp_path, runs)
    checkpoint = folder / "checkpoint.pt"
    good = checkpoint.read_bytes()
    if damage == "truncated":
        checkpoint.write_bytes(good[: len(good) // 2])
    elif damage == "garbage":
        checkpoint.write_bytes(b"not a checkpoint at all" * 10)
    elif damage == "empty":
        checkpoint.write_bytes(b"")
    elif damage == "foreign dict":
        torch.save({"weights": torch.zeros(3)}, checkpoint)
    elif damage == "old format":
        torch.save({"version": 0, "step": 2, "fingerprint": "x", "experiment": {}}, checkpoint)
    elif damage == "a tensor":
        torch.save(torch.zeros(3), checkpoint)
    else:
        torch.save(
            {
                "version": 1,
                "step": 2,
                "fingerprint": "x",
                "experiment": {"__testbed_type__": "dataclass", "class": "os:system", "fields": {}},
            },
            checkpoint,
        )
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(runner.CheckpointError) as info:
        runner.run_experiment(load_config(path), tmp_path / "results", progress=False)
    message = str(info.value)
    assert str(checkpoint) in message and "--recover" in message and "\n" not in message
    assert sorted(p.name for p in folder.iterdir()) == before


def test_cli_names_the_corrupt_checkpoint_and_recover_finishes_byte_identical(
    tmp_path, runs, capsys
):
    straight = runs["every2.straight"]
    path, folder = _first_run(tmp_path, runs)
    (folder / "checkpoint.pt").write_bytes(b"\x80garbage")
    args = ["run", str(path), "--results", str(tmp_path / "results"), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "checkpoint.pt" in err and "--recover" in err
    assert main([*args, "--recover"]) == 0
    err = capsys.readouterr().err
    assert "set aside as checkpoint.pt.bad" in err
    assert (folder / "checkpoint.pt.bad").read_bytes() == b"\x80garbage"  # kept, not deleted
    assert (folder / "metrics.csv").read_bytes() == straight


def test_recover_falls_back_to_the_previous_checkpoint(tmp_path, runs):
    straight = runs["every1.straight"]
    path, folder = _first_run(tmp_path, runs, "every1")
    assert (folder / "checkpoint.prev.pt").exists()  # step 1, kept beside step 2
    (folder / "checkpoint.pt").write_bytes(b"")
    summary = runner.run_experiment(
        load_config(path), tmp_path / "results", progress=False, recover=True, notify=lambda m: None
    )
    assert summary["resumed_from"] == 1
    assert any("recovered from checkpoint.prev.pt" in n for n in summary["notes"])
    assert (folder / "metrics.csv").read_bytes() == straight


def test_interruption_between_checkpoint_renames_resumes_from_the_previous_one(tmp_path, runs):
    straight = runs["every1.straight"]
    path, folder = _first_run(tmp_path, runs, "every1")
    os.replace(folder / "checkpoint.pt", folder / "checkpoint.prev.pt")  # cut between renames
    summary = runner.run_experiment(load_config(path), tmp_path / "results", progress=False)
    assert summary["resumed_from"] == 2
    assert (folder / "metrics.csv").read_bytes() == straight


def test_checkpoint_holds_only_tensors_and_plain_data(tmp_path, runs):
    _, folder = _first_run(tmp_path, runs)
    raw = torch.load(folder / "checkpoint.pt", weights_only=True)  # would refuse any object
    assert raw["version"] == runner.CHECKPOINT_VERSION and raw["step"] == 2
    with pytest.raises(TypeError, match="cannot store a builtins.object"):
        runner.encode({"state": object()})


def test_a_checkpoint_of_another_config_offers_fresh_and_recover(tmp_path, runs):
    path, folder = _first_run(tmp_path, runs)
    metadata = json.loads((folder / "metadata.json").read_text())
    metadata["config_file"] = str(path.resolve())  # the run as this config file's
    (folder / "metadata.json").write_text(json.dumps(metadata))
    changed = write(tmp_path, {"algorithm.outer_step_size": 0.1})  # the same file, edited
    assert changed == path
    with pytest.raises(ConfigError, match="different config.*--fresh.*--recover"):
        runner.run_experiment(load_config(changed), tmp_path / "results", progress=False)


# ------------------------------------------------------------------------------ metrics.csv


@pytest.mark.parametrize("tear", ["half a row", "a cut number", "one field"])
def test_torn_last_metrics_row_is_repaired_with_a_note(tmp_path, runs, tear):
    straight = runs["every2.straight"]
    path, folder = _first_run(tmp_path, runs)
    metrics = folder / "metrics.csv"
    last = metrics.read_text().splitlines()[-1]
    torn = {
        "half a row": last[: len(last) // 2],
        "a cut number": last[:-3],
        "one field": last.split(",")[0],
    }[tear]
    with metrics.open("a") as handle:
        handle.write(torn.replace("2", "3", 1))  # the start of step 3's row, no newline
    summary = runner.run_experiment(
        load_config(path), tmp_path / "results", progress=False, notify=lambda m: None
    )
    assert any("torn last row" in n and "metrics.csv" in n for n in summary["notes"])
    assert metrics.read_bytes() == straight


def test_a_corrupt_middle_row_names_the_line_and_recover_keeps_the_old_file(tmp_path, runs):
    straight = runs["every2.straight"]
    path, folder = _first_run(tmp_path, runs)
    metrics = folder / "metrics.csv"
    lines = metrics.read_text().splitlines(keepends=True)
    lines[1] = "1,banana," + lines[1].split(",", 2)[2]
    metrics.write_text("".join(lines))
    damaged = metrics.read_bytes()
    with pytest.raises(
        runner.ResultsError,
        match=r"metrics\.csv: line 2 is not a metrics "
        r"row.*--recover",
    ):
        runner.run_experiment(load_config(path), tmp_path / "results", progress=False)
    summary = runner.run_experiment(
        load_config(path), tmp_path / "results", progress=False, recover=True, notify=lambda m: None
    )
    assert summary["resumed_from"] == 0
    assert (folder / "metrics.csv.bad").read_bytes() == damaged
    assert metrics.read_bytes() == straight


def test_missing_metrics_rows_behind_the_checkpoint_are_an_error_then_recovered(tmp_path, runs):
    straight = runs["every2.straight"]
    path, folder = _first_run(tmp_path, runs)
    (folder / "metrics.csv").unlink()
    with pytest.raises(
        runner.ResultsError, match="holds steps 1..0 but .*checkpoint.pt is at step 2"
    ):
        runner.run_experiment(load_config(path), tmp_path / "results", progress=False)
    summary = runner.run_experiment(
        load_config(path), tmp_path / "results", progress=False, recover=True, notify=lambda m: None
    )
    assert summary["resumed_from"] == 0
    assert (folder / "metrics.csv").read_bytes() == straight


def test_interrupted_cli_run_says_how_to_resume_and_resumes_byte_identical(
    tmp_path, runs, capsys, monkeypatch
):
    from testbed_app.experiments.server import ServerExperiment

    straight = runs["every2.straight"]
    original = ServerExperiment.step
    calls = {"n": 0}

    def interrupted(self):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(ServerExperiment, "step", interrupted)
    args = ["run", str(write(tmp_path)), "--results", str(tmp_path / "results"), "--quiet"]
    assert main(args) == 130
    assert "interrupted; rerun the same command to resume" in capsys.readouterr().err
    monkeypatch.setattr(ServerExperiment, "step", original)
    assert main(args) == 0
    metrics = tmp_path / "results" / "runs" / "tiny" / "metrics.csv"
    assert metrics.read_bytes() == straight


# ------------------------------------------------------------------------------ divergence


def test_diverged_run_is_a_status_never_a_number(tmp_path, capsys):
    """Steps of 1e4 (the config limit) blow the MLP's weights up by 1e15 in two steps and to
    inf in three; its loss overflows and its accuracy reads 10% (NaN logits argmax to class
    0). The run stops there and says so."""
    path = write(tmp_path, {"algorithm.outer_step_size": 1e4, "algorithm.inner_step_size": 1e4})
    code = main(["run", str(path), "--results", str(tmp_path / "results"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1 and "diverged at step" in out and "diverged at step" in err
    record = json.loads((tmp_path / "results" / "replication" / "tiny.json").read_text())
    assert record["metadata"]["status"].startswith("diverged at step")
    for row in record["rows"]:
        assert isinstance(row["testbed_value"], str)
        assert row["testbed_value"].startswith("diverged at step")
    metadata = json.loads((tmp_path / "results" / "runs" / "tiny" / "metadata.json").read_text())
    assert metadata["status"].startswith("diverged at step")
    from reports.sections import replication

    section = replication(tmp_path / "results")
    cells = [cell for table in section.tables for row in table.rows for cell in row]
    assert any(str(c).startswith("diverged at step") for c in cells)


def test_final_value_does_not_skip_a_nan_at_the_last_evaluated_row():
    rows = [
        {"step": 1.0, "test_accuracy": 0.5, "r2": 0.4},
        {"step": 2.0, "test_accuracy": 0.1, "r2": math.nan},
        {"step": 3.0, "test_accuracy": math.nan, "r2": math.nan},
    ]
    assert final_value(rows, "r2") is None
    assert final_value(rows, "test_accuracy") == 0.1


def test_partial_replication_record_says_partial(tmp_path, capsys):
    path = write(tmp_path)  # the config's own horizon: 3 steps
    assert (
        main(["run", str(path), "--steps", "2", "--results", str(tmp_path / "r"), "--quiet"]) == 0
    )
    assert "partial: 2 of the config's 3 steps" in capsys.readouterr().out
    record = json.loads((tmp_path / "r" / "replication" / "tiny.json").read_text())
    assert record["metadata"]["status"].startswith("partial: 2 of the config's 3 steps")
    assert all(row["differences"].startswith("PARTIAL RUN") for row in record["rows"])
    assert main(["run", str(path), "--results", str(tmp_path / "r"), "--quiet"]) == 0
    record = json.loads((tmp_path / "r" / "replication" / "tiny.json").read_text())
    assert record["metadata"]["status"] == "completed"


# ------------------------------------------------------------------------------ claim files

CLAIM = "classical.cg.exact_after_dim_y"


def _check(tmp_path: Path) -> int:
    return main(check_argv(tmp_path, [CLAIM], "--quiet", "--profile", "fast"))


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> Path:
    """Results of one quick claim check (a few seconds), copied by the tests below."""
    return checked_folder(tmp_path_factory, [CLAIM])


@pytest.mark.parametrize(
    ("label", "content", "reason"),
    [
        ("empty list", "[]", "not a claim result (a JSON list)"),
        ("keys missing", '{"id": "x", "verdict": "holds"}', "claim is missing"),
        ("torn JSON", '{"id": "classical.cg', "unreadable"),
    ],
)
def test_check_reruns_an_unusable_claim_file_and_names_it(
    tmp_path, checked, capsys, label, content, reason
):
    results = copy_results(checked, tmp_path)
    target = results / "claims" / f"{CLAIM}.json"
    target.write_text(content)
    capsys.readouterr()
    assert _check(results) == 0
    err = capsys.readouterr().err
    assert str(target) in err and reason in err and "rerun" in err
    assert json.loads(target.read_text())["verdict"] == "holds"


def test_report_names_an_unreadable_claim_file_and_shows_it_not_checked(tmp_path, checked, capsys):
    results = copy_results(checked, tmp_path)
    bad = results / "claims" / "classical.neumann.error_bound.json"
    bad.write_text("{torn")
    out_dir = tmp_path / "report"
    assert main(["report", "--results", str(results), "--out", str(out_dir)]) == 0
    err = capsys.readouterr().err
    assert f"{bad}: unreadable" in err
    assert "report: claims and figures" in err  # the build shows its progress
    page = (out_dir / "report.md").read_text()
    assert "classical.neumann.error_bound.json: unreadable" in page
    assert "not checked" in page


def test_truncated_series_csv_is_not_drawn_and_its_claim_not_trusted(tmp_path, checked):
    """A series file cut short (or otherwise changed) is not the one its claim's results were
    written with: the claim is shown "not trusted", without a figure or a number."""
    from reports.build import build_report

    results = copy_results(checked, tmp_path)
    series = results / "series" / f"{CLAIM}.csv"
    text = series.read_text()
    assert text.startswith("claim,estimator,problem_id")
    series.write_text(text[:-4])  # cut in the middle of the last row (an interrupted write)
    build_report(results, tmp_path / "report")
    page = (tmp_path / "report" / "report.md").read_text()
    assert (
        f"{CLAIM}.json: not trusted: series/{CLAIM}.csv differs from the file this result "
        "was written with"
    ) in page
    assert not (tmp_path / "report" / "figures" / f"{CLAIM}.png").exists()


def test_no_test_writes_into_the_report_folder():
    """Tests write only into temporary folders: none names reports/output as a target."""
    here = Path(__file__).resolve().parent
    offenders = [
        p.name
        for p in here.glob("test_*.py")
        if p.name != Path(__file__).name
        and ('"reports" / "output"' in p.read_text() or "reports/output/" in p.read_text())
    ]
    assert not offenders, offenders

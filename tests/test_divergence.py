"""Divergence is reported, not written as a result: the runner's watch of every run's metrics
(``testbed_app.experiments.divergence``) and the influence experiment's phases.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from testbed_app.cli import main
from testbed_app.experiments import runner
from testbed_app.experiments.config import load_config
from testbed_app.experiments.divergence import GRADIENT_GROWTH
from testbed_app.experiments.divergence import LOSS_GROWTH
from testbed_app.experiments.divergence import MetricsWatch
from testbed_app.experiments.divergence import accuracy_collapse
from testbed_app.experiments.divergence import gradient_growth
from testbed_app.experiments.divergence import loss_growth
from tests.test_experiments import write

#: The review's finding: FedNest on the digits MLP at outer step 500 (4 steps: at the fifth the
#: outer iterate has grown 1e12-fold, which the iterate check caught already).
STEP_500 = {"algorithm.outer_step_size": 500.0, "run.steps": 4}


def _replication(results: Path) -> dict:
    return json.loads((results / "replication" / "tiny.json").read_text())


def test_the_step_500_run_passed_as_completed_when_only_the_iterate_was_watched(
    tmp_path, monkeypatch
):
    """The finding, reproduced: with the metrics watch switched off the run ends "completed"
    and its replication row claims the threshold, though the test loss explodes."""
    monkeypatch.setattr(runner.MetricsWatch, "update", lambda self, row: None)
    summary = runner.run_experiment(
        load_config(write(tmp_path, STEP_500)), tmp_path / "r", progress=False
    )
    rows = runner.read_metrics(tmp_path / "r" / "runs" / "tiny" / "metrics.csv")
    assert summary["status"] == "completed" and len(rows) == 4
    assert rows[-1]["test_loss"] > 1e6 * rows[0]["test_loss"] > 1e6
    assert isinstance(_replication(tmp_path / "r")["rows"][0]["testbed_value"], (int, float))


def test_the_step_500_run_stops_as_diverged_with_its_figures(tmp_path, capsys):
    path = write(tmp_path, STEP_500)
    code = main(["run", str(path), "--results", str(tmp_path / "r"), "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "diverged at step" in err and "test_loss" in err and "its value at the start" in err
    meta = json.loads((tmp_path / "r" / "runs" / "tiny" / "metadata.json").read_text())
    assert meta["status"].startswith("diverged at step 2: test_loss = ")
    rows = _replication(tmp_path / "r")["rows"]
    assert rows and all(row["testbed_value"] == "diverged at step 2" for row in rows)
    # no checkpoint of a diverged state (checkpoint_every = 2: step 2 would have written one)
    assert not (tmp_path / "r" / "runs" / "tiny" / "checkpoint.pt").exists()


def test_a_stable_run_is_not_flagged(tmp_path):
    summary = runner.run_experiment(load_config(write(tmp_path)), tmp_path / "r", progress=False)
    assert summary["status"] == "completed"


def test_loss_growth_is_measured_from_the_start_with_a_floor_of_one():
    assert loss_growth("test_loss", 2300.0, 2.3) is None
    reason = loss_growth("test_loss", 2301.0, 2.3)
    assert reason is not None and "2.3e+03" in reason and "1000" in reason
    # a loss that starts near zero is compared with LOSS_GROWTH x 1
    assert loss_growth("outer_loss", LOSS_GROWTH * 0.99, 1e-6) is None
    assert loss_growth("outer_loss", LOSS_GROWTH * 1.01, 1e-6) is not None
    assert loss_growth("outer_loss", 1e9, math.nan) is None  # no reference: no verdict


def test_accuracy_collapse_needs_a_learned_model_first():
    chance = 0.1
    assert accuracy_collapse("test_accuracy", 0.10, 0.12, chance) is None  # never learned
    assert accuracy_collapse("test_accuracy", 0.30, 0.90, chance) is None  # worse, not chance
    reason = accuracy_collapse("test_accuracy", 0.10, 0.90, chance)
    assert reason is not None and "0.9" in reason and "chance 0.1" in reason


def test_gradient_growth_of_a_descent_phase():
    assert gradient_growth("refinement", 0.433, 2.46e-3) is None
    assert gradient_growth("refinement", 0.433, GRADIENT_GROWTH * 0.433 * 0.99) is None
    # the review's TF32 refinement on the H200: 0.433 -> 4793
    reason = gradient_growth("refinement", 0.433, 4793.0)
    assert reason is not None and "1.11e+04x" in reason and "refinement" in reason
    assert "not finite" in str(gradient_growth("retraining 3", 1e-3, math.inf))


def test_the_watch_resumes_from_the_rows_already_written():
    rows = [
        {"step": 1.0, "test_accuracy": 0.92, "test_loss": 0.3},
        {"step": 2.0, "test_accuracy": 0.93, "test_loss": 0.25},
    ]
    resumed = MetricsWatch(0.1, rows=rows)
    assert resumed.update({"step": 3.0, "test_accuracy": 0.1, "test_loss": 0.2}) is not None
    fresh = MetricsWatch(0.1)
    assert fresh.update({"step": 3.0, "test_accuracy": 0.1, "test_loss": 0.2}) is None
    # the experiment's metrics at the starting point are the losses' reference
    started = MetricsWatch(None, initial={"test_loss": 2.3})
    assert "test_loss" in str(started.update({"step": 1.0, "test_loss": 1.1e6}))
    # an unevaluated row (NaN) is no verdict
    assert started.update({"step": 2.0, "test_loss": math.nan}) is None


@pytest.mark.parametrize("key", ["test_accuracy", "hgp_pl_test_accuracy"])
def test_every_test_accuracy_column_is_watched(key):
    watch = MetricsWatch(0.1, rows=[{key: 0.8}])
    assert watch.update({key: 0.1}) is not None

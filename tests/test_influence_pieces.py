"""The influence experiment's long steps: progress and checkpoints inside a step, Ctrl-C keeps
the finished pieces and a rerun says where it resumes, and a diverged phase is reported.

The run is the network variant of ``tests/_influence.py``'s config (an MLP, caps far below
stationarity) with refinement chunks of 2 steps, so its first step has every kind of piece:
training by SGP, three refinement chunks, HGP's estimate and the control retraining; its second
step two retrainings (the first with a jittered twin).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from problems.workloads.spectral import SpectralEstimate
from problems.workloads.spectral import largest_eigenvalue
from testbed_app.cli import main
from testbed_app.experiments import influence
from testbed_app.experiments import influence_curvature
from testbed_app.experiments import runner
from testbed_app.experiments.config import dump_toml
from testbed_app.experiments.step_pieces import StepPieces
from tests._influence import NETWORK
from tests._influence import experiment_config


def _cheap_spectra(monkeypatch) -> None:
    """Refinement chunks of 2 steps (5 steps: chunks 2, 2, 1), and cheap spectral estimates:
    these tests are about the pieces of a step, not the estimates (the power iteration at
    the barely trained model runs to its cap of 300 products, Lanczos to hundreds)."""
    monkeypatch.setattr(influence, "REFINE_CHUNK", 2)
    monkeypatch.setattr(
        influence_curvature,
        "largest_eigenvalue",
        functools.partial(largest_eigenvalue, iterations=10),
    )
    monkeypatch.setattr(
        influence_curvature,
        "smallest_eigenvalue",
        lambda *a, **k: SpectralEstimate(-1e-3, 0, True),
    )


@pytest.fixture
def config(monkeypatch):
    _cheap_spectra(monkeypatch)
    return experiment_config("hgp_influence", workload=NETWORK, run={"steps": 2})


def _metrics(results: Path) -> bytes:
    return (results / "runs" / "hgp-test" / "metrics.csv").read_bytes()


def _interrupt_after(monkeypatch, finished: int) -> list[str]:
    """Ctrl-C right after the ``finished``-th finished piece is checkpointed; returns the
    descriptions seen."""
    seen: list[str] = []
    original = StepPieces.__call__

    def piece(self: StepPieces, description: str, done: bool) -> None:
        original(self, description, done)
        if done:
            seen.append(description)
            if len(seen) == finished:
                raise KeyboardInterrupt

    monkeypatch.setattr(StepPieces, "__call__", piece)
    return seen


def test_the_pieces_of_a_step_are_announced_in_order(config, tmp_path, monkeypatch):
    seen = _interrupt_after(monkeypatch, 10**6)
    summary = runner.run_experiment(config, tmp_path, progress=False)
    assert summary["status"] == "completed" and summary["steps"] == 2
    assert [d.split(":")[0].split(" (")[0] for d in seen] == [
        "training by SGP done",
        "refinement",
        "refinement",
        "refinement",
        "HGP's estimate done",
        "retraining 1 of 4 done",
        "retraining 2 of 4 done",
    ]
    assert seen[1].startswith("refinement: 2 of at most 5 steps, ||grad G|| = ")


@pytest.mark.parametrize(
    ("finished", "phase"),
    [
        (1, "step 1, training by SGP done"),
        (3, "step 1, refinement: 4 of at most 5 steps"),
        (5, "step 1, HGP's estimate done"),
        (6, "step 2, retraining 1 of 4 done"),
    ],
)
def test_ctrl_c_keeps_the_finished_pieces_and_the_rerun_says_where_it_resumes(
    config, tmp_path, monkeypatch, finished, phase
):
    runner.run_experiment(config, tmp_path / "straight", progress=False)
    _interrupt_after(monkeypatch, finished)
    notes: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        runner.run_experiment(config, tmp_path / "cut", progress=False, notify=notes.append)
    assert (
        notes and "the checkpoint holds step" in notes[-1] and "a rerun resumes there" in notes[-1]
    )
    assert (tmp_path / "cut" / "runs" / "hgp-test" / "checkpoint.pt").exists()
    monkeypatch.undo()
    _cheap_spectra(monkeypatch)
    summary = runner.run_experiment(config, tmp_path / "cut", progress=False)
    done = 0 if phase.startswith("step 1") else 1
    assert summary["resumed_from"] == done
    resumed = next(n for n in summary["notes"] if n.startswith("resuming from"))
    assert resumed.startswith(f"resuming from step {done} (phase: {phase}")
    assert _metrics(tmp_path / "cut") == _metrics(tmp_path / "straight")


def test_ctrl_c_before_any_finished_piece_says_nothing_is_saved(config, tmp_path, monkeypatch):
    def stop(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(influence, "train_by_sgp", stop)
    notes: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        runner.run_experiment(config, tmp_path, progress=False, notify=notes.append)
    assert notes[-1].startswith("interrupted during step 1 (training by SGP")
    assert "nothing of this run is checkpointed yet: a rerun starts from step 0" in notes[-1]


def test_a_tf32_like_underestimate_of_lambda_max_stops_the_refinement_as_diverged(
    tmp_path, monkeypatch
):
    """The H200's TF32 run: lambda_max read as 0.003 (CPU: 57.8), so the refinement stepped at
    1/0.003 and ended at ||grad G|| = 4793 from 0.433 with exit 0. Here the power iteration is
    made to return that estimate on the CPU: the run stops as diverged with the figures."""
    _cheap_spectra(monkeypatch)
    monkeypatch.setattr(
        influence_curvature,
        "largest_eigenvalue",
        lambda *a, **k: SpectralEstimate(0.003, 10, True),
    )
    config = experiment_config(
        "hgp_influence", workload={**NETWORK, "train_refine_steps": 50}, run={"steps": 2}
    )
    path = tmp_path / "config.toml"
    path.write_text(dump_toml(config))
    code = main(["run", str(path), "--results", str(tmp_path / "r"), "--quiet"])
    assert code == 1
    meta = json.loads((tmp_path / "r" / "runs" / "hgp-test" / "metadata.json").read_text())
    assert meta["status"].startswith("diverged at step 1: refinement")
    assert "||grad||" in meta["status"] or "not finite" in meta["status"]
    assert meta["steps"] == 0
    assert (tmp_path / "r" / "runs" / "hgp-test" / "metrics.csv").read_text().count("\n") <= 1


def test_an_unstable_retraining_step_stops_the_run_as_diverged(config, tmp_path, monkeypatch):
    original = influence_curvature.InfluenceCurvature.retrain_step

    def unstable(self: Any, lam_max: float) -> tuple[float, float, float]:
        step, beta, bound = original(self, lam_max)
        return 30.0 * bound, beta, bound  # 30x the stable bound

    monkeypatch.setattr(influence_curvature.InfluenceCurvature, "retrain_step", unstable)
    summary = runner.run_experiment(config, tmp_path, progress=False)
    assert summary["status"].startswith("diverged at step 1: control retraining")
    assert summary["steps"] == 0


def test_an_unstable_sgp_training_stops_the_run_as_diverged(tmp_path, monkeypatch):
    _cheap_spectra(monkeypatch)
    config = experiment_config(
        "hgp_influence",
        workload=NETWORK,
        run={"steps": 2},
        algorithm={"inner_step_size": 1e4, "inner_steps": 20},
    )
    summary = runner.run_experiment(config, tmp_path, progress=False)
    assert summary["status"].startswith("diverged at step 1: training by SGP")

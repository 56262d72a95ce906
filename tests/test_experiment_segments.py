"""``testbed run`` through an executor (testbed_app/experiments/segments.py): a run is a chain of
segments between checkpoints, the driver writes every file, and the results do not depend on the
executor or on where a run was interrupted."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from testbed_app import cli
from testbed_app.executors import LocalExecutor
from testbed_app.experiments.config import load_config
from testbed_app.experiments.segments import SegmentResult
from testbed_app.experiments.segments import SegmentTask
from testbed_app.experiments.segments import run_experiments
from testbed_app.experiments.segments import segment_task
from tests._segmented_runs import FIVE_STEPS
from tests._segmented_runs import run_files
from tests._segmented_runs import write_two_configs
from tests.test_executors import fake_ray_executor
from tests.test_experiments import write


@pytest.fixture
def two_configs(tmp_path: Path) -> list[str]:
    return write_two_configs(tmp_path)


def test_jobs_2_writes_the_same_run_files_as_one_process(
    two_configs: list[str], tmp_path: Path
) -> None:
    """Two configs side by side on two spawned processes, each a chain of three segments
    (checkpoints at steps 2 and 4, the end at 5): metrics, checkpoints (the latest and the
    previous), split, config and replication record byte for byte those of the plain run."""
    common = ["run", *two_configs, "--quiet"]
    assert cli.main([*common, "--results", str(tmp_path / "one")]) == 0
    assert cli.main([*common, "--results", str(tmp_path / "two"), "--jobs", "2"]) == 0
    one, two = run_files(tmp_path / "one"), run_files(tmp_path / "two")
    assert {
        "runs/tiny/checkpoint.pt",
        "runs/tiny/checkpoint.prev.pt",
        "runs/tiny/metrics.csv",
        "runs/tiny-b/metrics.csv",
        "replication/tiny-b.json",
    } <= one.keys()
    assert one.keys() == two.keys()
    for name in one:
        assert one[name] == two[name], name


class Chains:
    """An executor running chains in this process that records each segment's task."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.tasks: list[SegmentTask] = []
        self.stop_after = stop_after

    def run(
        self, tasks: Sequence[Callable[[], Any]], then: Callable[[int, Any], Any] | None = None
    ) -> Iterator[tuple[int, Any]]:
        def recorded(index: int, result: Any) -> Any:
            if self.stop_after is not None and len(self.tasks) >= self.stop_after:
                raise KeyboardInterrupt  # the driver is interrupted between two segments
            following = then(index, result) if then else None
            if following is not None:
                self.tasks.append(following)
            return following

        self.tasks += list(tasks)
        yield from LocalExecutor(1).run(tasks, recorded)


def test_segments_end_at_checkpoints_and_an_interrupted_driver_resumes(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FIVE_STEPS))
    cli.main(["run", str(config.path), "--quiet", "--results", str(tmp_path / "plain")])
    chains = Chains(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        run_experiments([config], tmp_path / "chained", chains.run)
    # two segments ran (steps 1-2 and 3-4), each started from the driver's folder as it was
    assert [t.files.keys() >= {"runs/tiny/checkpoint.pt"} for t in chains.tasks] == [False, True]
    interrupted = tmp_path / "chained" / "runs" / "tiny"
    assert len((interrupted / "metrics.csv").read_text().splitlines()) == 1 + 4
    resumed = Chains()
    [summary] = run_experiments([config], tmp_path / "chained", resumed.run)
    assert summary["resumed_from"] == 4 and summary["status"] == "completed"
    assert summary["run_dir"] == interrupted
    assert len(resumed.tasks) == 1  # only step 5 was left
    plain, chained = run_files(tmp_path / "plain"), run_files(tmp_path / "chained")
    assert plain == chained


def test_segment_steps_sets_how_far_a_task_runs(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"run.steps": 6, "run.checkpoint_every": 1}))
    chains = Chains()
    run_experiments([config], tmp_path, chains.run, segment_steps=3)
    assert len(chains.tasks) == 2  # steps 1-3 and 4-6, not six one-step tasks


def test_recover_sets_a_corrupt_checkpoint_aside_as_a_local_run_does(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FIVE_STEPS))
    for where in ("plain", "chained"):
        cli.main(
            ["run", str(config.path), "--quiet", "--steps", "2", "--results", str(tmp_path / where)]
        )
        (tmp_path / where / "runs/tiny/checkpoint.pt").write_bytes(b"not a checkpoint")
    assert (
        cli.main(
            ["run", str(config.path), "--quiet", "--recover", "--results", str(tmp_path / "plain")]
        )
        == 0
    )
    run_experiments([config], tmp_path / "chained", Chains().run, recover=True)
    plain, chained = run_files(tmp_path / "plain"), run_files(tmp_path / "chained")
    assert "runs/tiny/checkpoint.pt.bad" in chained
    assert plain == chained


def test_configs_sharing_a_name_are_refused_side_by_side(tmp_path: Path) -> None:
    config = load_config(write(tmp_path))
    with pytest.raises(
        ValueError, match="2 configs have name = .tiny., so their runs would share one run folder"
    ):
        run_experiments([config, config], tmp_path, Chains().run)


def test_a_cuda_config_asks_the_executor_for_one_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(write(tmp_path))
    on_cpu = segment_task(config, tmp_path)
    on_cuda = dataclasses.replace(
        on_cpu, config=dataclasses.replace(config, run={**config.run, "device": "cuda"})
    )
    assert (on_cpu.gpus, on_cuda.gpus) == (0.0, 1.0)
    executor = fake_ray_executor(monkeypatch, cpus_per_task=2)
    list(executor.run([on_cpu]))  # (no GPU here to run the cuda one on)
    executor.ray.get = lambda ref: None  # submitted, not run
    list(executor.run([on_cuda]))
    assert [(o["num_cpus"], o["num_gpus"]) for o in executor.ray.asked] == [(2, 0.0), (2, 1.0)]


def test_a_segment_returns_only_the_files_it_changed(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FIVE_STEPS))
    first = segment_task(config, tmp_path)()
    assert isinstance(first, SegmentResult) and first.summary["status"] == "paused at step 2"
    assert "runs/tiny/checkpoint.pt" in first.files and first.summary["run_dir"] == "runs/tiny"
    assert "replication/tiny.json" not in first.files  # written at the end only


def test_a_runs_files_do_not_depend_on_what_the_process_drew_before(tmp_path: Path) -> None:
    """Found while making the segments byte-identical: checkpoints held torch's process-wide
    RNG state, which no step draws from, so the same config run after other work (the second
    config of one ``testbed run``, or in a fresh worker) wrote different checkpoint bytes."""
    import torch

    config = str(write(tmp_path, FIVE_STEPS))
    for seed in (1, 2):
        torch.manual_seed(seed)  # the process's torch RNG as earlier work left it
        torch.rand(seed)
        assert cli.main(["run", config, "--quiet", "--results", str(tmp_path / str(seed))]) == 0
    assert run_files(tmp_path / "1") == run_files(tmp_path / "2")


CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", ["hgp_personalization", "hgp_influence_logreg"])
def test_every_experiment_kind_resumes_to_the_same_bytes(name: str, tmp_path: Path) -> None:
    """The HGP experiments (personalization: Adam state; influence) in one-step segments, each
    restored from the previous checkpoint, against one uninterrupted run. Found here: a
    restored optimizer's state keys are fresh string objects, which pickle wrote out again
    instead of referring to the equal key written before, so the checkpoint bytes differed
    (content equal); the checkpoint encoder interns strings. Two steps: the second segment
    starts from a restored state."""
    from testbed_app.experiments.runner import run_experiment

    config = load_config(CONFIGS / f"{name}.toml", {"run.steps": 2, "run.device": None})
    config = dataclasses.replace(config, run={**config.run, "checkpoint_every": 1})
    run_experiment(config, tmp_path / "plain", progress=False)
    chains = Chains()
    run_experiments([config], tmp_path / "chained", chains.run, segment_steps=1)
    assert len(chains.tasks) == 2
    assert run_files(tmp_path / "plain") == run_files(tmp_path / "chained")

"""Executors (testbed_app/executors.py): the driver writes what workers return, and the results
files do not depend on where the work ran."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch

from testbed_app import cli
from testbed_app.executors import RAY_MISSING
from testbed_app.executors import LocalExecutor
from testbed_app.executors import make_executor
from theory_checks.claim_batch import run_claim_runs
from theory_checks.registry import get_claim
from theory_checks.runner import claim_runs
from theory_checks.runner import get_profile
from theory_checks.settings import ExecutorSettings
from theory_checks.settings import RunSettings

#: a claim with two enrolled variants (three runs) and one that fails as stated (a
#: counterexample's JSON and arrays): every kind of results file, in a few seconds
CLAIMS = ("classical.neumann.error_identity", "fedmsa.rho.as_stated")


#: a wall time in a claim's JSON (the run's, its power run's, its positive control's)
TIMING = re.compile(rb'"seconds": [-+.0-9eE]+')


def results_files(folder: Path) -> dict[str, bytes]:
    """Every results file under ``folder`` but ``metadata.json`` (commit, time written), byte
    for byte, with only the wall times in the claim JSONs (different on every run, in one
    process too) replaced by 0: what must not depend on the executor."""
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and relative != "metadata.json":
            files[relative] = TIMING.sub(b'"seconds": 0', path.read_bytes())
    return files


def _square(x: int) -> int:
    return x * x


def _fail() -> int:
    raise RuntimeError("task failed")


def test_local_executor_runs_every_task_in_process() -> None:
    tasks = [partial(_square, i) for i in range(5)]
    assert list(LocalExecutor(1).run(tasks)) == [(i, i * i) for i in range(5)]


def test_a_task_error_in_a_worker_process_reaches_the_driver() -> None:
    # (the pool's results themselves: test_jobs_2_writes_the_same_results_files...)
    with pytest.raises(RuntimeError, match="task failed"):
        list(LocalExecutor(2, threads=1).run([partial(_square, 1), _fail]))


def _settings(*executor: Any, **options: Any) -> RunSettings:
    return RunSettings(executor=ExecutorSettings(*executor, **options))


def test_executor_options_are_checked() -> None:
    with pytest.raises(ValueError, match="--jobs"):
        make_executor(_settings("local", jobs=0))
    with pytest.raises(ValueError, match="--address is for --executor ray"):
        make_executor(_settings("local", address="auto"))
    with pytest.raises(ValueError, match="unknown executor"):
        make_executor(_settings("dask"))


def _worker_state() -> tuple[str, int]:
    return str(torch.get_default_dtype()), torch.get_num_threads()


def test_local_workers_enter_with_the_drivers_settings() -> None:
    """A spawned worker computes under the settings its executor was made with (here float32,
    which the driver of this test does not use), not under torch's defaults: the settings
    travel to the worker and are put in force at its entry, with its own thread count."""
    settings = RunSettings(dtype="float32", executor=ExecutorSettings("local", jobs=2))
    with make_executor(settings, threads=1) as executor:
        got = sorted(state for _, state in executor.run([_worker_state] * 2))
    assert got == [("torch.float32", 1)] * 2
    assert torch.get_default_dtype() == torch.float64  # the driver's own, untouched


def test_executor_ray_without_ray_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    status = cli.main(
        ["check", "--claim", CLAIMS[0], "--executor", "ray", "--results", "unused", "--quiet"]
    )
    assert status == 2
    assert RAY_MISSING in capsys.readouterr().err
    assert "pip install 'hypergradient-testbed[ray]'" in RAY_MISSING


class Recording:
    """An executor that records the tasks it is given and runs them in reverse order."""

    def __init__(self) -> None:
        self.given: list[Any] = []

    def run(self, tasks: Sequence[Callable[[], Any]]) -> Iterator[tuple[int, Any]]:
        self.given += list(tasks)
        for index in reversed(range(len(tasks))):
            yield index, tasks[index]()


def test_the_driver_writes_results_in_any_order_and_skips_finished_runs(tmp_path: Path) -> None:
    torch.set_default_dtype(torch.float64)
    profile = get_profile("fast")
    runs = claim_runs([get_claim(CLAIMS[0])])
    recording = Recording()
    summaries = run_claim_runs(runs, tmp_path, profile, progress=False, execute=recording.run)
    assert [s["id"] for s in summaries] == [
        CLAIMS[0] if e == c.estimators[0] else f"{c.id}@{e}" for c, e in runs
    ]
    assert len(recording.given) == len(runs)
    again = Recording()
    assert run_claim_runs(runs, tmp_path, profile, progress=False, execute=again.run) == summaries
    assert again.given == []  # resumed: nothing left to run


def test_jobs_2_writes_the_same_results_files_as_one_process(tmp_path: Path) -> None:
    """``testbed check --jobs 2`` (two spawned processes, one torch thread each) against the
    in-process run: every file the same byte for byte, but the wall times in the claim JSONs
    and metadata.json (commit, time written)."""
    claims = [arg for claim in CLAIMS for arg in ("--claim", claim)]
    common = ["check", "--profile", "fast", *claims, "--quiet"]
    assert cli.main([*common, "--results", str(tmp_path / "one")]) == 0
    assert cli.main([*common, "--results", str(tmp_path / "two"), "--jobs", "2"]) == 0
    one, two = results_files(tmp_path / "one"), results_files(tmp_path / "two")
    assert any(name.endswith(".npz") for name in one)  # a counterexample was compared too
    assert one.keys() == two.keys()
    for name in one:
        assert one[name] == two[name], name


def test_calibrate_with_jobs_2_writes_the_same_calibration_files(tmp_path: Path) -> None:
    # Why this claim and 3 seeds: the quickest statistical claim (about 0.2 s a seed), and more
    # seeds than workers so records arrive out of order
    claim = "fednest.lemma22.abs_error_per_sample"
    common = ["calibrate", "--claim", claim, "--seeds", "3", "--quiet", "--profile", "fast"]
    assert cli.main([*common, "--results", str(tmp_path / "one")]) in (0, 1)
    assert cli.main([*common, "--results", str(tmp_path / "two"), "--jobs", "2"]) in (0, 1)
    one, two = results_files(tmp_path / "one"), results_files(tmp_path / "two")
    assert one and one == two
    runs = json.loads(one[f"calibration/{claim}.json"])["runs"]
    assert [r["seed"] for r in runs] == [0, 1, 2]


def test_regress_with_jobs_2_writes_the_same_measurements(tmp_path: Path) -> None:
    """``testbed regress`` grid cells (entry x problem seed x problem kind) on two processes:
    the measurements file is the in-process one byte for byte (cells come back in any order
    and are assembled in grid order). Why these entries: an estimator with minibatch variants
    and an algorithm, the quickest of each (a few seconds)."""
    common = ["regress", "--estimator", "lfednest", "--against", "aid-neumann", "--quiet"]
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    assert cli.main([*common, "--out", str(one)]) in (0, 1)
    assert cli.main([*common, "--out", str(two), "--jobs", "2"]) in (0, 1)
    measured = json.loads(one.read_text())["entries"]
    assert set(measured) == {"aid-neumann", "lfednest"}
    assert "log10_variance_mb" in measured["aid-neumann"]["bilevel"]
    assert one.read_bytes() == two.read_bytes()


def test_the_report_tables_through_an_executor_write_the_in_process_files(tmp_path: Path) -> None:
    """The communication and rounds-to-error tables ``testbed check`` measures after the claims:
    their units (an algorithm's row; a comparison's tuning, a table run) on two spawned
    processes give the in-process files byte for byte, and a reversing executor shows the driver
    writes them in table order whatever order they come back in. Why the whole table: 7 s in
    one process on 2 cores; the spawned run adds the workers' start."""
    from testbed_app import communication
    from theory_checks.comparison import table

    torch.set_default_dtype(torch.float64)
    folders = {name: tmp_path / name for name in ("here", "reversed", "two")}
    executors = {"here": None, "reversed": Recording().run, "two": LocalExecutor(2, threads=1).run}
    for name, folder in folders.items():
        table.run_all(folder, progress=False, execute=executors[name])
        communication.write_table(folder, progress=False, execute=executors[name])
    here = results_files(folders["here"])
    assert "comparison/rounds_to_error.json" in here and "communication.json" in here
    assert results_files(folders["reversed"]) == here
    assert results_files(folders["two"]) == here


class FakeRay:
    """Stands in for the ray module: counts init/shutdown, runs each task when it is got."""

    def __init__(self) -> None:
        self.initialized = False
        self.inits = self.shutdowns = 0
        self.asked: list[dict[str, Any]] = []  # each task's resources

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **options: Any) -> None:
        self.initialized, self.inits = True, self.inits + 1

    def shutdown(self) -> None:
        self.initialized, self.shutdowns = False, self.shutdowns + 1

    def remote(self, function: Callable[..., Any]) -> Any:
        asked = self.asked

        class Remote:
            def options(self, **options: Any) -> Any:
                asked.append(options)
                return self

            def remote(self, task: Any, settings: RunSettings, threads: int) -> Any:
                return partial(task)  # a reference: called by get()

        return Remote()

    def wait(self, refs: list[Any], num_returns: int) -> tuple[list[Any], list[Any]]:
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: Any) -> Any:
        return ref()


def fake_ray_executor(monkeypatch: pytest.MonkeyPatch, **options: Any) -> Any:
    """A :class:`RayExecutor` (``options``: its arguments) on :class:`FakeRay`."""
    from testbed_app import executors

    fake = FakeRay()
    monkeypatch.setattr(executors, "import_ray", lambda: fake)
    return executors.RayExecutor(**options)


def test_a_ray_instance_started_for_a_command_serves_all_its_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``testbed check`` runs the claims, then the tables' units: inside ``with executor`` the
    Ray instance it starts is started once and shut down once; outside, once per run."""
    executor = fake_ray_executor(monkeypatch)
    with executor:
        assert list(executor.run([partial(_square, 2)])) == [(0, 4)]
        assert list(executor.run([partial(_square, 3)])) == [(0, 9)]
    assert (executor.ray.inits, executor.ray.shutdowns) == (1, 1)
    list(executor.run([partial(_square, 2)]))
    list(executor.run([partial(_square, 2)]))
    assert (executor.ray.inits, executor.ray.shutdowns) == (3, 3)


def test_chains_continue_under_the_same_index_on_every_executor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``then`` gives the next task of a chain; each executor runs chains to their ends."""

    def then(index: int, result: int) -> Callable[[], int] | None:
        return partial(_square, result) if result < 100 else None  # 2 -> 4 -> 16 -> 256

    expected = {0: [4, 16, 256], 1: [9, 81, 6561]}
    for executor in (LocalExecutor(1), LocalExecutor(2, threads=1), fake_ray_executor(monkeypatch)):
        seen: dict[int, list[int]] = {0: [], 1: []}
        for index, result in executor.run([partial(_square, 2), partial(_square, 3)], then):
            seen[index].append(result)
        assert seen == expected, executor


@pytest.mark.parametrize(
    "command",
    [
        ["check", "--claim", CLAIMS[0], "--results", "unused"],
        ["calibrate", "--seeds", "2", "--results", "unused"],
        ["regress"],
        ["run", "configs/fednest_imbalanced.toml", "--results", "unused"],
    ],
)
def test_a_bad_executor_option_is_one_line_before_any_work(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every command that takes the executor options reports a bad combination on one line,
    exit 2, before a progress bar starts (it did after an empty bar for regress, calibrate and
    run)."""
    status = cli.main([*command, "--jobs", "2", "--executor", "ray"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip() == (
        "testbed: error: --jobs is for --executor local (Ray runs one task per free CPU)"
    )

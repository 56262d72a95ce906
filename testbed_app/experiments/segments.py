"""Experiment runs: a run is a chain of segments between checkpoints, driven from one place.

:func:`run_experiments` is every ``testbed run``: it checks that each config's run folder is its
own, holds the run folders' locks for the whole command, and runs each config as a chain of
segments. A segment is :func:`~testbed_app.experiments.runner.run_experiment`, the one code
that writes a run's files. In this process (``--jobs 1``, the default) each run is one segment,
:class:`InPlaceSegment`: it runs to the end in the run folder itself, with its progress bar.

``testbed run --jobs N`` or ``--executor ray`` runs each config as a chain of
:class:`SegmentTask` s (:mod:`testbed_app.executors`), the chains of different configs side by
side. Such a segment is :func:`~testbed_app.experiments.runner.run_experiment` itself, run in a
private copy of the run folder in a temporary directory of the worker: it resumes from the copy's
checkpoint (with every check and ``--recover`` rule of a local run), runs until it has written a
checkpoint at least ``segment_steps`` steps on (``checkpoint_every`` by default), and returns the
files it changed as bytes. The driver writes them into ``<results>/runs/<name>/`` atomically,
``metrics.csv`` before the checkpoints (a crash between two writes leaves rows ahead of the
checkpoint, which a resumption drops and recomputes), removes the files the segment removed (a
checkpoint ``--recover`` set aside), and sends the next segment with the folder as it now is.

So the results folder lives on the driver's machine only (workers need no shared filesystem);
an interrupted run resumes from the driver's last checkpoint with any executor; and the files
are those of an uninterrupted local run, byte for byte (a resumption recomputes exactly the
steps an uninterrupted run computes), but ``metadata.json`` (times, machine, the step the last
segment resumed from). Workers need the config's dataset: the embedded digits need nothing; a
``[data] root`` folder must exist at the same path on every worker node (a relative path is
taken from the driver's working directory).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format import atomic_write_bytes
from results_format.layout import RUN_CHECKPOINT
from results_format.layout import RUN_METRICS
from results_format.layout import RUNS
from results_format.layout import run_folder
from results_format.locks import LOCK_FOLDER
from results_format.locks import holding
from results_format.paths import inside
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.run_folders import check_run_folders
from testbed_app.experiments.run_folders import remove_run_folder
from testbed_app.experiments.run_folders import run_lock
from testbed_app.experiments.runner import run_experiment

#: Files a segment writes, in the order the driver writes them (the rest after these):
#: rows before checkpoints, the previous checkpoint before the latest.
WRITE_ORDER = (RUN_METRICS, "checkpoint.prev.pt", RUN_CHECKPOINT)


@dataclasses.dataclass(frozen=True)
class SegmentResult:
    """What a segment returns: ``files`` changed or new (path relative to the results root:
    ``runs/<name>/...``, ``replication/<name>.json``), ``present`` every file of the run folder
    after it, and :func:`run_experiment`'s summary (its paths relative to the results root)."""

    files: dict[str, bytes]
    present: frozenset[str]
    summary: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class SegmentTask:
    """One segment of one experiment run, a unit of work for an executor (module docstring).

    Attributes:
        config: the validated config (the driver loaded it; a worker does not read it again).
        files: the run folder's files at the start, ``runs/<name>/...`` -> bytes.
        segment_steps: the segment ends at the first checkpoint this many steps on.
        recover: :func:`run_experiment`'s ``recover`` (the first segment of a ``--recover``
            run only).
        cwd: the driver's working directory: a relative ``[data] root`` is read from there.
    """

    config: ExperimentConfig
    files: dict[str, bytes]
    segment_steps: int
    recover: bool = False
    cwd: str = "."

    @property
    def gpus(self) -> float:
        """A config on ``cuda`` asks the executor for one GPU."""
        return 1.0 if str(self.config.run["device"]).startswith("cuda") else 0.0

    def __call__(self) -> SegmentResult:
        with tempfile.TemporaryDirectory(prefix="testbed-segment-") as tmp:
            root = Path(tmp)
            for relative, data in self.files.items():
                (root / relative).parent.mkdir(parents=True, exist_ok=True)
                (root / relative).write_bytes(data)
            notes: list[str] = []
            here = self.cwd if os.path.isdir(self.cwd) else os.getcwd()
            with contextlib.chdir(here):
                summary = run_experiment(
                    self.config,
                    root,
                    progress=False,
                    recover=self.recover,
                    notify=notes.append,
                    segment_steps=self.segment_steps,
                )
            after = _read_files(root)
        changed = {k: v for k, v in after.items() if self.files.get(k) != v}
        present = frozenset(k for k in after if k.startswith(_run_prefix(self.config)))
        return SegmentResult(changed, present, _relative({**summary, "notes": notes}, root))


@dataclasses.dataclass(frozen=True)
class InPlaceSegment:
    """A run in this process: one segment, to the end, in the driver's run folder itself (the
    files are written where they belong, so none comes back); its notes go to standard error
    as they come and its progress bar shows its steps.

    Attributes:
        config: the validated config.
        results: the results root.
        recover: :func:`run_experiment`'s ``recover``.
        progress: show the run's progress bar.
        fresh: delete the run folder first, once the experiment is built (a config error
            deletes nothing).
    """

    config: ExperimentConfig
    results: Path
    recover: bool = False
    progress: bool = True
    fresh: bool = False

    def __call__(self) -> SegmentResult:
        summary = run_experiment(
            self.config,
            self.results,
            fresh=self.fresh,
            progress=self.progress,
            recover=self.recover,
        )
        folder = run_folder(self.results, self.config.name)
        present = frozenset(
            f"{_run_prefix(self.config)}{path.relative_to(folder).as_posix()}"
            for path in folder.rglob("*")
            if path.is_file()
        )
        return SegmentResult({}, present, _relative({**summary, "notes": []}, self.results))


def _relative(summary: dict[str, Any], root: Path) -> dict[str, Any]:
    """:func:`run_experiment`'s summary with its paths relative to the results root."""
    return {
        **summary,
        "run_dir": Path(summary["run_dir"]).relative_to(root).as_posix(),
        "replication": None
        if summary["replication"] is None
        else Path(summary["replication"]).relative_to(root).as_posix(),
    }


def _run_prefix(config: ExperimentConfig) -> str:
    return f"{RUNS}/{config.name}/"


def _read_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, by path relative to it, but locks (each process holds its
    own; :mod:`results_format.locks`)."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and LOCK_FOLDER not in path.relative_to(root).parts
    }


def run_folder_files(config: ExperimentConfig, results: Path) -> dict[str, bytes]:
    """The driver's run folder of ``config`` as a segment's input."""
    folder = run_folder(Path(results), config.name)
    if not folder.is_dir():
        return {}
    return {f"{_run_prefix(config)}{k}": v for k, v in _read_files(folder).items()}


def write_segment(results: Path, config: ExperimentConfig, result: SegmentResult) -> None:
    """Write a segment's files into the driver's results folder (module docstring)."""

    def rank(relative: str) -> int:
        name = relative.rsplit("/", 1)[-1]
        return WRITE_ORDER.index(name) if name in WRITE_ORDER else len(WRITE_ORDER)

    for relative in sorted(result.files, key=lambda r: (rank(r), r)):
        # a worker names files of its run only (runs/<name>/..., replication/<name>.json)
        target = inside(Path(results), relative, f"a segment of {config.name}")
        atomic_write_bytes(target, result.files[relative])
    folder = run_folder(Path(results), config.name)
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        relative = path.relative_to(results).as_posix()
        if path.is_file() and relative not in result.present:
            path.unlink()  # the segment removed it (a file --recover set aside, now renamed)


def segment_task(
    config: ExperimentConfig, results: Path, segment_steps: int | None = None, recover: bool = False
) -> SegmentTask:
    """The next segment of ``config``'s run from the driver's run folder as it is now."""
    steps = int(segment_steps or config.run["checkpoint_every"])
    return SegmentTask(config, run_folder_files(config, results), steps, recover, os.getcwd())


Execute = Callable[..., Iterable[tuple[int, SegmentResult]]]


def in_order(
    tasks: Sequence[Callable[[], SegmentResult]],
    then: Callable[[int, SegmentResult], Any] | None = None,
) -> Iterator[tuple[int, SegmentResult]]:
    """Run in-place segments one after the other in this process (the executor of a run in
    this process: each run is one segment, so nothing follows one)."""
    for index, task in enumerate(tasks):
        yield index, task()


def run_experiments(
    configs: Sequence[ExperimentConfig],
    results: Path,
    execute: Execute | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """Run ``configs`` (:func:`iter_experiments`); the summaries of their runs, in config
    order."""
    summaries = dict(iter_experiments(configs, results, execute, **options))
    return [summaries[index] for index in range(len(configs))]


def iter_experiments(
    configs: Sequence[ExperimentConfig],
    results: Path,
    execute: Execute | None = None,
    *,
    fresh: bool = False,
    recover: bool = False,
    segment_steps: int | None = None,
    on_segment: Callable[[int, SegmentResult], None] | None = None,
    progress: bool = True,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Run ``configs``; yield ``(index, summary)`` of each run (its last segment's summary,
    paths under ``results``) as its chain ends.

    ``execute`` is an executor's ``run``: the chains side by side, each segment in a private
    copy of the run folder (:class:`SegmentTask`); ``None`` runs each config in this process,
    one after the other, as one segment in its run folder (:class:`InPlaceSegment`, with its
    progress bar when ``progress``). ``fresh`` deletes each run folder first (in this process,
    once its experiment is built: a config error deletes nothing); ``recover`` applies to
    each run's first segment (later ones resume from checkpoints the run itself wrote);
    ``on_segment(index, result)`` is called after each segment's files are written (the
    progress bar)."""
    results = Path(results)
    check_run_folders(configs, results, fresh)  # before any work: nothing deleted on refusal
    # the driver holds every run folder's lock for the whole command
    with holding(results, [run_lock(c, results) for c in configs]):
        if execute is None:
            tasks: list[Callable[[], SegmentResult]] = [
                InPlaceSegment(c, results, recover, progress, fresh) for c in configs
            ]
            yield from _run_chains(configs, results, in_order, tasks, segment_steps, on_segment)
            return
        if fresh:
            for config in configs:
                remove_run_folder(config, results)
        tasks = [segment_task(c, results, segment_steps, recover) for c in configs]
        yield from _run_chains(configs, results, execute, tasks, segment_steps, on_segment)


def _run_chains(
    configs: Sequence[ExperimentConfig],
    results: Path,
    execute: Execute,
    tasks: Sequence[Callable[[], SegmentResult]],
    segment_steps: int | None,
    on_segment: Callable[[int, SegmentResult], None] | None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`iter_experiments` with the run folders checked and locked."""

    def then(index: int, result: SegmentResult) -> SegmentTask | None:
        if not str(result.summary["status"]).startswith("paused"):
            return None
        return segment_task(configs[index], results, segment_steps)

    for index, result in execute(tasks, then):
        write_segment(results, configs[index], result)
        if on_segment is not None:
            on_segment(index, result)
        if not str(result.summary["status"]).startswith("paused"):
            summary = dict(result.summary)
            summary["run_dir"] = results / summary["run_dir"]
            if summary["replication"] is not None:
                summary["replication"] = results / summary["replication"]
            yield index, summary


__all__ = [
    "InPlaceSegment",
    "SegmentResult",
    "SegmentTask",
    "WRITE_ORDER",
    "in_order",
    "iter_experiments",
    "run_experiments",
    "run_folder_files",
    "segment_task",
    "write_segment",
]

"""Experiment runs through an executor: a run is a chain of segments between checkpoints.

``testbed run --jobs N`` or ``--executor ray`` runs each config as a chain of
:class:`SegmentTask` s (:mod:`testbed_app.executors`), the chains of different configs side by
side. A segment is :func:`~testbed_app.experiments.runner.run_experiment` itself, run in a
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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from results_format import atomic_write_bytes
from results_format.locks import LOCK_FOLDER, holding
from results_format.paths import inside
from testbed_app.experiments.base import ExperimentConfig

#: Files a segment writes, in the order the driver writes them (the rest after these):
#: rows before checkpoints, the previous checkpoint before the latest.
WRITE_ORDER = ("metrics.csv", "checkpoint.prev.pt", "checkpoint.pt")


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
        from testbed_app.experiments.runner import run_experiment

        with tempfile.TemporaryDirectory(prefix="testbed-segment-") as tmp:
            root = Path(tmp)
            for relative, data in self.files.items():
                (root / relative).parent.mkdir(parents=True, exist_ok=True)
                (root / relative).write_bytes(data)
            notes: list[str] = []
            here = self.cwd if os.path.isdir(self.cwd) else os.getcwd()
            with contextlib.chdir(here):
                summary = run_experiment(self.config, root, progress=False,
                                         recover=self.recover, notify=notes.append,
                                         segment_steps=self.segment_steps)
            after = _read_files(root)
        changed = {k: v for k, v in after.items() if self.files.get(k) != v}
        present = frozenset(k for k in after if k.startswith(_run_prefix(self.config)))
        summary = {**summary, "notes": notes,
                   "run_dir": Path(summary["run_dir"]).relative_to(root).as_posix(),
                   "replication": None if summary["replication"] is None else
                   Path(summary["replication"]).relative_to(root).as_posix()}
        return SegmentResult(changed, present, summary)


def _run_prefix(config: ExperimentConfig) -> str:
    return f"runs/{config.name}/"


def _read_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, by path relative to it, but locks (each process holds its
    own; :mod:`results_format.locks`)."""
    return {path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and LOCK_FOLDER not in path.relative_to(root).parts}


def run_folder_files(config: ExperimentConfig, results: Path) -> dict[str, bytes]:
    """The driver's run folder of ``config`` as a segment's input."""
    folder = Path(results) / "runs" / config.name
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
    folder = Path(results) / "runs" / config.name
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        relative = path.relative_to(results).as_posix()
        if path.is_file() and relative not in result.present:
            path.unlink()  # the segment removed it (a file --recover set aside, now renamed)


def segment_task(config: ExperimentConfig, results: Path, segment_steps: int | None = None,
                 recover: bool = False) -> SegmentTask:
    """The next segment of ``config``'s run from the driver's run folder as it is now."""
    steps = int(segment_steps or config.run["checkpoint_every"])
    return SegmentTask(config, run_folder_files(config, results), steps, recover,
                       os.getcwd())


Execute = Callable[..., Iterable[tuple[int, SegmentResult]]]


def run_experiments(configs: Sequence[ExperimentConfig], results: Path, execute: Execute, *,
                    fresh: bool = False, recover: bool = False,
                    segment_steps: int | None = None,
                    on_segment: Callable[[int, SegmentResult], None] | None = None,
                    ) -> list[dict[str, Any]]:
    """Run ``configs`` side by side through ``execute`` (an executor's ``run``); the summaries
    of their last segments, in config order, paths under ``results``.

    ``fresh`` deletes the run folders first; ``recover`` applies to each run's first segment
    (later ones resume from checkpoints the run itself wrote); ``on_segment(index, result)`` is
    called after each segment's files are written (the progress bar)."""
    from testbed_app.experiments.runner import check_run_folders, remove_run_folder, run_lock

    results = Path(results)
    check_run_folders(configs, results, fresh)  # before any work: nothing deleted on refusal
    # the driver holds every run folder's lock for the whole command
    with holding(results, [run_lock(c, results) for c in configs]):
        if fresh:
            for config in configs:
                remove_run_folder(config, results)
        return _run_chains(configs, results, execute, recover, segment_steps, on_segment)


def _run_chains(configs: Sequence[ExperimentConfig], results: Path, execute: Execute,
                recover: bool, segment_steps: int | None,
                on_segment: Callable[[int, SegmentResult], None] | None,
                ) -> list[dict[str, Any]]:
    """:func:`run_experiments` with the run folders checked and locked."""
    last: dict[int, SegmentResult] = {}

    def then(index: int, result: SegmentResult) -> SegmentTask | None:
        if not str(result.summary["status"]).startswith("paused"):
            return None
        return segment_task(configs[index], results, segment_steps)

    tasks = [segment_task(c, results, segment_steps, recover) for c in configs]
    for index, result in execute(tasks, then):
        write_segment(results, configs[index], result)
        last[index] = result
        if on_segment is not None:
            on_segment(index, result)
    summaries = []
    for index in range(len(configs)):
        summary = dict(last[index].summary)
        summary["run_dir"] = results / summary["run_dir"]
        if summary["replication"] is not None:
            summary["replication"] = results / summary["replication"]
        summaries.append(summary)
    return summaries


__all__ = ["SegmentResult", "SegmentTask", "WRITE_ORDER", "run_experiments", "run_folder_files",
           "segment_task", "write_segment"]

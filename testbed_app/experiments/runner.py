"""Run an experiment config: results files as it goes, checkpoints, resumption, replication.

:func:`run_experiment` builds the experiment (every error comes before a file is written),
then writes under ``<results>/runs/<name>/`` the files listed in
:mod:`testbed_app.experiments.base`:

- ``config.toml``, ``split.json`` and ``metadata.json`` at the start (metadata again at the end);
- ``metrics.csv``: one row per step, appended and flushed at once (floats written with
  ``repr``, so they read back exactly);
- ``checkpoint.pt`` every ``checkpoint_every`` steps and at the last one, written atomically
  (temporary file, then rename), holding the experiment's :meth:`state_dict` and a fingerprint
  of the config.

A rerun resumes from ``checkpoint.pt`` (unless ``fresh``): metrics rows after the checkpoint's
step, left by an interruption, are dropped and recomputed, so the finished ``metrics.csv`` is
the one an uninterrupted run writes.

A checkpoint is tensors and plain data, read with ``weights_only=True``; the previous one is
kept as ``checkpoint.prev.pt`` until the new one is written and read back. A corrupt or foreign
checkpoint, or a ``metrics.csv`` damaged before its last row, stops the run with the file named
and nothing deleted; ``recover=True`` (``--recover``) sets the bad file aside and resumes from
the last good state. A torn last row of ``metrics.csv`` is dropped and recomputed, with a note.
A step whose iterates or losses are no longer finite, whose losses grow far above their start,
whose accuracy falls to chance, or inside which a phase diverged stops the run as "diverged at
step k: <figures>" (:mod:`testbed_app.experiments.divergence`). An experiment with long steps
(``on_phase``) gets progress and a checkpoint after each finished piece of a step
(:mod:`testbed_app.experiments.step_pieces`); a resumed run says from where ("resuming from step
N (phase: ...)"), and Ctrl-C says what the last checkpoint holds.
A checkpoint written by a different config is refused
(``--steps``, ``--device``, ``checkpoint_every``, the description and the ``[replication]``
table may change between the two). At the end, a
config with a ``[replication]`` table gets ``<results>/replication/<name>.json``.

This module is the entry point and the run loop, the one place a run's files are written: a
run on an executor is a chain of segments, each this loop in a private copy of the run folder
(:mod:`testbed_app.experiments.segments`), and a run in this process is the one-segment case.
``metrics.csv`` is read and written by :mod:`testbed_app.experiments.metrics_csv`, checkpoints
and resumption are :mod:`testbed_app.experiments.checkpoints`, whose run folder a config may use
is :mod:`testbed_app.experiments.run_folders`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from results_format import atomic_write
from results_format import json_default
from results_format.layout import RUN_CHECKPOINT
from results_format.layout import RUN_CONFIG
from results_format.layout import RUN_METADATA
from results_format.layout import RUN_METRICS
from results_format.layout import RUN_SPLIT
from results_format.layout import replication_file
from results_format.locks import holding
from results_format.provenance import provenance
from testbed import plugins
from testbed.precision import set_precision
from testbed.progress import Progress
from testbed.registry import BUILTIN
from testbed.registry import get_estimator
from testbed_app.experiments.base import Experiment
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.base import MetricRow
from testbed_app.experiments.checkpoints import ADVICE
from testbed_app.experiments.checkpoints import CHECKPOINT_VERSION
from testbed_app.experiments.checkpoints import encode
from testbed_app.experiments.checkpoints import resume
from testbed_app.experiments.checkpoints import save_checkpoint
from testbed_app.experiments.checkpoints import set_aside
from testbed_app.experiments.checkpoints import unused_bad_name
from testbed_app.experiments.config_toml import RESUMABLE_CHANGES
from testbed_app.experiments.config_toml import dump_toml
from testbed_app.experiments.config_toml import fingerprint
from testbed_app.experiments.data import load_data
from testbed_app.experiments.data import split_data
from testbed_app.experiments.divergence import Diverged
from testbed_app.experiments.divergence import MetricsWatch
from testbed_app.experiments.errors import CheckpointError
from testbed_app.experiments.errors import ConfigError
from testbed_app.experiments.errors import ResultsError
from testbed_app.experiments.metrics_csv import MetricsWriter
from testbed_app.experiments.metrics_csv import read_metrics
from testbed_app.experiments.metrics_csv import read_metrics_notes
from testbed_app.experiments.metrics_csv import write_metrics
from testbed_app.experiments.registry import build_experiment
from testbed_app.experiments.replication import replication_record
from testbed_app.experiments.run_folders import check_run_folders
from testbed_app.experiments.run_folders import config_file
from testbed_app.experiments.run_folders import folder_owner_problem
from testbed_app.experiments.run_folders import remove_run_folder
from testbed_app.experiments.run_folders import run_dir
from testbed_app.experiments.run_folders import run_lock
from testbed_app.experiments.step_pieces import StepPieces


def _fingerprint_ignores(config: ExperimentConfig) -> tuple[str, ...]:
    """What a checkpoint's config fingerprint leaves out: :data:`RESUMABLE_CHANGES`, and
    ``[run] tf32`` when it is off, so that a config without TF32 keeps the fingerprint it had
    before the key existed (its checkpoints still resume) while a switch either way is refused
    (TF32 changes the numbers)."""
    return RESUMABLE_CHANGES + (() if config.run.get("tf32") else ("run.tf32",))


# ----------------------------------------------------------------------------- metadata


def machine() -> dict[str, Any]:
    """The machine a run computes on, for ``metadata.json``."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        info["cuda_device"] = torch.cuda.get_device_name(0)
    return info


def _metadata(
    config: ExperimentConfig,
    experiment: Experiment,
    started: str,
    resumed_from: int,
    precision: dict[str, Any],
) -> dict[str, Any]:
    describe = getattr(experiment, "describe", None)
    return {
        "experiment": config.name,
        "paper": config.paper,
        "config": str(config.path) if config.path else None,
        "config_file": config_file(config.path) if config.path else None,
        **provenance(),
        "seed": config.run["seed"],
        "device": config.run["device"],
        "dtype": config.run["dtype"],
        "precision": precision,
        "dataset": config.data["dataset"],
        "machine": machine(),
        "started": started,
        "resumed_from_step": resumed_from,
        "experiment_details": describe() if describe else {},
    }


def _split_json(config: ExperimentConfig, experiment: Experiment) -> dict[str, Any]:
    """The experiment's own record of its split (``split_json()``), else the config's split."""
    own = getattr(experiment, "split_json", None)
    if own is not None:
        return dict(own())
    dataset = load_data(config.data)
    split = split_data(config.split, dataset, seed=int(config.run["seed"]))
    return dict(split.to_json(dataset.train_y, dataset.n_classes))


# ----------------------------------------------------------------------------- the run


def _progress_text(row: MetricRow, accuracy: float) -> str:
    """The bar's postfix: what the steps so far cost in communication, and the accuracy."""
    text = f"comm. rounds={int(row['rounds'])} floats sent={row['floats_sent']:.3g}"
    if not math.isnan(accuracy):
        text += f" acc={accuracy:.4f}"
    return text


def _divergence(
    experiment: Experiment, row: MetricRow, watch: MetricsWatch | None = None
) -> str | None:
    """Why this step counts as diverged, or None.

    The experiment's own test first (``divergence()``: non-finite or exploded iterates, a
    phase inside the step that diverged), then the row: an infinite value, or a NaN loss in a
    row that was evaluated (a NaN test accuracy means "not evaluated this step"; a NaN loss
    beside a measured accuracy means the model's outputs are NaN, which argmax reads as class
    0); then ``watch`` (:class:`~testbed_app.experiments.divergence.MetricsWatch`: a loss far
    above its start, an accuracy fallen to chance).
    """
    own = getattr(experiment, "divergence", None)
    if own is not None:
        reason = own()
        if reason:
            return str(reason)
    bad = [key for key, value in row.items() if math.isinf(value)]
    if not math.isnan(row.get("test_accuracy", math.nan)):
        bad += [key for key, value in row.items() if math.isnan(value) and key.endswith("loss")]
    if bad:
        return f"non-finite {', '.join(sorted(set(bad)))}"
    return watch.update(row) if watch is not None else None


# ----------------------------------------------------------------------------- the run


def run_experiment(
    config: ExperimentConfig,
    results_dir: str | Path,
    *,
    fresh: bool = False,
    progress: bool = True,
    recover: bool = False,
    notify: Callable[[str], None] | None = None,
    segment_steps: int | None = None,
) -> dict[str, Any]:
    """Run (or resume) ``config``; write its results under ``results_dir``; return a summary.

    Args:
        config: a validated config (:func:`~testbed_app.experiments.config.load_config`).
        results_dir: the results root (``results/`` by default on the command line).
        fresh: ignore (and delete) an existing checkpoint and metrics.
        progress: show the progress of outer steps (:class:`testbed.progress.Progress`),
            with the communication rounds, accuracy and floats sent so far.
        recover: set a corrupt, foreign or mismatched checkpoint aside (never deleted) and
            resume from the last good one (``checkpoint.prev.pt``), else from step 0; a
            ``metrics.csv`` whose later rows are dropped is first copied aside.
        notify: where notes go (a torn metrics row repaired, a checkpoint set aside, a
            divergence); standard error by default.
        segment_steps: run one segment only: stop after the first checkpoint written at
            least this many steps after the start (status ``"paused at step k"``, no
            replication record); a rerun goes on from there
            (:mod:`testbed_app.experiments.segments`). ``None``: run to the end.

    Returns:
        ``{"name", "run_dir", "steps", "resumed_from", "last_row", "replication", "status",
        "notes"}`` (``replication`` is the written path or ``None``; ``status`` is
        ``"completed"``, ``"partial: k of K steps ..."``, ``"diverged at step k: ..."`` or, with
        ``segment_steps``, ``"paused at step k"``).

    Raises:
        CheckpointError, ResultsError: a results file cannot be used; the message names it
            and the way on (``--recover`` or ``--fresh``).
    """
    notes: list[str] = []

    def note(message: str) -> None:
        notes.append(message)
        if notify is not None:
            notify(message)
        else:
            print(f"{config.name}: {message}", file=sys.stderr)

    results = Path(results_dir)
    with holding(results, [run_lock(config, results)], notify=note), _plugin_failures_named(config):
        run = _open_run(config, results, fresh, recover, note, say_resumed=segment_steps is None)
        status = _step_through(run, progress, segment_steps)
        return _finish(run, results, status, notes)


@contextlib.contextmanager
def _plugin_failures_named(config: ExperimentConfig) -> Iterator[None]:
    """An exception raised in the code of a plugin's algorithm (``[algorithm] name`` an entry
    of an installed package) becomes one line naming the config, the plugin, the algorithm,
    the exception and where it was raised (the steps before it are on disk); any other
    exception, the testbed's own included, passes unchanged."""
    try:
        yield
    except (Exception, SystemExit) as error:
        name = str(config.algorithm.get("name", ""))
        if name in {info.name for info in BUILTIN}:
            raise
        try:
            info = get_estimator(name)
        except KeyError:
            raise error from None
        where = plugins.raised_in(error, plugins.modules_of(info.cls, info.make))
        if where is None:
            raise
        package = next(
            filter(None, (plugins.package_providing(group, name) for group in plugins.GROUPS)), None
        )
        source = f"plugin {package}" if package else "code from outside the testbed"
        raise ConfigError(
            f"{config.path or config.name}: [algorithm] {name} ({source}) raised "
            f"{plugins.describe_failure(error)} (at {where}); the steps before "
            "it are kept"
        ) from error


@dataclasses.dataclass
class _Run:
    """A run as opened by :func:`_open_run`: the experiment resumed at step ``start``, the
    metrics rows kept up to it, and what its files record."""

    config: ExperimentConfig
    folder: Path
    experiment: Experiment
    start: int
    config_hash: str
    metadata: dict[str, Any]
    resumed: str | None  # what the checkpoint on disk holds ("step 4 (phase: ...)"), or None
    note: Callable[[str], None]
    kept: list[MetricRow] = dataclasses.field(default_factory=list)
    tic: float = 0.0  # when the steps of this session began (perf_counter)

    @property
    def checkpoint_path(self) -> Path:
        return self.folder / RUN_CHECKPOINT

    @property
    def metrics_path(self) -> Path:
        return self.folder / RUN_METRICS


def _open_run(
    config: ExperimentConfig,
    results: Path,
    fresh: bool,
    recover: bool,
    note: Callable[[str], None],
    say_resumed: bool,
) -> _Run:
    """Build the experiment (every config error before a file is written), claim the run
    folder, resume from its checkpoint and write the files of the run's start."""
    source = str(config.path) if config.path else config.name
    # the precision policy before anything computes (here, wherever an executor runs this)
    precision = set_precision(bool(config.run.get("tf32", False)))
    try:
        experiment = build_experiment(config, config.run["device"])
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from error
    config_hash = fingerprint(config, ignore=_fingerprint_ignores(config))
    folder = _claim_folder(config, results, fresh)
    metrics_path = folder / RUN_METRICS
    rows = _read_rows(metrics_path, recover, note)
    experiment, start = resume(
        experiment, config, folder / RUN_CHECKPOINT, rows, config_hash, source, recover, note
    )
    kept = [r for r in rows if r["step"] <= start]
    if recover and len(kept) < len(rows) and metrics_path.exists():
        backup = unused_bad_name(metrics_path)
        shutil.copy2(metrics_path, backup)
        note(
            f"metrics.csv rows after step {start} are recomputed; the old file is kept as "
            f"{backup.name}"
        )
    phase = getattr(experiment, "phase", None)  # the finished pieces of a step under way
    resumed = f"step {start}" + (f" (phase: {phase})" if phase else "")
    if (start > 0 or phase) and say_resumed:
        note(f"resuming from {resumed}")
    metadata = _metadata(config, experiment, time.strftime("%Y-%m-%dT%H:%M:%S"), start, precision)
    run = _Run(
        config,
        folder,
        experiment,
        start,
        config_hash,
        metadata,
        resumed if start > 0 or phase else None,
        note,
        kept,
    )
    _write_start_files(run)
    run.tic = time.perf_counter()
    return run


def _claim_folder(config: ExperimentConfig, results: Path, fresh: bool) -> Path:
    """The run folder, created: deleted first with ``fresh``; refused when it is another
    config's (:func:`~testbed_app.experiments.run_folders.folder_owner_problem`)."""
    if fresh:
        remove_run_folder(config, results)
    else:
        problem = folder_owner_problem(config, results, fresh=False)
        if problem is not None:
            raise ConfigError(problem)
    folder = run_dir(config, results)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _read_rows(metrics_path: Path, recover: bool, note: Callable[[str], None]) -> list[MetricRow]:
    """The rows of ``metrics.csv`` (a torn last row dropped with a note); a damaged file stops
    the run, or with ``recover`` is set aside."""
    try:
        rows, repaired = read_metrics_notes(metrics_path)
    except ResultsError as error:
        if not recover:
            raise ResultsError(f"{error}. {ADVICE}") from None
        rows, repaired = [], [f"{error}; set aside as {set_aside(metrics_path).name}"]
    for message in repaired:
        note(message)
    return rows


def _write_start_files(run: _Run) -> None:
    """``metadata.json`` (first: :func:`~testbed_app.experiments.run_folders.check_run_folders`
    reads it), ``config.toml``, ``split.json``, and ``metrics.csv`` up to the resumed step (rows
    after the checkpoint, left by an interruption, are recomputed)."""
    folder, config = run.folder, run.config
    atomic_write(folder / RUN_METADATA, json.dumps(run.metadata, indent=2, default=json_default))
    atomic_write(folder / RUN_CONFIG, dump_toml(config))
    atomic_write(
        folder / RUN_SPLIT, json.dumps(_split_json(config, run.experiment), default=json_default)
    )
    write_metrics(run.metrics_path, run.kept)


def _step_through(run: _Run, progress: bool, segment_steps: int | None) -> str:
    """Steps ``start + 1 ..`` of the run: each row appended to ``metrics.csv``, a checkpoint
    every ``checkpoint_every`` steps and at the last; the run's status."""
    config, experiment = run.config, run.experiment
    steps, every = int(config.run["steps"]), int(config.run["checkpoint_every"])
    bar = Progress(
        total=steps,
        initial=min(run.start, steps),
        desc=f"{config.name}: outer steps",
        unit="step",
        enabled=progress,
    )
    writer = MetricsWriter(run.metrics_path)
    watch = MetricsWatch(
        getattr(experiment, "chance_accuracy", None),
        getattr(experiment, "initial_metrics", None),
        run.kept,
    )

    def checkpoint(done: int) -> None:
        save_checkpoint(run.checkpoint_path, experiment, done, run.config_hash, writer.digest(done))

    pieces = StepPieces(bar, checkpoint, saved=run.resumed)
    phased = hasattr(experiment, "on_phase")  # long steps: progress and checkpoints inside
    if phased:
        experiment.on_phase = pieces  # type: ignore[attr-defined]
    accuracy, status = math.nan, "completed"
    try:
        for step in range(run.start + 1, steps + 1):
            pieces.step = step
            row, reason = _one_step(run, step, writer, watch)
            if reason is not None:
                status = f"diverged at step {step}: {reason}"
                run.note(status)
                break
            if not math.isnan(row.get("test_accuracy", math.nan)):
                accuracy = row["test_accuracy"]
            bar.update(1)
            bar.set_postfix_str(_progress_text(row, accuracy))
            if step % every == 0 or step == steps or phased:
                checkpoint(step)
                pieces.step_saved(step)
                if segment_steps is not None and step - run.start >= segment_steps and step < steps:
                    status = f"paused at step {step}"
                    break
    except KeyboardInterrupt:
        run.note(pieces.interrupted())
        raise
    finally:
        writer.close()
        bar.close()
        if phased:
            experiment.on_phase = None  # type: ignore[attr-defined]
    return status


def _one_step(
    run: _Run, step: int, writer: MetricsWriter, watch: MetricsWatch
) -> tuple[MetricRow, str | None]:
    """Step ``step``: its row, appended to ``metrics.csv``, and why it diverged (a phase inside
    the step, which leaves no row, or the row itself), or None. No checkpoint is written of a
    diverged state: a rerun recomputes up to here and stops."""
    try:
        row = run.experiment.step()
    except Diverged as error:  # a phase inside the step: no row for it
        return {}, str(error)
    if int(row["step"]) != step:
        raise RuntimeError(
            f"{run.config.name}: experiment reported step {row['step']} at step {step}"
        )
    writer.append(row)
    return row, _divergence(run.experiment, row, watch)


def _finish(run: _Run, results: Path, status: str, notes: list[str]) -> dict[str, Any]:
    """The run's end: its status (partial when it stopped short of the config's own
    horizon), the final ``metadata.json``, the replication record; the summary."""
    config, metadata = run.config, run.metadata
    steps = int(config.run["steps"])
    rows = [r for r in read_metrics(run.metrics_path) if r["step"] <= steps]
    horizon = config.horizon if config.horizon is not None else steps
    if status == "completed" and len(rows) < horizon:
        status = (
            f"partial: {len(rows)} of the config's {horizon} steps (--steps {steps}); "
            "rerun without --steps to complete it"
        )
    metadata.update(
        {
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "seconds_this_session": time.perf_counter() - run.tic,
            "steps": len(rows),
            "status": status,
        }
    )
    atomic_write(run.folder / RUN_METADATA, json.dumps(metadata, indent=2, default=json_default))
    replication = None
    if config.replication is not None and not status.startswith("paused"):
        record = replication_record(
            config,
            rows,
            {
                "dataset": config.data["dataset"],
                "device": config.run["device"],
                "dtype": config.run["dtype"],
                "commit": metadata["git_commit"],
                "config": metadata["config"],
                "n_clients": config.split["n_clients"],
                "steps": len(rows),
                "algorithm": config.algorithm["name"],
            },
            status=status,
        )
        replication = replication_file(results, config.name)
        atomic_write(replication, json.dumps(record, indent=2, default=json_default))
    return {
        "name": config.name,
        "run_dir": run.folder,
        "steps": len(rows),
        "resumed_from": run.start,
        "last_row": rows[-1] if rows else None,
        "replication": replication,
        "status": status,
        "notes": notes,
    }


__all__ = [
    "CHECKPOINT_VERSION",
    "CheckpointError",
    "MetricsWatch",
    "RESUMABLE_CHANGES",
    "ResultsError",
    "check_run_folders",
    "encode",
    "machine",
    "read_metrics",
    "run_dir",
    "run_experiment",
    "run_lock",
]

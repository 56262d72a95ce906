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

This module is the entry point and the run loop; ``metrics.csv`` is read and written by
:mod:`testbed_app.experiments.metrics_csv`, checkpoints and resumption are
:mod:`testbed_app.experiments.checkpoints`. Their names are re-exported here.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from results_format import atomic_write, json_default
from results_format.locks import holding
from results_format.paths import plain_name
from results_format.provenance import provenance
from testbed.precision import set_precision
from testbed_app.experiments.base import Experiment, ExperimentConfig, MetricRow
from testbed_app.experiments.checkpoints import (  # noqa: F401
    _CLASS_PACKAGES,
    _TAG,
    ADVICE,
    CHECKPOINT_VERSION,
    _checkpoint_content,
    _class_name,
    _contiguous,
    _resolve,
    _resume,
    _set_aside,
    _unused_bad_name,
    decode,
    encode,
    load_checkpoint,
    previous_checkpoint,
    save_checkpoint,
)
from testbed_app.experiments.config import (
    ConfigError,
    dump_toml,
    fingerprint,
    load_data,
    split_data,
)
from testbed_app.experiments.divergence import Diverged, MetricsWatch
from testbed_app.experiments.metrics_csv import (  # noqa: F401
    CheckpointError,
    ResultsError,
    _format,
    _MetricsWriter,
    _write_metrics,
    read_metrics,
    read_metrics_notes,
)
from testbed_app.experiments.registry import build_experiment
from testbed_app.experiments.replication import replication_record
from testbed_app.experiments.step_pieces import StepPieces

#: Config keys that may change between an interrupted run and its resumption: those that do
#: not change the computed metrics (the paper's numbers and texts, where and how long it runs).
RESUMABLE_CHANGES: tuple[str, ...] = ("description", "replication", "run.steps", "run.device",
                                      "run.checkpoint_every")


def _fingerprint_ignores(config: ExperimentConfig) -> tuple[str, ...]:
    """What a checkpoint's config fingerprint leaves out: :data:`RESUMABLE_CHANGES`, and
    ``[run] tf32`` when it is off, so that a config without TF32 keeps the fingerprint it had
    before the key existed (its checkpoints still resume) while a switch either way is refused
    (TF32 changes the numbers)."""
    return RESUMABLE_CHANGES + (() if config.run.get("tf32") else ("run.tf32",))


def run_dir(config: ExperimentConfig, results: Path) -> Path:
    """``<results>/runs/<name>``; a name that is not a plain folder name is refused."""
    source = str(config.path) if config.path else "<config>"
    return Path(results) / "runs" / plain_name(config.name, f"{source}: name")


def run_lock(config: ExperimentConfig, results: Path) -> tuple[str, str]:
    """The lock of ``config``'s run folder (:mod:`results_format.locks`)."""
    return f"run-{config.name}", f"the run folder {run_dir(config, results)}"


def _same_file(recorded: str, path: Path) -> bool:
    """Whether ``recorded`` (the config path a run recorded) is the config file ``path``: one
    of the same file name (``a.toml`` is not ``b.toml``; a results folder copied with its
    configs to another checkout, where the paths differ, stays its configs')."""
    return Path(recorded).name == Path(path).name


def folder_owner_problem(config: ExperimentConfig, results: Path, fresh: bool) -> str | None:
    """Why ``config`` may not use (``fresh``: delete) its run folder: its recorded
    ``config.toml`` is not this config and its ``metadata.json`` records another config file
    (by file name: an edited config stays its folder's, ``b.toml`` of the same ``name`` does
    not); with ``fresh``, also a folder the testbed cannot tell is this config's (no readable
    metadata, or no config path to compare)."""
    folder = run_dir(config, results)
    if not folder.exists():
        return None
    if not folder.is_dir():
        return f"{folder} is a file, not a run folder; move it away"
    try:
        if (folder / "config.toml").read_text() == dump_toml(config):
            return None  # the config as recorded is the config being run
    except (OSError, UnicodeDecodeError):
        pass
    try:
        recorded = json.loads((folder / "metadata.json").read_text()).get("config")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        recorded = None
    if isinstance(recorded, str) and config.path is not None:
        if _same_file(recorded, Path(config.path)):
            return None
        return (f"{folder} holds the run of {recorded}, not of {config.path} (both configs have "
                f"name = {config.name!r}); give one of them another name, or move the folder "
                "away. Nothing was deleted")
    if fresh and (recorded is not None or config.path is not None):
        return (f"--fresh: {folder} is not recorded as a run of {config.path or config.name} "
                "(its metadata.json names no config file); delete it by hand if it should go. "
                "Nothing was deleted")
    return None


def check_run_folders(configs: Sequence[ExperimentConfig], results: Path, fresh: bool) -> None:
    """Before any work: no two configs share a run folder, and each run folder is its
    config's (:func:`folder_owner_problem`); :class:`ConfigError` naming both otherwise."""
    by_name: dict[str, list[ExperimentConfig]] = {}
    for config in configs:
        run_dir(config, results)  # the name is a plain folder name
        by_name.setdefault(config.name, []).append(config)
    for name, group in by_name.items():
        if len(group) > 1:
            files = ", ".join(str(c.path or "<config>") for c in group)
            raise ConfigError(f"{files}: {len(group)} configs have name = {name!r}, so their "
                              "runs would share one run folder; give each its own name")
    for config in configs:
        problem = folder_owner_problem(config, results, fresh)
        if problem is not None:
            raise ConfigError(problem)


def remove_run_folder(config: ExperimentConfig, results: Path) -> None:
    """``--fresh``: delete ``config``'s run folder, only when it is this config's
    (:func:`folder_owner_problem`; :class:`ConfigError` otherwise, nothing deleted)."""
    problem = folder_owner_problem(config, results, fresh=True)
    if problem is not None:
        raise ConfigError(problem)
    folder = run_dir(config, results)
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)
    elif folder.is_symlink():
        folder.unlink()  # the link, never what it points to


# ----------------------------------------------------------------------------- metadata


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "processor": platform.processor(),
                            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                            "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["cuda_device"] = torch.cuda.get_device_name(0)
    return info


def _metadata(config: ExperimentConfig, experiment: Experiment, started: str,
              resumed_from: int, precision: dict[str, Any]) -> dict[str, Any]:
    describe = getattr(experiment, "describe", None)
    return {
        "experiment": config.name, "paper": config.paper,
        "config": str(config.path) if config.path else None,
        **provenance(), "seed": config.run["seed"], "device": config.run["device"],
        "dtype": config.run["dtype"], "precision": precision, "dataset": config.data["dataset"],
        "machine": machine(), "started": started, "resumed_from_step": resumed_from,
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


def _divergence(experiment: Experiment, row: MetricRow,
                watch: MetricsWatch | None = None) -> str | None:
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


def run_experiment(config: ExperimentConfig, results_dir: str | Path, *, fresh: bool = False,
                   progress: bool = True, recover: bool = False,
                   notify: Callable[[str], None] | None = None,
                   segment_steps: int | None = None) -> dict[str, Any]:
    """Run (or resume) ``config``; write its results under ``results_dir``; return a summary.

    Args:
        config: a validated config (:func:`~testbed_app.experiments.config.load_config`).
        results_dir: the results root (``results/`` by default on the command line).
        fresh: ignore (and delete) an existing checkpoint and metrics.
        progress: show a tqdm bar of outer steps, with the communication rounds, accuracy and
            floats sent so far.
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
    folder = run_dir(config, results)
    with holding(results, [run_lock(config, results)], notify=note):
        return _run_locked(config, results, folder, fresh, progress, recover, note,
                           segment_steps, notes)


def _run_locked(config: ExperimentConfig, results: Path, folder: Path, fresh: bool,
                progress: bool, recover: bool, note: Callable[[str], None],
                segment_steps: int | None, notes: list[str]) -> dict[str, Any]:
    """:func:`run_experiment` with the run folder locked."""
    from tqdm import tqdm

    device = config.run["device"]
    source = str(config.path) if config.path else config.name
    # the precision policy before anything computes (here, wherever an executor runs this)
    precision = set_precision(bool(config.run.get("tf32", False)))
    try:
        experiment = build_experiment(config, device)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from error
    config_hash = fingerprint(config, ignore=_fingerprint_ignores(config))
    checkpoint_path, metrics_path = folder / "checkpoint.pt", folder / "metrics.csv"
    if fresh:
        remove_run_folder(config, results)
    else:
        problem = folder_owner_problem(config, results, fresh=False)
        if problem is not None:
            raise ConfigError(problem)
    folder.mkdir(parents=True, exist_ok=True)

    try:
        rows, repaired = read_metrics_notes(metrics_path)
    except ResultsError as error:
        if not recover:
            raise ResultsError(f"{error}. {ADVICE}") from None
        rows, repaired = [], [f"{error}; set aside as {_set_aside(metrics_path).name}"]
    for message in repaired:
        note(message)
    experiment, start = _resume(experiment, config, checkpoint_path, rows, config_hash, source,
                                recover, note)
    kept = [r for r in rows if r["step"] <= start]
    if recover and len(kept) < len(rows) and metrics_path.exists():
        backup = _unused_bad_name(metrics_path)
        shutil.copy2(metrics_path, backup)
        note(f"metrics.csv rows after step {start} are recomputed; the old file is kept as "
             f"{backup.name}")
    phase = getattr(experiment, "phase", None)  # the finished pieces of a step under way
    resumed = f"step {start}" + (f" (phase: {phase})" if phase else "")
    if (start > 0 or phase) and segment_steps is None:
        note(f"resuming from {resumed}")

    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    metadata = _metadata(config, experiment, started, start, precision)
    # the record of whose folder this is first (check_run_folders reads it)
    atomic_write(folder / "metadata.json", json.dumps(metadata, indent=2, default=json_default))
    atomic_write(folder / "config.toml", dump_toml(config))
    atomic_write(folder / "split.json",
                  json.dumps(_split_json(config, experiment), default=json_default))
    # rows after the checkpoint (an interruption between two checkpoints) are recomputed
    _write_metrics(metrics_path, kept)

    steps, every = int(config.run["steps"]), int(config.run["checkpoint_every"])
    tic = time.perf_counter()
    accuracy = math.nan
    status = "completed"
    bar = tqdm(total=steps, initial=min(start, steps), desc=f"{config.name}: outer steps",
               unit="step", disable=not progress)
    writer = _MetricsWriter(metrics_path)
    watch = MetricsWatch(getattr(experiment, "chance_accuracy", None),
                         getattr(experiment, "initial_metrics", None), kept)
    pieces = StepPieces(bar, lambda done: save_checkpoint(checkpoint_path, experiment, done,
                                                          config_hash, writer.digest(done)),
                        saved=resumed if start > 0 or phase else None)
    phased = hasattr(experiment, "on_phase")  # long steps: progress and checkpoints inside
    if phased:
        experiment.on_phase = pieces  # type: ignore[attr-defined]
    try:
        for step in range(start + 1, steps + 1):
            pieces.step = step
            try:
                row = experiment.step()
            except Diverged as error:  # a phase inside the step: no row for it
                status = f"diverged at step {step}: {error}"
                note(status)
                break
            if int(row["step"]) != step:
                raise RuntimeError(f"{config.name}: experiment reported step {row['step']} "
                                   f"at step {step}")
            writer.append(row)
            reason = _divergence(experiment, row, watch)
            if reason is not None:
                # no checkpoint of a diverged state: a rerun recomputes up to here and stops
                status = f"diverged at step {step}: {reason}"
                note(status)
                break
            if not math.isnan(row.get("test_accuracy", math.nan)):
                accuracy = row["test_accuracy"]
            bar.update(1)
            bar.set_postfix_str(_progress_text(row, accuracy))
            if step % every == 0 or step == steps or phased:
                save_checkpoint(checkpoint_path, experiment, step, config_hash,
                                writer.digest(step))
                pieces.step_saved(step)
                if segment_steps is not None and step - start >= segment_steps and \
                        step < steps:
                    status = f"paused at step {step}"
                    break
    except KeyboardInterrupt:
        note(pieces.interrupted())
        raise
    finally:
        writer.close()
        bar.close()
        if phased:
            experiment.on_phase = None  # type: ignore[attr-defined]

    rows = [r for r in read_metrics(metrics_path) if r["step"] <= steps]
    horizon = config.horizon if config.horizon is not None else steps
    if status == "completed" and len(rows) < horizon:
        status = (f"partial: {len(rows)} of the config's {horizon} steps (--steps {steps}); "
                  "rerun without --steps to complete it")
    metadata.update({"finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
                     "seconds_this_session": time.perf_counter() - tic, "steps": len(rows),
                     "status": status})
    atomic_write(folder / "metadata.json", json.dumps(metadata, indent=2, default=json_default))
    replication = None
    if config.replication is not None and not status.startswith("paused"):
        record = replication_record(config, rows, {
            "dataset": config.data["dataset"], "device": device, "dtype": config.run["dtype"],
            "commit": metadata["git_commit"], "config": metadata["config"],
            "n_clients": config.split["n_clients"], "steps": len(rows),
            "algorithm": config.algorithm["name"]}, status=status)
        replication = results / "replication" / f"{config.name}.json"
        atomic_write(replication, json.dumps(record, indent=2, default=json_default))
    return {"name": config.name, "run_dir": folder, "steps": len(rows), "resumed_from": start,
            "last_row": rows[-1] if rows else None, "replication": replication,
            "status": status, "notes": notes}

"""Run an experiment config: results files as it goes, checkpoints, resumption, replication.

:func:`run_experiment` builds the experiment (every error comes before a file is written),
then writes under ``<results>/runs/<name>/`` the files listed in
:mod:`testbed.experiments.base`:

- ``config.toml``, ``split.json`` and ``metadata.json`` at the start (metadata again at the end);
- ``metrics.csv``: one row per step, appended and flushed at once (floats written with
  ``repr``, so they read back exactly);
- ``checkpoint.pt`` every ``checkpoint_every`` steps and at the last one, written atomically
  (temporary file, then rename), holding the experiment's :meth:`state_dict` and a fingerprint
  of the config.

A rerun resumes from ``checkpoint.pt`` (unless ``fresh``): metrics rows after the checkpoint's
step, left by an interruption, are dropped and recomputed, so the finished ``metrics.csv`` is
the one an uninterrupted run writes. A checkpoint written by a different config is refused
(``--rounds``, ``--device``, ``checkpoint_every``, the description and the ``[replication]``
table may change between the two). At the end, a
config with a ``[replication]`` table gets ``<results>/replication/<name>.json``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from testbed.experiments.base import Experiment, ExperimentConfig, MetricRow
from testbed.experiments.config import (
    ConfigError,
    dump_toml,
    fingerprint,
    load_data,
    split_data,
)
from testbed.experiments.registry import build_experiment
from testbed.experiments.replication import replication_record
from theory_checks.runner import _atomic_write, _json_default, git_commit, package_versions

#: Config keys that may change between an interrupted run and its resumption: those that do
#: not change the computed metrics (the paper's numbers and texts, where and how long it runs).
RESUMABLE_CHANGES: tuple[str, ...] = ("description", "replication", "run.rounds", "run.device",
                                      "run.checkpoint_every")

CHECKPOINT_VERSION = 1


def run_dir(config: ExperimentConfig, results: Path) -> Path:
    return Path(results) / "runs" / config.name


# ----------------------------------------------------------------------------- metrics.csv


def _format(value: float) -> str:
    """Integers without a decimal point; other floats as ``repr`` (exact round trip)."""
    if math.isfinite(value) and float(value).is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(float(value))


def read_metrics(path: Path) -> list[MetricRow]:
    """The rows of a ``metrics.csv`` as floats (an absent file has none)."""
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return [{key: float(value) for key, value in row.items()}
                for row in csv.DictReader(handle)]


def _write_metrics(path: Path, rows: Sequence[MetricRow]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as handle:
        if rows:
            writer = csv.writer(handle)
            writer.writerow(list(rows[0]))
            writer.writerows([_format(v) for v in row.values()] for row in rows)
    os.replace(tmp, path)


class _MetricsWriter:
    """Appends rows to ``metrics.csv`` and flushes after each; the header comes from row 1."""

    def __init__(self, path: Path) -> None:
        self.path = path
        existing = read_metrics(path)
        self.columns: list[str] | None = list(existing[0]) if existing else None
        self.handle = path.open("a", newline="")
        self.writer = csv.writer(self.handle)

    def append(self, row: MetricRow) -> None:
        if self.columns is None:
            self.columns = list(row)
            self.writer.writerow(self.columns)
        if set(row) != set(self.columns):
            raise ValueError(f"metrics row has columns {sorted(row)}, the file has "
                             f"{sorted(self.columns)}")
        self.writer.writerow([_format(row[key]) for key in self.columns])
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


# ----------------------------------------------------------------------------- checkpoints


def save_checkpoint(path: Path, experiment: Experiment, step: int, config_hash: str) -> None:
    """``checkpoint.pt``, atomically: a reader sees the old file or the new one, never half."""
    tmp = path.with_suffix(".pt.tmp")
    torch.save({"version": CHECKPOINT_VERSION, "step": step, "fingerprint": config_hash,
                "experiment": experiment.state_dict()}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path, device: str) -> dict[str, Any]:
    # weights_only=False: the checkpoint holds the algorithm's state objects (named tuples,
    # dataclasses) and numpy generator states; it is a file this runner wrote itself.
    checkpoint = torch.load(path, map_location=device, weights_only=False)
    if checkpoint.get("version") != CHECKPOINT_VERSION:
        raise ConfigError(f"{path}: checkpoint format {checkpoint.get('version')!r}, expected "
                          f"{CHECKPOINT_VERSION}; rerun with --fresh")
    return dict(checkpoint)


# ----------------------------------------------------------------------------- metadata


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "processor": platform.processor(),
                            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                            "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["cuda_device"] = torch.cuda.get_device_name(0)
    return info


def _metadata(config: ExperimentConfig, experiment: Experiment, started: str,
              resumed_from: int) -> dict[str, Any]:
    describe = getattr(experiment, "describe", None)
    return {
        "experiment": config.name, "paper": config.paper,
        "config": str(config.path) if config.path else None,
        "git_commit": git_commit(), "versions": package_versions(),
        "seed": config.run["seed"], "device": config.run["device"],
        "dtype": config.run["dtype"], "dataset": config.data["dataset"],
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
    text = f"rounds={int(row['rounds'])} floats={row['floats_sent']:.3g}"
    if not math.isnan(accuracy):
        text += f" acc={accuracy:.4f}"
    return text


def run_experiment(config: ExperimentConfig, results_dir: str | Path, *, fresh: bool = False,
                   progress: bool = True) -> dict[str, Any]:
    """Run (or resume) ``config``; write its results under ``results_dir``; return a summary.

    Args:
        config: a validated config (:func:`~testbed.experiments.config.load_config`).
        results_dir: the results root (``results/`` by default on the command line).
        fresh: ignore (and delete) an existing checkpoint and metrics.
        progress: show a tqdm bar with rounds, accuracy and floats sent so far.

    Returns:
        ``{"name", "run_dir", "steps", "resumed_from", "last_row", "replication"}``
        (``replication`` is the written path or ``None``).
    """
    from tqdm import tqdm

    results = Path(results_dir)
    folder = run_dir(config, results)
    device = config.run["device"]
    source = str(config.path) if config.path else config.name
    try:
        experiment = build_experiment(config, device)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from error
    config_hash = fingerprint(config, ignore=RESUMABLE_CHANGES)
    checkpoint_path, metrics_path = folder / "checkpoint.pt", folder / "metrics.csv"
    if fresh and folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)

    start = 0
    if checkpoint_path.exists():
        checkpoint = load_checkpoint(checkpoint_path, device)
        if checkpoint["fingerprint"] != config_hash:
            raise ConfigError(f"{checkpoint_path} was written by a different config than "
                              f"{source}; rerun with --fresh to start over")
        experiment.load_state_dict(checkpoint["experiment"])
        start = int(checkpoint["step"])
    # rows after the checkpoint (an interruption between two checkpoints) are recomputed
    _write_metrics(metrics_path, [r for r in read_metrics(metrics_path) if r["step"] <= start])

    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    metadata = _metadata(config, experiment, started, start)
    _atomic_write(folder / "config.toml", dump_toml(config))
    _atomic_write(folder / "split.json",
                  json.dumps(_split_json(config, experiment), default=_json_default))
    _atomic_write(folder / "metadata.json", json.dumps(metadata, indent=2, default=_json_default))

    rounds, every = int(config.run["rounds"]), int(config.run["checkpoint_every"])
    tic = time.perf_counter()
    accuracy = math.nan
    bar = tqdm(total=rounds, initial=min(start, rounds), desc=config.name, unit="step",
               disable=not progress)
    writer = _MetricsWriter(metrics_path)
    try:
        for step in range(start + 1, rounds + 1):
            row = experiment.step()
            if int(row["step"]) != step:
                raise RuntimeError(f"{config.name}: experiment reported step {row['step']} "
                                   f"at step {step}")
            writer.append(row)
            if step % every == 0 or step == rounds:
                save_checkpoint(checkpoint_path, experiment, step, config_hash)
            if not math.isnan(row.get("test_accuracy", math.nan)):
                accuracy = row["test_accuracy"]
            bar.update(1)
            bar.set_postfix_str(_progress_text(row, accuracy))
    finally:
        writer.close()
        bar.close()

    rows = [r for r in read_metrics(metrics_path) if r["step"] <= rounds]
    metadata.update({"finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
                     "seconds_this_session": time.perf_counter() - tic, "steps": len(rows)})
    _atomic_write(folder / "metadata.json", json.dumps(metadata, indent=2, default=_json_default))
    replication = None
    if config.replication is not None:
        record = replication_record(config, rows, {
            "dataset": config.data["dataset"], "device": device, "dtype": config.run["dtype"],
            "commit": metadata["git_commit"], "config": metadata["config"],
            "n_clients": config.split["n_clients"], "steps": len(rows),
            "algorithm": config.algorithm["name"]})
        replication = results / "replication" / f"{config.name}.json"
        _atomic_write(replication, json.dumps(record, indent=2, default=_json_default))
    return {"name": config.name, "run_dir": folder, "steps": len(rows), "resumed_from": start,
            "last_row": rows[-1] if rows else None, "replication": replication}

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
A step whose iterates or losses are no longer finite stops the run as "diverged at step k".
A checkpoint written by a different config is refused
(``--rounds``, ``--device``, ``checkpoint_every``, the description and the ``[replication]``
table may change between the two). At the end, a
config with a ``[replication]`` table gets ``<results>/replication/<name>.json``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
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

import numpy as np
import torch

from results_format import atomic_write, json_default
from testbed_app.experiments.base import Experiment, ExperimentConfig, MetricRow
from testbed_app.experiments.config import (
    ConfigError,
    dump_toml,
    fingerprint,
    load_data,
    split_data,
)
from testbed_app.experiments.registry import build_experiment
from testbed_app.experiments.replication import replication_record
from theory_checks.runner import git_commit, package_versions

#: Config keys that may change between an interrupted run and its resumption: those that do
#: not change the computed metrics (the paper's numbers and texts, where and how long it runs).
RESUMABLE_CHANGES: tuple[str, ...] = ("description", "replication", "run.rounds", "run.device",
                                      "run.checkpoint_every")

CHECKPOINT_VERSION = 1


def run_dir(config: ExperimentConfig, results: Path) -> Path:
    return Path(results) / "runs" / config.name


# ----------------------------------------------------------------------------- metrics.csv


class ResultsError(ConfigError):
    """A results file (metrics.csv, checkpoint.pt) that cannot be used; the message names it
    and says how to go on without losing what is there."""


class CheckpointError(ResultsError):
    """A checkpoint that is corrupt, foreign or of another format."""


def _format(value: float) -> str:
    """Integers without a decimal point; other floats as ``repr`` (exact round trip)."""
    if math.isfinite(value) and float(value).is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(float(value))


def read_metrics_notes(path: Path) -> tuple[list[MetricRow], list[str]]:
    """The rows of a ``metrics.csv`` as floats, and notes on what was repaired.

    A torn last row (an interruption in the middle of writing it: fields missing, a number cut
    short, no final newline) is dropped with a note; the runner recomputes it. A bad row
    anywhere else is not a torn write, and raises :class:`ResultsError` naming the line.
    """
    if not path.exists():
        return [], []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: unreadable ({error}); move it aside or rerun with "
                           "--fresh") from None
    lines = text.splitlines(keepends=True)
    if not lines:
        return [], []
    header = next(csv.reader([lines[0]]))
    if not header or "step" not in header:
        raise ResultsError(f"{path}: line 1 is not a metrics header (no 'step' column): "
                           f"{lines[0].strip()[:80]!r}; move the file aside or rerun with --fresh")
    rows: list[MetricRow] = []
    notes: list[str] = []
    for number, line in enumerate(lines[1:], start=2):
        last = number == len(lines)
        try:
            if not line.endswith("\n"):
                raise ValueError("no final newline")
            fields = next(csv.reader([line]))
            if len(fields) != len(header):
                raise ValueError(f"{len(fields)} fields, the header has {len(header)}")
            rows.append({key: float(value) for key, value in zip(header, fields, strict=True)})
        except (ValueError, csv.Error, StopIteration) as error:
            if last:
                notes.append(f"{path}: torn last row (line {number}: {error}) dropped; it is "
                             "recomputed")
                break
            raise ResultsError(f"{path}: line {number} is not a metrics row ({error}); only a "
                               "torn last row is repaired automatically. Move the file aside "
                               "and rerun with --recover") from None
    return rows, notes


def read_metrics(path: Path) -> list[MetricRow]:
    """The rows of a ``metrics.csv`` as floats (an absent file has none; a torn last row is
    left out, see :func:`read_metrics_notes`)."""
    return read_metrics_notes(path)[0]


def _write_metrics(path: Path, rows: Sequence[MetricRow]) -> None:
    with io.StringIO(newline="") as handle:
        if rows:
            writer = csv.writer(handle)
            writer.writerow(list(rows[0]))
            writer.writerows([_format(v) for v in row.values()] for row in rows)
        atomic_write(path, handle.getvalue())


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
#
# A checkpoint holds tensors and plain data only (dicts, lists, tuples, str, int, float, bool,
# None), so it is read with ``torch.load(weights_only=True)``, which refuses any pickled code.
# The experiments' states hold a few richer objects (named tuples and dataclasses of the
# algorithms, numpy arrays, numpy scalars, sets); :func:`encode` turns each into a tagged dict
# of plain data and :func:`decode` rebuilds it, resolving a class only when it is a named tuple
# or dataclass defined in this project's own packages.

_TAG = "__testbed_type__"
_CLASS_PACKAGES = ("testbed.", "problems.", "theory_checks.")


def _class_name(obj: Any) -> str:
    return f"{type(obj).__module__}:{type(obj).__qualname__}"


def encode(obj: Any) -> Any:
    """``obj`` as tensors and plain data (see the comment above); raises TypeError on others."""
    if obj is None or isinstance(obj, (bool, int, float, str, torch.Tensor)):
        return obj
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise TypeError("checkpoint: cannot store a numpy array of Python objects")
        return {_TAG: "ndarray", "data": torch.from_numpy(np.ascontiguousarray(obj).copy())}
    if isinstance(obj, np.generic):
        return {_TAG: "npscalar", "dtype": obj.dtype.str, "value": obj.item()}
    if isinstance(obj, torch.dtype):
        return {_TAG: "torch.dtype", "name": str(obj).removeprefix("torch.")}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return {_TAG: "namedtuple", "class": _class_name(obj),
                "fields": {name: encode(getattr(obj, name)) for name in obj._fields}}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {_TAG: "dataclass", "class": _class_name(obj),
                "fields": {f.name: encode(getattr(obj, f.name))
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, tuple):
        return tuple(encode(v) for v in obj)
    if isinstance(obj, list):
        return [encode(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        kind = "set" if isinstance(obj, set) else "frozenset"
        return {_TAG: kind, "items": [encode(v) for v in sorted(obj, key=repr)]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and _TAG not in obj:
            return {k: encode(v) for k, v in obj.items()}
        return {_TAG: "dict", "items": [[encode(k), encode(v)] for k, v in obj.items()]}
    raise TypeError(f"checkpoint: cannot store a {type(obj).__module__}.{type(obj).__name__} "
                    "(only tensors, plain data, numpy arrays and this project's named tuples "
                    "and dataclasses)")


def _resolve(name: str) -> Any:
    import importlib

    module, _, qualname = name.partition(":")
    if not module.startswith(_CLASS_PACKAGES):
        raise TypeError(f"class {name!r} is not one of this project's")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not isinstance(cls, type) or not (dataclasses.is_dataclass(cls) or (
            issubclass(cls, tuple) and hasattr(cls, "_fields"))):
        raise TypeError(f"{name!r} is not a named tuple or dataclass")
    return cls


def decode(obj: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(decode(v) for v in obj)
    if not isinstance(obj, dict):
        return obj
    kind = obj.get(_TAG)
    if kind is None:
        return {k: decode(v) for k, v in obj.items()}
    if kind == "ndarray":
        return obj["data"].numpy().copy()
    if kind == "npscalar":
        return np.dtype(obj["dtype"]).type(obj["value"])
    if kind == "torch.dtype":
        dtype = getattr(torch, str(obj["name"]), None)
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"unknown torch dtype {obj['name']!r}")
        return dtype
    if kind in ("set", "frozenset"):
        items = [decode(v) for v in obj["items"]]
        return set(items) if kind == "set" else frozenset(items)
    if kind == "dict":
        return {decode(k): decode(v) for k, v in obj["items"]}
    if kind == "namedtuple":
        return _resolve(obj["class"])(**{k: decode(v) for k, v in obj["fields"].items()})
    if kind == "dataclass":
        cls = _resolve(obj["class"])
        out = cls.__new__(cls)  # as saved, without rerunning __post_init__
        for name, value in obj["fields"].items():
            object.__setattr__(out, name, decode(value))
        return out
    raise TypeError(f"unknown checkpoint entry type {kind!r}")


def _checkpoint_content(experiment: Experiment, step: int, config_hash: str) -> dict[str, Any]:
    return {"version": CHECKPOINT_VERSION, "step": step, "fingerprint": config_hash,
            "experiment": encode(experiment.state_dict())}


def previous_checkpoint(path: Path) -> Path:
    """Where the checkpoint before the latest one is kept (``checkpoint.prev.pt``)."""
    return path.with_name(path.stem + ".prev" + path.suffix)


def save_checkpoint(path: Path, experiment: Experiment, step: int, config_hash: str) -> None:
    """``checkpoint.pt``, atomically, keeping the previous one until the new one is verified.

    The new state goes to a temporary file, is read back (``weights_only=True``) and checked;
    only then does the old ``checkpoint.pt`` become ``checkpoint.prev.pt`` and the new one
    take its name. A reader sees a complete file at every moment.
    """
    tmp = path.with_suffix(".pt.tmp")
    torch.save(_checkpoint_content(experiment, step, config_hash), tmp)
    check = load_checkpoint(tmp, "cpu")  # verified: readable, this format, this step
    if check["step"] != step or check["fingerprint"] != config_hash:
        raise RuntimeError(f"{tmp}: the checkpoint read back differs from the one written")
    if path.exists():
        os.replace(path, previous_checkpoint(path))
    os.replace(tmp, path)


def load_checkpoint(path: Path, device: str) -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True`` (no pickled code runs) and decode it.

    Raises:
        CheckpointError: the file is empty, truncated, not a torch file, holds a pickled
            object (a crafted file), or is of another format; the message names the file.
    """
    try:
        raw = torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # noqa: BLE001 - torch raises many kinds for a bad file
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise CheckpointError(f"{path}: not a readable checkpoint "
                              f"({type(error).__name__}: {reason[:160]})") from None
    if not isinstance(raw, dict) or raw.get("version") != CHECKPOINT_VERSION or not {
            "step", "fingerprint", "experiment"} <= set(raw):
        version = raw.get("version") if isinstance(raw, dict) else type(raw).__name__
        raise CheckpointError(f"{path}: checkpoint format {version!r}, expected "
                              f"{CHECKPOINT_VERSION} (a foreign or older file)")
    try:
        raw["experiment"] = decode(raw["experiment"])
        raw["step"] = int(raw["step"])
    except (TypeError, KeyError, ValueError, AttributeError, ImportError) as error:
        raise CheckpointError(f"{path}: checkpoint content not understood ({error})") from None
    return dict(raw)


def _unused_bad_name(path: Path) -> Path:
    """``<name>.bad`` beside ``path``, or ``.bad2``, ``.bad3``, ... when taken."""
    target = path.with_name(path.name + ".bad")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.bad{n}")
    return target


def _set_aside(path: Path) -> Path:
    """Rename a bad file to :func:`_unused_bad_name`; never delete it."""
    target = _unused_bad_name(path)
    os.replace(path, target)
    return target


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


def _divergence(experiment: Experiment, row: MetricRow) -> str | None:
    """Why this step counts as diverged, or None.

    The experiment's own test first (``divergence()``: non-finite or exploded iterates), then
    the row: an infinite value, or a NaN loss in a row that was evaluated (a NaN test
    accuracy means "not evaluated this step"; a NaN loss beside a measured accuracy means the
    model's outputs are NaN, which argmax reads as class 0).
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
    return None


def _contiguous(rows: Sequence[MetricRow]) -> int:
    """The largest j such that the rows hold steps 1..j in order."""
    j = 0
    for row in rows:
        if row["step"] != j + 1:
            break
        j += 1
    return j


ADVICE = ("Nothing was deleted. Rerun with --recover to set the bad file aside and resume "
          "from the last good state (the previous checkpoint, else step 0; metrics.csv is "
          "kept and its later rows recomputed), or with --fresh to delete the run folder and "
          "start over")


def _resume(experiment: Experiment, config: ExperimentConfig, checkpoint_path: Path,
            rows: Sequence[MetricRow], config_hash: str, source: str, recover: bool,
            notify: Callable[[str], None]) -> tuple[Experiment, int]:
    """Load the newest usable checkpoint into ``experiment``; ``(experiment, start step)``."""
    device = config.run["device"]
    contiguous = _contiguous(rows)
    candidates = [p for p in (checkpoint_path, previous_checkpoint(checkpoint_path))
                  if p.exists()]
    if not recover:
        if not candidates:
            return experiment, 0
        path = candidates[0]
        try:
            checkpoint = load_checkpoint(path, device)
        except CheckpointError as error:
            raise CheckpointError(f"{error}. {ADVICE}") from None
        if checkpoint["fingerprint"] != config_hash:
            raise ConfigError(f"{path} was written by a different config than {source}; "
                              "rerun with --fresh to start over (deletes the run folder), or "
                              "with --recover to set it aside and start from step 0 keeping "
                              "the old metrics.csv beside the new one")
        if checkpoint["step"] > contiguous:
            raise ResultsError(f"{path.parent / 'metrics.csv'} holds steps 1..{contiguous} "
                               f"but {path} is at step {checkpoint['step']}: rows are missing. "
                               f"{ADVICE}")
        try:
            experiment.load_state_dict(checkpoint["experiment"])
        except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as error:
            raise CheckpointError(f"{path}: does not fit this experiment ({type(error).__name__}"
                                  f": {error}). {ADVICE}") from None
        return experiment, int(checkpoint["step"])
    for path in candidates:
        try:
            checkpoint = load_checkpoint(path, device)
            if checkpoint["fingerprint"] != config_hash:
                raise CheckpointError(f"{path}: written by a different config than {source}")
        except CheckpointError as error:
            notify(f"{error}; set aside as {_set_aside(path).name}")
            continue
        if checkpoint["step"] > contiguous:
            notify(f"{path} is at step {checkpoint['step']}, past the {contiguous} rows of "
                   "metrics.csv; not used")
            continue
        try:
            experiment.load_state_dict(checkpoint["experiment"])
        except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as error:
            notify(f"{path}: does not fit this experiment ({error}); set aside as "
                   f"{_set_aside(path).name}")
            experiment = build_experiment(config, device)  # the failed load may have half-set it
            continue
        notify(f"recovered from {path.name} (step {checkpoint['step']})")
        return experiment, int(checkpoint["step"])
    notify("no usable checkpoint: restarting from step 0")
    return experiment, 0


def run_experiment(config: ExperimentConfig, results_dir: str | Path, *, fresh: bool = False,
                   progress: bool = True, recover: bool = False,
                   notify: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) ``config``; write its results under ``results_dir``; return a summary.

    Args:
        config: a validated config (:func:`~testbed_app.experiments.config.load_config`).
        results_dir: the results root (``results/`` by default on the command line).
        fresh: ignore (and delete) an existing checkpoint and metrics.
        progress: show a tqdm bar with rounds, accuracy and floats sent so far.
        recover: set a corrupt, foreign or mismatched checkpoint aside (never deleted) and
            resume from the last good one (``checkpoint.prev.pt``), else from step 0; a
            ``metrics.csv`` whose later rows are dropped is first copied aside.
        notify: where notes go (a torn metrics row repaired, a checkpoint set aside, a
            divergence); standard error by default.

    Returns:
        ``{"name", "run_dir", "steps", "resumed_from", "last_row", "replication", "status",
        "notes"}`` (``replication`` is the written path or ``None``; ``status`` is
        ``"completed"``, ``"partial: k of K steps ..."`` or ``"diverged at step k: ..."``).

    Raises:
        CheckpointError, ResultsError: a results file cannot be used; the message names it
            and the way on (``--recover`` or ``--fresh``).
    """
    from tqdm import tqdm

    notes: list[str] = []

    def note(message: str) -> None:
        notes.append(message)
        if notify is not None:
            notify(message)
        else:
            print(f"{config.name}: {message}", file=sys.stderr)

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
    # rows after the checkpoint (an interruption between two checkpoints) are recomputed
    _write_metrics(metrics_path, kept)

    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    metadata = _metadata(config, experiment, started, start)
    atomic_write(folder / "config.toml", dump_toml(config))
    atomic_write(folder / "split.json",
                  json.dumps(_split_json(config, experiment), default=json_default))
    atomic_write(folder / "metadata.json", json.dumps(metadata, indent=2, default=json_default))

    rounds, every = int(config.run["rounds"]), int(config.run["checkpoint_every"])
    tic = time.perf_counter()
    accuracy = math.nan
    status = "completed"
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
            reason = _divergence(experiment, row)
            if reason is not None:
                # no checkpoint of a diverged state: a rerun recomputes up to here and stops
                status = f"diverged at step {step}: {reason}"
                note(status)
                break
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
    horizon = config.horizon if config.horizon is not None else rounds
    if status == "completed" and len(rows) < horizon:
        status = (f"partial: {len(rows)} of the config's {horizon} steps (--rounds {rounds}); "
                  "rerun without --rounds to complete it")
    metadata.update({"finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
                     "seconds_this_session": time.perf_counter() - tic, "steps": len(rows),
                     "status": status})
    atomic_write(folder / "metadata.json", json.dumps(metadata, indent=2, default=json_default))
    replication = None
    if config.replication is not None:
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

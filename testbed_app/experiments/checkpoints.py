"""Checkpoints of a run: encoding an experiment's state as plain data, writing and reading
``checkpoint.pt`` safely, setting a bad file aside, and resuming from the newest usable one.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from results_format.resume import FINGERPRINT_KEY, is_fresh
from testbed_app.experiments.base import Experiment, ExperimentConfig, MetricRow
from testbed_app.experiments.config import ConfigError
from testbed_app.experiments.metrics_csv import CheckpointError, ResultsError
from testbed_app.experiments.registry import build_experiment

CHECKPOINT_VERSION = 1


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
    """``obj`` as tensors and plain data (see the comment above); raises TypeError on others.

    Strings are interned: pickle writes a string once and then refers to it when the same
    object recurs, so without interning a state restored from a checkpoint (whose strings are
    fresh objects, e.g. an optimizer's ``"step"`` key) would be saved with other bytes than the
    same state computed in one go; interned, equal strings are one object either way and the
    checkpoint's bytes depend only on its content."""
    if isinstance(obj, str):
        return sys.intern(str(obj))
    if obj is None or isinstance(obj, (bool, int, float, torch.Tensor)):
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
            return {encode(k): encode(v) for k, v in obj.items()}
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
        return obj["data"].cpu().numpy().copy()
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
    return {"version": CHECKPOINT_VERSION, "step": step, FINGERPRINT_KEY: config_hash,
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
    if check["step"] != step or not is_fresh(check, config_hash):
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
            "step", FINGERPRINT_KEY, "experiment"} <= set(raw):
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


# ----------------------------------------------------------------------------- resuming


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
        if not is_fresh(checkpoint, config_hash):
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
            if not is_fresh(checkpoint, config_hash):
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

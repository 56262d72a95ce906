"""Checkpoints of a run: encoding an experiment's state as plain data, writing and reading
``checkpoint.pt`` safely, setting a bad file aside, and resuming from the newest usable one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import os
import sys
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from results_format import atomic_write_bytes
from results_format.layout import RUN_METRICS
from results_format.metrics import rows_digest
from results_format.records import CHECKPOINT_SCHEMA
from results_format.resume import FINGERPRINT_KEY
from results_format.resume import is_fresh
from results_format.validation import field_problems
from testbed_app.experiments.base import Experiment
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.base import MetricRow
from testbed_app.experiments.errors import ConfigError
from testbed_app.experiments.metrics_csv import CheckpointError
from testbed_app.experiments.metrics_csv import ResultsError
from testbed_app.experiments.registry import build_experiment

#: 2: sealed (:func:`content_seal`) and holding the digest of the metrics rows it follows;
#: 1 (read, never written): neither.
CHECKPOINT_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: Keys of a checkpoint beside its content (``experiment``).
SEAL, METRICS = "seal", "metrics_rows_sha256"


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
        return {
            _TAG: "namedtuple",
            "class": _class_name(obj),
            "fields": {name: encode(getattr(obj, name)) for name in obj._fields},
        }
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            _TAG: "dataclass",
            "class": _class_name(obj),
            "fields": {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)},
        }
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
    raise TypeError(
        f"checkpoint: cannot store a {type(obj).__module__}.{type(obj).__name__} "
        "(only tensors, plain data, numpy arrays and this project's named tuples "
        "and dataclasses)"
    )


def _resolve(name: str) -> Any:
    module, _, qualname = name.partition(":")
    if not module.startswith(_CLASS_PACKAGES):
        raise TypeError(f"class {name!r} is not one of this project's")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not isinstance(cls, type) or not (
        dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields"))
    ):
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


def _digest_into(obj: Any, digest: Any) -> None:
    """Feed ``obj`` (encoded checkpoint content) into ``digest``: every tensor's dtype, shape
    and bytes, every other value's type and ``repr``, containers in order (dicts by key)."""
    if isinstance(obj, torch.Tensor):
        flat = obj.detach().cpu().contiguous().reshape(-1)
        digest.update(f"T{obj.dtype}{tuple(obj.shape)}".encode())
        digest.update(flat.view(torch.uint8).cpu().numpy().tobytes() if flat.numel() else b"")
    elif isinstance(obj, dict):
        digest.update(f"D{len(obj)}".encode())
        for key in sorted(obj, key=repr):
            _digest_into(key, digest)
            _digest_into(obj[key], digest)
    elif isinstance(obj, (list, tuple)):
        digest.update(f"{type(obj).__name__[0]}{len(obj)}".encode())
        for value in obj:
            _digest_into(value, digest)
    else:
        digest.update(f"{type(obj).__name__}:{obj!r};".encode())


def content_seal(raw: dict[str, Any]) -> str:
    """The sha256 (hex) of a checkpoint's content but its seal (:func:`_digest_into`): an
    edited step, fingerprint, metrics digest or tensor no longer matches it."""
    digest = hashlib.sha256()
    _digest_into({k: v for k, v in raw.items() if k != SEAL}, digest)
    return digest.hexdigest()


def _checkpoint_content(
    experiment: Experiment, step: int, config_hash: str, metrics_digest: str = ""
) -> dict[str, Any]:
    content = {
        "version": CHECKPOINT_VERSION,
        "step": step,
        FINGERPRINT_KEY: config_hash,
        METRICS: metrics_digest,
        "experiment": encode(experiment.state_dict()),
    }
    content[SEAL] = content_seal(content)
    return content


def previous_checkpoint(path: Path) -> Path:
    """Where the checkpoint before the latest one is kept (``checkpoint.prev.pt``)."""
    return path.with_name(path.stem + ".prev" + path.suffix)


def save_checkpoint(
    path: Path, experiment: Experiment, step: int, config_hash: str, metrics_digest: str = ""
) -> None:
    """``checkpoint.pt``, atomically, keeping the previous one until the new one is verified.

    The state is serialised in memory and written to a fresh temporary file beside ``path``
    (:func:`results_format.writing.atomic_write_bytes`: a full disk leaves no temporary file
    and the old checkpoints whole), read back (``weights_only=True``) and checked; only then
    does the old ``checkpoint.pt`` become ``checkpoint.prev.pt`` and the new one take its
    name. A reader sees a complete file at every moment. ``metrics_digest``: the digest of the
    metrics rows 1..``step`` (:func:`results_format.metrics.rows_digest`), checked on resume.
    """
    buffer = io.BytesIO()
    torch.save(_checkpoint_content(experiment, step, config_hash, metrics_digest), buffer)

    def verify_then_keep_previous(temporary: Path) -> None:
        check = load_checkpoint(temporary, "cpu")  # readable, this format, sealed, this step
        if check["step"] != step or not is_fresh(check, config_hash):
            raise RuntimeError(
                f"{temporary}: the checkpoint read back differs from the one written"
            )
        if path.exists():
            os.replace(path, previous_checkpoint(path))

    atomic_write_bytes(path, buffer.getvalue(), before_replace=verify_then_keep_previous)


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
        raise CheckpointError(
            f"{path}: not a readable checkpoint ({type(error).__name__}: {reason[:160]})"
        ) from None
    if (
        not isinstance(raw, dict)
        or raw.get("version") not in READABLE_VERSIONS
        or not {"step", FINGERPRINT_KEY, "experiment"} <= set(raw)
    ):
        version = raw.get("version") if isinstance(raw, dict) else type(raw).__name__
        raise CheckpointError(
            f"{path}: checkpoint format {version!r}, expected "
            f"{CHECKPOINT_VERSION} (a foreign or older file)"
        )
    problem = checkpoint_problem(raw)
    if problem is not None:
        raise CheckpointError(f"{path}: not this checkpoint as written: {problem}")
    try:
        raw["experiment"] = decode(raw["experiment"])
    except (TypeError, KeyError, ValueError, AttributeError, ImportError) as error:
        raise CheckpointError(f"{path}: checkpoint content not understood ({error})") from None
    return dict(raw)


def checkpoint_problem(raw: dict[str, Any]) -> str | None:
    """Why a checkpoint's own record cannot be believed (its metadata's schema,
    :data:`results_format.records.CHECKPOINT_SCHEMA`; its seal), or ``None``."""
    problems = field_problems(raw, CHECKPOINT_SCHEMA)
    if problems:
        return problems[0]
    if raw["version"] >= 2:
        if not isinstance(raw.get(METRICS), str) or not isinstance(raw.get(SEAL), str):
            return f"{METRICS} or {SEAL} is missing"
        if raw[SEAL] != content_seal(raw):
            return "its content differs from its seal (the file was edited or damaged)"
    return None


def unused_bad_name(path: Path) -> Path:
    """``<name>.bad`` beside ``path``, or ``.bad2``, ``.bad3``, ... when taken."""
    target = path.with_name(path.name + ".bad")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.bad{n}")
    return target


def set_aside(path: Path) -> Path:
    """Rename a bad file to :func:`unused_bad_name`; never delete it."""
    target = unused_bad_name(path)
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


ADVICE = (
    "Nothing was deleted. Rerun with --recover to set the bad file aside and resume "
    "from the last good state (the previous checkpoint, else step 0; metrics.csv is "
    "kept and its later rows recomputed), or with --fresh to delete the run folder and "
    "start over"
)


def _shape_mismatch(expected: Any, loaded: Any, where: str = "state") -> str | None:
    """Where ``loaded`` (a checkpoint's state) holds a tensor or array of another shape or
    dtype, or a state of another type (a named tuple or dataclass: another algorithm's), than
    ``expected`` (a freshly built experiment's state) at the same place; ``None`` when none
    does. Only places both hold are compared (a state may grow as a run goes)."""
    if isinstance(expected, dict) and isinstance(loaded, dict):
        for key in expected.keys() & loaded.keys():
            found = _shape_mismatch(expected[key], loaded[key], f"{where}[{key!r}]")
            if found:
                return found
    elif hasattr(expected, "_fields") or dataclasses.is_dataclass(expected):
        if type(expected) is not type(loaded):  # another algorithm's state, say
            return (
                f"{where} is a {type(loaded).__name__}, this experiment's is a "
                f"{type(expected).__name__}"
            )
        if hasattr(expected, "_fields"):
            return _shape_mismatch(expected._asdict(), loaded._asdict(), where)
        return _shape_mismatch(vars(expected), vars(loaded), where)
    elif isinstance(expected, (list, tuple)) and isinstance(loaded, (list, tuple)):
        if len(expected) == len(loaded):
            for i, (a, b) in enumerate(zip(expected, loaded, strict=True)):
                found = _shape_mismatch(a, b, f"{where}[{i}]")
                if found:
                    return found
    elif isinstance(expected, (torch.Tensor, np.ndarray)):
        if not isinstance(loaded, type(expected)):
            return f"{where} is a {type(loaded).__name__}, expected a {type(expected).__name__}"
        if tuple(expected.shape) != tuple(loaded.shape) or expected.dtype != loaded.dtype:
            return (
                f"{where} has shape {tuple(loaded.shape)} and dtype {loaded.dtype}, this "
                f"experiment's has {tuple(expected.shape)} and {expected.dtype}"
            )
    return None


def _unusable(
    checkpoint: dict[str, Any],
    path: Path,
    rows: Sequence[MetricRow],
    contiguous: int,
    expected_state: Any,
) -> ResultsError | None:
    """Why a readable checkpoint of this config cannot be resumed from with these metrics
    rows: rows missing behind it or edited since it was written (a :class:`ResultsError`: the
    metrics are at fault), a state that does not fit this experiment (a
    :class:`CheckpointError`); ``None`` when it can."""
    step = checkpoint["step"]
    if step > contiguous:
        return ResultsError(
            f"{path.parent / RUN_METRICS} holds steps 1..{contiguous} but "
            f"{path} is at step {step}: rows are missing"
        )
    recorded = checkpoint.get(METRICS)
    if isinstance(recorded, str) and recorded and recorded != rows_digest(rows[:step]):
        return ResultsError(
            f"{path.parent / RUN_METRICS} rows 1..{step} differ from those "
            f"{path.name} was written after (edited since?)"
        )
    mismatch = _shape_mismatch(expected_state, checkpoint["experiment"])
    if mismatch:
        return CheckpointError(f"{path}: does not fit this experiment ({mismatch})")
    return None


def _load_into(
    experiment: Experiment, checkpoint: dict[str, Any], path: Path
) -> CheckpointError | None:
    """Load the checkpoint's state; why it does not fit, or ``None``. Any exception of the
    experiment's ``load_state_dict`` means that (a state of another algorithm, say)."""
    try:
        experiment.load_state_dict(checkpoint["experiment"])
    except Exception as error:  # noqa: BLE001 - any exception on a foreign state
        return CheckpointError(
            f"{path}: does not fit this experiment ({type(error).__name__}: {error})"
        )
    return None


def resume(
    experiment: Experiment,
    config: ExperimentConfig,
    checkpoint_path: Path,
    rows: Sequence[MetricRow],
    config_hash: str,
    source: str,
    recover: bool,
    notify: Callable[[str], None],
) -> tuple[Experiment, int]:
    """Load the newest usable checkpoint into ``experiment``; ``(experiment, start step)``."""
    device = config.run["device"]
    contiguous = _contiguous(rows)
    candidates = [p for p in (checkpoint_path, previous_checkpoint(checkpoint_path)) if p.exists()]
    expected_state = experiment.state_dict() if candidates else None
    if not recover:
        if not candidates:
            return experiment, 0
        path = candidates[0]
        try:
            checkpoint = load_checkpoint(path, device)
        except CheckpointError as error:
            raise CheckpointError(f"{error}. {ADVICE}") from None
        if not is_fresh(checkpoint, config_hash):
            raise ConfigError(
                f"{path} was written by a different config than {source}; "
                "rerun with --fresh to start over (deletes the run folder), or "
                "with --recover to set it aside and start from step 0 keeping "
                "the old metrics.csv beside the new one"
            )
        problem = _unusable(checkpoint, path, rows, contiguous, expected_state) or _load_into(
            experiment, checkpoint, path
        )
        if problem is not None:
            raise type(problem)(f"{problem}. {ADVICE}")
        return experiment, int(checkpoint["step"])
    for path in candidates:
        try:
            checkpoint = load_checkpoint(path, device)
            if not is_fresh(checkpoint, config_hash):
                raise CheckpointError(f"{path}: written by a different config than {source}")
        except CheckpointError as error:
            notify(f"{error}; set aside as {set_aside(path).name}")
            continue
        problem = _unusable(checkpoint, path, rows, contiguous, expected_state)
        if problem is not None and not isinstance(problem, CheckpointError):
            notify(f"{problem}; {path.name} not used")
            continue
        problem = problem or _load_into(experiment, checkpoint, path)
        if problem is not None:
            notify(f"{problem}; set aside as {set_aside(path).name}")
            experiment = build_experiment(config, device)  # the failed load may have half-set it
            continue
        notify(f"recovered from {path.name} (step {checkpoint['step']})")
        return experiment, int(checkpoint["step"])
    notify("no usable checkpoint: restarting from step 0")
    return experiment, 0

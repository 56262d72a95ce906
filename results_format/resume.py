"""Fingerprint-based resume: the one way a producer decides to reuse a saved result.

A result that takes a while to compute (a claim's verdict, a calibration seed, the communication
table, a comparison run, an experiment's checkpoint) is saved with a *fingerprint*: a short hash
of everything that defines it (:func:`fingerprint`). A rerun reuses the saved result only when
the fingerprint it records (and, where results differ by profile, the profile) is the one the
current definitions give (:func:`is_fresh`); a missing, torn, foreign or stale file is
recomputed and written again, atomically, with the new fingerprint. Two ways of saving it:

- a JSON object holding ``"fingerprint"`` (and ``"profile"``) beside its content:
  :func:`read_fresh` reads it back only when it is fresh, :func:`write_json` writes it, and
  :func:`reuse_or_write` does both for a result computed in one go (:func:`write_fresh` its
  writing half);
- any other file (a CSV) with the fingerprint in a ``.fingerprint`` file beside it:
  :func:`is_fresh_file` and :func:`write_stamped`.

Each producer keeps what goes *into* its fingerprint (only it knows what defines its results);
the hashing, the freshness test, the reading and the atomic writing are here. Standard library
only (see :mod:`results_format`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from results_format import atomic_write
from results_format.validation import seal
from results_format.validation import seal_problem

#: The key of a saved record's fingerprint, and of the profile it was computed on.
FINGERPRINT_KEY = "fingerprint"
PROFILE_KEY = "profile"
#: Hex digits kept of the sha256: 64 bits, ample to tell one definition from another.
FINGERPRINT_LENGTH = 16
#: Suffix of the file that holds the fingerprint of a non-JSON result (``x.csv`` ->
#: ``x.fingerprint``).
STAMP_SUFFIX = ".fingerprint"


def fingerprint(*parts: str) -> str:
    """The first :data:`FINGERPRINT_LENGTH` hex digits of the sha256 of ``parts`` joined by
    ``|``: what a producer stamps its results with (its parts are the texts that define them).
    """
    text = "|".join(parts)
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_LENGTH]


def is_fresh(record: Any, stamp: str, profile: str | None = None, keys: Iterable[str] = ()) -> bool:
    """Whether ``record`` (a saved result read back) may be reused: a mapping that holds every
    one of ``keys`` and records the fingerprint ``stamp`` (and ``profile``, when given)."""
    if not isinstance(record, Mapping) or not set(keys) <= set(record):
        return False
    if profile is not None and record.get(PROFILE_KEY) != profile:
        return False
    return bool(record.get(FINGERPRINT_KEY) == stamp)


def read_json(path: Path) -> Any:
    """The JSON value saved at ``path``; ``None`` when the file is missing, unreadable or torn
    (so that the caller recomputes it)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def read_fresh(
    path: Path,
    stamp: str,
    profile: str | None = None,
    keys: Iterable[str] = (),
    sealed: bool = False,
) -> dict[str, Any] | None:
    """The JSON object saved at ``path`` when it is fresh (:func:`is_fresh`) and, with
    ``sealed``, its seal matches its content (:func:`~results_format.validation.seal_problem`:
    written by :func:`write_fresh`, not edited since), else ``None``."""
    record = read_json(path)
    if not is_fresh(record, stamp, profile, keys):
        return None
    return None if sealed and seal_problem(record) is not None else dict(record)


def write_json(path: Path, data: Any, *, newline: bool = False, **options: Any) -> None:
    """``json.dumps(data, **options)`` written to ``path`` atomically (:func:`atomic_write`),
    followed by a newline when ``newline``."""
    atomic_write(Path(path), json.dumps(data, **options) + ("\n" if newline else ""))


def reuse_or_write(
    path: Path,
    stamp: str,
    compute: Callable[[], Mapping[str, Any]],
    *,
    resume: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """The result saved at ``path`` when ``resume`` and it records ``stamp``; otherwise
    ``{"fingerprint": stamp, **compute()}``, written with :func:`write_json` (``options`` go to
    ``json.dumps``) and returned."""
    saved = read_fresh(path, stamp, sealed=True) if resume else None
    if saved is not None:
        return saved
    return write_fresh(path, stamp, compute(), **options)


def write_fresh(
    path: Path, stamp: str, content: Mapping[str, Any], **options: Any
) -> dict[str, Any]:
    """``{"fingerprint": stamp, **content}``, sealed (:func:`~results_format.validation.seal`,
    over the content as JSON gives it back), written with :func:`write_json` and returned: the
    writing half of :func:`reuse_or_write`, for a producer that computes several results
    together (an executor's batch) after reading which are fresh (``read_fresh(...,
    sealed=True)``)."""
    text = json.dumps({FINGERPRINT_KEY: stamp, **content}, default=options.get("default"))
    record = seal(json.loads(text))
    write_json(path, record, **options)
    return record


def stamp_path(path: Path) -> Path:
    """Where the fingerprint of the non-JSON result ``path`` is kept (``x.csv`` ->
    ``x.fingerprint``)."""
    return Path(path).with_suffix(STAMP_SUFFIX)


def is_fresh_file(path: Path, stamp: str) -> bool:
    """Whether ``path`` exists and the fingerprint saved beside it is ``stamp``."""
    try:
        return Path(path).exists() and stamp_path(path).read_text() == stamp
    except (OSError, UnicodeDecodeError):
        return False


def write_stamped(path: Path, text: str, stamp: str) -> None:
    """``text`` to ``path``, then ``stamp`` beside it, each atomically. The old fingerprint is
    removed first, so a run interrupted in between leaves a result without one, which the next
    run recomputes (never a new result under an old fingerprint)."""
    stamp_path(path).unlink(missing_ok=True)
    atomic_write(Path(path), text)
    atomic_write(stamp_path(path), stamp)


__all__ = [
    "FINGERPRINT_KEY",
    "FINGERPRINT_LENGTH",
    "PROFILE_KEY",
    "STAMP_SUFFIX",
    "fingerprint",
    "is_fresh",
    "is_fresh_file",
    "read_fresh",
    "read_json",
    "reuse_or_write",
    "stamp_path",
    "write_fresh",
    "write_json",
    "write_stamped",
]

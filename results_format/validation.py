"""Checking a results file before it is believed: field types, finite numbers, and a seal.

A results file read back (to resume, to compare, to report) is checked against its schema
before any of its numbers is used. A schema is a mapping ``key -> kinds``, where the kinds are
names from :data:`KINDS` (``"str"``, ``"int"``, ``"number"``, ``"finite"``, ``"bool"``,
``"list"``, ``"object"``, ``"null"``) or a tuple of allowed literal strings (a vocabulary);
:func:`field_problems` lists what does not fit, each naming the key.

The *seal* (:func:`seal`, :func:`seal_problem`) is a sha256 over the record's content in
canonical JSON, stored in the record under :data:`SEAL_KEY`; it leaves out what legitimately
differs between two runs of the same work (measured wall times, ``"seconds"``). A record edited
by hand (a verdict flipped, a number changed) no longer matches its seal. The seal is a
checksum against edits and damage, not a signature: whoever recomputes it can forge it, which
is why the verdicts are also recomputed from the recorded cases
(:mod:`results_format.claim_checks`).

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

#: The key of a record's seal.
SEAL_KEY = "content_sha256"
#: Keys left out of a seal at any depth: measured wall times differ between two runs (and
#: between executors) of the same work.
UNSEALED_KEYS = frozenset({SEAL_KEY, "seconds"})

Kinds = str | tuple[str, ...]


class SchemaError(ValueError):
    """A results file that does not fit its schema; the message names the file and the key."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


KINDS = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "float": _is_number,
    "number": lambda v: _is_number(v) and not math.isnan(v),
    "finite": lambda v: _is_number(v) and math.isfinite(v),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}

#: What each kind is called in a message.
_WORDS = {
    "str": "a string",
    "int": "an integer",
    "count": "a count (integer >= 0)",
    "float": "a number",
    "number": "a number (not NaN)",
    "finite": "a finite number",
    "bool": "true or false",
    "list": "a list",
    "object": "an object",
    "null": "null",
}


def _describe(value: Any) -> str:
    text = (
        json.dumps(value, allow_nan=True, default=str)
        if not isinstance(value, str)
        else repr(value)
    )
    return text if len(text) <= 40 else text[:37] + "..."


def kind_problem(value: Any, kinds: Kinds, key: str) -> str | None:
    """Why ``value`` at ``key`` is not one of ``kinds`` (a ``|``-separated string of kind names,
    or a tuple of allowed strings), or ``None``."""
    if isinstance(kinds, tuple):
        if value in kinds:
            return None
        return f"{key} is {_describe(value)}, not one of {', '.join(map(repr, kinds))}"
    names = kinds.split("|")
    if any(KINDS[name](value) for name in names):
        return None
    return f"{key} is {_describe(value)}, expected {' or '.join(_WORDS[n] for n in names)}"


def field_problems(
    record: Any, schema: Mapping[str, Kinds], where: str = "", optional: Iterable[str] = ()
) -> list[str]:
    """What in ``record`` does not fit ``schema`` (each message naming ``where`` + the key);
    keys in ``optional`` may be absent. Keys not in the schema are allowed (a newer writer)."""
    prefix = f"{where}." if where else ""
    if not isinstance(record, dict):
        kind = type(record).__name__ if record is not None else "null"
        return [f"{where or 'the file'} is a JSON {kind}, expected an object"]
    problems = []
    allowed_missing = set(optional)
    for key, kinds in schema.items():
        if key not in record:
            if key not in allowed_missing:
                problems.append(f"{prefix}{key} is missing")
            continue
        problem = kind_problem(record[key], kinds, prefix + key)
        if problem is not None:
            problems.append(problem)
    return problems


def require(problems: list[str], file: str) -> None:
    """:class:`SchemaError` naming ``file`` and the first problem (and how many more)."""
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise SchemaError(f"{file}: {problems[0]}{more}")


def _unsealed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unsealed(v) for k, v in value.items() if k not in UNSEALED_KEYS}
    if isinstance(value, list):
        return [_unsealed(v) for v in value]
    return value


def content_digest(record: Mapping[str, Any]) -> str:
    """The sha256 (hex) of ``record`` in canonical JSON (sorted keys, no spaces, non-finite
    numbers as ``NaN``/``Infinity``), leaving out :data:`UNSEALED_KEYS` at any depth."""
    text = json.dumps(
        _unsealed(dict(record)), sort_keys=True, separators=(",", ":"), allow_nan=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()


def seal(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with its seal (:data:`SEAL_KEY`) added last."""
    out = {k: v for k, v in record.items() if k != SEAL_KEY}
    out[SEAL_KEY] = content_digest(out)
    return out


def seal_problem(record: Mapping[str, Any]) -> str | None:
    """Why ``record``'s seal does not vouch for its content (absent, or another digest), or
    ``None``."""
    recorded = record.get(SEAL_KEY)
    if not isinstance(recorded, str):
        return f"no {SEAL_KEY} (written by an older testbed, or edited)"
    if recorded != content_digest(record):
        return f"its content differs from its {SEAL_KEY} (the file was edited or damaged)"
    return None


def file_digest(data: bytes) -> str:
    """The sha256 (hex) of a file's bytes, as records list their companion files."""
    return hashlib.sha256(data).hexdigest()


__all__ = [
    "KINDS",
    "SEAL_KEY",
    "SchemaError",
    "UNSEALED_KEYS",
    "content_digest",
    "field_problems",
    "file_digest",
    "kind_problem",
    "require",
    "seal",
    "seal_problem",
]

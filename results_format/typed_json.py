"""JSON objects read as typed records: frozen dataclasses whose fields are the object's keys.

A results file's schema is a dataclass deriving :class:`Record`; :meth:`Record.from_json` reads a
JSON object (already checked against its schema by :mod:`results_format.validation`) into it
once, and :meth:`Record.to_json` writes it back. The keys are the fields' names, in the order the
fields are declared; a field's metadata says when it is left out of the file (:data:`OPTIONAL`:
when ``None``; :data:`OMITTED_EMPTY`: when empty) or never written (:data:`NOT_IN_FILE`), and
how a nested object or list of objects is parsed (:func:`parsed` with :func:`one_of`,
:func:`many_of`). Keys a record does not declare are kept in ``extra`` and written back after the
declared ones, so a record read and written again gives the object it was read from.

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Self
from typing import TypeVar

#: A field's metadata: left out of the file when ``None``.
OPTIONAL = {"omit": "none"}
#: A field's metadata: left out of the file when empty (``None``, an empty list or mapping).
OMITTED_EMPTY = {"omit": "empty"}
#: A field's metadata: shown by the report but never written (a row without results).
NOT_IN_FILE = {"in_file": False}


def _omitted(omit: str | None, value: Any) -> bool:
    if omit == "none":
        return value is None
    if omit == "empty":
        return value is None or (isinstance(value, (list, tuple, dict)) and not value)
    return False


def _json_value(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """A JSON object with declared fields (see the module docstring)."""

    #: the keys of the file that the record does not declare, in their order
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _file_fields(cls) -> list[dataclasses.Field[Any]]:
        return [
            f
            for f in dataclasses.fields(cls)
            if f.name != "extra" and f.metadata.get("in_file", True)
        ]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """The record of a JSON object (a key it lacks keeps the field's default)."""
        values: dict[str, Any] = {}
        known = set()
        for f in cls._file_fields():
            known.add(f.name)
            if f.name in data:
                parse = f.metadata.get("parse")
                values[f.name] = parse(data[f.name]) if parse else data[f.name]
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**values, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The JSON object, its keys in the fields' order (optional ones left out when empty),
        then the keys the record keeps in ``extra``."""
        out = {}
        for f in self._file_fields():
            value = getattr(self, f.name)
            if _omitted(f.metadata.get("omit"), value):
                continue
            out[f.name] = _json_value(value)
        out.update(self.extra)
        return out


R = TypeVar("R", bound=Record)


def one_of(cls: type[R]) -> Callable[[Any], R | None]:
    """A parser of a nested object (``None`` for anything else)."""
    return lambda value: cls.from_json(value) if isinstance(value, Mapping) else None


def one_or_empty(cls: type[R]) -> Callable[[Any], R]:
    """A parser of a nested object that reads anything else as the empty record."""
    return lambda value: cls.from_json(value) if isinstance(value, Mapping) else cls()


def many_of(cls: type[R]) -> Callable[[Any], tuple[R, ...]]:
    """A parser of a list of nested objects (what is not an object is left out)."""
    return lambda value: (
        tuple(cls.from_json(v) for v in value if isinstance(v, Mapping))
        if isinstance(value, list)
        else ()
    )


def values(value: Any) -> tuple[Any, ...]:
    """A parser of a list of plain values (anything else reads as none)."""
    return tuple(value) if isinstance(value, list) else ()


def parsed(parse: Callable[[Any], Any], **metadata: Any) -> dict[str, Any]:
    return {"parse": parse, **metadata}


__all__ = [
    "NOT_IN_FILE",
    "OMITTED_EMPTY",
    "OPTIONAL",
    "Record",
    "many_of",
    "one_of",
    "one_or_empty",
    "parsed",
    "values",
]

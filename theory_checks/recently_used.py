"""A bounded store of the values a process used last: what a calibration keeps from one block
of seeds for the next (:func:`theory_checks.replicates.shared`'s seed-independent values,
:mod:`theory_checks.seed_blocks`' searched cases), so that memory stays bounded whatever
``--seeds`` is."""

from __future__ import annotations

import collections
from collections.abc import Hashable
from typing import Generic
from typing import TypeVar

Value = TypeVar("Value")


class RecentlyUsed(Generic[Value]):
    """At most ``size`` values by key; a read or a write makes a key the most recent, and a write
    past ``size`` drops the least recently used."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"RecentlyUsed keeps at least one value, got size={size}")
        self.size = size
        self._values: collections.OrderedDict[Hashable, Value] = collections.OrderedDict()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: Hashable) -> Value:
        """The value kept under ``key`` (a ``KeyError`` without one), now the most recent."""
        self._values.move_to_end(key)
        return self._values[key]

    def put(self, key: Hashable, value: Value) -> Value:
        """Keep ``value`` under ``key``, dropping the least recent beyond ``size``; returns it."""
        self._values[key] = value
        self._values.move_to_end(key)
        while len(self._values) > self.size:
            self._values.popitem(last=False)
        return value

"""What every unit of work shares, wherever an executor runs it (``testbed_app.executors``).

A unit of work is a picklable callable without arguments. A worker process computes the numbers
the driver would because the executor gives it the driver's settings
(``theory_checks.settings.RunSettings``: dtype, device, plugins), which it puts in force at its
entry; a unit carries the driver's torch default dtype (:func:`driver_dtype`), which the worker
checks before it computes (:func:`require_dtype`), and a unit about a registry entry carries the
entry's name, not the entry (:class:`RegisteredEntryTask`; claims:
``claim_batch.RegisteredClaimTask``).
:func:`run_in_process` is the executor every producer uses when none is given.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any
from typing import ClassVar
from typing import TypeVar
from typing import cast

from testbed.info import EstimatorInfo
from testbed.registry import get_estimator

T = TypeVar("T")

#: How a producer hands its units to an executor: given the tasks, it yields ``(index,
#: result)`` for each as it finishes, in any order.
Execute = Callable[[Sequence[Callable[[], T]]], Iterable[tuple[int, T]]]


def driver_dtype() -> str:
    """The driver's torch default dtype, as a task carries it (``"float64"``)."""
    import torch

    return str(torch.get_default_dtype()).removeprefix("torch.")


def require_dtype(name: str) -> None:
    """Raise RuntimeError unless this process's torch default dtype is ``name`` (a task's
    :func:`driver_dtype`): a worker whose executor did not give it the driver's settings would
    compute other numbers."""
    if driver_dtype() != name:
        raise RuntimeError(
            f"this worker computes in {driver_dtype()}, its driver in {name}: the executor "
            "must put the driver's RunSettings in force at the worker's entry"
        )


def run_in_process(tasks: Sequence[Callable[[], T]]) -> Iterator[tuple[int, T]]:
    """The default executor: each task in turn, in this process."""
    for index, task in enumerate(tasks):
        yield index, task()


class SentByName:
    """A unit of work that holds the driver's object (a claim, a registry entry) in the
    attribute named by ``held``, and, pickled to a worker, leaves it out: the object may hold
    local functions, which do not pickle, and the worker finds its own copy by name, after
    checking that it computes in the driver's dtype (``default_dtype``)."""

    held: ClassVar[str]
    default_dtype: str

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, self.held: None}

    def _resolved(self, lookup: Callable[[str], T], name: str) -> T:
        """The driver's object, or, in a worker, ``lookup(name)`` with the dtype checked first."""
        own = getattr(self, self.held)
        if own is not None:
            return cast(T, own)
        require_dtype(self.default_dtype)
        return lookup(name)


class RegisteredEntryTask(SentByName):
    """A unit of work about one registry entry (an estimator or algorithm): in the driver it
    uses the entry object it was made with (which need not be registered: ``testbed verify
    module:object``); in a worker it finds the entry in the registry, plugins included.
    Subclasses are dataclasses with the fields ``name``, ``default_dtype`` and ``info``."""

    held = "info"
    name: str
    info: EstimatorInfo | None

    def resolved_info(self) -> EstimatorInfo:
        return self._resolved(get_estimator, self.name)


__all__ = [
    "Execute",
    "RegisteredEntryTask",
    "SentByName",
    "driver_dtype",
    "require_dtype",
    "run_in_process",
]

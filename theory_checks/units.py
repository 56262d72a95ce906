"""What every unit of work shares, wherever an executor runs it (``testbed_app.executors``).

A unit of work is a picklable callable without arguments. To compute in a worker process the
numbers the driver would, a unit carries the driver's torch default dtype (:func:`driver_dtype`,
set in the worker by :func:`use_dtype`), and a unit about a registry entry carries the entry's
name, not the entry (:class:`RegisteredEntryTask`; claims: ``runner.RegisteredClaimTask``).
:func:`run_in_process` is the executor every producer uses when none is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from testbed.info import EstimatorInfo

T = TypeVar("T")

#: How a producer hands its units to an executor: given the tasks, it yields ``(index,
#: result)`` for each as it finishes, in any order.
Execute = Callable[[Sequence[Callable[[], T]]], Iterable[tuple[int, T]]]


def driver_dtype() -> str:
    """The driver's torch default dtype, as a task carries it (``"float64"``)."""
    import torch

    return str(torch.get_default_dtype()).removeprefix("torch.")


def use_dtype(name: str) -> None:
    """Set this process's torch default dtype to ``name`` (a task's :func:`driver_dtype`)."""
    import torch

    torch.set_default_dtype(getattr(torch, name))


def run_in_process(tasks: Sequence[Callable[[], T]]) -> Iterator[tuple[int, T]]:
    """The default executor: each task in turn, in this process."""
    for index, task in enumerate(tasks):
        yield index, task()


class RegisteredEntryTask:
    """A unit of work about one registry entry (an estimator or algorithm) that pickles to a
    worker: in the driver it uses the entry object it was made with (which need not be
    registered: ``testbed verify module:object``); pickled, it carries the entry's name and the
    driver's dtype and finds the entry in the worker's registry, plugins included. Subclasses
    are dataclasses with the fields ``name``, ``default_dtype`` and ``info``."""

    name: str
    default_dtype: str
    info: EstimatorInfo | None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "info": None}

    def resolved_info(self) -> EstimatorInfo:
        """The entry: the driver's, or, in a worker, the registry's (dtype set first)."""
        if self.info is not None:
            return self.info
        from testbed.registry import get_estimator

        use_dtype(self.default_dtype)
        return get_estimator(self.name)


__all__ = ["Execute", "RegisteredEntryTask", "driver_dtype", "run_in_process", "use_dtype"]

"""The argparse types of the ``testbed`` command line: integers and numbers within named bounds,
ids of bounded length; a value past a bound is refused in one line that names the bound and
echoes at most 60 characters of what was given."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any
from typing import TypeVar

#: Bounds of the numeric options, each with why (a value past one is refused, naming it):
#: - MAX_JOBS: each local worker process imports torch (~0.3 GB) and the claims' problems;
#:   256 of them fill a large machine's memory, and no machine here has more useful cores.
#: - MAX_THREADS / MAX_CPUS: torch threads or Ray CPUs of one task or client; 1024 is above
#:   any single machine's cores (a Ray task asking for more is never scheduled: it would wait
#:   forever).
#: - MAX_GPUS: GPUs of one Flower client's Ray actor.
#: - MAX_RETRIES: Ray retries of a task whose worker dies (a negative count is Ray's "retry
#:   forever", which hides a crashing task).
#: - MAX_TIMEOUT: seconds a deployed server waits for a round's replies: a day, past which a
#:   round is lost, not slow.
#: - MAX_ID_LENGTH: a claim id, mutant, family or estimator name on the command line; the
#:   longest registered id has 60 characters, and an error echoes what was given.
MAX_JOBS = 256
MAX_THREADS = 1024
MAX_CPUS = 1024
MAX_GPUS = 64
MAX_RETRIES = 100
MAX_TIMEOUT = 86_400.0
MAX_ID_LENGTH = 200

T = TypeVar("T")


def shown_value(text: str, limit: int = 60) -> str:
    """``repr(text)``, cut to ``limit`` characters with its length when longer (an error line
    echoes what was given, never 100 kB of it)."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text):,} characters)"


def converted(convert: Callable[[str], T], text: str, expected: str) -> T:
    """``convert(text)`` (``int``, ``float``), or the argparse error ``expected <expected>, got
    <text>`` (:func:`shown_value`) when it is not one."""
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {shown_value(text)}") from None


def int_in(low: int, high: int) -> Any:
    """argparse type: an integer in ``[low, high]``, the bound named when it is not."""

    def parse(text: str) -> int:
        value = converted(int, text, f"an integer in [{low:,}, {high:,}]")
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low:,}, {high:,}], got {value:,}"
            )
        return value

    return parse


def number_in(low: float, high: float, low_open: bool = True) -> Any:
    """argparse type: a finite number in ``(low, high]`` (``[low, high]`` unless
    ``low_open``): ``--timeout -5``, ``nan`` and ``inf`` are refused with the bounds named."""
    bounds = f"{'(' if low_open else '['}{low:g}, {high:g}]"

    def parse(text: str) -> float:
        value = converted(float, text, f"a number in {bounds}")
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"expected a number in {bounds}, got {text}")
        return value

    return parse


def identifier(text: str) -> str:
    """argparse type: an id or name of at most :data:`MAX_ID_LENGTH` characters."""
    if len(text) > MAX_ID_LENGTH:
        raise argparse.ArgumentTypeError(
            f"{shown_value(text)} is not an id: ids and names have at most "
            f"{MAX_ID_LENGTH} characters"
        )
    return text


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--threads 0`` and ``--steps -2`` are errors)."""
    value = converted(int, text, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = converted(int, text, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


__all__ = [
    "MAX_CPUS",
    "MAX_GPUS",
    "MAX_ID_LENGTH",
    "MAX_JOBS",
    "MAX_RETRIES",
    "MAX_THREADS",
    "MAX_TIMEOUT",
    "converted",
    "identifier",
    "int_in",
    "non_negative_int",
    "number_in",
    "positive_int",
    "shown_value",
]

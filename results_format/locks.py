"""Locks on what a process writes: a run folder, a claim's results, a claim's calibration.

Two processes writing one run folder interleave their ``metrics.csv`` rows; two checks of one
claim race on its files. So a writer holds a lock for each thing it writes (:func:`holding`), and
a second process that wants one of them stops before any work with one line saying who holds it
(:class:`LockHeld`: pid, host, command, since when).

A lock is ``<results>/.locks/<key>.lock`` held with ``flock`` (``fcntl``; ``msvcrt.locking``
on Windows): the operating system releases it when its process ends, however it ends, so a
killed process never leaves a lock that blocks the next run. The holder writes its record
(JSON: pid, host, command, since) into the file and clears it on release; a record found by
the next holder therefore belongs to a process that ended without releasing (killed), and it
is taken over with a note naming that process. The file itself stays (removing it would let
two processes lock two different files of one name).

Locks are per process and reentrant: a driver that holds a run's lock may call code that takes
it again. Standard library only (see :mod:`results_format`); see docs/design.md
for why not the ``filelock`` package.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.paths import name_problem
from results_format.writing import write_failed

#: The folder of the lock files inside a results folder.
LOCK_FOLDER = ".locks"

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class LockHeld(RuntimeError):
    """Another process holds a lock this one needs; the message says who, and what to do."""


#: Locks this process holds: key path -> (descriptor, depth).
_HELD: dict[str, tuple[int, int]] = {}


def _record() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:300]
        if sys.argv
        else "python",
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _describe(record: dict[str, Any]) -> str:
    return (
        f"pid {record.get('pid', '?')} on {record.get('host', '?')}, "
        f"`{record.get('command', '?')}`, since {record.get('since', '?')}"
    )


def _read_record(descriptor: int) -> dict[str, Any] | None:
    try:
        raw = os.pread(descriptor, 4096, 0)
        record = json.loads(raw.decode()) if raw.strip() else None
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _try_lock(descriptor: int) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return False
            raise
        return True
    import msvcrt  # pragma: no cover - Windows

    try:  # pragma: no cover
        msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
    except OSError:  # pragma: no cover
        return False
    return True  # pragma: no cover


def _unlock(descriptor: int) -> None:
    if fcntl is not None:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
    else:  # pragma: no cover - Windows
        import msvcrt

        os.lseek(descriptor, 0, os.SEEK_SET)
        msvcrt.locking(descriptor, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]


def lock_path(results: Path, key: str) -> Path:
    """Where the lock ``key`` of ``results`` lives."""
    problem = name_problem(key)
    if problem is not None:
        raise ValueError(f"lock name {key!r}: {problem}")
    return Path(results) / LOCK_FOLDER / f"{key}.lock"


def acquire(results: Path, key: str, what: str) -> str | None:
    """Take the lock ``key`` of ``results`` for this process (reentrant); ``what`` names the
    thing locked in messages. Returns a note when a dead process's record was taken over.

    Raises:
        LockHeld: another process holds it.
        WriteFailed: the lock file cannot be created (a read-only folder, a full disk).
    """
    path = lock_path(results, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise write_failed(path.parent, error) from None
    name = str(path.resolve())
    if name in _HELD:
        descriptor, depth = _HELD[name]
        _HELD[name] = (descriptor, depth + 1)
        return None
    try:
        descriptor = os.open(
            path,
            os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
            0o644,
        )
    except OSError as error:
        raise write_failed(path, error) from None
    try:
        if not _try_lock(descriptor):
            holder = _read_record(descriptor)
            raise LockHeld(
                f"{what} is being written by another testbed process ("
                f"{_describe(holder) if holder else 'its record not written yet'}); "
                "wait for it to finish or stop it, then rerun (lock file "
                f"{path})"
            )
        previous = _read_record(descriptor)
        data = json.dumps(_record()).encode()
        os.ftruncate(descriptor, 0)
        if os.pwrite(descriptor, data, 0) != len(data):
            raise OSError(errno.ENOSPC, "the lock record was cut short")
    except OSError as error:
        os.close(descriptor)
        raise write_failed(path, error) from None
    except BaseException:
        os.close(descriptor)
        raise
    _HELD[name] = (descriptor, 1)
    if previous is not None:
        return (
            f"took over the lock of {what} left by {_describe(previous)}, which ended "
            "without releasing it"
        )
    return None


def release(results: Path, key: str) -> None:
    """Release one hold of the lock ``key`` of ``results`` (the last one clears the record)."""
    name = str(lock_path(results, key).resolve())
    if name not in _HELD:
        return
    descriptor, depth = _HELD[name]
    if depth > 1:
        _HELD[name] = (descriptor, depth - 1)
        return
    del _HELD[name]
    try:
        os.ftruncate(descriptor, 0)
    except OSError:
        pass  # a full disk cannot refuse a truncation; a read-only one leaves the record
    finally:
        _unlock(descriptor)
        os.close(descriptor)


def _stderr_note(message: str) -> None:
    print(f"testbed: note: {message}", file=sys.stderr)


@contextlib.contextmanager
def holding(
    results: Path, locks: Sequence[tuple[str, str]], notify: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Hold every ``(key, what)`` lock of ``results`` for the block (taken in key order, so two
    processes never wait on each other; the first one held elsewhere stops with
    :class:`LockHeld` and releases those already taken)."""
    taken: list[str] = []
    try:
        for key, what in sorted(dict(locks).items()):
            note = acquire(results, key, what)
            taken.append(key)
            if note is not None:
                (notify or _stderr_note)(note)
        yield
    finally:
        for key in reversed(taken):
            release(results, key)


__all__ = ["LOCK_FOLDER", "LockHeld", "acquire", "holding", "lock_path", "release"]

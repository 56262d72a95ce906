"""The one way a results file is written: whole, where the testbed means it, or not at all.

Every producer (claim results, calibration, experiment runs and their checkpoints, regression
baselines, the report) writes through :func:`atomic_write_bytes` (or :func:`atomic_write` for
text): the content goes to a temporary file created fresh in the target's folder
(:func:`tempfile.mkstemp`: ``O_CREAT | O_EXCL`` under a random name, so a symbolic link or any
file planted at a predictable name is never opened), and is renamed over the target
(``os.replace``, atomic within one file system; it replaces a link planted at the target's
name instead of writing through it). A reader sees the old file or the new one, never a torn
one. When the write fails (a full disk, a read-only folder, an interruption) the temporary
file is removed and the earlier file is left whole; an :class:`OSError` becomes a
:class:`WriteFailed` whose message is one line naming the file.

:func:`open_append` opens a file for appending without following a link at its name (the rows
of ``metrics.csv``). Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import IO


class WriteFailed(OSError):
    """A results file that could not be written (its ``errno`` kept); the message is one line
    naming the file and saying that nothing half-written was left."""


def _reason(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def write_failed(path: Path, error: OSError) -> WriteFailed:
    """The :class:`WriteFailed` of ``error`` while writing ``path``."""
    if isinstance(error, WriteFailed):
        return error
    advice = {
        errno.ENOSPC: "; free some space and rerun (finished work is kept)",
        errno.EDQUOT: "; free some space and rerun (finished work is kept)",
        errno.EROFS: "; choose a writable folder (--results / --out)",
        errno.EACCES: "; choose a writable folder (--results / --out)",
        errno.EPERM: "; choose a writable folder (--results / --out)",
    }
    message = (
        f"cannot write {path}: {_reason(error)}; nothing half-written was left"
        f"{advice.get(error.errno or 0, '')}"
    )
    failed = WriteFailed(error.errno or 0, message)
    failed.filename = str(path)
    return failed


def _creation_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: 0666 less the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


#: Read once at import (reading the umask means setting it, so not at every write).
_NEW_FILE_MODE = _creation_mode()


def _mode_for(path: Path) -> int:
    """The mode the file written at ``path`` gets: the old file's, as a rewrite in place would
    keep it, else a new file's (:data:`_NEW_FILE_MODE`)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return _NEW_FILE_MODE


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise write_failed(folder, OSError(errno.ENOTDIR, "exists and is not a folder")) from None
    except OSError as error:
        raise write_failed(folder, error) from None


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[tuple[IO[bytes], Path]]:
    """``(handle, temporary path)`` of a fresh temporary file beside ``path``; on a normal exit
    of the block the file is flushed and renamed over ``path``, on any exception it is removed
    (and an :class:`OSError` becomes :class:`WriteFailed`).

    For a writer that needs a file handle (``torch.save``); the temporary path lets the caller
    read the written file back before it takes ``path``'s name.
    """
    path = Path(path)
    _make_folder(path.parent)
    try:
        descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise write_failed(path, error) from None
    temporary = Path(name)
    try:
        os.fchmod(descriptor, _mode_for(path))  # mkstemp makes 0600: give a plain file's mode
        with os.fdopen(descriptor, "wb") as handle:
            yield handle, temporary
            handle.flush()
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise write_failed(path, error) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write_bytes(
    path: Path, data: bytes, before_replace: Callable[[Path], None] | None = None
) -> None:
    """Write ``data`` to ``path`` whole or not at all (module docstring), creating the folder.

    ``before_replace(temporary)`` runs after the data is on disk and before the rename (a
    checkpoint is read back there, and the previous one moved aside); its exception leaves
    ``path`` untouched.
    """
    with atomic_output(Path(path)) as (handle, temporary):
        handle.write(data)
        handle.flush()
        if before_replace is not None:
            before_replace(temporary)


def atomic_write(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` encoded as UTF-8."""
    atomic_write_bytes(Path(path), text.encode())


def open_append(path: Path) -> IO[str]:
    """``path`` opened for appending text (created when absent) without following a symbolic
    link at its name (``O_NOFOLLOW``: a planted link is an error, never a write elsewhere)."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as error:
        if error.errno == errno.ELOOP:
            error = OSError(errno.ELOOP, "it is a symbolic link (refused)")
        raise write_failed(path, error) from None
    return os.fdopen(descriptor, "a", newline="")


__all__ = [
    "WriteFailed",
    "atomic_output",
    "atomic_write",
    "atomic_write_bytes",
    "open_append",
    "write_failed",
]

"""Paths that come from a file or a config, kept inside the results folder.

A results file names other files (a claim's counterexample, its series) and a config names its
run folder (``name``); the testbed reads or writes them only where it means to:

- :func:`plain_name`: a name that becomes one folder (``runs/<name>/``) is a plain folder name:
  no ``.`` or ``..``, no separator, no NUL or control character, not hidden, at most
  :data:`MAX_NAME_LENGTH` characters;
- :func:`inside`: a relative path read from a results file, resolved (links followed) inside
  the results folder, or refused;
- :func:`output_folder`: a folder given on the command line (``--results``, ``--out``) that is
  a folder or does not exist yet (not a file, not a link loop).

Each refusal is an :class:`UnsafePath` (a :class:`ValueError`) whose message names the file or
option and what was wrong. Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import errno
import os
import unicodedata
from pathlib import Path

#: The longest run or claim name accepted (file systems allow 255 bytes per name; the testbed
#: adds suffixes such as ``.prev.pt`` and ``.lock``).
MAX_NAME_LENGTH = 100


class UnsafePath(ValueError):
    """A path from a file, a config or an argument that the testbed refuses to use."""


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a plain folder name, or ``None`` (see :func:`plain_name`)."""
    if not isinstance(name, str):
        return f"expected a string, got {type(name).__name__}"
    if not name.strip():
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} is not a folder name (it would name the results folder or above)"
    if "\x00" in name:
        return "it holds a NUL character"
    if "/" in name or "\\" in name:
        return "it holds a path separator"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        return "it holds a control character"
    if name.startswith("."):
        return "it starts with '.' (a hidden name)"
    if name != name.strip():
        return "it starts or ends with white space"
    if len(name) > MAX_NAME_LENGTH or len(name.encode()) > 2 * MAX_NAME_LENGTH:
        return f"it is {len(name)} characters long (at most {MAX_NAME_LENGTH})"
    return None


def plain_name(name: object, where: str) -> str:
    """``name`` when it is a plain folder name; :class:`UnsafePath` naming ``where`` (the file
    and key it came from) otherwise."""
    problem = name_problem(name)
    if problem is not None:
        raise UnsafePath(f"{where}: {str(name)[:60]!r} is not a plain folder name: {problem}")
    assert isinstance(name, str)
    return name


def inside(root: Path, relative: object, where: str) -> Path:
    """``root / relative`` when ``relative`` is a relative path string that stays inside
    ``root`` once resolved (``..`` and symbolic links followed); :class:`UnsafePath` naming
    ``where`` otherwise."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        raise UnsafePath(f"{where}: {relative!r} is not a relative path")
    if os.path.isabs(relative) or relative.startswith("~"):
        raise UnsafePath(
            f"{where}: {relative!r} is an absolute path; only files inside the "
            "results folder are read"
        )
    base = _resolved(Path(root), where)
    target = _resolved(Path(root) / relative, where)
    if target != base and base not in target.parents:
        raise UnsafePath(
            f"{where}: {relative!r} points outside the results folder {root}; it is not read"
        )
    return Path(root) / relative


def _resolved(path: Path, where: str) -> Path:
    try:
        return path.resolve()
    except (RuntimeError, OSError) as error:  # RuntimeError: a link loop (Python < 3.13)
        raise UnsafePath(f"{where}: {path} cannot be resolved ({error})") from None


def output_folder(path: Path, option: str) -> Path:
    """``path`` when it is a folder or absent (the command creates it); :class:`UnsafePath`
    naming ``option`` when it is a file, a link loop or a link to nothing usable."""
    path = Path(path)
    try:
        os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            raise UnsafePath(f"{option} {path}: a symbolic link to nothing") from None
        return path
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafePath(f"{option} {path}: a symbolic-link loop") from None
        raise UnsafePath(f"{option} {path}: {error.strerror}") from None
    if not path.is_dir():
        raise UnsafePath(
            f"{option} {path} is a file, not a folder; name a folder (it is created when absent)"
        )
    return path


__all__ = ["MAX_NAME_LENGTH", "UnsafePath", "inside", "name_problem", "output_folder", "plain_name"]

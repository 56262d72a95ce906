"""The authors' FedNest code (ucr-optml/FedNest) from a checkout the user names.

The folder comes from ``FEDNEST_AUTHORS_REPO`` (as for ``benchmarks/authors_fednest.py``, whose
approach this follows): their top-level packages ``core`` and ``utils`` are imported from it,
unmodified; the two imports their modules make and never use (``from cv2 import log``,
``from importlib_metadata import requires``) get empty stand-ins when those packages are absent.
Nothing of theirs is copied into this package.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

AUTHORS_ENV = "FEDNEST_AUTHORS_REPO"
HOW = ("set FEDNEST_AUTHORS_REPO to a checkout of ucr-optml/FedNest (git clone "
       "https://github.com/ucr-optml/FedNest /path/FedNest)")
#: The authors' modules the adapter imports (relative to their repository root).
AUTHORS_FILES = ("core/ClientManage_hr.py", "core/Client_hr.py", "utils/Fed.py",
                 "utils/options.py")
#: Imports of the authors' modules that they never use, and the names imported from them.
UNUSED_IMPORTS = {"cv2": ("log",), "importlib_metadata": ("requires",)}


class AuthorsCodeError(ImportError):
    """No usable checkout of the authors' code: the message says how to name one."""


def authors_repo() -> Path:
    """The checkout ``$FEDNEST_AUTHORS_REPO`` names (checked to hold their modules)."""
    named = os.environ.get(AUTHORS_ENV)
    if not named:
        raise AuthorsCodeError(f"the authors' FedNest code is not found: {HOW}")
    repo = Path(named).expanduser().resolve()
    missing = [name for name in AUTHORS_FILES if not (repo / name).is_file()]
    if missing:
        raise AuthorsCodeError(f"{repo} is not a checkout of ucr-optml/FedNest: it lacks "
                               f"{', '.join(missing)}")
    return repo


def import_authors_code(repo: Path) -> types.SimpleNamespace:
    """Their ``ClientManageHR``, ``Client`` (``core/Client_hr.py``), ``FedAvgP`` and
    ``args_parser``, imported from ``repo``."""
    for package in ("core", "utils", "models"):
        loaded = sys.modules.get(package)
        if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(str(repo)):
            raise AuthorsCodeError(f"a different top-level package {package!r} is already "
                                   f"imported ({getattr(loaded, '__file__', loaded)}); verify "
                                   "the authors' code in its own process")
    for module, names in UNUSED_IMPORTS.items():
        try:
            importlib.import_module(module)
        except ImportError:
            stand_in = types.ModuleType(module)
            stand_in.__doc__ = "empty stand-in for an import the authors' code never uses"
            for name in names:
                setattr(stand_in, name, None)
            sys.modules[module] = stand_in
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    try:
        return types.SimpleNamespace(
            repo=repo,
            ClientManageHR=importlib.import_module("core.ClientManage_hr").ClientManageHR,
            Client=importlib.import_module("core.Client_hr").Client,
            FedAvgP=importlib.import_module("utils.Fed").FedAvgP,
            args_parser=importlib.import_module("utils.options").args_parser,
        )
    except (ImportError, AttributeError) as error:
        raise AuthorsCodeError(f"cannot import the authors' modules from {repo}: "
                               f"{error}") from error


@contextlib.contextmanager
def their_prints_silenced() -> Iterator[None]:
    """Their modules print progress (client ids, every hypergradient)."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def authors_commit(repo: Path) -> str:
    """The checkout's commit, or "unknown" (a snapshot without .git)."""
    head = repo / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (repo / ".git" / ref[5:]).read_text().strip()
        return ref
    except OSError:
        return "unknown"


CODE = import_authors_code(authors_repo())

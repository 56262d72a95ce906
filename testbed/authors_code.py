"""The authors' FedNest code (ucr-optml/FedNest) imported from a checkout the user names,
unmodified: one loader for the benchmark that times it (``benchmarks/authors_fednest.py``) and
the plugin that verifies it (``integrations/fednest_authors``).

Their top-level packages (``core``, ``utils``, ``models``) are imported from the checkout; the
two imports their modules make and never use (``from cv2 import log``, ``from importlib_metadata
import requires``) get empty stand-ins when those packages are absent. Nothing of theirs is
copied into this project.

>>> try:
...     checkout("/nowhere", {"Client": "core.Client_hr:Client"})
... except AuthorsCodeError as error:
...     print(error)
/nowhere is not a checkout of ucr-optml/FedNest: it lacks core/Client_hr.py
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Mapping
from pathlib import Path

#: The environment variable naming a checkout, when no path is given.
AUTHORS_ENV = "FEDNEST_AUTHORS_REPO"
#: Their top-level packages: one of another origin already imported would shadow theirs.
PACKAGES = ("core", "utils", "models")
#: Imports of the authors' modules that they never use, and the names imported from them.
UNUSED_IMPORTS = {"cv2": ("log",), "importlib_metadata": ("requires",)}


class AuthorsCodeError(ImportError):
    """The named folder does not hold the authors' FedNest code, or it cannot be imported."""


def checkout(path: str | os.PathLike[str], names: Mapping[str, str]) -> Path:
    """The folder ``path``, resolved, once it is checked to hold the file of each module that
    ``names`` (attribute -> ``"module:name"``, as :func:`import_authors_code` takes them)
    imports from."""
    repo = Path(path).expanduser().resolve()
    files = sorted({reference.partition(":")[0].replace(".", "/") + ".py"
                    for reference in names.values()})
    missing = [name for name in files if not (repo / name).is_file()]
    if missing:
        raise AuthorsCodeError(f"{repo} is not a checkout of ucr-optml/FedNest: it lacks "
                               f"{', '.join(missing)}")
    return repo


def named_checkout() -> str | None:
    """The folder ``$FEDNEST_AUTHORS_REPO`` names, or ``None``."""
    return os.environ.get(AUTHORS_ENV) or None


def import_authors_code(repo: Path, names: Mapping[str, str]) -> types.SimpleNamespace:
    """Their objects ``names`` (attribute -> ``"module:name"``, e.g. ``"ClientManageHR":
    "core.ClientManage_hr:ClientManageHR"``) imported from ``repo``, with ``repo`` itself."""
    for package in PACKAGES:
        loaded = sys.modules.get(package)
        if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(str(repo)):
            raise AuthorsCodeError(f"a different top-level package {package!r} is already "
                                   f"imported ({getattr(loaded, '__file__', loaded)}); import "
                                   "the authors' code in its own process")
    for module, unused in UNUSED_IMPORTS.items():
        try:
            importlib.import_module(module)
        except ImportError:
            stand_in = types.ModuleType(module)
            stand_in.__doc__ = "empty stand-in for an import the authors' code never uses"
            for name in unused:
                setattr(stand_in, name, None)
            sys.modules[module] = stand_in
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    found: dict[str, object] = {"repo": repo}
    try:
        for attribute, reference in names.items():
            module, _, name = reference.partition(":")
            found[attribute] = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise AuthorsCodeError(f"cannot import the authors' modules from {repo}: "
                               f"{error}") from error
    return types.SimpleNamespace(**found)


__all__ = ["AUTHORS_ENV", "AuthorsCodeError", "UNUSED_IMPORTS", "checkout",
           "import_authors_code", "named_checkout"]

"""The FedMSA authors' code (ucr-optml/FedMSA) from the checkout ``FEDMSA_AUTHORS_REPO`` names,
imported unmodified by the testbed's loader (:mod:`testbed.authors_code`). Nothing of theirs is
copied into this package.

Their tree is a copy of FedNest's (top-level ``core``, ``utils``, ``models``): it cannot share a
process with the FedNest authors' code, and the loader refuses to shadow one with the other (one
``testbed verify`` per codebase). Their ``core/ClientManage*.py`` import ``cv2.log`` and never
use it: an empty stand-in when OpenCV is absent (the adapter imports ``core/BLOClient.py``,
``core/Client.py``, ``core/function.py``, ``utils/svrg.py`` and ``utils/options.py``, which run
unchanged on Python 3.11, torch 2.13 and numpy 2).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

from testbed.authors_code import (
    AuthorsCodeError,
    Codebase,
    checkout,
    commit_of,
    import_authors_code,
    named_checkout,
)

FEDMSA = Codebase(
    "ucr-optml/FedMSA",
    "FEDMSA_AUTHORS_REPO",
    ("core", "utils", "models"),
    unused_imports={"cv2": ("log",)},
)
HOW = (
    f"set {FEDMSA.env} to a checkout of {FEDMSA.repository} (git clone "
    "https://github.com/ucr-optml/FedMSA /path/FedMSA)"
)
#: The authors' objects the adapter uses, by module (relative to their repository root).
AUTHORS_OBJECTS = {
    "BLOClient": "core.BLOClient:BLOClient",
    "args_parser": "utils.options:args_parser",
}


def authors_repo() -> Path:
    """The checkout ``$FEDMSA_AUTHORS_REPO`` names (checked to hold their modules)."""
    named = named_checkout(FEDMSA)
    if named is None:
        raise AuthorsCodeError(f"the FedMSA authors' code is not found: {HOW}")
    return checkout(named, AUTHORS_OBJECTS, FEDMSA)


@contextlib.contextmanager
def their_prints_silenced() -> Iterator[None]:
    """Their modules print progress (client ids, "Done local_sp_func")."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


CODE = import_authors_code(authors_repo(), AUTHORS_OBJECTS, FEDMSA)
COMMIT = commit_of(CODE.repo)

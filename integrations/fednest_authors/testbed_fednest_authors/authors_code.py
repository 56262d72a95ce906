"""The authors' FedNest code (ucr-optml/FedNest) from the checkout ``FEDNEST_AUTHORS_REPO``
names, imported unmodified by the testbed's loader (:mod:`testbed.authors_code`, which
``benchmarks/authors_fednest.py`` uses too). Nothing of theirs is copied into this package.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

from testbed.authors_code import (
    AUTHORS_ENV,
    AuthorsCodeError,
    checkout,
    import_authors_code,
    named_checkout,
)

HOW = (
    f"set {AUTHORS_ENV} to a checkout of ucr-optml/FedNest (git clone "
    "https://github.com/ucr-optml/FedNest /path/FedNest)"
)
#: The authors' objects the adapter uses, by module (relative to their repository root).
AUTHORS_OBJECTS = {
    "ClientManageHR": "core.ClientManage_hr:ClientManageHR",
    "Client": "core.Client_hr:Client",
    "FedAvgP": "utils.Fed:FedAvgP",
    "args_parser": "utils.options:args_parser",
}


def authors_repo() -> Path:
    """The checkout ``$FEDNEST_AUTHORS_REPO`` names (checked to hold their modules)."""
    named = named_checkout()
    if named is None:
        raise AuthorsCodeError(f"the authors' FedNest code is not found: {HOW}")
    return checkout(named, AUTHORS_OBJECTS)


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


CODE = import_authors_code(authors_repo(), AUTHORS_OBJECTS)

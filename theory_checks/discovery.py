"""The claims a paper's package declares, found by reading its modules rather than listed by
hand: a new result module is registered by declaring ``CLAIMS``.

Each paper's ``__init__`` calls :func:`declared_claims` with its own name and path; the registry
(:mod:`theory_checks.registry`) gathers the packages' ``CLAIMS`` and sorts every claim by id.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

from theory_checks.claim import Claim

#: Modules of a paper's package that consume the claims rather than declare them: the mutants
#: run the registered claims (through :mod:`theory_checks.mutation`, which imports the registry),
#: so importing them while the registry gathers the packages would be an import loop.
CONSUMERS = frozenset({"mutants"})


def declared_claims(package: str, path: Iterable[str]) -> tuple[Claim, ...]:
    """Every ``CLAIMS`` of the modules of ``package`` (its ``__name__`` and ``__path__``), the
    modules in name order and each module's claims in its own order, so the result is the same
    on every machine; modules without ``CLAIMS`` (constants, shared helpers) add nothing. A
    result package (a long result split by job, ``fednest/lemma22/``) is listed like a module:
    its ``__init__`` declares the ``CLAIMS``; its submodules are not scanned."""
    found: list[Claim] = []
    for info in sorted(pkgutil.iter_modules(list(path)), key=lambda info: info.name):
        if info.name in CONSUMERS or info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        found.extend(getattr(module, "CLAIMS", ()))
    return tuple(found)

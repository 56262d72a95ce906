"""CLAIM_DB: every claim the testbed checks, gathered from the per-paper folders and, once a
run's settings load them (``theory_checks.settings.load_plugins``), from the installed plugins'
``testbed.claims`` entry points.

A plugin's entry point names a :class:`~theory_checks.claim.Claim`, a sequence of them, or a
module with ``CLAIMS`` (a package typically reads them from its own claims file with
:func:`theory_checks.claim_file.load_claims`). A claim whose id is taken, that names an
estimator nobody registered, or that does not load is left out, with the reason naming the
package and entry point in :func:`claim_plugin_problems`; the built-ins are never affected.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.paths import name_problem
from testbed import plugins
from testbed.names import did_you_mean
from testbed.names import shown
from testbed.registry import BUILTIN
from testbed.registry import ESTIMATOR_DB
from testbed.registry import get_estimator
from theory_checks import aggitd
from theory_checks import classical
from theory_checks import comparison
from theory_checks import fedmsa
from theory_checks import fednest
from theory_checks import hgp
from theory_checks.claim import Claim

CLAIMS_GROUP = "testbed.claims"

#: The papers' packages, each a folder of result modules (one per result, declaring CLAIMS).
PAPER_PACKAGES: tuple[types.ModuleType, ...] = (classical, fednest, aggitd, fedmsa, hgp, comparison)
BUILTIN_CLAIMS: tuple[Claim, ...] = tuple(
    claim for package in PAPER_PACKAGES for claim in package.CLAIMS
)

# Built-in claims, and once a run's settings load them the plugins' (refresh_claim_plugins),
# sorted by id; one list, refreshed in place. Importing this module loads no plugin.
CLAIM_DB: list[Claim] = sorted(BUILTIN_CLAIMS, key=lambda c: c.id)
_PROBLEMS: list[plugins.PluginProblem] = []


def _claims_of_value(value: Any) -> Sequence[Any]:
    if isinstance(value, types.ModuleType):
        value = getattr(value, "CLAIMS", None)
        if value is None:
            raise plugins.PluginError("the module has no CLAIMS")
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _check_claim(claim: Any, taken: set[str]) -> Claim:
    if not isinstance(claim, Claim):
        raise plugins.PluginError(f"it holds a {type(claim).__name__}, not a Claim")
    if claim.id in taken:
        raise plugins.PluginError(f"claim id {claim.id!r} is already registered")
    if name_problem(claim.id) is not None:
        raise plugins.PluginError(
            f"claim id {claim.id!r} is not a plain name (it names results "
            f"files): {name_problem(claim.id)}"
        )
    known = {info.name for info in ESTIMATOR_DB}
    unknown = [name for name in claim.estimators if name not in known]
    if unknown:
        raise plugins.PluginError(f"claim {claim.id!r} names unregistered estimator(s) {unknown}")
    return claim


def refresh_claim_plugins() -> list[plugins.PluginProblem]:
    """Load the plugins' claims again (when a run's settings are put in force:
    ``theory_checks.settings.load_plugins``); the problems of the entry points left out."""
    _PROBLEMS.clear()
    added = plugins.load_group(
        CLAIMS_GROUP,
        _claims_of_value,
        _check_claim,
        lambda claim: claim.id,
        {c.id for c in BUILTIN_CLAIMS},
        _PROBLEMS,
    )
    CLAIM_DB[:] = sorted(BUILTIN_CLAIMS + tuple(added), key=lambda c: c.id)
    return list(_PROBLEMS)


def claim_plugin_problems() -> list[plugins.PluginProblem]:
    return list(_PROBLEMS)


def get_claim(claim_id: str) -> Claim:
    """The registered claim ``claim_id``; a ``KeyError`` of one line naming the closest ids
    otherwise."""
    for claim in CLAIM_DB:
        if claim.id == claim_id:
            return claim
    raise KeyError(
        f"no claim {shown(claim_id)}{did_you_mean(claim_id, (c.id for c in CLAIM_DB))}; "
        "`testbed list` shows every claim"
    )


def defined_in(claim: Claim) -> str:
    """Where ``claim`` is declared: for a built-in claim the file of its result's module
    (``theory_checks/hgp/theorem2.py``, relative to the installed package's parent) or the
    folder of its result's package (``theory_checks/fednest/lemma22/``), which holds
    its statement, hypotheses, cases, check, perturbation and positive control; for a plugin's
    claim (not in a paper's package) the module of its check."""
    declared = _declaring_modules().get(claim.id)
    if declared is not None and declared[0] is claim:
        return _relative(declared[1])
    check_module = inspect.getmodule(claim.check)
    return f"its check in {check_module.__name__ if check_module else '?'}"


@functools.cache
def _declaring_modules() -> dict[str, tuple[Claim, types.ModuleType]]:
    """Each built-in claim id with its claim and the module whose ``CLAIMS`` declares it (the
    papers' packages are scanned once)."""
    found: dict[str, tuple[Claim, types.ModuleType]] = {}
    for package in PAPER_PACKAGES:
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for declared in getattr(module, "CLAIMS", ()):
                found[declared.id] = (declared, module)
    return found


def _relative(module: types.ModuleType) -> str:
    """The file of ``module``; for a package (a result split by job) its folder."""
    folder = "/" if hasattr(module, "__path__") else ""
    path = Path(str(module.__file__)).parent if folder else Path(str(module.__file__))
    root = Path(str(classical.__file__)).parents[2]
    return (path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)) + folder


#: The origin of a claim run whose claim and estimator are both the testbed's own.
BUILT_IN = "built-in"


def run_origin(claim: Claim, estimator: str) -> str:
    """Where a ``(claim, estimator)`` run comes from: :data:`BUILT_IN` when the claim and the
    estimator are both the testbed's own, else the plugin package(s) that provide them
    (``"plugin my-estimator"``), or ``"outside the testbed"`` for an entry registered at run
    time (``testbed verify module:object``). The report counts only built-in runs in the
    papers' totals and shows the others in a section of their own."""
    builtin_estimator = estimator in {info.name for info in BUILTIN}
    builtin_claim = claim.id in {c.id for c in BUILTIN_CLAIMS}
    if builtin_estimator and builtin_claim:
        return BUILT_IN
    packages = []
    if not builtin_claim:
        packages.append(plugins.package_providing(CLAIMS_GROUP, claim.id))
    if not builtin_estimator:
        packages += [plugins.package_providing(group, estimator) for group in plugins.GROUPS]
    named = sorted({p for p in packages if p})
    return f"plugin {', '.join(named)}" if named else "outside the testbed"


def claims_of(estimator: str) -> tuple[Claim, ...]:
    """The claims that check ``estimator``: those that name it, then those its registry entry
    enrolls it in (each link is written once, on one side)."""
    enrolled = set(get_estimator(estimator).enrolled_claims)
    return tuple(c for c in CLAIM_DB if estimator in c.estimators or c.id in enrolled)

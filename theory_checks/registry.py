"""CLAIM_DB: every claim the testbed checks, gathered from the per-paper folders and from the
installed plugins' ``testbed.claims`` entry points.

A plugin's entry point names a :class:`~theory_checks.claim.Claim`, a sequence of them, or a
module with ``CLAIMS`` (a package typically reads them from its own claims file with
:func:`theory_checks.claim_file.load_claims`). A claim whose id is taken, that names an
estimator nobody registered, or that does not load is left out, with the reason naming the
package and entry point in :func:`claim_plugin_problems`; the built-ins are never affected.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from results_format.paths import name_problem
from testbed import plugins
from theory_checks import aggitd, classical, comparison, fedmsa, fednest, hgp
from theory_checks.aggitd import rates as aggitd_rates
from theory_checks.claim import Claim
from theory_checks.fedmsa import rates as fedmsa_rates
from theory_checks.fednest import rates as fednest_rates

CLAIMS_GROUP = "testbed.claims"

BUILTIN_CLAIMS: tuple[Claim, ...] = (
    classical.CLAIMS + fednest.CLAIMS + fednest_rates.CLAIMS + aggitd.CLAIMS
    + aggitd_rates.CLAIMS + fedmsa.CLAIMS + fedmsa_rates.CLAIMS + hgp.CLAIMS + comparison.CLAIMS)

# Built-in and plugin claims sorted by id; one list, refreshed in place (refresh_claim_plugins).
CLAIM_DB: list[Claim] = []
_PROBLEMS: list[plugins.PluginProblem] = []


def _claims_of_value(value: Any) -> Sequence[Any]:
    if isinstance(value, types.ModuleType):
        value = getattr(value, "CLAIMS", None)
        if value is None:
            raise plugins.PluginError("the module has no CLAIMS")
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _check_claim(claim: Any, taken: set[str]) -> Claim:
    from testbed.registry import ESTIMATOR_DB

    if not isinstance(claim, Claim):
        raise plugins.PluginError(f"it holds a {type(claim).__name__}, not a Claim")
    if claim.id in taken:
        raise plugins.PluginError(f"claim id {claim.id!r} is already registered")
    if name_problem(claim.id) is not None:
        raise plugins.PluginError(f"claim id {claim.id!r} is not a plain name (it names results "
                                  f"files): {name_problem(claim.id)}")
    known = {info.name for info in ESTIMATOR_DB}
    unknown = [name for name in claim.estimators if name not in known]
    if unknown:
        raise plugins.PluginError(f"claim {claim.id!r} names unregistered estimator(s) "
                                  f"{unknown}")
    return claim


def refresh_claim_plugins() -> list[plugins.PluginProblem]:
    """Reload the plugins' claims; the problems of the entry points left out."""
    _PROBLEMS.clear()
    added = plugins.load_group(CLAIMS_GROUP, _claims_of_value, _check_claim,
                               lambda claim: claim.id, {c.id for c in BUILTIN_CLAIMS}, _PROBLEMS)
    CLAIM_DB[:] = sorted(BUILTIN_CLAIMS + tuple(added), key=lambda c: c.id)
    return list(_PROBLEMS)


def claim_plugin_problems() -> list[plugins.PluginProblem]:
    return list(_PROBLEMS)


refresh_claim_plugins()


def get_claim(claim_id: str) -> Claim:
    for claim in CLAIM_DB:
        if claim.id == claim_id:
            return claim
    raise KeyError(f"no claim {claim_id!r}; known: {', '.join(c.id for c in CLAIM_DB)}")


def claims_of(estimator: str) -> tuple[Claim, ...]:
    """The claims that check ``estimator``: those that name it, then those its registry entry
    enrolls it in (each link is written once, on one side)."""
    from testbed.registry import get_estimator

    enrolled = set(get_estimator(estimator).enrolled_claims)
    return tuple(c for c in CLAIM_DB if estimator in c.estimators or c.id in enrolled)

"""Planted one-line bugs in the FedMSA authors'-code adapter's calls (what its claims must
catch, on a faithful implementation of their module API)."""

from __future__ import annotations

from typing import Any

from testbed.registry import get_estimator
from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import field_variant
from theory_checks.perturbed_variants import recast


def _negated_v(**kw: Any) -> Any:
    # imported here: the adapter imports the authors' code, which reading the claims must not
    from testbed_fedmsa_authors.planted import NegatedV

    return recast(get_estimator("fedmsa-authors").build(**kw), NegatedV)


def _first_level_negated(**kw: Any) -> Any:
    from testbed_fedmsa_authors.planted import NegatedFirstLevel  # as in _negated_v

    return NegatedFirstLevel(**kw)


V_NEGATED = Perturbation(
    "v negated",
    "the adapter hands their p_func, s_func, update_local and fed_globhq -v (the other sign "
    "convention of the adjoint)",
    _negated_v,
)
ALPHA_DOUBLED = Perturbation(
    "alpha doubled",
    "--alpha 2 alpha: the step on x handed to their update_local doubled",
    field_variant("fedmsa-authors", outer_step_size=lambda e: 2 * e.outer_step_size),
)
FIRST_LEVEL_NEGATED = Perturbation(
    "z^1 negated",
    "the adapter hands their notebook's p_func and s_func -z^1 (a sign slip in the translation "
    "of the levels)",
    _first_level_negated,
)

"""Planted one-line bugs in the FedMSA authors'-code adapter's calls (what its claims must
catch, on a faithful implementation of their module API)."""

from __future__ import annotations

import dataclasses
from typing import Any

from testbed.registry import get_estimator
from theory_checks.claim import Perturbation


def _negated_v(**kw: Any) -> Any:
    # imported here: the adapter imports the authors' code, which reading the claims must not
    from testbed_fedmsa_authors.planted import NegatedV

    estimator = get_estimator("fedmsa-authors").build(**kw)
    return NegatedV(
        **{field.name: getattr(estimator, field.name) for field in dataclasses.fields(estimator)}
    )


def _alpha_doubled(**kw: Any) -> Any:
    estimator = get_estimator("fedmsa-authors").build(**kw)
    return dataclasses.replace(estimator, outer_step_size=2 * estimator.outer_step_size)


V_NEGATED = Perturbation(
    "v negated",
    "the adapter hands their p_func, s_func and update_local -v (the other sign "
    "convention of the adjoint)",
    _negated_v,
)
ALPHA_DOUBLED = Perturbation(
    "alpha doubled",
    "--alpha 2 alpha: the step on x handed to their update_local doubled",
    _alpha_doubled,
)

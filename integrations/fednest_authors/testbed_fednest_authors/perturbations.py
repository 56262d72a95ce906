"""Planted one-line bugs in the authors'-code adapter's calls (what its claims must catch)."""

from __future__ import annotations

import dataclasses
from typing import Any

from testbed.registry import get_estimator
from theory_checks.claim import Perturbation


def _with(**change: Any) -> Any:
    def make(**kw: Any) -> Any:
        estimator = get_estimator("fednest-authors").build(**kw)
        return dataclasses.replace(
            estimator, **{field: rule(estimator) for field, rule in change.items()}
        )

    return make


FEDOUT_ONE_STEP_SHORT = Perturbation(
    "FedOut one SVRG step short",
    "--outer_tau tau - 1 for tau: the local outer steps handed to "
    "their hyper_svrg_update off by one",
    _with(outer_local_steps=lambda e: max(e.outer_local_steps - 1, 1)),
)
HLR_DOUBLED = Perturbation(
    "hlr doubled",
    "--hlr 2 eta: the Neumann scale handed to their code doubled",
    _with(neumann_step_size=lambda e: 2 * e.neumann_step_size),
)

"""Planted one-line bugs in the authors'-code adapter's calls (what its claims must catch)."""

from __future__ import annotations

from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import field_variant

FEDOUT_ONE_STEP_SHORT = Perturbation(
    "FedOut one SVRG step short",
    "--outer_tau tau - 1 for tau: the local outer steps handed to "
    "their hyper_svrg_update off by one",
    field_variant("fednest-authors", outer_local_steps=lambda e: max(e.outer_local_steps - 1, 1)),
)
HLR_DOUBLED = Perturbation(
    "hlr doubled",
    "--hlr 2 eta: the Neumann scale handed to their code doubled",
    field_variant("fednest-authors", neumann_step_size=lambda e: 2 * e.neumann_step_size),
)

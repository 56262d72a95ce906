"""Planted one-line bugs in the TorchOpt adapter's calls: what its claims must catch.

Each builds the adapter as its registry entry does and changes one argument of the library call
(one solver iteration fewer, a step doubled, one unrolled step fewer), the size of bug a
translation layer makes; ``integrations/test_library_adapters.py`` shows each claim catches
its bug.
"""

from __future__ import annotations

from theory_checks.claim import Perturbation
from theory_checks.perturbed_variants import field_variant

SHORT_NORMAL_CG = Perturbation(
    "normal CG one iteration short",
    "solve_normal_cg(maxiter=dim_y - 1): an off-by-one in the iteration count handed to "
    "TorchOpt; not exact on the last Krylov direction",
    field_variant(
        "torchopt-implicit-normal-cg", cg_iterations=lambda e: max(e.cg_iterations - 1, 1)
    ),
)
SHORT_CG = Perturbation(
    "CG one iteration short",
    "solve_cg(maxiter=dim_y - 1)",
    field_variant("torchopt-implicit-cg", cg_iterations=lambda e: max(e.cg_iterations - 1, 1)),
)
NEUMANN_STEP_DOUBLED = Perturbation(
    "Neumann alpha doubled",
    "solve_inv(ns=True, alpha=2 lambda): the step handed to TorchOpt "
    "doubled (a unit mistake between lambda and 1/lambda is of this kind)",
    field_variant("torchopt-implicit-neumann", neumann_step_size=lambda e: 2 * e.neumann_step_size),
)
NEUMANN_ONE_TERM_SHORT = Perturbation(
    "Neumann maxiter = N - 2",
    "solve_inv(ns=True, maxiter=N - 2): N - 1 terms for N (the "
    "off-by-one the maxiter + 1 terms of torchopt.linalg.ns invites)",
    field_variant("torchopt-implicit-neumann", neumann_terms=lambda e: max(e.neumann_terms - 1, 1)),
)
UNROLLED_ONE_STEP_SHORT = Perturbation(
    "MetaSGD one step short",
    "T - 1 MetaSGD steps for T",
    field_variant("torchopt-unrolled", inner_steps=lambda e: max(e.inner_steps - 1, 0)),
)
UNROLLED_STEP_DOUBLED = Perturbation(
    "MetaSGD lr doubled",
    "MetaSGD(lr=2 beta)",
    field_variant("torchopt-unrolled", inner_step_size=lambda e: 2 * e.inner_step_size),
)

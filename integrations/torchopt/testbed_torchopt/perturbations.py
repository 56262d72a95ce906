"""Planted one-line bugs in the TorchOpt adapter's calls: what its claims must catch.

Each builds the adapter as its registry entry does and changes one argument of the library call
(one solver iteration fewer, a step doubled, one unrolled step fewer), the size of bug a
translation layer makes; ``tests/test_torchopt_adapter.py`` shows each claim catches its bug.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from testbed.registry import get_estimator
from theory_checks.claim import Perturbation


def _with(name: str, **change: Any) -> Any:
    """A builder of entry ``name`` with ``change(estimator) -> {field: value}`` applied."""
    def make(**kw: Any) -> Any:
        estimator = get_estimator(name).build(**kw)
        return dataclasses.replace(estimator, **{field: rule(estimator)
                                                 for field, rule in change.items()})

    return make


SHORT_NORMAL_CG = Perturbation(
    "normal CG one iteration short",
    "solve_normal_cg(maxiter=dim_y - 1): an off-by-one in the iteration count handed to "
    "TorchOpt; not exact on the last Krylov direction",
    _with("torchopt-implicit-normal-cg", cg_iterations=lambda e: max(e.cg_iterations - 1, 1)))
SHORT_CG = Perturbation(
    "CG one iteration short", "solve_cg(maxiter=dim_y - 1)",
    _with("torchopt-implicit-cg", cg_iterations=lambda e: max(e.cg_iterations - 1, 1)))
NEUMANN_STEP_DOUBLED = Perturbation(
    "Neumann alpha doubled", "solve_inv(ns=True, alpha=2 lambda): the step handed to TorchOpt "
    "doubled (a unit mistake between lambda and 1/lambda is of this kind)",
    _with("torchopt-implicit-neumann", neumann_step_size=lambda e: 2 * e.neumann_step_size))
NEUMANN_ONE_TERM_SHORT = Perturbation(
    "Neumann maxiter = N - 2", "solve_inv(ns=True, maxiter=N - 2): N - 1 terms for N (the "
    "off-by-one the maxiter + 1 terms of torchopt.linalg.ns invites)",
    _with("torchopt-implicit-neumann", neumann_terms=lambda e: max(e.neumann_terms - 1, 1)))
UNROLLED_ONE_STEP_SHORT = Perturbation(
    "MetaSGD one step short", "T - 1 MetaSGD steps for T",
    _with("torchopt-unrolled", inner_steps=lambda e: max(e.inner_steps - 1, 0)))
UNROLLED_STEP_DOUBLED = Perturbation(
    "MetaSGD lr doubled", "MetaSGD(lr=2 beta)",
    _with("torchopt-unrolled", inner_step_size=lambda e: 2 * e.inner_step_size))

"""The perturbations of HGP Theorem 1 (:mod:`theory_checks.hgp.theorem1`): the step slip on the
exact-averaging and static networks, and the sum reduction of the stochastic estimator.
"""

from __future__ import annotations

from theory_checks.claim import Perturbation
from theory_checks.hgp.perturbations import ViewedProblem
from theory_checks.hgp.perturbations import step_slip
from theory_checks.hgp.perturbations import swap

# --------------------------------------------------------------------------- perturbations

STEP_SLIP_EXACT = step_slip("hgp-exact-averaging")

# Why slow: each case runs six long static-network floors (~8 s on one core for the search)
STEP_SLIP_STATIC = step_slip("hgp-static", slow=True)

SUM_REDUCTION = Perturbation(
    "minibatch loss summed, not averaged",
    "the minibatch inner loss is reduced by sum instead of mean: at b = 4 the sampled Hessian "
    "is 4 H, I - eta H_b expands and the error grows geometrically. Thm 1's bound is 49x-940x "
    "the empirical 0.9-quantile on the drawn cases, so no bug smaller than such an inflation "
    "(a factor-2 variance, a small bias) can violate it: this is the realistic bug of that size",
    swap("hgp-stochastic", ViewedProblem, view="sum"),
)

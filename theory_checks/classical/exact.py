"""The exact hypergradient of the implicit function theorem (FedNest Lemma 2.1, eq. (8); AggITD
eq. (2)).

Result. With ``y*(x) = argmin_y g(x, y)`` and ``h(x) = f(x, y*(x))``,

    grad h(x) = grad_x f(x, y*) - grad^2_xy g(x, y*) [grad^2_y g(x, y*)]^{-1} grad_y f(x, y*).

Hypotheses: ``g`` mu-strongly convex in y (so y*(x) is unique and differentiable).

Checked (:func:`check_exact_finite_differences`): the estimator ``exact`` equals central finite
differences of ``h`` to 1e-6 relative; the perturbation scales the closed form by 1 + 1e-4."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from testbed.estimators.classical import ExactHypergradient
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Perturbation
from theory_checks.classical.common import result_identity_claim
from theory_checks.exact_quantities import evaluation_point

# --------------------------------------------------------------------------- exact vs FD


def check_exact_finite_differences(
    claim: Claim, case: Case, make: Callable[..., Any]
) -> Measurement:
    """The exact hypergradient equals central finite differences of h(x) = f(x, y*(x))."""
    problem = case.problem
    x, _ = evaluation_point(problem, case.params["point_seed"])
    estimator = make()
    state = estimator.init(problem)  # a library adapter's state is its inner start
    value = estimator.estimate(problem, x, state, np.random.default_rng(0)).value
    # Why eps^(1/3) * scale: the step that balances truncation (O(h^2)) and round-off
    # (O(eps / h)) for central differences.
    step = np.finfo(np.float64).eps ** (1.0 / 3.0) * max(1.0, float(x.abs().max()))
    eye = torch.eye(problem.dim_x, dtype=torch.float64)
    fd = torch.stack(
        [
            (problem.outer_objective(x + step * e) - problem.outer_objective(x - step * e))
            / (2 * step)
            for e in eye
        ]
    )
    relative = float((value - fd).norm()) / (float(fd.norm()) + 1.0)
    # Why 1e-6: central differences with that step are accurate to ~eps^(2/3) ~ 4e-11 times
    # the third derivative scale; quadratics have none, but round-off in h(x) (magnitude up to
    # ~1e3 here) divided by the step leaves ~1e-8.
    return Measurement(relative, 1e-6, relative <= 1e-6, "relative difference <=")


@dataclasses.dataclass(frozen=True)
class _Biased(ExactHypergradient):
    def compute(self, problem: Any, x: Any, state: Any, rng: Any) -> Any:
        out = super().compute(problem, x, state, rng)
        return out._replace(value=out.value * (1 + 1e-4))


def _biased_exact(**kw: Any) -> Any:
    return _Biased()


BIASED_EXACT = Perturbation(
    "1e-4 relative bias",
    "the closed form scaled by 1 + 1e-4 (a wrong constant far below any "
    "visible effect on an optimisation run, but 100x the finite-difference tolerance)",
    _biased_exact,
)


# --------------------------------------------------------------------------- the claims

FINITE_DIFFERENCES = result_identity_claim(
    id="classical.exact.finite_differences",
    reference="Implicit function theorem; FedNest Lemma 2.1 (eq. 8), AggITD eq. (2)",
    statement="grad h(x) = central finite differences of h(x) = f(x, y*(x))",
    estimators=("exact",),
    check=check_exact_finite_differences,
    perturbation=BIASED_EXACT,
)


CLAIMS: tuple[Claim, ...] = (FINITE_DIFFERENCES,)

"""Iterative differentiation through T gradient steps (ITD; Grazzi et al. 2020, Thm 2.1).

Result. On a quadratic inner problem, reverse-mode ITD through T GD steps of size beta gives
(derived here)

    ITD_T = grad_x f(x, y_T) - J H^{-1} (I - (I - beta H)^T) grad_y f(x, y_T),
    y_T = y* + (I - beta H)^T (y_0 - y*),                                         (identity)

and its error is bounded as in Grazzi et al. 2020, Thm 2.1, with the constants of GD on a
quadratic inner problem (``q = max|1 - beta lambda(H)|``, ``l_x, l_y`` the Lipschitz constants of
``grad_x f, grad_y f`` in y):

    ||ITD_T - grad h|| <= q^T [ (l_x + ||J|| l_y (1 + q^T)/mu) ||y_0 - y*||
                                + ||J|| ||grad_y f(x, y*)|| / mu ].                (bound)

Hypotheses: ``g`` mu-strongly convex and L-smooth in y, ``beta <= 1/L``.

Checked: the identity at a drawn T, on cases where T - 1 and T + 1 give a different ITD
(:func:`check_itd_error_identity`; perturbation: one step short), and the bound at every T of a
grid (:func:`check_itd_error_bound`; perturbation: the inner iterate detached from x)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from problems import ProblemConstants
from testbed import GradientDescent
from testbed import IterativeDifferentiation
from testbed import Oracles
from testbed.estimators.base import InnerState
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.classical.common import KIND_ERROR_BOUND
from theory_checks.classical.common import KIND_STEP_IDENTITY
from theory_checks.classical.common import classical_claim
from theory_checks.classical.common import exact_parts
from theory_checks.classical.common import grid
from theory_checks.classical.common import hypergradient_scale
from theory_checks.classical.common import relative_identity
from theory_checks.classical.constants import GD_STEP_CAP
from theory_checks.classical.constants import STRONGLY_CONVEX
from theory_checks.classical.constants import smoothness
from theory_checks.measurements import BoundOnGrid
from theory_checks.perturbed_variants import registry_variant
from theory_checks.tolerances import IDENTITY_RTOL
from theory_checks.tolerances import UNRESOLVED_TERM

# --------------------------------------------------------------------------- ITD


def _itd_run(case: Case, make: Callable[..., Any], steps: int) -> tuple[Any, ...]:
    problem = case.problem
    view, x, y0, y_star, grad_x, grad_y = exact_parts(case)
    beta = 1.0 / smoothness(problem)
    estimator = make(inner_steps=steps, inner_step_size=beta)
    out = estimator.estimate(problem, x, InnerState(y0), np.random.default_rng(0))
    return out, view, x, y0, y_star, grad_x, grad_y, beta


def _itd_prediction(
    view: Any, x: torch.Tensor, y0: torch.Tensor, y_star: torch.Tensor, beta: float, steps: int
) -> tuple[torch.Tensor, float]:
    """The identity's ITD_T and the scale of its residual (the gradients at y_T)."""
    eye = torch.eye(y0.shape[0], dtype=torch.float64)
    A_T = torch.linalg.matrix_power(eye - beta * view.H, steps)
    y_T = y_star + A_T @ (y0 - y_star)
    gx_T, gy_T = view.grad_outer(x, y_T)
    predicted = gx_T - view.J @ torch.linalg.solve(view.H, (eye - A_T) @ gy_T)
    return predicted, hypergradient_scale(view, gx_T, gy_T)


def check_itd_error_identity(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """ITD_T = grad_x f(x, y_T) - J H^{-1}(I - (I - beta H)^T) grad_y f(x, y_T) on quadratics.

    A case whose identity gives the same value at T - 1 or T + 1 as at T (to within what the
    identity resolves) cannot test it: with ``beta H = I`` (kappa = 1, or a compositional
    problem's identity inner Hessian) one step reaches y* and every T >= 1 gives the same ITD, so
    an estimator off by one step would pass. Such cases are rejected, not counted as passes.
    """
    steps = int(case.params.get("inner_steps", 1 + case.params["point_seed"] % 40))
    out, view, x, y0, y_star, _, _, beta = _itd_run(case, make, steps)
    predicted, scale = _itd_prediction(view, x, y0, y_star, beta, steps)
    for neighbour in (steps - 1, steps + 1):
        other, _ = _itd_prediction(view, x, y0, y_star, beta, neighbour)
        gap = float((other - predicted).norm())
        if neighbour >= 0 and gap < UNRESOLVED_TERM * scale:
            raise NotMeasurable(
                f"the identity gives the same ITD at T = {neighbour} as at "
                f"T = {steps} ({gap / scale:.2g} of the scale): an off-by-one "
                "in T would pass"
            )
    m = relative_identity(out.value - predicted, scale)
    return Measurement(
        m.measured, m.bound, m.passed, "relative residual <=", details={"inner_steps": steps}
    )


def itd_error_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """q^T [ (l_x + ||J|| l_y (1 + q^T) / mu) ||y_0 - y*|| + ||J|| ||grad_y f(x, y*)|| / mu ]."""
    q = max(
        abs(1.0 - params["inner_step_size"] * constants.mu),
        abs(1.0 - params["inner_step_size"] * constants.L),
    )
    qT = q ** params["inner_steps"]
    J, mu = constants.cross_norm, constants.mu
    return qT * (
        (constants.outer_grad_x_lipschitz + J * constants.outer_grad_y_lipschitz * (1.0 + qT) / mu)
        * params["initial_distance"]
        + J * params["grad_y_norm"] / mu
    )


def check_itd_error_bound(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """||ITD_T - grad h|| <= itd_error_bound on a grid of T in [0, T_max]."""
    problem = case.problem
    constants = problem.constants()
    view, x, y0, y_star, grad_x, grad_y = exact_parts(case)
    exact = problem.exact_hypergradient(x)
    beta = 1.0 / smoothness(problem)
    slack = IDENTITY_RTOL * hypergradient_scale(view, grad_x, grad_y)
    t_max = int(min(150, math.ceil(3 * constants.kappa) + 3))  # why: ~3 e-folds of decay
    points = BoundOnGrid("inner_steps", slack)
    for steps in [0, *grid(1, t_max)]:
        estimator = make(inner_steps=steps, inner_step_size=beta)
        out = estimator.estimate(problem, x, InnerState(y0), np.random.default_rng(0))
        error = float((out.value - exact).norm())
        params = {
            "inner_steps": steps,
            "inner_step_size": beta,
            "initial_distance": float((y0 - y_star).norm()),
            "grad_y_norm": float(grad_y.norm()),
        }
        bound = claim.evaluate_bound(constants, params)
        points.add(steps, error, bound, out.calls.oracle_calls)
    # the last point's slack is recorded: a case passes only if its last point does
    return points.measurement("<= at every T on the grid", slack=slack)


@dataclasses.dataclass(frozen=True)
class _OneStepShort(IterativeDifferentiation):
    """ITD that runs and differentiates one inner step fewer than asked (an off-by-one)."""

    def compute(self, problem: Any, x: Any, state: Any, rng: Any) -> Any:
        short = IterativeDifferentiation(
            GradientDescent(max(self.inner.steps - 1, 0), self.inner.step_size)
        )
        return short.estimate(problem, x, state, rng)


_itd_one_step_short = registry_variant("itd", _OneStepShort)


@dataclasses.dataclass(frozen=True)
class _Detached(IterativeDifferentiation):
    """ITD whose inner iterate is detached from x: only the direct part grad_x f(x, y_T)."""

    def compute(self, problem: Any, x: Any, state: Any, rng: Any) -> Any:
        out = super().compute(problem, x, state, rng)
        clients = torch.arange(problem.n_clients)
        direct = Oracles(problem).grad_outer(x, out.aux["y"], clients)[0].mean(0)
        return out._replace(value=direct)


_itd_detached = registry_variant("itd", _Detached)


ITD_ONE_STEP_SHORT = Perturbation(
    "ITD one step short",
    "ITD runs and differentiates T - 1 inner steps when asked for T (an "
    "off-by-one in the unrolled loop)",
    _itd_one_step_short,
)
ITD_DETACHED = Perturbation(
    "ITD with the inner iterate detached",
    "the unrolled iterate is detached from x (a missing "
    "requires_grad / a stop-gradient): ITD returns grad_x f(x, y_T) without the indirect term, "
    "whose error does not decay with T",
    _itd_detached,
)


# --------------------------------------------------------------------------- the claims

# What every claim of this result shares.
itd_claim = classical_claim.but(estimators=("itd",), hypotheses=(STRONGLY_CONVEX, GD_STEP_CAP))


ERROR_IDENTITY = itd_claim(
    **KIND_STEP_IDENTITY,
    id="classical.itd.error_identity",
    reference="derived here: reverse-mode ITD through T GD steps on a quadratic inner problem",
    statement=(
        "ITD_T = grad_x f(x, y_T) - J H^{-1} (I - (I - beta H)^T) grad_y f(x, y_T), y_T = "
        "y* + (I - beta H)^T (y_0 - y*)"
    ),
    check=check_itd_error_identity,
    perturbation=ITD_ONE_STEP_SHORT,
)


ERROR_BOUND = itd_claim(
    **KIND_ERROR_BOUND,
    id="classical.itd.error_bound",
    reference="Grazzi et al. 2020, Thm 2.1 (ITD bound), constants for GD on a quadratic inner",
    statement=(
        "||ITD_T - grad h|| <= q^T [ (l_x + ||J|| l_y (1 + q^T)/mu) ||y_0 - y*|| + ||J|| "
        "||grad_y f(x, y*)|| / mu ],  q = max|1 - beta lambda(H)|"
    ),
    check=check_itd_error_bound,
    perturbation=ITD_DETACHED,
    bound=itd_error_bound,
    notes=(
        "The paper's bound is O((c1 + c2 t / q) q^t) for a general contraction; its t q^(t-1) "
        "term comes from the Jacobian of the map varying along the trajectory and vanishes "
        "when the inner Hessian is constant. The constants here are derived for Phi(y) = y - "
        "beta grad_y g with l_x = Lip(grad_x f in y), l_y = Lip(grad_y f in y); the paper's "
        "own constants were not available offline."
    ),
)


CLAIMS: tuple[Claim, ...] = (
    ERROR_IDENTITY,
    ERROR_BOUND,
)

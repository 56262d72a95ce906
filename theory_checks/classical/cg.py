"""Conjugate gradient in AID is exact after dim_y iterations (Hestenes & Stiefel 1952; Grazzi et al.
2020, AID-CG).

Result. CG on ``H v = grad_y f(x, y*)`` from ``v = 0`` terminates, in exact arithmetic, in at most
dim_y iterations, so AID-CG with dim_y iterations and ``y = y*(x)`` returns
``grad h = grad_x f - J H^{-1} grad_y f`` exactly.

Hypotheses: ``g`` mu-strongly convex in y (H symmetric positive definite).

Checked: the relative error of AID-CG to within ``IDENTITY_RTOL * kappa`` (CG's forward error grows
with the condition number), on cases where a CG one iteration short would not already be exact
(:func:`check_cg_exact`); the perturbation runs dim_y - 1 iterations.
:func:`check_normal_cg_exact` is the same check for CG on the normal equations ``H^T H`` (tolerance
``kappa^2``), which no built-in claim uses: the TorchOpt plugin's claim names it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from testbed import ConjugateGradient
from testbed.registry import get_estimator
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.classical.common import exact_parts
from theory_checks.classical.common import hypergradient_scale
from theory_checks.classical.common import result_identity_claim
from theory_checks.tolerances import IDENTITY_RTOL
from theory_checks.tolerances import UNRESOLVED_TERM

# --------------------------------------------------------------------------- CG


def _textbook_cg(H: np.ndarray, rhs: np.ndarray, iterations: int) -> np.ndarray:
    """``iterations`` steps of textbook conjugate gradient on ``H v = rhs`` from ``v = 0``, on
    the dense matrix (an implementation independent of the estimator's, which sees only
    Hessian-vector products); exact arithmetic stops at a zero residual."""
    v, residual = np.zeros_like(rhs), rhs.copy()
    direction, rr = residual.copy(), float(residual @ residual)
    for _ in range(iterations):
        if rr == 0.0:
            break
        h_dir = H @ direction
        step = rr / float(direction @ h_dir)
        v, residual = v + step * direction, residual - step * h_dir
        rr_next = float(residual @ residual)
        direction, rr = residual + (rr_next / rr) * direction, rr_next
    return v


def check_cg_exact(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """AID-CG with dim_y iterations and the exact inner solution equals the exact hypergradient."""
    return cg_exactness(case, make, operator_power=1)


def check_normal_cg_exact(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """AID with CG on the normal equations ``H^T H u = H^T grad_y f`` (a library's solver for
    non-symmetric systems), dim_y iterations, exact inner solution: exact, to the round-off of
    CG on ``H^T H``, whose condition number is kappa^2."""
    return cg_exactness(case, make, operator_power=2)


def cg_exactness(case: Case, make: Callable[..., Any], operator_power: int) -> Measurement:
    """CG with dim_y iterations on the operator ``H^operator_power`` (1: H; 2: the normal
    equations) from the exact inner solution: the relative error of the hypergradient.

    A case on which CG is already exact after dim_y - 1 iterations cannot test the count: with
    ``grad_y f(x, y*) = 0`` (minimax problems) or an inner Hessian with fewer than dim_y distinct
    eigenvalues excited by ``grad_y f`` (a compositional problem's H = I) the Krylov space is
    exhausted early, and a CG one iteration short would pass. Such cases are rejected.
    """
    problem = case.problem
    view, x, _, _, grad_x, grad_y = exact_parts(case)
    scale = hypergradient_scale(view, grad_x, grad_y)
    H, J, g = view.H.cpu().numpy(), view.J.cpu().numpy(), grad_y.cpu().numpy()
    operator = np.linalg.matrix_power(H, operator_power)  # H, or H^T H (H symmetric)
    rhs = np.linalg.matrix_power(H, operator_power - 1) @ g
    short = J @ (_textbook_cg(operator, rhs, problem.dim_y - 1) - np.linalg.solve(H, g))
    if float(np.linalg.norm(short)) < UNRESOLVED_TERM * scale:
        raise NotMeasurable(
            "CG is exact here after dim_y - 1 iterations ("
            f"{float(np.linalg.norm(short)) / scale:.2g} of the scale): a CG "
            "one iteration short would pass"
        )
    estimator = make(inner_steps=None, cg_iterations=problem.dim_y)
    out = estimator.estimate(problem, x, estimator.init(problem), np.random.default_rng(0))
    residual = out.value - problem.exact_hypergradient(x)
    relative = float(residual.norm()) / scale
    # Why kappa(operator) * 1e-10: CG's forward error in floating point grows with the condition
    # number of the operator it runs on (Greenbaum 1997, Thm 4.2.1), kappa for H and kappa^2 for
    # H^T H; at kappa = 1 this is the identity tier.
    tol = IDENTITY_RTOL * problem.constants().kappa ** operator_power
    return Measurement(
        relative,
        tol,
        relative <= tol,
        "relative error <=",
        details={"cg_iterations": problem.dim_y, "hvp_calls": out.calls.hvp},
    )


def _short_cg(**kw: Any) -> Any:
    est = get_estimator("aid-cg").build(**kw)
    return dataclasses.replace(
        est, linear_solver=ConjugateGradient(max(est.linear_solver.iterations - 1, 0))
    )


SHORT_CG = Perturbation(
    "CG one iteration short",
    "dim_y - 1 conjugate-gradient iterations instead of dim_y (an "
    "off-by-one in the iteration count): not exact on the slowest Krylov direction",
    _short_cg,
)


# --------------------------------------------------------------------------- the claims

EXACT_AFTER_DIM_Y = result_identity_claim(
    id="classical.cg.exact_after_dim_y",
    reference="Hestenes & Stiefel 1952; Grazzi et al. 2020 (AID-CG)",
    statement="AID-CG with dim_y iterations and y = y*(x) returns grad h exactly",
    estimators=("aid-cg",),
    check=check_cg_exact,
    perturbation=SHORT_CG,
)


CLAIMS: tuple[Claim, ...] = (EXACT_AFTER_DIM_Y,)

r"""The check of betty's DARTS hypergradient (claim ``betty.darts.one_term_identity``).

Betty's ``darts`` (``betty/hypergradient/darts.py``) returns, for ``v = grad_y f(x, y)``,

.. math::  \frac{\nabla_x g(x, y - \epsilon v) - \nabla_x g(x, y + \epsilon v)}{2 \epsilon}
           = -\nabla^2_{xy} g(x, y)\, v + O(\epsilon^2), \qquad \epsilon = R / \|v\|,

and the upper problem adds it to its direct gradient: implicit differentiation with the inverse
Hessian replaced by the identity (the one-term Neumann sum at lambda = 1). On a quadratic inner
problem ``grad_x g`` is affine in ``y``, so the central difference is exact up to round-off and

.. math::  \hat h = \nabla_x f(x, y_T) - \nabla^2_{xy} g\, \nabla_y f(x, y_T),
           \qquad y_T = y^* + (I - \beta H)^T (y_0 - y^*),

at the lower iterate after betty's T SGD steps of step beta. Everything on the right is computed
here independently of the testbed's oracles and estimators: dense derivatives by
``torch.func`` of the problem's own losses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from testbed.estimators.base import InnerState
from testbed.library_adapter import dense_derivatives
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.exact_quantities import evaluation_point
from theory_checks.tolerances import IDENTITY_RTOL
from theory_checks.tolerances import UNRESOLVED_TERM

#: Why 64: each gradient ``grad_x g`` is a sum of at most a few dozen float64 products (dims <=
#: 8, clients <= 16 averaged), whose rounding is at most that many units of round-off of the
#: magnitude summed; the difference quotient divides it by 2 epsilon.
ROUNDOFF_TERMS = 64


def _prediction(
    problem: Any, x: torch.Tensor, y0: torch.Tensor, beta: float, steps: int
) -> tuple[torch.Tensor, float, float, torch.Tensor]:
    """The identity's value at ``y_T``, its scale, the round-off of betty's quotient, ``y_T``."""
    y_star = problem.exact_inner_solution(x)
    at_star = dense_derivatives(problem, x, y_star)
    H, J = at_star.H, at_star.J
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    y_T = y_star + torch.linalg.matrix_power(eye - beta * H, steps) @ (y0 - y_star)
    at_T = dense_derivatives(problem, x, y_T)
    gx, gy = at_T.grad_x_f, at_T.grad_y_f
    predicted = gx - J @ gy
    J_norm = float(torch.linalg.matrix_norm(J, ord=2))
    scale = float(gx.norm()) + J_norm * float(gy.norm()) + 1e-300
    return predicted, scale, J_norm, y_T


def check_darts_one_term_identity(
    claim: Claim, case: Case, make: Callable[..., Any]
) -> Measurement:
    """betty's darts hypergradient after T lower steps equals the one-term identity above."""
    problem = case.problem
    seed = int(case.params["point_seed"])
    steps = int(case.params.get("inner_steps", 1 + seed % 20))
    x, y0 = evaluation_point(problem, seed)
    beta = 1.0 / float(problem.constants().L)
    predicted, scale, J_norm, y_T = _prediction(problem, x, y0, beta, steps)
    for neighbour in (steps - 1, steps + 1):
        other = _prediction(problem, x, y0, beta, neighbour)[0] if neighbour >= 1 else None
        if other is not None and float((other - predicted).norm()) < UNRESOLVED_TERM * scale:
            # Why: with beta H = I (kappa = 1) one step reaches y* and every T gives the same
            # value: a lower loop one step off would pass. Such a case cannot test T.
            raise NotMeasurable(
                f"the identity gives the same value at T = {neighbour} as at T = {steps}"
            )
    estimator = make(inner_steps=steps, inner_step_size=beta)
    out = estimator.estimate(problem, x, InnerState(y0), np.random.default_rng(0))
    at_T = dense_derivatives(problem, x, y_T)
    gy_norm, g_x_norm = float(at_T.grad_y_f.norm()), float(at_T.grad_x_g.norm())
    radius = float(getattr(estimator, "darts_alpha", 0.01))
    # the central difference of an affine function is exact; what is left is the rounding of
    # the two gradients (magnitude <= |grad_x g| + ||J|| R) divided by 2 epsilon = 2 R / ||v||
    roundoff = (
        ROUNDOFF_TERMS
        * float(np.finfo(np.float64).eps)
        * (g_x_norm + J_norm * radius)
        * gy_norm
        / radius
    )
    tol = IDENTITY_RTOL + roundoff / scale
    relative = float((out.value - predicted).norm()) / scale
    shift = float((out.state.y - y_T).norm())
    return Measurement(
        relative,
        tol,
        relative <= tol,
        "relative residual <=",
        details={
            "inner_steps": steps,
            "darts_alpha": radius,
            "lower_parameters_left_moved_by": shift,
        },
    )

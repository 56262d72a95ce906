"""The classical results' shared helpers: the closed-form cases every classical claim draws
(per kind of claim: :data:`IDENTITY_CASES`, :data:`BOUND_CASES`, :data:`RATE_CASES`), what the
claims of a kind share (``KIND_*``, :data:`result_identity_claim`), and the exact quantities
several checks compare with.

Notation (docs/glossary.md): ``H = grad^2_y g`` (dy x dy), ``J = grad^2_xy g`` (dx x dy),
``mu, L`` the extreme eigenvalues of H, ``lambda`` the Neumann step (``neumann_step_size``),
``beta`` the inner GD step (``inner_step_size``), ``N`` the Neumann terms (``neumann_terms``),
``T`` the inner steps (``inner_steps``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import strategies
from results_format.verdicts import ABOUT_RESULT
from results_format.verdicts import ABOUT_STEP
from theory_checks.claim import Case
from theory_checks.claim import Measurement
from theory_checks.claim import paper_claim
from theory_checks.classical.constants import STRONGLY_CONVEX
from theory_checks.exact_quantities import evaluation_point
from theory_checks.exact_quantities import quadratic_view
from theory_checks.tolerances import IDENTITY_RTOL

#: The constructor of Classical's claims (:class:`~theory_checks.claim.ClaimMaker`); each result
#: module narrows it with the fields its claims share.
classical_claim = paper_claim("Classical")


ALL_KINDS = ("bilevel", "minimax", "compositional")


def closed_form_problems(
    kinds: tuple[str, ...] = ALL_KINDS,
    *,
    min_dim_y: int = 1,
    max_dim: int = 8,
    kappa: tuple[float, float] = (1.0, 100.0),
) -> st.SearchStrategy[Any]:
    """Closed-form problems of the given kinds that the bilevel estimators accept.

    Compositional problems are FedNest's N = 1 form, whose inner Hessian is the identity
    (kappa = 1), so they only join claims that do not need kappa > 1.
    """
    options: list[st.SearchStrategy[Any]] = []
    if "bilevel" in kinds:
        options.append(
            strategies.quadratic_bilevel(min_dim_y=min_dim_y, max_dim=max_dim, kappa=kappa)
        )
    if "minimax" in kinds:
        options.append(
            strategies.quadratic_minimax(min_dim_y=min_dim_y, max_dim=max_dim, kappa=kappa)
        )
    if "compositional" in kinds:
        options.append(
            strategies.linear_compositional(min_levels=1, max_levels=1, max_dim=min(max_dim, 6))
        )
    return st.one_of(*options)


def closed_form_cases(
    kinds: tuple[str, ...] = ALL_KINDS, **problem_kwargs: Any
) -> Callable[[], st.SearchStrategy[Case]]:
    """Cases of the closed-form families ``kinds`` (keyword sizes ``problem_kwargs``), each at
    a drawn point seed."""

    def build() -> st.SearchStrategy[Case]:
        return st.builds(
            lambda problem, seed: Case(problem, {"point_seed": seed}),
            closed_form_problems(kinds, **problem_kwargs),
            strategies.SEEDS,
        )

    return build


#: The cases of the classical identities: every closed-form family, at any conditioning.
IDENTITY_CASES = closed_form_cases()

#: The cases of the error bounds, each checked on a grid of N or T up to a few kappa (one
#: estimate per point): kappa <= 30, dimensions <= 6.
BOUND_CASES = closed_form_cases(max_dim=6, kappa=(1.0, 30.0))

#: The cases of the linear rates: bilevel and minimax with kappa >= 2 and dim_y >= 2 (at kappa =
#: 1, the compositional problems' value, one step of size 1/L is exact: no rate to fit).
RATE_CASES = closed_form_cases(("bilevel", "minimax"), min_dim_y=2, max_dim=4, kappa=(2.0, 100.0))

# What every classical claim of a kind shares: its kind, what it is about and the cases it is
# checked on; a claim is ``<result>_claim(**KIND_..., id=..., ...)``.

#: An identity of an estimator's error, derived here (a proof step): on :data:`IDENTITY_CASES`.
KIND_STEP_IDENTITY = {"kind": "exact_identity", "about": ABOUT_STEP, "strategy": IDENTITY_CASES}

#: A stated bound on an estimator's error, checked on a grid: on :data:`BOUND_CASES`.
KIND_ERROR_BOUND = {"kind": "bias_bound", "about": ABOUT_RESULT, "strategy": BOUND_CASES}

#: A stated linear rate, fitted: on :data:`RATE_CASES`.
KIND_LINEAR_RATE = {"kind": "linear_rate", "about": ABOUT_RESULT, "strategy": RATE_CASES}

#: An identity a stated result gives: on :data:`IDENTITY_CASES`.
KIND_RESULT_IDENTITY = {"kind": "exact_identity", "about": ABOUT_RESULT, "strategy": IDENTITY_CASES}

#: The claims of a stated identity that needs strong convexity alone (one estimator's each).
result_identity_claim = classical_claim.but(**KIND_RESULT_IDENTITY, hypotheses=(STRONGLY_CONVEX,))


def hypergradient_scale(view: Any, grad_x: torch.Tensor, grad_y: torch.Tensor) -> float:
    """Natural magnitude of a hypergradient's terms, the unit of relative errors."""
    H_inv = torch.linalg.inv(view.H)
    indirect = torch.linalg.matrix_norm(view.J @ H_inv, ord=2) * grad_y.norm()
    return float(grad_x.norm() + indirect) + 1e-300


def grid(low: int, high: int, points: int = 25) -> list[int]:
    """At most ``points`` integers spread evenly over ``[low, high]`` (both included).

    Why a grid and not every value: each value is a separate estimate whose cost grows with the
    value; 25 points resolve a geometric curve on a log plot and keep a check under a second.
    """
    return sorted(
        set(np.linspace(low, high, num=min(points, high - low + 1)).round().astype(int).tolist())
    )


def relative_identity(residual: torch.Tensor, scale: float) -> Measurement:
    """An identity's residual relative to ``scale``, passing at :data:`IDENTITY_RTOL`."""
    relative = float(residual.norm()) / scale
    return Measurement(relative, IDENTITY_RTOL, relative <= IDENTITY_RTOL, relation="<=")


def exact_parts(
    case: Case,
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The case's point and the exact quantities at ``y*(x)``: the quadratic view (H, J), x,
    the inner start y0, y*, and ``grad_x f, grad_y f`` at ``(x, y*)``."""
    problem = case.problem
    x, y0 = evaluation_point(problem, case.params["point_seed"])
    y_star = problem.exact_inner_solution(x)
    view = quadratic_view(problem, x, y_star)
    grad_x, grad_y = view.grad_outer(x, y_star)
    return view, x, y0, y_star, grad_x, grad_y

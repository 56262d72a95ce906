r"""AID with the Neumann series evaluated by Horner's rule: a variant of ``aid-neumann``.

.. math::

    v = \lambda \sum_{j<N} (I - \lambda H)^j r
      = \lambda \big(r + (I - \lambda H)(r + (I - \lambda H)(\cdots (r + (I - \lambda H) r)))\big),

the same vector as the N-term Neumann sum (FedNest eq. 9b, deterministic N), with ``N - 1``
Hessian-vector products and one running vector. It claims what the Neumann estimator claims, so
its entry enrolls in those claims (``enrolled_claims``): ``testbed verify my-horner-aid`` checks
it against each of them with the testbed's own decision procedure.
"""

from __future__ import annotations

import dataclasses

import torch

from testbed import EstimatorInfo
from testbed import ExactInnerSolution
from testbed import GradientDescent
from testbed import ImplicitDifferentiation
from testbed.estimators.solvers import HVP
from testbed.estimators.solvers import LinearSolver
from testbed.estimators.solvers import default_step_size


@dataclasses.dataclass(frozen=True)
class HornerNeumann(LinearSolver):
    """``terms`` Neumann terms by Horner's rule; ``step_size`` is lambda (``None``: 1/L)."""

    terms: int = 20
    step_size: float | None = None

    def solve(self, hvp: HVP, rhs: torch.Tensor, problem: object) -> torch.Tensor:
        lam = self.step_size or default_step_size(problem, "HornerNeumann")  # type: ignore[arg-type]
        v = rhs
        for _ in range(self.terms - 1):
            v = rhs + v - lam * hvp(v)
        return lam * v


def make(
    inner_steps: int | None,
    inner_step_size: float | None,
    neumann_terms: int,
    neumann_step_size: float | None,
    batch_size: int | None,
) -> ImplicitDifferentiation:
    """The estimator at the claims' parameters (``inner_steps=None``: the exact inner
    solution, as the Neumann claims use)."""
    inner = (
        ExactInnerSolution()
        if inner_steps is None
        else GradientDescent(inner_steps, inner_step_size)
    )
    return ImplicitDifferentiation(
        inner=inner,
        linear_solver=HornerNeumann(neumann_terms, neumann_step_size),
        batch_size=batch_size,
    )


ENTRY = EstimatorInfo(
    name="my-horner-aid",
    cls=ImplicitDifferentiation,
    paper="Classical",
    reference="example plugin: AID with the Neumann series by Horner's rule",
    supports=frozenset({"bilevel", "minimax", "compositional"}),
    make=make,
    # the parameters the Neumann claims set, with aid-neumann's defaults: make's keywords
    # beside the class's batch_size, which builds the inner and linear solvers itself
    settings={
        "inner_steps": 100,
        "inner_step_size": None,
        "neumann_terms": 20,
        "neumann_step_size": None,
    },
    fixed=("inner", "linear_solver"),
    enrolled_claims=(
        "classical.neumann.error_identity",
        "classical.neumann.error_bound",
        "classical.neumann.decay_rate",
        "classical.gd.linear_rate",
    ),
)

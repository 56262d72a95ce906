r"""AID-FP: the adjoint by fixed-point iteration (Grazzi et al. 2020, Sec. 2.2, "AID-FP").

The example of adding an estimator variant: this file plus one registry entry
(``aid-fp`` in :mod:`testbed.registry`) enrol it in every claim, report and regression check
that its entry lists.

.. math::

    v_0 = 0, \qquad v_{k+1} = (I - \lambda H) v_k + \lambda r, \quad k = 0..K-1,

so ``v_K = lambda sum_{j<K} (I - lambda H)^j r``: the same vector as the K-term Neumann sum
(FedNest eq. 9b with deterministic N), reached by an iteration that keeps one vector instead of a
running power and a running sum. Costs ``K - 1`` Hessian-vector products (``v_1 = lambda r``
needs none).

Examples:
    >>> import torch
    >>> H = torch.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    >>> v = FixedPoint(60, 0.5).solve(lambda u: H @ u, torch.ones(2, dtype=torch.float64), None)
    >>> bool(torch.allclose(v, torch.linalg.solve(H, torch.ones(2, dtype=torch.float64))))
    True
"""

from __future__ import annotations

import dataclasses

import torch

from problems import Problem
from testbed.estimators.solvers import HVP
from testbed.estimators.solvers import LinearSolver
from testbed.estimators.solvers import default_step_size
from testbed.estimators.validation import check_positive_int
from testbed.estimators.validation import check_step


@dataclasses.dataclass(frozen=True)
class FixedPoint(LinearSolver):
    """``iterations`` fixed-point steps on ``v = v - lambda (H v - r)`` from ``v = 0``."""

    iterations: int
    step_size: float | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.iterations, "FixedPoint.iterations", minimum=1)
        check_step(self.step_size, "FixedPoint.step_size")

    def solve(self, hvp: HVP, rhs: torch.Tensor, problem: Problem | None) -> torch.Tensor:
        lam = self.step_size or default_step_size(problem, "FixedPoint")  # type: ignore[arg-type]
        v = lam * rhs
        for _ in range(self.iterations - 1):
            v = v - lam * (hvp(v) - rhs)
        return v

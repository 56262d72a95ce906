"""Inner solvers (approximate ``y*(x)``) and linear solvers (approximate ``H^{-1} r``).

These are the pluggable parts of the implicit (AID) and unrolled (ITD) estimators: a strategy is a
field, not a subclass (the optimistix design).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from problems import Batch
from problems import Problem
from testbed.estimators.global_oracles import GlobalOracles
from testbed.estimators.validation import GROWTH_FACTOR
from testbed.estimators.validation import DivergenceError
from testbed.estimators.validation import check_positive_int
from testbed.estimators.validation import check_step


def problem_constants(problem: Problem, missing: str) -> Any:
    """``problem.constants()``, for a problem that knows its constants; otherwise a
    :class:`ValueError` saying that ``missing`` (the step it would give) must be passed."""
    constants = getattr(problem, "constants", None)
    if constants is None:
        raise ValueError(
            f"{missing} not given and {type(problem).__name__} has no constants(); "
            "pass it explicitly"
        )
    return constants()


def default_step_size(problem: Problem, what: str) -> float:
    """``1 / L`` from the problem's constants, for problems that know them."""
    return 1.0 / float(problem_constants(problem, f"{what}: step_size").L)


@dataclasses.dataclass
class InnerRun:
    """What an inner solver returns: the last iterate and, when asked, the whole trajectory."""

    y: torch.Tensor
    trajectory: list[torch.Tensor]
    batches: list[Batch | None]
    step_size: float


class InnerSolver(abc.ABC):
    @abc.abstractmethod
    def run(
        self, oracles: GlobalOracles, x: torch.Tensor, y0: torch.Tensor, keep_trajectory: bool
    ) -> InnerRun: ...


@dataclasses.dataclass(frozen=True)
class GradientDescent(InnerSolver):
    """``T`` steps of (minibatch) gradient descent on the global inner objective.

    .. math::  y_{t+1} = y_t - \\beta \\nabla_y g(x, y_t; \\zeta_t), \\quad t = 0..T-1

    Args:
        steps: T >= 0.
        step_size: beta; ``None`` means ``1 / L`` from the problem's constants, for which
            ``||y_t - y*|| <= (1 - mu/L)^t ||y_0 - y*||`` on a strongly convex quadratic.
    """

    steps: int
    step_size: float | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.steps, "GradientDescent.steps")
        check_step(self.step_size, "GradientDescent.step_size")

    def run(
        self, oracles: GlobalOracles, x: torch.Tensor, y0: torch.Tensor, keep_trajectory: bool
    ) -> InnerRun:
        beta = self.step_size or default_step_size(oracles.problem, "GradientDescent")
        y = y0.detach().clone()
        trajectory, batches = [y], []
        for _ in range(self.steps):
            batch = oracles.draw()
            y = y - beta * oracles.grad_inner(x, y, batch)
            if keep_trajectory:
                trajectory.append(y)
                batches.append(batch)
        return InnerRun(y, trajectory if keep_trajectory else [y], batches, beta)


@dataclasses.dataclass(frozen=True)
class ExactInnerSolution(InnerSolver):
    """The closed-form ``y*(x)`` of a closed-form problem (no oracle calls)."""

    def run(
        self, oracles: GlobalOracles, x: torch.Tensor, y0: torch.Tensor, keep_trajectory: bool
    ) -> InnerRun:
        exact = getattr(oracles.problem, "exact_inner_solution", None)
        if exact is None:
            raise ValueError(
                f"ExactInnerSolution needs a closed-form problem; "
                f"{type(oracles.problem).__name__} has no exact_inner_solution"
            )
        y = exact(x)
        return InnerRun(y, [y], [], 0.0)


HVP = Callable[[torch.Tensor], torch.Tensor]


class LinearSolver(abc.ABC):
    """Approximates ``H^{-1} r`` from Hessian-vector products ``v -> H v`` only."""

    @abc.abstractmethod
    def solve(self, hvp: HVP, rhs: torch.Tensor, problem: Problem) -> torch.Tensor: ...


@dataclasses.dataclass(frozen=True)
class Neumann(LinearSolver):
    """``N``-term Neumann series (Ghadimi & Wang 2018; FedNest eq. 9b with deterministic N).

    .. math::  v_N = \\lambda \\sum_{j=0}^{N-1} (I - \\lambda H)^j r
                   = H^{-1} \\big(I - (I - \\lambda H)^N\\big) r,

    so ``v_N - H^{-1} r = -H^{-1}(I - lambda H)^N r``. Costs ``N - 1`` Hessian-vector products.

    Args:
        terms: N >= 1.
        step_size: lambda; ``None`` means ``1 / L`` (FedNest's ``1 / l_{g,1}``).
    """

    terms: int
    step_size: float | None = None

    def __post_init__(self) -> None:
        check_positive_int(self.terms, "Neumann.terms", minimum=1)
        check_step(self.step_size, "Neumann.step_size")

    def solve(self, hvp: HVP, rhs: torch.Tensor, problem: Problem) -> torch.Tensor:
        lam = self.step_size or default_step_size(problem, "Neumann")
        power = rhs
        total = rhs
        for _ in range(self.terms - 1):
            power = power - lam * hvp(power)
            total = total + power
        check_contracting(power, rhs, "Neumann")
        return lam * total


def check_contracting(power: torch.Tensor, rhs: torch.Tensor, what: str) -> None:
    """``(I - lambda H)^j r`` must not grow: with ``0 < lambda < 2/L`` and ``H >= 0`` its norm
    is at most ``||r||``; past ``GROWTH_FACTOR ||r||`` the series diverges (a step too large
    for a problem whose constants are unknown, e.g. a workload)."""
    grown, start = float(power.norm()), float(rhs.norm())
    if not grown <= GROWTH_FACTOR * max(start, 1e-300):
        raise DivergenceError(
            f"{what}: the series diverged: ||(I - lambda H)^N r|| = "
            f"{grown:.3g} against ||r|| = {start:.3g}; use a smaller step "
            "(below 2/L)"
        )


@dataclasses.dataclass(frozen=True)
class ConjugateGradient(LinearSolver):
    """``N`` iterations of conjugate gradient on ``H v = r`` from ``v_0 = 0`` (Hestenes-Stiefel).

    In exact arithmetic CG on a ``d``-dimensional SPD system is exact after ``d`` iterations
    (Grazzi et al. 2020 use it as AID-CG). Costs ``N`` Hessian-vector products.
    """

    iterations: int

    def __post_init__(self) -> None:
        check_positive_int(self.iterations, "ConjugateGradient.iterations")

    def solve(self, hvp: HVP, rhs: torch.Tensor, problem: Problem) -> torch.Tensor:
        v = torch.zeros_like(rhs)
        residual = rhs.clone()
        direction = residual.clone()
        rr = residual @ residual
        for _ in range(self.iterations):
            if float(rr) == 0.0:
                break
            h_dir = hvp(direction)
            step = rr / (direction @ h_dir)
            v = v + step * direction
            residual = residual - step * h_dir
            rr_next = residual @ residual
            direction = residual + (rr_next / rr) * direction
            rr = rr_next
        return v

"""Classical (centralised) hypergradient estimators: exact, AID and ITD.

All three estimate the hypergradient of ``h(x) = f(x, y*(x))``,

.. math::  \\nabla h(x) = \\nabla_x f(x, y^*) - \\nabla^2_{xy} g(x, y^*)\\,
           [\\nabla^2_y g(x, y^*)]^{-1} \\nabla_y f(x, y^*)

(FedNest Lemma 2.1, eq. 8; AggITD eq. 2), with the federated objectives read as their client
means ``f = mean_i f_i`` and ``g = mean_i g_i``.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any
from typing import ClassVar

import numpy as np
import torch

from problems import Problem
from testbed.calls import CallCounter
from testbed.estimators.base import Estimate
from testbed.estimators.base import Estimator
from testbed.estimators.base import InnerState
from testbed.estimators.global_oracles import GlobalOracles
from testbed.estimators.solvers import ExactInnerSolution
from testbed.estimators.solvers import GradientDescent
from testbed.estimators.solvers import InnerRun
from testbed.estimators.solvers import InnerSolver
from testbed.estimators.solvers import LinearSolver
from testbed.estimators.solvers import Neumann
from testbed.estimators.validation import check_positive_int
from testbed.oracles import Oracles


class WarmStarted(Estimator):
    """AID and ITD: an estimator on the global objectives ``f = mean_i f_i``,
    ``g = mean_i g_i`` that runs its ``inner`` solver warm-started from the state's ``y`` and
    differentiates at the result, through oracles that draw a fresh per-client minibatch of
    ``batch_size`` per call (``None``: exact). ``inner`` and ``batch_size`` are the subclasses'
    dataclass fields."""

    inner: InnerSolver
    batch_size: int | None
    #: keep the inner trajectory and its minibatches (ITD differentiates through them)
    unrolls: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.batch_size is not None:
            check_positive_int(self.batch_size, "batch_size", minimum=1)

    def initial_state(self, problem: Problem) -> InnerState:
        return InnerState(problem.initial_point()[1])

    def compute(
        self, problem: Problem, x: torch.Tensor, state: InnerState, rng: np.random.Generator
    ) -> Estimate:
        counter = CallCounter()
        oracles = GlobalOracles(Oracles(problem, counter), rng, self.batch_size)
        run = self.inner.run(oracles, x, state.y, keep_trajectory=self.unrolls)
        value, aux = self.differentiate(oracles, x, run, problem)
        return Estimate(value, InnerState(run.y), counter.snapshot(), aux)

    @abc.abstractmethod
    def differentiate(
        self, oracles: GlobalOracles, x: torch.Tensor, run: InnerRun, problem: Problem
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """The hypergradient at ``x`` given the inner run, and the estimate's ``aux``."""


@dataclasses.dataclass(frozen=True)
class ExactHypergradient(Estimator):
    """The closed-form hypergradient of a closed-form problem (the reference; no oracle calls)."""

    def initial_state(self, problem: Problem) -> None:
        if not hasattr(problem, "exact_hypergradient"):
            raise ValueError(
                f"ExactHypergradient needs a closed-form problem; {type(problem).__name__} "
                "has no exact_hypergradient"
            )

    def compute(
        self, problem: Problem, x: torch.Tensor, state: None, rng: np.random.Generator
    ) -> Estimate:
        value = problem.exact_hypergradient(x)  # type: ignore[attr-defined]
        return Estimate(value, state, CallCounter().snapshot(), {})


@dataclasses.dataclass(frozen=True)
class ImplicitDifferentiation(WarmStarted):
    """Approximate implicit differentiation (AID; Pedregosa 2016, Ghadimi & Wang 2018).

    .. math::

        y_T &= \\text{inner}(x, y_0) \\approx y^*(x), \\\\
        v &= \\text{linear\\_solver}(\\nabla^2_y g(x, y_T), \\nabla_y f(x, y_T))
            \\approx [\\nabla^2_y g]^{-1} \\nabla_y f, \\\\
        \\hat h &= \\nabla_x f(x, y_T) - \\nabla^2_{xy} g(x, y_T)\\, v.

    With the exact inner solution and ``Neumann(N, lambda)`` the error is exactly
    ``grad^2_xy g H^{-1}(I - lambda H)^N grad_y f`` (see theory_checks.classical.neumann).

    Args:
        inner: how ``y*(x)`` is approximated (warm-started from the state's ``y``).
        linear_solver: how ``H^{-1} grad_y f`` is approximated (Neumann, conjugate gradient).
        batch_size: ``None`` for exact oracles; else every oracle call draws a fresh per-client
            minibatch of this size.

    Examples:
        >>> from problems import QuadraticBilevel
        >>> p = QuadraticBilevel.random(2, 2, 2, condition_number=2.0, seed=0)
        >>> est = ImplicitDifferentiation(GradientDescent(50), Neumann(40))
        >>> x = torch.zeros(2, dtype=torch.float64)
        >>> out = est.estimate(p, x, est.init(p), np.random.default_rng(0))
        >>> bool(torch.allclose(out.value, p.exact_hypergradient(x), atol=1e-8))
        True
    """

    inner: InnerSolver = dataclasses.field(default_factory=lambda: GradientDescent(100))
    linear_solver: LinearSolver = dataclasses.field(default_factory=lambda: Neumann(50))
    batch_size: int | None = None

    def differentiate(
        self, oracles: GlobalOracles, x: torch.Tensor, run: InnerRun, problem: Problem
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        y = run.y
        grad_x, grad_y = oracles.grad_outer(x, y)
        adjoint = self.linear_solver.solve(lambda v: oracles.hvp(x, y, v), grad_y, problem)
        value = grad_x - oracles.jvp_xy(x, y, adjoint)
        return value, {"y": y, "adjoint": adjoint}


@dataclasses.dataclass(frozen=True)
class IterativeDifferentiation(WarmStarted):
    """Reverse-mode iterative differentiation (ITD) through T gradient steps.

    Differentiates ``x -> f(x, y_T(x))`` where ``y_{t+1} = y_t - beta grad_y g(x, y_t)`` and
    ``y_0`` does not depend on x (Maclaurin et al. 2015; Franceschi et al. 2017; AggITD eq. 3).
    The reverse pass is written out with counted oracles:

    .. math::

        v_T &= \\nabla_y f(x, y_T), \\quad \\hat h \\leftarrow \\nabla_x f(x, y_T), \\\\
        \\text{for } t &= T-1, \\dots, 0: \\quad
            \\hat h \\leftarrow \\hat h - \\beta \\nabla^2_{xy} g(x, y_t)\\, v_{t+1}, \\quad
            v_t = v_{t+1} - \\beta \\nabla^2_y g(x, y_t)\\, v_{t+1}.

    Costs T inner gradients, T mixed products and T - 1 Hessian-vector products (``v_0`` is never
    used). With minibatches, the reverse pass reuses the forward pass's batches, so the estimate
    is the exact derivative of the sampled unrolled map.

    Args:
        inner: the unrolled gradient-descent solver.
        batch_size: ``None`` for exact oracles, else the per-client minibatch size.
    """

    inner: GradientDescent = dataclasses.field(default_factory=lambda: GradientDescent(100))
    batch_size: int | None = None
    unrolls: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.inner, GradientDescent):
            raise ValueError(
                f"IterativeDifferentiation unrolls GradientDescent; got {type(self.inner).__name__}"
            )

    def differentiate(
        self, oracles: GlobalOracles, x: torch.Tensor, run: InnerRun, problem: Problem
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        beta = run.step_size
        value, adjoint = oracles.grad_outer(x, run.y)
        for t in range(self.inner.steps - 1, -1, -1):
            y_t, batch = run.trajectory[t], run.batches[t]
            value = value - beta * oracles.jvp_xy(x, y_t, adjoint, batch)
            if t > 0:
                adjoint = adjoint - beta * oracles.hvp(x, y_t, adjoint, batch)
        return value, {"y": run.y}


__all__ = [
    "ExactHypergradient",
    "ExactInnerSolution",
    "ImplicitDifferentiation",
    "IterativeDifferentiation",
]

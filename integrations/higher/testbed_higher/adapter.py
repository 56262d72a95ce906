r"""higher's unrolled differentiation as a testbed estimator (higher 0.2.1; Grefenstette et al.
2019).

``higher.innerloop_ctx(module, optimizer, copy_initial_weights=True)`` gives a functional copy of
a module and a differentiable version of a ``torch.optim`` optimiser; each
``diffopt.step(loss)`` is one optimiser step kept on the autograd tape. The adapter's module
holds the inner variable ``y`` as its one parameter and its forward is ``g(x, y)``; the optimiser
is ``torch.optim.SGD(lr=beta)`` (higher's ``DifferentiableSGD``,
``higher/optim.py:270-301``: ``p <- p - lr g``); after ``T = inner_steps`` steps the
hypergradient is ``torch.autograd.grad(f(x, y_T), x)``: ITD (reverse-mode iterative
differentiation, Franceschi et al. 2017).

``copy_initial_weights=True`` (higher's default) makes ``y_0`` a copy of the state's ``y`` that
does not depend on ``x``, as ITD's statement has it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from problems import Problem
from testbed.estimators.global_oracles import GlobalOracles
from testbed.estimators.solvers import InnerRun, InnerSolver
from testbed.library_adapter import (
    GlobalObjectives,
    InnerVector,
    LibraryEstimator,
    default_inner_step,
    require,
)

higher = require("higher", "higher")


@dataclasses.dataclass(frozen=True)
class DifferentiableSGDLoop(InnerSolver):
    """``steps`` steps of higher's differentiable ``torch.optim.SGD(lr=step_size)`` (the
    unrolled inner loop), as a testbed inner solver so the GD rate claim reads its iterates."""

    steps: int
    step_size: float | None = None

    def unroll(self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor,
               problem: Problem) -> list[torch.Tensor]:
        """``[y_0, ..., y_T]``, each a function of ``x`` through higher's steps."""
        module = InnerVector(objectives, y0)
        optimizer = torch.optim.SGD(module.parameters(),
                                    lr=default_inner_step(problem, self.step_size))
        with higher.innerloop_ctx(module, optimizer, copy_initial_weights=True) as (fmodel,
                                                                                  diffopt):
            trajectory = [fmodel.y]
            for _ in range(self.steps):
                diffopt.step(fmodel(x))
                trajectory.append(fmodel.y)
        return trajectory

    def run(self, oracles: GlobalOracles, x: torch.Tensor, y0: torch.Tensor,
            keep_trajectory: bool) -> InnerRun:
        problem = oracles.problem
        trajectory = [y.detach() for y in self.unroll(GlobalObjectives(problem), x, y0,
                                                      problem)]
        return InnerRun(trajectory[-1], trajectory if keep_trajectory else trajectory[-1:], [],
                        default_inner_step(problem, self.step_size))


@dataclasses.dataclass(frozen=True)
class HigherUnrolled(LibraryEstimator):
    """ITD through higher's ``innerloop_ctx`` with a differentiable SGD.

    Args:
        inner_steps: T >= 0 unrolled steps (an int).
        inner_step_size: beta, SGD's ``lr`` (``None``: 1/L).
    """

    inner_steps: int | None = 100

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.inner_steps is None:
            raise ValueError("HigherUnrolled unrolls inner_steps steps: give an int")

    @property
    def inner(self) -> DifferentiableSGDLoop:
        return DifferentiableSGDLoop(int(self.inner_steps or 0), self.inner_step_size)

    def library_hypergradient(self, objectives: GlobalObjectives, x: torch.Tensor,
                              y0: torch.Tensor, problem: Problem
                              ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        x = x.clone().requires_grad_(True)
        y_T = self.inner.unroll(objectives, x, y0, problem)[-1]
        (value,) = torch.autograd.grad(objectives.outer(x, y_T), x, allow_unused=True,
                                       materialize_grads=True)
        return value, y_T.detach(), {}


__all__ = ["DifferentiableSGDLoop", "HigherUnrolled"]

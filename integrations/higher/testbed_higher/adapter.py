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
from typing import ClassVar

import torch

from problems import Problem
from testbed.library_adapter import GlobalObjectives
from testbed.library_adapter import InnerVector
from testbed.library_adapter import UnrolledLibraryEstimator
from testbed.library_adapter import UnrolledLoop
from testbed.library_adapter import default_inner_step
from testbed.library_adapter import require

higher = require("higher", "higher")


@dataclasses.dataclass(frozen=True)
class DifferentiableSGDLoop(UnrolledLoop):
    """``steps`` steps of higher's differentiable ``torch.optim.SGD(lr=step_size)`` (the
    unrolled inner loop)."""

    def unroll(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> list[torch.Tensor]:
        """``[y_0, ..., y_T]``, each a function of ``x`` through higher's steps."""
        module = InnerVector(objectives, y0)
        optimizer = torch.optim.SGD(
            module.parameters(), lr=default_inner_step(problem, self.step_size)
        )
        with higher.innerloop_ctx(module, optimizer, copy_initial_weights=True) as (
            fmodel,
            diffopt,
        ):
            return self.trajectory(diffopt.step, fmodel, x)


@dataclasses.dataclass(frozen=True)
class HigherUnrolled(UnrolledLibraryEstimator):
    """ITD through higher's ``innerloop_ctx`` with a differentiable SGD (``inner_step_size``:
    SGD's ``lr``)."""

    loop: ClassVar[type[UnrolledLoop]] = DifferentiableSGDLoop


__all__ = ["DifferentiableSGDLoop", "HigherUnrolled"]

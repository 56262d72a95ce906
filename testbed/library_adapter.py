r"""What an adapter of someone else's hypergradient code needs from the testbed.

An adapter (``integrations/<library>/``, an installable plugin package) presents a library's
hypergradient as a testbed :class:`~testbed.Estimator`, so that ``testbed verify`` decides the
claims it declares. It only translates:

- **the testbed's problem in**: :class:`GlobalObjectives` gives the global objectives
  ``f(x, y) = mean_i f_i(x, y)`` and ``g(x, y) = mean_i g_i(x, y)`` (full local objectives, no
  minibatch) as plain torch functions of two vectors, the form every library takes (a loss
  closure, an ``nn.Module``'s forward, an optimality function);
- **the library's own call on the library's own objects**: the adapter's
  :meth:`LibraryEstimator.library_hypergradient` (an inner loop of the library's optimiser, its
  implicit-differentiation decorator, its engine);
- **its hypergradient out**: the vector the library returns for ``x``, unchanged.

It fixes nothing the library computes, and every choice it makes (a step size, an iteration
count, a library default it overrides) is a field of the adapter's dataclass, named in the
claim's parameters (``inner_steps`` T, ``inner_step_size`` beta, ``neumann_terms`` N,
``neumann_step_size`` lambda, ``cg_iterations``), and stated in its docstring.

Oracle counts: the libraries differentiate with torch autograd, whose products are not oracle
calls the testbed can count, so an adapter's :class:`~testbed.Calls` are zero; the number of
evaluations of ``f`` and ``g`` the library asked for is in the estimate's ``aux``.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from problems import Problem
from problems import all_clients
from testbed.calls import CallCounter
from testbed.estimators.base import Estimate
from testbed.estimators.base import Estimator
from testbed.estimators.base import InnerState
from testbed.estimators.global_oracles import GlobalOracles
from testbed.estimators.solvers import InnerRun
from testbed.estimators.solvers import InnerSolver
from testbed.estimators.solvers import problem_constants


class MissingLibrary(ImportError):
    """The library an adapter translates is not installed; the message says how to install it."""


def require(module: str, extra: str, note: str = "") -> types.ModuleType:
    """``import module``, or :class:`MissingLibrary` with the one line that installs it
    (``pip install 'hypergradient-testbed[extra]'``, and ``note`` when installing needs more)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingLibrary(
            f"{module} is not installed: pip install 'hypergradient-testbed[{extra}]'{note}"
        ) from error


@dataclasses.dataclass
class GlobalObjectives:
    """The global objectives of ``problem`` as functions of a shared ``(x, y)``.

    ``outer(x, y) = mean_i f_i(x, y)`` and ``inner(x, y) = mean_i g_i(x, y)`` over every client,
    on the full local objectives, differentiable in both arguments by autograd and by
    ``torch.func`` transforms. Each call counts one evaluation (:attr:`evaluations`).
    """

    problem: Problem
    evaluations: dict[str, int] = dataclasses.field(default_factory=lambda: {"f": 0, "g": 0})

    def _clients(self) -> torch.Tensor:
        return all_clients(self.problem.n_clients)

    def _rows(self, v: torch.Tensor) -> torch.Tensor:
        return v.expand(self.problem.n_clients, -1)

    def outer(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.evaluations["f"] += 1
        return self.problem.outer_loss(self._rows(x), self._rows(y), self._clients(), None).mean()

    def inner(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.evaluations["g"] += 1
        return self.problem.inner_loss(self._rows(x), self._rows(y), self._clients(), None).mean()


@dataclasses.dataclass(frozen=True)
class DenseDerivatives:
    """The global objectives' derivatives at one ``(x, y)``, dense (small problems only).

    Attributes:
        grad_x_f, grad_y_f: ``grad_x f``, ``grad_y f``.
        grad_x_g: ``grad_x g``.
        H: ``grad^2_y g`` (dy x dy, symmetrised).
        J: ``grad^2_xy g`` (dx x dy).
    """

    grad_x_f: torch.Tensor
    grad_y_f: torch.Tensor
    grad_x_g: torch.Tensor
    H: torch.Tensor
    J: torch.Tensor


def dense_derivatives(problem: Problem, x: torch.Tensor, y: torch.Tensor) -> DenseDerivatives:
    """:class:`DenseDerivatives` of ``problem``'s global objectives by ``torch.func`` on its own
    losses: an independent computation for the checks of a library's output (it shares no code
    with the testbed's oracles and estimators)."""
    objectives = GlobalObjectives(problem)
    gx, gy = torch.func.grad(objectives.outer, argnums=(0, 1))(x, y)
    g_x = torch.func.grad(objectives.inner, argnums=0)(x, y)
    # reverse over reverse: forward mode would make torch import its jvp decompositions,
    # which warn (torch.jit.script deprecated) in torch 2.13
    H = torch.func.jacrev(torch.func.grad(objectives.inner, argnums=1), argnums=1)(x, y)
    J = torch.func.jacrev(torch.func.grad(objectives.inner, argnums=0), argnums=1)(x, y)
    return DenseDerivatives(gx, gy, g_x, 0.5 * (H + H.T), J)


class InnerVector(torch.nn.Module):
    """The inner variable ``y`` as the one parameter of a module whose forward is ``g(x, y)``:
    what a library's differentiable optimiser steps (TorchOpt's ``MetaSGD``, higher's
    ``innerloop_ctx``)."""

    def __init__(self, objectives: GlobalObjectives, y0: torch.Tensor) -> None:
        super().__init__()
        self.objectives = objectives
        self.y = torch.nn.Parameter(y0.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.objectives.inner(x, self.y)


def default_inner_step(problem: Problem, step: float | None) -> float:
    """``step``, or ``1 / L`` from the problem's constants (the classical claims' beta)."""
    if step is not None:
        return float(step)
    return 1.0 / float(problem_constants(problem, "inner_step_size").L)


@dataclasses.dataclass(frozen=True)
class LibraryEstimator(Estimator):
    """A library's hypergradient as a testbed estimator (the base of every adapter).

    The inner problem: with ``inner_steps=None`` the library is handed the exact inner solution
    ``y*(x)`` of a closed-form problem (the claims about the linear solve of implicit
    differentiation take it there); with ``inner_steps=T`` the library runs its own T inner
    steps from the state's ``y`` (or the problem's starting point), with step
    ``inner_step_size`` (``None``: 1/L).

    Subclasses implement :meth:`library_hypergradient`. The state after an estimate is the
    inner iterate the library left (so a library that moves its inner parameters is seen to).
    """

    inner_steps: int | None = None
    inner_step_size: float | None = None

    def __post_init__(self) -> None:
        if self.inner_steps is not None and (
            isinstance(self.inner_steps, bool)
            or not isinstance(self.inner_steps, int)
            or self.inner_steps < 0
        ):
            raise ValueError(f"inner_steps must be None or an int >= 0, got {self.inner_steps!r}")

    def require_given_inner_point(self, not_run: str) -> None:
        """A :class:`ValueError` unless ``inner_steps`` is 0 (the state's y) or None (y*(x)):
        for an adapter that does not run the library's inner loop (``not_run`` names it)."""
        if self.inner_steps not in (None, 0):
            raise ValueError(
                f"{not_run} is not run by this adapter: inner_steps must be 0 (the state's y) "
                "or None (y*(x))"
            )

    def require_counts(self, *names: str) -> None:
        """A :class:`ValueError` unless each field of ``names`` (an iteration or term count the
        library is handed) is an int >= 1."""
        for name in names:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")

    def initial_state(self, problem: Problem) -> InnerState:
        return InnerState(problem.initial_point()[1])

    def start(self, problem: Problem, x: torch.Tensor, state: InnerState | None) -> torch.Tensor:
        """The inner point the library starts from (``y*(x)`` when ``inner_steps`` is None)."""
        if self.inner_steps is None:
            exact = getattr(problem, "exact_inner_solution", None)
            if exact is None:
                raise ValueError(
                    f"{type(self).__name__} with inner_steps=None needs a "
                    f"closed-form problem; {type(problem).__name__} has none"
                )
            return exact(x.detach()).detach()
        y = state.y if state is not None else problem.initial_point()[1]
        return y.detach().clone()

    def compute(
        self, problem: Problem, x: torch.Tensor, state: Any, rng: np.random.Generator
    ) -> Estimate:
        objectives = GlobalObjectives(problem)
        y0 = self.start(problem, x, state)
        value, y_after, aux = self.library_hypergradient(objectives, x.detach(), y0, problem)
        aux = {**aux, "y": y_after, "evaluations": dict(objectives.evaluations)}
        return Estimate(value.detach(), InnerState(y_after.detach()), CallCounter().snapshot(), aux)

    @abc.abstractmethod
    def library_hypergradient(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """The library's hypergradient at ``x`` from the inner point ``y0``: ``(value, the inner
        iterate the library left, aux)``."""


@dataclasses.dataclass(frozen=True)
class UnrolledLoop(InnerSolver):
    """``steps`` differentiable steps of a library's inner optimiser with step ``step_size``
    (``None``: 1/L), as a testbed inner solver, so the GD rate claim reads its iterates.
    Subclasses implement :meth:`unroll` with the library's own optimiser."""

    steps: int
    step_size: float | None = None

    @abc.abstractmethod
    def unroll(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> list[torch.Tensor]:
        """``[y_0, ..., y_T]``, each a function of ``x`` through the library's steps."""

    def trajectory(
        self, step: Callable[[torch.Tensor], Any], module: Any, x: torch.Tensor
    ) -> list[torch.Tensor]:
        """``[y_0, ..., y_T]``: the inner variable ``module.y`` before and after each of the
        ``steps`` calls ``step(module(x))`` (the library's differentiable optimiser step on the
        inner loss ``g(x, y)``)."""
        trajectory = [module.y]
        for _ in range(self.steps):
            step(module(x))
            trajectory.append(module.y)
        return trajectory

    def run(
        self, oracles: GlobalOracles, x: torch.Tensor, y0: torch.Tensor, keep_trajectory: bool
    ) -> InnerRun:
        problem = oracles.problem
        trajectory = [y.detach() for y in self.unroll(GlobalObjectives(problem), x, y0, problem)]
        return InnerRun(
            trajectory[-1],
            trajectory if keep_trajectory else trajectory[-1:],
            [],
            default_inner_step(problem, self.step_size),
        )


@dataclasses.dataclass(frozen=True)
class UnrolledLibraryEstimator(LibraryEstimator):
    """ITD through a library's differentiable inner loop (:attr:`inner`, an instance of the
    subclass's :attr:`loop`): ``T`` unrolled steps from ``y0``, then autograd of
    ``f(x, y_T(x))`` in ``x``.

    Args:
        inner_steps: T >= 0 unrolled steps (required: an int).
        inner_step_size: beta, the library optimiser's learning rate (``None``: 1/L).
    """

    inner_steps: int | None = 100

    @property
    @abc.abstractmethod
    def loop(self) -> type[UnrolledLoop]:
        """The library's loop (:class:`UnrolledLoop` with its optimiser): a subclass sets it as
        a class attribute, and until it does the class is abstract (not an estimator)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.inner_steps is None:
            raise ValueError(f"{type(self).__name__} unrolls inner_steps steps: give an int")

    @property
    def inner(self) -> UnrolledLoop:
        """The library's loop of ``inner_steps`` steps at ``inner_step_size``."""
        return self.loop(int(self.inner_steps or 0), self.inner_step_size)

    def library_hypergradient(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        x = x.clone().requires_grad_(True)
        y_T = self.inner.unroll(objectives, x, y0, problem)[-1]
        (value,) = torch.autograd.grad(
            objectives.outer(x, y_T), x, allow_unused=True, materialize_grads=True
        )
        return value, y_T.detach(), {}


__all__ = [
    "DenseDerivatives",
    "GlobalObjectives",
    "InnerVector",
    "LibraryEstimator",
    "MissingLibrary",
    "UnrolledLibraryEstimator",
    "UnrolledLoop",
    "default_inner_step",
    "dense_derivatives",
    "require",
]

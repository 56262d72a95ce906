r"""TorchOpt's hypergradients as testbed estimators (torchopt 0.7.3; MetaOPT, Ren et al. 2023).

Two of TorchOpt's ways to differentiate through an inner problem ``y*(x) = argmin_y g(x, y)``:

**Implicit** (:class:`TorchoptImplicit`): the inner solver is decorated with
``torchopt.diff.implicit.custom_root(optimality_fn, argnums=1, solve=...)``, the optimality
function being ``grad_y g`` (``torch.func.grad(g, argnums=1)``, as TorchOpt's own tests and
examples write it), and ``x`` the differentiated argument. Backpropagating
``f(x, y(x))`` then gives, by TorchOpt's ``_root_vjp``
(``torchopt/diff/implicit/decorator.py:104-166``),

.. math::

    \hat h = \nabla_x f(x, y) - \nabla^2_{xy} g(x, y)\, u, \qquad
    u = \text{solve}(v \mapsto \nabla^2_y g\, v,\ \nabla_y f(x, y))

with ``solve`` one of TorchOpt's linear solvers, each mapped to the claims' parameters:

- ``"cg"``: ``linear_solve.solve_cg(maxiter=cg_iterations, rtol=rtol)``: conjugate gradient on
  ``H u = grad_y f``. ``rtol`` is 0 by default (TorchOpt's default is 1e-5, which stops CG on
  its residual before the iteration count the claim names; with 0 it runs exactly
  ``cg_iterations`` iterations unless the residual is exactly zero).
- ``"normal_cg"``: ``linear_solve.solve_normal_cg(maxiter=cg_iterations, rtol=rtol)``: CG on the
  normal equations ``H^T H u = H^T grad_y f`` (custom_root's default solver).
- ``"inv"``: ``linear_solve.solve_inv()``: materialises ``H`` and calls ``torch.linalg.solve``.
- ``"neumann"``: ``linear_solve.solve_inv(ns=True, maxiter=N - 1, alpha=lambda)``: the Neumann
  series ``lambda sum_{j=0}^{maxiter} (I - lambda H)^j`` (``torchopt/linalg/ns.py:111-130``: the
  loop adds ``maxiter`` powers to ``b``), so the claims' ``N`` terms are ``maxiter = N - 1``.

``leaves`` hands ``y`` to TorchOpt as that many tensors (``torch.tensor_split`` of the vector,
as a layer's weight and bias are two tensors): TorchOpt's solvers take trees of tensors, and
a user's inner parameters are usually one. With ``inner_steps=None`` the decorated solver
returns the exact ``y*(x)`` (the claims about the linear solve are stated there); with
``inner_steps=T`` it runs T steps of TorchOpt's functional ``torchopt.sgd(lr=beta)`` from the
state's ``y`` (custom_root differentiates at whatever the solver returns).

**Unrolled** (:class:`TorchoptUnrolled`): ``torchopt.MetaSGD(module, lr=beta)`` takes
``T = inner_steps`` differentiable steps ``y_{t+1} = y_t - beta grad_y g(x, y_t)`` on a module
holding ``y`` (``y_0`` a copy of the state, not a function of ``x``), and the hypergradient is
``torch.autograd.grad(f(x, y_T), x)``: ITD (reverse-mode iterative differentiation).

TorchOpt 0.7.3 calls ``functorch.vjp`` and ``functorch.jacfwd``, which torch 2.x marks
deprecated with a ``FutureWarning`` on every call, and its first forward-mode call makes torch
import its jvp decompositions, which warn that ``torch.jit.script`` is deprecated; the adapter
silences those two warnings around TorchOpt's calls (they change no number).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any
from typing import ClassVar
from typing import Literal

import torch

from problems import Problem
from testbed.library_adapter import GlobalObjectives
from testbed.library_adapter import InnerVector
from testbed.library_adapter import LibraryEstimator
from testbed.library_adapter import UnrolledLibraryEstimator
from testbed.library_adapter import UnrolledLoop
from testbed.library_adapter import default_inner_step
from testbed.library_adapter import require

torchopt = require("torchopt", "torchopt")

Solver = Literal["cg", "normal_cg", "inv", "neumann"]
SOLVERS: tuple[str, ...] = ("cg", "normal_cg", "inv", "neumann")


@contextlib.contextmanager
def quiet_functorch() -> Iterator[None]:
    """TorchOpt 0.7.3's calls of the deprecated ``functorch`` API warn on every call (and torch
    warns about ``torch.jit.script`` when the first jacfwd imports its decompositions)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=r".*functorch.*")
        warnings.filterwarnings(
            "ignore", category=DeprecationWarning, message=r".*torch\.jit\.script.*"
        )
        yield


def default_neumann_step(problem: Problem, step: float | None) -> float:
    """``lambda``: ``step``, or ``1 / L`` (the classical Neumann claims' step)."""
    return default_inner_step(problem, step)


@dataclasses.dataclass(frozen=True)
class TorchoptImplicit(LibraryEstimator):
    """TorchOpt's implicit meta-gradient (``custom_root``) with one of its linear solvers.

    Args:
        solver: ``"cg"``, ``"normal_cg"``, ``"inv"`` or ``"neumann"`` (module docstring).
        cg_iterations: ``maxiter`` of the CG solvers (the claims' CG iteration count).
        rtol: CG's relative residual tolerance (TorchOpt's default 1e-5; 0 here: see above).
        neumann_terms: N, the Neumann terms of ``"neumann"`` (``maxiter = N - 1``).
        neumann_step_size: lambda, the ``alpha`` of ``"neumann"`` (``None``: 1/L).
        leaves: how many tensors ``y`` is handed to TorchOpt as (1: one vector).
        inner_steps, inner_step_size: see :class:`~testbed.library_adapter.LibraryEstimator`.
    """

    solver: Solver = "cg"
    cg_iterations: int = 10
    rtol: float = 0.0
    neumann_terms: int = 20
    neumann_step_size: float | None = None
    leaves: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        self.require_counts("cg_iterations", "neumann_terms", "leaves")

    def linear_solve(self, problem: Problem) -> Any:
        """The TorchOpt linear solver this estimator hands to ``custom_root``."""
        solve = torchopt.linear_solve
        if self.solver == "cg":
            return solve.solve_cg(maxiter=self.cg_iterations, rtol=self.rtol)
        if self.solver == "normal_cg":
            return solve.solve_normal_cg(maxiter=self.cg_iterations, rtol=self.rtol)
        if self.solver == "inv":
            return solve.solve_inv()
        return solve.solve_inv(
            ns=True,
            maxiter=self.neumann_terms - 1,
            alpha=default_neumann_step(problem, self.neumann_step_size),
        )

    def library_hypergradient(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        parts = min(self.leaves, y0.shape[0])
        beta = default_inner_step(problem, self.inner_step_size) if self.inner_steps else 0.0
        steps = self.inner_steps or 0

        def inner(x: torch.Tensor, *ys: torch.Tensor) -> torch.Tensor:
            return objectives.inner(x, torch.cat(ys))

        gradient = torch.func.grad(inner, argnums=tuple(range(1, parts + 1)))

        def optimality(ys: tuple[torch.Tensor, ...], x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return gradient(x, *ys)

        @torchopt.diff.implicit.custom_root(optimality, argnums=1, solve=self.linear_solve(problem))
        def solve_inner(ys: tuple[torch.Tensor, ...], x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            sgd = torchopt.sgd(lr=beta)
            state = sgd.init(ys)
            for _ in range(steps):
                updates, state = sgd.update(gradient(x, *ys), state, inplace=False)
                ys = torchopt.apply_updates(ys, updates, inplace=False)
            return tuple(ys)

        x = x.clone().requires_grad_(True)
        with quiet_functorch():
            ys = solve_inner(tuple(t.clone() for t in torch.tensor_split(y0, parts)), x)
            y = torch.cat(ys)
            (value,) = torch.autograd.grad(
                objectives.outer(x, y), x, allow_unused=True, materialize_grads=True
            )
        return value, y.detach(), {"leaves": parts}


@dataclasses.dataclass(frozen=True)
class MetaSGDLoop(UnrolledLoop):
    """``steps`` differentiable steps of ``torchopt.MetaSGD(lr=step_size)`` (the unrolled inner
    loop)."""

    def unroll(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> list[torch.Tensor]:
        """``[y_0, ..., y_T]``, each a function of ``x`` through the library's steps."""
        module = InnerVector(objectives, y0)
        optimizer = torchopt.MetaSGD(module, lr=default_inner_step(problem, self.step_size))
        return self.trajectory(optimizer.step, module, x)


@dataclasses.dataclass(frozen=True)
class TorchoptUnrolled(UnrolledLibraryEstimator):
    """TorchOpt's explicit (unrolled) meta-gradient: ITD through ``torchopt.MetaSGD``
    (``inner_step_size``: MetaSGD's ``lr``)."""

    loop: ClassVar[type[UnrolledLoop]] = MetaSGDLoop


__all__ = ["MetaSGDLoop", "SOLVERS", "TorchoptImplicit", "TorchoptUnrolled"]

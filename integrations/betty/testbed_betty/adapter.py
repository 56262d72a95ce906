r"""Betty's hypergradients as testbed estimators (betty-ml 0.1.1; Choe et al., ICLR 2023).

Betty runs a bilevel program as two ``ImplicitProblem`` objects joined by an ``Engine``: the
lower problem (``g``, its parameter the module holding ``y``) takes ``unroll_steps`` steps of
its optimiser, then the upper problem (``f``, its parameter ``x``) gets its gradient through
``Problem.backward``: the direct gradient plus ``get_grads`` along the path upper -> lower ->
upper, where the lower problem's ``Config.type`` picks the best-response Jacobian product
(``betty/hypergradient/__init__.py:12-22``):

- ``"neumann"`` (``hypergradient/neumann.py``): ``approx_inverse_hvp`` sums
  ``alpha sum_{j=0}^{K} (I - alpha H)^j grad_y f`` for ``K = neumann_iterations`` (its loop adds
  K powers to the first term, lines 52-59), so the claims' N terms are
  ``neumann_iterations = N - 1`` and lambda is ``neumann_alpha``;
- ``"cg"`` (``hypergradient/cg.py``): ``cg_iterations`` iterations of conjugate gradient on
  ``H u = grad_y f`` (``cg_alpha = 1``, its default: the adapter uses no other);
- ``"darts"`` (``hypergradient/darts.py``, betty's default): the product
  ``grad^2_xy g v`` by central differences of ``grad_x g`` at ``y +- (R / ||v||) v``
  (``R = darts_alpha``, default 0.01), with the inverse Hessian replaced by the identity
  (betty's docs: "AID with finite difference", DARTS re-interpreted as implicit
  differentiation).

The adapter builds exactly that program, as betty's own examples do: the method on the lower
problem's ``Config`` (with ``unroll_steps``), ``Config(first_order=True, retain_graph=True)`` on
the upper one, ``torch.optim.SGD(lr=beta)`` as the lower optimiser, one dummy batch per step
(the losses are the problem's full objectives), ``EngineConfig(train_iters=unroll_steps)`` so
the engine runs the lower steps and then one upper step, and reads the hypergradient where
betty hands it to the upper optimiser: the upper problem's ``custom_optimizer_step`` hook (a
documented extension point of ``ImplicitProblem.optimizer_step``) records the gradient instead
of stepping ``x``.

Inner steps: betty's lower problem takes at least one step before the upper one. With
``inner_steps=None`` the lower parameters start at the exact ``y*(x)`` and take one SGD step,
which moves them by ``beta grad_y g(x, y*)``, float64 round-off; with ``inner_steps=T >= 1`` they
take T steps from the state's ``y``.

Betty logs its set-up at INFO level on stdout (logger ``"betty"``); the adapter raises that
logger's level to WARNING.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any
from typing import Literal

import torch

from problems import Problem
from testbed.library_adapter import GlobalObjectives
from testbed.library_adapter import LibraryEstimator
from testbed.library_adapter import default_inner_step
from testbed.library_adapter import require

# betty-ml 0.1.1 declares torch>=1.6.*, which pip >= 24.1 refuses
require(
    "betty",
    "betty",
    " with pip<24.1 (betty-ml 0.1.1's metadata says torch>=1.6.*, which newer pip refuses)",
)
from betty.configs import Config  # noqa: E402  (after the install hint)
from betty.configs import EngineConfig  # noqa: E402  (after the install hint)
from betty.engine import Engine  # noqa: E402
from betty.logging import get_logger  # noqa: E402
from betty.problems import ImplicitProblem  # noqa: E402

Method = Literal["neumann", "cg", "darts"]
METHODS: tuple[str, ...] = ("neumann", "cg", "darts")
#: one batch per step: the objectives are the problem's full local objectives, no data
_ONE_BATCH = [(torch.zeros(1),)]


class _Vector(torch.nn.Module):
    def __init__(self, v: torch.Tensor) -> None:
        super().__init__()
        self.v = torch.nn.Parameter(v.detach().clone())


class _Upper(ImplicitProblem):
    """``f(x, y)`` with ``x`` this problem's parameter and ``y`` the lower problem's."""

    objectives: GlobalObjectives
    recorded: torch.Tensor | None = None

    def training_step(self, batch: Any) -> torch.Tensor:
        return self.objectives.outer(self.module.v, self.lower.module.v)  # type: ignore[attr-defined]

    def custom_optimizer_step(self, *args: Any, **kwargs: Any) -> None:
        self.recorded = self.module.v.grad.detach().clone()


class _Lower(ImplicitProblem):
    """``g(x, y)`` with ``y`` this problem's parameter and ``x`` the upper problem's."""

    objectives: GlobalObjectives

    def training_step(self, batch: Any) -> torch.Tensor:
        return self.objectives.inner(self.upper.module.v, self.module.v)  # type: ignore[attr-defined]


@dataclasses.dataclass(frozen=True)
class BettyHypergradient(LibraryEstimator):
    """Betty's hypergradient of the upper problem after its lower problem's unrolled steps.

    Args:
        method: the lower problem's ``Config.type``: ``"neumann"``, ``"cg"`` or ``"darts"``.
        neumann_terms: N (``neumann_iterations = N - 1``).
        neumann_step_size: lambda = ``neumann_alpha`` (``None``: 1/L; betty's default is 1.0).
        cg_iterations: ``cg_iterations`` (betty's default is 1).
        darts_alpha: R of the finite difference (betty's default 0.01).
        inner_steps: ``None`` (start at y* and take one step) or T >= 1 lower steps.
        inner_step_size: beta, the lower SGD's ``lr`` (``None``: 1/L).
    """

    method: Method = "neumann"
    neumann_terms: int = 20
    neumann_step_size: float | None = None
    cg_iterations: int = 10
    darts_alpha: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.inner_steps == 0:
            raise ValueError(
                "betty's lower problem takes at least one step: inner_steps must be "
                "None (y* and one step) or >= 1"
            )
        self.require_counts("neumann_terms", "cg_iterations")

    def lower_config(self, problem: Problem) -> Config:
        """The lower problem's betty ``Config`` (the method and its parameters)."""
        unroll = 1 if self.inner_steps is None else self.inner_steps
        if self.method == "neumann":
            return Config(
                type="neumann",
                unroll_steps=unroll,
                neumann_iterations=self.neumann_terms - 1,
                neumann_alpha=default_inner_step(problem, self.neumann_step_size),
            )
        if self.method == "cg":
            return Config(
                type="cg", unroll_steps=unroll, cg_iterations=self.cg_iterations, cg_alpha=1.0
            )
        return Config(type="darts", unroll_steps=unroll, darts_alpha=self.darts_alpha)

    def library_hypergradient(
        self, objectives: GlobalObjectives, x: torch.Tensor, y0: torch.Tensor, problem: Problem
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        get_logger().setLevel(logging.WARNING)
        config = self.lower_config(problem)
        upper_module, lower_module = _Vector(x), _Vector(y0)
        upper = _Upper(
            name="upper",
            config=Config(first_order=True, retain_graph=True),
            module=upper_module,
            optimizer=torch.optim.SGD(upper_module.parameters(), lr=0.0),
            train_data_loader=_ONE_BATCH,
            device="cpu",
        )
        lower = _Lower(
            name="lower",
            config=config,
            module=lower_module,
            optimizer=torch.optim.SGD(
                lower_module.parameters(), lr=default_inner_step(problem, self.inner_step_size)
            ),
            train_data_loader=_ONE_BATCH,
            device="cpu",
        )
        upper.objectives = lower.objectives = objectives
        engine = Engine(
            config=EngineConfig(
                train_iters=config.unroll_steps, valid_step=config.unroll_steps + 1
            ),
            problems=[upper, lower],
            dependencies={"u2l": {upper: [lower]}, "l2u": {lower: [upper]}},
        )
        engine.run()
        if upper.recorded is None:
            raise RuntimeError("betty's engine did not reach the upper problem's step")
        return upper.recorded, lower_module.v.detach().clone(), {"config": str(config)}


__all__ = ["BettyHypergradient", "METHODS"]

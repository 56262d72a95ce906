"""Outer algorithms: the interface and the run loop.

An *outer algorithm* (FedNest, LFedNest, FBO-AggITD, FedMSA, ...) updates ``x`` (and its inner
state) once per :meth:`OuterAlgorithm.step`. :func:`run_algorithm` drives it for K iterations in
one context and records, after every iteration, the iterate and the cumulative cost.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any
from typing import ClassVar

import numpy as np
import torch

from problems import Problem
from testbed.algorithms.rounds import RoundsFormula
from testbed.calls import Calls
from testbed.estimators.federated import check_participation_and_batch
from testbed.estimators.validation import InputError
from testbed.estimators.validation import check_inner_form
from testbed.estimators.validation import check_iterate
from testbed.estimators.validation import check_point
from testbed.estimators.validation import check_positive_int
from testbed.estimators.validation import check_problem_object
from testbed.estimators.validation import check_rng
from testbed.estimators.validation import check_state
from testbed.federation.context import FederatedContext


@dataclasses.dataclass(frozen=True)
class OuterAlgorithm(abc.ABC):
    """One outer iteration at a time; concrete subclasses must be registered.

    A subclass implements :meth:`init` and the hook :meth:`advance`; callers use :meth:`step`,
    which checks the state before the hook (so no algorithm copies the check).

    Attributes:
        participation: client participation per round (see :class:`ClientSampler`).
        batch_size: per-client minibatch size, ``None`` for exact local objectives.
    """

    supports: ClassVar[frozenset[str]] = frozenset({"bilevel", "minimax", "compositional"})
    participation: float | int | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        check_participation_and_batch(self.participation, self.batch_size)

    @abc.abstractmethod
    def init(self, problem: Problem) -> Any:
        """Initial state; it must have an attribute ``x`` (the outer iterate)."""

    def step(self, ctx: FederatedContext, state: Any) -> Any:
        """One outer iteration; returns the new state: :meth:`advance` after checking that
        ``state`` has an outer iterate ``x`` that fits the context's problem (shape, dtype,
        device, finite; :func:`~testbed.estimators.validation.check_point`).

        Raises:
            InputError: the state has no ``x``, or one that does not fit the problem.
        """
        who = type(self).__name__
        if not hasattr(state, "x"):
            raise InputError(
                f"{who}.step: the state must have an outer iterate x (from {who}.init); "
                f"got a {type(state).__name__}"
            )
        check_point(ctx.problem, state.x, f"{who} state.x")
        return self.advance(ctx, state)

    @abc.abstractmethod
    def advance(self, ctx: FederatedContext, state: Any) -> Any:
        """The hook behind :meth:`step` that a subclass implements: one outer iteration from a
        checked ``state``; returns the new state."""

    def rounds_formula(self) -> RoundsFormula | None:
        """The paper's communication per outer iteration (:mod:`testbed.algorithms.rounds`),
        when it states one; the single home of that formula."""
        return None

    def rounds_per_iteration(self) -> int | None:
        """The paper's server rounds per outer iteration: :meth:`rounds_formula` evaluated at
        this configuration (``None`` without a formula, for gossip steps, or when a symbol is
        drawn per iteration; an algorithm with a drawn symbol says which budget it reports)."""
        formula = self.rounds_formula()
        if formula is None or formula.unit != "rounds":
            return None
        return formula.value()

    def check_problem(self, problem: Problem) -> None:
        check_inner_form(problem, type(self).__name__)
        if problem.kind not in self.supports:
            raise ValueError(
                f"{type(self).__name__} does not support {problem.kind} problems "
                f"(supports: {sorted(self.supports)})"
            )


@dataclasses.dataclass(frozen=True)
class IterationRecord:
    """The state after iteration ``iteration`` and the cost of the run so far."""

    iteration: int
    x: torch.Tensor
    state: Any
    calls: Calls


def model_point(state: Any, dim_y: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``(x, y)`` an algorithm state defines.

    FedNest and FBO-AggITD states carry ``y``; FedMSA's bilevel state carries
    ``Z = [w; v]`` (inner weights, then the inverse-Hessian-gradient variable; FedMSA eq. (10)),
    whose first ``dim_y`` entries are the model.
    """
    if hasattr(state, "y"):
        return state.x, state.y
    if hasattr(state, "Z"):
        return state.x, state.Z[..., :dim_y]
    raise TypeError(f"cannot read the model (x, y) from a {type(state).__name__} state")


def run_algorithm(
    algorithm: OuterAlgorithm,
    problem: Problem,
    iterations: int,
    rng: np.random.Generator,
    callback: Callable[[IterationRecord], None] | None = None,
    state: Any = None,
) -> list[IterationRecord]:
    """Run ``iterations`` outer iterations in one federated context; record each one.

    The record of iteration 0 is the initial state (no cost yet).

    Raises:
        DivergenceError: "diverged at step k" when the iterate becomes non-finite or grows past
            :data:`~testbed.estimators.validation.GROWTH_FACTOR` times its start.
    """
    check_positive_int(iterations, "iterations")
    who = f"run_algorithm({type(algorithm).__name__})"
    check_problem_object(problem, who)
    check_rng(rng, who)
    algorithm.check_problem(problem)
    ctx = FederatedContext(problem, rng, algorithm.participation, algorithm.batch_size)
    if state is None:
        state = algorithm.init(problem)
    else:
        check_state(algorithm.init(problem), state, problem, who)
    records = [IterationRecord(0, state.x, state, ctx.calls())]
    x0_norm = float(state.x.norm()) if isinstance(state.x, torch.Tensor) else 0.0
    if callback:
        callback(records[0])
    for k in range(1, iterations + 1):
        state = algorithm.step(ctx, state)
        check_iterate(state.x, x0_norm, k, type(algorithm).__name__)
        records.append(IterationRecord(k, state.x, state, ctx.calls()))
        if callback:
            callback(records[-1])
    return records


def iterate_within_rounds(
    algorithm: OuterAlgorithm,
    problem: Problem,
    rng: np.random.Generator,
    round_budget: float,
) -> Iterator[IterationRecord]:
    """Records of iteration 0, 1, ... while fewer than ``round_budget`` communication rounds
    have been spent (rounds per iteration may vary, e.g. FedNest's random N'); the caller may
    stop early by leaving the loop."""
    algorithm.check_problem(problem)
    ctx = FederatedContext(problem, rng, algorithm.participation, algorithm.batch_size)
    state = algorithm.init(problem)
    k = 0
    yield IterationRecord(k, state.x, state, ctx.calls())
    while ctx.calls().comm_rounds < round_budget:
        state = algorithm.step(ctx, state)
        k += 1
        yield IterationRecord(k, state.x, state, ctx.calls())

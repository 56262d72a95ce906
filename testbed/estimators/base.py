"""The estimator interface: small frozen dataclasses with explicit state.

An estimator has two methods (the optax/jaxopt shape):

- ``init(problem) -> state``: whatever the estimator carries between calls (for the classical
  estimators, the warm-started inner iterate ``y``);
- ``estimate(problem, x, state, rng) -> Estimate``: the hypergradient at ``x`` with the new state
  and what it cost.

Randomness comes only from the ``rng`` argument (a ``numpy.random.Generator``): the same seed gives
the same numbers.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch

from problems import Problem
from testbed.calls import Calls
from testbed.estimators.validation import (
    check_estimate,
    check_inner_form,
    check_point,
    check_problem_object,
    check_rng,
    check_stable_steps,
    check_state,
)


class InnerState(NamedTuple):
    """State of estimators that warm-start the inner problem: the current inner iterate."""

    y: torch.Tensor


class Estimate(NamedTuple):
    """Result of one :meth:`Estimator.estimate` call.

    Attributes:
        value: the hypergradient estimate, shape ``(dim_x,)``.
        state: the state to pass to the next call.
        calls: oracle calls and communication spent by this call.
        aux: diagnostics (for example the inner iterate the estimate used).
    """

    value: torch.Tensor
    state: Any
    calls: Calls
    aux: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Estimator(abc.ABC):
    """Base class of every hypergradient estimator; concrete subclasses must be registered."""

    supports: ClassVar[frozenset[str]] = frozenset({"bilevel", "minimax", "compositional"})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every ``init`` and ``estimate`` a subclass defines checks its problem, ``x``, state,
        ``rng`` and its result (one place: :mod:`testbed.estimators.validation`), so no
        estimator copies the checks."""
        super().__init_subclass__(**kwargs)
        validate_own_method(cls, "init", _validated_init)
        validate_own_method(cls, "estimate", _validated_estimate)

    @abc.abstractmethod
    def init(self, problem: Problem) -> Any:
        """Initial state for ``problem``."""

    @abc.abstractmethod
    def estimate(
        self, problem: Problem, x: torch.Tensor, state: Any, rng: np.random.Generator
    ) -> Estimate:
        """Hypergradient estimate at ``x``."""

    def check_problem(self, problem: Problem) -> None:
        """Raise a clear error when ``problem``'s kind is not supported by this estimator, or
        when it has no inner variable (a multi-level compositional problem)."""
        check_inner_form(problem, type(self).__name__)
        if problem.kind not in self.supports:
            raise ValueError(
                f"{type(self).__name__} does not support {problem.kind} problems "
                f"(supports: {sorted(self.supports)})"
            )


def validate_own_method(cls: type, name: str, wrap: Callable[[Any], Any]) -> None:
    """Replace the method ``name`` that ``cls`` itself defines by ``wrap(method)`` (the checks
    of an entry point), once: a method already wrapped, inherited or abstract is left alone."""
    method = cls.__dict__.get(name)
    if (
        method is None
        or getattr(method, "_validated", False)
        or getattr(method, "__isabstractmethod__", False)
    ):
        return
    wrapped = wrap(method)
    wrapped._validated = True
    setattr(cls, name, wrapped)


def _validated_init(method: Any) -> Any:
    @functools.wraps(method)
    def init(self: Estimator, problem: Problem) -> Any:
        who = f"{type(self).__name__}.init"
        check_problem_object(problem, who)
        self.check_problem(problem)
        return method(self, problem)

    return init


def _validated_estimate(method: Any) -> Any:
    @functools.wraps(method)
    def estimate(
        self: Estimator, problem: Problem, x: torch.Tensor, state: Any, rng: np.random.Generator
    ) -> Estimate:
        who = f"{type(self).__name__}.estimate"
        check_problem_object(problem, who)
        check_rng(rng, who)
        check_point(problem, x)
        check_stable_steps(self, problem)
        check_state(self.init(problem), state, problem, who)
        out = method(self, problem, x, state, rng)
        check_estimate(problem, out.value, type(self).__name__)
        return out

    return estimate

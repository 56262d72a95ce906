"""The estimator interface: small frozen dataclasses with explicit state.

An estimator has two methods (the optax/jaxopt shape):

- ``init(problem) -> state``: whatever the estimator carries between calls (for the classical
  estimators, the warm-started inner iterate ``y``);
- ``estimate(problem, x, state, rng) -> Estimate``: the hypergradient at ``x`` with the new state
  and what it cost.

Both check their arguments and call a hook that a subclass implements (``initial_state`` and
``compute``; see :class:`Estimator`).

Randomness comes only from the ``rng`` argument (a ``numpy.random.Generator``): the same seed gives
the same numbers.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any
from typing import ClassVar
from typing import NamedTuple

import numpy as np
import torch

from problems import Problem
from testbed.calls import Calls
from testbed.estimators.validation import check_estimate
from testbed.estimators.validation import check_inner_form
from testbed.estimators.validation import check_point
from testbed.estimators.validation import check_problem_object
from testbed.estimators.validation import check_rng
from testbed.estimators.validation import check_stable_steps
from testbed.estimators.validation import check_state


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
    """Base class of every hypergradient estimator; concrete subclasses must be registered.

    A subclass implements two hooks, and callers use the two public methods, which check their
    arguments around the hooks (a template method: one place for the checks, in
    :mod:`testbed.estimators.validation`, and no estimator copies them):

    - :meth:`initial_state` (the hook) behind :meth:`init`, which first checks that
      ``problem`` is a testbed problem of a kind the estimator supports (:meth:`check_problem`);
    - :meth:`compute` (the hook) behind :meth:`estimate`, which first checks the problem, the
      generator, the point ``x`` (shape, dtype, device, finite), the configured step sizes
      against the problem's stability region, and the state: it makes a fresh
      ``initial_state(problem)`` and compares the two tensor by tensor (shape, dtype, device),
      so a state made for another problem fails here with one line instead of deep inside the
      hook, and the problem checks that ``initial_state`` makes (a closed form, local steps
      that fit) run on every call; after the hook it checks that the estimate has the shape of
      ``x`` and finite entries.

    A subclass that needs another estimator's behaviour with a change overrides a hook (or a
    part the hook calls), so the checks stay in front of it.
    """

    supports: ClassVar[frozenset[str]] = frozenset({"bilevel", "minimax", "compositional"})

    def init(self, problem: Problem) -> Any:
        """Initial state for ``problem``: :meth:`initial_state` after the problem's checks.

        Raises:
            InputError: ``problem`` is not a testbed problem, or has no inner variable.
            ValueError: the estimator does not support ``problem``'s kind.
        """
        check_problem_object(problem, f"{type(self).__name__}.init")
        self.check_problem(problem)
        return self.initial_state(problem)

    def estimate(
        self, problem: Problem, x: torch.Tensor, state: Any, rng: np.random.Generator
    ) -> Estimate:
        """Hypergradient estimate at ``x``: :meth:`compute` between the checks of the class
        docstring.

        Raises:
            InputError: a bad problem, generator, point or state (one line naming it).
            DivergenceError: a step size outside the stability region, or a non-finite
                estimate.
        """
        who = f"{type(self).__name__}.estimate"
        check_problem_object(problem, who)
        check_rng(rng, who)
        check_point(problem, x)
        check_stable_steps(self, problem)
        self.check_problem(problem)
        check_state(self.initial_state(problem), state, problem, who)
        out = self.compute(problem, x, state, rng)
        check_estimate(problem, out.value, type(self).__name__)
        return out

    @abc.abstractmethod
    def initial_state(self, problem: Problem) -> Any:
        """The hook behind :meth:`init`: the initial state for a checked ``problem``."""

    @abc.abstractmethod
    def compute(
        self, problem: Problem, x: torch.Tensor, state: Any, rng: np.random.Generator
    ) -> Estimate:
        """The hook behind :meth:`estimate`: the estimate at a checked ``x`` from a checked
        ``state``."""

    def check_problem(self, problem: Problem) -> None:
        """Raise a clear error when ``problem``'s kind is not supported by this estimator, or
        when it has no inner variable (a multi-level compositional problem)."""
        check_inner_form(problem, type(self).__name__)
        if problem.kind not in self.supports:
            raise ValueError(
                f"{type(self).__name__} does not support {problem.kind} problems "
                f"(supports: {sorted(self.supports)})"
            )

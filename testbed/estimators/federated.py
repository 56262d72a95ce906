"""Federated estimators: the interface of an estimator that runs on clients.

A *federated estimator* estimates the hypergradient at x by talking to clients through a
:class:`~testbed.federation.context.FederatedContext`; it implements ``estimate_in(ctx, x,
state)``, and the generic :meth:`FederatedEstimator.estimate` runs it in a fresh context so it
fits the :class:`~testbed.Estimator` interface (its ``calls`` then include rounds and floats).
FedNest's FedIHGP (:mod:`testbed.estimators.fednest`) and AggITD
(:mod:`testbed.estimators.aggitd`) are federated estimators; the outer algorithms
(:mod:`testbed.algorithms`) call them, never the other way round.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

import numpy as np
import torch

from problems import Problem
from testbed.estimators.base import Estimate
from testbed.estimators.base import Estimator
from testbed.estimators.validation import check_positive_int
from testbed.federation.context import FederatedContext


def check_participation_and_batch(participation: Any, batch_size: int | None) -> None:
    """Refuse a client participation that is not ``None``, a fraction or a count, and a
    minibatch size below 1 (``None``: exact local objectives).

    Raises:
        ValueError: naming the bad argument.
    """
    if batch_size is not None:
        check_positive_int(batch_size, "batch_size", minimum=1)
    if participation is not None and (
        isinstance(participation, bool) or not isinstance(participation, (int, float))
    ):
        raise ValueError(
            f"participation must be None, a fraction or a count, got {participation!r}"
        )


@dataclasses.dataclass(frozen=True)
class FederatedEstimator(Estimator):
    """A hypergradient estimator that runs on clients through a federated context.

    Attributes:
        participation: client participation per round (see
            :class:`~testbed.federation.sampling.ClientSampler`).
        batch_size: per-client minibatch size, ``None`` for exact local objectives.
    """

    participation: float | int | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        check_participation_and_batch(self.participation, self.batch_size)

    @abc.abstractmethod
    def estimate_in(
        self, ctx: FederatedContext, x: torch.Tensor, state: Any
    ) -> tuple[torch.Tensor, Any, dict[str, Any]]:
        """``(hypergradient, new state, aux)``; every message goes through ``ctx``."""

    def context(self, problem: Problem, rng: np.random.Generator) -> FederatedContext:
        """A fresh context on ``problem`` with this estimator's participation and batch."""
        return FederatedContext(problem, rng, self.participation, self.batch_size)

    def compute(
        self, problem: Problem, x: torch.Tensor, state: Any, rng: np.random.Generator
    ) -> Estimate:
        ctx = self.context(problem, rng)
        value, new_state, aux = self.estimate_in(ctx, x, state)
        return Estimate(value, new_state, ctx.calls(), aux)

r"""FedNest (Tarzanagh et al., ICML 2022, Alg. 1) on ``R`` *different* problems of one shape at
once: the round-savings comparisons' FedNest runs, one per drawn problem, as one batch.

:mod:`testbed.algorithms.fednest_replicates` runs ``R`` replicates of one problem; a comparison
(:mod:`theory_checks.comparison`) runs FedNest once on each of many problems of one family, in
its deterministic-sum form, with exact oracles and every client. Each of those runs draws
nothing, so what differs between them is only the problem and its steps (``alpha = c / L_h``,
``beta = lambda = 1 / l_{g,1}`` of each problem). :class:`~testbed.algorithms.stacked.StackedRuns`
stacks the problems (the very client works of the unbatched rounds, each run's steps a column
of per-row values):

.. math::

    y^{k+1}_r = \text{FedInn}^T(x^k_r, y^k_r; \beta_r), \qquad
    p^k_r = \tfrac{1}{l_r} \sum_{j=0}^{N} (I - \bar A_r / l_r)^j \nabla_y f_r
    \ \text{(FedIHGP, deterministic)}, \qquad
    x^{k+1}_r = \text{FedOut}(x^k_r, y^{k+1}_r, p^k_r; \alpha_r).

Bit for bit, row by row (:mod:`testbed.algorithms.stacked` says why, and what it refuses).
Tests compare every iterate with the unbatched runs' (tests/test_comparison_batched.py).

What is not batched raises before anything runs: a subclass of
:class:`~testbed.algorithms.fednest.FedNest` or an update strategy other than FedInn, LFedInn,
FedOut and LFedOut
(a perturbation or a mutant runs its own code, unbatched), random truncation, partial
participation, minibatches, ``tau != 1``, runs that differ in anything but their steps, another
problem family or shape, tensors off the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from testbed.algorithms.fednest import FedNest
from testbed.algorithms.fednest_updates import FedInn
from testbed.algorithms.fednest_updates import FedOut
from testbed.algorithms.fednest_updates import LFedInn
from testbed.algorithms.fednest_updates import LFedOut
from testbed.algorithms.fednest_updates import fedinn_rows
from testbed.algorithms.stacked import StackedRuns
from testbed.algorithms.stacked import StackedState
from testbed.algorithms.stacked import check_problems
from testbed.algorithms.stacked import check_runs
from testbed.estimators.fedihgp import IHGPFirstTerm
from testbed.estimators.fedihgp import IHGPTerm
from testbed.estimators.fednest import LocalHypergradientAt
from testbed.estimators.fednest import OuterDirection
from testbed.federation.local import LocalIterates
from testbed.federation.local import OuterGradientXAt
from testbed.federation.replicates import NotBatchable


def check_stackable(algorithms: Sequence[FedNest], problems: Sequence[Any]) -> None:
    """Raise :class:`NotBatchable` unless :class:`StackedFedNest` computes, row by row, exactly
    what ``iterate_within_rounds(algorithms[r], problems[r], ...)`` does (module docstring)."""
    first = check_runs(algorithms, problems, FedNest)
    if type(first.inner_rule) not in (FedInn, LFedInn):
        raise NotBatchable(f"inner update {type(first.inner_rule).__name__}: not stacked")
    if type(first.outer_rule) not in (FedOut, LFedOut):
        raise NotBatchable(f"outer update {type(first.outer_rule).__name__}: not stacked")
    if type(first.outer_rule) is FedOut and first.truncation != "deterministic":
        raise NotBatchable("random truncation draws N' per run: not stacked")
    if first.participation is not None or first.batch_size is not None:
        raise NotBatchable("partial participation or minibatches draw per run: not stacked")
    check_problems(problems, first.local_steps)


class StackedFedNest(StackedRuns):
    """FedNest's iterations on each of ``problems``, run ``r`` as ``algorithms[r]`` on
    ``problems[r]`` (:func:`check_stackable`): :attr:`start` and :meth:`step` give what the
    unbatched runs' states hold, row by row; :meth:`keep` drops the runs that stopped."""

    def __init__(self, algorithms: Sequence[FedNest], problems: Sequence[Any]):
        check_stackable(algorithms, problems)
        self.config = algorithms[0]
        states = [a.init(p) for a, p in zip(algorithms, problems, strict=True)]
        self.start = StackedState(
            torch.stack([s.x for s in states]), torch.stack([s.y for s in states])
        )
        super().__init__(problems, [tuple(s.steps) for s in states])  # (beta, alpha, 1/l)

    def rounds_per_iteration(self) -> int:
        """``2T + N + 3`` (deterministic truncation: every iteration the same)."""
        return self.config.rounds_per_iteration()

    def step(self, state: StackedState) -> StackedState:
        """One iteration of every run: :meth:`FedNest.advance
        <testbed.algorithms.fednest.FedNest.advance>` with its inner and outer updates, row by
        row."""
        side, config = self.side, self.config
        beta, alpha, lam = self.column(0), self.column(1), self.column(2)[:, None]
        x_rows, y = side.rows(state.x), state.y
        clients = side.participants()
        for _ in range(config.inner_steps):  # FedInn (Alg. 4, two rounds) or LFedInn (one)
            y = fedinn_rows(config, side, clients, x_rows, y, beta)  # type: ignore[arg-type]
        y_rows = side.rows(y)
        if type(config.outer_rule) is LFedOut:  # local Neumann hypergradient steps, one round
            local = LocalIterates(
                x_rows,
                LocalHypergradientAt(y_rows, config.neumann_terms, lam),  # type: ignore[arg-type]
                config.local_steps,
                alpha,  # type: ignore[arg-type]  # one step per row
                scale_by_steps=config.scale_by_steps,
            )
            return StackedState(side.aggregate(local.run(side, clients).uploads[0]), y)
        # FedIHGP (Alg. 3), the deterministic schedule: p_0 = grad_y f / l, N Hessian rounds
        first = IHGPFirstTerm(x_rows, y_rows, lam)  # type: ignore[arg-type]
        p = total = side.aggregate(first.run(side, clients).uploads[0])
        for _ in range(config.neumann_terms):
            term = IHGPTerm(x_rows, y_rows, side.rows(p), lam)  # type: ignore[arg-type]
            p = side.aggregate(term.run(side, clients).uploads[0])
            total = total + p
        # FedOut (Alg. 2): the direction, then the local steps on x
        (direction,) = OuterDirection(x_rows, y_rows, side.rows(total)).run(side, clients).uploads
        h = side.aggregate(direction)
        work = LocalIterates(
            x_rows,
            OuterGradientXAt(y_rows),
            config.local_steps,
            alpha,  # type: ignore[arg-type]  # one step per row
            side.rows(h),
            config.scale_by_steps,
        )
        return StackedState(side.aggregate(work.run(side, clients).uploads[0]), y)


__all__ = ["StackedFedNest", "check_stackable"]

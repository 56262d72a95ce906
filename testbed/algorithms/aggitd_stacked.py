r"""FBO-AggITD (Xiao & Ji 2023, Alg. 3) in its expectation form on ``R`` *different* problems
of one shape at once: the round-savings comparison's FBO-AggITD runs, one per drawn problem.

:mod:`testbed.algorithms.aggitd_replicates` runs replicates of one problem with AggITD's drawn
index ``Q``; the comparison (``comparison.aggitd_fewer_rounds_than_fednest``) runs AggITD's
conditional mean over ``Q`` (eq. (11), ``expectation=True``: every round starts a term) with
exact oracles and every client, so its runs draw nothing and differ only in their problem and
steps (``alpha = c / L_h``, ``beta = lambda = 1 / L`` of each). On the stacked problems
(:class:`~testbed.algorithms.stacked.StackedRuns`) an iteration is the unbatched one, round by
round, with each run's steps as columns:

.. math::

    z^t_r = (I - \lambda_r \nabla^2_y G(x_r, y^t_r)) z^{t-1}_r + \nabla_y F(x_r, y^t_r), \quad
    y^{t+1}_r = \text{One-Round-Lower}(x_r, y^t_r; \beta_r), \quad t = 0..N,

    \tilde h_r = \nabla_x F(x_r, y^N_r) - \nabla^2_{xy} G(x_r, y^N_r)\, \lambda_r z^N_r, \qquad
    x^+_r = \text{One-Round-Upper}(x_r, y^N_r, \tilde h_r; \alpha_r),

the term ``z^t`` riding on the anchor-gradient round (:class:`~testbed.federation.client_work.
Together` runs the term first, then the anchor gradient). Bit for bit, row by row
(:mod:`testbed.algorithms.stacked` says why; tests/test_comparison_batched.py compares every
iterate). Refused (:class:`~testbed.federation.replicates.NotBatchable`, before anything runs):
a subclass of FBO-AggITD (a perturbation or a mutant runs its own code), an AggITD other than
the expectation form with the FedSVRG lower level (a drawn, fixed or printed index; FedAvg),
partial participation, minibatches, runs that differ in anything but their steps, and the
problems :func:`~testbed.algorithms.stacked.check_problems` refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from testbed.algorithms.aggitd import DEFAULT_OUTER_STEP_SIZE
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.stacked import StackedRuns
from testbed.algorithms.stacked import StackedState
from testbed.algorithms.stacked import check_problems
from testbed.algorithms.stacked import check_runs
from testbed.estimators.aggitd import AggITD
from testbed.estimators.aggitd import AggITDDirection
from testbed.estimators.aggitd import HessIVTerm
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalIterates
from testbed.federation.local import OuterGradientXAt
from testbed.federation.replicates import NotBatchable


def check_stackable(algorithms: Sequence[FBOAggITD], problems: Sequence[Any]) -> None:
    """Raise :class:`NotBatchable` unless :class:`StackedFBOAggITD` computes, row by row,
    exactly what ``iterate_within_rounds(algorithms[r], problems[r], ...)`` does (module
    docstring)."""
    first = check_runs(algorithms, problems, FBOAggITD)
    if any(type(algorithm.estimator) is not AggITD for algorithm in algorithms):
        raise NotBatchable("an AggITD estimator of another class: run alone")
    estimator = first.estimator
    if not estimator.expectation or estimator.as_printed or estimator.index is not None:
        raise NotBatchable("only AggITD's expectation form is stacked")
    if estimator.lower_solver != "svrg":
        raise NotBatchable("the FedAvg-type lower level: not stacked")
    if first.participation is not None or first.batch_size is not None:
        raise NotBatchable("partial participation or minibatches draw per run: not stacked")
    check_problems(problems, first.local_steps)


class StackedFBOAggITD(StackedRuns):
    """FBO-AggITD's iterations on each of ``problems``, run ``r`` as ``algorithms[r]`` on
    ``problems[r]`` (:func:`check_stackable`): :attr:`start` and :meth:`step` give what the
    unbatched runs' states hold, row by row; :meth:`keep` drops the runs that stopped."""

    def __init__(self, algorithms: Sequence[FBOAggITD], problems: Sequence[Any]):
        check_stackable(algorithms, problems)
        self.config = algorithms[0]
        states = [a.init(p) for a, p in zip(algorithms, problems, strict=True)]
        self.start = StackedState(
            torch.stack([s.x for s in states]), torch.stack([s.y for s in states])
        )
        steps = [
            (*a.estimator.step_sizes(p), a.outer_step_size or DEFAULT_OUTER_STEP_SIZE)
            for a, p in zip(algorithms, problems, strict=True)
        ]
        super().__init__(problems, steps)  # (beta, lambda, alpha)

    def rounds_per_iteration(self) -> int:
        """``2N + 3`` (Table 1)."""
        return self.config.rounds_per_iteration()

    def step(self, state: StackedState) -> StackedState:
        """One iteration of every run: :meth:`FBOAggITD.advance
        <testbed.algorithms.aggitd.FBOAggITD.advance>` (AggITD's expectation form, then
        One-Round-Upper), row by row."""
        side, config = self.side, self.config
        beta, lam, alpha = self.column(0), self.column(1)[:, None], self.column(2)
        x_rows, y = side.rows(state.x), state.y
        clients = side.participants()
        z: torch.Tensor | None = None
        n = config.inner_steps
        for t in range(n + 1):
            y_rows = side.rows(y)
            previous = None if z is None else side.rows(z)
            term = HessIVTerm(x_rows, y_rows, previous, lam, True)  # type: ignore[arg-type]
            (z_rows,) = term.run(side, clients).uploads  # rides first on the round
            z = side.aggregate(z_rows)
            if t < n:  # One-Round-Lower (Alg. 2): the anchor round, then the local steps
                anchor = InnerGradient(x_rows, y_rows, rows=False).run(side, clients).uploads[0]
                lower = LocalIterates(
                    y_rows,
                    InnerGradientAt(x_rows),
                    config.local_steps,
                    beta,  # type: ignore[arg-type]  # one step per row
                    global_direction=side.rows(side.aggregate(anchor)),
                    scale_by_steps=True,
                )
                y = side.aggregate(lower.run(side, clients).uploads[0])
        assert z is not None  # every round ran a term
        y_rows = side.rows(y)
        direction = AggITDDirection(x_rows, y_rows, side.rows(z), lam)  # type: ignore[arg-type]
        h = side.aggregate(direction.run(side, clients).uploads[0])
        upper = LocalIterates(  # One-Round-Upper (Alg. 4)
            x_rows,
            OuterGradientXAt(y_rows),
            config.local_steps,
            alpha,  # type: ignore[arg-type]  # one step per row
            side.rows(h),
            True,
        )
        return StackedState(side.aggregate(upper.run(side, clients).uploads[0]), y)


__all__ = ["StackedFBOAggITD", "check_stackable"]

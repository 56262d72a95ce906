r"""FedNest (Tarzanagh et al., ICML 2022, Alg. 1) on ``R`` *different* problems of one shape at
once: the round-savings comparisons' FedNest runs, one per drawn problem, as one batch.

:mod:`testbed.algorithms.fednest_replicates` runs ``R`` replicates of one problem; a comparison
(:mod:`theory_checks.comparison`) runs FedNest once on each of many problems of one family, in
its deterministic-sum form, with exact oracles and every client. Each of those runs draws
nothing, so what differs between them is only the problem and its steps (``alpha = c / L_h``,
``beta = lambda = 1 / l_{g,1}`` of each problem). :class:`ProblemStack` stacks the problems'
clients replicate-major into one :class:`~problems.QuadraticBilevel` with ``R x M`` clients
(its arrays the problems' arrays, concatenated), so a round of every run is one batched oracle
call over the ``R x M`` client rows, the very client works of the unbatched rounds
(:class:`~testbed.federation.client_work.ClientWork`), each run's steps a column of per-row
values:

.. math::

    y^{k+1}_r = \text{FedInn}^T(x^k_r, y^k_r; \beta_r), \qquad
    p^k_r = \tfrac{1}{l_r} \sum_{j=0}^{N} (I - \bar A_r / l_r)^j \nabla_y f_r
    \ \text{(FedIHGP, deterministic)}, \qquad
    x^{k+1}_r = \text{FedOut}(x^k_r, y^{k+1}_r, p^k_r; \alpha_r).

Bit for bit: as for the replicates of one problem (every vector a run shares among its clients
is here that run's rows; a round's mean is the ledger's mean of the same rows), and a step
multiplies a row by that run's own double, the product a scalar step gives. Two things could
change a last bit, and both are refused (:class:`~testbed.federation.replicates.NotBatchable`):
a shared ``x`` enters ``B_i x`` as one BLAS matrix-vector product and rows as a batched one,
which sum ``dim_x >= 3`` products in other orders (:data:`~testbed.algorithms.
fednest_replicates.MAX_DIM_X`); and a local step ``beta / tau`` is computed as
``(1 / tau) * beta`` for a scalar and ``beta / tau`` for a column, equal only at ``tau = 1``.
A problem whose symmetric arrays the oracles apply through a symmetrised copy is refused too
(the stack would decide that copy for all its problems at once). Tests compare every iterate
with the unbatched runs' (tests/test_fednest_stacked.py).

What is not batched raises before anything runs: a subclass of
:class:`~testbed.algorithms.fednest.FedNest` or an update strategy other than FedInn and FedOut
(a perturbation or a mutant runs its own code, unbatched), random truncation, partial
participation, minibatches, ``tau != 1``, runs that differ in anything but their steps, another
problem family or shape, tensors off the CPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import torch

from problems import QuadraticBilevel
from problems.checks import symmetric_operator
from testbed.algorithms.fednest import FedNest
from testbed.algorithms.fednest_replicates import MAX_DIM_X
from testbed.algorithms.fednest_updates import FedInn
from testbed.algorithms.fednest_updates import FedOut
from testbed.algorithms.fednest_updates import LFedInn
from testbed.algorithms.fednest_updates import LFedOut
from testbed.calls import CallCounter
from testbed.estimators.fedihgp import IHGPFirstTerm
from testbed.estimators.fedihgp import IHGPTerm
from testbed.estimators.fednest import LocalHypergradientAt
from testbed.estimators.fednest import OuterDirection
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalIterates
from testbed.federation.local import OuterGradientXAt
from testbed.federation.replicates import NotBatchable
from testbed.federation.replicates import Replicates
from testbed.federation.sampling import ClientSampler
from testbed.oracles import Oracles


def check_stackable(algorithms: Sequence[FedNest], problems: Sequence[QuadraticBilevel]) -> None:
    """Raise :class:`NotBatchable` unless :class:`StackedFedNest` computes, row by row, exactly
    what ``iterate_within_rounds(algorithms[r], problems[r], ...)`` does (module docstring)."""
    if not algorithms or len(algorithms) != len(problems):
        raise NotBatchable("one algorithm per problem, at least one")
    first = algorithms[0]
    for algorithm in algorithms:
        if type(algorithm) is not FedNest:
            raise NotBatchable(f"{type(algorithm).__name__} is not FedNest itself: run alone")
        unstepped = dataclasses.replace(algorithm, outer_step_size=None, inner_step_size=None)
        if unstepped != dataclasses.replace(first, outer_step_size=None, inner_step_size=None):
            raise NotBatchable("the runs differ in more than their steps")
    if type(first.inner_rule) not in (FedInn, LFedInn):
        raise NotBatchable(f"inner update {type(first.inner_rule).__name__}: not stacked")
    if type(first.outer_rule) not in (FedOut, LFedOut):
        raise NotBatchable(f"outer update {type(first.outer_rule).__name__}: not stacked")
    if type(first.outer_rule) is FedOut and first.truncation != "deterministic":
        raise NotBatchable("random truncation draws N' per run: not stacked")
    if first.participation is not None or first.batch_size is not None:
        raise NotBatchable("partial participation or minibatches draw per run: not stacked")
    if first.local_steps != 1:
        raise NotBatchable("tau != 1: a scalar step / tau is not a column's")
    shape = None
    for problem in problems:
        if type(problem) is not QuadraticBilevel or problem.n_samples:
            raise NotBatchable(f"{type(problem).__name__}: only sample-free QuadraticBilevel")
        here = (problem.n_clients, problem.dim_x, problem.dim_y, problem.device.type)
        shape = here if shape is None else shape
        if here != shape:
            raise NotBatchable(f"problems of shapes {shape} and {here}: not one stack")
        if problem.dim_x > MAX_DIM_X:
            raise NotBatchable(f"dim_x = {problem.dim_x} > {MAX_DIM_X}: B_i x sums otherwise")
        if problem.device.type != "cpu":
            raise NotBatchable(f"tensors on {problem.device}: run alone")
        for name in QuadraticBilevel.OPERATORS:
            if symmetric_operator(getattr(problem, name)) is not getattr(problem, name):
                raise NotBatchable(f"{name} is applied through a symmetrised copy: run alone")


class ProblemStack(Replicates):
    """The clients' side of one run on each of ``problems`` (one shape): their clients stacked
    run-major as one :class:`~problems.QuadraticBilevel` of ``R x M`` clients, every round all
    of them (full participation, exact oracles: nothing is drawn)."""

    def __init__(self, problems: Sequence[QuadraticBilevel]) -> None:
        arrays = {
            name: torch.cat([getattr(p, name) for p in problems])
            for name in QuadraticBilevel.ARRAY_NAMES
        }
        self.problem = QuadraticBilevel(**arrays, name="stacked comparison problems")
        self.rngs = (None,) * len(problems)  # type: ignore[assignment]  # nothing is drawn
        self.batch_size = None
        self.per_run = problems[0].n_clients
        self.sampler = ClientSampler(self.problem.n_clients, None)
        self.oracles = Oracles(self.problem, CallCounter())

    def participants(self) -> torch.Tensor:
        """Every client of every run: the stacked problem's own clients, in order."""
        return self.sampler.all_clients()

    def rows(self, state: torch.Tensor) -> torch.Tensor:
        """A state ``(R, ...)`` sent to each run's ``M`` clients: ``(R x M, ...)``."""
        return state.repeat_interleave(self.per_run, dim=0)


class StackedState(NamedTuple):
    """Every run's ``x`` and ``y`` after an iteration, row ``r`` run ``r``'s."""

    x: torch.Tensor
    y: torch.Tensor


class StackedFedNest:
    """FedNest's iterations on each of ``problems``, run ``r`` as ``algorithms[r]`` on
    ``problems[r]`` (:func:`check_stackable`): :meth:`start` and :meth:`step` give what the
    unbatched runs' states hold, row by row; :meth:`keep` drops the runs that stopped."""

    def __init__(self, algorithms: Sequence[FedNest], problems: Sequence[QuadraticBilevel]):
        check_stackable(algorithms, problems)
        self.config = algorithms[0]
        self.problems = list(problems)
        states = [a.init(p) for a, p in zip(algorithms, problems, strict=True)]
        self.start = StackedState(
            torch.stack([s.x for s in states]), torch.stack([s.y for s in states])
        )
        self._steps = [s.steps for s in states]
        self._build()

    def _build(self) -> None:
        self.side = ProblemStack(self.problems)
        per_run = self.side.per_run

        def column(values: Sequence[float]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float64).repeat_interleave(per_run)

        self._beta = column([s.inner for s in self._steps])
        self._alpha = column([s.outer for s in self._steps])
        self._lam = column([s.neumann for s in self._steps])[:, None]

    def keep(self, state: StackedState, rows: Sequence[int]) -> StackedState:
        """Only the runs ``rows`` go on (in that order): the stack rebuilt for them, and their
        rows of ``state``."""
        self.problems = [self.problems[r] for r in rows]
        self._steps = [self._steps[r] for r in rows]
        self._build()
        index = torch.tensor(list(rows), dtype=torch.long)
        return StackedState(state.x.index_select(0, index), state.y.index_select(0, index))

    def rounds_per_iteration(self) -> int:
        """``2T + N + 3`` (deterministic truncation: every iteration the same)."""
        return self.config.rounds_per_iteration()

    def step(self, state: StackedState) -> StackedState:
        """One iteration of every run: :meth:`FedNest.advance
        <testbed.algorithms.fednest.FedNest.advance>` with its inner and outer updates, row by
        row."""
        side, config = self.side, self.config
        x_rows, y = side.rows(state.x), state.y
        clients = side.participants()
        for _ in range(config.inner_steps):  # FedInn (Alg. 4, two rounds) or LFedInn (one)
            y_rows = side.rows(y)
            direction = None
            if type(config.inner_rule) is FedInn:
                (snapshot,) = InnerGradient(x_rows, y_rows).run(side, clients).uploads
                direction = side.rows(side.aggregate(snapshot))
            work = LocalIterates(
                y_rows,
                InnerGradientAt(x_rows),
                config.local_steps,
                self._beta,  # type: ignore[arg-type]  # one step per row
                global_direction=direction,
                scale_by_steps=config.scale_by_steps,
            )
            y = side.aggregate(work.run(side, clients).uploads[0])
        y_rows = side.rows(y)
        if type(config.outer_rule) is LFedOut:  # local Neumann hypergradient steps, one round
            local = LocalIterates(
                x_rows,
                LocalHypergradientAt(y_rows, config.neumann_terms, self._lam),  # type: ignore[arg-type]
                config.local_steps,
                self._alpha,  # type: ignore[arg-type]  # one step per row
                scale_by_steps=config.scale_by_steps,
            )
            return StackedState(side.aggregate(local.run(side, clients).uploads[0]), y)
        # FedIHGP (Alg. 3), the deterministic schedule: p_0 = grad_y f / l, N Hessian rounds
        first = IHGPFirstTerm(x_rows, y_rows, self._lam)  # type: ignore[arg-type]
        p = total = side.aggregate(first.run(side, clients).uploads[0])
        for _ in range(config.neumann_terms):
            term = IHGPTerm(x_rows, y_rows, side.rows(p), self._lam)  # type: ignore[arg-type]
            p = side.aggregate(term.run(side, clients).uploads[0])
            total = total + p
        # FedOut (Alg. 2): the direction, then the local steps on x
        (direction,) = OuterDirection(x_rows, y_rows, side.rows(total)).run(side, clients).uploads
        h = side.aggregate(direction)
        work = LocalIterates(
            x_rows,
            OuterGradientXAt(y_rows),
            config.local_steps,
            self._alpha,  # type: ignore[arg-type]  # one step per row
            side.rows(h),
            config.scale_by_steps,
        )
        return StackedState(side.aggregate(work.run(side, clients).uploads[0]), y)


__all__ = ["ProblemStack", "StackedFedNest", "StackedState", "check_stackable"]

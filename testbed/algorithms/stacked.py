r"""Runs of one algorithm on ``R`` *different* problems of one shape, as one batch.

The round-savings comparisons (:mod:`theory_checks.comparison`) run an algorithm once on each
of many problems of one family, with exact oracles and every client: such a run draws nothing,
so the runs differ only in their problem and in the steps read from it (``alpha = c / L_h``,
``beta = lambda = 1 / l_{g,1}``). :class:`ProblemStack` stacks the problems' clients run-major
into one :class:`~problems.QuadraticBilevel` of ``R x M`` clients (its arrays the problems'
arrays, concatenated), so a round of every run is one batched oracle call over the ``R x M``
client rows, the very client works of the unbatched rounds
(:class:`~testbed.federation.client_work.ClientWork`), and a step is a column of per-row
values (:meth:`StackedRuns.column`). :class:`StackedRuns` holds the runs' states and drops the
runs that stop; :mod:`testbed.algorithms.fednest_stacked` and
:mod:`testbed.algorithms.aggitd_stacked` are its iterations.

Bit for bit, row by row, as for the replicates of one problem
(:mod:`testbed.federation.replicates`: the oracles work row by row, a round's mean is the
ledger's mean of the same rows), and a step multiplies a row by the run's own double, the
product a scalar step gives. What could change a last bit is refused
(:class:`~testbed.federation.replicates.NotBatchable`, :func:`check_problems`): a shared ``x``
enters ``B_i x`` as one BLAS matrix-vector product and rows as a batched one, which sum
``dim_x >= 3`` products in other orders (:data:`MAX_DIM_X`); a local step ``beta / tau`` is
``(1 / tau) * beta`` for a scalar and ``beta / tau`` for a column, equal at ``tau = 1`` only;
and a problem whose symmetric arrays the oracles apply through a symmetrised copy (the stack
would decide that copy for all its problems at once).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import Any
from typing import NamedTuple

import torch

from problems import QuadraticBilevel
from testbed.calls import CallCounter
from testbed.federation.replicates import NotBatchable
from testbed.federation.replicates import Replicates
from testbed.federation.sampling import ClientSampler
from testbed.oracles import Oracles

#: The largest ``dim_x`` stacked: a shared ``(dx,)`` point's products sum in the batched
#: kernel's order for one or two terms only (the module docstring).
MAX_DIM_X = 2


#: The fields a stack's runs may differ in: each run's own steps, a column each.
STEP_FIELDS = ("outer_step_size", "inner_step_size")


def check_runs(algorithms: Sequence[Any], problems: Sequence[Any], kind: type[Any]) -> Any:
    """Raise :class:`NotBatchable` unless there is one algorithm per problem, each of class
    ``kind`` itself (a subclass, that is a planted mistake or a mutant, runs its own code alone),
    all equal but for their steps (:data:`STEP_FIELDS`: every other field the dataclass
    compares is equal); the first algorithm, whose other fields every run shares."""
    if not algorithms or len(algorithms) != len(problems):
        raise NotBatchable("one algorithm per problem, at least one")
    first = algorithms[0]
    # the fields the dataclass compares, but the steps: read, not rebuilt per algorithm (equal
    # fields make equal algorithms once the steps are set alike)
    names = [f.name for f in dataclasses.fields(first) if f.compare and f.name not in STEP_FIELDS]
    shared = [getattr(first, name) for name in names]
    for algorithm in algorithms:
        if type(algorithm) is not kind:
            raise NotBatchable(
                f"{type(algorithm).__name__} is not {kind.__name__} itself: run alone"
            )
        if [getattr(algorithm, name) for name in names] != shared:
            raise NotBatchable("the runs differ in more than their steps")
    return first


def check_problems(problems: Sequence[Any], local_steps: Any) -> None:
    """Raise :class:`NotBatchable` unless ``problems`` stack exactly with ``local_steps``
    (module docstring): sample-free :class:`~problems.QuadraticBilevel` of one shape on the
    CPU, ``dim_x <= 2``, their symmetric arrays applied as stored, ``tau = 1``."""
    if not problems:
        raise NotBatchable("no problem to stack")
    if local_steps != 1:
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
            if not problem.applied_as_stored(name):
                raise NotBatchable(f"{name} is applied through a symmetrised copy: run alone")


class ProblemStack(Replicates):
    """The clients' side of one run on each of ``problems`` (one shape): their clients stacked
    run-major as one :class:`~problems.QuadraticBilevel` of ``R x M`` clients, every round all
    of them (full participation, exact oracles: nothing is drawn)."""

    def __init__(self, problems: Sequence[QuadraticBilevel]) -> None:
        arrays: dict[str, Any] = {
            name: torch.cat([getattr(p, name) for p in problems])
            for name in QuadraticBilevel.ARRAY_NAMES
        }
        self.problem = QuadraticBilevel(**arrays, name="stacked problems")
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


class StackedRuns(abc.ABC):
    """Runs on ``problems``, run ``r`` on ``problems[r]`` with the steps ``steps[r]`` (a tuple
    of floats each): the stack (:attr:`side`), each step as a column (:meth:`column`);
    :meth:`keep` drops the runs that stopped. A subclass sets :attr:`start` (every run's
    initial state) and implements :meth:`step` (one iteration)."""

    start: StackedState

    @abc.abstractmethod
    def step(self, state: StackedState) -> StackedState:
        """One iteration of every run, row by row as each unbatched run's."""

    @abc.abstractmethod
    def rounds_per_iteration(self) -> int:
        """The communication rounds of one iteration (the same for every run and iteration)."""

    def __init__(self, problems: Sequence[Any], steps: Sequence[tuple[float, ...]]) -> None:
        self.problems, self.steps = list(problems), list(steps)
        self._build()

    def _build(self) -> None:
        self.side = ProblemStack(self.problems)
        per_run = self.side.per_run
        self._columns = [
            torch.tensor(values, dtype=torch.float64).repeat_interleave(per_run)
            for values in zip(*self.steps, strict=True)
        ]

    def column(self, which: int) -> torch.Tensor:
        """Step ``which`` of every run, one value per client row: ``(R x M,)``."""
        return self._columns[which]

    def keep(self, state: StackedState, rows: Sequence[int]) -> StackedState:
        """Only the runs ``rows`` go on (in that order): the stack rebuilt for them, and their
        rows of ``state``."""
        self.problems = [self.problems[r] for r in rows]
        self.steps = [self.steps[r] for r in rows]
        self._build()
        index = torch.tensor(list(rows), dtype=torch.long)
        return StackedState(state.x.index_select(0, index), state.y.index_select(0, index))


__all__ = [
    "STEP_FIELDS",
    "check_runs",
    "MAX_DIM_X",
    "ProblemStack",
    "StackedRuns",
    "StackedState",
    "check_problems",
]

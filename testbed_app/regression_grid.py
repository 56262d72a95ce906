"""The regression grid: what ``testbed regress`` measures of every registered entry.

The grid is fixed: closed-form problems (heterogeneous bilevel, minimax, compositional) x
:data:`PROBLEM_SEEDS`, and for each problem :data:`REPLICATES` run seeds for the randomness inside
estimators (minibatches, random truncation indices, client sampling). For every registered entry
it measures, lower being better (errors are relative, so problems of any scale compare):

estimators (``role == "estimator"``), at their registered defaults, at a random point x:
    ``log10_error``       log10 ||h_hat - grad h|| / ||grad h|| (floored at :data:`ERROR_FLOOR`),
    ``log10_error_mb``    the same with minibatch oracles (``batch_size = 2``) where supported,
    ``log10_variance_mb`` log10 of the trace variance of the minibatch estimate / ||grad h||^2,
    ``oracle_calls``, ``comm_rounds``, ``floats_sent`` per estimate (the estimate's budget);
algorithms (``role == "algorithm"``), run from the problem's initial point for at least
:data:`ALGORITHM_ITERATIONS` iterations and until both budgets below are spent:
    ``log10_stationarity_at_rounds`` / ``_at_calls``  log10 ||grad h(x)|| / ||grad h(x_0)|| at the
        last iterate within :data:`ROUND_BUDGET` rounds / :data:`ORACLE_BUDGET` oracle calls,
    ``log10_hg_error_at_rounds`` / ``_at_calls``  log10 ||h_k - grad h(x_{k-1})|| /
        ||grad h(x_0)|| of the hypergradient estimate ``h_k`` the algorithm used in its last step
        within the budget (algorithms whose state exposes ``h``),
    ``rounds_to_target``  communication rounds until ||grad h(x_k)|| <= 1e-2 ||grad h(x_0)||
        ("not reached" when the run ends first),
    ``rounds_per_iteration``, ``floats_per_round`` (floats sent each way / rounds).

A replicate whose value is not finite (the run diverged, or the target was not reached) is
recorded as such; the table says "diverged" / "not reached" with the count, and a candidate with
more such replicates than its reference is worse.

The comparison of two measurements and the committed baseline are
:mod:`testbed_app.regression`'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import Literal

import numpy as np
import torch

from problems import LinearCompositional
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from testbed import plugins
from testbed.algorithms.base import IterationRecord
from testbed.federation.context import FederatedContext
from testbed.info import EstimatorInfo
from testbed.registry import BUILTIN
from theory_checks.units import RegisteredEntryTask
from theory_checks.units import driver_dtype
from theory_checks.units import run_in_process

PROBLEM_SEEDS = (0, 1, 2)
REPLICATES = 4  # why 4: a within-problem variance per seed while the grid stays ~6 minutes
ALGORITHM_ITERATIONS = 20  # at least this many outer iterations per run (rounds_to_target)
ROUND_BUDGET = 100  # why: within 20 iterations of every server-based algorithm but FedMSA (2/it)
ORACLE_BUDGET = 2000  # why: >= 4 iterations of the costliest (FedNest, ~460 calls per iteration)
MAX_ITERATIONS = 200  # cap when a budget is not spent sooner (FedMSA needs 50 for the rounds)
TARGET = 1e-2  # relative stationarity for rounds_to_target (the comparison claims' target)
ERROR_FLOOR = 1e-12  # relative; float64 round-off of an exact hypergradient is ~1e-13 of it

Statistic = Literal["mean", "variance"]


#: The fixed grid's problem kinds, each built from a problem seed; every problem has a sample
#: set so minibatch variants can run.
GRID: dict[str, Callable[[int], Any]] = {
    "bilevel": lambda seed: QuadraticBilevel.random(
        6,
        3,
        4,
        10.0,
        seed=seed,
        hessian_heterogeneity=0.3,
        gradient_heterogeneity=1.0,
        hessian_noise=0.1,
        n_samples=8,
        gradient_noise=0.2,
    ),
    "minimax": lambda seed: QuadraticMinimax.random(
        6, 3, 4, 10.0, 0.3, seed=seed, hessian_noise=0.1, n_samples=8, gradient_noise=0.2
    ),
    "compositional": lambda seed: LinearCompositional.random(
        6, [3, 4], seed, heterogeneity=0.3, n_samples=8, value_noise=0.2
    ),
}


def grid_problems(seed: int) -> dict[str, Any]:
    """The grid's problems of one problem seed, by kind (:data:`GRID`)."""
    return {kind: build(seed) for kind, build in GRID.items()}


# ------------------------------------------------------------------------------- samples


@dataclasses.dataclass(frozen=True)
class Samples:
    """One metric of one entry on one problem kind: values per problem seed.

    Attributes:
        per_seed: for ``statistic == "mean"``, the replicate values of each problem seed
            (``inf`` or ``nan`` = the replicate diverged / did not reach the target); for
            ``"variance"``, one sample variance per seed.
        statistic: ``"mean"`` (paired Welch t-test) or ``"variance"`` (F-test).
        df: degrees of freedom of each per-seed variance (``"variance"`` only).
    """

    per_seed: tuple[tuple[float, ...], ...]
    statistic: Statistic = "mean"
    df: int = 0

    @property
    def finite(self) -> list[float]:
        return [v for seed in self.per_seed for v in seed if math.isfinite(v)]

    @property
    def n_failed(self) -> int:
        return sum(1 for seed in self.per_seed for v in seed if not math.isfinite(v))

    @property
    def n(self) -> int:
        return sum(len(seed) for seed in self.per_seed)

    @property
    def mean(self) -> float:
        """The displayed value: mean of the finite replicates, or log10 of the pooled variance."""
        if self.statistic == "variance":
            return floored_log10(float(np.mean([s[0] for s in self.per_seed])), ERROR_FLOOR**2)
        values = self.finite
        return float(np.mean(values)) if values else math.nan

    @property
    def deterministic(self) -> bool:
        if self.statistic == "variance":
            return all(s[0] <= ERROR_FLOOR**2 for s in self.per_seed)
        return all(len(set(seed)) <= 1 for seed in self.per_seed)


def floored_log10(value: float, floor: float = ERROR_FLOOR) -> float:
    """log10 of a non-negative figure, floored; ``inf`` (diverged) when it is not finite."""
    if not math.isfinite(value):
        return math.inf
    return math.log10(max(value, floor))


def _point(problem: Any, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(10_000 + seed)
    return torch.as_tensor(rng.standard_normal(problem.dim_x), dtype=torch.float64)


def _measure_estimator(info: EstimatorInfo, problem: Any, seed: int) -> dict[str, Samples]:
    """Errors, costs and minibatch variance of one estimator at one point of one problem."""
    x = _point(problem, seed)
    exact = problem.exact_hypergradient(x)
    scale = max(float(exact.norm()), 1e-300)
    out: dict[str, list[float]] = {
        k: [] for k in ("log10_error", "oracle_calls", "comm_rounds", "floats_sent")
    }
    estimator = info.build()
    for rep in range(REPLICATES):
        result = estimator.estimate(
            problem, x, estimator.init(problem), np.random.default_rng([seed, rep])
        )
        out["log10_error"].append(floored_log10(float((result.value - exact).norm()) / scale))
        out["oracle_calls"].append(float(result.calls.oracle_calls))
        out["comm_rounds"].append(float(result.calls.comm_rounds))
        out["floats_sent"].append(float(result.calls.floats_sent))
    samples = {k: Samples((tuple(v),)) for k, v in out.items()}
    if "batch_size" in info.defaults:
        estimator = info.build(batch_size=2)
        values, errors = [], []
        for rep in range(REPLICATES):
            result = estimator.estimate(
                problem, x, estimator.init(problem), np.random.default_rng([seed, rep, 1])
            )
            values.append(result.value)
            errors.append(floored_log10(float((result.value - exact).norm()) / scale))
        stacked = torch.stack(values)
        # unbiased trace variance: sum of squared deviations / (n - 1)
        variance = float(((stacked - stacked.mean(0)) ** 2).sum()) / (REPLICATES - 1)
        samples["log10_error_mb"] = Samples((tuple(errors),))
        samples["log10_variance_mb"] = Samples(
            ((variance / scale**2,),), "variance", REPLICATES - 1
        )
    return samples


def _within(records: Sequence[Any], field: str, budget: float) -> int:
    """Index of the last record whose cumulative ``field`` is within ``budget`` (at least 1)."""
    inside = [i for i, r in enumerate(records) if getattr(r.calls, field) <= budget]
    return max(max(inside), 1)


def _run_to_budgets(algorithm: Any, problem: Any, rng: np.random.Generator) -> list[Any]:
    """Iteration records until both budgets are spent (at least ALGORITHM_ITERATIONS, at most
    MAX_ITERATIONS), stopping early once the iterate is no longer finite."""

    algorithm.check_problem(problem)
    ctx = FederatedContext(problem, rng, algorithm.participation, algorithm.batch_size)
    state = algorithm.init(problem)
    records = [IterationRecord(0, state.x, state, ctx.calls())]
    while len(records) <= MAX_ITERATIONS:
        calls = records[-1].calls
        if (
            len(records) > ALGORITHM_ITERATIONS
            and calls.comm_rounds >= ROUND_BUDGET
            and calls.oracle_calls >= ORACLE_BUDGET
        ):
            break
        state = algorithm.step(ctx, state)
        records.append(IterationRecord(len(records), state.x, state, ctx.calls()))
        if not bool(torch.isfinite(state.x).all()):
            break
    return records


def _measure_algorithm(info: EstimatorInfo, problem: Any, seed: int) -> dict[str, Samples]:
    """Stationarity and hypergradient error at fixed budgets, rounds to target, traffic."""
    out: dict[str, list[float]] = {}
    algorithm = info.build()
    for rep in range(REPLICATES):
        records = _run_to_budgets(algorithm, problem, np.random.default_rng([seed, rep]))
        grads = [problem.exact_hypergradient(r.x) for r in records]
        start = max(float(grads[0].norm()), 1e-300)
        ratios = [float(g.norm()) / start for g in grads]
        diverged = not math.isfinite(ratios[-1])
        row: dict[str, float] = {}
        for suffix, field, budget in (
            ("rounds", "comm_rounds", ROUND_BUDGET),
            ("calls", "oracle_calls", ORACLE_BUDGET),
        ):
            k = len(records) - 1 if diverged else _within(records, field, budget)
            row[f"log10_stationarity_at_{suffix}"] = floored_log10(ratios[k])
            h = getattr(records[k].state, "h", None)
            if h is not None:
                row[f"log10_hg_error_at_{suffix}"] = floored_log10(
                    float((h - grads[k - 1]).norm()) / start
                )
        reached = [r.calls.comm_rounds for r, q in zip(records, ratios, strict=True) if q <= TARGET]
        row["rounds_to_target"] = float(reached[0]) if reached else math.inf
        last = records[-1].calls
        row["rounds_per_iteration"] = last.comm_rounds / (len(records) - 1)
        row["floats_per_round"] = last.floats_sent / max(last.comm_rounds, 1)
        for metric, value in row.items():
            out.setdefault(metric, []).append(value)
    return {metric: Samples((tuple(values),)) for metric, values in out.items()}


def _measure_cell(info: EstimatorInfo, seed: int, kind: str) -> dict[str, Samples]:
    """The metrics of one grid cell: one entry on the ``kind`` problem of one problem seed."""
    run = _measure_algorithm if info.role == "algorithm" else _measure_estimator
    try:
        return run(info, GRID[kind](seed), seed)
    except (Exception, SystemExit) as error:  # never KeyboardInterrupt: Ctrl-C stops the run
        if info.name in {entry.name for entry in BUILTIN}:
            raise  # the testbed's own entry: an internal error, with its traceback
        # a plugin's (or module:object's) estimator raising: one line naming it
        modules = plugins.modules_of(info.cls, info.make)
        package = next(
            filter(None, (plugins.package_providing(group, info.name) for group in plugins.GROUPS)),
            None,
        )
        source = (
            f"plugin {package}"
            if package
            else f"code from outside the testbed ({', '.join(sorted(modules))})"
        )
        where = plugins.raised_in(error, modules)
        raise ValueError(
            f"{source}: {info.role} {info.name} raised "
            f"{plugins.describe_failure(error)} on the regression grid ({kind} "
            f"problem, seed {seed})" + (f" (at {where})" if where else "")
        ) from error


@dataclasses.dataclass
class GridCellTask(RegisteredEntryTask):
    """One grid cell ``(entry, problem seed, problem kind)`` as a unit of work for an executor
    (:mod:`testbed_app.executors`; pickling: :class:`~theory_checks.units.RegisteredEntryTask`):
    calling it gives the cell's metrics. The cell's draws are seeded by the problem seed and
    replicate, so the numbers do not depend on where it runs."""

    name: str
    seed: int
    kind: str
    default_dtype: str = "float64"
    info: EstimatorInfo | None = None

    def __call__(self) -> dict[str, Samples]:
        return _measure_cell(self.resolved_info(), self.seed, self.kind)


#: How an executor runs tasks (:data:`testbed_app.executors.Executor.run`); the default runs
#: them one by one in this process.
Execute = Callable[[Sequence[GridCellTask]], Iterable[tuple[int, dict[str, Samples]]]]


def grid_cells(info: EstimatorInfo) -> list[GridCellTask]:
    """The grid cells of one entry: every problem seed x every kind it supports."""
    return [
        GridCellTask(info.name, seed, kind, driver_dtype(), info)
        for seed in PROBLEM_SEEDS
        for kind in GRID
        if kind in info.supports
    ]


def measure_all(
    infos: Sequence[EstimatorInfo],
    progress: Callable[[str], None] | None = None,
    execute: Execute | None = None,
) -> dict[str, dict[str, dict[str, Samples]]]:
    """Metrics of registry entries on every grid problem each supports: name -> kind -> metric.

    The cells run through ``execute`` (in this process, one by one, by default) and come back
    in any order; they are assembled in grid order (problem seeds ascending), so the result does
    not depend on the executor."""
    tasks = [task for info in infos for task in grid_cells(info)]
    done: dict[int, dict[str, Samples]] = {}
    for index, metrics in (execute or run_in_process)(tasks):
        done[index] = metrics
        if progress:
            task = tasks[index]
            progress(f"{task.name} {task.kind} seed {task.seed}")
    parts: dict[str, dict[str, dict[str, list[Samples]]]] = {info.name: {} for info in infos}
    for index, task in enumerate(tasks):  # grid order: seeds ascending within each kind
        bucket = parts[task.name].setdefault(task.kind, {})
        for metric, samples in done[index].items():
            bucket.setdefault(metric, []).append(samples)
    return {
        name: {kind: {m: _concat(p) for m, p in metrics.items()} for kind, metrics in kinds.items()}
        for name, kinds in parts.items()
    }


def measure(
    info: EstimatorInfo, progress: Callable[[str], None] | None = None
) -> dict[str, dict[str, Samples]]:
    """Metrics of one registry entry on every grid problem it supports: kind -> metric."""
    return measure_all([info], progress).get(info.name, {})


def _concat(parts: Sequence[Samples]) -> Samples:
    return Samples(tuple(s for p in parts for s in p.per_seed), parts[0].statistic, parts[0].df)

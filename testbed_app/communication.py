"""Communication per outer iteration of every registered algorithm, against its paper's formula.

For each registered algorithm (``role == "algorithm"``) at its registered defaults, a short run
on the regression grid's problem (:func:`grid_problems`, seed 0, the first
kind it supports) records from the ledger the rounds of every outer iteration and the floats sent
each way, next to the formula of its paper with the parameters substituted. The formula is the
algorithm's own ``rounds_formula()`` (:class:`testbed.algorithms.rounds.RoundsFormula`: FedNest
Table 2 and Sec. 2.6, AggITD Table 1, FedMSA Sec. 3, HGP Alg. 2 in gossip steps), the one home
that ``rounds_per_iteration()`` and the communication claims read as well; nothing here restates
it. With FedNest's random truncation the formula is evaluated at each iteration's drawn ``N'``
(Alg. 3 as listed uses ``N' + 1`` rounds; the paper's ``2T + N + 3`` is then an upper bound, the
erratum checked by ``fednest.rounds.paper_count_random``). An algorithm without a formula gets
its ``rounds_per_iteration()`` if it declares one, marked "declared, no paper formula".
``testbed check`` writes the table to ``results/communication.json``; the report reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from results_format.layout import COMMUNICATION
from results_format.resume import fingerprint as fingerprint_of
from results_format.resume import reuse_or_write
from testbed.algorithms.base import run_algorithm
from testbed.info import EstimatorInfo
from testbed.progress import Progress
from testbed.registry import ESTIMATOR_DB
from testbed_app.regression_grid import grid_problems
from theory_checks.units import RegisteredEntryTask
from theory_checks.units import driver_dtype
from theory_checks.units import run_in_process

ITERATIONS = 5  # why 5: random N' varies per iteration; five show the spread in a second
FILE = COMMUNICATION
KIND_ORDER = ("bilevel", "minimax", "compositional")


def measure(info: EstimatorInfo) -> dict[str, Any]:
    """One row of the table: ledger rounds per iteration against the paper's formula."""

    kind = next(k for k in KIND_ORDER if k in info.supports)
    problem = grid_problems(0)[kind]
    algorithm = info.build()
    records = run_algorithm(algorithm, problem, ITERATIONS, np.random.default_rng(0))
    rounds = [
        b.calls.comm_rounds - a.calls.comm_rounds
        for a, b in zip(records[:-1], records[1:], strict=True)
    ]
    last = records[-1].calls
    formula = algorithm.rounds_formula()
    expected: list[int | None] = []
    if formula is not None:
        expected = [formula.at_iteration(r.state) for r in records[1:]]
    declared = algorithm.rounds_per_iteration()
    agrees = (
        all(e == m for e, m in zip(expected, rounds, strict=True))
        if expected and None not in expected
        else None
    )
    total = max(last.comm_rounds, 1)
    return {
        "algorithm": info.name,
        "paper": info.paper,
        "reference": info.reference,
        "problem_kind": kind,
        "problem_id": problem.id,
        "formula": formula.text if formula else None,
        "formula_parameters": formula.parameters if formula else {},
        "formula_source": formula.source if formula else None,
        "formula_value": formula.value() if formula else declared,
        "formula_per_iteration": expected,
        "declared": declared,
        "measured_rounds": rounds,
        "agrees": agrees,
        "floats_per_round": last.floats_sent / total,
        "floats_up_per_round": last.floats_up / total,
        "floats_down_per_round": last.floats_down / total,
        "floats_per_iteration": last.floats_sent / ITERATIONS,
        "note": (
            formula.note
            if formula
            else "declared by rounds_per_iteration(), no paper formula"
            if declared is not None
            else "no formula stated"
        ),
    }


def fingerprint(infos: Sequence[EstimatorInfo]) -> str:
    """Changes when the algorithms or their defaults change, so stale tables are redone."""
    algorithms = "|".join(
        f"{i.name}:{sorted(i.defaults.items())!r}:{i.cls.__qualname__}" for i in infos
    )
    return fingerprint_of(algorithms, str(ITERATIONS))


@dataclasses.dataclass
class CommunicationTask(RegisteredEntryTask):
    """One algorithm's row as a unit of work for an executor (:mod:`testbed_app.executors`;
    pickling: :class:`~theory_checks.units.RegisteredEntryTask`)."""

    name: str
    default_dtype: str = "float64"
    info: EstimatorInfo | None = None

    def __call__(self) -> dict[str, Any]:
        return measure(self.resolved_info())


def write_table(
    results_dir: Path,
    resume: bool = True,
    progress: bool = True,
    execute: Callable[[Sequence[CommunicationTask]], Iterable[tuple[int, dict[str, Any]]]]
    | None = None,
) -> Path:
    """Measure every registered algorithm (each a task through ``execute``, in this process by
    default) and write ``results/communication.json``, unless it is fresh and ``resume``."""
    infos = [i for i in ESTIMATOR_DB if i.role == "algorithm"]
    path = Path(results_dir) / FILE

    def table() -> dict[str, Any]:
        tasks = [CommunicationTask(i.name, driver_dtype(), i) for i in infos]
        rows: dict[int, dict[str, Any]] = {}
        for index, row in Progress(
            (execute or run_in_process)(tasks),
            total=len(tasks),
            desc="communication",
            unit="algorithm",
            enabled=progress,
        ):
            rows[index] = row
        return {"iterations": ITERATIONS, "seed": 0, "rows": [rows[i] for i in range(len(tasks))]}

    reuse_or_write(path, fingerprint(infos), table, resume=resume, indent=1)
    return path

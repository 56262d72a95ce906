"""One federated round of FedNest and of FBO-AggITD: batched client axis vs the per-client loop.

A *round* here is one outer iteration (``algorithm.step``): FedNest's ``2T + N + 3``
communication rounds, FBO-AggITD's ``2N + 3``, with the registry's defaults (the papers'
settings) and deterministic truncation for FedNest so that every repeat does the same work. The
problem is a closed-form quadratic (``QuadraticBilevel.random``, dim_x = dim_y = 10, kappa = 10,
heterogeneity 0.3, exact local objectives); the same step runs on the batched problem and on
:class:`problems.PerClientLoop` of it, from the same state with the same seed, and the benchmark
also records how far apart the two resulting iterates are (float64 round-off).

Target (issue 6): the batched round is at least 20x faster than the loop at M = 100 clients.

    python benchmarks/closed_form_rounds.py [--quick] [--out DIR]
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any

import numpy as np
from _common import Row, Target, cli, speedup, target, time_call

from problems import PerClientLoop, Problem, QuadraticBilevel
from testbed import get_estimator
from testbed._algorithms.base import OuterAlgorithm
from testbed._federation.context import FederatedContext

NAME = "closed_form_rounds"
DESCRIPTION = ("One outer iteration of FedNest and FBO-AggITD on a closed-form quadratic "
               "(dim_x = dim_y = 10, kappa = 10), batched client axis vs per-client loop; "
               "target: >= 20x at M = 100")
TARGET_SPEEDUP = 20.0
TARGET_CLIENTS = 100
DIM_X = DIM_Y = 10


def algorithms(problem: QuadraticBilevel) -> dict[str, OuterAlgorithm]:
    """The registry's FedNest and FBO-AggITD with step sizes resolved on the batched problem.

    The loop exposes only the Problem contract, so the defaults that read ``constants()`` are
    resolved once here and passed explicitly to both sides.
    """
    fednest = get_estimator("fednest").build(truncation="deterministic")
    steps = fednest.resolve_steps(problem)
    fednest = dataclasses.replace(fednest, inner_step_size=steps.inner,
                                  outer_step_size=steps.outer, neumann_step_size=steps.neumann)
    step = 1.0 / problem.constants().L
    aggitd = get_estimator("fbo-aggitd").build(inner_step_size=step, neumann_step_size=step)
    return {"fednest": fednest, "fbo-aggitd": aggitd}


def one_round(algorithm: OuterAlgorithm, problem: Problem, state: Any, seed: int = 0) -> Any:
    """One outer iteration from ``state`` in a fresh context (same seed: same draws)."""
    ctx = FederatedContext(problem, np.random.default_rng(seed), algorithm.participation,
                           algorithm.batch_size)
    return algorithm.step(ctx, state)


def oracle_calls_per_round(algorithm: OuterAlgorithm, problem: Problem, state: Any) -> int:
    ctx = FederatedContext(problem, np.random.default_rng(0), algorithm.participation,
                           algorithm.batch_size)
    algorithm.step(ctx, state)
    return ctx.calls().oracle_calls


def repeats(quick: bool, clients: int, looped: bool) -> tuple[int, int]:
    """``(warm-up calls, timed repeats)`` of one side.

    Why: a batched round takes milliseconds (2 warm-ups absorb allocator and first-call costs,
    the median of 7 is stable); a looped round takes seconds at M = 100 and over a minute at
    M = 1000 on a loaded machine, where one-off costs are negligible and one timed call is a
    measurement (3 at M = 100 for a median).
    """
    if quick:
        return 0, 1
    if not looped:
        return 2, 7
    return (1, 3) if clients <= TARGET_CLIENTS else (0, 1)


def measure(quick: bool, device_list: list[str]) -> tuple[list[Row], list[Target]]:
    del device_list  # float64 closed-form problems: CPU only
    sizes = (4,) if quick else (TARGET_CLIENTS, 1000)
    target_clients = sizes[0] if quick else TARGET_CLIENTS
    rows: list[Row] = []
    targets: list[Target] = []
    for clients in sizes:
        problem = QuadraticBilevel.random(clients, DIM_X, DIM_Y, 10.0, 0.3, seed=0)
        loop = PerClientLoop(problem)
        for name, algorithm in algorithms(problem).items():
            state = algorithm.init(problem)
            timings = {}
            for side, target_problem in (("batched", problem), ("looped", loop)):
                warmup, repeat = repeats(quick, clients, looped=side == "looped")
                timings[side] = time_call(
                    functools.partial(one_round, algorithm, target_problem, state),
                    warmup=warmup, repeats=repeat)
            batched, looped = timings["batched"], timings["looped"]
            difference = float((batched.result.x - looped.result.x).abs().max())
            ratio = speedup(looped, batched)
            rows.append({
                "algorithm": name, "clients": clients, "dim_x": DIM_X, "dim_y": DIM_Y,
                "rounds_per_iteration": int(algorithm.rounds_per_iteration() or 0),
                "oracle_calls_per_round": oracle_calls_per_round(algorithm, problem, state),
                "batched_s": batched.median, "loop_s": looped.median, "speedup": ratio,
                "batched_min_s": batched.minimum, "loop_min_s": looped.minimum,
                "batched_repeats": batched.repeats, "loop_repeats": looped.repeats,
                "max_abs_difference_x": difference,
            })
            if clients == target_clients:
                targets.append(target(f"{name}: round speedup, batched vs loop, "
                                      f"M = {clients}", ratio, TARGET_SPEEDUP, "at_least"))
    return rows, targets


def main(argv: list[str] | None = None) -> int:
    return cli(NAME, DESCRIPTION, measure, argv)


if __name__ == "__main__":
    sys.exit(main())

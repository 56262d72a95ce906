"""Time per communication round of FedNest (T = 1, N = 5, tau = 5) on the MLP and CNN
hyper-representation workloads, 100 clients on digits, batched vs the row-function per-client
loop and PerClientLoop; target: >= 10x on a CUDA GPU.

One FedNest outer iteration (Alg. 1 with FedInn, FedIHGP and FedOut, deterministic truncation
so every repeat does the same work) on the hyper-representation workload (FedNest Sec. 4.1,
AggITD Table 2) over 100 clients of the embedded digits data, float32, full participation, with
the authors' code defaults (ucr-optml/FedNest ``utils/options.py``: ``inner_ep 1``, ``neumann 5``,
``outer_tau 5``, learning rates 0.01): ``T = 1``, ``N = 5``, ``tau = 5``, i.e. ``2T + N + 3 = 10``
communication rounds per iteration. The same iteration runs, from the same state and seed, on the
workload (batched), on ``_loops.WorkloadLoop`` of it (the honest per-client loop: autodiff of the
row function called on client i's own samples, no vmap, no gather; issue 12) and on
:class:`problems.PerClientLoop` (vmap over a batch of one client: the reference before issue 12,
kept for continuity); the time per communication round is the iteration's time over its 10
rounds. Both loops' iterates are compared with the batched one (``max_abs_difference_x``).

Timed on the CPU, and on CUDA when ``torch.cuda.is_available()``. Target (issue 6): at least 10x
on the GPU at 100 clients; on the CPU the ratio is recorded without a target.

    python benchmarks/workload_round.py [--quick] [--out DIR] [--device cpu|cuda]
"""

from __future__ import annotations

import functools
import sys

from _common import Row
from _common import Sized
from _common import Target
from _common import cli
from _common import description
from _common import speedup
from _common import target
from _common import time_call
from _loops import WorkloadLoop
from _workloads import neural_workloads
from closed_form_rounds import one_round

from problems import PerClientLoop
from testbed.algorithms.fednest import FedNest

NAME = "workload_round"
DESCRIPTION = description(__doc__)
TARGET_GPU_SPEEDUP = 10.0
MODELS = ("hyper-representation MLP", "hyper-representation CNN")
# Why 0.01: the authors' lr and hlr (ucr-optml/FedNest reproduce/fig2.sh); the Neumann scale of
# their code is hlr as well.
STEP = 0.01
# Why 1 s: a batched iteration takes tenths of a second, so after its warm-up call the Timer
# times it about five times; a looped one takes tens of seconds on the CPU, where one timed
# call after one warm-up call is a measurement (the Timer stops there). Quick: one of each.
MIN_RUN_S = Sized(full=1.0, quick=0.0)


def algorithm(quick: bool) -> FedNest:
    """FedNest with the authors' code defaults (module docstring); smaller in quick mode."""
    T, N, tau = (1, 2, 2) if quick else (1, 5, 5)
    return FedNest(
        inner_steps=T,
        neumann_terms=N,
        local_steps=tau,
        truncation="deterministic",
        inner_step_size=STEP,
        outer_step_size=STEP,
        neumann_step_size=STEP,
    )


def measure(quick: bool, device_list: list[str]) -> tuple[list[Row], list[Target]]:
    rows: list[Row] = []
    targets: list[Target] = []
    fednest = algorithm(quick)
    rounds = fednest.rounds_per_iteration()
    for device in device_list:
        for workload in neural_workloads(quick, device, names=MODELS):
            problem = workload.problem
            state = fednest.init(problem)
            timings = {
                side: time_call(
                    functools.partial(one_round, fednest, target_problem, state),
                    min_run_time=MIN_RUN_S(quick),
                )
                for side, target_problem in (
                    ("batched", problem),
                    ("row_loop", WorkloadLoop(problem)),
                    ("looped", PerClientLoop(problem)),
                )
            }
            batched, looped, row_loop = timings["batched"], timings["looped"], timings["row_loop"]
            ratio = speedup(row_loop, batched)
            moved = float((batched.result.x - state.x).abs().max())
            difference = max(
                float((batched.result.x - other.result.x).abs().max())
                for other in (looped, row_loop)
            )
            rows.append(
                {
                    "workload": workload.name,
                    "device": device,
                    "clients": problem.n_clients,
                    "dim_x": problem.dim_x,
                    "dim_y": problem.dim_y,
                    "dtype": "float32",
                    "rounds_per_iteration": rounds,
                    "batched_iteration_s": batched.median,
                    "loop_iteration_s": looped.median,
                    "batched_round_s": batched.median / rounds,
                    "loop_round_s": looped.median / rounds,
                    "row_loop_iteration_s": row_loop.median,
                    "row_loop_round_s": row_loop.median / rounds,
                    "speedup": ratio,
                    "speedup_over_per_client_loop": speedup(looped, batched),
                    "batched_repeats": batched.repeats,
                    "loop_repeats": looped.repeats,
                    "max_abs_step_x": moved,
                    "max_abs_difference_x": difference,
                }
            )
            if device == "cuda":
                targets.append(
                    target(
                        f"{workload.name} on cuda: round speedup, batched vs "
                        f"row-function loop, M = {problem.n_clients}",
                        ratio,
                        TARGET_GPU_SPEEDUP,
                        "at_least",
                    )
                )
    return rows, targets


def main(argv: list[str] | None = None) -> int:
    return cli(NAME, DESCRIPTION, measure, argv)


if __name__ == "__main__":
    sys.exit(main())

"""One outer iteration of FedNest and FBO-AggITD on closed-form quadratics against the number of
clients, each M in a fresh process: time per client and peak memory against the arrays; targets:
linear in M from 100 to 10,000 (1.3x), M = 10,000 at d = 200 within 24 GiB.

Each grid point ``M`` builds ``QuadraticBilevel.random(M, d, d, kappa = 10, heterogeneity 0.3)``
in a **fresh Python process** (so its peak resident memory is its own) and times one outer
iteration of FedNest and of FBO-AggITD (:func:`closed_form_rounds.algorithms`: the registry's
settings, 78 and 36 oracle calls per client) with ``torch.utils.benchmark.Timer`` (warm-up,
then calls for :data:`MIN_RUN_S`; :func:`_common.time_call`), the fastest call. Each row
records the build time, the client arrays' bytes, the process's peak resident memory (``ru_maxrss``
after the rounds) and its ratio to the arrays, and the round time per client.

Targets (issue 12): round time linear in M, i.e. the time per client at the largest M within
1.3x of the one at M = 100; at M = 10,000, d = 200 (16 GB of float64 arrays) the whole process
fits in 24 GiB (peak resident memory below it).

    python benchmarks/closed_form_scale.py [--quick] [--out DIR]
"""

from __future__ import annotations

import functools
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import Row
from _common import Sized
from _common import Target
from _common import cli
from _common import description
from _common import target

NAME = "closed_form_scale"
DESCRIPTION = description(__doc__)
DIM = Sized(full=200, quick=3)
CLIENTS = Sized(full=(100, 1000, 10_000), quick=(4, 8))
TARGET_LINEAR = 1.3
MEMORY_LIMIT_GB = 24 * 2**30 / 1e9  # 24 GiB, the machine's memory
# Why 10 s: a round at M = 100 takes milliseconds, so the Timer takes the fastest of many; at
# M = 10,000, d = 200 a FedNest round reads 16 GB about 145 times (tens of seconds), where one
# timed call after one warm-up call is a measurement. Quick: one warm-up, one timed call.
MIN_RUN_S = Sized(full=10.0, quick=0.0)


def point(clients: int, dim: int, min_run_time: float) -> dict[str, Any]:
    """One grid point, measured in this process (the child's body)."""
    import torch

    torch.set_num_threads(1)
    from _common import time_call

    from testbed.precision import set_precision

    set_precision()  # a fresh interpreter: the policy again (float64 never uses TF32 anyway)
    from closed_form_rounds import algorithms
    from closed_form_rounds import one_round

    from problems import QuadraticBilevel

    start = time.perf_counter()
    problem = QuadraticBilevel.random(clients, dim, dim, 10.0, 0.3, seed=0)
    build_s = time.perf_counter() - start
    arrays = sum(
        a.numel() * a.element_size()
        for a in (problem.A, problem.B, problem.C, problem.D, problem.E)
    )
    seconds = {
        name: time_call(
            functools.partial(one_round, algorithm, problem, algorithm.init(problem)),
            min_run_time=min_run_time,
        ).minimum
        for name, algorithm in algorithms(problem).items()
    }
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {
        "build_s": build_s,
        "array_gb": arrays / 1e9,
        "peak_rss_gb": peak / 1e9,
        "seconds": seconds,
    }


def measure_in_child(clients: int, dim: int, min_run_time: float) -> dict[str, Any]:
    """:func:`point` in a fresh interpreter (its own peak memory); raises if the child fails."""
    here = Path(__file__).resolve().parent
    code = (
        f"import sys, json; sys.path.insert(0, {str(here)!r}); import closed_form_scale as s; "
        f"print(json.dumps(s.point({clients}, {dim}, {min_run_time!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"M = {clients}, d = {dim}: the child exited {done.returncode}: "
            f"{done.stderr.strip()[-2000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(quick: bool, device_list: list[str]) -> tuple[list[Row], list[Target]]:
    del device_list  # float64 closed-form problems: CPU only
    dim = DIM(quick)
    rows: list[Row] = []
    for M in CLIENTS(quick):
        result = measure_in_child(M, dim, MIN_RUN_S(quick))
        for name, seconds in result["seconds"].items():
            rows.append(
                {
                    "algorithm": name,
                    "clients": M,
                    "dim": dim,
                    "round_s": seconds,
                    "round_ms_per_client": 1e3 * seconds / M,
                    "build_s": result["build_s"],
                    "array_gb": result["array_gb"],
                    "peak_rss_gb": result["peak_rss_gb"],
                    "peak_over_arrays": result["peak_rss_gb"] / result["array_gb"],
                }
            )
        print(f"  M = {M}, d = {dim}: {result}", file=sys.stderr, flush=True)
    return rows, targets(rows)


def targets(rows: list[Row]) -> list[Target]:
    out: list[Target] = []
    smallest, largest = min(r["clients"] for r in rows), max(r["clients"] for r in rows)
    for name in sorted({r["algorithm"] for r in rows}):
        by_m = {r["clients"]: r for r in rows if r["algorithm"] == name}
        growth = by_m[largest]["round_ms_per_client"] / by_m[smallest]["round_ms_per_client"]
        out.append(
            target(
                f"{name}: time per client at M = {largest} over M = {smallest}",
                growth,
                TARGET_LINEAR,
                "at_most",
            )
        )
    top = next(r for r in rows if r["clients"] == largest)
    out.append(
        target(
            f"peak resident memory at M = {largest}, d = {top['dim']} (GB)",
            float(top["peak_rss_gb"]),
            MEMORY_LIMIT_GB,
            "at_most",
        )
    )
    return out


def main(argv: list[str] | None = None) -> int:
    return cli(NAME, DESCRIPTION, measure, argv)


if __name__ == "__main__":
    sys.exit(main())

"""Draws per second of the round-savings comparisons' problems: one by one
(``theory_checks.comparison.runs.draw_problem``) against together
(``theory_checks.comparison.batched.draw_problems``: ``QuadraticBilevel.drawn_with_minimizer``),
on the families those claims draw (issue 37: the draws were ~45% of a calibration seed's time).

    python benchmarks/problem_draws.py [--draws 600] [--repeats 3] [--out results/benchmarks]

For each family, ``--draws`` generators (one per problem, as a calibration block's look has one
per seed and problem) draw their problem both ways, ``--repeats`` times each way alternately in
one process, the fastest time of each kept; the two lists of problems must be equal bit for bit
(every array, the recipe), else the script exits 1. Records draws per second both ways, their
ratio and the load average before and after; writes ``<out>/problem_draws.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from problems import QuadraticBilevel
from results_format import atomic_write
from theory_checks.comparison import batched
from theory_checks.comparison import runs

#: The comparisons' families (theory_checks.comparison.common.quadratic_family_cases):
#: heterogeneous (AggITD's and FedMSA's claims) at the sizes' two ends, homogeneous (LFedNest's).
FAMILIES = {
    "heterogeneous m5 d3": QuadraticBilevel.random(
        5, 3, 3, 2.5, seed=0, hessian_heterogeneity=0.2, gradient_heterogeneity=1.5
    ).spec(),
    "heterogeneous m8 d2": QuadraticBilevel.random(
        8, 2, 2, 2.0, seed=0, hessian_heterogeneity=0.3, gradient_heterogeneity=1.0
    ).spec(),
    "homogeneous m2 d3": QuadraticBilevel.random(2, 3, 3, 3.0, seed=0).spec(),
}


def _streams(count: int) -> list[np.random.Generator]:
    return [np.random.default_rng([37, i]) for i in range(count)]


def _equal(first: list[Any], second: list[Any]) -> bool:
    return all(
        a.spec() == b.spec()
        and all(torch.equal(getattr(a, k), getattr(b, k)) for k in a.ARRAY_NAMES)
        for a, b in zip(first, second, strict=True)
    )


def measure(spec: dict[str, Any], draws: int, repeats: int) -> dict[str, Any]:
    """Fastest of ``repeats`` timings of ``draws`` draws each way, and whether they agree."""
    times: dict[str, list[float]] = {"one_by_one": [], "together": []}
    drawn: dict[str, list[Any]] = {}
    ways = {
        "one_by_one": lambda rngs: [runs.draw_problem(spec, rng) for rng in rngs],
        "together": lambda rngs: batched.draw_problems(spec, rngs),
    }
    for _ in range(repeats):
        for way, draw in ways.items():
            rngs = _streams(draws)
            start = time.perf_counter()
            drawn[way] = draw(rngs)
            times[way].append(time.perf_counter() - start)
    alone, together = min(times["one_by_one"]), min(times["together"])
    return {
        "draws": draws,
        "one_by_one_per_second": draws / alone,
        "together_per_second": draws / together,
        "ratio": alone / together,
        "equal": _equal(drawn["one_by_one"], drawn["together"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/problem_draws.py")
    parser.add_argument("--draws", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks"))
    args = parser.parse_args(argv)
    if args.draws < 1 or args.repeats < 1:
        parser.error("--draws and --repeats must be >= 1")
    rows = []
    for name, spec in FAMILIES.items():
        load_before = os.getloadavg()[0]
        row = {"family": name, **measure(spec, args.draws, args.repeats)}
        row["load_before"], row["load_after"] = load_before, os.getloadavg()[0]
        print(json.dumps(row), flush=True)
        rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out / "problem_draws.json", json.dumps(rows, indent=2) + "\n")
    return 0 if all(row["equal"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

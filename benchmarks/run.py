"""Run the performance benchmarks (issue 6) and write ``results/bench/<benchmark>.json``.

    python benchmarks/run.py [NAME ...] [--quick] [--out DIR] [--device cpu|cuda] [--threads N]

``tox -e bench`` runs all of them. Each benchmark is also a script of its own
(``python benchmarks/closed_form_rounds.py --quick``). The files follow ``BENCH_SCHEMA``
(:data:`results_format.BENCH_SCHEMA`) and the report renders them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import authors_fednest
import closed_form_rounds
import closed_form_scale
import hvp_cost
import workload_round
from _common import Settings
from _common import add_arguments
from _common import run_benchmark

BENCHMARKS = {
    module.NAME: module
    for module in (closed_form_rounds, closed_form_scale, hvp_cost, workload_round, authors_fednest)
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.split("\n")[0])
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"benchmarks to run (default: all of {', '.join(BENCHMARKS)})",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {sorted(BENCHMARKS)}")
    settings = Settings.from_args(args)
    for name in args.names or list(BENCHMARKS):
        module = BENCHMARKS[name]
        path = run_benchmark(module.NAME, module.DESCRIPTION, module.measure, settings)
        print(f"wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

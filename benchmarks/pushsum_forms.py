"""The row forms of a replicated Push-Sum step (``testbed.decentralized.ledger``): a column of
``A`` at a time (``column_steps``, two buffers a step), an entry of ``A`` at a time
(``entry_steps``, the zero entries left out) and, for reference, a column at a time with a new
tensor a term (the form before 2026-11-29), on the shapes HGP's stochastic claims draw (issue 37:
Push-Sum was about a third of a stacked HGP run).

    python benchmarks/pushsum_forms.py [--replicas 16000] [--repeats 21] [--out results/benchmarks]

For each of 2-4 clients, 1-3 columns a replica and 2 or 4 Push-Sum steps (one graph of
``random_directed``, as the claims run), times the steps on client-major rows ``(n, replicas x
columns)`` each way, ``--repeats`` times alternately in one process on one thread, and keeps the
fastest (CPU time, which other jobs on the machine disturb less than wall time); the three must
give the same numbers bit for bit (and signs of zero), else the script exits 1. Records each
time, the totals and the load average before and after; writes ``<out>/pushsum_forms.json``.
``ledger.ROW_FORM_COLUMNS`` is chosen from these figures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from results_format import atomic_write
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.ledger import column_steps
from testbed.decentralized.ledger import entry_steps

FORMS = ("columns_allocating", "columns", "entries")


def columns_allocating(weights: torch.Tensor, rows: torch.Tensor) -> list[torch.Tensor]:
    """The column form as it was: a new tensor for every product and for the sum's start."""
    steps = []
    for A in weights:
        total = torch.zeros_like(rows)
        for k in range(len(A)):
            total += A[:, k, None] * rows[k]
        rows = total
        steps.append(rows)
    return steps


def _cpu_seconds(step: Callable[[], list[torch.Tensor]]) -> float:
    start = time.process_time()
    step()
    return time.process_time() - start


def measure(n: int, columns: int, steps: int, replicas: int, repeats: int) -> dict[str, Any]:
    """Fastest CPU time of each form on one shape, and whether they agree."""
    weights = torch.as_tensor(GraphSequence("random_directed", n, 5).mixing(0, steps))
    generator = torch.Generator().manual_seed(1000 * n + 10 * columns + steps)
    rows = torch.randn(n, replicas * columns, dtype=torch.float64, generator=generator)
    forms = {
        "columns_allocating": lambda: columns_allocating(weights, rows),
        "columns": lambda: column_steps(weights, rows),
        "entries": lambda: entry_steps(weights.tolist(), rows),
    }
    outputs = {name: form()[-1] for name, form in forms.items()}
    first = outputs["columns_allocating"]
    agree = all(
        torch.equal(out, first) and torch.equal(torch.signbit(out), torch.signbit(first))
        for out in outputs.values()
    )
    best = {name: float("inf") for name in forms}
    for _ in range(repeats):  # alternately (each form ran once above: warm)
        for name, form in forms.items():
            best[name] = min(best[name], _cpu_seconds(form))
    return {
        "clients": n,
        "columns": columns,
        "steps": steps,
        "nonzero_weights": int((weights != 0).sum()),
        "ms": {name: 1e3 * value for name, value in best.items()},
        "agree": agree,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=16000)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--out", type=Path, default=Path("results/benchmarks"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    rows = [
        measure(n, columns, steps, args.replicas, args.repeats)
        for n, columns, steps in itertools.product((2, 3, 4), (1, 2, 3), (2, 4))
    ]
    for row in rows:
        print(json.dumps(row), flush=True)
    totals = {name: sum(row["ms"][name] for row in rows) for name in FORMS}
    summary = {
        "benchmark": "pushsum_forms",
        "replicas": args.replicas,
        "repeats": args.repeats,
        "shapes": rows,
        "total_ms": totals,
        "total_ms_one_column": {
            name: sum(row["ms"][name] for row in rows if row["columns"] == 1) for name in FORMS
        },
        "total_ms_more_columns": {
            name: sum(row["ms"][name] for row in rows if row["columns"] > 1) for name in FORMS
        },
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out / "pushsum_forms.json", json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "shapes"}))
    return 0 if all(row["agree"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

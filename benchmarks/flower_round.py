"""Where a round of a local Flower deployment goes, and what it costs in each of Flower's ways to
run a SuperNode's ClientApp (issue 37, "A local Flower round in seconds").

    python benchmarks/flower_round.py [--quick] [--out DIR]

A SuperLink and 3 SuperNodes on 127.0.0.1 (:class:`testbed_app.flower.engines.LocalDeployment`)
run FBO-AggITD with N = 1 (2N + 3 = 5 rounds per outer iteration, every client in every round)
on ``QuadraticBilevel.random(3, 3, 4, kappa = 10, heterogeneity 0.3)`` (float64), the problem of
``tests/flower/test_engines.py``, for 2 outer iterations (1 with ``--quick``), three ways, one
after the other in one run:

- ``subprocess``: Flower 1.42's default, what ``testbed deploy --engine local`` did before:
  each SuperNode's ``flower-superexec`` starts a fresh ``flwr-clientapp`` process per message,
  and the ServerApp waits for replies with ``Grid.send_and_receive`` (3 s between pulls);
- ``process, send_and_receive``: the SuperNodes in ``--isolation process`` with one long-lived
  ClientApp process each (:mod:`testbed_app.flower.worker`), the server still in
  ``send_and_receive``;
- ``process``: the same with the server pulling every
  :data:`~testbed_app.flower.engines.PULL_INTERVAL` s
  (:func:`~testbed_app.flower.transport.exchange`): what ``testbed deploy --engine local`` does.

Per way: seconds per round (the mean, min and max wall time of a round's exchange, from the run's
``run.json``), per outer iteration (with its sync), and whether the iterates and the ledger's
counts are the batched simulation's (:func:`testbed_app.flower.compare.compare`). Where a round
goes, measured in the same run: a Python process's start, the imports of a ``flwr-clientapp``
process (Flower's runtime, then the testbed's ClientApp: torch and the testbed), the problem's
build in a fresh process, and a round's compute (the batched simulation's per round, server and
clients); in isolation ``process``, the mean seconds of a task in the long-lived ClientApp
processes (their log lines: pull the message and context, run, push the reply and the context).
The rest of a round is Flower's waiting: the SuperNode sleeps 3 s whenever a pull from the
SuperLink finds no message and polls every 0.5 s for its ClientApp's reply (both hard-coded in
Flower 1.42), ``flower-superexec`` polls for a task every 1 s, and the server's
``send_and_receive`` waits 3 s between pulls. Each process's start, imports and build are timed
one after the other, each the median of 3; the 1-minute load average is recorded before and
after each row: the ratios in one run are what compare.

Writes ``<out>/flower_round.json`` (``BENCH_SCHEMA``); its target: a ``process`` round at most 5 s
(the issue's, at load <= 2). The run folders and Flower's home live in temporary folders,
removed at the end; Ctrl-C or SIGTERM stops every process the deployment started (its context
manager, :func:`stop_on_signals`).
Not part of ``tox -e bench`` (Flower is an optional extra).
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import cli
from _common import load_average
from _common import target

NAME = "flower_round"
DESCRIPTION = (
    "A local Flower deployment (SuperLink, 3 SuperNodes on 127.0.0.1), FBO-AggITD N = 1: "
    "seconds per round with a ClientApp process per message (Flower's default) and with one "
    "long-lived ClientApp process per SuperNode, and where a round's time goes"
)
CLIENTS = 3
#: the issue's bound on a round of 3 local SuperNodes (at load <= 2)
ROUND_TARGET_S = 5.0
#: (row name, LocalDeployment isolation, the server's pull interval: None = its default)
WAYS = (
    ("subprocess", "subprocess", None),
    ("process, send_and_receive", "process", 0.0),
    ("process", "process", None),
)
# why 3: a process start and the imports vary by seconds on a loaded machine; the median of 3
REPEATS = 3


def spec(steps: int) -> Any:
    from problems import QuadraticBilevel
    from testbed_app.flower.spec import DeploySpec

    return DeploySpec(
        "flower-round",
        {"closed_form": QuadraticBilevel.random(CLIENTS, 3, 4, 10.0, 0.3, seed=1).spec()},
        {"name": "fbo-aggitd", "inner_steps": 1, "outer_step_size": 0.05, "participation": 3},
        steps=steps,
        seed=3,
    )


def _seconds(code: str) -> float:
    """Wall seconds of ``python -c code`` in a fresh process (as a ClientApp process starts)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def components(run_spec: Any) -> dict[str, float]:
    """Median seconds of a fresh process's start, its imports and the problem's build."""
    from testbed_app.flower.compare import simulate

    build = (
        "from testbed_app.flower.spec import DeploySpec; "
        f"DeploySpec.from_json({run_spec.to_json()!r}).build_problem()"
    )
    codes = {
        "start": "pass",
        "flower": "import flwr.supernode.runtime.run_clientapp",
        "testbed": "import flwr.supernode.runtime.run_clientapp, testbed_app.flower.apps",
        "build": f"import flwr.supernode.runtime.run_clientapp, testbed_app.flower.apps; {build}",
    }
    medians = {
        key: statistics.median(_seconds(code) for _ in range(REPEATS))
        for key, code in codes.items()
    }
    simulate(run_spec)  # warm-up
    _, per_iteration = simulate(run_spec)
    rounds = run_spec.build_algorithm().rounds_per_iteration()
    return {
        "process_start_s": medians["start"],
        "imports_flower_s": medians["flower"] - medians["start"],
        "imports_testbed_s": medians["testbed"] - medians["flower"],
        "problem_build_s": medians["build"] - medians["testbed"],
        "compute_per_round_s": per_iteration / rounds,
    }


def deployed(way: str, isolation: str, pull: float | None, run_spec: Any, tmp: Path) -> dict:
    from testbed_app.flower.compare import compare
    from testbed_app.flower.engines import LocalDeployment
    from testbed_app.flower.records import read_run

    load_before = load_average()
    results = tmp / way.replace(", ", "-")
    with LocalDeployment(CLIENTS, results / "logs", isolation=isolation) as deployment:
        if pull is not None:
            deployment.pull_interval = pull
        started = time.perf_counter()
        folder = deployment.run(run_spec, results)
        wall = time.perf_counter() - started
    record, iterates = read_run(folder)
    if record["status"] != "completed":
        raise RuntimeError(f"{way}: the run did not complete: {record['status']}")
    rows = record["iterations"]
    rounds = [row["seconds_per_round"] for row in rows]
    # isolation process: each task's seconds in the long-lived ClientApp processes (their logs)
    tasks = [
        float(line.rsplit(", ", 1)[1].split()[0])
        for log in sorted((results / "logs").glob("clientapp-*.log"))
        for line in log.read_text().splitlines()
        if line.startswith("task ") and line.endswith(" s")
    ]
    comparison = compare(run_spec, record, iterates)
    return {
        "way": way,
        "isolation": isolation,
        "iterations": len(rows),
        "rounds": sum(row["flower"]["exchanges"] for row in rows),
        "seconds_per_round": sum(row["seconds_rounds"] for row in rows)
        / sum(row["flower"]["exchanges"] for row in rows),
        "seconds_per_round_min": min(rounds),
        "seconds_per_round_max": max(rounds),
        "seconds_per_iteration": statistics.mean(row["seconds"] for row in rows),
        "seconds_run": wall,
        "tasks": len(tasks),
        "seconds_per_task": statistics.mean(tasks) if tasks else float("nan"),
        "same_numbers": bool(comparison["same_numbers"]),
        "same_counts": bool(comparison["same_counts"]),
        "worst_relative": float(comparison["worst_relative"]),
        "load_before": load_before,
        "load_after": load_average(),
    }


def measure(quick: bool, device_list: list[str]) -> tuple[list[dict[str, Any]], list[Any]]:
    del device_list
    os.environ["OMP_NUM_THREADS"] = "1"  # the deployment's processes, as this one
    run_spec = spec(1 if quick else 2)
    load_before = load_average()
    parts = components(run_spec)
    rows: list[dict[str, Any]] = [
        {
            "way": "where a round goes",
            **parts,
            "load_before": load_before,
            "load_after": load_average(),
        }
    ]
    print(", ".join(f"{key} {value:.3f}" for key, value in parts.items()), flush=True)
    with tempfile.TemporaryDirectory(prefix="flower-round-") as tmp:
        for way, isolation, pull in WAYS:
            rows.append(deployed(way, isolation, pull, run_spec, Path(tmp)))
            print(
                f"{way}: {rows[-1]['seconds_per_round']:.2f} s per round "
                f"(load {rows[-1]['load_before']:.1f} -> {rows[-1]['load_after']:.1f})",
                flush=True,
            )
    before, after = rows[1]["seconds_per_round"], rows[-1]["seconds_per_round"]
    rows[-1]["ratio_to_subprocess"] = before / after
    return rows, [target("process: seconds per round", after, ROUND_TARGET_S, "at_most")]


def stop_on_signals() -> None:
    """Ctrl-C and SIGTERM raise ``KeyboardInterrupt``, so the deployment's context manager stops
    every process it started; also where the shell that started this one ignored SIGINT (a
    background job)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)


if __name__ == "__main__":
    stop_on_signals()
    raise SystemExit(cli(NAME, DESCRIPTION, measure))

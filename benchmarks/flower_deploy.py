"""What deployment costs: seconds per outer iteration and per communication round of FBO-AggITD on
Flower's simulation engine and on a local deployment (a SuperLink and one SuperNode process per
client), against the batched simulation, for M = 10 and 100 clients, on a closed-form problem and
on the digits MLP (issue 27).

    unshare -n sh -c 'ip link set lo up && python benchmarks/flower_deploy.py [--quick]'

The algorithm is the same everywhere: FBO-AggITD with N = 2 (2N + 3 = 7 rounds per outer
iteration), 10 clients per iteration (all of M = 10; 10 of M = 100, drawn by the server's seeded
generator: the papers' setting), on

- ``QuadraticBilevel.random(M, 10, 10, kappa = 10, heterogeneity 0.3)`` (float64), and
- the digits hyper-representation MLP of ``configs/aggitd_table2_iid_tau1.toml`` split over M
  clients (float32).

Each case is run three ways, one after the other: the batched simulation (``run_algorithm``),
Flower's simulation engine (``flwr run`` against a SuperLink in simulation mode, one CPU per Ray
actor) and a local deployment; every Flower run is checked against the batched iterates and the
ledger's counts (:func:`testbed_app.flower.compare.compare`). Seconds per iteration are the
ServerApp's wall time of an outer iteration (its rounds and its end-of-iteration sync); seconds
per round the mean wall time of one ``Grid.send_and_receive`` of a round's work. Ray's and the
processes' start are outside the figures. Each row records the 1-minute load average before and
after it.

A local deployment is :class:`~testbed_app.flower.engines.LocalDeployment`'s default: each
SuperNode in isolation ``process`` with one long-lived ClientApp process (the figures of
2026-11-26 in docs/flower.md were measured before, with a ClientApp process per message, Flower
1.42's ``subprocess`` isolation; ``benchmarks/flower_round.py`` compares the two). With M = 100,
the 100 SuperNode processes need memory: the case runs only where ``MemAvailable`` covers them
(:func:`deployment_fits`), else its row says what it would need.

Writes ``<out>/flower_deploy.json`` (``BENCH_SCHEMA``; no targets: the issue asks for the cost,
not a bound). Not part of ``tox -e bench`` (Flower is an optional extra; a full run takes about
an hour on 2 cores).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import cli
from _common import load_average

NAME = "flower_deploy"
DESCRIPTION = (
    "FBO-AggITD (7 rounds per iteration, 10 clients per iteration) on Flower: seconds "
    "per outer iteration and per round on the simulation engine and a local "
    "deployment, against the batched simulation; M = 10, 100; quadratic and digits MLP"
)
CLIENTS = (10, 100)
PER_ROUND = 10
# Memory a SuperNode process and a running ClientApp process hold, rounded up from what this
# machine measured (flwr 1.42, torch 2.13, 2026-11-26: a SuperNode 132 MB RSS, a ClientApp's
# imports 308 MB before its problem and work): what deployment_fits compares with MemAvailable,
# with a margin for the other processes of a shared machine.
SUPERNODE_MB = 150
CLIENTAPP_MB = 450
MARGIN_MB = 3000
# why 5: the batched iteration takes milliseconds, so its mean over 5 (after a warm-up run) is
# steady; the Flower engines time 2 iterations (simulation) and 1 (a local deployment's
# iteration takes minutes here)
BATCHED_ITERATIONS = 5


def specs(n_clients: int, quick: bool) -> dict[str, Any]:
    """The closed-form and the digits spec for ``n_clients`` clients."""
    from problems import QuadraticBilevel
    from testbed_app.flower.spec import DeploySpec
    from testbed_app.flower.spec import load_spec

    algorithm = {
        "name": "fbo-aggitd",
        "inner_steps": 2,
        "local_steps": 1,
        "outer_step_size": 0.05,
        "participation": PER_ROUND,
    }
    dim = 4 if quick else 10
    quadratic = DeploySpec(
        f"bench-quadratic-m{n_clients}",
        {"closed_form": QuadraticBilevel.random(n_clients, dim, dim, 10.0, 0.3, seed=0).spec()},
        algorithm,
        steps=2,
    )
    config = Path(__file__).resolve().parents[1] / "configs" / "aggitd_table2_iid_tau1.toml"
    digits = load_spec(
        config,
        steps=2,
        overrides={
            "split.n_clients": n_clients,
            "algorithm.inner_steps": 2,
            "algorithm.participation": PER_ROUND,
        },
    )
    digits = dataclasses.replace(digits, name=f"bench-digits-m{n_clients}")
    return {"quadratic": quadratic, "digits MLP": digits}


def deployment_fits(n_clients: int) -> tuple[bool, str]:
    """Whether ``n_clients`` SuperNodes and their long-lived ClientApp processes (one per
    SuperNode, all resident for the whole run) fit in the memory available now, and what they
    need."""
    need = n_clients * (SUPERNODE_MB + CLIENTAPP_MB) + MARGIN_MB
    available = 0
    with open("/proc/meminfo", encoding="utf-8") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) // 1024
    return available >= need, f"needs about {need} MB, {available} MB available"


def _row(
    problem: str,
    spec: Any,
    engine: str,
    seconds: list[float],
    per_round: float,
    batched: float,
    load_before: float,
    comparison: dict[str, Any] | None,
    note: str = "",
) -> dict[str, Any]:
    per_iteration = statistics.mean(seconds) if seconds else float("nan")
    return {
        "problem": problem,
        "clients": spec.n_clients,
        "per_round": min(spec.n_clients, PER_ROUND),
        "engine": engine,
        "iterations": len(seconds),
        "seconds_per_iteration": per_iteration,
        "seconds_per_round": per_round,
        "ratio_to_batched": per_iteration / batched if seconds else float("nan"),
        "same_numbers": bool(comparison and comparison["same_numbers"]),
        "same_counts": bool(comparison and comparison["same_counts"]),
        "load_before": load_before,
        "load_after": load_average(),
        "note": note,
    }


def _flower_rows(
    problem: str, spec: Any, engine: str, folder: Path, batched: float, load_before: float
) -> dict[str, Any]:
    from testbed_app.flower.compare import compare
    from testbed_app.flower.records import read_run

    record, iterates = read_run(folder)
    rows = record["iterations"]
    seconds = [row["seconds"] for row in rows]
    rounds = sum(row["flower"]["exchanges"] for row in rows)
    per_round = sum(row["seconds_rounds"] for row in rows) / max(rounds, 1)
    comparison = compare(spec, record, iterates) if record["status"] == "completed" else None
    return _row(
        problem,
        spec,
        engine,
        seconds,
        per_round,
        batched,
        load_before,
        comparison,
        "" if record["status"] == "completed" else record["status"],
    )


def measure(quick: bool, device_list: list[str]) -> tuple[list[dict[str, Any]], list[Any]]:
    del device_list
    from testbed_app.flower.compare import simulate
    from testbed_app.flower.engines import LocalDeployment
    from testbed_app.flower.engines import run_on_simulation
    from testbed_app.flower.records import run_folder

    os.environ["OMP_NUM_THREADS"] = "1"  # the clients' processes, as this one (1 thread)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flower-bench-") as tmp:
        results = Path(tmp)
        for n_clients in CLIENTS[:1] if quick else CLIENTS:
            for problem, spec in specs(n_clients, quick).items():
                load_before = load_average()
                simulate(spec)  # warm-up: the first calls fill caches (the MLP's feature cache)
                _, batched = simulate(dataclasses.replace(spec, steps=BATCHED_ITERATIONS))
                rounds = spec.build_algorithm().rounds_per_iteration()
                rows.append(
                    _row(
                        problem,
                        spec,
                        "batched simulation",
                        [batched],
                        batched / rounds,
                        batched,
                        load_before,
                        {"same_numbers": True, "same_counts": True},
                    )
                )
                print(f"{problem} M={n_clients}: batched {batched:.4f} s/iteration", flush=True)
                load_before = load_average()
                folder = run_on_simulation(spec, results, cpus=os.cpu_count())
                rows.append(
                    _flower_rows(problem, spec, "simulation engine", folder, batched, load_before)
                )
                print(f"  simulation engine {rows[-1]['seconds_per_iteration']:.2f} s", flush=True)
                fits, need = deployment_fits(n_clients)
                load_before = load_average()
                deployed = spec if quick else _one_iteration(spec)
                if not fits:
                    rows.append(
                        _row(
                            problem,
                            deployed,
                            "local deployment",
                            [],
                            float("nan"),
                            batched,
                            load_before,
                            None,
                            f"not run: {need}",
                        )
                    )
                    continue
                logs = run_folder(results, spec.name, "deployment") / "logs"
                with LocalDeployment(spec.n_clients, logs) as deployment:
                    started = time.perf_counter()
                    folder = deployment.run(deployed, results)
                    print(f"  local deployment {time.perf_counter() - started:.0f} s", flush=True)
                rows.append(
                    _flower_rows(
                        problem, deployed, "local deployment", folder, batched, load_before
                    )
                )
    return rows, []


def _one_iteration(spec: Any) -> Any:
    """A local deployment's round takes tens of seconds here: one outer iteration is timed."""
    return dataclasses.replace(spec, steps=1)


if __name__ == "__main__":
    raise SystemExit(cli(NAME, DESCRIPTION, measure))

"""``testbed deploy CONFIG``: run a server-based algorithm on Flower and compare it with the
batched simulation.

It reads the config (:func:`~testbed_app.flower.spec.load_spec`), runs it on the chosen engine
(``--engine simulation``: Flower's simulation engine, clients as Ray actors; ``--engine local``:
a SuperLink and one SuperNode process per client on this machine), then reruns it in the batched
simulation and prints, per outer iteration, the rounds (ledger, what Flower carried, the paper's
formula), the floats each way, the seconds, and whether the iterates agree. Files:
``<results>/deploy/<name>/<engine>/`` (``run.json``, ``iterates.pt``, ``comparison.json``,
``logs/``). Exit status: 0 when the run completed with the simulation's numbers and counts, 1 when
it did not (a lost client, a difference), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from testbed_app.flower import require_flower

ENGINES = {"simulation": "simulation", "local": "deployment"}


def add_arguments(deploy: argparse.ArgumentParser) -> None:
    """The options of ``testbed deploy`` on its subparser (made by the command line)."""
    deploy.add_argument("config", help="a closed-form deploy config (configs/deploy/*.toml) or a "
                                       "server-based experiment config (configs/*.toml)")
    deploy.add_argument("--engine", choices=tuple(ENGINES), default="simulation",
                        help="simulation: Flower's simulation engine, clients as Ray actors "
                             "(default); local: a SuperLink and one SuperNode process per "
                             "client on 127.0.0.1")
    deploy.add_argument("--steps", type=_positive_int, metavar="N",
                        help="override [run] steps (outer iterations)")
    deploy.add_argument("--device", choices=("cpu", "cuda"),
                        help="override [run] device (digits workloads)")
    deploy.add_argument("--results", default="results", help="results directory")
    deploy.add_argument("--fresh", action="store_true",
                        help="replace an earlier run of this config on this engine")
    deploy.add_argument("--cpus-per-client", type=float, default=1.0, metavar="C",
                        help="simulation engine: CPUs of each client's Ray actor (default 1)")
    deploy.add_argument("--gpus-per-client", type=float, default=0.0, metavar="G",
                        help="simulation engine: GPUs of each client's Ray actor (1: one GPU "
                             "per actor; default 0)")
    deploy.add_argument("--timeout", type=float, metavar="S",
                        help="seconds the server waits for a round's replies (default: as long "
                             "as Flower keeps the messages; a stopped SuperNode is reported "
                             "once Flower declares it unavailable)")
    deploy.add_argument("--no-compare", action="store_true",
                        help="skip the rerun in the batched simulation")
    deploy.set_defaults(func=run_command)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def run_command(args: argparse.Namespace) -> int:
    from results_format import atomic_write
    from testbed_app.flower.records import read_run, run_folder
    from testbed_app.flower.spec import load_spec

    require_flower()  # one line with the install command when Flower is absent (exit 2)
    spec = load_spec(args.config, steps=args.steps, device=args.device)
    if args.cpus_per_client <= 0 or args.gpus_per_client < 0:
        raise ValueError("--cpus-per-client must be > 0 and --gpus-per-client >= 0")
    if args.gpus_per_client > 0:
        import torch

        if not torch.cuda.is_available():
            raise ValueError("--gpus-per-client: CUDA is not available on this machine")
    if args.engine == "simulation" and spec.device == "cuda" and args.gpus_per_client == 0:
        raise ValueError("device cuda on the simulation engine: give each client's Ray actor "
                         "a GPU (--gpus-per-client 1, or a fraction to share one)")
    engine = ENGINES[args.engine]
    results = Path(args.results)
    folder = run_folder(results, spec.name, engine)
    if folder.exists():
        if not args.fresh:
            raise ValueError(f"{folder}: holds an earlier run of {spec.name} on this engine; "
                             "--fresh replaces it (move it aside to keep it)")
        shutil.rmtree(folder)
    from testbed_app.flower.engines import run_on_local_deployment, run_on_simulation
    from testbed_app.flower.transport import ClientLost

    print(f"{spec.name}: {spec.algorithm['name']} on Flower ({args.engine}), "
          f"{spec.n_clients} clients, {spec.steps} outer iterations")
    try:
        if engine == "simulation":
            run_on_simulation(spec, results, cpus_per_client=args.cpus_per_client,
                              gpus_per_client=args.gpus_per_client, timeout=args.timeout)
        else:
            run_on_local_deployment(spec, results, timeout=args.timeout)
    except ClientLost:
        pass  # recorded in run.json, reported below
    except RuntimeError as error:
        if not (folder / "run.json").exists():
            raise
        print(f"the run stopped: {error}")
    record, iterates = read_run(folder)
    print(summary(record))
    if record["status"] != "completed":
        print(f"status: {record['status']}\nresults in {folder}")
        return 1
    if args.no_compare:
        print(f"results in {folder}")
        return 0 if all(r["counts_agree"] for r in record["iterations"]) else 1
    from testbed_app.flower.compare import compare

    comparison = compare(spec, record, iterates)
    atomic_write(folder / "comparison.json", json.dumps(comparison, indent=1) + "\n")
    print(describe(comparison))
    print(f"results in {folder}")
    return 0 if comparison["same_numbers"] and comparison["same_counts"] else 1


def summary(record: dict[str, Any]) -> str:
    """The per-iteration table of a run record."""
    formula = record.get("rounds_formula") or "-"
    lines = [f"{'iteration':>9}  {'rounds: ledger / Flower / ' + formula:>34}  "
             f"{'floats up (ledger = Flower)':>28}  {'floats down':>12}  {'seconds':>8}  "
             f"{'s / round':>9}  counts"]
    for row in record["iterations"]:
        ledger, flower = row["ledger"], row["flower"]
        rounds = f"{ledger['rounds']} / {flower['exchanges']} / {row['formula']}"
        ups = f"{ledger['floats_up']} = {flower['floats_up']}" \
            if ledger["floats_up"] == flower["floats_up"] \
            else f"{ledger['floats_up']} != {flower['floats_up']}"
        downs = str(flower["floats_down"]) if ledger["floats_down"] == flower["floats_down"] \
            else f"{ledger['floats_down']} != {flower['floats_down']}"
        state = "agree" if row["counts_agree"] and row["formula_agrees"] else "DIFFER"
        lines.append(f"{row['iteration']:>9}  {rounds:>34}  {ups:>28}  {downs:>12}  "
                     f"{row['seconds']:>8.3f}  {row['seconds_per_round']:>9.4f}  {state}")
    if record.get("lost"):
        lost = record["lost"]
        lines.append(f"lost: client {lost['client']} (SuperNode {lost['node']}) in "
                     f"{lost['round']}: {lost['reason']}; {lost['iterations_completed']} "
                     "iterations completed and kept")
    return "\n".join(lines)


def describe(comparison: dict[str, Any]) -> str:
    seconds = comparison["seconds_per_iteration"]
    ratio = seconds["flower"] / seconds["batched"] if seconds["batched"] else float("inf")
    verdict = "the same" if comparison["same_numbers"] else "DIFFERENT"
    return (f"iterates against the batched simulation: {verdict} (largest relative difference "
            f"{comparison['worst_relative']:.2e}, tolerance {comparison['tolerance']:.0e} in "
            f"{comparison['dtype']}); counts: "
            f"{'the ledger and the formula' if comparison['same_counts'] else 'DIFFERENT'}\n"
            f"seconds per outer iteration: Flower {seconds['flower']:.3f}, batched "
            f"{seconds['batched']:.4f} ({ratio:.0f}x)")


__all__ = ["add_arguments", "run_command"]

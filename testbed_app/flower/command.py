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

import torch

from results_format import atomic_write
from results_format.paths import inside
from results_format.paths import output_folder
from testbed_app.flower import ENGINES
from testbed_app.flower import require_flower
from testbed_app.flower.compare import compare
from testbed_app.flower.engines import run_on_local_deployment
from testbed_app.flower.engines import run_on_simulation
from testbed_app.flower.records import folder_owner_problem
from testbed_app.flower.records import read_run
from testbed_app.flower.records import record_source
from testbed_app.flower.records import run_folder
from testbed_app.flower.spec import load_spec
from testbed_app.flower.transport import ClientLost


def deploy_command(args: argparse.Namespace) -> int:
    """``testbed deploy`` (its options: :mod:`testbed_app.cli`); the exit status above."""
    # every refusal before any work (and before asking for Flower): the config, the options,
    # the run folder's owner
    spec = load_spec(args.config, steps=args.steps, device=args.device)
    if args.cpus_per_client <= 0 or args.gpus_per_client < 0:
        raise ValueError("--cpus-per-client must be > 0 and --gpus-per-client >= 0")
    if args.gpus_per_client > 0:
        if not torch.cuda.is_available():
            raise ValueError("--gpus-per-client: CUDA is not available on this machine")
    if args.engine == "simulation" and spec.device == "cuda" and args.gpus_per_client == 0:
        raise ValueError(
            "device cuda on the simulation engine: give each client's Ray actor "
            "a GPU (--gpus-per-client 1, or a fraction to share one)"
        )
    engine = ENGINES[args.engine]
    results = Path(args.results)
    folder = run_folder(output_folder(results, "--results"), spec.name, engine)
    if folder.exists() or folder.is_symlink():
        if not args.fresh:
            raise ValueError(
                f"{folder}: holds an earlier run of {spec.name} on this engine; "
                "--fresh replaces it (move it aside to keep it)"
            )
        if folder.is_symlink() or not folder.is_dir():
            raise ValueError(
                f"--fresh: {folder} is not a run folder (a file or a link); move "
                "it away. Nothing was deleted"
            )
        problem = folder_owner_problem(folder, spec, args.config)
        if problem is not None:
            raise ValueError(problem)
        # inside the results folder once links are followed (a link planted at deploy/ is not)
        inside(results, folder.parent.relative_to(results).as_posix(), "--fresh")
    require_flower()  # one line with the install command when Flower is absent (exit 2)
    if folder.exists():
        shutil.rmtree(folder)
    record_source(folder, args.config)
    print(
        f"{spec.name}: {spec.algorithm['name']} on Flower ({args.engine}), "
        f"{spec.n_clients} clients, {spec.steps} outer iterations"
    )
    try:
        if engine == "simulation":
            run_on_simulation(
                spec,
                results,
                cpus_per_client=args.cpus_per_client,
                gpus_per_client=args.gpus_per_client,
                timeout=args.timeout,
            )
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
    comparison = compare(spec, record, iterates)
    atomic_write(folder / "comparison.json", json.dumps(comparison, indent=1) + "\n")
    print(describe(comparison))
    print(f"results in {folder}")
    return 0 if comparison["same_numbers"] and comparison["same_counts"] else 1


def summary(record: dict[str, Any]) -> str:
    """The per-iteration table of a run record."""
    formula = record.get("rounds_formula") or "-"
    lines = [
        f"{'iteration':>9}  {'rounds: ledger / Flower / ' + formula:>34}  "
        f"{'floats up (ledger = Flower)':>28}  {'floats down':>12}  {'seconds':>8}  "
        f"{'s / round':>9}  counts"
    ]
    for row in record["iterations"]:
        ledger, flower = row["ledger"], row["flower"]
        rounds = f"{ledger['rounds']} / {flower['exchanges']} / {row['formula']}"
        ups = (
            f"{ledger['floats_up']} = {flower['floats_up']}"
            if ledger["floats_up"] == flower["floats_up"]
            else f"{ledger['floats_up']} != {flower['floats_up']}"
        )
        downs = (
            str(flower["floats_down"])
            if ledger["floats_down"] == flower["floats_down"]
            else f"{ledger['floats_down']} != {flower['floats_down']}"
        )
        state = "agree" if row["counts_agree"] and row["formula_agrees"] else "DIFFER"
        lines.append(
            f"{row['iteration']:>9}  {rounds:>34}  {ups:>28}  {downs:>12}  "
            f"{row['seconds']:>8.3f}  {row['seconds_per_round']:>9.4f}  {state}"
        )
    if record.get("lost"):
        lost = record["lost"]
        lines.append(
            f"lost: client {lost['client']} (SuperNode {lost['node']}) in "
            f"{lost['round']}: {lost['reason']}; {lost['iterations_completed']} "
            "iterations completed and kept"
        )
    return "\n".join(lines)


def describe(comparison: dict[str, Any]) -> str:
    seconds = comparison["seconds_per_iteration"]
    ratio = seconds["flower"] / seconds["batched"] if seconds["batched"] else float("inf")
    verdict = "the same" if comparison["same_numbers"] else "DIFFERENT"
    return (
        f"iterates against the batched simulation: {verdict} (largest relative difference "
        f"{comparison['worst_relative']:.2e}, tolerance {comparison['tolerance']:.0e} in "
        f"{comparison['dtype']}); counts: "
        f"{'the ledger and the formula' if comparison['same_counts'] else 'DIFFERENT'}\n"
        f"seconds per outer iteration: Flower {seconds['flower']:.3f}, batched "
        f"{seconds['batched']:.4f} ({ratio:.0f}x)"
    )


__all__ = ["deploy_command", "describe", "summary"]

"""``testbed run``: experiment configs (TOML) run to their last step, resuming; in this process,
one run after another, or through the run's executor (``--jobs N``, ``--executor ray``), each
config a chain of segments between checkpoints (:mod:`testbed_app.experiments.segments`)."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testbed.progress import Progress
from testbed_app.command_inputs import executor_for
from testbed_app.command_inputs import results_folder
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.config import load_config
from testbed_app.experiments.errors import DeprecatedName
from testbed_app.experiments.run_folders import check_run_folders
from testbed_app.experiments.segments import SegmentResult
from testbed_app.experiments.segments import iter_experiments
from testbed_app.experiments.segments import run_experiments
from theory_checks.settings import RunSettings


def config_paths(arguments: Sequence[str]) -> list[Path]:
    """The config files ``testbed run`` names: each file, and each folder's ``*.toml``
    (a folder without any is an error)."""
    paths = []
    for arg in map(Path, arguments):
        if arg.is_dir():
            found = sorted(arg.glob("*.toml"))
            if not found:
                raise FileNotFoundError(f"{arg}: a folder without config files (*.toml)")
            paths += found
        else:
            paths.append(arg)
    return paths


def run_command(args: argparse.Namespace, settings: RunSettings) -> int:
    """``testbed run``: run experiment configs (resuming); 1 when a run diverged, else 0."""
    if args.rounds is not None:
        if args.steps is not None:
            raise ValueError("--rounds is the old name of --steps; give --steps alone")
        warnings.warn(
            "--rounds is the old name of --steps (outer iterations; a round is a "
            "communication round); use --steps",
            DeprecatedName,
            stacklevel=1,
        )
    overrides = {
        "run.device": args.device,
        "run.steps": args.steps if args.steps is not None else args.rounds,
        "run.tf32": True if args.tf32 else None,
    }
    # every error before any run
    configs = [load_config(path, overrides) for path in config_paths(args.config)]
    if args.fresh and args.recover:
        raise ValueError(
            "--fresh and --recover exclude each other: --fresh deletes the run "
            "folder, --recover keeps it and resumes from its last good state"
        )
    # one folder per config, each its own config's: refused before any work, nothing deleted
    check_run_folders(configs, results_folder(args.results, "--results"), args.fresh)
    if (
        settings.executor.name == "local" and settings.executor.jobs == 1
    ):  # in this process: one segment per run
        summaries: Iterator[dict[str, Any]] = (
            summary
            for _, summary in iter_experiments(
                configs,
                Path(args.results),
                fresh=args.fresh,
                recover=args.recover,
                progress=not args.quiet,
            )
        )
    else:
        summaries = iter(_run_on_executor(configs, args, settings))
    status = 0
    for summary in summaries:
        last = summary["last_row"] or {}
        state = "" if summary["status"] == "completed" else f" ({summary['status']})"
        print(
            f"{summary['name']}: {summary['steps']} steps, "
            f"{int(last.get('rounds', 0))} communication rounds, results in "
            f"{summary['run_dir']}{state}"
        )
        if summary["replication"]:
            print(f"  replication rows: {summary['replication']}")
        if summary["status"].startswith("diverged"):
            status = 1
    return status


def _run_on_executor(
    configs: list[ExperimentConfig], args: argparse.Namespace, settings: RunSettings
) -> list[dict[str, Any]]:
    """``testbed run`` through ``--jobs N`` or ``--executor ray``: each config a chain of
    segments between checkpoints, the configs side by side, one progress bar over all steps
    (:mod:`testbed_app.experiments.segments`)."""
    executor = executor_for(settings)  # a bad option is reported before the bar starts
    bar = Progress(
        total=sum(int(c.run["steps"]) for c in configs),
        desc="run: outer steps",
        unit="step",
        enabled=not args.quiet,
    )
    seen: dict[int, int] = {}

    def on_segment(index: int, result: SegmentResult) -> None:
        summary = result.summary
        for message in summary["notes"]:
            print(f"{summary['name']}: {message}", file=sys.stderr)
        before = seen.get(index, int(summary["resumed_from"]))
        if index not in seen:
            bar.update(before)  # steps done before this run (resumed)
        seen[index] = int(summary["steps"])
        bar.update(max(seen[index] - before, 0))
        bar.set_postfix_str(f"{summary['name']}: {summary['status']}")

    try:
        return run_experiments(
            configs,
            Path(args.results),
            executor.run,
            fresh=args.fresh,
            recover=args.recover,
            segment_steps=args.segment_steps,
            on_segment=on_segment,
        )
    finally:
        bar.close()


__all__ = ["config_paths", "run_command"]

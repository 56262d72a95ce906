"""What each ``testbed`` command does, once :mod:`testbed_app.cli` has parsed its arguments.

The command line (:mod:`testbed_app.cli`) builds the parser and turns errors into one line; it
imports this module only after parsing, so that ``testbed --help`` and a bad option answer
without importing torch. :func:`execute` makes the run's settings from the options
(:func:`testbed_app.run_settings.settings_of`), puts them in force
(:func:`theory_checks.settings.use_settings`: dtype, device, precision policy, threads,
plugins), then runs the command's handler in :data:`HANDLERS`, each a function ``(args,
settings) -> exit status``; the commands of their own modules: ``list``
(:mod:`testbed_app.list_command`), ``check`` (:mod:`testbed_app.check_command`), ``run``
(:mod:`testbed_app.run_command`), ``mutate``, ``audit``, ``deploy``, ``report``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reports.build import build_report
from results_format.layout import CALIBRATION
from results_format.layout import REPORT
from testbed.progress import Progress
from testbed_app import audit
from testbed_app import mutate
from testbed_app import regression
from testbed_app import verify as verifying
from testbed_app.check_command import check_command
from testbed_app.command_inputs import executor_for
from testbed_app.command_inputs import named_claims
from testbed_app.command_inputs import results_folder
from testbed_app.flower import command as deploy
from testbed_app.list_command import list_command
from testbed_app.report_command import report_command
from testbed_app.run_command import run_command
from testbed_app.run_settings import settings_of
from theory_checks.calibration import calibrate
from theory_checks.calibration import check_seeds
from theory_checks.calibration import format_table
from theory_checks.settings import RunSettings
from theory_checks.settings import use_plugins
from theory_checks.settings import use_settings

#: A command's handler: the parsed options and the run's settings in, the exit status out.
Handler = Callable[[argparse.Namespace, RunSettings], int]


def execute(args: argparse.Namespace) -> int:
    """Run the parsed command ``args.command``; its exit status.

    The settings are made from the options and put in force before the command starts, for
    every command that computes (all but ``list`` and ``report``, which set ``computes=False``
    and only read: ``list`` loads the plugins to list them, and leaves torch as it is)."""
    settings = settings_of(args)
    if getattr(args, "computes", True):
        use_settings(settings)
    else:
        use_plugins(settings)
    return int(HANDLERS[args.command](args, settings))


def without_settings(command: Callable[[argparse.Namespace], int]) -> Handler:
    """The handler of a command that reads nothing of the settings beyond what
    :func:`execute` put in force (``list``, ``report``, ``audit``: a results folder's own
    profile; ``deploy``: its config's device)."""

    def handler(args: argparse.Namespace, _settings: RunSettings) -> int:
        return command(args)

    return handler


def calibrate_command(args: argparse.Namespace, settings: RunSettings) -> int:
    """``testbed calibrate``: observed false-failure rates of the statistical claims over
    ``--seeds``; 0 when each is consistent with its stated rate, else 1."""
    claims = named_claims(args.claim)
    deterministic = [c.id for c in claims if not c.statistical]
    if args.claim and deterministic:
        raise ValueError(
            f"deterministic claim(s) have nothing to calibrate: {', '.join(deterministic)}"
        )
    statistical = [c for c in claims if c.statistical]
    check_seeds(args.seeds)  # at most calibration.MAX_SEEDS, named
    executor = executor_for(settings)  # before the bar
    bar = Progress(
        total=len(statistical) * args.seeds, desc="calibrate", unit="run", enabled=not args.quiet
    )

    def progress(message: str) -> None:
        bar.set_postfix_str(f"last done: {message}", refresh=False)
        bar.update(1)

    summaries = calibrate(
        statistical,
        args.seeds,
        settings.profile,
        results_folder(args.results, "--results"),
        progress,
        execute=executor.run,
    )
    bar.close()
    print(format_table(summaries))
    print(f"\nresults in {Path(args.results) / CALIBRATION}")
    return 0 if all(s.consistent for s in summaries) else 1


def regress_command(args: argparse.Namespace, settings: RunSettings) -> int:
    """``testbed regress``: compare entries with the baseline (or ``--against`` another); 0
    when none is worse, else 1 (also when the baseline does not cover every measured metric:
    :func:`testbed_app.regression.not_covered`)."""
    regression.check_options(args.estimator, args.against)  # before the bar starts
    if args.out and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a folder; name the JSON file to write")
    executor = executor_for(settings)  # before the bar
    bars: list[Any] = []

    def progress(message: str) -> None:
        # the bar starts with the first grid cell measured: a missing baseline (read before
        # any measurement) is an error line of its own, with no bar before it
        if not bars:
            bars.append(Progress(desc="regress", unit="grid cell", enabled=not args.quiet))
        bars[0].set_postfix_str(f"last done: {message}", refresh=False)
        bars[0].update(1)

    baseline = Path(args.baseline) if args.baseline else regression.BASELINE
    try:
        passed, table = regression.run(
            args.estimator,
            args.against,
            args.update_baseline,
            baseline,
            Path(args.out) if args.out else None,
            progress,
            execute=executor.run,
        )
    finally:
        for bar in bars:
            bar.close()  # an error line after it starts on a line of its own
    print(table)
    return 0 if passed else 1


def verify_command(args: argparse.Namespace, settings: RunSettings) -> int:
    """``testbed verify``: one estimator's declared claims, then ``--against`` and the report;
    1 when a declared claim does not hold or it is worse, else 0."""
    info = verifying.resolve_target(args.target)
    results = results_folder(
        args.results or str(Path("results") / "verify" / info.name), "--results"
    )
    info, summaries = verifying.verify(
        info, results, settings.profile, args.claim, resume=args.resume, progress=not args.quiet
    )
    print(f"\n{info.name} ({info.paper}; {info.reference})")
    print(verifying.verdict_table(summaries))
    status = 0
    if args.against:
        passed, table = regression.run(info.name, args.against)
        print(f"\nagainst {args.against}:\n{table}")
        status = 0 if passed else 1
    if not args.no_report:
        index = build_report(results, results / REPORT)
        print(f"\nreport: {index}")
    failed = verifying.failures(summaries)
    if failed:
        print(f"{len(failed)} declared claim(s) not holding: " + "; ".join(failed), file=sys.stderr)
        return 1
    return status


#: The handler of each command of :data:`testbed_app.cli.COMMANDS`.
HANDLERS: dict[str, Handler] = {
    "list": without_settings(list_command),
    "check": check_command,
    "calibrate": calibrate_command,
    "run": run_command,
    "report": without_settings(report_command),
    "regress": regress_command,
    "verify": verify_command,
    "mutate": mutate.mutate_command,
    "audit": without_settings(audit.audit_command),
    "deploy": without_settings(deploy.deploy_command),
}

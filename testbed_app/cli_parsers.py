"""The options of each ``testbed`` command: :func:`add_commands` adds every command of
:data:`COMMANDS` to the command line's subparsers, one function per command, with the options
several commands share (the profile, the claims, the device, the executor) said once."""

from __future__ import annotations

import argparse
from typing import Any

from results_format.layout import REPORT
from testbed.defaults import TASK_RETRIES
from testbed_app.cli_types import MAX_CPUS
from testbed_app.cli_types import MAX_GPUS
from testbed_app.cli_types import MAX_JOBS
from testbed_app.cli_types import MAX_RETRIES
from testbed_app.cli_types import MAX_THREADS
from testbed_app.cli_types import MAX_TIMEOUT
from testbed_app.cli_types import identifier
from testbed_app.cli_types import int_in
from testbed_app.cli_types import non_negative_int
from testbed_app.cli_types import number_in
from testbed_app.cli_types import positive_int
from testbed_app.flower import ENGINES

#: Every command with its one line of help (``testbed --help`` lists them in this order).
COMMANDS = {
    "list": "registered problems, estimators and claims",
    "check": "run the claim checks, write results/, print each claim's verdict",
    "calibrate": "observed false-failure rates of the statistical claims over seeds",
    "run": "run experiment configs (TOML), resuming by default",
    "report": "build the empirical-vs-theory report from results/",
    "regress": "compare estimators with the committed regression baseline",
    "verify": "check one estimator (built in, a plugin's, or module:object) against its claims",
    "mutate": "run realistic bugs (mutants) against the claims: the checks' power",
    "audit": "re-derive a results folder's verdicts, replay and re-measure its cases",
    "deploy": "run a server algorithm on Flower (simulation engine, or SuperLink and "
    "SuperNodes) against the simulation",
}


class DefaultsShown(argparse.HelpFormatter):
    """Each option's help ends with its default (``(default: results)``), unless the help
    already names it or there is none to show (a flag, an option without a default)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or "default" in text
        ):
            return text
        return f"{text} (default: %(default)s)"


def command_parser(sub: Any, name: str) -> argparse.ArgumentParser:
    """The subcommand ``name`` with its line of :data:`COMMANDS` as its description."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, description=COMMANDS[name], formatter_class=DefaultsShown
    )
    return parser


def add_claim_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--claim ID [ID ...]``, also repeatable (``--claim A --claim B``)."""
    parser.add_argument(
        "--claim",
        action="extend",
        nargs="+",
        metavar="ID",
        type=identifier,
        help=f"{what} (several ids after one --claim, or --claim repeated; "
        "testbed list shows the ids)",
    )


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device``: where the claims' closed-form problems and estimators compute
    (:mod:`testbed.devices`; float64 on a GPU too)."""
    parser.add_argument(
        "--device",
        dest="compute_device",
        choices=("cpu", "cuda"),
        default=None,
        help="compute on this device (default: the CPU); the "
        "closed-form problems stay float64 on a GPU",
    )


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """Where the units of work run (docs/ray.md)."""
    group = parser.add_argument_group("where the work runs")
    group.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local (default: this machine) or ray (a Ray cluster; needs the "
        "optional extra hypergradient-testbed[ray])",
    )
    add_jobs_option(
        group, f"local executor: N worker processes (default 1: this process; at most {MAX_JOBS})"
    )
    add_threads_option(group)
    group.add_argument(
        "--address",
        default=None,
        help="ray executor: the cluster (auto, or ray://HOST:PORT); default: "
        "start a Ray instance on this machine for the run",
    )
    add_cpus_option(group, "task", "N", "ray executor: CPUs per task, also its torch thread count")
    group.add_argument(
        "--max-retries",
        type=int_in(0, MAX_RETRIES),
        default=TASK_RETRIES,
        metavar="N",
        help=f"ray executor: retries of a task whose worker dies (default {TASK_RETRIES})",
    )


def add_jobs_option(parser: Any, help: str) -> None:
    """``--jobs N``: local worker processes, 1 (this process) to ``MAX_JOBS``."""
    parser.add_argument("--jobs", type=int_in(1, MAX_JOBS), default=1, metavar="N", help=help)


def add_cpus_option(parser: Any, per: str, metavar: str, help: str) -> None:
    """``--cpus-per-<per>``: whole CPUs of each task or client, 1 to ``MAX_CPUS``."""
    parser.add_argument(
        f"--cpus-per-{per}", type=int_in(1, MAX_CPUS), default=1, metavar=metavar, help=help
    )


def add_results_option(parser: argparse.ArgumentParser) -> None:
    """``--results DIR``, the results directory a command writes (``results`` by default)."""
    parser.add_argument("--results", default="results", help="results directory")


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bar."""
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_threads_option(parser: Any) -> None:
    """``--threads N``: torch intra-op threads per process (:mod:`testbed_app.threads`)."""
    parser.add_argument(
        "--threads",
        type=int_in(1, MAX_THREADS),
        default=None,
        metavar="N",
        help="torch CPU threads per process (default: 1 for the claim "
        "commands, whose problems are small; for run, the cores shared "
        "among the --jobs processes)",
    )


def add_profile_option(parser: argparse.ArgumentParser) -> None:
    """``--profile fast|thorough`` (:mod:`theory_checks.profiles`; the run's settings)."""
    parser.add_argument(
        "--profile",
        choices=("fast", "thorough"),
        default=None,
        help="fast (default, or $TESTBED_PROFILE) or thorough",
    )


def add_commands(sub: Any) -> None:
    """Every command of :data:`COMMANDS`, in its order, with its options."""
    for name, add_options in (
        ("list", add_list_options),
        ("check", add_check_options),
        ("calibrate", add_calibrate_options),
        ("run", add_run_options),
        ("report", add_report_options),
        ("regress", add_regress_options),
        ("verify", add_verify_options),
        ("mutate", add_mutate_options),
        ("audit", add_audit_options),
        ("deploy", add_deploy_options),
    ):
        add_options(command_parser(sub, name))


def add_list_options(listing: argparse.ArgumentParser) -> None:
    """The options of ``testbed list`` (:mod:`testbed_app.list_command`)."""
    listing.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also each entry's parameters and defaults, and the config keys",
    )
    add_claim_option(
        listing,
        "describe only these claims: statement, the file that holds "
        "it, estimators, decision, perturbation, and from --results "
        "each one's slack and kill set",
    )
    listing.add_argument(
        "--results",
        default="results",
        help="results directory the claims' evidence is read from (with --claim)",
    )
    listing.set_defaults(computes=False)


def add_check_options(check: argparse.ArgumentParser) -> None:
    """The options of ``testbed check`` (:mod:`testbed_app.check_command`)."""
    add_profile_option(check)
    add_claim_option(check, "check only these claims")
    add_results_option(check)
    check.add_argument("--fresh", action="store_true", help="rerun claims already done")
    add_quiet_option(check)
    check.add_argument(
        "--claims-only",
        action="store_true",
        help="skip the communication and rounds-to-error measurements",
    )
    add_device_option(check)
    add_executor_options(check)


def add_calibrate_options(calibrate: argparse.ArgumentParser) -> None:
    """The options of ``testbed calibrate`` (:mod:`theory_checks.calibration`)."""
    add_claim_option(calibrate, "calibrate only these statistical claims")
    calibrate.add_argument(
        "--seeds",
        type=positive_int,
        default=20,
        help="independent Monte Carlo seeds per claim (default 20; at most 100,000)",
    )
    add_profile_option(calibrate)
    add_results_option(calibrate)
    add_quiet_option(calibrate)
    add_device_option(calibrate)
    add_executor_options(calibrate)


def add_run_options(run: argparse.ArgumentParser) -> None:
    """The options of ``testbed run`` (:mod:`testbed_app.run_command`)."""
    run.add_argument(
        "config", nargs="+", help="experiment config file(s) or folder(s) of them, e.g. configs/"
    )
    run.add_argument("--device", choices=("cpu", "cuda"), help="override [run] device")
    run.add_argument(
        "--steps",
        type=positive_int,
        metavar="N",
        help="override [run] steps (outer iterations); below the config's own "
        "steps the replication record is marked partial",
    )
    run.add_argument(
        "--rounds",
        type=positive_int,
        metavar="N",
        help="deprecated: the old name of --steps (it counts outer iterations, "
        "not communication rounds)",
    )
    add_results_option(run)
    run.add_argument(
        "--fresh",
        action="store_true",
        help="delete the run folder (checkpoint and metrics) and start over",
    )
    run.add_argument(
        "--recover",
        action="store_true",
        help="set a corrupt or foreign checkpoint aside and resume from the last "
        "good state (previous checkpoint, else step 0), keeping metrics",
    )
    run.add_argument(
        "--segment-steps",
        type=positive_int,
        metavar="N",
        help="with --jobs N or --executor ray: steps per task (a task ends at "
        "the first checkpoint N steps on; default: [run] checkpoint_every)",
    )
    run.add_argument(
        "--tf32", action="store_true", help="override [run] tf32: allow TF32 on a GPU (default off)"
    )
    add_quiet_option(run)
    add_executor_options(run)


def add_report_options(report: argparse.ArgumentParser) -> None:
    """The options of ``testbed report`` (:mod:`testbed_app.report_command`)."""
    add_results_option(report)
    report.add_argument(
        "--out",
        help="output directory (default: the results directory's "
        f"{REPORT}/, next to the results it shows)",
    )
    add_quiet_option(report)
    report.set_defaults(computes=False)


def add_regress_options(regress: argparse.ArgumentParser) -> None:
    """The options of ``testbed regress`` (:mod:`testbed_app.regression`)."""
    regress.add_argument("--estimator", type=identifier, help="check only this registered entry")
    regress.add_argument(
        "--against", type=identifier, help="compare --estimator with this entry, not a baseline"
    )
    regress.add_argument(
        "--update-baseline",
        action="store_true",
        help="rewrite the baseline with the new measurements",
    )
    regress.add_argument(
        "--baseline", help="baseline file (default reports/baselines/regress.json)"
    )
    regress.add_argument("--out", help="also write the measurements to this JSON file")
    add_quiet_option(regress)
    add_device_option(regress)
    add_executor_options(regress)


def add_verify_options(verify: argparse.ArgumentParser) -> None:
    """The options of ``testbed verify`` (:mod:`testbed_app.verify`)."""
    verify.add_argument(
        "target", type=identifier, help="registry/plugin name or module:object (an EstimatorInfo)"
    )
    verify.add_argument(
        "--against", type=identifier, help="also compare with this registered entry (regress)"
    )
    add_claim_option(verify, "only these claims")
    add_profile_option(verify)
    verify.add_argument("--results", help="results directory (default results/verify/NAME)")
    verify.add_argument(
        "--resume",
        action="store_true",
        help="reuse finished claims (off by default: the target's code may have "
        "changed, and a claim's fingerprint does not cover it)",
    )
    verify.add_argument("--no-report", action="store_true", help="skip the report")
    add_quiet_option(verify)
    add_threads_option(verify)
    add_device_option(verify)


def add_mutate_options(mutate: argparse.ArgumentParser) -> None:
    """The options of ``testbed mutate`` (:mod:`testbed_app.mutate`)."""
    mutate.add_argument(
        "--family",
        action="append",
        type=identifier,
        help="only this family's mutants (repeatable; see --list)",
    )
    mutate.add_argument(
        "--mutant", action="append", type=identifier, help="only this mutant (repeatable)"
    )
    mutate.add_argument(
        "--set",
        choices=("both", "catalogue", "generated"),
        default="both",
        help="the catalogue of realistic bugs, the generated perturbations of "
        "every entry's parameters, or both (default)",
    )
    add_profile_option(mutate)
    add_results_option(mutate)
    mutate.add_argument(
        "--every-claim",
        action="store_true",
        help="run every claim that concerns a mutant, not only until one kills it",
    )
    mutate.add_argument("--fresh", action="store_true", help="rerun mutants already done")
    mutate.add_argument("--list", action="store_true", help="list the catalogue and exit")
    add_quiet_option(mutate)
    add_jobs_option(mutate, "N local worker processes, one family of mutants at a time (default 1)")
    add_threads_option(mutate)


def add_audit_options(audit: argparse.ArgumentParser) -> None:
    """The options of ``testbed audit`` (:mod:`testbed_app.audit`)."""
    audit.description = (
        f"{COMMANDS['audit']}. Every claim file is read as check reads it (seal, outcomes, "
        "counts and verdict re-derived), every saved counterexample is rebuilt from its spec "
        "and measured again, a seeded sample of each claim's passing cases is measured again "
        "with the streams it was measured with, and the calibration and mutation summaries "
        "are recomputed from their records. One line per claim (reproduced or differs, with "
        "the numbers); nothing is written. Exit 0: everything reproduced; 1: a difference; "
        "2: bad input."
    )
    audit.add_argument(
        "results",
        help="the results folder to audit (from testbed check, calibrate or mutate; from anywhere)",
    )
    audit.add_argument(
        "--sample",
        type=non_negative_int,
        metavar="K",
        help="passing cases measured again per claim, drawn with --seed "
        "(default 2; 0: re-derive and replay only)",
    )
    audit.add_argument("--all", action="store_true", help="measure every case again")
    audit.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the sample's draw (default 0)"
    )


def add_deploy_options(deploy: argparse.ArgumentParser) -> None:
    """The options of ``testbed deploy`` (:mod:`testbed_app.flower.command`)."""
    deploy.add_argument(
        "config",
        help="a closed-form deploy config (configs/deploy/*.toml) or a "
        "server-based experiment config (configs/*.toml)",
    )
    deploy.add_argument(
        "--engine",
        choices=tuple(ENGINES),
        default="simulation",
        help="simulation: Flower's simulation engine, clients as Ray actors "
        "(default); local: Flower's deployment engine, a SuperLink and one "
        "SuperNode process per client on 127.0.0.1; files in "
        "RESULTS/deploy/NAME/simulation/ or .../deployment/",
    )
    deploy.add_argument(
        "--steps", type=positive_int, metavar="N", help="override [run] steps (outer iterations)"
    )
    deploy.add_argument(
        "--device", choices=("cpu", "cuda"), help="override [run] device (digits workloads)"
    )
    add_results_option(deploy)
    deploy.add_argument(
        "--fresh", action="store_true", help="replace an earlier run of this config on this engine"
    )
    add_cpus_option(
        deploy,
        "client",
        "C",
        "simulation engine: whole CPUs of each client's Ray actor (default 1)",
    )
    deploy.add_argument(
        "--gpus-per-client",
        type=number_in(0, MAX_GPUS, low_open=False),
        default=0.0,
        metavar="G",
        help="simulation engine: GPUs of each client's Ray actor (1: one GPU per actor; default 0)",
    )
    deploy.add_argument(
        "--timeout",
        type=number_in(0, MAX_TIMEOUT),
        metavar="S",
        help="seconds the server waits for a round's replies, in (0, "
        f"{MAX_TIMEOUT:g}] (default: as long as Flower keeps the "
        "messages; a stopped SuperNode is reported once Flower declares "
        "it unavailable)",
    )
    deploy.add_argument(
        "--no-compare", action="store_true", help="skip the rerun in the batched simulation"
    )

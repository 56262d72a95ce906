"""The testbed command line: list, check, calibrate, run, report, regress, verify, mutate,
audit, deploy.

Examples (also shown by ``testbed --help``)::

    testbed list                        # problems, estimators and claims with references
    testbed check                       # every claim, the fast profile; results/, verdicts
    testbed check --claim classical.gd.linear_rate classical.cg.exact_after_dim_y   # two claims
    testbed check --jobs 2              # the claims over 2 local processes (same results)
    testbed check --profile thorough --claim fednest.thm31.k_rate_bilevel   # decides it
    testbed calibrate --seeds 20        # observed false-failure rates of statistical claims
    testbed report                      # build results/report/ from results/
    testbed regress                     # compare every estimator with the committed baseline
    testbed regress --estimator NEW --against OLD   # is a variant no worse than OLD?
    testbed verify my-variant --against aid-neumann  # a plugin's verdicts, report, regression
    testbed mutate                      # realistic bugs against the claims: the mutation table
    testbed audit results/              # re-derive, replay and re-measure a results folder
    testbed run configs/aggitd_table2_iid_tau1.toml --steps 20   # one paper experiment
    testbed run configs/ --executor ray --address auto   # every config, side by side on Ray
    testbed deploy configs/deploy/fednest_quadratic.toml --engine local   # FedNest on Flower
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import warnings
from typing import Any, NoReturn

from results_format.layout import REPORT
from results_format.locks import LockHeld
from results_format.writing import WriteFailed
from testbed.defaults import TASK_RETRIES
from testbed_app.experiments.errors import DeprecatedName
from testbed_app.flower import ENGINES


def _add_device_option(parser: argparse.ArgumentParser) -> None:
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


def _add_executor_options(parser: argparse.ArgumentParser) -> None:
    """Where the units of work run (docs/ray.md)."""
    group = parser.add_argument_group("where the work runs")
    group.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local (default: this machine) or ray (a Ray cluster; needs the "
        "optional extra hypergradient-testbed[ray])",
    )
    group.add_argument(
        "--jobs",
        type=_int_in(1, MAX_JOBS),
        default=1,
        metavar="N",
        help=f"local executor: N worker processes (default 1: this process; at most {MAX_JOBS})",
    )
    _add_threads_option(group)
    group.add_argument(
        "--address",
        default=None,
        help="ray executor: the cluster (auto, or ray://HOST:PORT); default: "
        "start a Ray instance on this machine for the run",
    )
    group.add_argument(
        "--cpus-per-task",
        type=_int_in(1, MAX_CPUS),
        default=1,
        metavar="N",
        help="ray executor: CPUs per task, also its torch thread count",
    )
    group.add_argument(
        "--max-retries",
        type=_int_in(0, MAX_RETRIES),
        default=TASK_RETRIES,
        metavar="N",
        help=f"ray executor: retries of a task whose worker dies (default {TASK_RETRIES})",
    )


#: Bounds of the numeric options, each with why (a value past one is refused, naming it):
#: - MAX_JOBS: each local worker process imports torch (~0.3 GB) and the claims' problems;
#:   256 of them fill a large machine's memory, and no machine here has more useful cores.
#: - MAX_THREADS / MAX_CPUS: torch threads or Ray CPUs of one task or client; 1024 is above
#:   any single machine's cores (a Ray task asking for more is never scheduled: it would wait
#:   forever).
#: - MAX_GPUS: GPUs of one Flower client's Ray actor.
#: - MAX_RETRIES: Ray retries of a task whose worker dies (a negative count is Ray's "retry
#:   forever", which hides a crashing task).
#: - MAX_TIMEOUT: seconds a deployed server waits for a round's replies: a day, past which a
#:   round is lost, not slow.
#: - MAX_ID_LENGTH: a claim id, mutant, family or estimator name on the command line; the
#:   longest registered id has 60 characters, and an error echoes what was given.
MAX_JOBS = 256
MAX_THREADS = 1024
MAX_CPUS = 1024
MAX_GPUS = 64
MAX_RETRIES = 100
MAX_TIMEOUT = 86_400.0
MAX_ID_LENGTH = 200


def _shown(text: str, limit: int = 60) -> str:
    """``repr(text)``, cut to ``limit`` characters with its length when longer (an error line
    echoes what was given, never 100 kB of it)."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text):,} characters)"


def _int_in(low: int, high: int) -> Any:
    """argparse type: an integer in ``[low, high]``, the bound named when it is not."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low:,}, {high:,}], got {_shown(text)}"
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low:,}, {high:,}], got {value:,}"
            )
        return value

    return parse


def _number_in(low: float, high: float, low_open: bool = True) -> Any:
    """argparse type: a finite number in ``(low, high]`` (``[low, high]`` unless
    ``low_open``): ``--timeout -5``, ``nan`` and ``inf`` are refused with the bounds named."""
    bounds = f"{'(' if low_open else '['}{low:g}, {high:g}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number in {bounds}, got {_shown(text)}"
            ) from None
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"expected a number in {bounds}, got {text}")
        return value

    return parse


def _identifier(text: str) -> str:
    """argparse type: an id or name of at most :data:`MAX_ID_LENGTH` characters."""
    if len(text) > MAX_ID_LENGTH:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is not an id: ids and names have at most {MAX_ID_LENGTH} characters"
        )
    return text


def _add_threads_option(parser: Any) -> None:
    """``--threads N``: torch intra-op threads per process (:mod:`testbed_app.threads`)."""
    parser.add_argument(
        "--threads",
        type=_int_in(1, MAX_THREADS),
        default=None,
        metavar="N",
        help="torch CPU threads per process (default: 1 for the claim "
        "commands, whose problems are small; for run, the cores shared "
        "among the --jobs processes)",
    )


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--threads 0`` and ``--steps -2`` are errors)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer, got {_shown(text)}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


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
DESCRIPTION = """\
The hypergradient testbed: checks the claims of the federated hypergradient papers
(FedNest, AggITD, FedMSA, HGP) on problems with exact answers, runs their experiments
and reports which claims hold.

commands (testbed COMMAND --help describes one):
""" + "\n".join(f"  {name:10s} {text}" for name, text in COMMANDS.items())
EXAMPLES = "examples:\n" + "\n".join(
    line.strip().removeprefix("testbed").join(("  testbed", ""))
    for line in (__doc__ or "").split("::", 1)[-1].strip().splitlines()
)


class _DefaultsShown(argparse.HelpFormatter):
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


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors echo a value of at most 60 characters (``--profile``
    given 100,000 characters was echoed whole in its "invalid choice" line)."""

    def error(self, message: str) -> NoReturn:
        def cut(match: re.Match[str]) -> str:
            text = match.group(1)
            return f"'{text[:60]}...' ({len(text):,} characters)"

        super().error(re.sub(r"'([^']{81,})'", cut, message))


def _command(sub: Any, name: str) -> argparse.ArgumentParser:
    """The subcommand ``name`` with its line of :data:`COMMANDS` as its description."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, description=COMMANDS[name], formatter_class=_DefaultsShown
    )
    return parser


def _add_claim_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--claim ID [ID ...]``, also repeatable (``--claim A --claim B``)."""
    parser.add_argument(
        "--claim",
        action="extend",
        nargs="+",
        metavar="ID",
        type=_identifier,
        help=f"{what} (several ids after one --claim, or --claim repeated; "
        "testbed list shows the ids)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="testbed",
        usage="testbed [-h] COMMAND ...",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # the commands are listed in the description (one line each), not by argparse, which
    # wraps a command name longer than its help column onto a line of its own
    # prog: each command's usage line reads `testbed report [-h] ...`; by default argparse
    # builds it from the usage above ("testbed [-h] COMMAND ... report [-h] ...")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help=argparse.SUPPRESS, prog="testbed"
    )
    listing = _command(sub, "list")
    listing.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also each entry's parameters and defaults, and the config keys",
    )
    _add_claim_option(
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
    check = _command(sub, "check")
    check.add_argument(
        "--profile",
        choices=("fast", "thorough"),
        default=None,
        help="fast (default, or $TESTBED_PROFILE) or thorough",
    )
    _add_claim_option(check, "check only these claims")
    check.add_argument("--results", default="results", help="results directory")
    check.add_argument("--fresh", action="store_true", help="rerun claims already done")
    check.add_argument("--quiet", action="store_true", help="no progress bar")
    check.add_argument(
        "--claims-only",
        action="store_true",
        help="skip the communication and rounds-to-error measurements",
    )
    _add_device_option(check)
    _add_executor_options(check)
    calibrate = _command(sub, "calibrate")
    _add_claim_option(calibrate, "calibrate only these statistical claims")
    calibrate.add_argument(
        "--seeds",
        type=_positive_int,
        default=20,
        help="independent Monte Carlo seeds per claim (default 20; at most 100,000)",
    )
    calibrate.add_argument(
        "--profile",
        choices=("fast", "thorough"),
        default=None,
        help="fast (default, or $TESTBED_PROFILE) or thorough",
    )
    calibrate.add_argument("--results", default="results", help="results directory")
    calibrate.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_device_option(calibrate)
    _add_executor_options(calibrate)
    run = _command(sub, "run")
    run.add_argument(
        "config", nargs="+", help="experiment config file(s) or folder(s) of them, e.g. configs/"
    )
    run.add_argument("--device", choices=("cpu", "cuda"), help="override [run] device")
    run.add_argument(
        "--steps",
        type=_positive_int,
        metavar="N",
        help="override [run] steps (outer iterations); below the config's own "
        "steps the replication record is marked partial",
    )
    run.add_argument(
        "--rounds",
        type=_positive_int,
        metavar="N",
        help="deprecated: the old name of --steps (it counts outer iterations, "
        "not communication rounds)",
    )
    run.add_argument("--results", default="results", help="results directory")
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
        type=_positive_int,
        metavar="N",
        help="with --jobs N or --executor ray: steps per task (a task ends at "
        "the first checkpoint N steps on; default: [run] checkpoint_every)",
    )
    run.add_argument(
        "--tf32", action="store_true", help="override [run] tf32: allow TF32 on a GPU (default off)"
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_executor_options(run)
    report = _command(sub, "report")
    report.add_argument("--results", default="results", help="results directory")
    report.add_argument(
        "--out",
        help="output directory (default: the results directory's "
        f"{REPORT}/, next to the results it shows)",
    )
    report.add_argument("--quiet", action="store_true", help="no progress bar")
    report.set_defaults(computes=False)
    regress = _command(sub, "regress")
    regress.add_argument("--estimator", type=_identifier, help="check only this registered entry")
    regress.add_argument(
        "--against", type=_identifier, help="compare --estimator with this entry, not a baseline"
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
    regress.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_device_option(regress)
    _add_executor_options(regress)
    verify = _command(sub, "verify")
    verify.add_argument(
        "target", type=_identifier, help="registry/plugin name or module:object (an EstimatorInfo)"
    )
    verify.add_argument(
        "--against", type=_identifier, help="also compare with this registered entry (regress)"
    )
    _add_claim_option(verify, "only these claims")
    verify.add_argument(
        "--profile",
        choices=("fast", "thorough"),
        default=None,
        help="fast (default, or $TESTBED_PROFILE) or thorough",
    )
    verify.add_argument("--results", help="results directory (default results/verify/NAME)")
    verify.add_argument(
        "--resume",
        action="store_true",
        help="reuse finished claims (off by default: the target's code may have "
        "changed, and a claim's fingerprint does not cover it)",
    )
    verify.add_argument("--no-report", action="store_true", help="skip the report")
    verify.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_threads_option(verify)
    _add_device_option(verify)
    _add_mutate_options(_command(sub, "mutate"))
    _add_audit_options(_command(sub, "audit"))
    _add_deploy_options(_command(sub, "deploy"))
    return parser


def _add_mutate_options(mutate: argparse.ArgumentParser) -> None:
    """The options of ``testbed mutate`` (:mod:`testbed_app.mutate`)."""
    mutate.add_argument(
        "--family",
        action="append",
        type=_identifier,
        help="only this family's mutants (repeatable; see --list)",
    )
    mutate.add_argument(
        "--mutant", action="append", type=_identifier, help="only this mutant (repeatable)"
    )
    mutate.add_argument(
        "--set",
        choices=("both", "catalogue", "generated"),
        default="both",
        help="the catalogue of realistic bugs, the generated perturbations of "
        "every entry's parameters, or both (default)",
    )
    mutate.add_argument(
        "--profile",
        choices=("fast", "thorough"),
        default=None,
        help="fast (default, or $TESTBED_PROFILE) or thorough",
    )
    mutate.add_argument("--results", default="results", help="results directory")
    mutate.add_argument(
        "--every-claim",
        action="store_true",
        help="run every claim that concerns a mutant, not only until one kills it",
    )
    mutate.add_argument("--fresh", action="store_true", help="rerun mutants already done")
    mutate.add_argument("--list", action="store_true", help="list the catalogue and exit")
    mutate.add_argument("--quiet", action="store_true", help="no progress bar")
    mutate.add_argument(
        "--jobs",
        type=_int_in(1, MAX_JOBS),
        default=1,
        metavar="N",
        help="N local worker processes, one family of mutants at a time (default 1)",
    )
    _add_threads_option(mutate)


def _non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def _add_audit_options(audit: argparse.ArgumentParser) -> None:
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
        type=_non_negative_int,
        metavar="K",
        help="passing cases measured again per claim, drawn with --seed "
        "(default 2; 0: re-derive and replay only)",
    )
    audit.add_argument("--all", action="store_true", help="measure every case again")
    audit.add_argument(
        "--seed", type=_non_negative_int, default=0, help="seed of the sample's draw (default 0)"
    )


def _add_deploy_options(deploy: argparse.ArgumentParser) -> None:
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
        "--steps", type=_positive_int, metavar="N", help="override [run] steps (outer iterations)"
    )
    deploy.add_argument(
        "--device", choices=("cpu", "cuda"), help="override [run] device (digits workloads)"
    )
    deploy.add_argument("--results", default="results", help="results directory")
    deploy.add_argument(
        "--fresh", action="store_true", help="replace an earlier run of this config on this engine"
    )
    deploy.add_argument(
        "--cpus-per-client",
        type=_int_in(1, MAX_CPUS),
        default=1,
        metavar="C",
        help="simulation engine: whole CPUs of each client's Ray actor (default 1)",
    )
    deploy.add_argument(
        "--gpus-per-client",
        type=_number_in(0, MAX_GPUS, low_open=False),
        default=0.0,
        metavar="G",
        help="simulation engine: GPUs of each client's Ray actor (1: one GPU per actor; default 0)",
    )
    deploy.add_argument(
        "--timeout",
        type=_number_in(0, MAX_TIMEOUT),
        metavar="S",
        help="seconds the server waits for a round's replies, in (0, "
        f"{MAX_TIMEOUT:g}] (default: as long as Flower keeps the "
        "messages; a stopped SuperNode is reported once Flower declares "
        "it unavailable)",
    )
    deploy.add_argument(
        "--no-compare", action="store_true", help="skip the rerun in the batched simulation"
    )


def _message(error: BaseException) -> str:
    # a KeyError's str() is the repr of its key ("'as_expected'"); show its text instead
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error)


def _os_message(error: OSError) -> str:
    """One line for an :class:`OSError`: its file and the system's reason."""
    if isinstance(error, WriteFailed) or not error.strerror:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror}"


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of a closed pipe does
    not print a traceback at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


_SHOW_WARNING = warnings.showwarning


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """The testbed's own warnings (an option or config key under its old name) as one line
    ``testbed: warning: ...`` on stderr; any other warning as Python shows it."""
    if issubclass(category, DeprecatedName):
        print(f"testbed: warning: {message}", file=sys.stderr)
    else:
        _SHOW_WARNING(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    """Run the command; user errors (a bad config, argument or results file) print one line
    ``testbed: error: ...`` and return 2; Ctrl-C returns 130 with how to resume; any other
    exception is an internal error and keeps its traceback.

    The command runs through :func:`testbed_app.commands.execute` (the precision policy, the
    device, then the command's handler), imported only once the arguments are parsed;
    ``testbed report``, which reads results files only, through
    :func:`testbed_app.report_command.report_command`, without torch."""
    args = build_parser().parse_args(argv)
    try:
        # the commands are imported after parsing, so that `testbed --help` and a bad option
        # answer without importing torch, and the report starts without it (tests/test_cli.py)
        if args.command == "report":
            from testbed_app.report_command import report_command as run
        else:
            from testbed_app.commands import execute as run
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            status = int(run(args))
        # the last of the output is written here, not at the interpreter's exit, so that a
        # reader that has closed the pipe (`| head`) is met by the handler below whatever the
        # output's size (63 kB of `list --verbose` fit the pipe's buffer, and its last flush
        # came at exit, past the handler)
        sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        print(
            "\ntestbed: interrupted; rerun the same command to resume (finished work is kept)",
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:
        _quiet_stdout()  # the reader (`| head`) has what it wanted: exit quietly
        return 0
    except (KeyError, ValueError, LockHeld) as error:
        print(f"testbed: error: {_message(error)}", file=sys.stderr)
        return 2
    except OSError as error:
        # the machine's answer (a full disk, a read-only folder, a missing or unreadable
        # file): one line naming the file; a results file is written whole or not at all
        # (results_format.writing), so nothing half-written is left
        print(f"testbed: error: {_os_message(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

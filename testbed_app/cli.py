"""The testbed command line: list, check, calibrate, run, report, regress, verify, mutate,
audit, deploy.

Examples (also shown by ``testbed --help``)::

    testbed list                        # problems, estimators and claims with references
    testbed check                       # every claim, the fast profile; results/, verdicts
    testbed check --claim classical.gd.linear_rate classical.cg.exact_after_dim_y   # two claims
    testbed check --jobs 2              # the claims over 2 local processes (same results)
    testbed check --profile thorough --claim fednest.thm31.k_rate_bilevel   # decides it
    testbed calibrate --seeds 300       # observed false-failure rates of statistical claims
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
import os
import re
import sys
import warnings
from typing import Any
from typing import NoReturn

from results_format.locks import LockHeld
from results_format.writing import WriteFailed
from testbed_app.cli_parsers import COMMANDS
from testbed_app.cli_parsers import add_commands
from testbed_app.experiments.errors import DeprecatedName

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


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors echo a value of at most 60 characters (``--profile``
    given 100,000 characters was echoed whole in its "invalid choice" line)."""

    def error(self, message: str) -> NoReturn:
        def cut(match: re.Match[str]) -> str:
            text = match.group(1)
            return f"'{text[:60]}...' ({len(text):,} characters)"

        super().error(re.sub(r"'([^']{81,})'", cut, message))


def build_parser() -> argparse.ArgumentParser:
    """The ``testbed`` parser: every command of :data:`COMMANDS` with its options
    (:mod:`testbed_app.cli_parsers`; their types: :mod:`testbed_app.cli_types`)."""
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
    add_commands(sub)
    return parser


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

    The command runs through :func:`testbed_app.commands.execute` (the run's settings made
    from the options and put in force, then the command's handler), imported only once the
    arguments are parsed;
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

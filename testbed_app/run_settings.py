"""The command line's :class:`~theory_checks.settings.RunSettings`: made once from the parsed
options, before any command runs (:func:`testbed_app.commands.execute`).

- profile: ``--profile``, else ``$TESTBED_PROFILE``, else ``fast`` (the entry point's default:
  :func:`theory_checks.profiles.get_profile`); a :class:`~theory_checks.profiles.Profile`;
- device: ``--device`` of the claim commands (``testbed run`` and ``deploy`` name a device per
  experiment config, which their runs take as an argument);
- threads: ``--threads``, else the rule of :mod:`testbed_app.threads` (one per process for the
  closed-form claim commands, the cores shared among the ``--jobs`` processes for ``run``; the
  other commands leave torch's own);
- dtype: float64, but for ``run`` and ``deploy``, whose configs name theirs;
- tf32: ``--tf32`` (``run``); executor: ``--executor``, ``--jobs``, ``--address``,
  ``--cpus-per-task``, ``--max-retries``.
"""

from __future__ import annotations

import argparse

from testbed.defaults import TASK_RETRIES
from testbed_app.threads import claim_threads
from testbed_app.threads import workload_threads
from theory_checks.profiles import get_profile
from theory_checks.settings import ExecutorSettings
from theory_checks.settings import RunSettings

#: The commands whose processes run ``testbed run``'s workloads (threads shared among jobs),
#: and those that run the closed-form claims (one thread per process); the others leave torch's
#: thread count as it is.
WORKLOAD_COMMANDS = ("run",)
CLAIM_COMMANDS = ("check", "calibrate", "regress", "verify", "mutate")
#: The commands whose configs name their own dtype (``[run] dtype``): torch's default is left
#: as the process has it; every other command computes the closed forms in float64.
CONFIG_DTYPE_COMMANDS = ("run", "deploy")


def executor_settings(args: argparse.Namespace) -> ExecutorSettings:
    """Where the command's units of work run (its executor options; a command without them
    runs its work in this process)."""
    if getattr(args, "executor", "local") == "ray" and getattr(args, "threads", None) is not None:
        raise ValueError(
            "--threads is for --executor local: a Ray task's torch threads are its --cpus-per-task"
        )
    return ExecutorSettings(
        getattr(args, "executor", "local"),
        getattr(args, "jobs", 1),
        getattr(args, "address", None),
        getattr(args, "cpus_per_task", 1),
        getattr(args, "max_retries", TASK_RETRIES),
    )


def settings_of(args: argparse.Namespace) -> RunSettings:
    """The settings of the parsed command ``args`` (module docstring)."""
    requested = getattr(args, "threads", None)
    threads = None
    if args.command in WORKLOAD_COMMANDS:
        threads = workload_threads(requested, getattr(args, "jobs", 1))
    elif args.command in CLAIM_COMMANDS:
        threads = claim_threads(requested)
    return RunSettings(
        profile=get_profile(getattr(args, "profile", None)),
        device=getattr(args, "compute_device", None) or "cpu",
        dtype=None if args.command in CONFIG_DTYPE_COMMANDS else "float64",
        threads=threads,
        tf32=bool(getattr(args, "tf32", False)),
        executor=executor_settings(args),
    )


__all__ = [
    "CLAIM_COMMANDS",
    "CONFIG_DTYPE_COMMANDS",
    "WORKLOAD_COMMANDS",
    "executor_settings",
    "settings_of",
]

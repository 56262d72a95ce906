"""How many torch intra-op threads a command's processes use (``--threads``).

A claim check computes on closed-form problems of a few dozen dimensions: each torch operation
takes microseconds, and a second intra-op thread only adds the cost of waking and joining it.
Inherited from the environment (torch's default is one thread per core), the threads of the
``--jobs`` worker processes and of xdist's workers oversubscribe the cores: on a 2-core machine
at load 3-4, ``testbed check --claim comparison.aggitd_table2_factor --fresh`` took 24 s with
one thread, 118 s with two and 153 s with torch's default (2026-11-27). So the claim commands
(``check``, ``calibrate``, ``regress``, ``verify``, ``mutate``) use :data:`CLAIM_THREADS` per
process whatever the environment says, and ``testbed run``'s workloads, whose models can be
large enough to use several cores, share the cores among the ``--jobs`` processes. ``--threads``
overrides both. The number is part of the run's settings
(``theory_checks.settings.RunSettings.threads``, put in force with the rest by ``use_settings``);
the number in force is recorded in the results' ``metadata.json`` (``torch_threads``).
"""

from __future__ import annotations

import os

#: Threads per process of the closed-form claim commands (see the module's docstring).
CLAIM_THREADS = 1


def claim_threads(requested: int | None) -> int:
    """The threads of a claim command's processes: ``--threads``, else :data:`CLAIM_THREADS`."""
    return requested if requested is not None else CLAIM_THREADS


def workload_threads(requested: int | None, jobs: int) -> int:
    """The threads of a ``testbed run`` process: ``--threads``, else the cores shared among the
    ``jobs`` processes (at least one each)."""
    if requested is not None:
        return requested
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


__all__ = ["CLAIM_THREADS", "claim_threads", "workload_threads"]

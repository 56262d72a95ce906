"""``testbed mutate``: run the catalogue of realistic bugs against the claims that concern them
and print the mutation table (:mod:`theory_checks.mutation`, catalogue
:mod:`theory_checks.mutants`).

Examples::

    testbed mutate                         # every mutant, fast profile, results/mutation/
    testbed mutate --family FedIHGP        # one family (repeatable)
    testbed mutate --mutant aggitd.weight_lambda_n --every-claim   # every claim, not the first kill
    testbed mutate --list                  # the catalogue: mutant, family, kind, description
    testbed mutate --set generated         # only the generated parameter perturbations
    testbed mutate --set catalogue         # only the catalogue of realistic bugs
    testbed mutate --jobs 2                # the mutants over 2 local processes (same records)

``--set`` (default ``both``) picks the catalogue (:mod:`theory_checks.mutants`), the generated
perturbations of every entry's parameters (:mod:`theory_checks.parameter_mutants`: a family per
entry, ``<entry> parameters``), or both; the records and the resume are the same for both.

``--jobs N`` runs the mutants in N local worker processes (:class:`MutantTask`, one per family:
the mutants of one entry share the correct entry's runs, :class:`~theory_checks.mutation.
SharedRuns`); each worker writes its mutants' records as one process would, and the summary is
written once all are done, so the records do not depend on N.

Exit status: 0 when every mutant run is killed or, declared equivalent, survives; 1 when a
mutant survives that is not declared equivalent, or a declared-equivalent one is killed; 2 on
bad input (an unknown family or mutant, one line).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from testbed.progress import Progress
from testbed_app.executors import LocalExecutor
from theory_checks.mutants import MUTANT_DB
from theory_checks.mutation import SharedRuns
from theory_checks.mutation import as_expected
from theory_checks.mutation import format_table
from theory_checks.mutation import run_mutant
from theory_checks.mutation import run_mutants
from theory_checks.mutation import write_summary
from theory_checks.parameter_mutants import GENERATED
from theory_checks.profiles import Profile
from theory_checks.settings import RunSettings


def catalogue_of(which: str) -> tuple[Any, ...]:
    """The mutants of ``--set which``: the catalogue, the generated perturbations, or both."""
    return {"catalogue": MUTANT_DB, "generated": GENERATED, "both": MUTANT_DB + GENERATED}[which]


def _chosen(
    families: list[str] | None, names: list[str] | None, catalogue: tuple[Any, ...] = MUTANT_DB
) -> list[Any]:
    known = list(dict.fromkeys(m.family for m in catalogue))
    if families:
        unknown = sorted(set(families) - set(known))
        if unknown:
            raise ValueError(
                f"--family: no family {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
            )
    chosen = [m for m in catalogue if not families or m.family in families]
    if names:
        by_name = {m.name: m for m in catalogue}
        unknown = [name for name in names if name not in by_name]
        if unknown:
            raise KeyError(
                f"no mutant {unknown[0]!r} among the {len(catalogue)} of this set "
                "(`testbed mutate --list` lists them)"
            )
        picked = [by_name[name] for name in names]
        # a mutant outside the families named would be dropped: "no mutant run", exit 0
        outside = [m for m in picked if m not in chosen]
        if outside:
            raise ValueError(
                "--mutant and --family select nothing together: "
                + "; ".join(
                    f"{m.name} is a mutant of family {m.family!r}, not of "
                    f"{' or '.join(map(repr, families or []))}"
                    for m in outside
                )
                + " (give --mutant alone, or its family)"
            )
        chosen = [m for m in chosen if m in picked]
    return chosen


@dataclasses.dataclass(frozen=True)
class MutantTask:
    """The mutants of one family, by name, as a picklable unit of work for ``--jobs``: run in a
    worker with one :class:`~theory_checks.mutation.SharedRuns`, their records written to
    ``results`` as :func:`~theory_checks.mutation.run_mutant` writes them; gives the records."""

    which: str
    names: tuple[str, ...]
    profile: Profile
    results: str
    every_claim: bool
    resume: bool

    def __call__(self) -> list[dict[str, Any]]:
        # the worker entered with the driver's settings (dtype, device, plugins)
        by_name = {m.name: m for m in catalogue_of(self.which)}
        shared = SharedRuns()
        return [
            run_mutant(
                by_name[name],
                self.profile,
                Path(self.results),
                every_claim=self.every_claim,
                resume=self.resume,
                shared=shared,
            )
            for name in self.names
        ]


def _run_in_workers(
    chosen: list[Any], which: str, args: argparse.Namespace, settings: RunSettings, done: Any
) -> list[dict[str, Any]]:
    """``chosen`` over ``args.jobs`` processes, one task per family (the largest first, so the
    last to start is a small one); the records in ``chosen``'s order."""
    families: dict[str, list[str]] = {}
    for m in chosen:
        families.setdefault(m.family, []).append(m.name)
    tasks = [
        MutantTask(
            which,
            tuple(names),
            settings.profile,
            str(args.results),
            args.every_claim,
            not args.fresh,
        )
        for names in sorted(families.values(), key=len, reverse=True)
    ]
    by_name: dict[str, dict[str, Any]] = {}
    executor = LocalExecutor(args.jobs, settings.threads, settings=settings)
    for _, records in executor.run(tasks):
        for record in records:
            by_name[record["mutant"]] = record
            done(record["mutant"])
    return [by_name[m.name] for m in chosen]


def mutate_command(args: argparse.Namespace, settings: RunSettings) -> int:
    """``testbed mutate`` (its options: :mod:`testbed_app.cli`); the exit status above."""
    which = getattr(args, "set", "both") or "both"
    catalogue = catalogue_of(which)
    chosen = _chosen(args.family, args.mutant, catalogue)
    if args.list:
        for m in chosen:
            print(f"{m.name:40s} {m.family:28s} {m.kind:14s} {m.description}")
        return 0
    profile = settings.profile
    bar = Progress(total=len(chosen), desc="mutants", unit="mutant", enabled=not args.quiet)
    current: list[str] = []

    def progress(message: str) -> None:
        name = message.split(":")[0]
        if current and current[-1] != name:
            bar.update(1)
        if not current or current[-1] != name:
            current.append(name)
        bar.set_postfix_str(message)

    try:
        if getattr(args, "jobs", 1) > 1:
            records = _run_in_workers(chosen, which, args, settings, lambda name: bar.update(1))
            write_summary(Path(args.results), profile, catalogue)
        else:
            records = run_mutants(
                chosen,
                profile,
                Path(args.results),
                every_claim=args.every_claim,
                resume=not args.fresh,
                progress=progress,
                catalogue=catalogue,
            )
    finally:
        bar.update(len(chosen) - bar.n)
        bar.close()
    print(format_table(records))
    print(f"\nresults in {Path(args.results) / 'mutation'} ({profile.name} profile)")
    wrong = [r["mutant"] for r in records if not as_expected(r)]
    if wrong:
        print(
            f"{len(wrong)} mutant(s) not as expected (survived, or declared equivalent and "
            f"killed): {', '.join(wrong)}",
            file=sys.stderr,
        )
        return 1
    return 0

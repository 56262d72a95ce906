"""``testbed check``: run the claims on the run's settings, write their results files, print
each verdict and the counts, and measure the report's tables; the exit status says whether every
verdict came out as the testbed expects (:func:`_exit_status`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from results_format.populations import POPULATIONS
from results_format.populations import counted
from results_format.populations import population as population_of
from results_format.verdicts import ERRATUM
from results_format.verdicts import SUBSTANTIVE
from results_format.verdicts import TABLE_NUMBER
from results_format.verdicts import added_parameters_text
from results_format.verdicts import readings_text
from results_format.verdicts import refutation_class
from results_format.verdicts import refutation_counts
from testbed_app import communication
from testbed_app.command_inputs import executor_for
from testbed_app.command_inputs import named_claims
from testbed_app.command_inputs import results_folder
from testbed_app.executors import Executor
from theory_checks.claim import VERDICTS
from theory_checks.claim_batch import run_claims
from theory_checks.comparison import table as comparison_table
from theory_checks.registry import CLAIM_DB
from theory_checks.settings import RunSettings


def check_command(args: argparse.Namespace, settings: RunSettings) -> int:
    """``testbed check``: run the claims, write results, print each verdict; the exit status of
    :func:`_exit_status`."""
    claims = named_claims(args.claim)
    profile = settings.profile
    results_folder(args.results, "--results")  # a file or a link loop: one line, before any work
    # a claim file that cannot be believed is named in one line and rerun (run_claims)
    with executor_for(settings) as executor:  # one Ray instance for the claims and tables
        summaries = run_claims(
            claims,
            Path(args.results),
            profile,
            resume=not args.fresh,
            progress=not args.quiet,
            execute=executor.run,
        )
        _print_verdicts(summaries, args, profile.name)
        if not args.claim and not args.claims_only:
            _measure_report_tables(Path(args.results), not args.fresh, not args.quiet, executor)
    return _exit_status(summaries)


def _print_verdicts(summaries: list[dict], args: argparse.Namespace, profile: str) -> None:
    """The verdict table ``testbed check`` prints."""
    width = max(len(s["id"]) for s in summaries)
    print(f"\n{'claim':{width}s}  {'verdict':22s} cases  expected  power  control")
    for s in summaries:
        mark = "yes" if s["as_expected"] else "NO"
        power = s.get("power") or {}
        control = s.get("positive_control") or {}
        caught = "-" if not power else ("caught" if power.get("caught") else "MISSED")
        held = "-" if not control else ("holds" if control.get("holds") else "FAILS")
        refutes = f"  ({refutation_class(s['about'])})" if s["verdict"] == "fails as stated" else ""
        print(
            f"{s['id']:{width}s}  {s['verdict']:22s} {s['n_cases']:5d}  {mark:8s}  "
            f"{caught:6s} {held}{refutes}"
        )
        if s.get("readings"):  # the verdict under each reading, by name
            print(f"{'':{width}s}  readings: {readings_text(s['readings'])}")
        if s.get("added_parameters"):  # how the verdict depends on what the testbed adds
            print(
                f"{'':{width}s}  added by the testbed: "
                f"{added_parameters_text(s['added_parameters'])}"
            )
        if s["counterexample"]:
            print(f"{'':{width}s}  counterexample: {Path(args.results) / s['counterexample']}")
            if not s["n_cases"]:  # "cases 0" beside a refutation: say what decided it
                print(f"{'':{width}s}  {_decided_by(s)}")
    # the claims of the papers, the comparisons and the runs on enrolled variants, counted
    # apart (results_format.populations: the report and `testbed list` count them so too)
    own = [s for s in summaries if s.get("origin", "built-in") == "built-in"]
    groups = {
        population: [s for s in own if population_of(s["id"]) == population]
        for population in POPULATIONS
    }
    checked = "; ".join(
        f"{counted(len(group), population)} ({_counts(group)})"
        for population, group in groups.items()
        if group
    )
    print(
        f"\nChecked on the {profile} profile: {checked or 'nothing of the testbed'}; "
        f"results in {args.results}"
    )
    claims = [s for s in own if population_of(s["id"]) == POPULATIONS[0]]
    if any(s["verdict"] == "fails as stated" for s in claims):
        print(f"of those failing as stated: {refutations_line(claims)}")
    outside = [s for s in summaries if s.get("origin", "built-in") != "built-in"]
    if outside:  # plugins', integrations': never in the papers' counts
        origins = ", ".join(sorted({str(s["origin"]) for s in outside}))
        print(
            f"{len(outside)} runs of estimators or claims from outside the testbed "
            f"({origins}): {_counts(outside)}"
        )


def _decided_by(summary: dict) -> str:
    """What decided a refutation no case held before: the claim's saved counterexample, which
    is replayed before any drawn case, or its first drawn case (the check stops at the first
    failure)."""
    claim = next((c for c in CLAIM_DB if c.id == summary.get("claim", summary["id"])), None)
    if claim is not None and claim.examples:
        return (
            "decided by its saved counterexample, replayed before any drawn case (the "
            "check stops at the first failure)"
        )
    return "decided by the first case drawn, which failed (the check stops at the first failure)"


def _counts(summaries: list[dict]) -> str:
    counts = {v: sum(1 for s in summaries if s["verdict"] == v) for v in VERDICTS}
    return ", ".join(f"{n} {v}" for v, n in counts.items())


def refutations_line(summaries: list[dict]) -> str:
    """The "fails as stated" verdicts by what the claims check: substantive refutations of
    stated results apart from errata (proof steps, printed formulas, informal sentences) and
    from experiment table numbers (:func:`results_format.verdicts.refutation_class`)."""
    counts = refutation_counts(summaries)
    return (
        f"{counts[SUBSTANTIVE]} substantive refutation(s) of a stated result, "
        f"{counts[ERRATUM]} erratum/errata (a proof step, printed formula or informal "
        f"sentence), {counts[TABLE_NUMBER]} experiment table number(s)"
    )


def _exit_status(summaries: list[dict]) -> int:
    """0: every verdict as expected and every power run and positive control as required;
    1: a decided verdict differs from the expected one, a perturbation was missed or a positive
    control failed; 3: the only departures are "undecided" verdicts where a decision was
    expected (the budget did not decide: rerun with --profile thorough)."""
    wrong = [s for s in summaries if not s["as_expected"] and s["verdict"] != "undecided"]
    missed = [s for s in summaries if (s.get("power") or {}).get("caught") is False]
    control = [s for s in summaries if (s.get("positive_control") or {}).get("holds") is False]
    undecided = [s for s in summaries if not s["as_expected"] and s["verdict"] == "undecided"]
    for label, group in (
        ("verdict(s) differ from what the testbed expects", wrong),
        ("perturbation(s) not caught", missed),
        ("positive control(s) not holding", control),
        ("claim(s) undecided where the profile should decide", undecided),
    ):
        if group:
            print(f"{len(group)} {label}: {', '.join(s['id'] for s in group)}", file=sys.stderr)
    if wrong or missed or control:
        return 1
    return 3 if undecided else 0


def _measure_report_tables(results: Path, resume: bool, progress: bool, executor: Executor) -> None:
    """The report's measured tables: communication per iteration and rounds to error, their
    units of work through ``executor`` as the claims'."""
    print(
        f"communication table: {communication.write_table(results, resume, progress, executor.run)}"
    )
    print(f"rounds to error: {comparison_table.run_all(results, resume, progress, executor.run)}")


__all__ = ["check_command", "refutations_line"]

"""The report's sections beyond the claims: communication, rounds to error, replication, bench.

Each section is read from results files that a measuring step wrote (nothing is measured here):

- ``communication.json`` (:mod:`testbed_app.communication`, written by ``testbed check``);
- ``comparison/rounds_to_error.json`` and ``.csv`` (:mod:`theory_checks.comparison.runs`, idem);
- ``replication/*.json`` in :data:`results_format.REPLICATION_SCHEMA` form;
- ``bench/*.json`` in :data:`results_format.BENCH_SCHEMA` form;
- ``calibration/summary.json`` (:mod:`theory_checks.calibration`, written by
  ``testbed calibrate``);
- ``mutation/summary.json`` (:mod:`theory_checks.mutation`, written by ``testbed mutate``).

A missing file gives the section with the line "not run", the exact command that writes it and
how long that takes; a file that cannot be read gives a note. Each section is a :class:`Section`
of tables and figures, rendered by the same templates into the HTML page and its Markdown twin
(:mod:`reports.rendering`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reports.experiment_sections import bench
from reports.experiment_sections import replication
from reports.figure_cache import FigureCache
from reports.figure_cache import figure_key
from reports.figure_spec import COMPARISON_PLOT_VERSION
from reports.figure_spec import Trace
from reports.section_model import Column
from reports.section_model import Command
from reports.section_model import Section
from reports.section_model import Table
from reports.section_model import cell_class
from reports.section_model import check_command as _check_command
from reports.section_model import column_table
from reports.section_model import fmt as _fmt
from reports.section_model import not_run as _not_run
from reports.section_model import read_json as _read_json
from results_format.layout import CALIBRATION
from results_format.layout import COMMUNICATION
from results_format.layout import COMPARISON
from results_format.layout import MUTATION
from results_format.layout import SUMMARY
from results_format.records import calibration_records_problem
from results_format.records import calibration_summary_problem
from results_format.records import mutation_summary_problem
from results_format.summary_records import CalibrationRow
from results_format.summary_records import CalibrationSummary
from results_format.summary_records import CommunicationTable
from results_format.summary_records import ComparisonRow
from results_format.summary_records import ComparisonTarget
from results_format.summary_records import MutantRow
from results_format.summary_records import MutationSummary
from results_format.summary_records import RoundsToError
from results_format.validation import seal_problem

__all__ = [
    "Command",
    "Section",
    "Table",
    "bench",
    "build_sections",
    "calibration",
    "cell_class",
    "communication",
    "mutation",
    "replication",
    "rounds_to_error",
]


# --------------------------------------------------------------------------- communication


def communication(results_dir: Path) -> Section:
    section = Section("communication", "Communication per outer iteration")
    data = _read_json(results_dir / COMMUNICATION, section, _check_command(results_dir))
    if data is None:
        return section
    problem = seal_problem(data) if isinstance(data, dict) else "not a JSON object"
    if problem is not None:  # never shown as measured
        section.notes.append(
            f"{COMMUNICATION} not trusted ({problem}); its numbers are not "
            f"shown. Rerun `testbed check --results {results_dir}`."
        )
        return section
    table = CommunicationTable.from_json(data)
    iterations = "?" if table.iterations is None else table.iterations
    section.paragraphs.append(
        f"Every registered algorithm at its defaults, {iterations} outer "
        "iterations on the regression grid's problem (seed 0): communication rounds of each "
        "iteration as counted by the ledger, against the paper's formula with the parameters "
        "substituted (evaluated at each iteration's drawn N' where the truncation is random)."
    )
    rows = []
    for r in table.rows:
        params = ", ".join(f"{k} = {v}" for k, v in (r.formula_parameters or {}).items())
        value = (
            _fmt(r.formula_value)
            if r.formula_value is not None
            else "per iteration: " + ", ".join(_fmt(v) for v in r.formula_per_iteration)
        )
        rows.append(
            (
                str(r.algorithm),
                str(r.formula_source or r.paper),
                (r.formula or "—") + (f" ({params})" if params else ""),
                value,
                ", ".join(_fmt(v) for v in r.measured_rounds),
                _fmt(r.agrees),
                _fmt(r.floats_per_round, 4),
                _fmt(r.floats_per_iteration, 4),
                r.note or "",
            )
        )
    section.tables.append(
        Table(
            (
                "Algorithm",
                "Source",
                "Formula (rounds per iteration)",
                "Formula value",
                "Measured rounds per iteration",
                "Agrees",
                "Floats per round",
                "Floats per iteration",
                "Note",
            ),
            tuple(rows),
        )
    )
    return section


# --------------------------------------------------------------------------- rounds to error


def rounds_to_error(results_dir: Path, out_dir: Path, cache: FigureCache | None = None) -> Section:
    """The rounds-to-target table of :mod:`theory_checks.comparison.runs`: one target and one
    "reached" definition (shared with the comparison claims), each algorithm tuned the same way
    and at its paper's prescribed steps, per-problem ratios with their geometric mean."""
    section = Section("rounds-to-error", "Rounds to reach the target: papers vs testbed")
    folder = results_dir / COMPARISON
    data = _read_json(folder / "rounds_to_error.json", section, _check_command(results_dir))
    if data is None:
        return section
    if not isinstance(data, dict) or not isinstance(data.get("comparisons"), list):
        section.notes.append(
            "rounds_to_error.json is in an older format (no 'comparisons'); "
            "rerun `testbed check --fresh` to measure it again."
        )
        return section
    table = RoundsToError.from_json(data)
    target, tuning = table.target, table.tuning_rule
    section.paragraphs.append(
        f"Target: {_or_unknown(target.quantity)} <= {_fmt(target.value)}. Reached: "
        f"{_or_unknown(target.reached)}; budget {_fmt(target.round_budget)} rounds, a run "
        f"that does not reach counts {_fmt(target.cap)}. The comparison claims use this "
        "same definition (theory_checks/comparison/runs.py). Tuned rows: every algorithm's outer "
        f"step {_or_unknown(tuning.step)} with c in {_or_unknown(tuning.grid)}, selected by "
        f"{_or_unknown(tuning.selection)}; prescribed rows: each paper's own steps."
    )
    rows = [_comparison_row(c) for c in table.comparisons]
    section.tables.append(
        Table(
            (
                "Comparison",
                "Steps",
                "Paper's claim (source)",
                "Setting",
                "Rounds per iteration (candidate / FedNest)",
                "Candidate step",
                "Rounds / FedNest's, per problem",
                "Geometric mean [95%]",
                "Notes",
            ),
            tuple(rows),
            "Ratios below 1: the candidate reaches the target in fewer rounds. * FedNest solves "
            "that problem in one outer iteration: outside the claims' population, excluded from "
            "the geometric mean.",
        )
    )
    _rounds_figure(section, folder, target, out_dir, cache)
    return section


def _or_unknown(value: object) -> object:
    return "?" if value is None else value


def _comparison_row(c: ComparisonRow) -> tuple[str, ...]:
    """One comparison's row: the per-problem ratios and their geometric mean with its
    interval (a problem FedNest solves in one outer iteration starred)."""
    ratios = ", ".join(
        _fmt(s.ratio, 2) + ("*" if s.fednest_one_iteration else "") for s in c.per_seed
    )
    interval = c.interval_95
    mean = _fmt(c.geometric_mean_ratio, 3)
    if isinstance(interval, list) and len(interval) == 2:
        mean += f" [{_fmt(interval[0], 3)}, {_fmt(interval[1], 3)}]"
    rpi = c.rounds_per_iteration or {}
    step = (c.tuning or {}).get("candidate", {})
    notes = sorted({str(s.note) for s in c.per_seed if s.note})
    return (
        f"{c.candidate} vs {c.baseline}",
        str(c.rule),
        f"{c.claim} ({c.source})" + ("" if c.claimed else " [context row, not a claim]"),
        str(c.setting),
        f"{_fmt(rpi.get('candidate'))} / {_fmt(rpi.get('baseline'))}",
        (
            f"c = {_fmt(step.get('multiple'))}"
            if isinstance(step, dict) and step.get("multiple") is not None
            else "prescribed"
        ),
        ratios,
        mean,
        "; ".join(notes),
    )


def _rounds_figure(
    section: Section,
    folder: Path,
    target: ComparisonTarget,
    out_dir: Path,
    cache: FigureCache | None,
) -> None:
    """The rounds-to-error figure of the tuned runs in ``rounds_to_error.csv`` (drawn when its
    inputs changed), or a note saying why there is none."""
    try:
        curves = _read_curves(folder / "rounds_to_error.csv")
    except FileNotFoundError:
        section.notes.append("rounds_to_error.csv is missing; no figure.")
        return
    except (OSError, UnicodeDecodeError, ValueError, KeyError, csv.Error) as error:
        section.notes.append(f"rounds_to_error.csv unreadable ({error}); no figure.")
        return
    if not curves:
        section.notes.append("rounds_to_error.csv holds no tuned run; no figure.")
        return
    name = "comparison.rounds_to_error.png"
    comparisons = sorted({k for traces in curves.values() for t in traces for k in t.values})
    # a target without its value: the comparisons' default (theory_checks/comparison/runs.py)
    targets = {k: float(target.value if target.value is not None else 0.1) for k in comparisons}
    own = cache is None
    cache = cache or FigureCache.load(out_dir / "figures")

    def draw(path: Path) -> dict[str, Any]:
        from reports.comparison_figure import plot_rounds_to_error  # matplotlib when drawing

        return {"artists": plot_rounds_to_error(curves, targets, path)}

    try:
        key = figure_key(COMPARISON_PLOT_VERSION, [sorted(curves.items()), targets])
        cache.draw(name, key, draw)
    finally:
        if own:
            cache.save()
    section.figures.append(
        (
            f"figures/{name}",
            "relative stationarity against communication rounds and oracle "
            "calls, tuned steps, one column per comparison, log scale",
            "One column per comparison (tuned steps): colour is the algorithm, one line per "
            "problem; dashed grey: the target. Top row against communication rounds, bottom row "
            "against oracle calls; log y-axes (geometric rates are straight lines).",
        )
    )


def _read_curves(path: Path) -> dict[str, list[Trace]]:
    """Tuned runs of ``rounds_to_error.csv``: per algorithm, one trace per (comparison,
    problem) whose one metric is the comparison's relative stationarity."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    runs: dict[tuple[str, str, str, str], list[dict[str, str]]] = {}
    for r in rows:
        if r.get("rule") != "tuned" or not r.get("stationarity"):
            continue
        runs.setdefault((r["comparison"], r["role"], r["algorithm"], r["seed"]), []).append(r)
    curves: dict[str, list[Trace]] = {}
    for (comparison, _, name, seed), run in runs.items():
        run.sort(key=lambda r: float(r["iteration"]))
        curves.setdefault(name, []).append(
            Trace(
                seed,
                tuple(float(r["comm_rounds"]) for r in run),
                tuple(float(r["oracle_calls"]) for r in run),
                {comparison: tuple(float(r["stationarity"]) for r in run)},
            )
        )
    return curves


# --------------------------------------------------------------------------- calibration


def _trusted_summary(
    section: Section,
    path: Path,
    command: Command,
    absent: str,
    problem_of: Callable[[Any], str | None],
) -> Any | None:
    """The JSON summary at ``path`` (``<folder>/summary.json``) once it is present, readable and
    trusted (``problem_of`` finds nothing wrong with it); otherwise None, and the section says
    why: ``absent`` and the ``command`` that makes it, or what is wrong (its numbers are never
    shown as measured)."""
    if not path.is_file():
        _not_run(section, absent, command)
        return None
    data = _read_json(path, section, command)
    if data is None:
        return None
    problem = problem_of(data)
    if problem is not None:
        section.notes.append(
            f"{path.parent.name}/{path.name} not trusted ({problem}); its numbers are "
            f"not shown. Rerun `{command.command}`."
        )
        return None
    return data


def calibration(results_dir: Path) -> Section:
    """Observed false-failure rates of the statistical claims over independent seeds."""
    section = Section("calibration", "Calibration of the statistical claims")
    path = results_dir / CALIBRATION / SUMMARY
    command = Command(
        f"testbed calibrate --seeds 300 --results {results_dir}",
        "11-20 minutes per cheap claim on 2 cores on the fast profile, hours for all; "
        "resumes per block of seeds",
    )
    data = _trusted_summary(
        section,
        path,
        command,
        "calibration/summary.json is absent: `testbed calibrate --seeds 300` "
        "(or `tox -e calibrate`) runs every statistical claim under 300 independent "
        "Monte Carlo seeds",
        lambda data: (
            calibration_summary_problem(data) or calibration_records_problem(data, results_dir)
        ),
    )
    if data is None:
        return section
    summary = CalibrationSummary.from_json(data)
    section.paragraphs.append(
        f"Each statistical claim run on the correct implementation under {summary.seeds} "
        f"independent Monte Carlo seeds ({summary.profile} profile; the drawn cases stay "
        'the same, every stream changes). For a claim that holds, a "fails as stated" is a '
        "false failure: its observed rate, with the exact 95% Clopper-Pearson interval, is "
        "consistent with the stated rate when the interval's lower end does not exceed it. For "
        "a claim that fails as stated, the column counts the seeds that confirmed the "
        "refutation (its power). Undecided runs are counted apart."
    )
    section.tables.append(column_table(CALIBRATION_COLUMNS, summary.claims))
    return section


def _observed_rate(c: CalibrationRow) -> str:
    """The observed rate of "fails as stated" with its Clopper-Pearson interval."""
    rate = c.refuted / c.seeds if c.seeds else math.nan
    return f"{_fmt(rate)} [{_fmt(c.rate_low)}, {_fmt(c.rate_high)}]"


#: The calibration table: one row per statistical claim.
CALIBRATION_COLUMNS: tuple[Column[CalibrationRow], ...] = (
    ("Claim", lambda c: c.claim),
    ("Expected", lambda c: c.expected),
    ("Seeds", lambda c: _fmt(c.seeds)),
    ("Fails as stated", lambda c: _fmt(c.refuted)),
    ("Undecided", lambda c: _fmt(c.undecided)),
    ("Observed rate [95% CI]", _observed_rate),
    ("Stated false-failure rate", lambda c: _fmt(c.stated_rate)),
    ("Consistent", lambda c: _fmt(c.consistent)),
)


# --------------------------------------------------------------------------- mutation


def mutation(results_dir: Path) -> Section:
    """The mutation table: each realistic bug, the claims run against it, the claim that killed
    it or why it is equivalent (the claims' power, measured)."""
    section = Section("mutation", "Power measured by mutants")
    path = results_dir / MUTATION / SUMMARY
    command = Command(
        f"testbed mutate --results {results_dir}",
        "about 30 s on 2 cores on the fast profile (27 s of CPU for the 99 "
        "mutants); resumes claim by claim",
    )
    data = _trusted_summary(
        section,
        path,
        command,
        "mutation/summary.json is absent: `testbed mutate` runs every mutant "
        "of the catalogue against the claims that concern it",
        lambda data: mutation_summary_problem(data, results_dir),
    )
    if data is None:
        return section
    summary = MutationSummary.from_json(data)
    counts = summary.counts
    section.paragraphs.append(
        f"Each mutant is a realistic bug in one estimator or algorithm family (a count off by "
        "one, a step doubled or halved, a missing 1/M, 1/tau or 1/(N + 1), per-client instead "
        "of averaged, a dropped or sign-flipped correction, a stale iterate, a wrong Push-Sum "
        "weight), run against the claims that concern its family and hold on the correct code, "
        'cheapest first, until one kills it (its verdict is "fails as stated", or its check '
        f"cannot run on it). {summary.profile} profile: {_fmt(counts.mutants)} of "
        f"{_fmt(summary.catalogue)} mutants recorded, {_fmt(counts.killed)} killed, "
        f"{_fmt(counts.equivalent)} equivalent (no claim can tell them from the correct "
        f"code, for the reason given), {_fmt(counts.survived)} survived."
    )
    rows = [_mutant_row(m) for m in summary.mutants]
    section.tables.append(
        Table(
            (
                "Mutant",
                "Family",
                "Kind",
                "The bug",
                "Claims run",
                "Result",
                "Cases passed before the kill",
                "As expected",
            ),
            tuple(rows),
            "Claims run: the claims checked on the mutant before the first kill, of those that "
            "concern its entries. A killer marked (error) refused the mutant: its check, or a "
            "guard of the library, raised. As expected: killed, or declared equivalent and not "
            "killed.",
            folded=True,
        )
    )
    return section


def _mutant_row(m: MutantRow) -> tuple[str, ...]:
    """One mutant's row: the claims run against it and what became of it."""
    if m.status == "killed":
        result = "killed by " + ", ".join(str(k) for k in m.killed_by)
    elif m.status == "equivalent":
        result = f"equivalent: {m.equivalent}"
    else:
        result = "survived"
    return (
        m.mutant,
        m.family,
        m.kind,
        m.description,
        f"{_fmt(m.claims_run)} of {_fmt(m.planned)}",
        result,
        _fmt(m.cases_passed_before_kill),
        _fmt(m.as_expected),
    )


def build_sections(
    results_dir: Path, out_dir: Path, cache: FigureCache | None = None
) -> list[Section]:
    """Every extra section, in report order."""
    return [
        calibration(results_dir),
        mutation(results_dir),
        communication(results_dir),
        rounds_to_error(results_dir, out_dir, cache),
        replication(results_dir),
        bench(results_dir),
    ]

"""One claim's section of the report: its figure (cases chosen, panels drawn) and the copy
of its counterexample files.
"""

from __future__ import annotations

import csv
import math
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports import plots
from reports.claims_table import ClaimSection, _within_slack, worst_case, worst_case_text
from reports.results_reading import SeriesRow, _canonical_params, _torn_series_note, read_series

MAX_CASES_PLOTTED = 4
SERIES_ORDER = ("measured", "bound", "fitted", "theory")


# --------------------------------------------------------------------------- figures


def select_cases(
    rows: Sequence[SeriesRow], worst: dict[str, Any] | None, limit: int = MAX_CASES_PLOTTED
) -> list[tuple[str, str]]:
    """Up to ``limit`` cases to plot, deterministically.

    The claim's worst case leads when its series has at least two positive measured values;
    then cases whose measured series spans more than a decade (they show a rate), then cases
    with at least two positive values, then the rest; sorted by (problem id, params) within
    each group.
    """
    values: dict[tuple[str, str], list[float]] = {r.case: [] for r in rows}
    for r in rows:
        if r.series == "measured" and math.isfinite(r.value) and r.value > 0:
            values[r.case].append(r.value)

    def group(case: tuple[str, str]) -> int:
        v = values[case]
        if len(v) >= 2 and max(v) > 10 * min(v):
            return 0
        return 1 if len(v) >= 2 else 2

    ordered = sorted(values, key=lambda c: (group(c), c))
    if worst is not None:
        key = (worst.get("problem_id"), _canonical_params(worst.get("params") or {}))
        match = [c for c in ordered if c == key] or \
            [c for c in ordered if c[0] == key[0]]
        if match and group(match[0]) < 2:
            ordered.remove(match[0])
            ordered.insert(0, match[0])
    return ordered[:limit]


def _series_rank(name: str) -> tuple[int, str]:
    return (SERIES_ORDER.index(name) if name in SERIES_ORDER else len(SERIES_ORDER), name)


def _panels(rows: Sequence[SeriesRow], cases: Sequence[tuple[str, str]],
            worst_key: tuple[str, str] | None) -> list[plots.Panel]:
    panels = []
    for case in cases:
        groups: dict[tuple[str, str, str], list[SeriesRow]] = {}
        for r in rows:
            if r.case == case:
                groups.setdefault((r.estimator, r.series, r.step_name), []).append(r)
        curves = []
        for (estimator, series, step_name), group in sorted(
                groups.items(), key=lambda kv: (_series_rank(kv[0][1]), kv[0])):
            group.sort(key=lambda r: r.step)
            curves.append(plots.Curve(
                estimator, series, step_name, tuple(r.step for r in group),
                tuple(r.value for r in group), tuple(r.oracle_calls for r in group)))
        title = case[0] + (" (worst case)" if case == worst_key else "")
        panels.append(plots.Panel(title, tuple(curves)))
    return panels


def _figure_name(claim_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", claim_id) + ".png"


# --------------------------------------------------------------------------- per claim


def _section(claim: dict[str, Any], results_dir: Path, out_dir: Path) -> ClaimSection:
    worst = worst_case(claim)
    section = ClaimSection(claim, worst_case_text(worst))
    section.counterexample = _copy_counterexample(claim, results_dir, out_dir, section.notes)
    slack = sum(1 for c in claim.get("cases") or [] if isinstance(c, dict)
                and _within_slack(c))
    if slack:
        section.notes.append(
            f"{slack} passed case(s) measured above the bound, within the check's round-off "
            "slack (e.g. a float64 round-off error against a bound of 0).")
    series_rel = str(claim.get("series_file") or f"series/{claim['id']}.csv")
    try:
        rows = read_series(results_dir / series_rel)
    except FileNotFoundError:
        section.notes.append(f"series file {series_rel} is missing; no figure.")
        return section
    except (OSError, UnicodeDecodeError, ValueError, csv.Error) as error:
        section.notes.append(f"series file {series_rel} unreadable ({error}); no figure.")
        return section
    torn = _torn_series_note(results_dir / series_rel, series_rel, len(rows))
    if torn:
        section.notes.append(torn[0])
        if rows and torn[1] is not None and rows[-1].step == torn[1]:
            rows = rows[:-1]  # the cut row: its last number may be cut short too
    if not rows:
        section.notes.append("no series recorded for this claim (it is checked case by "
                             "case; see the table); no figure.")
        return section
    cases = select_cases(rows, worst)
    worst_key = None
    if worst is not None:
        worst_key = (str(worst.get("problem_id")),
                     _canonical_params(worst.get("params") or {}))
    name = _figure_name(section.id)
    try:
        section.notes.extend(plots.plot_claim_figure(
            section.id, _panels(rows, cases, worst_key), out_dir / "figures" / name))
    except (ValueError, OverflowError) as error:
        section.notes.append(f"figure could not be drawn ({error}).")
        return section
    section.figure = f"figures/{name}"
    section.plotted = cases
    n_all = len({r.case for r in rows})
    if n_all > len(cases):
        section.notes.append(f"{len(cases)} of {n_all} cases plotted.")
    return section


def _copy_counterexample(claim: dict[str, Any], results_dir: Path, out_dir: Path,
                         notes: list[str]) -> str | None:
    """Copy the counterexample JSON (and its .npz) under out_dir; return the relative link."""
    rel = claim.get("counterexample")
    if not rel:
        if claim.get("verdict") == "fails as stated":
            notes.append("the claim fails but no counterexample file is recorded.")
        return None
    source = results_dir / str(rel)
    if not source.is_file():
        notes.append(f"counterexample file {rel} is missing from the results.")
        return None
    target_dir = out_dir / "counterexamples"
    target_dir.mkdir(parents=True, exist_ok=True)
    for companion in sorted(source.parent.glob(source.stem + ".*")):
        if companion.is_file() and not companion.name.endswith(".tmp"):
            shutil.copyfile(companion, target_dir / companion.name)
    return f"counterexamples/{source.name}"

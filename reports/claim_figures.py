"""One claim's section of the report: its figure (cases chosen, panels built, drawn when its
inputs changed) and the copy of its counterexample files.
"""

from __future__ import annotations

import csv
import filecmp
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.case_titles import case_specs
from reports.case_titles import case_title
from reports.claims_table import ClaimSection
from reports.claims_table import within_slack
from reports.claims_table import worst_case
from reports.claims_table import worst_case_text
from reports.figure_cache import FigureCache
from reports.figure_cache import figure_key
from reports.figure_spec import KIND_LABELS
from reports.figure_spec import PLOT_VERSION
from reports.figure_spec import Curve
from reports.figure_spec import FigureSpec
from reports.figure_spec import FitPanel
from reports.figure_spec import SeriesPanel
from reports.figure_spec import choose_summary
from reports.figure_spec import interval_words
from reports.figure_spec import quantity_label
from reports.figure_spec import slope_guide
from reports.figure_spec import step_label
from reports.results_reading import NOT_TRUSTED
from reports.results_reading import SeriesRow
from reports.results_reading import canonical_params
from reports.results_reading import read_series
from reports.results_reading import torn_series_note
from results_format import atomic_write_bytes
from results_format.claim_kinds import COMMUNICATION_COUNT
from results_format.claim_kinds import RATE_KINDS
from results_format.claim_kinds import RATE_LAWS
from results_format.claim_record import CaseRecord
from results_format.claim_record import ClaimRecord
from results_format.claim_record import FitRecord
from results_format.layout import COUNTEREXAMPLES
from results_format.layout import SERIES
from results_format.paths import UnsafePath
from results_format.paths import inside

MAX_CASES_PLOTTED = 4
SERIES_ORDER = ("measured", "bound", "fitted", "theory")


def select_cases(
    rows: Sequence[SeriesRow], worst: CaseRecord | None, limit: int = MAX_CASES_PLOTTED
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
        key = (worst.problem_id, canonical_params(worst.params or {}))
        match = [c for c in ordered if c == key] or [c for c in ordered if c[0] == key[0]]
        if match and group(match[0]) < 2:
            ordered.remove(match[0])
            ordered.insert(0, match[0])
    return ordered[:limit]


def _series_rank(name: str) -> tuple[int, str]:
    return (SERIES_ORDER.index(name) if name in SERIES_ORDER else len(SERIES_ORDER), name)


def _fits_by_problem(claim: ClaimRecord) -> dict[str, FitRecord]:
    fits: dict[str, FitRecord] = {}
    for case in claim.cases:
        if case.fit is not None:
            fits.setdefault(case.problem_id, case.fit)
    for fit in claim.fits:
        if fit.problem_id:
            fits.setdefault(fit.problem_id, fit)
    return fits


def _ylabel(claim: ClaimRecord) -> str:
    for fit in [c.fit for c in claim.cases] + list(claim.fits):
        if fit is not None and (label := quantity_label(fit.quantity)):
            return label
    return KIND_LABELS.get(claim.kind, "measured value")


def _panels(
    claim: ClaimRecord,
    rows: Sequence[SeriesRow],
    cases: Sequence[tuple[str, str]],
    worst_key: tuple[str, str] | None,
) -> list[SeriesPanel]:
    law = RATE_LAWS.get(claim.kind)
    specs, fits, ylabel = case_specs(claim), _fits_by_problem(claim), _ylabel(claim)
    shared = {pid for pid, _ in cases if sum(1 for p, _ in cases if p == pid) > 1}
    panels = []
    for case in cases:
        groups: dict[tuple[str, str, str], list[SeriesRow]] = {}
        for r in rows:
            if r.case == case:
                groups.setdefault((r.estimator, r.series, r.step_name), []).append(r)
        curves = []
        for (estimator, series, step_name), group in sorted(
            groups.items(), key=lambda kv: (_series_rank(kv[0][1]), kv[0])
        ):
            group.sort(key=lambda r: r.step)
            curves.append(
                Curve(
                    estimator,
                    series,
                    step_name,
                    tuple(r.step for r in group),
                    tuple(r.value for r in group),
                    tuple(r.oracle_calls for r in group),
                )
            )
        measured = [c for c in curves if c.series == "measured"] or curves
        finite = [v for c in measured for v in c.values if math.isfinite(v)]
        ylog = bool(finite) and all(v > 0 for v in finite)
        # a power law is a line on log-log axes; a step 0 (say iteration 0) is left out there
        xlog = law == "power" and sum(1 for c in measured[:1] for x in c.steps if x > 0) >= 2
        guides = []
        # the theory's slope in every panel of a rate or an exponent whose series records no
        # theory (a pale fitted band alone left the theory to the summary panel)
        if law and case[0] in fits and not any(c.series == "theory" for c in curves):
            guide = (
                slope_guide(measured[0], fits[case[0]], "power" if xlog else "geometric")
                if (xlog or law == "geometric")
                else None
            )
            if guide is not None:
                guides.append(guide)
        params = json.loads(case[1]) if case[0] in shared and case[1].startswith("{") else None
        title = case_title(case[0], specs.get(case[0]), params)
        if case == worst_key:
            title = "worst case: " + title
        step_names = sorted({c.step_name for c in curves if c.step_name})
        panels.append(
            SeriesPanel(
                title, step_label(step_names), ylabel, xlog, ylog, tuple(curves), tuple(guides)
            )
        )
    return panels


def _figure_name(claim_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", claim_id) + ".png"


def caption(spec: FigureSpec, fitted_elsewhere: bool) -> str:
    """What the figure shows, in the order drawn (only the elements it has)."""
    series = {c.series for p in spec.series_panels for c in p.curves}
    parts = []
    if spec.series_panels:
        n = len(spec.series_panels)
        axes = (
            "log-log axes (a power law is a straight line)"
            if any(p.xlog for p in spec.series_panels)
            else "log y-axis (a geometric rate is a straight line)"
            if all(p.ylog for p in spec.series_panels)
            else "linear axes"
        )
        if any(
            p.xlog and any(x <= 0 for c in p.curves for x in c.steps) for p in spec.series_panels
        ):
            axes += "; points at a step <= 0 cannot be shown on the log axis"
        parts.append(
            f"{'Panels 1-' + str(n) if n > 1 else 'Panel 1'}: one case each (titled by "
            f"its problem), {axes}. Solid: measured (colour: estimator)"
        )
        if "bound" in series:
            parts.append("dashed: the theoretical bound")
        if "theory" in series:
            parts.append("black dash-dot: the theoretical rate recorded with the series")
        if "fitted" in series:
            parts.append("wide pale band: the fitted rate over its fitting window")
        guides = [g for p in spec.series_panels for g in p.guides]
        if guides:
            parts.append(
                "black dash-dot: the theory's slope (recorded with the fit) drawn "
                "through the measured points it was fitted on, beside the fitted "
                f"slope's {interval_words([g.level for g in guides])} (pale fan)"
            )
        if spec.oracle_row:
            parts.append("second row: the same against oracle calls")
    text = "; ".join(parts) + ("." if parts else "")
    # "Right:" only where there is a panel on its left
    where = " Right: " if spec.series_panels else ""
    if isinstance(spec.summary, FitPanel):
        words = interval_words([p.level for p in spec.summary.points])
        text += (
            f"{where}each case's fitted value with its {words} (green: holds, red: "
            "fails, purple: undecided) against the theory recorded with the fit (black "
            "dash-dot) and the region the check allows (grey)."
        )
    elif spec.summary is not None:
        text += f"{where}each case's measured value (green: holds, red cross: fails) against "
        if not spec.summary.against_bound:
            text += "its bound (black dash-dot)."
        elif (
            "==" in spec.summary.relation
            or "count" in spec.summary.title
            or "rounds" in spec.summary.title
        ):
            text += (
                "its formula; x is the formula's value, so a count that agrees lies on the line."
            )
        else:
            text += (
                "its bound; x is the bound's value, so a case that holds lies on or below "
                "the line y = x, and one above it fails."
            )
    if fitted_elsewhere:
        text += (
            " The fit is in another variable or window than the plotted axis, so its "
            "theory is shown in the right-hand panel only."
        )
    return text.strip()


def _draw(spec: FigureSpec, path: Path) -> dict[str, Any]:
    from reports.plots import draw_figure  # matplotlib only when a figure must be drawn

    notes, artists = draw_figure(spec, path)
    return {"notes": notes, "artists": artists}


def claim_section(
    claim: ClaimRecord, results_dir: Path, out_dir: Path, cache: FigureCache | None = None
) -> ClaimSection:
    """What the report shows about one claim; its figure is drawn through ``cache`` (a cache
    of its own, saved at once, when None)."""
    if claim.verdict == NOT_TRUSTED:  # never shown as measured: no figure, no number
        return ClaimSection(
            claim,
            "not shown (its results file is not trusted)",
            notes=[
                f"results file claims/{claim.id}.json not trusted: {claim.trust_problem}"
                f"; rerun `testbed check --claim {claim.id.split('@')[0]}`."
            ],
        )
    worst = worst_case(claim)
    section = ClaimSection(claim, worst_case_text(worst))
    if worst is not None:
        section.worst_title = case_title(worst.problem_id, worst.spec)
    section.counterexample, section.counterexample_files = _copy_counterexample(
        claim, results_dir, out_dir, section.notes
    )
    slack = sum(1 for c in claim.cases if within_slack(c))
    if slack:
        section.notes.append(
            f"{slack} passed case(s) measured above the bound, within the check's round-off "
            "slack (e.g. a float64 round-off error against a bound of 0)."
        )
    rows = _read_rows(claim, results_dir, section)
    summary = choose_summary(claim, {r.series for r in rows})
    if claim.kind == COMMUNICATION_COUNT and summary is not None:
        rows = []  # one count per case and iteration: the summary shows them all
    cases = select_cases(rows, worst, MAX_CASES_PLOTTED - (summary is not None))
    worst_key = None
    if worst is not None:
        worst_key = (worst.problem_id, canonical_params(worst.params or {}))
    panels = _panels(claim, rows, cases, worst_key)
    if not panels and summary is None:
        if section.notes and section.notes[-1].startswith("series file"):
            section.notes[-1] += "; no figure."
        return section
    kind = claim.kind.replace("_", " ")
    spec = FigureSpec(section.id, f"{section.id} ({kind})", tuple(panels), summary)
    name = _figure_name(section.id)
    own = cache is None
    cache = cache or FigureCache.load(out_dir / "figures")
    try:
        entry = cache.draw(name, figure_key(PLOT_VERSION, spec), lambda p: _draw(spec, p))
    except (ValueError, OverflowError) as error:
        cache.forget(name)
        section.notes.append(f"figure could not be drawn ({error}).")
        return section
    finally:
        if own:
            cache.save()
    section.notes.extend(str(n) for n in entry.get("notes") or [])
    section.artists = list(entry.get("artists") or [])
    section.figure = f"figures/{name}"
    fitted_elsewhere = (
        claim.kind in RATE_KINDS
        and isinstance(summary, FitPanel)
        and bool(panels)
        and not any(
            p.guides or any(c.series in ("theory", "fitted") for c in p.curves) for p in panels
        )
    )
    section.caption = caption(spec, fitted_elsewhere)
    section.alt = (
        f"{section.id}: measured against the theory"
        + (f" on {len(panels)} case{'s' if len(panels) > 1 else ''}" if panels else "")
        + (f"; {summary.title}" if summary else "")
    )
    n_all = len({r.case for r in rows})
    if n_all > len(cases):
        section.notes.append(f"{len(cases)} of {n_all} cases plotted.")
    return section


def _read_rows(claim: ClaimRecord, results_dir: Path, section: ClaimSection) -> list[SeriesRow]:
    """The claim's series rows; a note (and no rows) when the file is missing or unreadable."""
    series_rel = claim.series_file or f"{SERIES}/{claim.id}.csv"
    try:
        rows = read_series(inside(results_dir, series_rel, f"{claim.id}: series_file"))
    except UnsafePath as error:
        section.notes.append(f"series file not read: {error}")
        return []
    except FileNotFoundError:
        section.notes.append(f"series file {series_rel} is missing")
        return []
    except (OSError, UnicodeDecodeError, ValueError, csv.Error) as error:
        section.notes.append(f"series file {series_rel} unreadable ({error})")
        return []
    torn = torn_series_note(results_dir / series_rel, series_rel, len(rows))
    if torn:
        section.notes.append(torn[0])
        if rows and torn[1] is not None and rows[-1].step == torn[1]:
            rows = rows[:-1]  # the cut row: its last number may be cut short too
    if not rows:
        section.notes.append(
            "no series recorded for this claim (it is checked case by case; see the table)"
        )
    return rows


def _copy_counterexample(
    claim: ClaimRecord, results_dir: Path, out_dir: Path, notes: list[str]
) -> tuple[str | None, list[str]]:
    """Copy the counterexample JSON and its companions (the .npz arrays) under out_dir, each
    only when changed; return the relative link of the JSON and of every file copied."""
    rel = claim.counterexample
    if not rel:
        if claim.verdict == "fails as stated":
            notes.append("the claim fails but no counterexample file is recorded.")
        return None, []
    try:  # a path read from a file: only ever a file of the results folder (checked before)
        source = inside(results_dir, rel, f"{claim.id}: counterexample")
    except UnsafePath as error:
        notes.append(f"{error}.")
        return None, []
    if not source.is_file():
        notes.append(f"counterexample file {rel} is missing from the results.")
        return None, []
    target_dir = out_dir / COUNTEREXAMPLES
    target_dir.mkdir(parents=True, exist_ok=True)
    # the counterexample's files the claim's results recorded (their digests were checked)
    files = []
    for relative in sorted(claim.files):
        companion = results_dir / relative
        if Path(relative).parent != Path(rel).parent or companion.stem != source.stem:
            continue
        target = target_dir / companion.name
        if not (target.is_file() and filecmp.cmp(companion, target, shallow=False)):
            atomic_write_bytes(target, companion.read_bytes())
        files.append(f"{COUNTEREXAMPLES}/{companion.name}")
    return f"{COUNTEREXAMPLES}/{source.name}", files

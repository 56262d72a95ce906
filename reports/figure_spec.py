"""What one claim's figure shows, as data: built from the results files, drawn by :mod:`plots`.

A :class:`FigureSpec` holds everything a figure is drawn from, so it is also the figure's cache
key (:mod:`reports.figure_cache`): the same spec and :data:`PLOT_VERSION` give the same PNG.

- **Series panels** (one per plotted case): the case's series as its CSV records them (measured,
  theoretical bound, fitted and theoretical rate), against the step, titled by the problem's
  description. Power laws (``scaling_exponent`` claims) get log-log axes, rates semi-log.
- **Theory slope** (:class:`Guide`): for a rate or an exponent whose CSV holds no theory series,
  the fit's ``theory`` slope (and its fitted interval) drawn through the measured points of the
  window where the fit's recorded ``estimate`` is reproduced. When no window of the plotted axis
  reproduces it (the fit is in another variable, say ``(M-S)/(S(M-1))``), no slope is drawn.
- **Summary panel**: per case, the fitted value with its interval against the theory and the
  region the check allows (:class:`FitPanel`); or, for a bound or count without such series,
  the measured value against its bound or formula (:class:`CasePanel`).

Every theory line comes from values in the results files (a series, a fit's ``theory``, a case's
``bound``); a claim that records none gets none.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import math
import re
from collections.abc import Sequence
from pathlib import Path

from results_format.claim_kinds import BIAS_BOUND
from results_format.claim_kinds import BOUND_KINDS
from results_format.claim_kinds import COMMUNICATION_COUNT
from results_format.claim_kinds import LINEAR_RATE
from results_format.claim_kinds import SCALING_EXPONENT
from results_format.claim_kinds import VARIANCE_BOUND
from results_format.claim_record import CaseRecord
from results_format.claim_record import ClaimRecord
from results_format.claim_record import FitRecord


def _drawing_code_version(*modules: str) -> str:
    """The drawing code's version: a hash of the modules that draw, and matplotlib's version,
    so that an edit of the drawing code (or another matplotlib) draws every figure again
    without anyone remembering to bump a number."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in modules:
        digest.update((here / name).read_bytes())
    try:
        matplotlib = importlib.metadata.version("matplotlib")
    except importlib.metadata.PackageNotFoundError:
        matplotlib = "unknown"
    return f"{digest.hexdigest()[:16]} matplotlib {matplotlib}"


#: Part of every claim figure's cache key (:mod:`reports.figure_cache`).
PLOT_VERSION = "claim-figure " + _drawing_code_version("figure_spec.py", "plots.py")
#: The same for the rounds-to-error figure (:mod:`reports.comparison_figure`).
COMPARISON_PLOT_VERSION = "rounds-to-error " + _drawing_code_version(
    "figure_spec.py", "plots.py", "comparison_figure.py"
)

#: y labels when no fit names the quantity (the series files do not name it; see the kind of
#: claim, :mod:`results_format.claim_kinds`)
KIND_LABELS = {
    BIAS_BOUND: "measured: the statement's left-hand side",
    VARIANCE_BOUND: "measured second moment (the statement's left-hand side)",
    LINEAR_RATE: "measured error",
    SCALING_EXPONENT: "measured quantity (see the statement)",
    COMMUNICATION_COUNT: "communication rounds",
    "exact_identity": "residual",
}


@dataclasses.dataclass(frozen=True)
class Curve:
    """One series of one estimator on one case, sorted by step."""

    estimator: str
    series: str
    step_name: str
    steps: tuple[float, ...]
    values: tuple[float, ...]
    oracle_calls: tuple[float, ...]

    @property
    def has_oracle_calls(self) -> bool:
        return any(c > 0 for c in self.oracle_calls)


@dataclasses.dataclass(frozen=True)
class Guide:
    """The theory's slope through the measured points of a window (log-log for a power law,
    semi-log for a geometric rate), beside the fitted slope and its interval."""

    law: str  # "power" or "geometric"
    x_low: float
    x_high: float
    x_anchor: float  # the window's centroid, in the plotted units
    y_anchor: float
    theory: float
    estimate: float
    ci_low: float
    ci_high: float
    estimator: str
    #: the confidence level the fit recorded for its interval (NaN: none, exact data)
    level: float = math.nan


@dataclasses.dataclass(frozen=True)
class SeriesPanel:
    title: str
    xlabel: str
    ylabel: str
    xlog: bool
    ylog: bool
    curves: tuple[Curve, ...]
    guides: tuple[Guide, ...] = ()


@dataclasses.dataclass(frozen=True)
class FitPoint:
    label: str
    estimate: float
    low: float
    high: float
    theory: float
    tolerance: float
    outcome: str
    #: the confidence level the fit recorded for its interval (NaN: none, exact data)
    level: float = math.nan


def interval_words(levels: Sequence[float]) -> str:
    """How the figures name the fits' intervals: by the level the fits recorded ("95%
    interval"), never a level they did not use; "interval (exact data: none)" when none has
    one."""
    finite = sorted({round(level, 6) for level in levels if math.isfinite(level) and level < 1})
    if not finite:
        return "interval (exact data: none)"
    if len(finite) == 1:
        return f"{100 * finite[0]:.6g}% interval"
    return "interval at the level each fit recorded"


@dataclasses.dataclass(frozen=True)
class FitPanel:
    title: str
    ylabel: str
    region: str  # "two-sided", "upper" (at most theory + tolerance), "lower"
    points: tuple[FitPoint, ...]


@dataclasses.dataclass(frozen=True)
class CasePoint:
    label: str
    measured: float
    bound: float
    outcome: str


@dataclasses.dataclass(frozen=True)
class CasePanel:
    title: str
    ylabel: str
    relation: str
    against_bound: bool  # True: measured against the bound (the bounds differ per case)
    points: tuple[CasePoint, ...]


@dataclasses.dataclass(frozen=True)
class FigureSpec:
    claim_id: str
    title: str
    series_panels: tuple[SeriesPanel, ...]
    summary: FitPanel | CasePanel | None = None

    @property
    def oracle_row(self) -> bool:
        return any(c.has_oracle_calls for p in self.series_panels for c in p.curves)


@dataclasses.dataclass(frozen=True)
class Trace:
    """One run of one algorithm (rounds-to-error figure): cumulative rounds and oracle calls,
    and per-metric values."""

    label: str  # e.g. the problem seed
    rounds: tuple[float, ...]
    oracle_calls: tuple[float, ...]
    values: dict[str, tuple[float, ...]]


# --------------------------------------------------------------------------- labels


def quantity_label(fit_quantity: str) -> str | None:
    """The measured quantity a fit's description names: "exponent of X in Y" and
    "log X per Y" give X; None when the description has neither form."""
    text = fit_quantity.strip()
    match = re.match(r"(?:exact |fitted |secant )?exponent of (.+?) in (\S.*)$", text)
    if not match:
        match = re.match(r"log (.+?) per (\S.*)$", text)
    if not match:
        return None
    label = re.sub(r"^(the|an?) ", "", match.group(1).strip())
    return label or None


def step_label(step_names: Sequence[str]) -> str:
    return " / ".join(n.replace("_", " ") for n in step_names) or "step"


def relation_label(relation: str) -> str | None:
    """The quantity a case's relation compares, when it names one before its comparator
    ("max_i E||x_i - x||^2 <= ..." gives "max_i E||x_i - x||^2")."""
    head = re.split(r"\s(?:<=|>=|==|<|>)(?:\s|$)", " " + relation.strip(), maxsplit=1)[0]
    head = head.strip()
    return head if head and re.search(r"[A-Za-z]", head) else None


def fit_region(relation: str) -> str:
    """Which side of the theory a fit's check allows, read from the case's relation text:
    an absolute value is two-sided; otherwise "<=" allows below, ">=" above."""
    if "|" in relation:
        return "two-sided"
    if "<=" in relation:
        return "upper"
    if ">=" in relation:
        return "lower"
    return "two-sided"


# --------------------------------------------------------------------------- the theory slope


def _least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Slope and centroid of the least-squares line through the points."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return math.nan, mx, my
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx, mx, my


def _windows(n: int, above_floor: list[int]) -> list[list[int]]:
    """Index windows to try, largest first: all points, those above the round-off floor, its
    late half, its early half."""
    kept = above_floor
    half = len(kept) // 2
    out = [list(range(n)), kept, kept[half:], kept[: len(kept) - half]]
    return [w for w in out if len(w) >= 2]


def slope_guide(curve: Curve, fit: FitRecord, law: str) -> Guide | None:
    """The fit's theory slope through ``curve``, or None when no window of the curve's axis
    reproduces the fit's recorded estimate (then the fit is of another variable or window)."""
    number = _to_float
    estimate, theory = number(fit.estimate), number(fit.theory)
    low, high, tolerance = (number(v) for v in (fit.ci_low, fit.ci_high, fit.tolerance))
    if not (math.isfinite(estimate) and math.isfinite(theory)):
        return None
    points = [
        (x, y)
        for x, y in zip(curve.steps, curve.values, strict=True)
        if math.isfinite(x) and math.isfinite(y) and y > 0 and (law != "power" or x > 0)
    ]
    if len(points) < 2:
        return None
    xs = [math.log(x) if law == "power" else x for x, _ in points]
    ys = [math.log(y) for _, y in points]
    top = max(ys)
    above_floor = [i for i, y in enumerate(ys) if y > top + math.log(1e-13)]
    half_width = (high - low) / 2 if math.isfinite(high - low) else 0.0
    allowed = max(
        tolerance if math.isfinite(tolerance) else 0.0, half_width, 0.02 * abs(estimate), 1e-9
    )
    for window in _windows(len(points), above_floor):
        slope, cx, cy = _least_squares([xs[i] for i in window], [ys[i] for i in window])
        if math.isfinite(slope) and abs(slope - estimate) <= allowed:
            x_window = [points[i][0] for i in window]
            return Guide(
                law,
                min(x_window),
                max(x_window),
                math.exp(cx) if law == "power" else cx,
                math.exp(cy),
                theory,
                estimate,
                low if math.isfinite(low) else estimate,
                high if math.isfinite(high) else estimate,
                curve.estimator,
                _level(fit),
            )
    return None


def _level(fit: FitRecord) -> float:
    """The fit's recorded confidence level; NaN for a fit on exact data (a residual, or an
    interval of zero width)."""
    if math.isfinite(_to_float(fit.residual)):
        return math.nan
    level = _to_float(fit.confidence)
    if _to_float(fit.ci_low) == _to_float(fit.ci_high) and level >= 1.0:
        return math.nan
    return level


def _to_float(value: object) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return math.nan


# --------------------------------------------------------------------------- summary panels


def claim_fits(claim: ClaimRecord) -> list[tuple[FitRecord, str, str]]:
    """The claim's fits in the order of its ``fits`` list (the fits table's numbering), each
    with its case's outcome and relation; the cases' own fits when the list is empty."""
    by_problem = {c.problem_id: c for c in claim.cases}
    listed = list(claim.fits) or [
        dataclasses.replace(c.fit, problem_id=c.problem_id) for c in claim.cases if c.fit
    ]
    out = []
    for fit in listed:
        case = by_problem.get(str(fit.problem_id))
        out.append((fit, case.outcome, case.relation) if case else (fit, "holds", ""))
    return out


def fit_panel(claim: ClaimRecord, limit: int = 40) -> FitPanel | None:
    """Each fit's value and interval against the theory, numbered as in the fits table; None
    without fits."""
    points, quantity, relation = [], "", ""
    for i, (fit, outcome, case_relation) in enumerate(claim_fits(claim)):
        estimate, theory = _to_float(fit.estimate), _to_float(fit.theory)
        if not (math.isfinite(estimate) and math.isfinite(theory)):
            continue
        quantity = quantity or fit.quantity
        relation = relation or case_relation
        low, high = _to_float(fit.ci_low), _to_float(fit.ci_high)
        points.append(
            FitPoint(
                str(i + 1),
                estimate,
                low if math.isfinite(low) else estimate,
                high if math.isfinite(high) else estimate,
                theory,
                _to_float(fit.tolerance),
                outcome,
                _level(fit),
            )
        )
    if not points:
        return None
    kind = "exponent" if "exponent" in quantity else "slope" if "log" in quantity else "value"
    return FitPanel(
        f"fitted {kind} per case",
        quantity or f"fitted {kind}",
        fit_region(relation),
        tuple(points[:limit]),
    )


def case_panel(cases: Sequence[CaseRecord], kind: str, limit: int = 40) -> CasePanel | None:
    """Each case's measured value against its bound (or formula); None without both."""
    points, relation = [], ""
    for i, case in enumerate(cases):
        measured, bound = _to_float(case.measured), _to_float(case.bound)
        if not (math.isfinite(measured) and math.isfinite(bound)):
            continue
        relation = relation or case.relation
        points.append(CasePoint(str(i + 1), measured, bound, case.outcome))
    if not points:
        return None
    points = points[:limit]
    varying = len({p.bound for p in points}) > 1
    if kind == COMMUNICATION_COUNT:
        title = "measured rounds against the formula, per configuration"
        ylabel = "rounds measured by the ledger"
    else:
        title = "measured against the bound, per case"
        ylabel = relation_label(relation) or KIND_LABELS.get(kind, "measured value")
    return CasePanel(title, ylabel, relation, varying, tuple(points))


def choose_summary(claim: ClaimRecord, series_names: set[str]) -> FitPanel | CasePanel | None:
    """The summary panel: fits for a rate or an exponent; measured against the bound for a
    bound or a count whose series (named ``series_names``) draw no theory; None otherwise."""
    fits = fit_panel(claim)
    if fits is not None:
        return fits
    if claim.kind not in BOUND_KINDS:
        return None
    if series_names & {"bound", "theory"}:
        return None
    return case_panel(claim.cases, claim.kind)

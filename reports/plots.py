"""Drawing the claims' figures: a :class:`~reports.figure_spec.FigureSpec` becomes one PNG.

Headless and reproducible: the Agg backend is selected before pyplot is imported, every figure
is drawn under the fixed :data:`RC_PARAMS`, and each estimator keeps the colour :data:`STYLES`
gives it (names not listed there get a colour derived from a hash of the name, so it is the same
in every run). One style on every figure: measured solid in the estimator's colour, theoretical
bound dashed in that colour, theory (rate, slope, level) black dash-dot, fitted values and their
interval pale in the estimator's colour, the region a check allows pale grey
(:data:`SERIES_STYLES`). Every artist carries a ``gid`` naming its role ("measured", "bound",
"theory-slope", ...): :func:`draw_figure` returns the roles drawn per panel, which the figure
manifest records and the tests read.
"""

from __future__ import annotations

import hashlib
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import cast

import matplotlib
from cycler import cycler

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

from reports.figure_spec import CasePanel  # noqa: E402
from reports.figure_spec import Curve  # noqa: E402
from reports.figure_spec import FigureSpec  # noqa: E402
from reports.figure_spec import FitPanel  # noqa: E402
from reports.figure_spec import FitPoint  # noqa: E402
from reports.figure_spec import Guide  # noqa: E402
from reports.figure_spec import SeriesPanel  # noqa: E402
from reports.figure_spec import interval_words  # noqa: E402

# Fixed so that figures do not depend on a user's matplotlibrc. DejaVu Sans ships with
# matplotlib, so no system or web font is needed.
RC_PARAMS: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "figure.titlesize": 10.5,
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "savefig.facecolor": "white",
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "axes.grid": True,
    "axes.grid.which": "major",
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.5,
    "lines.markersize": 3.5,
    "axes.prop_cycle": cycler(color=["#444444"]),
}

# Estimator name (as in testbed.registry) -> colour and legend label. Colours are from the
# Okabe-Ito colour-blind-safe palette.
STYLES: dict[str, dict[str, str]] = {
    "exact": {"color": "#000000", "label": "exact"},
    "aid-cg": {"color": "#0072B2", "label": "AID-CG"},
    "aid-neumann": {"color": "#D55E00", "label": "AID-Neumann"},
    "itd": {"color": "#009E73", "label": "ITD"},
    "fednest": {"color": "#CC79A7", "label": "FedNest"},
    "aggitd": {"color": "#E69F00", "label": "AggITD"},
    "fedmsa": {"color": "#56B4E9", "label": "FedMSA"},
    "hgp": {"color": "#8C564B", "label": "HGP"},
    # Outer algorithms: a darker shade of their paper's estimator colour.
    "lfednest": {"color": "#7F3C8D", "label": "LFedNest"},
    "fbo-aggitd": {"color": "#A66F00", "label": "FBO-AggITD"},
    "hgp-personalization": {"color": "#5C3A32", "label": "HGP (HGP-PL outer loop)"},
}

# For names not in STYLES: picked by a stable hash of the name (not Python's salted hash()).
FALLBACK_COLORS: tuple[str, ...] = (
    "#1F77B4",
    "#FF7F0E",
    "#2CA02C",
    "#D62728",
    "#9467BD",
    "#8C564B",
    "#E377C2",
    "#7F7F7F",
    "#BCBD22",
    "#17BECF",
)
THEORY_COLOR = "#000000"
#: The dash-dotted black of a theoretical line (a slope, a bound or formula, a rate).
THEORY_LINE: dict[str, Any] = {"color": THEORY_COLOR, "linestyle": "-."}
REGION_COLOR = "#9aa4ae"
OUTCOME_COLORS = {"holds": "#1a7f37", "fails": "#b42318", "undecided": "#6f42c1"}

# Series name (as in the CSV "series" column) -> line style and legend label.
SERIES_STYLES: dict[str, dict[str, Any]] = {
    "measured": {"linestyle": "-", "linewidth": 1.6, "label": "measured", "zorder": 3},
    "bound": {"linestyle": "--", "linewidth": 1.4, "label": "theoretical bound", "zorder": 2},
    # A wide pale band under the measured line, so both stay visible where they coincide.
    "fitted": {
        "linestyle": "-",
        "linewidth": 6.0,
        "alpha": 0.3,
        "label": "fitted rate",
        "zorder": 1,
        "solid_capstyle": "butt",
    },
    # Black, so that it stays visible on top of a bound with the same values.
    "theory": {
        "linestyle": "-.",
        "linewidth": 1.1,
        "color": THEORY_COLOR,
        "label": "theoretical rate",
        "zorder": 4,
    },
}
_FALLBACK_SERIES_STYLE: dict[str, Any] = {"linestyle": (0, (1, 3)), "linewidth": 1.2, "zorder": 1}
MAX_MARKERS = 40  # measured points get markers when a curve has at most this many
#: Artist roles that show the theory (a test asserts every rate, bound and exponent figure
#: draws one of them).
THEORY_ROLES = ("bound", "theory", "theory-slope", "theory-level", "case-bound")

__all__ = [
    "FALLBACK_COLORS",
    "RC_PARAMS",
    "SERIES_STYLES",
    "STYLES",
    "THEORY_ROLES",
    "Curve",
    "draw_figure",
    "estimator_style",
    "series_style",
]


def estimator_style(name: str) -> dict[str, str]:
    """Colour and label of an estimator; a stable fallback colour for unknown names."""
    if name in STYLES:
        return dict(STYLES[name])
    digest = hashlib.sha256(name.encode()).hexdigest()
    return {"color": FALLBACK_COLORS[int(digest, 16) % len(FALLBACK_COLORS)], "label": name}


def series_style(series: str) -> dict[str, Any]:
    """Line style of a series; a thin dotted line with the series name for unknown ones."""
    return dict(SERIES_STYLES.get(series, {**_FALLBACK_SERIES_STYLE, "label": series}))


def wrap(text: str, width: int = 38, lines: int = 3) -> str:
    out = textwrap.wrap(text, width=width, break_long_words=True)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1] + "…"
    return "\n".join(out)


class _Legend:
    """Legend entries by role, in the order first drawn."""

    def __init__(self) -> None:
        self.handles: dict[str, Any] = {}

    def add(self, key: str, handle: Any) -> None:
        self.handles.setdefault(key, handle)


def _keep(
    xs: Sequence[float], ys: Sequence[float], xlog: bool, ylog: bool
) -> tuple[list[float], list[float]]:
    keep = [
        (x, y)
        for x, y in zip(xs, ys, strict=True)
        if math.isfinite(x) and math.isfinite(y) and (y > 0 or not ylog) and (x > 0 or not xlog)
    ]
    return [x for x, _ in keep], [y for _, y in keep]


def _draw_curves(ax: Any, panel: SeriesPanel, legend: _Legend, use_oracle: bool) -> bool:
    drawn = False
    for curve in panel.curves:
        if use_oracle and not curve.has_oracle_calls:
            continue
        x, y = _keep(
            curve.oracle_calls if use_oracle else curve.steps,
            curve.values,
            panel.xlog and not use_oracle,
            panel.ylog,
        )
        if not x:
            continue
        style = series_style(curve.series)
        label = style.pop("label")
        color = style.pop("color", estimator_style(curve.estimator)["color"])
        marker = "o" if curve.series == "measured" and len(x) <= MAX_MARKERS else None
        role = curve.series if curve.series in SERIES_STYLES else f"series:{curve.series}"
        ax.plot(x, y, color=color, marker=marker, gid=role, **style)
        style.pop("zorder", None)
        legend.add(
            f"{curve.estimator}:{curve.series}",
            Line2D(
                [],
                [],
                color=color,
                label=f"{estimator_style(curve.estimator)['label']}: {label}",
                marker=marker,
                **style,
            ),
        )
        drawn = True
    return drawn


def _draw_guide(ax: Any, guide: Guide, legend: _Legend) -> None:
    """The theory slope (black dash-dot) and the fitted interval (a pale fan) over the window."""
    if guide.law == "power":
        n = 24
        ratio = guide.x_high / guide.x_low
        xs = [guide.x_low * ratio ** (i / (n - 1)) for i in range(n)]

        def line(slope: float) -> list[float]:
            return [guide.y_anchor * (x / guide.x_anchor) ** slope for x in xs]
    else:
        xs = [guide.x_low + (guide.x_high - guide.x_low) * i / 23 for i in range(24)]

        def line(slope: float) -> list[float]:
            return [guide.y_anchor * math.exp(slope * (x - guide.x_anchor)) for x in xs]

    color = estimator_style(guide.estimator)["color"]
    low, high = line(guide.ci_low), line(guide.ci_high)
    if guide.ci_high > guide.ci_low:
        ax.fill_between(
            xs, low, high, color=color, alpha=0.25, linewidth=0, zorder=1, gid="fitted-interval"
        )
        legend.add(
            "fitted-interval",
            Patch(color=color, alpha=0.25, label=f"fitted slope, {interval_words([guide.level])}"),
        )
    else:
        ax.plot(
            xs,
            line(guide.estimate),
            color=color,
            linewidth=5,
            alpha=0.3,
            zorder=1,
            gid="fitted-interval",
            solid_capstyle="butt",
        )
        legend.add(
            "fitted-interval",
            Line2D(
                [],
                [],
                color=color,
                linewidth=5,
                alpha=0.3,
                label="fitted slope (interval of zero width)",
            ),
        )
    ax.plot(
        xs,
        line(guide.theory),
        **THEORY_LINE,
        linewidth=1.2,
        zorder=4,
        gid="theory-slope",
    )
    legend.add(
        "theory-slope",
        Line2D(
            [],
            [],
            **THEORY_LINE,
            label="theory slope (through the measured points)",
        ),
    )


def _plain_log_ticks(axis: Any) -> None:
    """Tick labels of a log axis as plain numbers (2, 4, 8, 16, not 2 x 10^0)."""
    axis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def _series_panel(
    axes: Any, col: int, panel: SeriesPanel, legend: _Legend, oracle_row: bool, notes: list[str]
) -> None:
    top = axes[0][col]
    top.set_title(wrap(panel.title))
    if _draw_curves(top, panel, legend, use_oracle=False):
        for guide in panel.guides:
            _draw_guide(top, guide, legend)
        top.set_yscale("log" if panel.ylog else "linear")
        top.set_xscale("log" if panel.xlog else "linear")
        if panel.xlog:
            _plain_log_ticks(top.xaxis)
    else:
        notes.append(f"{panel.title}: no values to plot")
        top.text(
            0.5,
            0.5,
            "no values to show",
            ha="center",
            va="center",
            transform=top.transAxes,
            fontsize=8,
            color="#666666",
        )
    top.set_xlabel(panel.xlabel + (" (log scale)" if panel.xlog else ""))
    if col == 0:
        top.set_ylabel(wrap(panel.ylabel + (" (log scale)" if panel.ylog else ""), 40, 2))
    if oracle_row:
        bottom = axes[1][col]
        if _draw_curves(bottom, panel, legend, use_oracle=True):
            bottom.set_yscale("log" if panel.ylog else "linear")
        bottom.set_xlabel("oracle calls")
        if col == 0:
            bottom.set_ylabel(wrap(panel.ylabel + (" (log scale)" if panel.ylog else ""), 40, 2))


def _fit_summary(ax: Any, panel: FitPanel, legend: _Legend) -> None:
    xs = [int(p.label) if p.label.isdigit() else i + 1 for i, p in enumerate(panel.points)]
    values = [v for p in panel.points for v in (p.low, p.high, p.theory)]
    tolerances = [p.tolerance for p in panel.points if math.isfinite(p.tolerance)]
    span = max(values) - min(values)
    pad = max(span, max(tolerances, default=0.0), 1e-3) * 0.25
    lo, hi = min(values) - pad, max(values) + pad
    for x, p in zip(xs, panel.points, strict=True):
        _fit_point(ax, x, p, panel.region, (lo - pad, hi + pad))
    lo = min(
        lo,
        min(p.theory - (p.tolerance if math.isfinite(p.tolerance) else 0) for p in panel.points)
        - pad * 0.2,
    )
    hi = max(
        hi,
        max(p.theory + (p.tolerance if math.isfinite(p.tolerance) else 0) for p in panel.points)
        + pad * 0.2,
    )
    ax.set_ylim(lo, hi)
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    if len(xs) <= 12:
        ax.set_xticks(xs)
    ax.set_xlabel("fit (numbered as in the fits table)")
    ax.set_ylabel(wrap(panel.ylabel, 44, 3), fontsize=7.5)
    ax.set_title(panel.title)
    _fit_legend(legend, interval_words([p.level for p in panel.points]))


def _fit_point(ax: Any, x: float, p: FitPoint, region: str, limits: tuple[float, float]) -> None:
    """One fit of the summary: the region its check allows (to ``limits`` on an open side),
    the theory's level and the fitted value with its interval, coloured by outcome."""
    tol = p.tolerance if math.isfinite(p.tolerance) else 0.0
    bottom, top = {
        "two-sided": (p.theory - tol, p.theory + tol),
        "upper": (limits[0], p.theory + tol),
        "lower": (p.theory - tol, limits[1]),
    }[region]
    ax.bar(
        x,
        top - bottom,
        bottom=bottom,
        width=0.8,
        color=REGION_COLOR,
        alpha=0.22,
        linewidth=0,
        zorder=0,
        gid="allowed-region",
    )
    ax.hlines(
        p.theory,
        x - 0.4,
        x + 0.4,
        **THEORY_LINE,
        linewidth=1.3,
        zorder=3,
        gid="theory-level",
    )
    color = OUTCOME_COLORS.get(p.outcome, "#444444")
    ax.errorbar(
        [x],
        [p.estimate],
        yerr=[[p.estimate - p.low], [p.high - p.estimate]],
        fmt="o",
        color=color,
        markersize=4,
        capsize=3,
        zorder=4,
        gid="fit-estimate",
    )


def _fit_legend(legend: _Legend, words: str) -> None:
    """The fit summary's legend entries (``words``: how its intervals are named)."""
    legend.add(
        "fit-estimate",
        Line2D(
            [],
            [],
            color="#444444",
            marker="o",
            linestyle="",
            label=f"fitted value, {words} (colour: outcome)",
        ),
    )
    legend.add(
        "theory-level",
        Line2D([], [], **THEORY_LINE, label="theory (recorded with the fit)"),
    )
    legend.add(
        "allowed-region",
        Patch(color=REGION_COLOR, alpha=0.3, label="allowed by the check (tolerance)"),
    )


def draw_case_points(ax: Any, xs: Sequence[float], points: Sequence[Any]) -> None:
    """The cases' measured values, coloured by outcome; a case that fails is drawn last, as a
    larger cross ringed in white, so that passing points at the same place (say all at the
    origin) never hide it."""
    order = sorted(range(len(points)), key=lambda i: points[i].outcome == "fails")
    for i in order:
        fails = points[i].outcome == "fails"
        ax.scatter(
            [xs[i]],
            [points[i].measured],
            c=OUTCOME_COLORS.get(points[i].outcome, "#444444"),
            s=90 if fails else 22,
            marker="X" if fails else "o",
            edgecolors="white" if fails else "none",
            linewidths=0.8,
            zorder=6 if fails else 4,
            gid="case-measured",
        )


def _case_summary(ax: Any, panel: CasePanel, legend: _Legend) -> None:
    values = [v for p in panel.points for v in (p.measured, p.bound)]
    positive = all(v > 0 for v in values)
    log = positive and max(values) / min(values) > 20
    if panel.against_bound:
        xs = [p.bound for p in panel.points]
        draw_case_points(ax, xs, panel.points)
        line = sorted(set(xs))
        ax.plot(
            line,
            line,
            **THEORY_LINE,
            linewidth=1.2,
            zorder=3,
            gid="case-bound",
        )
        ax.set_xlabel(
            "the formula's value"
            if "count" in panel.title or "rounds" in panel.title
            else "the bound's value"
        )
        if log:
            ax.set_xscale("log")
    else:
        xs = list(range(1, len(panel.points) + 1))
        draw_case_points(ax, xs, panel.points)
        ax.hlines(
            [p.bound for p in panel.points],
            [x - 0.4 for x in xs],
            [x + 0.4 for x in xs],
            **THEORY_LINE,
            linewidth=1.3,
            zorder=3,
            gid="case-bound",
        )
        ax.set_xlim(0.3, len(xs) + 0.7)
        if len(xs) <= 12:
            ax.set_xticks(xs)
        ax.set_xlabel("case")
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(wrap(panel.ylabel + (" (log scale)" if log else ""), 44, 3), fontsize=7.5)
    ax.set_title(panel.title if len(panel.title) < 45 else wrap(panel.title, 45, 2))
    legend.add(
        "case-measured",
        Line2D(
            [],
            [],
            color="#444444",
            marker="o",
            linestyle="",
            label="measured per case (colour: outcome; a failing "
            "case: a large cross, drawn on top)",
        ),
    )
    legend.add(
        "case-bound",
        Line2D(
            [],
            [],
            **THEORY_LINE,
            label="bound or formula (" + (panel.relation[:40] or "=") + ")",
        ),
    )


def panel_record(number: int, title: str, ax: Any) -> dict[str, Any]:
    """What a panel shows, for the figure manifest: the roles of its artists (their ``gid``),
    its axes' scales and labels."""
    return {
        "panel": number,
        "title": title,
        "roles": sorted({str(a.get_gid()) for a in ax.get_children() if a.get_gid()}),
        "xscale": ax.get_xscale(),
        "yscale": ax.get_yscale(),
        "xlabel": ax.get_xlabel(),
        "ylabel": ax.get_ylabel().replace("\n", " "),
    }


def draw_figure(spec: FigureSpec, path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Draw ``spec`` into a PNG at ``path``.

    Returns:
        Notes for the report (panels with nothing to draw) and, per panel (top row), what it
        shows (:func:`panel_record`).

    Raises:
        ValueError: if the spec has no panel.
    """
    panels = list(spec.series_panels)
    if not panels and spec.summary is None:
        raise ValueError(f"{spec.claim_id}: no cases to plot")
    oracle_row = spec.oracle_row
    ncols, nrows = len(panels) + (spec.summary is not None), 2 if oracle_row else 1
    notes: list[str] = []
    legend = _Legend()
    with matplotlib.rc_context(cast(Any, RC_PARAMS)):
        width = max(3.4 * ncols + 0.5, 7.0)  # room for the legend under one or two panels
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(width, 2.7 * nrows + 1.3), layout="constrained", squeeze=False
        )
        try:
            for col, panel in enumerate(panels):
                _series_panel(axes, col, panel, legend, oracle_row, notes)
            if spec.summary is not None:
                ax = axes[0][ncols - 1]
                if isinstance(spec.summary, FitPanel):
                    _fit_summary(ax, spec.summary, legend)
                else:
                    _case_summary(ax, spec.summary, legend)
                if oracle_row:
                    axes[1][ncols - 1].set_axis_off()
            handles = list(legend.handles.values())
            if handles:
                fig.legend(
                    handles=handles,
                    loc="outside lower center",
                    ncols=max(1, min(len(handles), 3, int(width // 3.3))),
                    frameon=False,
                )
            fig.suptitle(spec.title)
            titles = [p.title for p in panels] + ([spec.summary.title] if spec.summary else [])
            artists = [
                panel_record(i + 1, t, ax)
                for i, (t, ax) in enumerate(zip(titles, axes[0], strict=False))
            ]
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, format="png", metadata={"Software": None})
        finally:
            plt.close(fig)
    return notes, artists

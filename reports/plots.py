"""Figures of the report: measured series against the theory, one PNG per claim.

Headless and reproducible: the Agg backend is selected before pyplot is imported, every figure
is drawn under the fixed :data:`RC_PARAMS`, and each estimator keeps the colour :data:`STYLES`
gives it (names not listed there get a colour derived from a hash of the name, so it is the
same in every run). Within a figure the series are told apart by line style: measured solid,
theoretical bound dashed in the same colour, fitted rate a wide pale band of that colour,
theoretical rate black dash-dot (:data:`SERIES_STYLES`).

The module knows nothing about claims: :func:`plot_claim_figure` takes :class:`Panel` objects
(one per problem case) holding :class:`Curve` objects (one per estimator and series), so any
new claim whose series CSV follows the runner's layout is plotted with no code change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import matplotlib
from cycler import cycler

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

__all__ = [
    "RC_PARAMS",
    "SERIES_STYLES",
    "STYLES",
    "Curve",
    "Panel",
    "Trace",
    "estimator_style",
    "plot_claim_figure",
    "plot_rounds_to_error",
    "series_style",
]

# Fixed so that figures do not depend on a user's matplotlibrc. DejaVu Sans ships with
# matplotlib, so no system or web font is needed.
RC_PARAMS: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 8,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "figure.titlesize": 11,
    "figure.dpi": 100,
    "savefig.dpi": 110,
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
    "#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2",
    "#7F7F7F", "#BCBD22", "#17BECF",
)

# Series name (as in the CSV "series" column) -> line style and legend label.
SERIES_STYLES: dict[str, dict[str, Any]] = {
    "measured": {"linestyle": "-", "linewidth": 1.6, "label": "measured", "zorder": 3},
    "bound": {"linestyle": "--", "linewidth": 1.4, "label": "theoretical bound", "zorder": 2},
    # A wide pale band under the measured line, so both stay visible where they coincide.
    "fitted": {"linestyle": "-", "linewidth": 6.0, "alpha": 0.3, "label": "fitted rate",
               "zorder": 1, "solid_capstyle": "butt"},
    # Black, so that it stays visible on top of a bound with the same values.
    "theory": {"linestyle": "-.", "linewidth": 1.1, "color": "#000000",
               "label": "theoretical rate", "zorder": 4},
}
_FALLBACK_SERIES_STYLE: dict[str, Any] = {"linestyle": (0, (1, 3)), "linewidth": 1.2,
                                          "zorder": 1}

MAX_MARKERS = 40  # measured points get markers when a curve has at most this many


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
class Panel:
    """The curves of one problem case; ``title`` names the case."""

    title: str
    curves: tuple[Curve, ...]


def estimator_style(name: str) -> dict[str, str]:
    """Colour and label of an estimator; a stable fallback colour for unknown names."""
    if name in STYLES:
        return dict(STYLES[name])
    digest = hashlib.sha256(name.encode()).hexdigest()
    return {"color": FALLBACK_COLORS[int(digest, 16) % len(FALLBACK_COLORS)], "label": name}


def series_style(series: str) -> dict[str, Any]:
    """Line style of a series; a thin dotted line with the series name for unknown ones."""
    return dict(SERIES_STYLES.get(series, {**_FALLBACK_SERIES_STYLE, "label": series}))


def _wrap_title(text: str, width: int = 34) -> str:
    """Break a dotted problem id at dots so that it fits above a panel."""
    words = text.replace(".", ". ").split()
    return "\n".join(line.replace(". ", ".") for line in
                     textwrap.wrap(" ".join(words), width=width, break_long_words=True))


def _positive(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """Points that a log y-axis can show (finite x, finite positive y)."""
    keep = [(x, y) for x, y in zip(xs, ys, strict=True)
            if math.isfinite(x) and math.isfinite(y) and y > 0]
    return [x for x, _ in keep], [y for _, y in keep]


def _draw(ax: Any, curves: Sequence[Curve], use_oracle: bool) -> bool:
    """Draw ``curves`` on ``ax`` against steps or oracle calls; False if nothing was drawn."""
    drawn = False
    for curve in curves:
        if use_oracle and not curve.has_oracle_calls:
            continue
        xs = curve.oracle_calls if use_oracle else curve.steps
        x, y = _positive(xs, curve.values)
        if not x:
            continue
        style = series_style(curve.series)
        style.pop("label", None)
        color = style.pop("color", estimator_style(curve.estimator)["color"])
        marker = "o" if curve.series == "measured" and len(x) <= MAX_MARKERS else None
        ax.plot(x, y, color=color, marker=marker, **style)
        drawn = True
    if drawn:
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no positive values\nto show on a log axis", ha="center",
                va="center", transform=ax.transAxes, fontsize=8, color="#666666")
        ax.set_xticks([])
        ax.set_yticks([])
    return drawn


def plot_claim_figure(
    title: str, panels: Sequence[Panel], path: Path, ylabel: str = "error"
) -> list[str]:
    """Draw one column per case (measured vs theory, log y) and save a PNG at ``path``.

    The top row is against the series' step (its ``step_name`` labels the x-axis); a second
    row against oracle calls is added when any curve records them.

    Args:
        title: figure title (the claim id).
        panels: the cases to show, left to right.
        path: where the PNG is written (parent folders are created).
        ylabel: y-axis label.

    Returns:
        Notes for the report about panels that had nothing to draw.

    Raises:
        ValueError: if ``panels`` is empty.
    """
    if not panels:
        raise ValueError(f"{title}: no cases to plot")
    oracle_row = any(c.has_oracle_calls for p in panels for c in p.curves)
    ncols, nrows = len(panels), 2 if oracle_row else 1
    notes: list[str] = []
    with matplotlib.rc_context(cast(Any, RC_PARAMS)):
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(3.3 * ncols + 0.6, 2.7 * nrows + 1.1),
            layout="constrained", squeeze=False,
        )
        try:
            for col, panel in enumerate(panels):
                step_names = sorted({c.step_name for c in panel.curves if c.step_name})
                top = axes[0][col]
                top.set_title(_wrap_title(panel.title))
                if not _draw(top, panel.curves, use_oracle=False):
                    notes.append(f"{panel.title}: no positive values to plot")
                top.set_xlabel(" / ".join(step_names) or "step")
                if col == 0:
                    top.set_ylabel(f"{ylabel} (log scale)")
                if oracle_row:
                    bottom = axes[1][col]
                    _draw(bottom, panel.curves, use_oracle=True)
                    bottom.set_xlabel("oracle calls")
                    if col == 0:
                        bottom.set_ylabel(f"{ylabel} (log scale)")
            handles = _legend_handles(panels)
            if handles:
                fig.legend(handles=handles, loc="outside lower center",
                           ncols=min(len(handles), 4), frameon=False)
            fig.suptitle(title)
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, format="png", metadata={"Software": None})
        finally:
            plt.close(fig)
    return notes


def _legend_handles(panels: Sequence[Panel]) -> list[Line2D]:
    seen: dict[tuple[str, str], Line2D] = {}
    for panel in panels:
        for curve in panel.curves:
            key = (curve.estimator, curve.series)
            if key in seen:
                continue
            style = series_style(curve.series)
            label = f"{estimator_style(curve.estimator)['label']}: {style.pop('label')}"
            style.pop("zorder", None)
            color = style.pop("color", estimator_style(curve.estimator)["color"])
            seen[key] = Line2D([], [], color=color, label=label, **style)
    return list(seen.values())


@dataclasses.dataclass(frozen=True)
class Trace:
    """One run of one algorithm: cumulative rounds and oracle calls, and per-metric values."""

    label: str  # e.g. the problem seed
    rounds: tuple[float, ...]
    oracle_calls: tuple[float, ...]
    values: dict[str, tuple[float, ...]]


_METRIC_LABELS = {"hypergradient_error": "relative hypergradient error",
                  "suboptimality": "relative suboptimality",
                  "aggitd": "FBO-AggITD vs FedNest: relative stationarity",
                  "fedmsa": "FedMSA vs FedNest: relative stationarity",
                  "lfednest": "LFedNest vs FedNest: relative stationarity",
                  "fedmsa_vs_fednest_n5": "FedMSA vs FedNest (N = 5): stationarity",
                  "lfednest_heterogeneous": "LFedNest vs FedNest, heterogeneous"}


def plot_rounds_to_error(curves: Mapping[str, Sequence[Trace]], targets: dict[str, float],
                         path: Path) -> None:
    """One column per metric in ``targets``; rows: against rounds, against oracle calls.

    Each algorithm keeps its :func:`estimator_style` colour (one thin line per run); the target
    is a dashed grey line; y is logarithmic (geometric rates are straight lines).

    Raises:
        ValueError: if there is nothing to plot.
    """
    if not curves or not targets:
        raise ValueError("rounds to error: no runs or no targets to plot")
    metrics = list(targets)
    with matplotlib.rc_context(cast(Any, RC_PARAMS)):
        fig, axes = plt.subplots(2, len(metrics), figsize=(4.2 * len(metrics) + 0.6, 6.6),
                                 layout="constrained", squeeze=False)
        try:
            handles = []
            for name in sorted(curves):
                style = estimator_style(name)
                for trace in curves[name]:
                    for col, metric in enumerate(metrics):
                        if metric not in trace.values:
                            continue  # a trace of another comparison's column
                        for row, xs in enumerate((trace.rounds, trace.oracle_calls)):
                            x, y = _positive(xs, trace.values[metric])
                            axes[row][col].plot(x, y, color=style["color"], linewidth=1.1,
                                                alpha=0.85)
                handles.append(Line2D([], [], color=style["color"], label=style["label"]))
            for col, metric in enumerate(metrics):
                for row, xlabel in enumerate(("communication rounds", "oracle calls")):
                    ax = axes[row][col]
                    ax.axhline(targets[metric], color="#888888", linestyle="--", linewidth=1.0)
                    ax.set_yscale("log")
                    ax.set_xlabel(xlabel)
                    ax.set_ylabel(f"{_METRIC_LABELS.get(metric, metric)} (log)")
                axes[0][col].set_title(f"{_METRIC_LABELS.get(metric, metric)}, target "
                                       f"{targets[metric]:g}")
            handles.append(Line2D([], [], color="#888888", linestyle="--", label="target"))
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6),
                       frameon=False)
            fig.suptitle("Rounds to reach the target")
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, format="png", metadata={"Software": None})
        finally:
            plt.close(fig)

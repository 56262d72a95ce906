"""The rounds-to-error figure: relative stationarity against rounds and oracle calls, per
comparison, each algorithm in its :func:`~reports.plots.estimator_style` colour."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import cast

import matplotlib

from reports.figure_spec import COMPARISON_PLOT_VERSION
from reports.figure_spec import Trace
from reports.plots import RC_PARAMS
from reports.plots import estimator_style
from reports.plots import panel_record

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

METRIC_LABELS = {
    "hypergradient_error": "relative hypergradient error",
    "suboptimality": "relative suboptimality",
    "aggitd": "FBO-AggITD vs FedNest",
    "fedmsa": "FedMSA vs FedNest",
    "lfednest": "LFedNest vs FedNest",
    "fedmsa_vs_fednest_n5": "FedMSA vs FedNest (N = 5)",
    "lfednest_heterogeneous": "LFedNest vs FedNest, heterogeneous",
}


#: The algorithms of the comparison: Okabe-Ito colours (colour-blind safe) and a line style
#: each, so that two algorithms differ in two ways (the figure used two hard-to-tell shades).
ALGORITHM_STYLES: dict[str, dict[str, Any]] = {
    "fednest": {"color": "#000000", "linestyle": "-", "label": "FedNest"},
    "lfednest": {"color": "#E69F00", "linestyle": "--", "label": "LFedNest"},
    "fbo-aggitd": {"color": "#0072B2", "linestyle": "-.", "label": "FBO-AggITD"},
    "fedmsa": {"color": "#D55E00", "linestyle": ":", "label": "FedMSA"},
    "hgp": {"color": "#009E73", "linestyle": (0, (5, 1, 1, 1, 1, 1)), "label": "HGP"},
}
#: Sizes for a figure shown about as wide as the page (1400 px): at most WIDTH_INCHES at 100
#: dpi, so a 10 pt tick label stays about 14 px on screen (it was 7 px when the figure, 18.6
#: inches wide, was scaled down to the page).
WIDTH_INCHES = 13.5
FONT_SIZES = {
    "font.size": 11,
    "axes.titlesize": 11,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 11,
    "figure.titlesize": 12.5,
}
COLUMNS_PER_ROW = 3


def algorithm_style(name: str) -> dict[str, Any]:
    """The algorithm's colour, line style and label (:data:`ALGORITHM_STYLES`; the estimator
    colour of :mod:`reports.plots` and a solid line for any other)."""
    if name in ALGORITHM_STYLES:
        return dict(ALGORITHM_STYLES[name])
    return {**estimator_style(name), "linestyle": "-"}


def _positive(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    keep = [(x, y) for x, y in zip(xs, ys, strict=True) if y == y and x == x and y > 0]
    return [x for x, _ in keep], [y for _, y in keep]


__all__ = ["COMPARISON_PLOT_VERSION", "plot_rounds_to_error"]


def _draw_traces(
    curves: Mapping[str, Sequence[Trace]], metrics: Sequence[str], axes: list[list[Any]]
) -> list[Line2D]:
    """Each algorithm's runs in its colour, in every column whose metric they record, against
    rounds (top) and oracle calls (bottom); returns the legend's handles, one per algorithm."""
    handles = []
    for name in sorted(curves):
        style = algorithm_style(name)
        for trace in curves[name]:
            for col, metric in enumerate(metrics):
                if metric not in trace.values:
                    continue  # a trace of another comparison's column
                for row, xs in enumerate((trace.rounds, trace.oracle_calls)):
                    x, y = _positive(xs, trace.values[metric])
                    axes[row][col].plot(
                        x,
                        y,
                        color=style["color"],
                        linestyle=style["linestyle"],
                        linewidth=1.5,
                        alpha=0.9,
                        gid="measured",
                    )
        handles.append(
            Line2D(
                [],
                [],
                color=style["color"],
                linestyle=style["linestyle"],
                linewidth=2.0,
                label=style["label"],
            )
        )
    return handles


def _draw_targets(
    targets: dict[str, float], metrics: Sequence[str], axes: list[list[Any]], columns: int
) -> None:
    """The target of each column (a dashed grey line), the log y-axes, labels and titles."""
    for col, metric in enumerate(metrics):
        for row, xlabel in enumerate(("communication rounds", "oracle calls")):
            ax = axes[row][col]
            ax.axhline(
                targets[metric],
                color="#888888",
                linestyle="--",
                linewidth=1.0,
                gid="target",
            )
            ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            if col % columns == 0:
                ax.set_ylabel("relative stationarity (log scale)")
        axes[0][col].set_title(f"{METRIC_LABELS.get(metric, metric)}\ntarget {targets[metric]:g}")


def plot_rounds_to_error(
    curves: Mapping[str, Sequence[Trace]], targets: dict[str, float], path: Path
) -> list[dict[str, Any]]:
    """One column per metric in ``targets``; rows: against rounds, against oracle calls.

    Each algorithm keeps its colour (one thin line per run); the target is a dashed grey line;
    y is logarithmic (geometric rates are straight lines). Returns the artist roles per panel.

    Raises:
        ValueError: if there is nothing to plot.
    """
    if not curves or not targets:
        raise ValueError("rounds to error: no runs or no targets to plot")
    metrics = list(targets)
    # each comparison is a pair of panels (rounds above, oracle calls below); at most
    # COLUMNS_PER_ROW pairs side by side, so the panels keep a readable size
    columns = min(len(metrics), COLUMNS_PER_ROW)
    blocks = -(-len(metrics) // columns)
    width = min(4.4 * columns + 0.6, WIDTH_INCHES)
    with matplotlib.rc_context(cast(Any, {**RC_PARAMS, **FONT_SIZES})):
        fig, grid = plt.subplots(
            2 * blocks,
            columns,
            figsize=(width, 6.2 * blocks + 0.6),
            layout="constrained",
            squeeze=False,
        )
        axes = [
            [grid[2 * (i // columns) + row][i % columns] for i in range(len(metrics))]
            for row in range(2)
        ]
        for i in range(len(metrics), blocks * columns):  # the unused panels of the last block
            for row in range(2):
                grid[2 * (i // columns) + row][i % columns].set_axis_off()
        try:
            handles = _draw_traces(curves, metrics, axes)
            _draw_targets(targets, metrics, axes, columns)
            handles.append(Line2D([], [], color="#888888", linestyle="--", label="target"))
            fig.legend(
                handles=handles,
                loc="outside lower center",
                ncols=min(len(handles), 6),
                frameon=False,
            )
            fig.suptitle("Rounds to reach the target (tuned steps; one line per problem)")
            artists = [
                panel_record(i + 1, METRIC_LABELS.get(m, m), axes[0][i])
                for i, m in enumerate(metrics)
            ]
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, format="png", metadata={"Software": None})
        finally:
            plt.close(fig)
    return artists

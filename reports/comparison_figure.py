"""The rounds-to-error figure: relative stationarity against rounds and oracle calls, per
comparison, each algorithm in its :func:`~reports.plots.estimator_style` colour."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import matplotlib

from reports.figure_spec import COMPARISON_PLOT_VERSION, Trace
from reports.plots import RC_PARAMS, estimator_style, panel_record

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

METRIC_LABELS = {"hypergradient_error": "relative hypergradient error",
                 "suboptimality": "relative suboptimality",
                 "aggitd": "FBO-AggITD vs FedNest",
                 "fedmsa": "FedMSA vs FedNest",
                 "lfednest": "LFedNest vs FedNest",
                 "fedmsa_vs_fednest_n5": "FedMSA vs FedNest (N = 5)",
                 "lfednest_heterogeneous": "LFedNest vs FedNest, heterogeneous"}


def _positive(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    keep = [(x, y) for x, y in zip(xs, ys, strict=True) if y == y and x == x and y > 0]
    return [x for x, _ in keep], [y for _, y in keep]


__all__ = ["COMPARISON_PLOT_VERSION", "plot_rounds_to_error"]


def plot_rounds_to_error(curves: Mapping[str, Sequence[Trace]], targets: dict[str, float],
                         path: Path) -> list[dict[str, Any]]:
    """One column per metric in ``targets``; rows: against rounds, against oracle calls.

    Each algorithm keeps its colour (one thin line per run); the target is a dashed grey line;
    y is logarithmic (geometric rates are straight lines). Returns the artist roles per panel.

    Raises:
        ValueError: if there is nothing to plot.
    """
    if not curves or not targets:
        raise ValueError("rounds to error: no runs or no targets to plot")
    metrics = list(targets)
    with matplotlib.rc_context(cast(Any, RC_PARAMS)):
        fig, axes = plt.subplots(2, len(metrics), figsize=(3.6 * len(metrics) + 0.6, 6.0),
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
                                                alpha=0.85, gid="measured")
                handles.append(Line2D([], [], color=style["color"], label=style["label"]))
            for col, metric in enumerate(metrics):
                for row, xlabel in enumerate(("communication rounds", "oracle calls")):
                    ax = axes[row][col]
                    ax.axhline(targets[metric], color="#888888", linestyle="--", linewidth=1.0,
                               gid="target")
                    ax.set_yscale("log")
                    ax.set_xlabel(xlabel)
                    if col == 0:
                        ax.set_ylabel("relative stationarity (log scale)")
                axes[0][col].set_title(f"{METRIC_LABELS.get(metric, metric)}\ntarget "
                                       f"{targets[metric]:g}")
            handles.append(Line2D([], [], color="#888888", linestyle="--", label="target"))
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6),
                       frameon=False)
            fig.suptitle("Rounds to reach the target (tuned steps; one line per problem)")
            artists = [panel_record(i + 1, METRIC_LABELS.get(m, m), axes[0][i])
                       for i, m in enumerate(metrics)]
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, format="png", metadata={"Software": None})
        finally:
            plt.close(fig)
    return artists

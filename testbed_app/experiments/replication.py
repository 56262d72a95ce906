"""Replication rows: the paper's number beside the testbed's, computed from a metrics table.

A config's ``[replication]`` table names one metric (and ``[[replication.extra_rows]]`` more);
each becomes one row of ``<results>/replication/<experiment>.json``
(:data:`~testbed_app.experiments.base.REPLICATION_SCHEMA`):

- ``rounds_to_accuracy`` (threshold ``a``): the ``rounds`` value of the first metrics row whose
  ``test_accuracy >= a`` (communication rounds, the papers' x-axis; AggITD Table 2, FedMSA
  Fig. 4); ``None`` when the run never reaches ``a``. Rows where the accuracy was not evaluated
  (NaN) are skipped, so the answer is exact only with ``eval_every = 1``.
- ``final_test_accuracy``: the last evaluated test accuracy, in percent (the papers' unit).
- ``final_metric`` (``column``): the value of that metrics column (e.g. HGP's influence
  ``r2``) at the last evaluated row.

"Evaluated" means the row's test accuracy is not NaN (the runner evaluates every
``eval_every`` steps and always at the last one). A NaN at the last evaluated row is not
skipped over to an earlier number: the value is ``None``. A diverged run (``status`` "diverged
at step k") gives no number at all: each row's ``testbed_value`` is that status, and a partial
run (``--steps`` below the config's own horizon) says so in the metadata and in each row's
``differences``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from testbed_app.experiments.base import ExperimentConfig, MetricRow

_UNITS = {"rounds_to_accuracy": "communication rounds", "final_test_accuracy": "%",
          "final_metric": ""}


def rounds_to_accuracy(rows: Sequence[MetricRow], threshold: float) -> float | None:
    """Cumulative rounds at the first row with ``test_accuracy >= threshold`` (None: never)."""
    for row in rows:
        accuracy = row.get("test_accuracy", math.nan)
        if not math.isnan(accuracy) and accuracy >= threshold:
            return float(row["rounds"])
    return None


def _evaluated(row: MetricRow) -> bool:
    return not math.isnan(row.get("test_accuracy", 0.0))


def final_value(rows: Sequence[MetricRow], column: str) -> float | None:
    """``column`` at the last evaluated row (None when never evaluated, or NaN there)."""
    if rows and column not in rows[0]:
        raise KeyError(f"metrics have no column {column!r}; columns: {sorted(rows[0])}")
    for row in reversed(rows):
        if _evaluated(row):
            value = row[column]
            return None if math.isnan(value) else float(value)
    return None


def measure(rows: Sequence[MetricRow], spec: Mapping[str, Any]) -> float | None:
    """The testbed's value of one replication row (see the module doc)."""
    metric = spec["metric"]
    if metric == "rounds_to_accuracy":
        return rounds_to_accuracy(rows, float(spec["threshold"]))
    if metric == "final_test_accuracy":
        value = final_value(rows, "test_accuracy")
        return None if value is None else 100.0 * value
    if metric == "final_metric":
        return final_value(rows, str(spec["column"]))
    raise ValueError(f"unknown replication metric {metric!r}")


def metric_label(spec: Mapping[str, Any]) -> str:
    """How the report names the metric, e.g. "rounds to 90% test accuracy"."""
    if spec.get("label"):
        return str(spec["label"])
    metric = spec["metric"]
    if metric == "rounds_to_accuracy":
        return f"rounds to {100 * float(spec['threshold']):g}% test accuracy"
    if metric == "final_test_accuracy":
        return "final test accuracy"
    return f"final {spec['column']}"


def replication_rows(table: Mapping[str, Any], rows: Sequence[MetricRow]) -> list[dict[str, Any]]:
    """One REPLICATION_SCHEMA row per metric of a validated ``[replication]`` table."""
    out = []
    for spec in [table, *table.get("extra_rows", [])]:
        out.append({
            "setting": spec.get("setting") or table.get("setting", ""),
            "metric": metric_label(spec),
            "paper_value": spec.get("paper_value"),
            "testbed_value": measure(rows, spec),
            "unit": spec.get("unit") if spec.get("unit") is not None
            else _UNITS[spec["metric"]],
            "differences": spec.get("differences") or table["differences"],
        })
    return out


def replication_record(config: ExperimentConfig, rows: Sequence[MetricRow],
                       metadata: Mapping[str, Any], status: str = "completed") -> dict[str, Any]:
    """The ``replication/<experiment>.json`` content of a finished (or partial) run.

    ``status`` (the runner's): ``"completed"``; ``"partial: ..."`` (stated in the metadata and
    in front of each row's differences); ``"diverged at step k: ..."`` (each row's
    ``testbed_value`` is ``"diverged at step k"``, never a number).
    """
    if config.replication is None:
        raise ValueError(f"{config.name}: the config has no [replication] table")
    out_rows = replication_rows(config.replication, rows)
    if status.startswith("diverged"):
        short = status.split(":")[0]
        for row in out_rows:
            row["testbed_value"] = short
            row["differences"] = f"{status.upper()[:1]}{status[1:]}. {row['differences']}"
    elif status.startswith("partial"):
        for row in out_rows:
            row["differences"] = f"PARTIAL RUN ({status}). {row['differences']}"
    return {"experiment": config.name, "paper": config.paper,
            "table": config.replication["table"], "metadata": {**metadata, "status": status},
            "rows": out_rows}

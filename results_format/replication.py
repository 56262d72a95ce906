"""Replication rows: how the testbed's number is computed from a run's ``metrics.csv``, and a
replication record checked against the rows it was computed from.

A config's ``[replication]`` table names one metric (and ``[[replication.extra_rows]]`` more);
each becomes one row of ``<results>/replication/<experiment>.json``
(:data:`results_format.REPLICATION_SCHEMA`), with its ``definition`` (the metric and its
threshold or column) so that a reader can compute it again:

- ``rounds_to_accuracy`` (threshold ``a``): the ``rounds`` value of the first metrics row whose
  ``test_accuracy >= a`` (communication rounds, the papers' x-axis; AggITD Table 2, FedMSA
  Fig. 4); ``None`` when the run never reaches ``a``. Rows where the accuracy was not evaluated
  (NaN) are skipped, so the answer is exact only with ``eval_every = 1``.
- ``final_test_accuracy``: the last evaluated test accuracy, in percent (the papers' unit).
- ``final_metric`` (``column``): the value of that metrics column (e.g. HGP's influence
  ``r2``) at the last evaluated row.

"Evaluated" means the row's test accuracy is not NaN (the runner evaluates every
``eval_every`` steps and always at the last one). A NaN at the last evaluated row is not
skipped over to an earlier number: the value is ``None``.

:func:`replication_problem` says why a record cannot be believed: its schema, its seal, or a
row whose number its definition does not give on the run's ``metrics.csv`` (when the record
names the digest of the rows it was computed from and the file still holds them). Standard
library only (see :mod:`results_format`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.layout import RUN_METRICS
from results_format.layout import run_folder
from results_format.metrics import MetricRow
from results_format.metrics import MetricsFileError
from results_format.metrics import read_metrics_notes
from results_format.metrics import rows_digest
from results_format.validation import field_problems
from results_format.validation import seal_problem

UNITS = {
    "rounds_to_accuracy": "communication rounds",
    "final_test_accuracy": "%",
    "final_metric": "",
}
#: The key of the digest of the metrics rows a record was computed from.
ROWS_DIGEST_KEY = "metrics_rows_sha256"

RECORD_SCHEMA: dict[str, Any] = {
    "experiment": "str",
    "paper": "str",
    "table": "str",
    "metadata": "object",
    "rows": "list",
}
ROW_SCHEMA: dict[str, Any] = {
    "setting": "str",
    "metric": "str",
    "paper_value": "number|str|null",
    "testbed_value": "number|str|null",
    "unit": "str",
    "differences": "str",
}


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


def definition(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What a row records of its spec so that :func:`measure` can be run again."""
    return {
        key: spec[key] for key in ("metric", "threshold", "column") if spec.get(key) is not None
    }


def replication_problem(data: Any, results_dir: Path | None = None) -> str | None:
    """Why a replication record cannot be believed (module docstring), or ``None``."""
    problems = field_problems(data, RECORD_SCHEMA)
    if not problems:
        for i, row in enumerate(data["rows"]):
            problems += field_problems(row, ROW_SCHEMA, f"rows[{i}]")
    if not problems:
        problems += [p for p in [seal_problem(data)] if p]
    if problems or results_dir is None or not isinstance(data.get(ROWS_DIGEST_KEY), str):
        return problems[0] if problems else None
    metrics = run_folder(Path(results_dir), str(data["experiment"])) / RUN_METRICS
    try:
        rows, _ = read_metrics_notes(metrics)
    except MetricsFileError as error:
        return f"its run's metrics cannot be read ({error})"
    steps = data["metadata"].get("steps")
    used = rows[:steps] if isinstance(steps, int) else rows
    if not rows or rows_digest(used) != data[ROWS_DIGEST_KEY]:
        return None  # the run went on (or was removed) since: the sealed record stands alone
    for i, row in enumerate(data["rows"]):
        spec = row.get("definition")
        if not isinstance(spec, dict) or isinstance(row["testbed_value"], str):
            continue
        try:
            value = measure(used, spec)
        except (KeyError, ValueError, TypeError) as error:
            return f"rows[{i}].definition cannot be computed ({error})"
        if value != row["testbed_value"]:
            return (
                f"rows[{i}].testbed_value is {row['testbed_value']}, its run's metrics give {value}"
            )
    return None


__all__ = [
    "RECORD_SCHEMA",
    "ROWS_DIGEST_KEY",
    "ROW_SCHEMA",
    "UNITS",
    "definition",
    "final_value",
    "measure",
    "replication_problem",
    "rounds_to_accuracy",
]

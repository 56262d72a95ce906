"""A run's ``metrics.csv``: reading it back (repairing a torn last row), writing it, appending
rows as the run goes (its errors, :class:`ResultsError`, are in
:mod:`testbed_app.experiments.errors`).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from results_format import atomic_write
from results_format import metrics as metrics_format
from results_format.metrics import format_value
from results_format.metrics import rows_digest
from results_format.writing import open_append
from testbed_app.experiments.base import MetricRow
from testbed_app.experiments.errors import CheckpointError
from testbed_app.experiments.errors import ResultsError

__all__ = [
    "CheckpointError",
    "MetricsWriter",
    "ResultsError",
    "read_metrics",
    "read_metrics_notes",
    "write_metrics",
]


def read_metrics_notes(path: Path) -> tuple[list[MetricRow], list[str]]:
    """The rows of a ``metrics.csv`` as floats, and notes on what was repaired
    (:func:`results_format.metrics.read_metrics_notes`: a torn last row is dropped with a note;
    a bad row anywhere else, or steps repeated, skipped or out of order, raise
    :class:`ResultsError` naming the line)."""
    try:
        return metrics_format.read_metrics_notes(path)
    except metrics_format.MetricsFileError as error:
        raise ResultsError(str(error)) from None


def read_metrics(path: Path) -> list[MetricRow]:
    """The rows of a ``metrics.csv`` as floats (an absent file has none; a torn last row is
    left out, see :func:`read_metrics_notes`)."""
    return read_metrics_notes(path)[0]


def write_metrics(path: Path, rows: Sequence[MetricRow]) -> None:
    atomic_write(path, metrics_format.render_rows(rows))


class MetricsWriter:
    """Appends rows to ``metrics.csv`` and flushes after each; the header comes from row 1.
    ``rows``: every row of the file, as written (a checkpoint records their digest)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = read_metrics(path)
        self.columns: list[str] | None = list(self.rows[0]) if self.rows else None
        self.handle = open_append(path)  # a link planted at the name is refused
        self.writer = csv.writer(self.handle)

    def digest(self, step: int) -> str:
        """The digest of rows 1..``step`` (:func:`results_format.metrics.rows_digest`)."""
        return rows_digest(self.rows[:step])

    def append(self, row: MetricRow) -> None:
        if self.columns is None:
            self.columns = list(row)
            self.writer.writerow(self.columns)
        if set(row) != set(self.columns):
            raise ValueError(
                f"metrics row has columns {sorted(row)}, the file has {sorted(self.columns)}"
            )
        self.writer.writerow([format_value(row[key]) for key in self.columns])
        self.handle.flush()
        self.rows.append({key: float(row[key]) for key in self.columns})

    def close(self) -> None:
        self.handle.close()

"""A run's ``metrics.csv``: reading it back (repairing a torn last row), writing it, appending
rows as the run goes; and the errors for results files that cannot be used.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path

from results_format import atomic_write
from testbed_app.experiments.base import MetricRow
from testbed_app.experiments.config import ConfigError


class ResultsError(ConfigError):
    """A results file (metrics.csv, checkpoint.pt) that cannot be used; the message names it
    and says how to go on without losing what is there."""


class CheckpointError(ResultsError):
    """A checkpoint that is corrupt, foreign or of another format."""


def _format(value: float) -> str:
    """Integers without a decimal point; other floats as ``repr`` (exact round trip)."""
    if math.isfinite(value) and float(value).is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(float(value))


def read_metrics_notes(path: Path) -> tuple[list[MetricRow], list[str]]:
    """The rows of a ``metrics.csv`` as floats, and notes on what was repaired.

    A torn last row (an interruption in the middle of writing it: fields missing, a number cut
    short, no final newline) is dropped with a note; the runner recomputes it. A bad row
    anywhere else is not a torn write, and raises :class:`ResultsError` naming the line.
    """
    if not path.exists():
        return [], []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: unreadable ({error}); move it aside or rerun with "
                           "--fresh") from None
    lines = text.splitlines(keepends=True)
    if not lines:
        return [], []
    header = next(csv.reader([lines[0]]))
    if not header or "step" not in header:
        raise ResultsError(f"{path}: line 1 is not a metrics header (no 'step' column): "
                           f"{lines[0].strip()[:80]!r}; move the file aside or rerun with --fresh")
    rows: list[MetricRow] = []
    notes: list[str] = []
    for number, line in enumerate(lines[1:], start=2):
        last = number == len(lines)
        try:
            if not line.endswith("\n"):
                raise ValueError("no final newline")
            fields = next(csv.reader([line]))
            if len(fields) != len(header):
                raise ValueError(f"{len(fields)} fields, the header has {len(header)}")
            rows.append({key: float(value) for key, value in zip(header, fields, strict=True)})
        except (ValueError, csv.Error, StopIteration) as error:
            if last:
                notes.append(f"{path}: torn last row (line {number}: {error}) dropped; it is "
                             "recomputed")
                break
            raise ResultsError(f"{path}: line {number} is not a metrics row ({error}); only a "
                               "torn last row is repaired automatically. Move the file aside "
                               "and rerun with --recover") from None
    return rows, notes


def read_metrics(path: Path) -> list[MetricRow]:
    """The rows of a ``metrics.csv`` as floats (an absent file has none; a torn last row is
    left out, see :func:`read_metrics_notes`)."""
    return read_metrics_notes(path)[0]


def _write_metrics(path: Path, rows: Sequence[MetricRow]) -> None:
    with io.StringIO(newline="") as handle:
        if rows:
            writer = csv.writer(handle)
            writer.writerow(list(rows[0]))
            writer.writerows([_format(v) for v in row.values()] for row in rows)
        atomic_write(path, handle.getvalue())


class _MetricsWriter:
    """Appends rows to ``metrics.csv`` and flushes after each; the header comes from row 1."""

    def __init__(self, path: Path) -> None:
        self.path = path
        existing = read_metrics(path)
        self.columns: list[str] | None = list(existing[0]) if existing else None
        self.handle = path.open("a", newline="")
        self.writer = csv.writer(self.handle)

    def append(self, row: MetricRow) -> None:
        if self.columns is None:
            self.columns = list(row)
            self.writer.writerow(self.columns)
        if set(row) != set(self.columns):
            raise ValueError(f"metrics row has columns {sorted(row)}, the file has "
                             f"{sorted(self.columns)}")
        self.writer.writerow([_format(row[key]) for key in self.columns])
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()

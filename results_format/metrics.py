"""A run's ``metrics.csv``: its format, and reading it back checked.

``runs/<name>/metrics.csv`` has a header (``step``, ``rounds``, ``floats_sent``,
``test_accuracy`` and the experiment's own columns) and one row per step, written as the run
goes: integers without a decimal point, other floats as ``repr`` (exact round trip,
:func:`format_value`). Read back (:func:`read_metrics_notes`), every field must be a number and
the steps must be 1, 2, 3, ... with none repeated, skipped or out of order; ``rounds`` and
``floats_sent`` are cumulative, so they are finite and never decrease. A torn last row (an
interruption in the middle of writing it) is dropped with a note, since the run recomputes
it; anything else is a :class:`MetricsFileError` naming the file and the line.

:func:`rows_digest` is the sha256 of the first rows as written, which a checkpoint and a
replication record keep so that rows edited afterwards are recognised. Standard library only
(see :mod:`results_format`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from collections.abc import Sequence
from pathlib import Path

from results_format.validation import SchemaError

MetricRow = dict[str, float]
#: Columns that count from the start of the run: finite and never decreasing.
CUMULATIVE = ("rounds", "floats_sent")


class MetricsFileError(SchemaError):
    """A ``metrics.csv`` that cannot be used (beyond a torn last row); names file and line."""


def format_value(value: float) -> str:
    """Integers without a decimal point; other floats as ``repr`` (exact round trip)."""
    if math.isfinite(value) and float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def render_rows(rows: Sequence[MetricRow]) -> str:
    """The text of a ``metrics.csv`` holding ``rows`` (empty when there are none)."""
    with io.StringIO(newline="") as handle:
        if rows:
            writer = csv.writer(handle)
            writer.writerow(list(rows[0]))
            writer.writerows([format_value(v) for v in row.values()] for row in rows)
        return handle.getvalue()


def rows_digest(rows: Sequence[MetricRow]) -> str:
    """The sha256 (hex) of :func:`render_rows` of ``rows``."""
    return hashlib.sha256(render_rows(rows).encode()).hexdigest()


def _row_problem(row: MetricRow, previous: MetricRow | None) -> str | None:
    """Why ``row`` cannot follow ``previous`` (steps 1, 2, 3, ...; cumulative columns)."""
    step = row["step"]
    expected = 1 if previous is None else previous["step"] + 1
    if step != expected:
        what = (
            "repeats step"
            if previous is not None and step <= previous["step"]
            else "is out of order at step"
        )
        return f"{what} {format_value(step)} (expected step {format_value(expected)})"
    for key in CUMULATIVE:
        if key in row:
            if not math.isfinite(row[key]):
                return f"{key} is {row[key]}"
            if previous is not None and row[key] < previous[key]:
                return (
                    f"{key} decreases ({format_value(previous[key])} -> "
                    f"{format_value(row[key])}) though it counts from the start"
                )
    return None


def read_metrics_notes(path: Path) -> tuple[list[MetricRow], list[str]]:
    """The rows of a ``metrics.csv`` as floats, and notes on what was repaired (module doc).

    Raises:
        MetricsFileError: the file cannot be read, has no header, or a row other than a torn
            last one is not a metrics row or breaks the order of steps.
    """
    path = Path(path)
    if path.is_symlink():
        raise MetricsFileError(
            f"{path}: a symbolic link; the testbed reads and appends to the "
            "metrics file it wrote, never through a link. Move it aside"
        )
    if not path.exists():
        return [], []
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise MetricsFileError(
            f"{path}: unreadable ({error}); move it aside or rerun with --fresh"
        ) from None
    lines = text.splitlines(keepends=True)
    if not lines:
        return [], []
    header = next(csv.reader([lines[0]]), [])
    if not header or "step" not in header or len(set(header)) != len(header):
        raise MetricsFileError(
            f"{path}: line 1 is not a metrics header (a 'step' column, "
            f"no column twice): {lines[0].strip()[:80]!r}; move the file "
            "aside or rerun with --fresh"
        )
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
            row = {key: float(value) for key, value in zip(header, fields, strict=True)}
        except (ValueError, csv.Error, StopIteration) as error:
            if last:
                notes.append(
                    f"{path}: torn last row (line {number}: {error}) dropped; it is recomputed"
                )
                break
            raise MetricsFileError(
                f"{path}: line {number} is not a metrics row ({error}); "
                "only a torn last row is repaired automatically. Move the "
                "file aside and rerun with --recover"
            ) from None
        problem = _row_problem(row, rows[-1] if rows else None)
        if problem is not None:
            raise MetricsFileError(
                f"{path}: line {number} {problem}; the file was edited or "
                "written by two processes at once. Rerun with --recover "
                "(the file is set aside and the run resumes from its last "
                "good state) or --fresh"
            ) from None
        rows.append(row)
    return rows, notes


__all__ = [
    "CUMULATIVE",
    "MetricRow",
    "MetricsFileError",
    "format_value",
    "read_metrics_notes",
    "render_rows",
    "rows_digest",
]

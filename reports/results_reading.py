"""Reading a results directory: the claim JSON files, ``metadata.json`` and the series CSVs.

Also the small parsers of values written by the producers (numbers, flags, parameters).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any


def _float(value: Any) -> float:
    """A number from JSON or CSV text; accepts ``np.float64(1.5)`` reprs; NaN if unreadable."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        match = re.fullmatch(r"[A-Za-z_][\w.]*\((.*)\)", text)
        if match:
            text = match.group(1).strip().strip("'\"")
        try:
            return float(text)
        except ValueError:
            return math.nan
    return math.nan


def _bool(value: Any) -> bool | None:
    """A flag written as a bool or as its string ("True", "False"); None if absent."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def load_claims(results_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Read every ``claims/*.json`` under ``results_dir``.

    Returns:
        The claims (sorted by id) and notes about files that could not be read.

    Raises:
        FileNotFoundError: when the directory or its claim files are missing.
    """
    hint = f"run `testbed check --results {results_dir}` first to produce results"
    if not results_dir.is_dir():
        raise FileNotFoundError(f"results directory {results_dir} does not exist; {hint}")
    files = sorted((results_dir / "claims").glob("*.json"))
    if not files:
        raise FileNotFoundError(
            f"no claim results (claims/*.json) in {results_dir}; {hint}")
    claims, notes = [], []
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            notes.append(f"{path.name}: unreadable ({error}); skipped")
            continue
        if not isinstance(data, dict):
            notes.append(f"{path.name}: not a claim object; skipped")
            continue
        data.setdefault("id", path.stem)
        claims.append(data)
    if not claims:
        raise FileNotFoundError(f"no readable claim results in {results_dir}; {hint}")
    claims.extend(_registered_but_unchecked(results_dir, {str(c["id"]) for c in claims}))
    claims.sort(key=lambda c: str(c["id"]))
    return claims, notes


def _registered_but_unchecked(results_dir: Path, checked: set[str]) -> list[dict[str, Any]]:
    """Rows for claims registered when the results were written but not (yet) checked.

    ``testbed check`` records the whole claim registry in ``metadata.json``, so the report lists
    every claim from results files alone, marking the ones without results "not checked".
    """
    try:
        registered = json.loads((results_dir / "metadata.json").read_text()).get(
            "claims_registered", [])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    return [dict(entry, verdict="not checked", as_expected=None, n_cases=0, cases=[],
                 fits=[], counterexample=None)
            for entry in registered if isinstance(entry, dict) and entry.get("id") not in checked]


def _load_metadata(results_dir: Path) -> tuple[dict[str, Any], list[str]]:
    path = results_dir / "metadata.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, ["metadata.json is missing: commit, profile and versions unknown"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return {}, [f"metadata.json unreadable ({error})"]
    return (data if isinstance(data, dict) else {}), []


@dataclasses.dataclass(frozen=True)
class SeriesRow:
    """One row of a series CSV, with numbers parsed."""

    estimator: str
    problem_id: str
    params: str
    series: str
    step_name: str
    step: float
    value: float
    oracle_calls: float

    @property
    def case(self) -> tuple[str, str]:
        return (self.problem_id, self.params)


def read_series(path: Path) -> list[SeriesRow]:
    """Rows of a series CSV (the runner's columns); rows with an unreadable step are skipped.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if the file lacks the columns needed to plot.
    """
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        needed = {"problem_id", "series", "step", "value"}
        missing = needed - set(reader.fieldnames or ())
        if reader.fieldnames is not None and missing:
            raise ValueError(f"{path.name}: missing columns {sorted(missing)}")
        rows = []
        for raw in reader:
            step = _float(raw.get("step"))
            if not math.isfinite(step):
                continue
            oracle = _float(raw.get("oracle_calls") or 0)
            rows.append(SeriesRow(
                estimator=raw.get("estimator") or "?",
                problem_id=raw.get("problem_id") or "?",
                params=_canonical_params(raw.get("params") or ""),
                series=raw.get("series") or "?",
                step_name=raw.get("step_name") or "",
                step=step,
                value=_float(raw.get("value")),
                oracle_calls=oracle if math.isfinite(oracle) else 0.0,
            ))
    return rows


def _torn_series_note(path: Path, name: str, n_rows: int) -> tuple[str, float | None] | None:
    """A note when a series CSV was cut short (a write interrupted, a disk filled): its last
    line has no newline or fewer fields than the header. The figure then shows only the
    complete rows, and the reader must know it is truncated."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        return None
    try:
        header, last = next(csv.reader([lines[0]])), next(csv.reader([lines[-1]]))
    except (csv.Error, StopIteration):
        return None
    if text.endswith("\n") and len(last) == len(header):
        return None
    step = _float(dict(zip(header, last, strict=False)).get("step"))
    complete = n_rows - 1 if math.isfinite(step) else n_rows
    return (f"series file {name} is truncated (its last line is cut short: the file was not "
            f"completely written); the figure shows only its {max(complete, 0)} complete "
            "row(s). Rerun `testbed check --fresh --claim ID` to rewrite it.",
            step if math.isfinite(step) else None)


def _canonical_params(value: Any) -> str:
    """Parameters as sorted-key JSON, whether given as a dict or as JSON text."""
    if isinstance(value, str):
        if not value:
            return "{}"
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return value
    return json.dumps(value, sort_keys=True, default=str)


def load_calibration(results_dir: Path) -> dict[str, dict[str, Any]] | None:
    """Per claim id, its row of ``calibration/summary.json`` (``testbed calibrate``); None when
    the file is absent or unreadable (the calibration section says which)."""
    try:
        data = json.loads((results_dir / "calibration" / "summary.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    rows = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return None
    return {str(r.get("claim")): r for r in rows if isinstance(r, dict)}

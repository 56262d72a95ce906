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

from results_format.claim_file import NOT_A_CLAIM_RESULT
from results_format.claim_file import read_claim_record
from results_format.claim_record import ClaimRecord
from results_format.layout import CALIBRATION
from results_format.layout import CLAIMS
from results_format.layout import METADATA
from results_format.layout import SUMMARY
from results_format.records import calibration_records_problem
from results_format.records import calibration_summary_problem
from results_format.records import metadata_problem
from results_format.summary_records import CalibrationRow
from results_format.summary_records import CalibrationSummary
from results_format.summary_records import ResultsMetadata


def as_float(value: Any) -> float:
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


def load_claims(results_dir: Path) -> tuple[list[ClaimRecord], list[str]]:
    """Read every ``claims/*.json`` under ``results_dir``, each checked and parsed once
    (:func:`results_format.claim_file.read_claim_record`).

    Returns:
        The claims (sorted by id) and notes about files that could not be read. A file that is
        not believed gives a row with the claim's words only (verdict "not trusted"), and a
        claim registered in ``metadata.json`` without a file a row "not checked".

    Raises:
        FileNotFoundError: when the directory or its claim files are missing.
    """
    hint = f"run `testbed check --results {results_dir}` first to produce results"
    if not results_dir.is_dir():
        raise FileNotFoundError(f"results directory {results_dir} does not exist; {hint}")
    files = sorted((results_dir / CLAIMS).glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no claim results (claims/*.json) in {results_dir}; {hint}")
    claims, notes = [], []
    registered = _registered(results_dir)
    for path in files:
        record, reason = read_claim_record(path, results_dir)
        if (
            record is None
            and str(reason).startswith(NOT_A_CLAIM_RESULT)
            and not (path.stem in registered or path.stem.split("@")[0] in registered)
        ):
            # a foreign file (notes, another tool's output): named, never counted as a claim
            notes.append(f"{path.name}: {reason}; a foreign file in {CLAIMS}/, left out")
            continue
        if record is None:
            # never shown as measured: the row keeps the claim's words, not its numbers
            notes.append(
                f'{path.name}: {reason}; shown as "{NOT_TRUSTED}", without its '
                f"measurements. Rerun `testbed check --claim {path.stem.split('@')[0]}"
                f" --results {results_dir}` to measure it again"
            )
            entry = registered.get(path.stem) or registered.get(path.stem.split("@")[0])
            claims.append(ClaimRecord.words_only(path.stem, NOT_TRUSTED, entry, str(reason)))
            continue
        claims.append(record)
    if not claims and not registered:
        raise FileNotFoundError(
            f"no claim results in {results_dir / CLAIMS}: its {len(files)} "
            f"JSON file(s) are foreign ({', '.join(p.name for p in files)}"
            f"); {hint}"
        )
    checked = {c.id for c in claims}
    # testbed check records the whole claim registry in metadata.json, so the report lists
    # every claim from results files alone, the ones without results "not checked"
    claims.extend(
        ClaimRecord.words_only(claim_id, NOT_CHECKED, entry)
        for claim_id, entry in registered.items()
        if claim_id not in checked
    )
    claims.sort(key=lambda c: c.id)
    return claims, notes


#: The report's verdict for a claim results file that cannot be believed
#: (:func:`results_format.claim_file.claim_file_problem`): its measurements are not shown.
NOT_TRUSTED = "not trusted"
#: The report's verdict for a claim registered when the results were written but not checked.
NOT_CHECKED = "not checked"


def _registered(results_dir: Path) -> dict[str, dict[str, Any]]:
    """The claim registry ``testbed check`` recorded in ``metadata.json``, by id (empty when
    the file is missing or does not fit its schema)."""
    try:
        data = json.loads((results_dir / METADATA).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if metadata_problem(data) is not None:
        return {}
    return {entry["id"]: entry for entry in data.get("claims_registered", [])}


def load_metadata(results_dir: Path) -> tuple[ResultsMetadata, list[str]]:
    """The results' ``metadata.json`` (commit, profile, versions) and notes on what could not
    be read: an empty record and why when the file is missing, unreadable or not an object."""
    path = results_dir / METADATA
    unknown = ResultsMetadata()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return unknown, ["metadata.json is missing: commit, profile and versions unknown"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return unknown, [f"metadata.json unreadable ({error})"]
    problem = metadata_problem(data)
    if problem is not None:
        return unknown, [
            f"metadata.json not used ({problem}): commit, profile and versions unknown"
        ]
    return ResultsMetadata.from_json(data), []


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
            step = as_float(raw.get("step"))
            if not math.isfinite(step):
                continue
            oracle = as_float(raw.get("oracle_calls") or 0)
            rows.append(
                SeriesRow(
                    estimator=raw.get("estimator") or "?",
                    problem_id=raw.get("problem_id") or "?",
                    params=canonical_params(raw.get("params") or ""),
                    series=raw.get("series") or "?",
                    step_name=raw.get("step_name") or "",
                    step=step,
                    value=as_float(raw.get("value")),
                    oracle_calls=oracle if math.isfinite(oracle) else 0.0,
                )
            )
    return rows


def torn_series_note(path: Path, name: str, n_rows: int) -> tuple[str, float | None] | None:
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
    step = as_float(dict(zip(header, last, strict=False)).get("step"))
    complete = n_rows - 1 if math.isfinite(step) else n_rows
    return (
        f"series file {name} is truncated (its last line is cut short: the file was not "
        f"completely written); the figure shows only its {max(complete, 0)} complete "
        "row(s). Rerun `testbed check --fresh --claim ID` to rewrite it.",
        step if math.isfinite(step) else None,
    )


def canonical_params(value: Any) -> str:
    """Parameters as sorted-key JSON, whether given as a dict or as JSON text."""
    if isinstance(value, str):
        if not value:
            return "{}"
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return value
    return json.dumps(value, sort_keys=True, default=str)


def load_calibration(results_dir: Path) -> dict[str, CalibrationRow] | None:
    """Per claim id, its row of ``calibration/summary.json`` (``testbed calibrate``); None when
    the file is absent, unreadable or not to be believed
    (:func:`results_format.records.calibration_summary_problem`; the calibration section says
    which)."""
    try:
        data = json.loads((results_dir / CALIBRATION / SUMMARY).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if calibration_summary_problem(data) or calibration_records_problem(data, results_dir):
        return None
    return {row.claim: row for row in CalibrationSummary.from_json(data).claims}

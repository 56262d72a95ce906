"""Reading a claim's results file, ``claims/<run_id>.json``: checked, then parsed once.

:func:`claim_file_problem` says why a claim's results file cannot be believed: a field of the
wrong type (:mod:`results_format.claim_schema`), a verdict outside the vocabulary, a measured
number that is NaN, a recorded outcome, verdict or ``as_expected`` other than the one its cases
give (:mod:`results_format.claim_checks`), a seal that does not match the content
(:mod:`results_format.validation`), a companion file (series CSV, counterexample) outside the
results folder or whose bytes differ from the digest recorded. :func:`read_claim_file` reads a
file and checks it; :func:`read_claim_record` gives the checked file as its typed record
(:class:`~results_format.claim_record.ClaimRecord`), which is what the report reads.
Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from results_format.claim_checks import case_outcome
from results_format.claim_checks import recomputed_problems
from results_format.claim_record import ClaimRecord
from results_format.claim_schema import CASE_SCHEMA
from results_format.claim_schema import CLAIM_RESULT_SCHEMA
from results_format.claim_schema import COUNTEREXAMPLE_SCHEMA
from results_format.claim_schema import FILES_KEY
from results_format.claim_schema import FIT_SCHEMA
from results_format.layout import CLAIMS
from results_format.paths import UnsafePath
from results_format.paths import inside
from results_format.validation import field_problems
from results_format.validation import file_digest
from results_format.validation import kind_problem
from results_format.validation import seal_problem


def companion_problems(data: Mapping[str, Any], results_dir: Path, where: str) -> list[str]:
    """The companion files a claim record lists (series CSV, counterexample JSON and arrays):
    each inside the results folder and with the bytes whose digest was recorded."""
    problems = []
    files = data[FILES_KEY]
    named = {data["series_file"], *([data["counterexample"]] if data["counterexample"] else [])}
    missing = sorted(named - set(files))
    if missing:
        problems.append(f"{FILES_KEY} does not list {missing[0]}")
    for relative, digest in sorted(files.items()):
        try:
            path = inside(results_dir, relative, f"{where}: {FILES_KEY}")
        except UnsafePath as error:
            problems.append(str(error).removeprefix(f"{where}: "))
            continue
        try:
            data_bytes = path.read_bytes()
        except OSError as error:
            problems.append(f"{relative} cannot be read ({error.strerror or error})")
            continue
        if file_digest(data_bytes) != digest:
            problems.append(f"{relative} differs from the file this result was written with")
        elif relative == data["counterexample"]:
            problems += _counterexample_problems(data_bytes, data, relative)
    return problems


def _counterexample_problems(data: bytes, claim: Mapping[str, Any], relative: str) -> list[str]:
    """A counterexample file's content against :data:`COUNTEREXAMPLE_SCHEMA`: the failing case
    of ``claim``'s record, re-derived, and the very case the record lists as failing."""
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        return [f"{relative} is not JSON ({error})"]
    problems = field_problems(record, COUNTEREXAMPLE_SCHEMA, relative)
    if problems:
        return problems
    if record["claim"] != claim["claim"] or record["outcome"] != "fails":
        return [f"{relative} is not a failing case of {claim['claim']}"]
    if case_outcome(record, record["decision"] == "statistical", relative, problems) is None:
        return problems
    failing = [c for c in claim["cases"] if c.get("outcome") == "fails"]
    if not failing or any(record.get(k) != failing[0].get(k) for k in CASE_SCHEMA):
        return [f"{relative} is not the failing case the claim file records"]
    return []


def claim_file_problem(
    data: Any, results_dir: Path | None = None, stem: str | None = None
) -> str | None:
    """Why the claim results record ``data`` (read from ``claims/<stem>.json`` under
    ``results_dir``) cannot be believed, or ``None``: see the module docstring. Without
    ``results_dir`` the companion files are not checked."""
    problems = field_problems(data, CLAIM_RESULT_SCHEMA)
    if not problems:
        if stem is not None and data["id"] != stem:
            problems.append(f"id is {data['id']!r} but the file is named {stem}.json")
        for key in ("estimators", "expected_verdicts"):
            if not all(isinstance(v, str) for v in data[key]):
                problems.append(f"{key} holds a value that is not a string")
        for j, fit in enumerate(data["fits"]):
            problems.extend(field_problems(fit, FIT_SCHEMA, f"fits[{j}]"))
        problems += computed_by_problems(data)
        if not problems:
            problems = recomputed_problems(data)
    if not problems:
        sealed = seal_problem(data)
        if sealed is not None:
            problems.append(sealed)
    if not problems and results_dir is not None:
        problems = companion_problems(
            data, Path(results_dir), f"{CLAIMS}/{stem or data['id']}.json"
        )
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0] + more


def computed_by_problems(data: Mapping[str, Any]) -> list[str]:
    """``computed_by`` (the commit and device that computed a record; absent from records
    written before it existed) must be an object of strings."""
    found = data.get("computed_by")
    if found is None or (
        isinstance(found, dict)
        and all(isinstance(found.get(k), str) for k in ("git_commit", "device"))
    ):
        return []
    return [
        kind_problem(found, "object", "computed_by")
        or "computed_by is not an object with the strings git_commit and device"
    ]


#: The start of :func:`read_claim_file`'s reason for a file of ``claims/`` that holds no claim
#: result at all (a list, or an object with none of :data:`CLAIM_MARKS`): a foreign file
#: (notes, another tool's output), which the report names and leaves out of its counts unless
#: a claim of that name is registered (then it is a damaged claim file).
NOT_A_CLAIM_RESULT = "not a claim result"
#: Keys of which a claim result holds at least one, however damaged.
CLAIM_MARKS: tuple[str, ...] = ("id", "claim", "verdict", "cases")


def read_claim_file(path: Path, results_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``claims/<run_id>.json`` read and checked: ``(record, None)`` when it can be believed,
    ``(None, reason)`` when not (unreadable, not a claim result, or
    :func:`claim_file_problem`)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        return None, f"unreadable ({type(error).__name__}: {reason})"
    if not isinstance(data, dict):
        return None, f"{NOT_A_CLAIM_RESULT} (a JSON {type(data).__name__})"
    if not any(key in data for key in CLAIM_MARKS):
        return None, f"{NOT_A_CLAIM_RESULT} (an object without {', '.join(CLAIM_MARKS)})"
    problem = claim_file_problem(data, results_dir, Path(path).stem)
    if problem is not None:
        return None, f"not trusted: {problem}"
    return data, None


def read_claim_record(path: Path, results_dir: Path) -> tuple[ClaimRecord | None, str | None]:
    """:func:`read_claim_file`, the record parsed once into its typed form."""
    data, reason = read_claim_file(path, results_dir)
    return (ClaimRecord.from_json(data) if data is not None else None), reason


def untrusted_claim_files(results_dir: Path) -> list[tuple[Path, str]]:
    """Every ``claims/*.json`` under ``results_dir`` that cannot be believed, with the reason
    (:func:`read_claim_file`); ``testbed check`` reruns those claims, the report shows them
    "not trusted"."""
    bad = []
    for path in sorted((Path(results_dir) / CLAIMS).glob("*.json")):
        _, reason = read_claim_file(path, results_dir)
        if reason is not None:
            bad.append((path, reason))
    return bad


__all__ = [
    "CLAIM_MARKS",
    "NOT_A_CLAIM_RESULT",
    "claim_file_problem",
    "companion_problems",
    "computed_by_problems",
    "read_claim_file",
    "read_claim_record",
    "untrusted_claim_files",
]

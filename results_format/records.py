"""The schemas of the results files other than a claim's (:mod:`results_format.claim_schema`) and
``metrics.csv`` (:mod:`results_format.metrics`), and the checks that read them back.

Each ``*_problem`` function says why a file's content cannot be believed (the first problem,
naming the key), or returns ``None``; each reader of such a file calls it before it uses a
number, and treats a file with a problem as absent (recomputed by the command that writes it,
or shown as "not trusted" in the report), with a one-line note naming the file:

- ``calibration/<claim>.json``: :func:`calibration_record_problem` and
  :func:`usable_calibration_runs` (one record per seed, no seed twice, verdicts from the
  vocabulary);
- ``calibration/summary.json``: :func:`calibration_summary_problem` (numbers where numbers
  belong, the counts and the "consistent" flag recomputed from the recorded counts);
- ``calibration/summary.json`` against the per-claim records it summarizes:
  :func:`calibration_records_problem` (the seeds and verdict counts recounted from each
  sealed ``calibration/<claim>.json``);
- ``mutation/<mutant>.json``: :func:`mutation_record_problem` (schema, seal, each run's
  ``killed`` from its verdict, the status and killers recomputed from the runs), and
  ``mutation/summary.json``: :func:`mutation_summary_problem` (every row recomputed from its
  record, the counts from the rows);
- ``reports/baselines/regress.json``: :func:`baseline_problem`;
- ``metadata.json`` of a results folder and of a run: :func:`metadata_problem`;
- ``runs/<name>/checkpoint.pt``'s record beside its state: :data:`CHECKPOINT_SCHEMA`.

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.layout import CALIBRATION
from results_format.layout import MUTATION
from results_format.validation import field_problems
from results_format.validation import kind_problem
from results_format.validation import seal_problem
from results_format.verdicts import VERDICTS

#: One seed of ``testbed calibrate`` (``calibration/<claim>.json``'s ``runs[i]``).
CALIBRATION_RUN_SCHEMA: dict[str, Any] = {
    "seed": "count",
    "verdict": VERDICTS,
    "n_undecided": "count",
    "n_unconfirmed": "count",
    "seconds": "finite",
}
CALIBRATION_RECORD_SCHEMA: dict[str, Any] = {
    "claim": "str",
    "fingerprint": "str",
    "profile": "str",
    "runs": "list",
}
#: ``calibration/summary.json`` and each of its ``claims[i]`` rows.
CALIBRATION_SUMMARY_SCHEMA: dict[str, Any] = {
    "profile": "str",
    "seeds": "count",
    "confidence": "finite",
    "claims": "list",
}
CALIBRATION_ROW_SCHEMA: dict[str, Any] = {
    "claim": "str",
    "expected": "str",
    "profile": "str",
    "seeds": "count",
    "stated_rate": "finite",
    "false_failures": "count",
    "refuted": "count",
    "undecided": "count",
    "verdicts": "object",
    "rate_low": "finite",
    "rate_high": "finite",
    "consistent": "bool",
    "seconds": "finite",
}
#: ``reports/baselines/regress.json`` (``testbed regress``).
BASELINE_SCHEMA: dict[str, Any] = {"format": "int", "entries": "object"}
SAMPLES_SCHEMA: dict[str, Any] = {"per_seed": "list", "statistic": "str", "df": "count"}
#: A checkpoint's record (its ``experiment`` state is checked by loading it).
CHECKPOINT_SCHEMA: dict[str, Any] = {
    "version": "int",
    "step": "count",
    "fingerprint": "str",
    "experiment": "object",
}


def _first(problems: list[str]) -> str | None:
    if not problems:
        return None
    return problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


def calibration_record_problem(data: Any, claim_id: str | None = None) -> str | None:
    """Why a ``calibration/<claim>.json`` cannot be resumed from at all (its own fields and its
    seal; its seeds are checked one by one by :func:`usable_calibration_runs`)."""
    problems = field_problems(data, CALIBRATION_RECORD_SCHEMA)
    if problems:
        return _first(problems)
    if claim_id is not None and data["claim"] != claim_id:
        return f"claim is {data['claim']!r}, the file is that of {claim_id}"
    return seal_problem(data)


def usable_calibration_runs(runs: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The seeds of a calibration record that can be believed, and why each other one cannot
    (a field of the wrong type, a verdict outside the vocabulary, a seed recorded twice: both
    records are dropped, since either may be the edited one). The dropped seeds are run
    again."""
    problems: list[str] = []
    valid: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        found = field_problems(
            run, CALIBRATION_RUN_SCHEMA, f"runs[{i}]", optional=("n_undecided", "n_unconfirmed")
        )
        if found:
            problems.append(_first(found) or "")
        else:
            valid.append(run)
    seeds = [run["seed"] for run in valid]
    twice = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    problems += [f"seed {seed} is recorded twice" for seed in twice]
    return [run for run in valid if run["seed"] not in twice], problems


def calibration_summary_problem(data: Any) -> str | None:
    """Why ``calibration/summary.json`` cannot be shown: its schema, its seal, or a row whose
    counts or "consistent" flag its own numbers do not give."""
    problems = field_problems(data, CALIBRATION_SUMMARY_SCHEMA)
    if problems:
        return _first(problems)
    for i, row in enumerate(data["claims"]):
        where = f"claims[{i}]"
        problems = field_problems(row, CALIBRATION_ROW_SCHEMA, where)
        if problems:
            return _first(problems)
        verdicts = row["verdicts"]
        bad = [
            f"{where}.verdicts[{k!r}]"
            for k, v in verdicts.items()
            if k not in VERDICTS or kind_problem(v, "count", k) is not None
        ]
        if bad:
            return f"{bad[0]} is not a count of a verdict"
        if sum(verdicts.values()) != row["seeds"]:
            return f"{where}: its verdicts count {sum(verdicts.values())} seeds, not {row['seeds']}"
        for key, verdict in (("refuted", "fails as stated"), ("undecided", "undecided")):
            if row[key] != verdicts.get(verdict, 0):
                return f"{where}.{key} is {row[key]}, its verdicts give {verdicts.get(verdict, 0)}"
        if not 0.0 <= row["rate_low"] <= row["rate_high"] <= 1.0:
            return f"{where}: the interval [{row['rate_low']}, {row['rate_high']}] is not a rate's"
        if row["expected"] == "holds":
            consistent = row["rate_low"] <= row["stated_rate"]
            if row["false_failures"] != row["refuted"]:
                return f"{where}.false_failures is {row['false_failures']}, not {row['refuted']}"
        else:
            consistent = row["refuted"] == row["seeds"] - row["undecided"] and row["refuted"] > 0
        if row["consistent"] != consistent:
            return (
                f"{where}.consistent is {str(row['consistent']).lower()}, its numbers give "
                f"{str(consistent).lower()}"
            )
    return seal_problem(data)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def calibration_records_problem(data: Mapping[str, Any], results_dir: Path) -> str | None:
    """Why a schema-valid ``calibration/summary.json`` does not say what the per-claim records
    beside it hold: each row's seeds and verdict counts are recounted from the seeds
    ``0..seeds-1`` of ``calibration/<claim>.json`` (which must itself be believed:
    :func:`calibration_record_problem`, :func:`usable_calibration_runs`)."""
    for i, row in enumerate(data["claims"]):
        claim = row["claim"]
        record = _read(Path(results_dir) / CALIBRATION / f"{claim}.json")
        if record is None:
            return (
                f"claims[{i}] ({claim}): its record {CALIBRATION}/{claim}.json is missing "
                "or unreadable"
            )
        problem = calibration_record_problem(record, claim)
        runs, dropped = ([], [problem]) if problem else usable_calibration_runs(record["runs"])
        if dropped:
            return f"claims[{i}] ({claim}): its record is not trusted ({dropped[0]})"
        counted = [r for r in runs if r["seed"] < data["seeds"]]
        verdicts: dict[str, int] = {}
        for run in counted:
            verdicts[run["verdict"]] = verdicts.get(run["verdict"], 0) + 1
        if len(counted) != row["seeds"] or verdicts != row["verdicts"]:
            return (
                f"claims[{i}] ({claim}) says {row['seeds']} seeds {row['verdicts']}, its "
                f"record holds {len(counted)} {verdicts}"
            )
    return None


#: ``mutation/<mutant>.json`` (``testbed mutate``) and each of its ``runs[i]``.
MUTATION_RUN_SCHEMA: dict[str, Any] = {
    "claim": "str",
    "estimator": "str",
    "verdict": (*VERDICTS, "error"),
    "error": "str|null",
    "killed": "bool",
    "cases_passed": "count",
    "seconds": "finite",
}
MUTATION_STATUSES: tuple[str, ...] = ("killed", "survived", "equivalent")
MUTATION_RECORD_SCHEMA: dict[str, Any] = {
    "mutant": "str",
    "family": "str",
    "kind": "str",
    "description": "str",
    "entries": "list",
    "equivalent": "str",
    "fingerprint": "str",
    "profile": "str",
    "planned": "count",
    "status": MUTATION_STATUSES,
    "killed_by": "list",
    "runs": "list",
}
#: ``mutation/summary.json`` and each of its ``mutants[i]`` rows.
MUTATION_SUMMARY_SCHEMA: dict[str, Any] = {
    "profile": "str",
    "catalogue": "count",
    "counts": "object",
    "mutants": "list",
}
MUTATION_ROW_SCHEMA: dict[str, Any] = {
    "mutant": "str",
    "status": MUTATION_STATUSES,
    "killed_by": "list",
    "equivalent": "str",
    "claims_run": "count",
    "planned": "count",
    "cases_passed_before_kill": "count|null",
    "as_expected": "bool",
}


def run_killed(run: Mapping[str, Any]) -> bool:
    """A mutant's run kills it when the claim's verdict is "fails as stated" or its check
    could not run on the mutant (an error, recorded with its message)."""
    return run["verdict"] in ("fails as stated", "error")


def mutant_status(runs: Sequence[Mapping[str, Any]], equivalent: str) -> str:
    """ "killed" by any killing run; else "equivalent" when the mutant is declared so (with
    its argument), else "survived"."""
    if any(r["killed"] for r in runs):
        return "killed"
    return "equivalent" if equivalent else "survived"


def killers(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The claims that killed a mutant, "(error)" after one whose check refused it."""
    return [r["claim"] + ("" if r["error"] is None else " (error)") for r in runs if r["killed"]]


def mutant_as_expected(record: Mapping[str, Any]) -> bool:
    """A mutant is as expected when it is killed, or declared equivalent and not killed."""
    return bool(record["status"] == "killed") != bool(record["equivalent"])


def mutation_record_problem(data: Any, name: str | None = None) -> str | None:
    """Why a ``mutation/<name>.json`` cannot be believed (resumed from, summarized, shown): its
    schema, each run's, a run's ``killed`` other than its verdict gives, the status or killers
    other than its runs give, more runs than planned, its seal."""
    problems = field_problems(data, MUTATION_RECORD_SCHEMA)
    if problems:
        return _first(problems)
    if name is not None and data["mutant"] != name:
        return f"mutant is {data['mutant']!r}, the file is that of {name}"
    for i, run in enumerate(data["runs"]):
        problems = field_problems(run, MUTATION_RUN_SCHEMA, f"runs[{i}]")
        if problems:
            return _first(problems)
        if run["killed"] != run_killed(run) or (run["error"] is None) == (
            run["verdict"] == "error"
        ):
            return (
                f"runs[{i}].killed is {str(run['killed']).lower()}, its verdict "
                f"{run['verdict']!r} gives {str(run_killed(run)).lower()}"
            )
    if len(data["runs"]) > data["planned"]:
        return f"{len(data['runs'])} runs recorded of {data['planned']} planned"
    status = mutant_status(data["runs"], data["equivalent"])
    if data["status"] != status:
        return f"status is {data['status']!r}, its runs give {status!r}"
    if data["killed_by"] != killers(data["runs"]):
        return f"killed_by is {data['killed_by']}, its runs give {killers(data['runs'])}"
    return seal_problem(data)


def mutation_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """The summary row of a believed mutant record (``mutation/summary.json``'s
    ``mutants[i]``)."""
    runs = record["runs"]
    return {
        "mutant": record["mutant"],
        "family": record["family"],
        "kind": record["kind"],
        "description": record["description"],
        "status": record["status"],
        "killed_by": record["killed_by"],
        "equivalent": record["equivalent"],
        "claims_run": len(runs),
        "planned": record["planned"],
        "cases_passed_before_kill": next((r["cases_passed"] for r in runs if r["killed"]), None),
        "seconds": sum(float(r["seconds"]) for r in runs),
        "as_expected": mutant_as_expected(record),
    }


def mutation_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The summary's counts of its rows."""
    return {
        "mutants": len(rows),
        **{
            status: sum(r["status"] == status for r in rows)
            for status in ("killed", "equivalent", "survived")
        },
        "not as expected": sum(not mutant_as_expected(r) for r in rows),
    }


def mutation_summary_problem(data: Any, results_dir: Path) -> str | None:
    """Why ``mutation/summary.json`` cannot be shown: its schema, its seal, a row that its
    mutant's record (believed: :func:`mutation_record_problem`) does not give, counts that its
    rows do not give."""
    problems = field_problems(data, MUTATION_SUMMARY_SCHEMA)
    if problems:
        return _first(problems)
    for i, row in enumerate(data["mutants"]):
        problems = field_problems(row, MUTATION_ROW_SCHEMA, f"mutants[{i}]")
        if problems:
            return _first(problems)
        name = row["mutant"]
        record = _read(Path(results_dir) / MUTATION / f"{name}.json")
        problem = (
            "missing or unreadable" if record is None else mutation_record_problem(record, name)
        )
        if problem is not None:
            return f"mutants[{i}] ({name}): its record is not trusted ({problem})"
        expected = mutation_row(record)
        differs = [k for k in MUTATION_ROW_SCHEMA if row[k] != expected[k]]
        if differs:
            return (
                f"mutants[{i}] ({name}).{differs[0]} is {row[differs[0]]!r}, its record "
                f"gives {expected[differs[0]]!r}"
            )
    if data["counts"] != mutation_counts(data["mutants"]):
        return f"counts are {data['counts']}, its rows give {mutation_counts(data['mutants'])}"
    return seal_problem(data)


def baseline_problem(data: Any) -> str | None:
    """Why a regression baseline cannot be compared with (its schema; samples of numbers)."""
    problems = field_problems(data, BASELINE_SCHEMA)
    if problems:
        return _first(problems)
    for name, kinds in data["entries"].items():
        if not isinstance(kinds, dict):
            return f"entries[{name!r}] is not an object"
        for kind, metrics in kinds.items():
            if not isinstance(metrics, dict):
                return f"entries[{name!r}][{kind!r}] is not an object"
            for metric, samples in metrics.items():
                where = f"entries[{name!r}][{kind!r}][{metric!r}]"
                problems = field_problems(samples, SAMPLES_SCHEMA, where)
                if problems:
                    return _first(problems)
                for seed in samples["per_seed"]:
                    if not isinstance(seed, list) or any(
                        kind_problem(v, "number|null", "") for v in seed
                    ):
                        return f"{where}.per_seed holds something other than lists of numbers"
    return None


def metadata_problem(data: Any) -> str | None:
    """Why a ``metadata.json`` (of a results folder or a run) cannot be read: it must be an
    object, and its registry of claims, when present, a list of objects with string ids."""
    if not isinstance(data, dict):
        return f"it is a JSON {type(data).__name__}, expected an object"
    registered = data.get("claims_registered", [])
    if not isinstance(registered, list) or not all(
        isinstance(c, dict) and isinstance(c.get("id"), str) for c in registered
    ):
        return "claims_registered is not a list of claims with string ids"
    return None


__all__ = [
    "BASELINE_SCHEMA",
    "CALIBRATION_RECORD_SCHEMA",
    "CALIBRATION_ROW_SCHEMA",
    "CALIBRATION_RUN_SCHEMA",
    "CALIBRATION_SUMMARY_SCHEMA",
    "CHECKPOINT_SCHEMA",
    "MUTATION_RECORD_SCHEMA",
    "MUTATION_ROW_SCHEMA",
    "MUTATION_RUN_SCHEMA",
    "MUTATION_STATUSES",
    "MUTATION_SUMMARY_SCHEMA",
    "SAMPLES_SCHEMA",
    "baseline_problem",
    "calibration_record_problem",
    "calibration_records_problem",
    "calibration_summary_problem",
    "killers",
    "metadata_problem",
    "mutant_as_expected",
    "mutant_status",
    "mutation_counts",
    "mutation_record_problem",
    "mutation_row",
    "mutation_summary_problem",
    "run_killed",
    "usable_calibration_runs",
]

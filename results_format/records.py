"""The schemas of the results files other than a claim's (:mod:`results_format.verdicts`) and
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
- ``reports/baselines/regress.json``: :func:`baseline_problem`;
- ``metadata.json`` of a results folder and of a run: :func:`metadata_problem`;
- ``runs/<name>/checkpoint.pt``'s record beside its state: :data:`CHECKPOINT_SCHEMA`.

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

from typing import Any

from results_format.validation import field_problems, kind_problem, seal_problem
from results_format.verdicts import VERDICTS

#: One seed of ``testbed calibrate`` (``calibration/<claim>.json``'s ``runs[i]``).
CALIBRATION_RUN_SCHEMA: dict[str, Any] = {"seed": "count", "verdict": VERDICTS,
                                          "n_undecided": "count", "n_unconfirmed": "count",
                                          "seconds": "finite"}
CALIBRATION_RECORD_SCHEMA: dict[str, Any] = {"claim": "str", "fingerprint": "str",
                                             "profile": "str", "runs": "list"}
#: ``calibration/summary.json`` and each of its ``claims[i]`` rows.
CALIBRATION_SUMMARY_SCHEMA: dict[str, Any] = {"profile": "str", "seeds": "count",
                                              "confidence": "finite", "claims": "list"}
CALIBRATION_ROW_SCHEMA: dict[str, Any] = {
    "claim": "str", "expected": "str", "profile": "str", "seeds": "count",
    "stated_rate": "finite", "false_failures": "count", "refuted": "count",
    "undecided": "count", "verdicts": "object", "rate_low": "finite", "rate_high": "finite",
    "consistent": "bool", "seconds": "finite",
}
#: ``reports/baselines/regress.json`` (``testbed regress``).
BASELINE_SCHEMA: dict[str, Any] = {"format": "int", "entries": "object"}
SAMPLES_SCHEMA: dict[str, Any] = {"per_seed": "list", "statistic": "str", "df": "count"}
#: A checkpoint's record (its ``experiment`` state is checked by loading it).
CHECKPOINT_SCHEMA: dict[str, Any] = {"version": "int", "step": "count", "fingerprint": "str",
                                     "experiment": "object"}


def _first(problems: list[str]) -> str | None:
    if not problems:
        return None
    return problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


def calibration_record_problem(data: Any, claim_id: str | None = None) -> str | None:
    """Why a ``calibration/<claim>.json`` cannot be resumed from at all (its own fields; its
    seeds are checked one by one by :func:`usable_calibration_runs`)."""
    problems = field_problems(data, CALIBRATION_RECORD_SCHEMA)
    if problems:
        return _first(problems)
    if claim_id is not None and data["claim"] != claim_id:
        return f"claim is {data['claim']!r}, the file is that of {claim_id}"
    return None


def usable_calibration_runs(runs: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The seeds of a calibration record that can be believed, and why each other one cannot
    (a field of the wrong type, a verdict outside the vocabulary, a seed recorded twice: both
    records are dropped, since either may be the edited one). The dropped seeds are run
    again."""
    problems: list[str] = []
    valid: list[dict[str, Any]] = []
    for i, run in enumerate(runs):
        found = field_problems(run, CALIBRATION_RUN_SCHEMA, f"runs[{i}]",
                               optional=("n_undecided", "n_unconfirmed"))
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
        bad = [f"{where}.verdicts[{k!r}]" for k, v in verdicts.items()
               if k not in VERDICTS or kind_problem(v, "count", k) is not None]
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
            return (f"{where}.consistent is {str(row['consistent']).lower()}, its numbers give "
                    f"{str(consistent).lower()}")
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
                            kind_problem(v, "number|null", "") for v in seed):
                        return f"{where}.per_seed holds something other than lists of numbers"
    return None


def metadata_problem(data: Any) -> str | None:
    """Why a ``metadata.json`` (of a results folder or a run) cannot be read: it must be an
    object, and its registry of claims, when present, a list of objects with string ids."""
    if not isinstance(data, dict):
        return f"it is a JSON {type(data).__name__}, expected an object"
    registered = data.get("claims_registered", [])
    if not isinstance(registered, list) or not all(
            isinstance(c, dict) and isinstance(c.get("id"), str) for c in registered):
        return "claims_registered is not a list of claims with string ids"
    return None


__all__ = ["BASELINE_SCHEMA", "CALIBRATION_RECORD_SCHEMA", "CALIBRATION_ROW_SCHEMA",
           "CALIBRATION_RUN_SCHEMA", "CALIBRATION_SUMMARY_SCHEMA", "CHECKPOINT_SCHEMA",
           "SAMPLES_SCHEMA", "baseline_problem", "calibration_record_problem",
           "calibration_summary_problem", "metadata_problem", "usable_calibration_runs"]

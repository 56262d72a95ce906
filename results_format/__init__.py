"""The results files' formats and the one way they are written: standard library only.

Every producer of results (the claim runner, calibration, the experiment runner, the regression
check, the communication and comparison tables, the benchmarks) writes through
:func:`atomic_write`, and the report (:mod:`reports`) reads the files against the schemas below
without importing any producer. Nothing here imports numpy, torch or the testbed, so the report
and its tests stay light.

Beside the formats: :mod:`results_format.resume`, the fingerprints that let a rerun reuse a
saved result (hashing, the freshness test, reading and writing a stamped result), and
:mod:`results_format.provenance`, the commit and package versions a results file records.

What makes a results file trustworthy lives here too: :mod:`results_format.writing` (whole
files only, written where the testbed means to: a fresh temporary file, then a rename),
:mod:`results_format.paths` (names and paths from files and configs kept inside the results
folder), :mod:`results_format.locks` (one writer per run folder and claim),
:mod:`results_format.validation` (schemas and seals), :mod:`results_format.verdicts` (the
verdict vocabulary and rules, and what a claim checks), a claim's file
(:mod:`results_format.claim_record`: the typed record the runner writes and the report reads;
:mod:`results_format.claim_schema`; :mod:`results_format.claim_checks`: its verdict recomputed
from its cases; :mod:`results_format.claim_file`: read and checked), the kinds of claim
(:mod:`results_format.claim_kinds`), :mod:`results_format.evidence`
(a "holds"'s slack and kill set, re-derived from its cases and the mutation records),
:mod:`results_format.records` (the other files' schemas) and :mod:`results_format.metrics`
(``metrics.csv``).
"""

from __future__ import annotations

from typing import Any

# the one atomic-write home (re-exported: every producer imports it from here)
from results_format.writing import atomic_write as atomic_write
from results_format.writing import atomic_write_bytes as atomic_write_bytes

#: ``<results>/replication/<experiment>.json``::
#:
#:   {"experiment": str, "paper": "FedNest" | "AggITD" | "FedMSA" | "HGP",
#:    "table": str,                          # e.g. "AggITD Table 2"
#:    "metadata": {...},                     # dataset, device, commit, config path, status
#:                                           # ("completed", "partial: ...", "diverged ...")
#:    "rows": [{"setting": str,             # e.g. "non-iid, tau = 5"
#:              "metric": str,              # e.g. "rounds to 90% test accuracy"
#:              "paper_value": float | str | None,
#:              "testbed_value": float | str | None,   # None: target not reached;
#:                                          # "diverged at step k": the run diverged
#:              "unit": str,
#:              "differences": str,         # setting differences, stated honestly
#:              "definition": {"metric": str, "threshold" | "column": ...}}],
#:                                          # how testbed_value is computed from metrics.csv
#:                                          # (results_format.replication.measure)
#:    "metrics_rows_sha256": str,           # the metrics rows it was computed from
#:    "content_sha256": str}                # the seal (results_format.validation)
REPLICATION_SCHEMA = (
    "experiment",
    "paper",
    "table",
    "metadata",
    "rows",
    "metrics_rows_sha256",
    "content_sha256",
)

#: ``<results>/bench/<benchmark>.json``::
#:
#:   {"benchmark": str, "description": str,
#:    "machine": {"cpu": str, "cores": int, "device": str, "torch": str},
#:    "rows": [{...flat scalars, one row per measured case...}],
#:    "targets": [{"name": str, "measured": float, "target": float,
#:                 "direction": "at_least" | "at_most", "met": bool}]}
BENCH_SCHEMA = ("benchmark", "description", "machine", "rows", "targets")


def json_default(value: Any) -> Any:
    """``json.dumps(default=...)`` for numbers json does not know: numpy scalars and arrays
    become Python numbers and lists (recognised by their module, so numpy is not imported
    here); anything else is written as its ``str``."""
    if type(value).__module__ == "numpy":
        return value.tolist()
    return str(value)


__all__ = [
    "BENCH_SCHEMA",
    "REPLICATION_SCHEMA",
    "atomic_write",
    "atomic_write_bytes",
    "json_default",
]

"""The results folder's layout: the name of every folder and file the testbed writes in it.

The producers (the claim runner, calibration, ``testbed run``, the comparison tables, the
benchmarks) and the readers (:mod:`reports`, the checks in this package) take the names from
here, so the two sides cannot drift apart::

    <results>/
      metadata.json                       METADATA: the claim run's provenance
      claims/<run id>.json                CLAIMS: a claim's verdict and its cases
      series/<run id>.csv                 SERIES: a claim's measured series
      counterexamples/<run id>.json|.npz  COUNTEREXAMPLES: a refuting case, as data
      calibration/<claim>.json            CALIBRATION: a claim's verdicts over seeds
      calibration/summary.json            SUMMARY
      comparison/                         COMPARISON: the rounds-to-target tables
      communication.json                  COMMUNICATION: rounds and floats per iteration
      mutation/<mutant>.json, summary.json  MUTATION: which claims kill which mutants
      runs/<experiment name>/             RUNS: one experiment run (RUN_FILES)
      replication/<experiment name>.json  REPLICATION: the paper's number beside the testbed's
      bench/<benchmark>.json              BENCH: benchmark results

>>> from pathlib import Path
>>> run_folder(Path("results"), "aggitd_table2_iid_tau1") / RUN_METRICS
PosixPath('results/runs/aggitd_table2_iid_tau1/metrics.csv')
>>> replication_file(Path("results"), "hgp_personalization").as_posix()
'results/replication/hgp_personalization.json'

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

from pathlib import Path

#: Folders of the results folder.
CLAIMS = "claims"
SERIES = "series"
COUNTEREXAMPLES = "counterexamples"
CALIBRATION = "calibration"
COMPARISON = "comparison"
MUTATION = "mutation"
RUNS = "runs"
REPLICATION = "replication"
BENCH = "bench"
#: Where ``testbed report`` writes the report of a results folder when no ``--out`` names
#: another folder: inside it, next to the results it shows.
REPORT = "report"

#: Files of the results folder: the claim run's metadata, the communication table, and the
#: summary in the calibration and mutation folders.
METADATA = "metadata.json"
COMMUNICATION = "communication.json"
SUMMARY = "summary.json"

#: Files of a run folder ``runs/<name>/``.
RUN_CONFIG = "config.toml"  # the validated config as run
RUN_SPLIT = "split.json"  # the client split and each client's label histogram
RUN_METADATA = "metadata.json"  # commit, versions, seed, device, machine, status
RUN_METRICS = "metrics.csv"  # one row per outer step
RUN_CHECKPOINT = "checkpoint.pt"  # the latest state (the previous: checkpoint.prev.pt)
RUN_FILES: tuple[str, ...] = (RUN_CONFIG, RUN_SPLIT, RUN_METADATA, RUN_METRICS, RUN_CHECKPOINT)


def run_folder(results: Path, name: str) -> Path:
    """``<results>/runs/<name>``: the run folder of the experiment ``name`` (a plain folder
    name; :func:`results_format.paths.plain_name` checks a name from a config)."""
    return Path(results) / RUNS / name


def replication_file(results: Path, name: str) -> Path:
    """``<results>/replication/<name>.json``: the replication record of the experiment
    ``name``."""
    return Path(results) / REPLICATION / f"{name}.json"


__all__ = [
    "BENCH",
    "CALIBRATION",
    "CLAIMS",
    "COMMUNICATION",
    "COMPARISON",
    "COUNTEREXAMPLES",
    "METADATA",
    "MUTATION",
    "REPLICATION",
    "REPORT",
    "RUNS",
    "RUN_CHECKPOINT",
    "RUN_CONFIG",
    "RUN_FILES",
    "RUN_METADATA",
    "RUN_METRICS",
    "RUN_SPLIT",
    "SERIES",
    "SUMMARY",
    "replication_file",
    "run_folder",
]

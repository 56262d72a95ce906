"""Replication rows: the paper's number beside the testbed's, computed from a metrics table.

A config's ``[replication]`` table names one metric (and ``[[replication.extra_rows]]`` more);
each becomes one row of ``<results>/replication/<experiment>.json``
(:data:`results_format.REPLICATION_SCHEMA`). How each row's number is computed
from the metrics (``rounds_to_accuracy``, ``final_test_accuracy``, ``final_metric``) is part of
the results format (:mod:`results_format.replication`), so the report can compute it again;
each row records its ``definition``, and the record the digest of the metrics rows it was
computed from and a seal (:func:`results_format.validation.seal`).

A diverged run (``status`` "diverged at step k") gives no number at all: each row's
``testbed_value`` is that status, and a partial run (``--steps`` below the config's own
horizon) says so in the metadata and in each row's ``differences``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from results_format import json_default
from results_format.metrics import rows_digest
from results_format.replication import ROWS_DIGEST_KEY
from results_format.replication import UNITS
from results_format.replication import definition
from results_format.replication import final_value as final_value
from results_format.replication import measure as measure
from results_format.replication import rounds_to_accuracy as rounds_to_accuracy
from results_format.validation import seal
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.base import MetricRow


def metric_label(spec: Mapping[str, Any]) -> str:
    """How the report names the metric, e.g. "rounds to 90% test accuracy"."""
    if spec.get("label"):
        return str(spec["label"])
    metric = spec["metric"]
    if metric == "rounds_to_accuracy":
        return f"rounds to {100 * float(spec['threshold']):g}% test accuracy"
    if metric == "final_test_accuracy":
        return "final test accuracy"
    return f"final {spec['column']}"


def replication_rows(table: Mapping[str, Any], rows: Sequence[MetricRow]) -> list[dict[str, Any]]:
    """One REPLICATION_SCHEMA row per metric of a validated ``[replication]`` table."""
    out = []
    for spec in [table, *table.get("extra_rows", [])]:
        out.append(
            {
                "setting": spec.get("setting") or table.get("setting", ""),
                "metric": metric_label(spec),
                "paper_value": spec.get("paper_value"),
                "testbed_value": measure(rows, spec),
                "unit": spec.get("unit") if spec.get("unit") is not None else UNITS[spec["metric"]],
                "differences": spec.get("differences") or table["differences"],
                "definition": definition(spec),
            }
        )
    return out


def replication_record(
    config: ExperimentConfig,
    rows: Sequence[MetricRow],
    metadata: Mapping[str, Any],
    status: str = "completed",
) -> dict[str, Any]:
    """The ``replication/<experiment>.json`` content of a finished (or partial) run.

    ``status`` (the runner's): ``"completed"``; ``"partial: ..."`` (stated in the metadata and
    in front of each row's differences); ``"diverged at step k: ..."`` (each row's
    ``testbed_value`` is ``"diverged at step k"``, never a number).
    """
    if config.replication is None:
        raise ValueError(f"{config.name}: the config has no [replication] table")
    out_rows = replication_rows(config.replication, rows)
    if status.startswith("diverged"):
        short = status.split(":")[0]
        for row in out_rows:
            row["testbed_value"] = short
            row["differences"] = f"{status.upper()[:1]}{status[1:]}. {row['differences']}"
    elif status.startswith("partial"):
        for row in out_rows:
            row["differences"] = f"PARTIAL RUN ({status}). {row['differences']}"
    record = {
        "experiment": config.name,
        "paper": config.paper,
        "table": config.replication["table"],
        "metadata": {**metadata, "status": status},
        "rows": out_rows,
        ROWS_DIGEST_KEY: rows_digest(rows),
    }
    # sealed as it reads back from JSON (the report checks the seal, results_format.replication)
    return seal(json.loads(json.dumps(record, default=json_default)))

"""The report's sections on the papers' experiments and the benchmarks: ``replication/*.json``
(REPLICATION_SCHEMA) and ``bench/*.json`` (BENCH_SCHEMA), or, when absent, the exact commands
that write them and what they cost."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports.section_model import Command
from reports.section_model import Section
from reports.section_model import Table
from reports.section_model import fmt as _fmt
from reports.section_model import not_run as _not_run
from results_format import BENCH_SCHEMA
from results_format.layout import BENCH
from results_format.layout import REPLICATION
from results_format.replication import RECORD_SCHEMA
from results_format.replication import replication_problem
from results_format.summary_records import BenchRecord
from results_format.summary_records import ReplicationMetadata
from results_format.summary_records import ReplicationRecord

#: How to fill the replication and benchmark sections, and what it costs (measured on this
#: project's 2-core machine, 2026-11-24, load about 7, other jobs running).
REPLICATION_COMMANDS = (
    (
        "testbed run configs/X.toml --steps 5 --results {results}",
        'a partial smoke run of one config: 6-22 s each (the record says "partial")',
    ),
    (
        "testbed run configs --results {results} --threads 1   (or: tox -e workloads)",
        "every paper experiment at its full horizon, resuming: tens of minutes (the two HGP "
        "influence configs alone take 14 min on one core)",
    ),
)
BENCH_COMMANDS = (
    (
        "python benchmarks/run.py --quick --out {results}/bench",
        "every benchmark's smoke mode: about 20 s on 2 cores (smoke sizes; its targets are not "
        "the issue's)",
    ),
    (
        "python benchmarks/run.py --out {results}/bench   (or: tox -e bench)",
        "the full benchmarks: the closed-form rounds about 10 min; the scale benchmark builds "
        "M = 10,000 clients and needs about 19 GB of memory",
    ),
)


def _files_or_commands(
    results_dir: Path,
    folder: str,
    section: Section,
    writers: str,
    commands: Sequence[tuple[str, str]],
) -> list[Path]:
    """The ``folder/*.json`` files; none: the section is "not run" with the commands that
    write them and their durations."""
    files = sorted((results_dir / folder).glob("*.json"))
    if not files:
        _not_run(
            section,
            f"no {folder}/*.json: {writers} write them, from the repository root",
            *(Command(c.format(results=results_dir), d) for c, d in commands),
        )
    return files


def replication(results_dir: Path) -> Section:
    """One table of every ``replication/*.json`` (REPLICATION_SCHEMA) row."""
    section = Section("replication", "Replication of the papers' experiments")
    files = _files_or_commands(
        results_dir, REPLICATION, section, "the experiment configs", REPLICATION_COMMANDS
    )
    if not files:
        return section
    rows = []
    for path in files:
        data = _schema_json(path, tuple(RECORD_SCHEMA), section)
        if data is None:
            continue
        problem = replication_problem(data, results_dir)
        if problem is not None:  # never shown as measured
            section.notes.append(
                f"replication/{path.name} not trusted ({problem}); its rows "
                "are not shown. Rerun its config with `testbed run` to write "
                "it again."
            )
            continue
        record = ReplicationRecord.from_json(data)
        meta = record.metadata or ReplicationMetadata()
        where = ", ".join(str(v) for v in (meta.dataset, meta.device) if v)
        status = str(meta.status or "")
        for r in record.rows:
            testbed = _fmt(r.testbed_value) if r.testbed_value is not None else "not reached"
            rows.append(
                (
                    f"{record.paper}, {record.table}: {record.experiment}"
                    + (f" ({where})" if where else ""),
                    str(r.setting),
                    str(r.metric),
                    _fmt(r.paper_value),
                    testbed,
                    str(r.unit),
                    status or "—",
                    str(r.differences),
                )
            )
    if rows:
        section.tables.append(
            Table(
                (
                    "Experiment",
                    "Setting",
                    "Metric",
                    "Paper",
                    "Testbed",
                    "Unit",
                    "Run",
                    "Differences from the paper",
                ),
                tuple(rows),
            )
        )
    return section


def bench(results_dir: Path) -> Section:
    """Per ``bench/*.json`` (BENCH_SCHEMA): its targets, and its measured rows folded."""
    section = Section("bench", "Benchmarks")
    files = _files_or_commands(results_dir, BENCH, section, "the benchmark scripts", BENCH_COMMANDS)
    if not files:
        return section

    for path in files:
        data = _schema_json(path, BENCH_SCHEMA, section)
        if data is None:
            continue
        record = BenchRecord.from_json(data)
        machine = record.machine or {}
        quick = isinstance(machine, dict) and bool(machine.get("quick"))
        machine_text = (
            ", ".join(f"{k}: {v}" for k, v in machine.items())
            if isinstance(machine, dict)
            else str(machine)
        )
        name = str(record.benchmark) + (
            " (quick mode: smoke sizes, not the benchmark's)" if quick else ""
        )
        targets = tuple(
            (
                str(t.name),
                _fmt(t.measured, 6),
                str(t.direction).replace("_", " "),
                _fmt(t.target, 6),
                _fmt(t.met),
            )
            for t in record.targets
        )
        if targets:
            section.tables.append(
                Table(
                    ("Target", "Measured", "Direction", "Target value", "Met"),
                    targets,
                    f"{name}: targets",
                )
            )
        rows = [r for r in record.rows if isinstance(r, dict)]
        head = tuple(dict.fromkeys(k for r in rows for k in r))
        section.tables.append(
            Table(
                head,
                tuple(tuple(_fmt(r.get(k), 6) for k in head) for r in rows),
                f"{name}: {record.description} ({machine_text})",
                folded=True,
            )
        )
    return section


def _schema_json(path: Path, keys: Sequence[str], section: Section) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        section.notes.append(f"{path.name} unreadable ({error}); skipped.")
        return None
    missing = [k for k in keys if not isinstance(data, dict) or k not in data]
    if missing:
        section.notes.append(f"{path.name}: missing keys {missing} of the schema; skipped.")
        return None
    if not isinstance(data.get("rows"), list):
        section.notes.append(f"{path.name}: 'rows' is not a list; skipped.")
        return None
    return data

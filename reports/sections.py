"""The report's sections beyond the claims: communication, rounds to error, replication, bench.

Each section is read from results files that a measuring step wrote (nothing is measured here):

- ``communication.json`` (:mod:`testbed_app.communication`, written by ``testbed check``);
- ``comparison/rounds_to_error.json`` and ``.csv`` (:mod:`theory_checks.comparison_runs`, idem);
- ``replication/*.json`` in :data:`testbed_app.experiments.base.REPLICATION_SCHEMA` form;
- ``bench/*.json`` in :data:`testbed_app.experiments.base.BENCH_SCHEMA` form;
- ``calibration/summary.json`` (:mod:`theory_checks.calibration`, written by
  ``testbed calibrate``).

A missing file gives the section with the line "not run" and the command that writes it; a file
that cannot be read gives a note. Each section is a :class:`Section` of tables and figures that
:func:`section_html` and :func:`section_markdown` render the same way.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reports import plots


@dataclasses.dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclasses.dataclass
class Section:
    """One section of the report: paragraphs, tables and figures (relative PNG paths)."""

    anchor: str
    title: str
    paragraphs: list[str] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)
    figures: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # src, alt, cap
    notes: list[str] = dataclasses.field(default_factory=list)


def _read_json(path: Path, section: Section, how: str) -> Any:
    """The JSON at ``path``; None with "not run" (missing) or a note (unreadable)."""
    if not path.is_file():
        section.paragraphs.append(f"not run ({path.name} is absent; {how} writes it).")
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        section.notes.append(f"{path.name} unreadable ({error}); section skipped.")
        return None


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, (int, float)):
        x = float(value)
        if math.isnan(x):
            return "n/a"
        if math.isinf(x):
            return "inf"
        return f"{int(x)}" if x == int(x) and abs(x) < 1e9 else f"{x:.{digits}g}"
    return str(value)


# --------------------------------------------------------------------------- communication


def communication(results_dir: Path) -> Section:
    section = Section("communication", "Communication per outer iteration")
    data = _read_json(results_dir / "communication.json", section, "`testbed check`")
    if data is None:
        return section
    section.paragraphs.append(
        f"Every registered algorithm at its defaults, {data.get('iterations', '?')} outer "
        "iterations on the regression grid's problem (seed 0): communication rounds of each "
        "iteration as counted by the ledger, against the paper's formula with the parameters "
        "substituted (evaluated at each iteration's drawn N' where the truncation is random).")
    rows = []
    for r in data.get("rows") or []:
        params = ", ".join(f"{k} = {v}" for k, v in (r.get("formula_parameters") or {}).items())
        formula = r.get("formula") or "—"
        expected = r.get("formula_per_iteration") or []
        value = (_fmt(r.get("formula_value")) if r.get("formula_value") is not None
                 else "per iteration: " + ", ".join(_fmt(v) for v in expected))
        measured = ", ".join(_fmt(v) for v in r.get("measured_rounds") or [])
        rows.append((str(r.get("algorithm")), str(r.get("formula_source") or r.get("paper")),
                     formula + (f" ({params})" if params else ""), value, measured,
                     _fmt(r.get("agrees")), _fmt(r.get("floats_per_round"), 4),
                     _fmt(r.get("floats_per_iteration"), 4), str(r.get("note") or "")))
    section.tables.append(Table(
        ("Algorithm", "Source", "Formula (rounds per iteration)", "Formula value",
         "Measured rounds per iteration", "Agrees", "Floats per round", "Floats per iteration",
         "Note"), tuple(rows)))
    return section


# --------------------------------------------------------------------------- rounds to error


def rounds_to_error(results_dir: Path, out_dir: Path) -> Section:
    """The rounds-to-target table of :mod:`theory_checks.comparison_runs`: one target and one
    "reached" definition (shared with the comparison claims), each algorithm tuned the same way
    and at its paper's prescribed steps, per-problem ratios with their geometric mean."""
    section = Section("rounds-to-error", "Rounds to reach the target: papers vs testbed")
    folder = results_dir / "comparison"
    data = _read_json(folder / "rounds_to_error.json", section, "`testbed check`")
    if data is None:
        return section
    if not isinstance(data, dict) or not isinstance(data.get("comparisons"), list):
        section.notes.append("rounds_to_error.json is in an older format (no 'comparisons'); "
                             "rerun `testbed check --fresh` to measure it again.")
        return section
    target = data.get("target") or {}
    tuning = data.get("tuning_rule") or {}
    section.paragraphs.append(
        f"Target: {target.get('quantity', '?')} <= {_fmt(target.get('value'))}. Reached: "
        f"{target.get('reached', '?')}; budget {_fmt(target.get('round_budget'))} rounds, a run "
        f"that does not reach counts {_fmt(target.get('cap'))}. The comparison claims use this "
        "same definition (theory_checks/comparison_runs.py). Tuned rows: every algorithm's outer "
        f"step {tuning.get('step', '?')} with c in {tuning.get('grid', '?')}, selected by "
        f"{tuning.get('selection', '?')}; prescribed rows: each paper's own steps.")
    rows = []
    for c in data["comparisons"]:
        if not isinstance(c, dict):
            continue
        per_seed = [s for s in c.get("per_seed") or [] if isinstance(s, dict)]
        ratios = ", ".join(_fmt(s.get("ratio"), 2) + ("*" if s.get("fednest_one_iteration")
                                                      else "") for s in per_seed)
        interval = c.get("interval_95")
        mean = _fmt(c.get("geometric_mean_ratio"), 3)
        if isinstance(interval, list) and len(interval) == 2:
            mean += f" [{_fmt(interval[0], 3)}, {_fmt(interval[1], 3)}]"
        rpi = c.get("rounds_per_iteration") or {}
        step = (c.get("tuning") or {}).get("candidate", {})
        notes = sorted({str(s.get("note")) for s in per_seed if s.get("note")})
        rows.append((f"{c.get('candidate')} vs {c.get('baseline')}", str(c.get("rule")),
                     f"{c.get('claim', '')} ({c.get('source', '')})"
                     + ("" if c.get("claimed") else " [context row, not a claim]"),
                     str(c.get("setting", "")),
                     f"{_fmt(rpi.get('candidate'))} / {_fmt(rpi.get('baseline'))}",
                     (f"c = {_fmt(step.get('multiple'))}" if isinstance(step, dict)
                      and step.get("multiple") is not None else "prescribed"),
                     ratios, mean, "; ".join(notes)))
    section.tables.append(Table(
        ("Comparison", "Steps", "Paper's claim (source)", "Setting",
         "Rounds per iteration (candidate / FedNest)", "Candidate step",
         "Rounds / FedNest's, per problem", "Geometric mean [95%]", "Notes"), tuple(rows),
        "Ratios below 1: the candidate reaches the target in fewer rounds. * FedNest solves "
        "that problem in one outer iteration: outside the claims' population, excluded from the "
        "geometric mean."))
    try:
        curves = _read_curves(folder / "rounds_to_error.csv")
    except FileNotFoundError:
        section.notes.append("rounds_to_error.csv is missing; no figure.")
        return section
    except (OSError, UnicodeDecodeError, ValueError, KeyError, csv.Error) as error:
        section.notes.append(f"rounds_to_error.csv unreadable ({error}); no figure.")
        return section
    if not curves:
        section.notes.append("rounds_to_error.csv holds no tuned run; no figure.")
        return section
    name = "comparison.rounds_to_error.png"
    comparisons = sorted({k for traces in curves.values() for t in traces for k in t.values})
    plots.plot_rounds_to_error(curves, {k: float(target.get("value", 0.1)) for k in comparisons},
                               out_dir / "figures" / name)
    section.figures.append((
        f"figures/{name}", "relative stationarity against communication rounds and oracle "
        "calls, tuned steps, one column per comparison, log scale",
        "One column per comparison (tuned steps): colour is the algorithm, one line per "
        "problem; dashed grey: the target. Top row against communication rounds, bottom row "
        "against oracle calls; log y-axes (geometric rates are straight lines)."))
    return section


def _read_curves(path: Path) -> dict[str, list[plots.Trace]]:
    """Tuned runs of ``rounds_to_error.csv``: per algorithm, one trace per (comparison,
    problem) whose one metric is the comparison's relative stationarity."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    runs: dict[tuple[str, str, str, str], list[dict[str, str]]] = {}
    for r in rows:
        if r.get("rule") != "tuned" or not r.get("stationarity"):
            continue
        runs.setdefault((r["comparison"], r["role"], r["algorithm"], r["seed"]), []).append(r)
    curves: dict[str, list[plots.Trace]] = {}
    for (comparison, _, name, seed), run in runs.items():
        run.sort(key=lambda r: float(r["iteration"]))
        curves.setdefault(name, []).append(plots.Trace(
            seed, tuple(float(r["comm_rounds"]) for r in run),
            tuple(float(r["oracle_calls"]) for r in run),
            {comparison: tuple(float(r["stationarity"]) for r in run)}))
    return curves


# --------------------------------------------------------------------------- calibration


def calibration(results_dir: Path) -> Section:
    """Observed false-failure rates of the statistical claims over independent seeds."""
    section = Section("calibration", "Calibration of the statistical claims")
    path = results_dir / "calibration" / "summary.json"
    if not path.is_file():
        section.paragraphs.append(
            "not run: `testbed calibrate --seeds 20` (or `tox -e calibrate`) runs every "
            "statistical claim under 20 independent Monte Carlo seeds and writes "
            "calibration/summary.json (about 15 minutes on 2 cores on the fast profile).")
        return section
    data = _read_json(path, section, "`testbed calibrate`")
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        section.notes.append(f"{path.name}: not a calibration summary; skipped.")
        return section
    section.paragraphs.append(
        f"Each statistical claim run on the correct implementation under {data.get('seeds')} "
        f"independent Monte Carlo seeds ({data.get('profile')} profile; the drawn cases stay "
        "the same, every stream changes). For a claim that holds, a \"fails as stated\" is a "
        "false failure: its observed rate, with the exact 95% Clopper-Pearson interval, is "
        "consistent with the stated rate when the interval's lower end does not exceed it. For "
        "a claim that fails as stated, the column counts the seeds that confirmed the "
        "refutation (its power). Undecided runs are counted apart.")
    rows = []
    for c in data["claims"]:
        if not isinstance(c, dict):
            continue
        seeds = c.get("seeds") or 0
        fails = c.get("refuted", 0)
        rows.append((str(c.get("claim")), str(c.get("expected")), _fmt(seeds),
                     _fmt(fails), _fmt(c.get("undecided")),
                     f"{_fmt(fails / seeds if seeds else math.nan)} "
                     f"[{_fmt(c.get('rate_low'))}, {_fmt(c.get('rate_high'))}]",
                     _fmt(c.get("stated_rate")), _fmt(c.get("consistent"))))
    section.tables.append(Table(
        ("Claim", "Expected", "Seeds", "Fails as stated", "Undecided",
         "Observed rate [95% CI]", "Stated false-failure rate", "Consistent"), tuple(rows)))
    return section


# --------------------------------------------------------------------------- workloads


def replication(results_dir: Path) -> Section:
    """Tables of ``replication/*.json`` (REPLICATION_SCHEMA), one per file."""
    section = Section("replication", "Replication of the papers' experiments")
    files = sorted((results_dir / "replication").glob("*.json"))
    if not files:
        section.paragraphs.append("not run (no replication/*.json; `testbed run CONFIG` "
                                  "writes them).")
        return section
    from results_format import REPLICATION_SCHEMA

    for path in files:
        data = _schema_json(path, REPLICATION_SCHEMA, section)
        if data is None:
            continue
        meta = data.get("metadata") or {}
        meta_text = ", ".join(f"{k}: {v}" for k, v in meta.items()) if isinstance(meta, dict) \
            else str(meta)
        rows = tuple((str(r.get("setting", "")), str(r.get("metric", "")),
                      _fmt(r.get("paper_value")),
                      _fmt(r.get("testbed_value")) if r.get("testbed_value") is not None
                      else "not reached", str(r.get("unit", "")), str(r.get("differences", "")))
                     for r in data["rows"] if isinstance(r, dict))
        section.tables.append(Table(
            ("Setting", "Metric", "Paper", "Testbed", "Unit", "Differences"), rows,
            f"{data['paper']}, {data['table']}: experiment {data['experiment']}"
            + (f" ({meta_text})" if meta_text else "")))
    return section


def bench(results_dir: Path) -> Section:
    """Tables of ``bench/*.json`` (BENCH_SCHEMA): the measured rows and the targets."""
    section = Section("bench", "Benchmarks")
    files = sorted((results_dir / "bench").glob("*.json"))
    if not files:
        section.paragraphs.append("not run (no bench/*.json; the benchmark commands write "
                                  "them).")
        return section
    from results_format import BENCH_SCHEMA

    for path in files:
        data = _schema_json(path, BENCH_SCHEMA, section)
        if data is None:
            continue
        machine = data.get("machine") or {}
        machine_text = ", ".join(f"{k}: {v}" for k, v in machine.items()) \
            if isinstance(machine, dict) else str(machine)
        rows = [r for r in data["rows"] if isinstance(r, dict)]
        head = tuple(dict.fromkeys(k for r in rows for k in r))
        section.tables.append(Table(
            head, tuple(tuple(_fmt(r.get(k), 6) for k in head) for r in rows),
            f"{data['benchmark']}: {data['description']} ({machine_text})"))
        targets = tuple((str(t.get("name", "")), _fmt(t.get("measured"), 6),
                         str(t.get("direction", "")).replace("_", " "), _fmt(t.get("target"), 6),
                         _fmt(t.get("met"))) for t in data["targets"] if isinstance(t, dict))
        if targets:
            section.tables.append(Table(("Target", "Measured", "Direction", "Target value",
                                         "Met"), targets, f"{data['benchmark']}: targets"))
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


# --------------------------------------------------------------------------- rendering


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def section_html(s: Section) -> list[str]:
    out = [f'<section class="extra" id="{_e(s.anchor)}"><h2>{_e(s.title)}</h2>']
    out += [f"<p>{_e(p)}</p>" for p in s.paragraphs]
    for t in s.tables:
        out.append('<div class="scroll"><table class="extra-table">')
        if t.caption:
            out.append(f"<caption>{_e(t.caption)}</caption>")
        out.append("<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in t.head)
                   + "</tr></thead><tbody>")
        for row in t.rows:
            cells = "".join(f'<td class="{cls}">{_e(v)}</td>' if (cls := _cell_class(v))
                            else f"<td>{_e(v)}</td>" for v in row)
            out.append(f"<tr>{cells}</tr>")
        out.append("</tbody></table></div>")
    for src, alt, caption in s.figures:
        out += ["<figure>", f'<img src="{_e(src)}" alt="{_e(alt)}">',
                f"<figcaption>{_e(caption)}</figcaption>", "</figure>"]
    if s.notes:
        out.append('<ul class="claim-notes">' + "".join(f"<li>{_e(n)}</li>" for n in s.notes)
                   + "</ul>")
    out.append("</section>")
    return out


def _cell_class(value: str) -> str:
    return {"NO": "expected-no", "yes": "expected-yes", "not reached": "muted",
            "diverged": "expected-no"}.get(value, "")


def _md(text: Any) -> str:
    text = str(text).replace("\\", "\\\\").replace("\n", " ")
    return text.replace("|", "\\|").replace("*", "\\*")


def section_markdown(s: Section) -> list[str]:
    out = [f'<a id="{s.anchor}"></a>', "", f"## {s.title}", ""]
    for p in s.paragraphs:
        out += [p, ""]
    for t in s.tables:
        if t.caption:
            out += [f"*{_md(t.caption)}*", ""]
        out.append("| " + " | ".join(_md(h) for h in t.head) + " |")
        out.append("|" + "|".join("---" for _ in t.head) + "|")
        out += ["| " + " | ".join(_md(v) for v in row) + " |" for row in t.rows]
        out.append("")
    for src, alt, caption in s.figures:
        out += [f"![{alt}]({src})", "", f"*{caption}*", ""]
    out += [f"- {n}" for n in s.notes] + ([""] if s.notes else [])
    return out


def build_sections(results_dir: Path, out_dir: Path) -> list[Section]:
    """Every extra section, in report order."""
    return [calibration(results_dir), communication(results_dir),
            rounds_to_error(results_dir, out_dir), replication(results_dir), bench(results_dir)]

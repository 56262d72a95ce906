"""The report's one context: everything the HTML page and its Markdown twin show, as data.

:func:`page_context` turns the claims (:class:`~reports.claims_table.ClaimSection`), the extra
sections and the metadata into a :class:`Page`; the templates of :mod:`reports.rendering` lay it
out. The page answers "which claims of this paper hold?" first:

- the **matrix** of papers by verdict, each count linking to the first of its rows;
- the **errata**: per claim that fails as stated, the paper's statement, what was measured (the
  case, the figure), the correction checked beside it and the counterexample files;
- per paper, the **summary table**, where each correction sits on the row under the claim it
  corrects;
- the **verified libraries and plugins** (runs of estimators that are not the testbed's own,
  :func:`outside_papers`), a table per library, outside the papers' counts;
- then the sections (calibration, communication, rounds to error, replication, benchmarks) and
  each claim in detail.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from reports.claims_table import (
    FIT_HEAD,
    PAPER_ORDER,
    TABLE_HEAD,
    VERDICT_CLASSES,
    ClaimSection,
    _by_paper,
    _cases_text,
    _expected_text,
    _fit_rows,
    _header_fields,
    _num,
    _summary,
    calibration_text,
    decision_text,
    expected_class,
    power_text,
)
from reports.hypotheses_text import hypothesis_lines, reading_lines, refutation_summary
from reports.results_reading import _bool, _float
from reports.sections import Section

VERDICT_COLUMNS = ("holds", "fails as stated", "holds once corrected", "undecided")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclasses.dataclass
class Row:
    """One claim: its row in its paper's table and its detail article."""

    section: ClaimSection
    paper: str
    verdict: str
    expected: str
    basis: str
    power: str
    calibration: str
    corrects: ClaimSection | None = None
    corrected_by: list[ClaimSection] = dataclasses.field(default_factory=list)
    #: the anchor the matrix links to, on the first row of this verdict in this paper
    verdict_anchor: str = ""

    @property
    def claim(self) -> dict[str, Any]:
        return self.section.claim

    @property
    def id(self) -> str:
        return self.section.id

    @property
    def anchor(self) -> str:
        return self.section.anchor

    @property
    def row_anchor(self) -> str:
        return self.section.row_anchor

    @property
    def verdict_class(self) -> str:
        return VERDICT_CLASSES.get(self.verdict, "verdict-unknown")

    @property
    def expected_class(self) -> str:
        return expected_class(self.expected)

    @property
    def statement(self) -> str:
        return str(self.claim.get("statement") or "")

    @property
    def reference(self) -> str:
        return str(self.claim.get("reference") or "")

    @property
    def kind(self) -> str:
        return str(self.claim.get("kind") or "")

    @property
    def estimators(self) -> str:
        return ", ".join(str(e) for e in self.claim.get("estimators") or [])

    @property
    def decision(self) -> str:
        return decision_text(self.claim)

    @property
    def decision_lines(self) -> list[str]:
        return decision_lines(self.claim)

    @property
    def fit_rows(self) -> list[tuple[str, ...]]:
        return _fit_rows(self.claim)

    @property
    def notes(self) -> str:
        return str(self.claim.get("notes") or "")

    @property
    def hypotheses(self) -> list[str]:
        """The paper's hypotheses with their margins on the case the verdict rests on."""
        return hypothesis_lines(self.claim)

    @property
    def readings(self) -> list[str]:
        """The statement's readings with the verdict under each."""
        return reading_lines(self.claim)

    @property
    def refutation_summary(self) -> str:
        return refutation_summary(self.claim)


@dataclasses.dataclass
class MatrixCell:
    verdict: str
    count: int
    link: str
    claims: list[str]

    @property
    def css(self) -> str:
        return VERDICT_CLASSES.get(self.verdict, "verdict-unknown") if self.count else "zero"


@dataclasses.dataclass
class MatrixRow:
    paper: str
    anchor: str
    cells: list[MatrixCell]
    total: int


@dataclasses.dataclass
class Erratum:
    row: Row
    corrections: list[Row]


@dataclasses.dataclass
class PaperTable:
    paper: str
    anchor: str
    rows: list[Row]
    #: a library's table: each estimator verified and its entry's reference (library version)
    estimators: list[tuple[str, str]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Page:
    title: str
    headline: str
    fields: list[tuple[str, str]]
    notes: list[str]
    summary: str
    columns: list[str]
    matrix: list[MatrixRow]
    totals: list[int]
    errata: list[Erratum]
    papers: list[PaperTable]
    extras: list[Section]
    table_head: tuple[str, ...] = TABLE_HEAD
    fit_head: tuple[str, ...] = FIT_HEAD
    #: verified libraries and plugins (:func:`outside_papers`), one table each
    libraries: list[PaperTable] = dataclasses.field(default_factory=list)

    @property
    def rows(self) -> list[Row]:
        return [r for p in self.papers + self.libraries for r in p.rows]


def outside_papers(claim: dict[str, Any]) -> bool:
    """A run of a plugin's or a library adapter's estimator, or a claim a plugin declares
    (their results record ``builtin: false``): shown in the libraries' section and never in
    the papers' counts (the matrix, the errata, the summary line)."""
    entry = claim.get("estimator_entry")
    if isinstance(entry, dict):
        return entry.get("builtin") is False
    return claim.get("builtin") is False


def library_name(claim: dict[str, Any]) -> str:
    """The library (or plugin package's paper) a run outside the papers belongs to."""
    entry = claim.get("estimator_entry")
    name = entry.get("paper") if isinstance(entry, dict) else None
    return str(name or claim.get("paper") or "unknown library")


def decision_lines(c: dict[str, Any]) -> list[str]:
    """The perturbation or positive control, and each undecided case with the budget that
    would decide it."""
    lines = []
    power = c.get("power")
    if isinstance(power, dict):
        lines.append(f"Perturbation ({'caught' if _bool(power.get('caught')) else 'NOT caught'},"
                     f" verdict on it: {power.get('verdict', '?')}): {power.get('name', '?')}: "
                     f"{power.get('description', '')}")
    control = c.get("positive_control")
    if isinstance(control, dict):
        case = control.get("case") or {}
        lines.append(f"Positive control: on {case.get('problem_id', '?')} "
                     f"{json.dumps(case.get('params') or {}, sort_keys=True)} the same check "
                     f"says {control.get('outcome', '?')} (measured "
                     f"{_num(case.get('measured'))} vs {_num(case.get('bound'))}).")
    for case in c.get("cases") or []:
        if not isinstance(case, dict) or case.get("outcome") != "undecided":
            continue
        for d in case.get("decisions") or []:
            if isinstance(d, dict) and d.get("outcome") == "undecided":
                factor = _float(d.get("budget_factor"))
                budget = (f"about {_num(factor, 2)}x the samples would decide it"
                          if math.isfinite(factor) else "the estimate sits on the edge")
                lines.append(f"Undecided on {case.get('problem_id')}: {d.get('quantity')} "
                             f"{_num(d.get('estimate'), 4)}, interval [{_num(d.get('low'), 4)}, "
                             f"{_num(d.get('high'), 4)}] at rate {_num(d.get('rate'), 2)} "
                             f"against [{_num(d.get('region_low'), 4)}, "
                             f"{_num(d.get('region_high'), 4)}]; {budget}.")
    return lines


def _ordered(group: Sequence[ClaimSection]) -> list[ClaimSection]:
    """The paper's claims by id, each correction moved onto the row under the claim it
    corrects (a correction of a correction under that one)."""
    ids = {s.id for s in group}
    corrections: dict[str, list[ClaimSection]] = {}
    for s in group:
        target = s.claim.get("corrects")
        if target in ids and target != s.id:
            corrections.setdefault(str(target), []).append(s)
    placed: set[str] = set()
    out: list[ClaimSection] = []

    def place(s: ClaimSection) -> None:
        if s.id in placed:
            return
        placed.add(s.id)
        out.append(s)
        for c in sorted(corrections.get(s.id, []), key=lambda c: c.id):
            place(c)

    for s in sorted(group, key=lambda s: s.id):
        if s.claim.get("corrects") not in ids or s.claim.get("corrects") == s.id:
            place(s)
    for s in sorted(group, key=lambda s: s.id):  # a cycle of corrections: keep every claim
        place(s)
    return out


def _headline(meta: dict[str, Any]) -> str:
    profile = meta.get("profile")
    name = profile.get("name") if isinstance(profile, dict) else profile
    commit = str(meta.get("git_commit") or "unknown")[:12]
    return (f"{name or 'unknown'} profile · commit {commit} · results written "
            f"{meta.get('written', 'unknown')}")


def page_context(meta: dict[str, Any], sections: Sequence[ClaimSection], notes: Sequence[str],
                 extras: Sequence[Section] = (),
                 calibration: dict[str, dict[str, Any]] | None = None) -> Page:
    """The whole page as data (see the module docstring)."""
    by_id = {s.id: s for s in sections}
    corrected_by: dict[str, list[ClaimSection]] = {}
    for s in sections:
        if s.claim.get("corrects") in by_id:
            corrected_by.setdefault(str(s.claim["corrects"]), []).append(s)
    papers: list[PaperTable] = []
    libraries: list[PaperTable] = []
    rows_by_id: dict[str, Row] = {}
    inside = [s for s in sections if not outside_papers(s.claim)]
    outside: dict[str, list[ClaimSection]] = {}
    for s in sections:
        if outside_papers(s.claim):
            outside.setdefault(library_name(s.claim), []).append(s)
    groups = [(False, paper, group) for paper, group in _by_paper(inside)]
    groups += [(True, name, outside[name]) for name in sorted(outside)]
    for is_library, paper, group in groups:
        rows, first = [], set()
        for s in _ordered(group):
            c = s.claim
            verdict = str(c.get("verdict", "unknown"))
            row = Row(s, paper, verdict, _expected_text(c), _cases_text(c), power_text(c),
                      calibration_text(c, calibration),
                      by_id.get(str(c.get("corrects"))) if c.get("corrects") else None,
                      sorted(corrected_by.get(s.id, []), key=lambda x: x.id))
            if verdict not in first:
                first.add(verdict)
                row.verdict_anchor = f"{slug(paper)}-{slug(verdict)}"
            rows.append(row)
            rows_by_id[s.id] = row
        if is_library:
            entries = {(str(s.claim.get("estimator")), str(s.claim["estimator_entry"].get(
                "reference", ""))) for s in group if isinstance(s.claim.get("estimator_entry"),
                                                                dict)}
            libraries.append(PaperTable(paper, f"library-{slug(paper)}", rows, sorted(entries)))
        else:
            papers.append(PaperTable(paper, f"paper-{slug(paper)}", rows))
    columns = list(VERDICT_COLUMNS)
    columns += sorted({r.verdict for p in papers for r in p.rows} - set(columns),
                      key=lambda v: (v != "not checked", v))
    matrix = []
    for table in papers:
        cells = []
        for verdict in columns:
            members = [r for r in table.rows if r.verdict == verdict]
            link = f"#{slug(table.paper)}-{slug(verdict)}" if members else ""
            cells.append(MatrixCell(verdict, len(members), link, [r.id for r in members]))
        matrix.append(MatrixRow(table.paper, table.anchor, cells, len(table.rows)))
    totals = [sum(m.cells[i].count for m in matrix) for i in range(len(columns))]
    errata = [Erratum(r, [rows_by_id[c.id] for c in r.corrected_by if c.id in rows_by_id])
              for p in papers for r in p.rows if r.verdict == "fails as stated"]
    return Page(
        title="Hypergradient testbed: which claims of the papers hold",
        headline=_headline(meta), fields=_header_fields(meta), notes=list(notes),
        summary=_summary(inside), columns=columns, matrix=matrix,
        totals=totals + [sum(m.total for m in matrix)], errata=errata, papers=papers,
        extras=list(extras), libraries=libraries)


def paper_rank(paper: str) -> int:
    return PAPER_ORDER.index(paper) if paper in PAPER_ORDER else len(PAPER_ORDER)

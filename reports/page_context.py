"""The report's one context: everything the HTML page and its Markdown twin show, as data.

:func:`page_context` turns the claims (:class:`~reports.claims_table.ClaimSection`), the extra
sections and the metadata into a :class:`Page`; the templates of :mod:`reports.rendering` lay it
out. The page answers "which claims of this paper hold?" first:

- **at a glance** (the first screen): per paper, its claims grouped by verdict (holds, fails as
  stated, holds once corrected, undecided; "not checked" apart), each claim's id linking to its
  row; the undecided ones with the command that decides them and how long it takes;
- per paper, the **summary table** in the same groups, one line per claim (its verdict and what
  the testbed expected, the measured figure against the theory, the statement), each linking to
  its detail;
- the **errata** (per statement that fails as printed: what was measured, the correction
  checked beside it, the counterexample files), the sections (calibration, communication,
  rounds to error, replication, benchmarks) and each claim in detail, all folded.

Claim runs that are not the testbed's own (a plugin's estimator or claims, an integration, a
``testbed verify`` target: the results' ``origin``) are grouped apart from the papers and never
counted in the papers' totals.
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
    calibration_text,
    cases_text,
    decision_text,
    expectation,
    fit_rows,
    header_fields,
    number_text,
    power_text,
    summary_sentence,
)
from reports.hypotheses_text import hypothesis_lines, reading_lines, refutation_summary
from reports.results_reading import as_bool, as_float
from reports.sections import Section

#: The verdict groups, in the order every paper shows them ("not checked" last, apart).
VERDICT_ORDER = ("holds", "fails as stated", "holds once corrected", "undecided", "not checked")
#: Results files written before runs recorded their origin are the testbed's own.
BUILT_IN = "built-in"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclasses.dataclass(frozen=True)
class DecideCommand:
    """The run that decides an undecided claim, and what it takes."""

    command: str
    seconds: float | None

    @property
    def duration(self) -> str:
        if self.seconds is None or not math.isfinite(self.seconds):
            return "time not measured"
        return _duration(self.seconds)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"about {seconds:.0f} s"
    return f"about {seconds / 60:.1f} min"


@dataclasses.dataclass
class Row:
    """One claim run: its line in its paper's table and its detail."""

    section: ClaimSection
    paper: str
    verdict: str
    basis: str
    power: str
    calibration: str
    corrects: ClaimSection | None = None
    corrected_by: list[ClaimSection] = dataclasses.field(default_factory=list)
    #: the name shown at a glance: the id without its paper's prefix
    short: str = ""
    decide: DecideCommand | None = None

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
    def expectation(self) -> tuple[str, str, str]:
        """(short text, long text, CSS class) of the verdict against the testbed's record."""
        return expectation(self.claim)

    @property
    def measured(self) -> str:
        """The row's measured figure: the worst case against the theory, or, for an undecided
        claim, the run that decides it."""
        if self.decide is not None:
            return f"decided by {self.decide.command} ({self.decide.duration})"
        return self.section.worst

    @property
    def statement(self) -> str:
        return str(self.claim.get("statement") or "")

    @property
    def line_statement(self) -> str:
        """The statement for a one-line row, a correction naming the claim it corrects."""
        if self.corrects is not None:
            return f"corrects {self.corrects.id}: {self.statement}"
        return self.statement

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
        return fit_rows(self.claim)

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

    @property
    def scale(self) -> str:
        """For a number from a paper's table: how the claim's protocol differs from the
        paper's scale."""
        return str(self.claim.get("scale") or "")


@dataclasses.dataclass
class VerdictGroup:
    """A paper's claims with one verdict."""

    verdict: str
    rows: list[Row]
    anchor: str
    #: one command deciding every undecided claim of the group, with the sum of their times
    decide: DecideCommand | None = None

    @property
    def css(self) -> str:
        return VERDICT_CLASSES.get(self.verdict, "verdict-unknown")

    @property
    def count(self) -> int:
        return len(self.rows)


@dataclasses.dataclass
class PaperTable:
    """A paper's claims (or, apart, one plugin's or integration's runs), grouped by verdict."""

    paper: str
    anchor: str
    groups: list[VerdictGroup]
    #: "" for the papers; the origin ("plugin my-estimator") for runs that are not built in
    origin: str = ""

    @property
    def rows(self) -> list[Row]:
        return [r for g in self.groups for r in g.rows]

    @property
    def counts(self) -> str:
        """"34 claims: 25 hold, 3 fail as stated, ..." (the verdicts present, in order)."""
        words = {"holds": "hold", "fails as stated": "fail as stated",
                 "holds once corrected": "hold once corrected"}
        n = len(self.rows)
        parts = [f"{g.count} {words.get(g.verdict, g.verdict) if g.count != 1 else g.verdict}"
                 for g in self.groups]
        return f"{n} claim{'s' if n != 1 else ''}: " + ", ".join(parts)


@dataclasses.dataclass
class Erratum:
    row: Row
    corrections: list[Row]


@dataclasses.dataclass
class Page:
    title: str
    headline: str
    fields: list[tuple[str, str]]
    notes: list[str]
    summary: str
    papers: list[PaperTable]
    #: runs that are not the testbed's own (plugins, integrations, verified targets)
    outside: list[PaperTable]
    errata: list[Erratum]
    extras: list[Section]
    table_head: tuple[str, ...] = TABLE_HEAD
    fit_head: tuple[str, ...] = FIT_HEAD

    @property
    def tables(self) -> list[PaperTable]:
        return self.papers + self.outside

    @property
    def rows(self) -> list[Row]:
        return [r for p in self.tables for r in p.rows]


def decision_lines(c: dict[str, Any]) -> list[str]:
    """The perturbation or positive control, and each undecided case with the budget that
    would decide it."""
    lines = []
    power = c.get("power")
    if isinstance(power, dict):
        lines.append(f"Perturbation ({'caught' if as_bool(power.get('caught')) else 'NOT caught'},"
                     f" verdict on it: {power.get('verdict', '?')}): {power.get('name', '?')}: "
                     f"{power.get('description', '')}")
    control = c.get("positive_control")
    if isinstance(control, dict):
        case = control.get("case") or {}
        lines.append(f"Positive control: on {case.get('problem_id', '?')} "
                     f"{json.dumps(case.get('params') or {}, sort_keys=True)} the same check "
                     f"says {control.get('outcome', '?')} (measured "
                     f"{number_text(case.get('measured'))} vs {number_text(case.get('bound'))}).")
    for case in c.get("cases") or []:
        if not isinstance(case, dict) or case.get("outcome") != "undecided":
            continue
        for d in case.get("decisions") or []:
            if isinstance(d, dict) and d.get("outcome") == "undecided":
                factor = as_float(d.get("budget_factor"))
                budget = (f"about {number_text(factor, 2)}x the samples would decide it"
                          if math.isfinite(factor) else "the estimate sits on the edge")
                lines.append(f"Undecided on {case.get('problem_id')}: {d.get('quantity')} "
                             f"{number_text(d.get('estimate'), 4)}, "
                             f"interval [{number_text(d.get('low'), 4)}, "
                             f"{number_text(d.get('high'), 4)}] "
                             f"at rate {number_text(d.get('rate'), 2)} "
                             f"against [{number_text(d.get('region_low'), 4)}, "
                             f"{number_text(d.get('region_high'), 4)}]; {budget}.")
    return lines


def decide_command(claim: dict[str, Any], results: str) -> DecideCommand | None:
    """For an undecided claim: ``testbed check`` on the profile that decides it (recorded as
    ``decided_on`` when its profile cannot decide it by design; else the thorough profile, with
    more samples), with the measured time when the claim records one."""
    if claim.get("verdict") != "undecided":
        return None
    decided = claim.get("decided_on")
    decided = decided if isinstance(decided, dict) else {}
    profile = str(decided.get("profile") or "thorough")
    seconds = as_float(decided.get("seconds"))
    where = f" --results {results}" if results and results != "results" else ""
    return DecideCommand(f"testbed check --profile {profile} --claim {claim.get('id')}{where}",
                         seconds if math.isfinite(seconds) else None)


def _merged_decide(rows: Sequence[Row]) -> DecideCommand | None:
    """One command for several undecided claims of one profile (``--claim A B C``)."""
    commands = [r.decide for r in rows if r.decide is not None]
    if len(commands) < 2:
        return commands[0] if commands else None
    heads = {c.command.split(" --claim ")[0] for c in commands}
    tails = {c.command.split(" --claim ")[1].partition(" ")[2] for c in commands}
    if len(heads) != 1 or len(tails) != 1:
        return None
    ids = " ".join(r.id for r in rows if r.decide is not None)
    tail = tails.pop()
    seconds = [c.seconds for c in commands]
    total = None if any(s is None for s in seconds) else sum(s for s in seconds if s)
    return DecideCommand(f"{heads.pop()} --claim {ids}" + (f" {tail}" if tail else ""), total)


def _short(claim_id: str, paper: str) -> str:
    """The id without its paper's prefix (``fednest.thm31.k_rate_bilevel`` under FedNest reads
    ``thm31.k_rate_bilevel``)."""
    prefix = paper.lower() + "."
    return claim_id[len(prefix):] if claim_id.lower().startswith(prefix) else claim_id


def _origin(section: ClaimSection) -> str:
    """Where a run comes from (the results' ``origin``; for results that record only whether
    the estimator or the claim is built in, the library or plugin they name)."""
    claim = section.claim
    if claim.get("origin"):
        return str(claim["origin"])
    entry = claim.get("estimator_entry")
    if isinstance(entry, dict) and entry.get("builtin") is False:
        return f"library {entry.get('paper') or 'unknown'}"
    if claim.get("builtin") is False:
        return f"plugin {claim.get('paper') or 'unknown'}"
    return BUILT_IN


def _origin_title(origin: str, sections: Sequence[ClaimSection]) -> str:
    """An outside table's title: its origin, the estimators checked and, for a library's
    adapter, the entry's reference (the library's version and call)."""
    estimators = sorted({str(s.claim.get("estimator") or "") for s in sections} - {""})
    references = sorted({str(entry.get("reference")) for s in sections
                         for entry in (s.claim.get("estimator_entry"),)
                         if isinstance(entry, dict) and entry.get("reference")
                         and entry.get("builtin") is False})
    title = f"{origin}: {', '.join(estimators)}" if estimators else origin
    return title + (f" ({'; '.join(references)})" if references else "")


def _grouped(title: str, anchor: str, sections: Sequence[ClaimSection],
             rows_by_id: dict[str, Row], origin: str = "") -> PaperTable:
    """A paper's (or an origin's) table: its rows in verdict groups, each sorted by id."""
    by_verdict: dict[str, list[Row]] = {}
    for s in sections:
        row = rows_by_id[s.id]
        by_verdict.setdefault(row.verdict, []).append(row)
    order = list(VERDICT_ORDER) + sorted(set(by_verdict) - set(VERDICT_ORDER))
    groups = []
    for verdict in order:
        rows = sorted(by_verdict.get(verdict, []), key=lambda r: r.id)
        if rows:
            groups.append(VerdictGroup(verdict, rows, f"{anchor}-{slug(verdict)}",
                                       _merged_decide(rows) if verdict == "undecided" else None))
    return PaperTable(title, anchor, groups, origin)


def _headline(meta: dict[str, Any]) -> str:
    profile = meta.get("profile")
    name = profile.get("name") if isinstance(profile, dict) else profile
    commit = str(meta.get("git_commit") or "unknown")[:12]
    return (f"{name or 'unknown'} profile · commit {commit} · results written "
            f"{meta.get('written', 'unknown')}")


def _paper_key(paper: str) -> tuple[int, str]:
    return (PAPER_ORDER.index(paper) if paper in PAPER_ORDER else len(PAPER_ORDER), paper)


def page_context(meta: dict[str, Any], sections: Sequence[ClaimSection], notes: Sequence[str],
                 extras: Sequence[Section] = (),
                 calibration: dict[str, dict[str, Any]] | None = None,
                 results: str = "results") -> Page:
    """The whole page as data (see the module docstring); ``results`` is the results folder
    named in the commands the page gives."""
    by_id = {s.id: s for s in sections}
    corrected_by: dict[str, list[ClaimSection]] = {}
    for s in sections:
        if s.claim.get("corrects") in by_id:
            corrected_by.setdefault(str(s.claim["corrects"]), []).append(s)
    rows_by_id: dict[str, Row] = {}
    for s in sections:
        c = s.claim
        paper = str(c.get("paper") or "unknown paper")
        rows_by_id[s.id] = Row(
            s, paper, str(c.get("verdict", "unknown")), cases_text(c), power_text(c),
            calibration_text(c, calibration),
            by_id.get(str(c.get("corrects"))) if c.get("corrects") else None,
            sorted(corrected_by.get(s.id, []), key=lambda x: x.id),
            _short(s.id, paper), decide_command(c, results))
    own = [s for s in sections if _origin(s) == BUILT_IN]
    papers = [_grouped(paper, f"paper-{slug(paper)}",
                       [s for s in own if rows_by_id[s.id].paper == paper], rows_by_id)
              for paper in sorted({rows_by_id[s.id].paper for s in own}, key=_paper_key)]
    origins = sorted({_origin(s) for s in sections} - {BUILT_IN})
    outside = []
    for origin in origins:
        members = [s for s in sections if _origin(s) == origin]
        outside.append(_grouped(_origin_title(origin, members), f"outside-{slug(origin)}",
                                members, rows_by_id, origin))
    errata = [Erratum(r, [rows_by_id[c.id] for c in r.corrected_by if c.id in rows_by_id])
              for p in papers for r in p.rows if r.verdict == "fails as stated"]
    return Page(
        title="Hypergradient testbed: which claims of the papers hold",
        headline=_headline(meta), fields=header_fields(meta), notes=list(notes),
        summary=summary_sentence([s for s in sections if _origin(s) == BUILT_IN]), papers=papers,
        outside=outside, errata=errata, extras=list(extras))

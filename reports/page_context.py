"""The report's one context: everything the HTML page and its Markdown twin show, as data.

:func:`page_context` turns the claims (:class:`~reports.claims_table.ClaimSection`), the extra
sections and the metadata into a :class:`Page`; the templates of :mod:`reports.rendering` lay it
out. The page answers "which claims of this paper hold?" first:

- **at a glance** (the first screen): per paper, its claims grouped by verdict, the substantive
  refutations (a stated result that fails as stated) first, then holds, holds once corrected,
  undecided, and apart the errata (a proof step, printed formula or informal sentence that fails
  as printed) and the table numbers not reproduced ("not checked" last), each claim's id linking
  to its row; the undecided ones with the command that decides them and how long it takes;
- per paper, the **summary table** in the same groups, one line per claim (its verdict and what
  the testbed expected, the measured figure against the theory, the statement), each linking to
  its detail;
- the **refutations** of stated results, the **errata** and the **table numbers**, each in a
  section of its own (per statement that fails: what was measured, the correction checked
  beside it, the result an erratum serves with its verdict, the counterexample files), the
  sections (calibration, communication,
  rounds to error, replication, benchmarks) and each claim in detail, all folded.

Claim runs that are not the testbed's own (a plugin's estimator or claims, an integration, a
``testbed verify`` target: the results' ``origin``) are grouped apart from the papers and never
counted in the papers' totals.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from reports.claim_rows import FAILS
from reports.claim_rows import DecideCommand
from reports.claim_rows import Row
from reports.claim_rows import decide_command
from reports.claims_table import FIT_HEAD
from reports.claims_table import PAPER_ORDER
from reports.claims_table import TABLE_HEAD
from reports.claims_table import VERDICT_CLASSES
from reports.claims_table import ClaimSection
from reports.claims_table import calibration_text
from reports.claims_table import cases_text
from reports.claims_table import header_fields
from reports.claims_table import power_text
from reports.claims_table import summary_sentence
from reports.sections import Section
from results_format.populations import COMPARISONS
from results_format.populations import PAPERS
from results_format.populations import POPULATIONS
from results_format.populations import VARIANTS
from results_format.populations import counted
from results_format.populations import population as population_of
from results_format.summary_records import CalibrationRow
from results_format.summary_records import ResultsMetadata
from results_format.verdicts import ERRATUM
from results_format.verdicts import REFUTATION_CLASSES
from results_format.verdicts import SUBSTANTIVE
from results_format.verdicts import TABLE_NUMBER

#: The groups of a paper, (verdict, refutation class), in the order its glance and table show
#: them: the substantive refutations first, the errata and table numbers after the rest.
GROUP_ORDER = (
    (FAILS, SUBSTANTIVE),
    ("holds", ""),
    ("holds once corrected", ""),
    ("undecided", ""),
    (FAILS, ERRATUM),
    (FAILS, TABLE_NUMBER),
    ("not checked", ""),
)
#: A group's words (singular, plural) where they are not its verdict's.
GROUP_WORDS = {
    (FAILS, SUBSTANTIVE): ("fails as stated", "fail as stated"),
    (FAILS, ERRATUM): ("erratum (fails as printed)", "errata (fail as printed)"),
    (FAILS, TABLE_NUMBER): ("table number (fails as stated)", "table numbers (fail as stated)"),
    ("holds", ""): ("holds", "hold"),
    ("holds once corrected", ""): ("holds once corrected", "hold once corrected"),
}
#: Results files written before runs recorded their origin are the testbed's own.
BUILT_IN = "built-in"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclasses.dataclass
class VerdictGroup:
    """A paper's claims with one verdict."""

    verdict: str
    rows: list[Row]
    anchor: str
    #: one command deciding every undecided claim of the group, with the sum of their times
    decide: DecideCommand | None = None
    #: for "fails as stated": the refutation class the group holds
    refutation: str = ""

    @property
    def label(self) -> str:
        """The group's name: its verdict, or for a refutation its class ("erratum ...")."""
        singular, plural = GROUP_WORDS.get(
            (self.verdict, self.refutation), (self.verdict, self.verdict)
        )
        return singular if self.count == 1 else plural

    @property
    def badge(self) -> str:
        """The name on the group's badge (its verdict, or a refutation's class)."""
        return GROUP_WORDS.get((self.verdict, self.refutation), (self.verdict,))[0]

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
    #: which of the testbed's runs it holds (:mod:`results_format.populations`): a paper's
    #: claims, the comparisons, or the runs on enrolled variants
    population: str = PAPERS

    @property
    def rows(self) -> list[Row]:
        return [r for g in self.groups for r in g.rows]

    @property
    def counts(self) -> str:
        """ "34 claims: 2 fail as stated, 25 hold, ..., 1 erratum (fails as printed)" (the groups
        present, in order)."""
        n = len(self.rows)
        parts = [f"{g.count} {g.label}" for g in self.groups]
        # a paper's table says "claims"; the comparisons and the variants' runs their own noun
        what = (
            f"{n} claim{'s' if n != 1 else ''}"
            if self.population == PAPERS or self.origin
            else counted(n, self.population)
        )
        return f"{what}: " + ", ".join(parts)


@dataclasses.dataclass
class Erratum:
    """A claim that fails as stated (a substantive refutation, an erratum or a table number),
    with its corrections and, for an erratum, the claim of the result it serves."""

    row: Row
    corrections: list[Row]
    serves: Row | None = None


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
    #: the papers' claims that fail as stated, by class: errata (a proof step, printed formula
    #: or informal sentence) in a section apart from the refutations of stated results and
    #: from the table numbers
    errata: list[Erratum]
    extras: list[Section]
    refutations: list[Erratum] = dataclasses.field(default_factory=list)
    table_numbers: list[Erratum] = dataclasses.field(default_factory=list)
    table_head: tuple[str, ...] = TABLE_HEAD
    fit_head: tuple[str, ...] = FIT_HEAD

    @property
    def tables(self) -> list[PaperTable]:
        return self.papers + self.outside

    @property
    def unfilled(self) -> list[Section]:
        """The sections without results, each listed near the top in one line with the
        commands that fill it (the cheapest first) and what each costs."""
        return [s for s in self.extras if s.status == "not run" and s.commands]

    @property
    def rows(self) -> list[Row]:
        return [r for p in self.tables for r in p.rows]


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
    return claim_id[len(prefix) :] if claim_id.lower().startswith(prefix) else claim_id


def _origin(section: ClaimSection) -> str:
    """Where a run comes from (the results' ``origin``; for results that record only whether
    the estimator or the claim is built in, the library or plugin they name)."""
    claim = section.claim
    if claim.origin:
        return claim.origin
    entry = claim.estimator_entry
    if entry is not None and entry.builtin is False:
        return f"library {entry.paper or 'unknown'}"
    if claim.builtin is False:
        return f"plugin {claim.paper or 'unknown'}"
    return BUILT_IN


def _origin_title(origin: str, sections: Sequence[ClaimSection]) -> str:
    """An outside table's title: its origin, the estimators checked and, for a library's
    adapter, the entry's reference (the library's version and call)."""
    estimators = sorted({s.claim.estimator for s in sections} - {""})
    references = sorted(
        {
            str(entry.reference)
            for s in sections
            for entry in (s.claim.estimator_entry,)
            if entry is not None and entry.reference and entry.builtin is False
        }
    )
    title = f"{origin}: {', '.join(estimators)}" if estimators else origin
    return title + (f" ({'; '.join(references)})" if references else "")


def _grouped(
    title: str,
    anchor: str,
    sections: Sequence[ClaimSection],
    rows_by_id: dict[str, Row],
    origin: str = "",
    population: str = PAPERS,
) -> PaperTable:
    """A paper's (or an origin's) table: its rows in the groups of :data:`GROUP_ORDER` (a
    verdict, and for "fails as stated" the refutation class), each sorted by id."""
    by_group: dict[tuple[str, str], list[Row]] = {}
    for s in sections:
        row = rows_by_id[s.id]
        by_group.setdefault((row.verdict, row.refutation), []).append(row)
    order = list(GROUP_ORDER) + sorted(set(by_group) - set(GROUP_ORDER))
    groups = []
    for verdict, refutation in order:
        rows = sorted(by_group.get((verdict, refutation), []), key=lambda r: r.id)
        if rows:
            name = refutation if refutation and refutation != SUBSTANTIVE else verdict
            groups.append(
                VerdictGroup(
                    verdict,
                    rows,
                    f"{anchor}-{slug(name)}",
                    _merged_decide(rows) if verdict == "undecided" else None,
                    refutation,
                )
            )
    return PaperTable(title, anchor, groups, origin, population)


def _headline(meta: ResultsMetadata) -> str:
    name = meta.profile_name
    commit = str(meta.git_commit or "unknown")[:12]
    return (
        f"{name or 'unknown'} profile · commit {commit} · results written "
        f"{'unknown' if meta.written is None else meta.written}"
    )


#: The titles of the tables of the comparisons and of the runs on enrolled variants.
POPULATION_TITLES = {
    COMPARISONS: "Comparisons (a paper's statement about two algorithms)",
    VARIANTS: "Runs on enrolled variants (a claim on a registered variant: "
    "they test the variant, not the paper)",
}


def _paper_key(paper: str) -> tuple[int, str]:
    return (PAPER_ORDER.index(paper) if paper in PAPER_ORDER else len(PAPER_ORDER), paper)


def _rows(
    sections: Sequence[ClaimSection],
    calibration: dict[str, CalibrationRow] | None,
    results: str,
    kills: dict[str, list[str]] | None,
) -> dict[str, Row]:
    """Each claim run's row, by id, linked to the claims it corrects, is corrected by and
    serves."""
    by_id = {s.id: s for s in sections}
    corrected_by: dict[str, list[ClaimSection]] = {}
    for s in sections:
        if s.claim.corrects in by_id:
            corrected_by.setdefault(str(s.claim.corrects), []).append(s)
    rows_by_id: dict[str, Row] = {}
    for s in sections:
        c = s.claim
        paper = c.paper or "unknown paper"
        rows_by_id[s.id] = Row(
            s,
            paper,
            c.verdict or "unknown",
            cases_text(c),
            power_text(c),
            calibration_text(c, calibration),
            by_id.get(c.corrects) if c.corrects else None,
            sorted(corrected_by.get(s.id, []), key=lambda x: x.id),
            _short(s.id, paper),
            decide_command(c, results),
            by_id.get(c.serves) if c.serves else None,
            kills,
        )
    return rows_by_id


def _own_tables(sections: Sequence[ClaimSection], rows_by_id: dict[str, Row]) -> list[PaperTable]:
    """The testbed's own runs: the claims of the papers per paper, then the comparisons and
    the runs on enrolled variants, each in a table of its own (results_format.populations:
    ``testbed check`` and ``testbed list`` count them apart too)."""
    own = [s for s in sections if _origin(s) == BUILT_IN]
    by_population = {
        which: [s for s in own if population_of(s.id) == which] for which in POPULATIONS
    }
    claims = by_population[PAPERS]
    papers = [
        _grouped(
            paper,
            f"paper-{slug(paper)}",
            [s for s in claims if rows_by_id[s.id].paper == paper],
            rows_by_id,
        )
        for paper in sorted({rows_by_id[s.id].paper for s in claims}, key=_paper_key)
    ]
    papers += [
        _grouped(POPULATION_TITLES[which], slug(which), members, rows_by_id, population=which)
        for which, members in by_population.items()
        if which != PAPERS and members
    ]
    return papers


def _outside_tables(
    sections: Sequence[ClaimSection], rows_by_id: dict[str, Row]
) -> list[PaperTable]:
    """The runs that are not the testbed's own, one table per origin."""
    outside = []
    for origin in sorted({_origin(s) for s in sections} - {BUILT_IN}):
        members = [s for s in sections if _origin(s) == origin]
        outside.append(
            _grouped(
                _origin_title(origin, members),
                f"outside-{slug(origin)}",
                members,
                rows_by_id,
                origin,
            )
        )
    return outside


def _failing(papers: Sequence[PaperTable], rows_by_id: dict[str, Row]) -> dict[str, list[Erratum]]:
    """The papers' claims that fail as stated, by refutation class, each with its corrections
    and the claim of the result it serves."""
    return {
        kind: [
            Erratum(
                r,
                [rows_by_id[c.id] for c in r.corrected_by if c.id in rows_by_id],
                rows_by_id.get(r.serves.id) if r.serves is not None else None,
            )
            for p in papers
            for r in p.rows
            if r.refutation == kind
        ]
        for kind in REFUTATION_CLASSES
    }


def page_context(
    meta: ResultsMetadata,
    sections: Sequence[ClaimSection],
    notes: Sequence[str],
    extras: Sequence[Section] = (),
    calibration: dict[str, CalibrationRow] | None = None,
    results: str = "results",
    kills: dict[str, list[str]] | None = None,
) -> Page:
    """The whole page as data (see the module docstring); ``results`` is the results folder
    named in the commands the page gives; ``kills`` the mutants each claim killed
    (:func:`results_format.evidence.mutation_kills`; None when no mutation record exists)."""
    rows_by_id = _rows(sections, calibration, results, kills)
    papers = _own_tables(sections, rows_by_id)
    failing = _failing(papers, rows_by_id)
    return Page(
        title="Hypergradient testbed: which claims of the papers hold",
        headline=_headline(meta),
        fields=header_fields(meta),
        notes=list(notes),
        summary=summary_sentence([s for s in sections if _origin(s) == BUILT_IN]),
        papers=papers,
        outside=_outside_tables(sections, rows_by_id),
        errata=failing[ERRATUM],
        extras=list(extras),
        refutations=failing[SUBSTANTIVE],
        table_numbers=failing[TABLE_NUMBER],
    )

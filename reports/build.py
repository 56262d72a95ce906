"""Build the empirical-vs-theory report from a results directory written by ``testbed check``.

The report is built from the results files only (docs/results-files.md); no check is rerun.
It is self-contained and offline: ``index.html`` with the CSS inlined and no external resource,
``report.md`` with the same content, PNG figures under ``figures/`` and copies of the
counterexample files under ``counterexamples/``.

The page answers "which claims of this paper hold?" on its first screen (the matrix of papers by
verdict, then the errata), then gives each paper's summary table, the sections of
:mod:`reports.sections` (calibration, communication, rounds to error, replication, benchmarks)
and every claim in detail. Everything is generic over claims: a claim's row comes from its JSON,
its figure from whatever series its CSV holds, so a new claim needs no change here.

The pieces: :mod:`reports.results_reading` (the results files), :mod:`reports.claims_table`
(each claim's cells), :mod:`reports.claim_figures` (each claim's figure, through
:mod:`reports.figure_spec`, :mod:`reports.figure_cache` and :mod:`reports.plots`),
:mod:`reports.page_context` (the one context) and :mod:`reports.rendering` (the Jinja2
templates under ``templates/``). A figure is drawn again only when its inputs changed.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path

from reports.claim_figures import claim_section
from reports.claim_figures import select_cases
from reports.claims_table import ClaimSection
from reports.claims_table import worst_case
from reports.claims_table import worst_case_text
from reports.figure_cache import FigureCache
from reports.page_context import page_context
from reports.rendering import render_html
from reports.rendering import render_markdown
from reports.results_reading import SeriesRow
from reports.results_reading import load_calibration
from reports.results_reading import load_claims
from reports.results_reading import load_metadata
from reports.results_reading import read_series
from reports.sections import build_sections
from results_format import atomic_write
from results_format.claim_record import ClaimRecord
from results_format.evidence import mutation_kills
from results_format.summary_records import ResultsMetadata

__all__ = [
    "ClaimSection",
    "SeriesRow",
    "build_report",
    "load_claims",
    "read_series",
    "render_html",
    "render_markdown",
    "select_cases",
    "worst_case",
    "worst_case_text",
]


def provenance_notes(claims: Sequence[ClaimRecord], meta: ResultsMetadata) -> list[str]:
    """Notes on claim results that the header's commit and device do not describe: those a
    resumed ``testbed check`` reused from another commit or device (each record's
    ``computed_by``), and those that do not name theirs (written before records did)."""
    commit, device = meta.git_commit, meta.device
    unnamed, elsewhere = [], []
    for claim in claims:
        if not claim.measured:
            continue  # a row without results ("not checked", "not trusted")
        there = claim.computed_by
        if there is None:
            unnamed.append(claim.id)
        elif there.git_commit != commit or (device and there.device != device):
            elsewhere.append(f"{claim.id} (commit {str(there.git_commit)[:10]} on {there.device})")
    notes = []
    if elsewhere:
        notes.append(
            "results computed by another commit or on another device than the header "
            "names (a resumed run reused them; `testbed check --fresh` recomputes "
            "them): " + _first(elsewhere)
        )
    if unnamed:
        notes.append(
            f"{len(unnamed)} results do not name the commit that computed them "
            "(written before claim files recorded it): " + _first(unnamed)
        )
    return notes


def _first(names: Sequence[str], shown: int = 8) -> str:
    return ", ".join(names[:shown]) + (
        f" and {len(names) - shown} more" if len(names) > shown else ""
    )


def build_report(
    results_dir: Path, out_dir: Path, progress: Callable[[int, str], None] | None = None
) -> Path:
    """Build the report of ``results_dir`` into ``out_dir``; return the path of index.html.

    Reads only the results files (``testbed check`` writes them); reruns nothing. Writes
    ``index.html``, ``report.md``, ``figures/*.png`` (with ``figures/manifest.json``, which
    keys each figure by its inputs so that an unchanged one is not drawn again) and
    ``counterexamples/*`` in ``out_dir``; every file is written atomically. ``progress(total,
    claim_id)`` is called after each claim's section (its figure drawn), from the first claim
    on: nothing before the results are found readable.

    Raises:
        FileNotFoundError: if ``results_dir`` is missing or holds no claim results.
        ValueError: if ``out_dir`` is ``results_dir`` itself.
    """
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    claims, notes = load_claims(results_dir)
    if out_dir.resolve() == results_dir.resolve():
        raise ValueError(
            f"the report's output directory must differ from the results directory {results_dir}"
        )
    meta, meta_notes = load_metadata(results_dir)
    notes = meta_notes + notes
    profile_name = meta.profile_name
    stale = [c.id for c in claims if profile_name and c.profile not in (None, profile_name)]
    if stale:
        notes.append(f"results from a profile other than {profile_name}: " + ", ".join(stale))
    notes.extend(provenance_notes(claims, meta))
    out_dir.mkdir(parents=True, exist_ok=True)
    cache = FigureCache.load(out_dir / "figures")
    sections = []
    for claim in claims:
        sections.append(claim_section(claim, results_dir, out_dir, cache=cache))
        if progress is not None:
            progress(len(claims), sections[-1].id)
    extras = build_sections(results_dir, out_dir, cache)
    cache.prune()
    page = page_context(
        meta,
        sections,
        notes,
        extras,
        load_calibration(results_dir),
        results=str(results_dir),
        kills=mutation_kills(results_dir),
    )
    index = out_dir / "index.html"
    atomic_write(index, render_html(page))
    atomic_write(out_dir / "report.md", render_markdown(page))
    return index

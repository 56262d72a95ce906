"""Build the empirical-vs-theory report from a results directory written by ``testbed check``.

The report is built from the results files only (see :mod:`theory_checks.runner` for their
layout); no check is rerun. It is self-contained and offline: ``index.html`` with the CSS
inlined and no external resource, ``report.md`` with the same tables, PNG figures under
``figures/`` and copies of the counterexample files under ``counterexamples/``. After the claim
tables come the sections of :mod:`reports.sections` (communication per iteration against the
papers' formulas, rounds to error against the papers' claims, replication and benchmark tables),
each read from the files its measuring step wrote, or marked "not run".

Everything is generic over claims: a claim's table row comes from its JSON, and its figure from
whatever series its CSV holds, so a new claim needs no change here.

This module is the entry point (:func:`build_report`); the work is done by
:mod:`reports.results_reading` (reading the results files), :mod:`reports.claims_table` (the
claims tables' cells), :mod:`reports.claim_figures` (each claim's figure and counterexample) and
:mod:`reports.report_writing` (the HTML and Markdown pages). Their names are re-exported here.
"""

from __future__ import annotations

from pathlib import Path

from reports import plots  # noqa: F401
from reports.claim_figures import (  # noqa: F401
    MAX_CASES_PLOTTED,
    SERIES_ORDER,
    _copy_counterexample,
    _figure_name,
    _panels,
    _section,
    _series_rank,
    select_cases,
)
from reports.claims_table import (  # noqa: F401
    FIT_HEAD,
    PAPER_ORDER,
    TABLE_HEAD,
    VERDICT_CLASSES,
    ClaimSection,
    _by_paper,
    _case_fit,
    _cases_text,
    _expected_text,
    _fit_rows,
    _header_fields,
    _num,
    _paper_key,
    _ratio,
    _severity,
    _summary,
    _within_slack,
    decision_text,
    power_text,
    verdict_counts,
    worst_case,
    worst_case_text,
)
from reports.report_writing import (  # noqa: F401
    _LOAD_CHECK,
    _caption,
    _css,
    _decision_lines,
    _e,
    _html_claim,
    _md,
    _md_table,
    render_html,
    render_markdown,
)
from reports.results_reading import (  # noqa: F401
    SeriesRow,
    _bool,
    _canonical_params,
    _float,
    _load_metadata,
    _registered_but_unchecked,
    _torn_series_note,
    load_claims,
    read_series,
)
from reports.sections import Section as ExtraSection  # noqa: F401
from reports.sections import (  # noqa: F401
    build_sections,
    section_html,
    section_markdown,
)

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


def build_report(results_dir: Path, out_dir: Path) -> Path:
    """Build the report of ``results_dir`` into ``out_dir``; return the path of index.html.

    Reads only the results files (``testbed check`` writes them); reruns nothing. Writes
    ``index.html``, ``report.md``, ``figures/*.png`` and ``counterexamples/*`` in ``out_dir``.

    Raises:
        FileNotFoundError: if ``results_dir`` is missing or holds no claim results.
        ValueError: if ``out_dir`` is ``results_dir`` itself.
    """
    results_dir, out_dir = Path(results_dir), Path(out_dir)
    claims, notes = load_claims(results_dir)
    if out_dir.resolve() == results_dir.resolve():
        raise ValueError("the report's output directory must differ from the results "
                         f"directory {results_dir}")
    meta, meta_notes = _load_metadata(results_dir)
    notes = meta_notes + notes
    profile = meta.get("profile")
    profile_name = profile.get("name") if isinstance(profile, dict) else profile
    stale = [str(c["id"]) for c in claims
             if profile_name and c.get("profile") not in (None, profile_name)]
    if stale:
        notes.append(f"results from a profile other than {profile_name}: "
                     + ", ".join(stale))
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = [_section(c, results_dir, out_dir) for c in claims]
    extras = build_sections(results_dir, out_dir)
    index = out_dir / "index.html"
    index.write_text(render_html(meta, sections, notes, extras), encoding="utf-8")
    (out_dir / "report.md").write_text(render_markdown(meta, sections, notes, extras),
                                       encoding="utf-8")
    return index

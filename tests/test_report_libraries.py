"""Runs of estimators that are not the testbed's own (a library's adapter, a researcher's
plugin) get a section per library in the report and never change the papers' counts: not in the
matrix, not in the errata, not in the summary line."""

from __future__ import annotations

from pathlib import Path

from reports.build import build_report
from tests._claim_files import case_record
from tests._claim_files import refutation
from tests._claim_files import register_unchecked
from tests._claim_files import write_claim_file
from tests._report_results import make_results

LIBRARY_RUN = "classical.exact.finite_differences@somelib-solver"
PLUGIN_CLAIM = "somelib.solver.identity"


def _with_library_runs(root: Path) -> Path:
    results = make_results(root)
    run = refutation(
        LIBRARY_RUN,
        "Classical",
        "exact_identity",
        [case_record("p.lib", 0.01, 1e-6, False)],
        estimator="somelib-solver",
        as_expected=False,
        expected="holds",
        estimator_entry={
            "paper": "somelib",
            "reference": "somelib 1.2.3: solve()",
            "builtin": False,
        },
    )
    (root / run["series_file"]).write_text("")
    write_claim_file(root, run)
    register_unchecked(
        root, PLUGIN_CLAIM, "somelib", "exact_identity", "somelib-solver", builtin=False
    )
    return results


def test_a_library_run_has_its_own_section_and_stays_out_of_the_papers_counts(tmp_path):
    results = _with_library_runs(tmp_path / "results")
    build_report(results, tmp_path / "report")
    page = (tmp_path / "report" / "report.md").read_text()
    glance, rest = page.split('<a id="errata"></a>', 1)
    papers, outside = glance.split("### Plugins, integrations and verified estimators", 1)
    errata = rest.split('<a id="paper-', 1)[0]
    # the papers' counts, their lists and the errata know nothing of the library's runs
    # (make_results' claim whose series file is gone is counted but not checked)
    assert "5 claims of the papers (4 checked)" in papers and "somelib" not in papers
    assert LIBRARY_RUN not in errata
    # the library and the plugin's claim have their own entries, outside the papers
    assert "library somelib" in outside and "plugin somelib" in outside
    assert "exact.finite_differences@somelib-solver" in outside
    html = (tmp_path / "report" / "index.html").read_text()
    assert 'id="outside-library-somelib"' in html and 'id="outside"' in html
    assert "somelib 1.2.3: solve()" in page  # the library's version, in the run's detail


def test_without_library_runs_there_is_no_library_section(tmp_path):
    results = make_results(tmp_path / "results")
    build_report(results, tmp_path / "report")
    assert "Verified libraries" not in (tmp_path / "report" / "report.md").read_text()

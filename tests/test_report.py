"""The report is built from results files alone, offline, and survives missing pieces."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports import plots
from reports.build import build_report
from reports.build import select_cases
from reports.build import worst_case
from reports.build import worst_case_text
from results_format.claim_record import CaseRecord
from results_format.claim_record import ClaimRecord
from results_format.claim_record import FitRecord
from tests._claim_files import calibration_row
from tests._claim_files import case_record
from tests._claim_files import claim_record
from tests._claim_files import register_unchecked
from tests._claim_files import write_calibration_summary
from tests._claim_files import write_claim_file
from tests._report_results import BOUND
from tests._report_results import CLAIMS
from tests._report_results import FAILING
from tests._report_results import NO_FILE
from tests._report_results import RATE
from tests._report_results import make_results
from theory_checks.claim_results import SERIES_COLUMNS


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.src: list[str] = []
        self.href: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "src" and value is not None:
                self.src.append(value)
            if name == "href" and value is not None:
                self.href.append(value)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("report")
    results = make_results(root / "results")
    index = build_report(results, root / "out")
    return (
        index,
        index.read_text(encoding="utf-8"),
        (index.parent / "report.md").read_text(encoding="utf-8"),
    )


def test_writes_html_markdown_and_figures(report):
    index, _, _ = report
    out = index.parent
    assert index == out / "index.html" and index.is_file()
    assert (out / "report.md").is_file()
    assert sorted(p.name for p in (out / "figures").glob("*.png")) == sorted(
        f"{cid}.png" for cid in (FAILING, BOUND, RATE)
    )


def test_every_image_exists_and_is_a_png(report):
    index, text, markdown = report
    links = _Links()
    links.feed(text)
    assert len(links.src) == 3
    md_images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert sorted(md_images) == sorted(links.src)
    for src in links.src:
        path = index.parent / src
        assert path.is_file(), src
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_claim_appears_in_both(report):
    _, text, markdown = report
    for cid in CLAIMS:
        assert cid in text
        assert cid in markdown


def test_counterexample_link_resolves(report):
    index, text, markdown = report
    links = _Links()
    links.feed(text)
    targets = [h for h in links.href if h.startswith("counterexamples/")]
    # the errata and the claim's detail (the summary line links the detail)
    assert targets == [f"counterexamples/{FAILING}.json"] * 2
    data = json.loads((index.parent / targets[0]).read_text())
    assert data["claim"] == FAILING
    assert f"(counterexamples/{FAILING}.json)" in markdown


def test_offline_no_remote_resources(report):
    _, text, _ = report
    links = _Links()
    links.feed(text)
    for ref in links.src + links.href:
        assert not ref.startswith(("http://", "https://", "//")), ref
    # no external stylesheet or script; the one inline script marks decoded figures
    assert "<link" not in text and "<script src" not in text
    assert "<style>" in text and ".verdict-fails" in text  # CSS inlined


def test_verdicts_worst_cases_and_fits_are_shown(report):
    _, text, markdown = report
    assert re.search(r'class="clip verdict verdict-fails"[^>]*>fails as stated', text)
    assert re.search(r'class="clip verdict verdict-holds"[^>]*>holds', text)
    assert "0.9 vs bound 0.3" in text  # the failing case, not the largest passing ratio
    assert "0.3 vs bound 0.4" in text  # largest finite ratio; not the zero-bound case
    assert "fitted slope -0.69 ([-0.7, -0.68] (95%)) vs theory -0.693" in text
    assert "fitted slope -0.69 ([-0.7, -0.68] (95%)) vs theory -0.693" in markdown
    assert r"\|\|e_N\|\|" in markdown  # pipes escaped in Markdown table cells


def test_missing_or_empty_series_give_notes(report):
    """A series file that was written and is gone makes its claim untrusted (its measurements
    are not shown); a series file with a header only is a claim without series."""
    _, text, markdown = report
    for page in (text, markdown):
        assert f"{NO_FILE}.json: not trusted: series/{NO_FILE}.csv cannot be read" in page
    assert "no series recorded for this claim" in text


def test_missing_results_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="testbed check"):
        build_report(tmp_path / "nowhere", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"claims/\*\.json.*testbed check"):
        build_report(tmp_path / "empty", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_worst_case_ranks_failures_then_ratio():
    cases = [
        case_record("a", 0.1, 0.5, True) | {"outcome": "holds"},
        case_record("b", 1e-16, 0.0, True) | {"outcome": "holds"},
        case_record("c", 0.4, 0.5, True) | {"outcome": "holds"},
    ]
    worst = worst_case(ClaimRecord.from_json({"cases": cases}))
    assert worst is not None and worst.problem_id == "c"
    # a failing case is the worst whatever its ratio
    failing = case_record("d", 0.1, 1.0, False) | {"outcome": "fails"}
    worst = worst_case(ClaimRecord.from_json({"cases": cases + [failing]}))
    assert worst is not None and worst.problem_id == "d"
    assert worst_case(ClaimRecord()) is None
    assert "round-off slack" in worst_case_text(CaseRecord.from_json(cases[1]))


def test_select_cases_is_deterministic_and_bounded():
    from reports.build import SeriesRow

    rows = [
        SeriesRow("e", f"p{i}", "{}", "measured", "n", n, 0.5**n, 0)
        for i in range(6)
        for n in range(5)
    ]
    worst = CaseRecord(problem_id="p5", params={})
    first = select_cases(rows, worst)
    assert first == select_cases(list(reversed(rows)), worst)
    assert first == [("p5", "{}"), ("p0", "{}"), ("p1", "{}"), ("p2", "{}")]


def test_estimator_styles():
    assert plots.estimator_style("itd") == plots.STYLES["itd"]
    fallback = plots.estimator_style("an-unregistered-estimator")
    assert fallback == plots.estimator_style("an-unregistered-estimator")
    assert fallback["color"] in plots.FALLBACK_COLORS
    assert fallback["label"] == "an-unregistered-estimator"


def _write_undecided_claim(results: Path) -> None:
    """``hgp.toy.exponent``: one undecided case (81x the samples would decide it), its
    perturbation caught."""
    undecided_case = case_record("p.u", -0.45, -0.5, True) | {
        "outcome": "undecided",
        "decisions": [
            {
                "quantity": "exponent",
                "estimate": -0.45,
                "low": -0.9,
                "high": 0.0,
                "region_low": -0.6,
                "region_high": -0.4,
                "rate": 5e-4,
                "outcome": "undecided",
                "budget_factor": 81.0,
                "method": {"method": "StudentT"},
            }
        ],
    }
    claim = claim_record(
        "hgp.toy.exponent",
        "HGP",
        "scaling_exponent",
        "undecided",
        [undecided_case],
        decision="statistical",
        false_fail_rate=1e-3,
        case_false_fail_rate=5e-4,
        n_cases=0,
        n_undecided=1,
        as_expected=False,
        power={
            "name": "2x noise",
            "description": "variance doubled",
            "caught": True,
            "verdict": "fails as stated",
        },
    )
    (results / "series" / "hgp.toy.exponent.csv").write_text(",".join(SERIES_COLUMNS) + "\n")
    write_claim_file(results, claim)


def test_undecided_power_control_and_calibration_are_shown(tmp_path):
    """The page shows undecided claims counted apart, the check's power (perturbation caught) and
    positive control per claim, the budget that would decide an undecided case, and the
    calibration table (or the command that fills it)."""
    results = make_results(tmp_path / "results")
    _write_undecided_claim(results)
    failing = json.loads((results / "claims" / f"{FAILING}.json").read_text())
    failing["positive_control"] = {
        "outcome": "holds",
        "holds": True,
        "case": case_record("p.ok", 0.1, 0.3, True),
    }
    write_claim_file(results, failing)
    register_unchecked(results, "fednest.toy.unchecked")
    out = tmp_path / "out"
    text = build_report(results, out).read_text()
    assert "1 undecided" in text and "1 not checked" in text
    assert "1 verdict(s) differ" in text  # the undecided one; not checked is not counted
    assert "caught: 2x noise" in text and "positive control holds" in text
    assert "about 81x the samples would decide it" in text
    assert "statistical: false-failure rate 0.001 per claim (0.0005 per case, Bonferroni)" in text
    assert "refuted on the saved counterexample" in text
    assert "not run (calibration/summary.json is absent" in text
    assert f"<code>testbed calibrate --seeds 300 --results {results}</code>" in text

    write_calibration_summary(results, [calibration_row("hgp.toy.exponent", "holds", 0, 2)])
    text = build_report(results, out).read_text()
    assert "Calibration of the statistical claims" in text and "[0, 0.168]" in text
    md = (out / "report.md").read_text()
    assert "| hgp.toy.exponent | holds | 20 | 0 | 2 |" in md


def test_fit_rows_show_what_the_fit_record_says_and_the_cases_outcome():
    """An undecided K-rate claim showed `[-112.9, 111.5] (100%)` beside "Agrees: yes", and fits
    on exact data were labelled "(100%)" under captions saying 95%: the row shows the fit's own
    level (99.9%), "exact data" for an interval of zero width, the fit residual when the record
    carries one, and the case's outcome, never "yes" for an undecided case."""
    from reports.claims_table import fit_rows
    from reports.claims_table import interval_text

    undecided = {
        "estimate": -0.676,
        "ci_low": -112.86,
        "ci_high": 111.51,
        "theory": -0.5,
        "tolerance": 0.25,
        "confidence": 0.999,
        "problem_id": "p.u",
        "quantity": "exponent of Q in K",
    }
    exact = {
        "estimate": -1.0,
        "ci_low": -1.0,
        "ci_high": -1.0,
        "theory": -1.0,
        "tolerance": 0.02,
        "confidence": 1.0,
        "problem_id": "p.e",
        "quantity": "exponent",
    }
    residual = dict(exact, problem_id="p.r", residual=3e-15, confidence=None)
    claim = ClaimRecord.from_json(
        {
            "cases": [
                dict(case_record("p.u", -0.676, -0.5, True), outcome="undecided", fit=undecided),
                dict(case_record("p.e", -1.0, -1.0, True), outcome="holds", fit=exact),
                dict(case_record("p.r", -1.0, -1.0, True), outcome="holds", fit=residual),
            ],
            "fits": [undecided, exact, residual],
        }
    )
    rows = fit_rows(claim)
    assert rows[0][3] == "[-112.9, 111.5] (99.9%)" and rows[0][-1] == "undecided"
    assert rows[1][3] == "exact data (no interval)" and rows[1][-1] == "holds"
    assert rows[2][3] == "exact data, fit residual 3e-15"
    assert "yes" not in {row[-1] for row in rows}
    assert interval_text(FitRecord(ci_low=0.1, ci_high=0.2, confidence=0.95)) == "[0.1, 0.2] (95%)"

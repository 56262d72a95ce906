"""The report read at a glance: the matrix of papers by verdict with links to the
rows, the refutations of stated results first and the errata and table numbers apart, each
counted apart, a refuted claim beside its correction, an erratum beside the result it
serves, every verdict that rests on a saved
counterexample explained, "not checked" never counted as expected, calibration and power per
claim, empty sections with the command that fills them, and one context rendered into both
pages by autoescaping templates."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.build import build_report
from tests._claim_files import calibration_row
from tests._claim_files import case_record
from tests._claim_files import claim_record
from tests._claim_files import correction
from tests._claim_files import refutation
from tests._claim_files import register_unchecked
from tests._claim_files import write_calibration_summary
from tests._claim_files import write_claim_file
from tests._report_results import FAILING
from tests._report_results import make_results

CORRECTION = "fednest.toy.bias_bound_corrected"  # corrects FAILING
LATER = "fednest.toy.zz_later"  # sorts after the correction: stays below the pair
UNCHECKED = "fednest.toy.unchecked"
ZERO_CASES = "aggitd.toy.refuted_at_once"  # fails on the saved counterexample, 0 cases held
SERVED = "aggitd.toy.served"  # the result ZERO_CASES (a proof step) serves: holds
TABLE = "aggitd.toy.table_factor"  # an experiment table's number that fails as stated


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.rows: list[str] = []  # ids of summary-table rows, in page order

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
            if tag == "tr" and str(values["id"]).startswith("row-"):
                self.rows.append(str(values["id"]))
        if tag == "a" and values.get("href"):
            self.hrefs.append(str(values["href"]))


def _glance_results(root: Path) -> Path:
    results = make_results(root)
    (root / "counterexamples" / f"{ZERO_CASES}.npz").write_bytes(b"arrays")
    for data in _glance_claims():
        (root / data["series_file"]).write_text("")
        write_claim_file(root, data)
    register_unchecked(root, UNCHECKED)
    (root / "mutation").mkdir()
    (root / "mutation" / "summary.json").write_text(
        json.dumps(
            {
                "profile": "fast",
                "catalogue": 2,
                "counts": {"mutants": 2, "killed": 2},
                "mutants": [
                    {"mutant": "n-minus-one", "status": "killed", "killed_by": [LATER]},
                    {"mutant": "half-step", "status": "killed", "killed_by": [f"{LATER} (error)"]},
                ],
            }
        )
    )
    write_calibration_summary(root, [calibration_row(ZERO_CASES, "fails", 19, 1)])
    return results


def _glance_claims() -> list[dict]:
    """A correction of FAILING, a claim sorting after it, a proof step refuted at once and the
    result it serves, and a table number that fails as stated."""
    return [
        correction(
            CORRECTION,
            FAILING,
            case_record("p.a", 0.1, 0.2, True),
            statement="the corrected bound <script>alert(1)</script> holds",
        ),
        # a loose bound (20x room) that names its companion
        claim_record(
            LATER,
            "FedNest",
            "bias_bound",
            "holds",
            [case_record("p.a", 0.01, 0.2, True)],
            power_from=[CORRECTION],
            power={"name": "off by one", "caught": True, "verdict": "fails as stated"},
        ),
        refutation(
            ZERO_CASES,
            "AggITD",
            "bias_bound",
            [case_record("p.z", 2.0, 1.0, False)],
            n_cases=0,
            decision="statistical",
            false_fail_rate=1e-3,
            about="proof step or formula",
            serves=SERVED,
        ),
        claim_record(SERVED, "AggITD", "bias_bound", "holds", [case_record("p.a", 0.1, 0.2, True)]),
        refutation(
            TABLE,
            "AggITD",
            "communication_count",
            [case_record("p.t", 3.0, 2.0, False)],
            about="table number",
        ),
    ]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, _Ids]:
    root = tmp_path_factory.mktemp("glance")
    index = build_report(_glance_results(root / "results"), root / "out")
    text = index.read_text(encoding="utf-8")
    ids = _Ids()
    ids.feed(text)
    return index, text, (index.parent / "report.md").read_text(encoding="utf-8"), ids


def _glance(text: str, paper: str) -> dict[str, list[str]]:
    """The first screen's list of one paper: verdict -> the ids its chips name."""
    block = re.search(
        rf'<div class="paper-glance" data-paper="{paper}">(.*?</div>)\n</div>', text, re.S
    )
    assert block, paper
    groups = re.findall(
        r'<div class="group" data-verdict="([^"]+)"><a class="badge [^"]*" '
        r'href="[^"]*"(?: data-refutation="([^"]+)")?>(.*?)</div>',
        block.group(1),
    )
    # a "fails as stated" group is named by its class but for the substantive refutations
    return {
        refutation if refutation not in ("", "substantive refutation") else verdict: re.findall(
            r'class="chip" href="#row-[^"]*" title="([^:"]+):', body
        )
        for verdict, refutation, body in groups
    }


def _detail(text: str, claim_id: str) -> str:
    match = re.search(
        rf'<details class="claim" id="claim-{re.escape(claim_id.replace(".", "-"))}"'
        r">(.*?)</details>",
        text,
        re.S,
    )
    assert match, claim_id
    return match.group(1)


def test_first_screen_lists_each_papers_claims_by_verdict_with_links(page):
    _, text, markdown, ids = page
    fednest = _glance(text, "FedNest")
    # the substantive refutation first, then the other verdicts
    assert list(fednest) == ["fails as stated", "holds", "holds once corrected", "not checked"]
    assert fednest["fails as stated"] == [FAILING]
    assert fednest["holds once corrected"] == [CORRECTION]
    assert fednest["holds"] == [LATER]
    assert fednest["not checked"] == []  # counted, not listed: no results file
    assert ">not checked 1</a>" in text
    # an erratum and a table number that fail as stated are listed after the rest, apart
    assert _glance(text, "AggITD") == {
        "holds": [SERVED],
        "erratum": [ZERO_CASES],
        "table number": [TABLE],
    }
    for href in re.findall(r'class="(?:chip|badge [^"]*)" href="#([^"]+)"', text):
        assert href in ids.ids, href  # every chip and group badge links to an existing anchor
    assert (
        "**[FedNest](#paper-fednest)**: 4 claims: 1 fails as stated, 1 holds, 1 holds "
        "once corrected, 1 not checked" in markdown
    )
    assert (
        "**[AggITD](#paper-aggitd)**: 3 claims: 1 holds, 1 erratum (fails as printed), "
        "1 table number (fails as stated)" in markdown
    )
    assert f"[`toy.bias_bound`](#row-{FAILING.replace('.', '-')})" in markdown
    assert (
        text.index('id="at-a-glance"')
        < text.index('id="paper-fednest"')
        < text.index('id="refutations"')
        < text.index('id="errata"')
        < text.index('id="table-numbers"')
        < text.index('id="details"')
    )


def test_the_summary_counts_refutations_errata_and_table_numbers_apart(page):
    _, text, markdown, _ = page
    line = "failing as stated: 1 substantive refutation(s), 1 erratum/errata, 1 table number(s)"
    assert line in text and line in markdown


def test_not_checked_is_never_counted_as_expected(page):
    _, text, markdown, _ = page
    row = re.search(rf'<tr class="claim-row" id="row-{UNCHECKED.replace(".", "-")}".*?</tr>', text)
    assert row and "· not checked</span>" in row.group(0)
    assert "expected-yes" not in row.group(0) and "as expected" not in row.group(0)
    assert "1 not checked (not counted as expected)" in text
    checked = re.search(
        r"(\d+) claims of the papers \((\d+) checked\): (\d+) as the testbed "
        r"expects",
        text,
    )
    # neither the unchecked claim nor make_results' untrusted one (its series file is gone)
    assert checked and int(checked.group(2)) == int(checked.group(1)) - 2
    assert "1 results file(s) not trusted" in text
    assert int(checked.group(3)) <= int(checked.group(2))
    assert "**not checked** (not checked)" in markdown


def test_a_refuted_claim_and_its_correction_name_each_other(page):
    _, text, markdown, _ = page
    correction = re.search(
        rf'<tr class="claim-row" id="row-{CORRECTION.replace(".", "-")}"'
        r".*?</tr>",
        text,
    )
    assert correction and f"corrects {FAILING}: " in correction.group(0)
    assert f'Corrected by <a href="#claim-{CORRECTION.replace(".", "-")}">' in _detail(
        text, FAILING
    )
    assert f"| corrects {FAILING}: " in markdown


def test_a_fails_as_stated_verdict_reads_as_a_known_erratum_not_as_expected_to_hold(page):
    """ "fails as stated / expected: yes" read as if the paper's claim were expected to hold."""
    _, text, markdown, _ = page
    row = re.search(rf'<tr class="claim-row" id="row-{FAILING.replace(".", "-")}".*?</tr>', text)
    assert row and "fails as stated <span" in row.group(0) and "known erratum" in row.group(0)
    assert "expected: yes" not in text and "expected: yes" not in markdown
    assert "a known erratum: the testbed refuted this statement before" in _detail(text, FAILING)
    assert "**fails as stated** (known erratum)" in markdown


def test_a_verdict_resting_on_the_saved_counterexample_says_so(page):
    _, text, _, _ = page
    detail = _detail(text, ZERO_CASES)
    assert "refuted on the saved counterexample, replayed before any drawn case" in detail
    assert "confirmed on fresh seeds" in detail
    assert "0 cases held" not in detail


def test_power_and_calibration_are_shown_per_claim(page):
    _, text, markdown, _ = page
    assert "Calibration: 19/20 refutations [0.751, 0.999] vs stated 0.001" in _detail(
        text, ZERO_CASES
    )
    assert "Calibration: n/a (deterministic)" in _detail(text, FAILING)
    assert "19/20 refutations" in markdown


def test_errata_give_statement_measurement_correction_and_files(page):
    index, text, markdown, _ = page
    sections = {
        anchor: re.search(rf'<section class="errata" id="{anchor}">(.*?)</section>', text, re.S)
        for anchor in ("refutations", "errata", "table-numbers")
    }
    assert all(sections.values())
    refutations, errata, tables = (m.group(1) for m in sections.values())
    # the stated result refuted in its section, the proof step and the table number apart
    assert FAILING in refutations and ZERO_CASES not in refutations
    assert ZERO_CASES in errata and FAILING not in errata and TABLE not in errata
    assert TABLE in tables and FAILING not in tables
    assert "||e_N|| &lt;= C q^N" in refutations  # the paper's statement
    assert "0.9 vs bound 0.3" in refutations  # what was measured (the failing case)
    assert CORRECTION in refutations and "holds once corrected" in refutations
    # an erratum names the result it serves, with that result's verdict
    assert re.search(
        rf'serves <a href="#row-{SERVED.replace(".", "-")}"><code>{SERVED}</code>'
        r'</a> <span class="badge verdict-holds">holds</span>',
        errata,
    )
    for name in (f"{ZERO_CASES}.json", f"{ZERO_CASES}.npz"):
        assert f'href="counterexamples/{name}"' in errata
        assert (index.parent / "counterexamples" / name).is_file()
    assert "no corrected claim is checked" in errata  # ZERO_CASES has no correction
    assert (
        "## Refutations of stated results: 1 theorem, lemma, corollary or proposition "
        "that fails as stated" in markdown
    )
    assert "## Errata: 1 statement that fails as printed" in markdown
    assert f"serves [`{SERVED}`](#claim-{SERVED.replace('.', '-')}) **holds**" in markdown
    assert "## Table numbers: 1 number of an experiment not reproduced" in markdown


def test_empty_sections_give_the_exact_command_and_its_duration(page):
    _, text, markdown, _ = page
    for section, command in (
        ("replication", "testbed run configs --results "),
        ("bench", "python benchmarks/run.py --quick --out "),
    ):
        match = re.search(rf'<section class="extra" id="{section}">(.*?)</section>', text, re.S)
        assert match and "not run" in match.group(1)
        assert f"<code>{command}" in match.group(1) and " s " in match.group(1) + " "
        assert f"`{command}" in markdown


def test_templates_escape_the_results_text(page):
    _, text, markdown, _ = page
    assert "<script>alert(1)</script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert text.count("<script>") == 1  # the page's own script only
    assert "\\|\\|e_N\\|\\|" in markdown  # Markdown table cells escape pipes


def test_markdown_twin_has_every_claim_link_and_figure(page):
    _, text, markdown, ids = page
    html_figures = sorted(re.findall(r'<img src="([^"]+)"', text))
    md_figures = sorted(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown))
    assert html_figures == md_figures and html_figures
    md_anchors = set(re.findall(r'<a id="([^"]+)"></a>', markdown))
    for anchor in re.findall(r"\]\(#([^)]+)\)", markdown):
        assert anchor in md_anchors and anchor in ids.ids, anchor  # both pages link alike


def test_each_holds_shows_its_slack_and_kill_set(page):
    """The per-paper table's slack column and the claim detail's evidence, re-derived
    from the recorded cases (0.01 against 0.2: 20x) with the mutants of mutation/summary.json."""
    _, text, markdown, _ = page
    row = re.search(rf'<tr class="claim-row" id="row-{LATER.replace(".", "-")}".*?</tr>', text)
    assert row and '<td class="clip slack"' in row.group(0) and "20x (bound), loose" in row.group(0)
    detail = _detail(text, LATER)
    assert (
        "Evidence: slack 20x (bound: largest share of the room 0.05, on p.a); loose (more "
        f"than 10x): its power comes from {CORRECTION}; kill set: its perturbation caught (off "
        "by one); 2 mutant(s) killed first by it: n-minus-one, half-step." in detail
    )
    assert "| 20x (bound), loose |" in markdown
    # a refuted claim has no slack: its cell says so
    failing = re.search(
        rf'<tr class="claim-row" id="row-{FAILING.replace(".", "-")}".*?</tr>', text
    )
    assert failing and '<td class="clip slack" title="kill set: ' in failing.group(0)

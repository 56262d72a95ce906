"""The report read at a glance (issue 14): the matrix of papers by verdict with links to the
rows, the errata, a refuted claim beside its correction, every verdict that rests on a saved
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
from tests.test_report import FAILING, _case, _claim, make_results

CORRECTION = "fednest.toy.bias_bound_corrected"  # corrects FAILING
LATER = "fednest.toy.zz_later"  # sorts after the correction: stays below the pair
UNCHECKED = "fednest.toy.unchecked"
ZERO_CASES = "aggitd.toy.refuted_at_once"  # fails on the saved counterexample, 0 cases held


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
    claims = root / "claims"
    correction = _claim(CORRECTION, "FedNest", "bias_bound", "holds once corrected",
                        [_case("p.a", 0.1, 0.2, True)])
    correction["corrects"] = FAILING
    correction["statement"] = "the corrected bound <script>alert(1)</script> holds"
    later = _claim(LATER, "FedNest", "bias_bound", "holds", [_case("p.a", 0.1, 0.2, True)])
    refuted = _claim(ZERO_CASES, "AggITD", "bias_bound", "fails as stated",
                     [_case("p.z", 2.0, 1.0, False)],
                     counterexample=f"counterexamples/{ZERO_CASES}.json")
    refuted["n_cases"] = 0
    refuted.update(decision="statistical", false_fail_rate=1e-3)
    for data in (correction, later, refuted):
        (claims / f"{data['id']}.json").write_text(json.dumps(data))
    (root / "counterexamples" / f"{ZERO_CASES}.json").write_text(json.dumps({"claim": "z"}))
    (root / "counterexamples" / f"{ZERO_CASES}.npz").write_bytes(b"arrays")
    meta = json.loads((root / "metadata.json").read_text())
    meta["claims_registered"] = [{"id": UNCHECKED, "paper": "FedNest", "reference": "r",
                                  "kind": "bias_bound", "statement": "s",
                                  "estimators": ["fedihgp"], "expected": "holds"}]
    (root / "metadata.json").write_text(json.dumps(meta))
    (root / "calibration").mkdir()
    (root / "calibration" / "summary.json").write_text(json.dumps({
        "profile": "fast", "seeds": 20, "claims": [{
            "claim": ZERO_CASES, "expected": "fails", "seeds": 20, "refuted": 19,
            "undecided": 1, "rate_low": 0.75, "rate_high": 0.999, "stated_rate": 1e-3,
            "consistent": True}]}))
    return results


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, _Ids]:
    root = tmp_path_factory.mktemp("glance")
    index = build_report(_glance_results(root / "results"), root / "out")
    text = index.read_text(encoding="utf-8")
    ids = _Ids()
    ids.feed(text)
    return index, text, (index.parent / "report.md").read_text(encoding="utf-8"), ids


def _matrix_row(text: str, paper: str) -> str:
    match = re.search(rf'<tr><th scope="row"><a href="#paper-{paper.lower()}">{paper}</a></th>'
                      r"(.*?)</tr>", text)
    assert match, paper
    return match.group(1)


def test_matrix_counts_each_paper_by_verdict_and_links_to_the_rows(page):
    _, text, markdown, ids = page
    head = re.search(r'<table class="matrix[^>]*>.*?<thead>(.*?)</thead>', text, re.S)
    assert head and re.findall(r">([a-z ]+)</th>", head.group(1))[:5] == [
        "holds", "fails as stated", "holds once corrected", "undecided", "not checked"]
    fednest = _matrix_row(text, "FedNest")
    counts = re.findall(r'<td class="count[^"]*">(?:<a href="([^"]*)"[^>]*>)?(\d+)', fednest)
    assert [int(n) for _, n in counts] == [1, 1, 1, 0, 1, 4]  # holds, fails, ..., all
    for href, _ in counts:
        if href:
            assert href[1:] in ids.ids, href  # every count links to an existing row anchor
    assert "[1](#fednest-fails-as-stated)" in markdown
    assert text.index('id="verdict-matrix"') < text.index('id="errata"') < \
        text.index('id="paper-fednest"')


def test_not_checked_is_never_counted_as_expected(page):
    _, text, markdown, _ = page
    row = re.search(rf'<tr id="row-{UNCHECKED.replace(".", "-")}".*?</tr>', text)
    assert row and "expected: not checked" in row.group(0)
    assert "expected-yes" not in row.group(0) and "expected: yes" not in row.group(0)
    assert "1 not checked (not counted as expected)" in text
    checked = re.search(r"(\d+) claims, (\d+) checked: (\d+) as the testbed expects", text)
    assert checked and int(checked.group(2)) == int(checked.group(1)) - 1
    assert int(checked.group(3)) <= int(checked.group(2))
    assert "(expected: not checked)" in markdown


def test_a_refuted_claim_and_its_correction_sit_on_adjacent_rows(page):
    _, text, markdown, ids = page
    rows = ids.rows
    refuted = rows.index("row-" + FAILING.replace(".", "-"))
    assert rows[refuted + 1] == "row-" + CORRECTION.replace(".", "-")
    assert rows.index("row-" + LATER.replace(".", "-")) > refuted + 1
    assert "corrected by" in text and "↳ corrects" in text
    lines = [line for line in markdown.splitlines() if f"[`{FAILING}`]" in line
             or f"[`{CORRECTION}`]" in line]
    assert any("↳ corrects" in line for line in lines)


def test_errata_give_statement_measurement_correction_and_files(page):
    index, text, markdown, _ = page
    errata = re.search(r'<section class="errata" id="errata">(.*?)</section>', text, re.S)
    assert errata
    body = errata.group(1)
    assert FAILING in body and ZERO_CASES in body
    assert "||e_N|| &lt;= C q^N" in body  # the paper's statement
    assert "0.9 vs bound 0.3" in body  # what was measured (the failing case)
    assert CORRECTION in body and "holds once corrected" in body  # the correction
    for name in (f"{ZERO_CASES}.json", f"{ZERO_CASES}.npz"):
        assert f'href="counterexamples/{name}"' in body
        assert (index.parent / "counterexamples" / name).is_file()
    assert "no corrected claim is checked" in body  # ZERO_CASES has no correction
    assert "## Errata: 2 statements that fail as printed" in markdown


def test_a_verdict_resting_on_the_saved_counterexample_says_so(page):
    _, text, _, _ = page
    row = re.search(rf'<tr id="row-{ZERO_CASES.replace(".", "-")}".*?</tr>', text)
    assert row
    assert "refuted on the saved counterexample, replayed before any drawn case" in row.group(0)
    assert "confirmed on fresh seeds" in row.group(0)
    assert "0 cases held" not in row.group(0)


def test_power_and_calibration_are_shown_per_claim(page):
    _, text, markdown, _ = page
    row = re.search(rf'<tr id="row-{ZERO_CASES.replace(".", "-")}".*?</tr>', text)
    assert row and "calibration: 19/20 refutations [0.75, 0.999] vs stated 0.001" in row.group(0)
    deterministic = re.search(rf'<tr id="row-{FAILING.replace(".", "-")}".*?</tr>', text)
    assert deterministic and "calibration: n/a (deterministic)" in deterministic.group(0)
    assert "19/20 refutations" in markdown


def test_empty_sections_give_the_exact_command_and_its_duration(page):
    _, text, markdown, _ = page
    for section, command in (("replication", "testbed run configs --results "),
                             ("bench", "python benchmarks/run.py --quick --out ")):
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

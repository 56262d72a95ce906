"""The report in a real browser, as a new user opens it: headless Chromium at 1400 x 900.

It asserts that the first screen answers "which claims of this paper hold?": for each paper,
the claims that hold, fail as stated, hold once corrected or are undecided, each listed by id,
all within the first 900 pixels; that the summary part of the page (everything above "Claims in
detail", whose entries are folded) is at most 5 screens, one line per claim; that nothing
scrolls sideways (the page, the summary tables, no cell spilling out of its column); that every
figure decodes and that every claim of `testbed list` is on the page. It saves screenshots of
the first screen and of one figure panel into the test's temporary folder (tests never write
into the user's reports/output).

The page's own inline script records the layout facts it reads (body data attributes); see
reports/page_check.js. Chromium comes from Debian's `chromium` package, which `.ci/run`
installs; without it these tests are skipped with that reason.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports.build import build_report
from reports.page_context import POPULATION_TITLES
from results_format.populations import PAPERS
from results_format.populations import population
from tests._comparison_files import write_comparison
from theory_checks.claim_batch import run_claims
from theory_checks.registry import CLAIM_DB
from theory_checks.runner import PROFILES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
    "--hide-scrollbars",
]
WIDTH, HEIGHT = 1400, 900
# Quick real claims (a few seconds in all) standing in for the full run, one of each figure
# kind and of each verdict: a bound, an identity, a refuted exponent beside its correction, a
# count against its formula, an exponent with its theory slope, and a K-rate claim that the
# fast profile leaves undecided by design. Every other registered claim still appears, "not
# checked", because the report lists the registry it reads from the results directory: the
# summary tables hold one line per claim, as in a full report.
QUICK_CLAIMS = (
    "classical.neumann.error_bound",
    "classical.itd.error_identity",
    "aggitd.cor1.no_floor",
    "aggitd.cor1.floor_kept",
    "fednest.rounds.fednest",
    "fedmsa.rate.M_stochastic",
    "fednest.thm31.k_rate_bilevel",
)
SCREENS = 5  # the summary part of the page, in screens of HEIGHT pixels

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("run") / "results"
    run_claims(
        [c for c in CLAIM_DB if c.id in QUICK_CLAIMS], results, PROFILES["fast"], progress=False
    )
    # a small rounds-to-error results file, so the section's figure is loaded by the browser too
    write_comparison(results)
    return build_report(results, results.parent / "report")


def _chromium(*args: str, profile: Path, height: int = HEIGHT) -> str:
    assert CHROMIUM is not None
    out = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{height}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout


@pytest.fixture(scope="module")
def dom(report, tmp_path_factory) -> str:
    # why 10 s of virtual time: the load handler that marks decoded figures and measures the
    # layout runs after every image has loaded; virtual time makes the wait deterministic
    return _chromium(
        "--virtual-time-budget=10000",
        "--dump-dom",
        report.resolve().as_uri(),
        profile=tmp_path_factory.mktemp("chromium-profile"),
    )


def _body(dom: str) -> dict[str, str]:
    tag = re.search(r"<body([^>]*)>", dom)
    assert tag, "no body in the DOM dump"
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag.group(1)))


def _glance(dom: str) -> dict[str, dict[str, set[str]]]:
    """paper -> verdict -> the claim ids the first screen lists (each chip's title starts with
    its full id)."""
    glance = dom.split('id="at-a-glance"')[1].split("</section>")[0]
    out: dict[str, dict[str, set[str]]] = {}
    for paper, block in re.findall(
        r'data-paper="([^"]+)">(.*?)(?=<div class="paper-glance"|$)', glance, re.S
    ):
        # a verdict may have several groups ("fails as stated": the substantive refutations,
        # the errata and the table numbers apart): their chips together
        out[paper] = {}
        for verdict, body in re.findall(
            r'<div class="group" data-verdict="([^"]+)">(.*?)</div>', block, re.S
        ):
            out[paper].setdefault(verdict, set()).update(
                re.findall(r'class="chip"[^>]*title="([^:"]+):', body)
            )
    return out


@needs_chromium
def test_first_screen_lists_which_claims_of_each_paper_hold_fail_or_are_undecided(report, dom):
    body = _body(dom)
    viewport_width, viewport_height = (int(v) for v in body["viewport"].split("x"))
    assert viewport_width == WIDTH
    # the per-paper lists end within the first screen
    assert int(body["glance-bottom"]) <= min(viewport_height, HEIGHT), body
    # for each paper, the ids listed under each verdict are its claims with that verdict
    expected: dict[str, dict[str, set[str]]] = {}
    for path in (report.parents[1] / "results" / "claims").glob("*.json"):
        claim = json.loads(path.read_text())
        if claim.get("origin", "built-in") == "built-in":
            # a paper's claims under the paper; the comparisons and the runs on enrolled
            # variants each under their own title (results_format.populations)
            which = population(claim["id"])
            title = claim["paper"] if which == PAPERS else POPULATION_TITLES[which]
            expected.setdefault(title, {}).setdefault(claim["verdict"], set()).add(claim["id"])
    shown = _glance(dom)
    for paper, verdicts in expected.items():
        for verdict, ids in verdicts.items():
            assert shown[paper][verdict] == ids, (paper, verdict)
    assert {"holds", "fails as stated", "holds once corrected", "undecided"} <= {
        v for verdicts in expected.values() for v in verdicts
    }
    # the undecided claim says the command and the time that decide it
    undecided = dom.split('<div class="group" data-verdict="undecided">')[1].split("</div>")[0]
    assert re.search(
        r"decide it: <code>testbed check --profile thorough --claim "
        r"fednest\.thm31\.k_rate_bilevel[^<]*</code> \(about \d+ s\)",
        undecided,
    )


@needs_chromium
def test_summary_is_at_most_five_screens_one_line_per_claim_without_sideways_scrolling(dom):
    body = _body(dom)
    # everything above "Claims in detail" (whose entries are folded) fits SCREENS screens
    assert int(body["summary-bottom"]) <= SCREENS * HEIGHT, body
    # every registered claim has its row, and each row is one line
    assert int(body["claim-rows"]) >= len(CLAIM_DB) and body["multiline-rows"] == "0", body
    # no horizontal overflow: the page, and each summary table shown
    assert body["page-overflow"] == "false", body
    assert int(body["summary-tables"]) >= 1 + 2  # errata, at least two papers
    assert body["wide-tables"] == "", f"summary tables wider than the window: {body}"
    assert body["spilled-cells"] == "0", body


@needs_chromium
def test_every_figure_decodes(dom):
    images = re.findall(r"<img[^>]*>", dom)
    assert len(images) >= len(QUICK_CLAIMS) - 1, "the report shows too few figures"
    assert any("comparison.rounds_to_error.png" in tag for tag in images)
    assert all('data-loaded="yes"' in tag for tag in images), [
        t for t in images if 'data-loaded="yes"' not in t
    ]
    assert _body(dom)["figures"] == f"{len(images)}/{len(images)}"


@needs_chromium
def test_every_claim_of_testbed_list_appears(dom):
    text = re.sub(r"<[^>]+>", " ", dom)
    listed = subprocess.run(
        [sys.executable, "-m", "testbed", "list"], capture_output=True, text=True, check=True
    )
    # the claims of the papers, the comparisons and the runs on enrolled variants (not the
    # plugins' runs, listed last)
    own = listed.stdout.split("claims of the papers:")[1].split("from outside the testbed")[0]
    claim_ids = re.findall(r"^  (\S+\.\S+)\s", own, re.M)
    assert len(claim_ids) > len(QUICK_CLAIMS)
    missing = [c for c in claim_ids if c not in text]
    assert not missing, f"claims listed by `testbed list` but absent from the page: {missing}"


@needs_chromium
def test_screenshots_of_the_first_screen_and_of_a_figure_panel(report, dom, tmp_path):
    from PIL import Image

    url = report.resolve().as_uri()
    first = tmp_path / "first_screen.png"
    _chromium(f"--screenshot={first}", url, profile=tmp_path / "p1")
    with Image.open(first) as image:
        assert image.size == (WIDTH, HEIGHT)
        assert image.convert("L").getextrema()[0] < 128  # not blank: text was painted
    # a headless screenshot does not follow a #fragment here, so the figure panel is cropped
    # from a screenshot tall enough to reach it, at the position the page's script measured
    # with the figure's detail opened (#first-figure opens it)
    opened = _chromium(
        "--virtual-time-budget=10000", "--dump-dom", f"{url}#first-figure", profile=tmp_path / "p3"
    )
    body = _body(opened)
    top, height = int(body["first-figure-top"]), int(body["first-figure-height"])
    assert height > 100, body
    tall = tmp_path / "tall.png"
    _chromium(
        f"--screenshot={tall}",
        f"{url}#first-figure",
        profile=tmp_path / "p2",
        height=top + height + 20,
    )
    panel = tmp_path / "figure_panel.png"
    with Image.open(tall) as image:
        image.crop((0, top, WIDTH, top + height)).save(panel)
    with Image.open(panel) as image:
        assert image.size == (WIDTH, height)
        assert image.convert("L").getextrema()[0] < 128
    assert str(report.parent) not in str(tmp_path)  # never into the report folder

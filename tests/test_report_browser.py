"""The report in a real browser, as a new user opens it: headless Chromium at 1400 x 900.

It asserts that the first screen answers "which claims hold?" (the paper-by-verdict matrix is
visible without scrolling), that nothing scrolls sideways (the page, the matrix, the errata and
every paper's summary table fit the window, no cell spills out of its column), that every
figure decodes and that every claim of `testbed list` is on the page. It saves screenshots of
the first screen and of one figure panel into the test's temporary folder (tests never write
into the user's reports/output).

The page's own inline script records the layout facts it reads (body data attributes); see
reports/page_check.js. Chromium comes from Debian's `chromium` package, which `.ci/run`
installs; without it these tests are skipped with that reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports.build import build_report
from tests.test_report_sections import _write_comparison
from theory_checks.registry import CLAIM_DB
from theory_checks.runner import PROFILES, run_claims

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--allow-file-access-from-files", "--hide-scrollbars"]
WIDTH, HEIGHT = 1400, 900
# Quick real claims (a second or two in all) standing in for the full run, one of each figure
# kind: a bound, an identity, a refuted exponent beside its correction (errata, adjacent rows),
# a count against its formula and an exponent with its theory slope. Every other registered
# claim still appears, "not checked", because the report lists the registry it reads from the
# results directory: the summary tables hold every claim's statement, as in a full report.
QUICK_CLAIMS = ("classical.neumann.error_bound", "classical.itd.error_identity",
                "aggitd.cor1.no_floor", "aggitd.cor1.floor_kept", "fednest.rounds.fednest",
                "fedmsa.rate.M_stochastic")

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not "
                                                             "installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("results")
    run_claims([c for c in CLAIM_DB if c.id in QUICK_CLAIMS], results, PROFILES["fast"],
               progress=False)
    # a small rounds-to-error results file, so the section's figure is loaded by the browser too
    _write_comparison(results)
    return build_report(results, tmp_path_factory.mktemp("report"))


def _chromium(*args: str, profile: Path, height: int = HEIGHT) -> str:
    assert CHROMIUM is not None
    out = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                          f"--window-size={WIDTH},{height}", *args],
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


@pytest.fixture(scope="module")
def dom(report, tmp_path_factory) -> str:
    # why 10 s of virtual time: the load handler that marks decoded figures and measures the
    # layout runs after every image has loaded; virtual time makes the wait deterministic
    return _chromium("--virtual-time-budget=10000", "--dump-dom", report.resolve().as_uri(),
                     profile=tmp_path_factory.mktemp("chromium-profile"))


def _body(dom: str) -> dict[str, str]:
    tag = re.search(r"<body([^>]*)>", dom)
    assert tag, "no body in the DOM dump"
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag.group(1)))


@needs_chromium
def test_first_screen_answers_which_claims_hold_without_sideways_scrolling(dom):
    body = _body(dom)
    viewport_width, viewport_height = (int(v) for v in body["viewport"].split("x"))
    assert viewport_width == WIDTH
    # the matrix of papers by verdict ends within the first screen, inside the window's width
    assert int(body["matrix-bottom"]) <= min(viewport_height, HEIGHT), body
    assert int(body["matrix-right"]) <= WIDTH
    # no horizontal overflow: the page, and each summary table (matrix, errata, every paper's)
    assert body["page-overflow"] == "false", body
    assert int(body["summary-tables"]) >= 3 + 1  # matrix, errata, at least two papers
    assert body["wide-tables"] == "", f"summary tables wider than the window: {body}"
    assert body["spilled-cells"] == "0", body


@needs_chromium
def test_every_figure_decodes(dom):
    images = re.findall(r"<img[^>]*>", dom)
    assert len(images) >= len(QUICK_CLAIMS) - 1, "the report shows too few figures"
    assert any("comparison.rounds_to_error.png" in tag for tag in images)
    assert all('data-loaded="yes"' in tag for tag in images), [
        t for t in images if 'data-loaded="yes"' not in t]
    assert _body(dom)["figures"] == f"{len(images)}/{len(images)}"


@needs_chromium
def test_every_claim_of_testbed_list_appears(dom):
    text = re.sub(r"<[^>]+>", " ", dom)
    listed = subprocess.run([sys.executable, "-m", "testbed", "list"], capture_output=True,
                            text=True, check=True)
    claim_ids = re.findall(r"^  (\S+\.\S+)\s", listed.stdout.split("Claims:")[1], re.M)
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
    body = _body(dom)
    top, height = int(body["first-figure-top"]), int(body["first-figure-height"])
    tall = tmp_path / "tall.png"
    _chromium(f"--screenshot={tall}", url, profile=tmp_path / "p2", height=top + height + 20)
    panel = tmp_path / "figure_panel.png"
    with Image.open(tall) as image:
        image.crop((0, top, WIDTH, top + height)).save(panel)
    with Image.open(panel) as image:
        assert image.size == (WIDTH, height)
        assert image.convert("L").getextrema()[0] < 128
    assert str(report.parent) not in str(tmp_path)  # never into the report folder

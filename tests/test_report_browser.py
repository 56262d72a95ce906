"""The report in a real browser: headless Chromium loads it, every figure decodes, every claim
listed by `testbed list` appears, and a screenshot is saved (into the test's temporary folder:
tests never write into the user's reports/output).

Chromium comes from Debian's `chromium` package, which `.ci/run` installs; without it this test
is skipped with that reason.
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
         "--allow-file-access-from-files"]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    results = tmp_path_factory.mktemp("results")
    # Two quick claims with plots stand in for the full run; every claim still appears in the
    # page because the report lists claims from the results directory.
    quick = [c for c in CLAIM_DB if c.id in ("classical.neumann.error_bound",
                                               "classical.itd.error_identity")]
    run_claims(quick, results, PROFILES["fast"], progress=False)
    # a small rounds-to-error results file, so the section's figure is loaded by the browser too
    _write_comparison(results)
    return build_report(results, tmp_path_factory.mktemp("report"))


def _chromium(*args: str, profile: Path) -> str:
    assert CHROMIUM is not None
    out = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                             "(.ci/run installs it)")
def test_report_loads_in_headless_chromium(report, tmp_path):
    url = report.resolve().as_uri()
    # why 10 s of virtual time: the load handler that marks decoded figures runs after every
    # image has loaded; virtual time makes the wait deterministic, not wall-clock.
    dom = _chromium("--virtual-time-budget=10000", "--dump-dom", url, profile=tmp_path / "p1")
    images = re.findall(r"<img[^>]*>", dom)
    assert images, "the report shows no figure"
    assert any("comparison.rounds_to_error.png" in tag for tag in images)
    assert all('data-loaded="yes"' in tag for tag in images), [
        t for t in images if 'data-loaded="yes"' not in t]
    match = re.search(r'data-figures="(\d+)/(\d+)"', dom)
    assert match and match.group(1) == match.group(2) == str(len(images))
    screenshot = tmp_path / "screenshot.png"
    _chromium("--window-size=1280,2400", f"--screenshot={screenshot}", url,
              profile=tmp_path / "p2")
    assert screenshot.stat().st_size > 10_000


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed "
                                             "(.ci/run installs it)")
def test_every_claim_of_testbed_list_appears(tmp_path):
    results = tmp_path / "results"
    run_claims([c for c in CLAIM_DB if c.id == "classical.cg.exact_after_dim_y"], results,
               PROFILES["fast"], progress=False)
    page = build_report(results, tmp_path / "report")
    dom = _chromium("--dump-dom", page.resolve().as_uri(), profile=tmp_path / "p")
    text = re.sub(r"<[^>]+>", " ", dom)
    listed = subprocess.run([sys.executable, "-m", "testbed", "list"], capture_output=True,
                            text=True, check=True)
    claim_ids = re.findall(r"^  (\S+\.\S+)\s", listed.stdout.split("Claims:")[1], re.M)
    assert claim_ids
    missing = [c for c in claim_ids if c not in text]
    assert not missing, f"claims listed by `testbed list` but absent from the page: {missing}"

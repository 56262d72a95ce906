"""The documentation's generated pages against the claim registry, and the README's length.

``tox -e docs`` builds the site (MkDocs, strict); the papers' pages are generated at build time
by :mod:`testbed_app.paper_pages` (``docs/hooks.py``). These tests hold the generated pages to
the registry without building the site: every built-in claim has exactly one entry, on the page
of its paper's package; every claim expected to fail is an erratum with its correction and the
command that reproduces it; every generated page is in the site's navigation; a results folder's
claim file is shown only once it is checked. The README stays a five-minute read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testbed_app.paper_pages import anchor
from testbed_app.paper_pages import command
from testbed_app.paper_pages import escape_markdown
from testbed_app.paper_pages import measured
from testbed_app.paper_pages import package_name
from testbed_app.paper_pages import pages
from testbed_app.paper_pages import paper_page
from theory_checks import hgp
from theory_checks.claim_results import ControlRuns
from theory_checks.claim_results import write_claim_result
from theory_checks.controls import run_power
from theory_checks.profiles import get_profile
from theory_checks.registry import BUILTIN_CLAIMS
from theory_checks.registry import PAPER_PACKAGES
from theory_checks.registry import get_claim
from theory_checks.runner import run_claim

ROOT = Path(__file__).resolve().parents[1]
HEADING = re.compile(r"^### `([^`]+)`$", re.MULTILINE)
#: The README's ceiling: what it finds, install, the two commands, which command answers which
#: question and the links fit in it; everything longer lives under docs/.
README_LINES = 200


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return pages()


def test_every_claim_has_one_entry_on_its_papers_page(generated):
    listed: list[str] = []
    for package in PAPER_PACKAGES:
        page = generated[f"papers/{package_name(package)}.md"]
        on_page = HEADING.findall(page)
        assert on_page == [c.id for c in _in_page_order(package, on_page)], package.__name__
        assert set(on_page) == {c.id for c in package.CLAIMS}, package.__name__
        listed += on_page
    assert sorted(listed) == sorted(c.id for c in BUILTIN_CLAIMS)
    assert len(listed) == len(set(listed))


def _in_page_order(package, on_page):
    by_id = {c.id: c for c in package.CLAIMS}
    return [by_id[i] for i in on_page if i in by_id]


def test_each_entry_says_what_its_claim_declares(generated):
    for claim in BUILTIN_CLAIMS:
        page = next(
            generated[f"papers/{package_name(p)}.md"] for p in PAPER_PACKAGES if claim in p.CLAIMS
        )
        entry = page.split(f"### `{claim.id}`", 1)[1].split("\n### ", 1)[0]
        assert command(claim.id) in entry, claim.id
        assert claim.kind.replace("_", " ") in entry, claim.id
        assert f"`{claim.statement.replace('`', chr(39))}`" in entry, claim.id
        for hypothesis in claim.hypotheses:
            assert f"- {escape_markdown(hypothesis.name)}: " in entry, (claim.id, hypothesis.name)
        for reading in claim.readings:
            assert f"- {escape_markdown(reading.name)}: " in entry, (claim.id, reading.name)
        assert ("**Corrects**" in entry) == bool(claim.corrects), claim.id


def test_the_errata_are_the_claims_expected_to_fail(generated):
    for package in PAPER_PACKAGES:
        name = package_name(package)
        failing = [c for c in package.CLAIMS if c.expected == "fails"]
        errata = generated.get(f"papers/{name}-errata.md")
        if not failing:
            assert errata is None, name
            continue
        items = re.findall(r"^## (\d+)\. ", errata, re.MULTILINE)
        assert items == [str(i) for i in range(1, len(failing) + 1)], name
        for claim in failing:
            assert f"(#{anchor(claim.id)})" not in errata  # links go to the paper's page
            assert f"({name}.md#{anchor(claim.id)})" in errata, claim.id
            fixes = [c.id for c in BUILTIN_CLAIMS if c.corrects == claim.id]
            assert command(claim.id, *fixes) in errata, claim.id
            for fix in fixes:
                assert f"[`{fix}`]" in errata, (claim.id, fix)
        # the page links the failing claims and their corrections, and no other claim
        linked = set(re.findall(r"\[`([^`]+)`\]\([a-z]+\.md#", errata))
        corrections = {c.id for c in BUILTIN_CLAIMS if c.corrects in {f.id for f in failing}}
        assert linked == {c.id for c in failing} | corrections, name


def test_a_saved_counterexample_lies_inside_every_hypothesis(generated):
    """The errata print the margins of the saved minimal case: none is negative."""
    for path, page in generated.items():
        if path.endswith("-errata.md"):
            margins = [
                float(m) for m in re.findall(r"\): margin (-?[0-9.e+-]+)$", page, re.MULTILINE)
            ]
            assert all(m >= 0 for m in margins), path


def test_every_generated_page_is_in_the_sites_navigation(generated):
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for path in generated:
        assert f" {path}\n" in config or f": {path}\n" in config, path
    assert "docs/hooks.py" in config


def test_a_results_folder_shows_the_measured_verdict_only_once_checked(tmp_path):
    claim = get_claim("hgp.theorem2.as_stated")
    missing = escape_markdown("not shown: no claims/hgp.theorem2.as_stated.json")
    assert missing in paper_page(hgp, tmp_path)
    profile = get_profile("fast")
    path = write_claim_result(run_claim(claim, profile), tmp_path, profile)
    shown = paper_page(hgp, tmp_path)
    entry = shown.split(f"### `{claim.id}`", 1)[1].split("\n### ", 1)[0]
    assert "**fails as stated** (as expected;" in entry
    counterexample = measured(tmp_path, claim.id).counterexample
    assert counterexample is not None
    assert f"measured {counterexample.measured:.4g} against the bound" in entry
    # a verdict edited by hand breaks the seal: the page names the reason, not the verdict
    record = json.loads(path.read_text())
    record["verdict"] = "holds"
    path.write_text(json.dumps(record))
    entry = paper_page(hgp, tmp_path).split(f"### `{claim.id}`", 1)[1].split("\n### ", 1)[0]
    assert escape_markdown("not shown: claims/hgp.theorem2.as_stated.json not trusted") in entry
    assert "**holds**" not in entry


@pytest.mark.slow  # matplotlib draws the figure: a few seconds
def test_a_measured_claims_figure_is_drawn_by_the_report_and_shown(tmp_path):
    claim = get_claim("hgp.theorem2.corrected")
    profile = get_profile("fast")
    write_claim_result(run_claim(claim, profile), tmp_path, profile)
    drawn = paper_page(hgp, tmp_path, tmp_path / "site")
    entry = drawn.split(f"### `{claim.id}`", 1)[1].split("\n### ", 1)[0]
    assert f"](figures/{claim.id}.png)" in entry
    assert (tmp_path / "site" / "figures" / f"{claim.id}.png").stat().st_size > 1000
    assert f"![{escape_markdown(claim.id)}: measured against the theory" in entry


def test_the_readme_is_a_five_minute_read():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, len(lines)
    text = "\n".join(lines)
    assert "## What it finds" in text
    assert ".venv/bin/tox -e py" in text  # the test command .ci/run runs
    assert "-c constraints/cpu.txt" in text


def test_the_readmes_links_into_the_docs_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links
    for link in links:
        assert (ROOT / link).is_file(), link


def test_a_holds_claims_power_is_named_with_its_perturbation_and_verdict(tmp_path):
    """The power line names the perturbation and what the claim said of it (not the raw
    record, which it printed as a Python dict before)."""
    claim = get_claim("hgp.alg1.static_operator")
    assert claim.perturbation is not None
    profile = get_profile("fast")
    power_run = ControlRuns(power=run_power(claim, profile))
    write_claim_result(run_claim(claim, profile), tmp_path, profile, power_run)
    entry = paper_page(hgp, tmp_path).split(f"### `{claim.id}`", 1)[1].split("\n### ", 1)[0]
    power = measured(tmp_path, claim.id).record.power
    assert power is not None and power.caught is True
    assert f"- power: the perturbation `{claim.perturbation.name}`" in entry
    assert f"gets {power.verdict}: caught" in entry
    assert "{'name'" not in entry and '{"name"' not in entry

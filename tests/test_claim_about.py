"""What a claim checks is declared (issue 32): a stated result, a proof step or printed formula,
an informal sentence or an experiment table's number. The class travels with the verdict into
the results file (a file without it, or with a word outside the vocabulary, is not trusted), and
``testbed check``, the report and the README count substantive refutations apart from errata and
from table numbers. A refuted proof step or formula names the claim of the result it serves,
and that claim exists and is expected to hold."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from pathlib import Path

import pytest

from results_format.claim_file import read_claim_file
from results_format.verdicts import ABOUT_RESULT
from results_format.verdicts import ABOUT_SENTENCE
from results_format.verdicts import ABOUT_STEP
from results_format.verdicts import ABOUT_TABLE
from results_format.verdicts import ABOUTS
from results_format.verdicts import ERRATUM
from results_format.verdicts import SUBSTANTIVE
from results_format.verdicts import TABLE_NUMBER
from results_format.verdicts import refutation_class
from results_format.verdicts import refutation_counts
from testbed_app.check_command import refutations_line
from tests._claim_files import case_record
from tests._claim_files import refutation
from tests._claim_files import write_claim_file
from theory_checks.registry import BUILTIN_CLAIMS
from theory_checks.registry import get_claim

ROOT = Path(__file__).resolve().parents[1]

#: The 15 refutations as issue 32 classifies them (a change is argued in the claim's notes
#: and made here on purpose).
REFUTATIONS = {
    # substantive refutations of a stated result
    "fednest.lemma22.abs_error_as_stated": ABOUT_RESULT,
    "fednest.lemma22.per_client_bias": ABOUT_RESULT,
    "aggitd.cor1.no_floor": ABOUT_RESULT,
    "fedmsa.lemma_b1.contraction": ABOUT_RESULT,
    "fedmsa.mco.paper_fixed_point_stationary": ABOUT_RESULT,
    "fedmsa.rho.as_stated": ABOUT_RESULT,
    "hgp.theorem1.stated_step_condition": ABOUT_RESULT,
    "hgp.theorem2.as_stated": ABOUT_RESULT,
    # errata: a printed formula, a proof step, an informal sentence
    "aggitd.alg1.as_printed": ABOUT_STEP,
    "aggitd.errata.prop2_sum_as_printed": ABOUT_STEP,
    "fednest.lemma22.paper_constant": ABOUT_STEP,
    "fednest.minimax.per_client_indirect_zero": ABOUT_SENTENCE,
    "fednest.compositional.paper_indirect_form": ABOUT_SENTENCE,
    "hgp.lemma2.sqrt_n_constant": ABOUT_STEP,
    # not decisive: an experiment table's number
    "comparison.aggitd_table2_factor": ABOUT_TABLE,
}


def test_every_claim_declares_what_it_checks_from_the_vocabulary():
    assert len(BUILTIN_CLAIMS) >= 100
    assert all(c.about in ABOUTS for c in BUILTIN_CLAIMS)
    for path in sorted((ROOT / "integrations").glob("*/*/claims.toml")):
        for table in tomllib.loads(path.read_text(encoding="utf-8"))["claim"]:
            assert table.get("about") in ABOUTS, (path, table["id"])


def test_the_fifteen_refutations_are_classified_as_the_issue_says():
    for claim_id, about in REFUTATIONS.items():
        claim = get_claim(claim_id)
        if claim.expected == "fails":  # a reading or a record may have settled it since
            assert claim.about == about, claim_id
    counts = {
        kind: sum(1 for a in REFUTATIONS.values() if refutation_class(a) == kind)
        for kind in (SUBSTANTIVE, ERRATUM, TABLE_NUMBER)
    }
    assert counts == {SUBSTANTIVE: 8, ERRATUM: 6, TABLE_NUMBER: 1}


def test_a_refuted_step_names_the_result_it_serves_and_that_result_holds():
    ids = {c.id: c for c in BUILTIN_CLAIMS}
    for claim in BUILTIN_CLAIMS:
        if claim.serves is None:
            assert not (claim.about == ABOUT_STEP and claim.expected == "fails"), claim.id
            continue
        served = ids.get(claim.serves)
        assert served is not None, f"{claim.id} serves {claim.serves}, not a registered claim"
        assert served.expected == "holds", (claim.id, served.id)
        assert served.about == ABOUT_RESULT or served.corrects == claim.id, (claim.id, served.id)


def test_a_claim_without_a_known_class_or_a_refuted_step_serving_nothing_is_refused():
    claim = get_claim("hgp.lemma2.sqrt_n_constant")
    with pytest.raises(ValueError, match="about is 'lemma'"):
        dataclasses.replace(claim, about="lemma")
    with pytest.raises(ValueError, match="names the claim that checks the result it serves"):
        dataclasses.replace(claim, serves=None)
    with pytest.raises(ValueError, match="serves names the result"):
        dataclasses.replace(claim, about=ABOUT_RESULT)


def test_the_results_file_carries_the_class_and_is_not_trusted_without_it(tmp_path):
    record = refutation(
        "fednest.toy.step",
        "FedNest",
        "bias_bound",
        [case_record("p.a", 0.9, 0.3, False)],
        about=ABOUT_STEP,
        serves="fednest.toy.result",
    )
    (tmp_path / "series").mkdir()
    (tmp_path / record["series_file"]).write_text("")
    path = write_claim_file(tmp_path, record)
    data, reason = read_claim_file(path, tmp_path)
    assert reason is None and data is not None
    assert (data["about"], data["serves"]) == (ABOUT_STEP, "fednest.toy.result")
    for change, word in (
        ({"about": "lemma"}, "about"),
        ({}, "about is missing"),
        ({"serves": 3}, "serves"),
    ):
        edited = {k: v for k, v in record.items() if k != "about" or change}
        edited.update(change)
        write_claim_file(tmp_path, edited)
        data, reason = read_claim_file(path, tmp_path)
        assert data is None and reason is not None and word in reason, reason


def test_check_counts_substantive_refutations_apart_from_errata_and_table_numbers():
    summaries = [
        {"verdict": "fails as stated", "about": ABOUT_RESULT},
        {"verdict": "fails as stated", "about": ABOUT_RESULT},
        {"verdict": "fails as stated", "about": ABOUT_SENTENCE},
        {"verdict": "fails as stated", "about": ABOUT_STEP},
        {"verdict": "fails as stated", "about": ABOUT_TABLE},
        {"verdict": "holds", "about": ABOUT_TABLE},
    ]
    assert refutation_counts(summaries) == {SUBSTANTIVE: 2, ERRATUM: 2, TABLE_NUMBER: 1}
    assert refutations_line(summaries) == (
        "2 substantive refutation(s) of a stated result, 2 erratum/errata (a proof step, "
        "printed formula or informal sentence), 1 experiment table number(s)"
    )
    with pytest.raises(ValueError, match="unknown class"):
        refutation_counts([{"verdict": "fails as stated", "about": "lemma"}])


def test_the_readme_counts_what_the_registry_classifies():
    """README "What it finds": per paper, the claims expected to fail as stated counted by
    class, as the registry declares them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## What it finds", 1)[1].split("\n## ", 1)[0]
    head = (
        "| paper | claims | holds | holds once corrected | undecided (fast profile) | "
        "substantive refutations | errata | table numbers |"
    )
    assert head in section
    rows = {}
    for line in section.split(head, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].split(" (")[0]] = [int(c) for c in cells[-3:]]
    papers = {
        "Classical": "Classical",
        "FedNest": "FedNest",
        "AggITD": "AggITD",
        "FedMSA": "FedMSA",
        "HGP": "HGP",
        "Comparisons": "comparison",
    }
    total = [0, 0, 0]
    for row, prefix in papers.items():
        claims = [c for c in BUILTIN_CLAIMS if c.id.split(".")[0] == prefix.lower()]
        counted = refutation_counts(
            {"verdict": "fails as stated", "about": c.about}
            for c in claims
            if c.expected == "fails"
        )
        found = [counted[SUBSTANTIVE], counted[ERRATUM], counted[TABLE_NUMBER]]
        assert rows[row] == found, row
        total = [a + b for a, b in zip(total, found, strict=True)]
    assert rows["all"] == total
    assert re.search(rf"Substantive refutations \({total[0]}\)", section)
    assert re.search(rf"Errata \({total[1]}\)", section)


def test_metadata_lists_each_registered_claims_class(tmp_path):
    from theory_checks.claim_results import write_metadata
    from theory_checks.runner import get_profile

    write_metadata(tmp_path, get_profile("fast"))
    registered = json.loads((tmp_path / "metadata.json").read_text())["claims_registered"]
    assert {r["id"]: r["about"] for r in registered if r["id"] in REFUTATIONS} == {
        c: get_claim(c).about for c in REFUTATIONS
    }

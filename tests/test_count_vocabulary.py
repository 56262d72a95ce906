"""One count, one vocabulary (results_format.populations): `testbed check`, `testbed list` and the
report name the claims of the papers, the comparisons and the runs on enrolled variants apart,
with the same numbers. The README said 102 claims, `check` "102 claims ... 4 runs on enrolled
variants", and the report's header "106 claims", the comparisons and the `@aid-fp` runs folded
into the papers' counts."""

import re

from results_format.populations import COMPARISONS
from results_format.populations import NOUNS
from results_format.populations import PAPERS
from results_format.populations import VARIANTS
from testbed_app.cli import main

#: "98 claims of the papers", "1 comparison", "4 runs on enrolled variants" -> population
NOUN = {noun: which for which, forms in NOUNS.items() for noun in forms}
COUNT = r"(\d+) (" + "|".join(re.escape(noun) for noun in NOUN) + r")"


def test_check_list_and_report_count_the_three_populations_alike(tmp_path, capsys):
    results = tmp_path / "results"
    # a claim of a paper, also run on aid-fp (a comparison would add 10 s: the report counts
    # the registered ones, checked or not, and `check` counts the comparisons with the same
    # function as the other two)
    assert (
        main(
            [
                "check",
                "--claim",
                "classical.neumann.error_identity",
                "--results",
                str(results),
                "--quiet",
                "--profile",
                "fast",
                "--claims-only",
            ]
        )
        == 0
    )
    checked_line = re.search(r"^Checked on the fast profile: (.*)$", capsys.readouterr().out, re.M)
    assert checked_line is not None
    checked = {NOUN[noun]: int(n) for n, noun in re.findall(COUNT, checked_line.group(1))}
    assert main(["list"]) == 0
    listed = {
        NOUN[noun]: int(n) for n, noun in re.findall(rf"^{COUNT}:$", capsys.readouterr().out, re.M)
    }
    assert main(["report", "--results", str(results), "--quiet"]) == 0
    capsys.readouterr()
    report = (results / "report" / "report.md").read_text()
    reported = {
        NOUN[noun]: (int(n), int(k))
        for n, noun, k in re.findall(COUNT + r" \((\d+) checked\)", report)
    }

    assert checked == {PAPERS: 1, VARIANTS: 1}
    assert set(listed) == set(reported) == {PAPERS, COMPARISONS, VARIANTS}
    assert listed[COMPARISONS] == 4 and listed[VARIANTS] >= 4  # aid-fp's runs (and plugins')
    for which in (PAPERS, COMPARISONS, VARIANTS):
        assert reported[which] == (listed[which], checked.get(which, 0)), which
    # the report's tables hold the same numbers: the papers' tables add up to the claims of
    # the papers, and the comparisons and the variants' runs have a table each
    own = report.split("### Plugins, integrations and verified estimators")[0]
    tables = dict(re.findall(r"^\*\*\[(.+?)\]\(#[^)]+\)\*\*: (\d+) ", own, re.M))
    comparisons = next(v for k, v in tables.items() if k.startswith("Comparisons"))
    variants = next(v for k, v in tables.items() if k.startswith("Runs on enrolled variants"))
    papers = [
        int(v)
        for k, v in tables.items()
        if not k.startswith(("Comparisons", "Runs on enrolled variants"))
    ]
    assert (sum(papers), int(comparisons), int(variants)) == (
        listed[PAPERS],
        listed[COMPARISONS],
        listed[VARIANTS],
    )
    # and nothing adds the three together as "claims"
    total = sum(listed.values())
    assert f"{total} claims" not in report

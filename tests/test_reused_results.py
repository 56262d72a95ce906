"""A resumed ``testbed check`` says when it reuses results computed by other code or on another
device.

A claim's fingerprint covers its definition (statement, hypotheses, profile...), not the code
that checks it, so a result written before a fix of the check stays fresh and is reused: on
2026-11-26 a results folder kept ``hgp.theorem2.corrected``'s numbers from before the check was
made device-independent, without a word. Each claim record now names the commit and the device
that computed it (``computed_by``), and a run that reuses records from elsewhere prints one
line naming them and ``--fresh``; the report names them beside its header's commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.build import build_report
from results_format.provenance import git_commit
from results_format.validation import seal
from testbed_app.cli import main
from theory_checks.claim_results import computed_by
from theory_checks.claim_results import reused_from_elsewhere

CLAIM = "classical.cg.exact_after_dim_y"


def _check(results: Path, *extra: str) -> int:
    return main(
        ["check", "--claim", CLAIM, "--claims-only", "--quiet", "--results", str(results), *extra]
    )


def _rewrite(results: Path, edit) -> None:
    path = results / "claims" / f"{CLAIM}.json"
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(seal(record), indent=2))


@pytest.fixture
def checked(tmp_path, capsys) -> Path:
    assert _check(tmp_path) == 0
    capsys.readouterr()
    return tmp_path


def test_a_record_names_the_commit_and_the_device_that_computed_it(checked) -> None:
    record = json.loads((checked / "claims" / f"{CLAIM}.json").read_text())
    assert record["computed_by"] == {"git_commit": git_commit(), "device": "cpu"}


def test_reusing_this_codes_results_says_nothing(checked, capsys) -> None:
    assert _check(checked) == 0
    assert "note" not in capsys.readouterr().err


@pytest.mark.skipif(git_commit() == "unknown", reason="needs a git checkout to compare commits")
@pytest.mark.parametrize(
    ("computed", "named"),
    [
        ({"git_commit": "0123456789abcdef", "device": "cpu"}, "commit 0123456789 on cpu"),
        ({"git_commit": "same", "device": "cuda:0"}, "on cuda:0"),
        (None, "a version of the testbed that did not record its commit"),
    ],
)
def test_reusing_results_from_elsewhere_is_one_line_naming_them(
    checked, capsys, computed, named
) -> None:
    def stamp(record):
        if computed is None:
            del record["computed_by"]
        else:
            record["computed_by"] = {
                **computed,
                "git_commit": git_commit()
                if computed["git_commit"] == "same"
                else computed["git_commit"],
            }

    _rewrite(checked, stamp)
    assert _check(checked) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "note" in line]
    assert len(lines) == 1
    assert lines[0].startswith(f"testbed: note: 1 claim result(s) in {checked} were reused from ")
    assert named in lines[0] and f"({CLAIM}); --fresh recomputes them" in lines[0]
    # --fresh recomputes it here; the next run reuses this code's result and says nothing
    assert _check(checked, "--fresh") == 0
    assert _check(checked) == 0
    assert "note" not in capsys.readouterr().err


def test_records_are_compared_with_this_process() -> None:
    here = computed_by()
    same = {"id": "a", "computed_by": dict(here)}
    older = {"id": "b"}
    unknown = {"id": "c", "computed_by": {"git_commit": "unknown", "device": here["device"]}}
    other_device = {"id": "d", "computed_by": {**here, "device": "meta"}}
    expected = [] if here["git_commit"] == "unknown" else ["b", "d"]
    assert reused_from_elsewhere([same, older, unknown, other_device]) == expected


def test_the_report_names_results_the_headers_commit_does_not_describe(
    checked, tmp_path_factory
) -> None:
    same = tmp_path_factory.mktemp("same")
    build_report(checked, same)
    assert "computed by another commit" not in (same / "report.md").read_text()

    _rewrite(
        checked, lambda r: r.update(computed_by={"git_commit": "0123456789abcdef", "device": "cpu"})
    )
    other = tmp_path_factory.mktemp("other")
    build_report(checked, other)
    text = (other / "report.md").read_text()
    assert (
        "results computed by another commit or on another device than the header names" in text
        and f"{CLAIM} (commit 0123456789 on cpu)" in text
    )

    _rewrite(checked, lambda r: r.pop("computed_by"))
    older = tmp_path_factory.mktemp("older")
    build_report(checked, older)
    text = (older / "report.md").read_text()
    assert (
        f"1 results do not name the commit that computed them (written before claim "
        f"files recorded it): {CLAIM}\n"
    ) in text
    assert "not checked" in text  # the claims without results are not among them

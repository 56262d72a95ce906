"""higher through the testbed: the recorded verdicts of the installed higher, planted bugs in
the adapter's calls caught, and one line when higher is missing."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from testbed_higher import perturbations as bugs

from testbed_app.library_verdicts import verdict_changes
from theory_checks.profiles import get_profile
from theory_checks.registry import get_claim
from theory_checks.runner import run_claim

HERE = Path(__file__).resolve().parents[1]


def test_every_verdict_is_the_one_recorded_for_the_installed_higher(tmp_path):
    reference, changes = verdict_changes(
        HERE / "expected_verdicts.toml", version("higher"), tmp_path
    )
    assert not changes, "\n".join(changes)


@pytest.mark.parametrize(
    "claim_id, bug",
    [
        ("classical.itd.error_identity", bugs.ONE_STEP_SHORT),
        ("classical.itd.error_identity", bugs.STEP_DOUBLED),
        ("classical.gd.linear_rate", bugs.STEP_DOUBLED),
    ],
    ids=lambda v: getattr(v, "name", v),
)
def test_a_one_line_bug_in_the_adapters_call_is_caught(claim_id, bug):
    result = run_claim(get_claim(claim_id), get_profile("fast"), make=bug.build)
    assert result.verdict == "fails as stated", (bug.name, result.verdict)


def test_a_missing_higher_gives_one_line_saying_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['higher'] = None\n"
        "from testbed_app.cli import main\n"
        "sys.exit(main(['verify', 'higher-unrolled', '--quiet', '--no-report', '--results',"
        f" {str(tmp_path)!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'hypergradient-testbed[higher]'" in lines[0]

"""The `testbed` command: list shows every registered item; check writes results and resumes."""

import json
import subprocess
import sys

from problems import PROBLEM_DB
from testbed.registry import ESTIMATOR_DB
from testbed_app.cli import main
from theory_checks.registry import CLAIM_DB


def test_list_shows_every_registered_item(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in [p.name for p in PROBLEM_DB] + [e.name for e in ESTIMATOR_DB]:
        assert name in out
    for claim in CLAIM_DB:
        assert claim.id in out and claim.reference in out


def test_check_writes_results_and_resumes(tmp_path, capsys):
    claim = "classical.neumann.error_identity"
    args = ["check", "--claim", claim, "--results", str(tmp_path), "--quiet",
            "--profile", "fast"]
    assert main(args) == 0
    data = json.loads((tmp_path / "claims" / f"{claim}.json").read_text())
    assert data["verdict"] == "holds" and data["n_cases"] > 0
    assert (tmp_path / "metadata.json").exists()
    mtime = (tmp_path / "claims" / f"{claim}.json").stat().st_mtime_ns
    assert main(args) == 0  # resumes: the finished claim is not rerun
    assert (tmp_path / "claims" / f"{claim}.json").stat().st_mtime_ns == mtime
    # the claim runs on its own estimator and on the variants enrolled in it (aid-fp, and the
    # example plugin where it is installed)
    from theory_checks.registry import get_claim
    from theory_checks.runner import claim_runs

    runs = claim_runs([get_claim(claim)])
    assert "aid-fp" in {estimator for _, estimator in runs}
    assert f"{len(runs)} claims checked" in capsys.readouterr().out


def test_unknown_claim_is_a_clear_error(capsys):
    assert main(["check", "--claim", "no.such.claim", "--quiet"]) == 2
    assert "no claim 'no.such.claim'" in capsys.readouterr().err


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "testbed", "list"], capture_output=True,
                         text=True, check=True)
    assert "Claims:" in out.stdout


def test_help_does_not_import_torch():
    """`testbed --help` used to take ~5 s because `import testbed` imported torch."""
    code = ("import sys; from testbed_app.cli import build_parser; build_parser(); "
            "import testbed; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
    help_text = subprocess.run([sys.executable, "-m", "testbed", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert "testbed run" in help_text


def test_list_verbose_shows_parameters_and_defaults(capsys):
    assert main(["list", "--verbose"]) == 0
    out = capsys.readouterr().out
    fednest = next(e for e in ESTIMATOR_DB if e.name == "fednest")
    for key, value in fednest.defaults.items():
        assert f"{key}={value!r}" in out
    assert "parameters: seed=0" in out  # the problems' builders
    assert "[workload] kind = 'hyper_representation'" in out and "limits: rounds <=" in out
    assert main(["list"]) == 0 and "parameters (defaults)" not in capsys.readouterr().out

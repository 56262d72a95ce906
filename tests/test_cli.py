"""The `testbed` command: list shows every registered item; check writes results and resumes."""

import json
import re
import subprocess
import sys

import pytest

from problems import PROBLEM_DB
from testbed.registry import ESTIMATOR_DB
from testbed_app.cli import COMMANDS
from testbed_app.cli import build_parser
from testbed_app.cli import main
from tests._cli_runs import check_argv
from tests._python_runs import run_python
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
    args = ["check", "--claim", claim, "--results", str(tmp_path), "--quiet", "--profile", "fast"]
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
    out = capsys.readouterr().out
    plugin = [e for _, e in runs if e == "my-horner-aid"]  # where the example is installed
    # the claim, counted once, and its runs on the testbed's variants apart
    # (results_format.populations)
    assert "Checked on the fast profile: 1 claim of the papers (1 holds," in out
    assert len(runs) - len(plugin) - 1 == 1  # aid-fp
    assert "; 1 run on an enrolled variant (1 holds," in out
    if plugin:  # the example plugin's run is counted apart from the papers'
        assert (
            "1 runs of estimators or claims from outside the testbed (plugin my-estimator)" in out
        )


def test_unknown_claim_is_a_clear_error(capsys):
    assert main(["check", "--claim", "no.such.claim", "--quiet"]) == 2
    assert "no claim 'no.such.claim'" in capsys.readouterr().err


def test_unknown_claim_ids_are_one_line_with_did_you_mean(capsys):
    """An unknown id used to print all 100 ids on one 3,294-character line."""
    assert (
        main(["check", "--claim", "fednest.thm31.k_rate", "classical.gd.linear_rat", "--quiet"])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400, err
    assert "no claim 'fednest.thm31.k_rate' (did you mean 'fednest.thm31.k_rate_bilevel'" in err
    assert "no claim 'classical.gd.linear_rat' (did you mean 'classical.gd.linear_rate'" in err
    assert err.rstrip().endswith("`testbed list` shows every claim")
    for command in (["calibrate", "--seeds", "1"], ["verify", "aid-fp", "--no-report"]):
        assert main([*command, "--claim", "classical.gd.linear_rat", "--quiet"]) == 2
        assert "did you mean 'classical.gd.linear_rate'" in capsys.readouterr().err
    assert main(["verify", "aid-f", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no estimator named 'aid-f' (did you mean 'aid-fp'" in err and len(err) < 300


def test_claim_takes_several_ids_after_one_flag_and_repeated_flags(tmp_path, capsys):
    """docs/command-line.md shows `[--claim ID ...]`: several ids after one flag, and the flag
    repeated, in check, calibrate and verify."""
    parser = build_parser()
    for command in (["check"], ["calibrate"], ["verify", "aid-fp"]):
        args = parser.parse_args([*command, "--claim", "a", "b", "--claim", "c"])
        assert args.claim == ["a", "b", "c"], command
    first, second = "classical.neumann.error_identity", "classical.cg.exact_after_dim_y"
    assert main(check_argv(tmp_path, [first, second], "--quiet", "--profile", "fast")) == 0
    out = capsys.readouterr().out
    assert {first, second} <= {path.stem for path in (tmp_path / "claims").glob("*.json")}
    assert f"{first} " in out and f"{second} " in out


def test_help_lists_every_command_on_one_line_each(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out and "The ``testbed`` command" not in out
    with pytest.raises(SystemExit):
        main(["no-such-command"])
    commands = set(re.findall(r"'([a-z]+)'", capsys.readouterr().err.split("choose from")[1]))
    listed = dict(re.findall(r"^  ([a-z]+) +(\S.*)$", out, re.M))
    assert commands == set(COMMANDS) and len(commands) == 10
    for name in commands:
        assert listed[name] == COMMANDS[name]  # the command and its whole help on one line


def test_python_dash_m_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "testbed", "list"], capture_output=True, text=True, check=True
    )
    assert "claims of the papers:" in out.stdout


def test_help_does_not_import_torch():
    """`testbed --help` used to take ~5 s because `import testbed` imported torch."""
    code = (
        "import sys; from testbed_app.cli import build_parser; build_parser(); "
        "import testbed; print('torch' in sys.modules)"
    )
    out = run_python(code)
    assert out.stdout.strip() == "False"
    help_text = subprocess.run(
        [sys.executable, "-m", "testbed", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "testbed run" in help_text


def test_report_starts_without_torch(tmp_path):
    """`testbed report` reads results files only: it imports neither torch nor the claims
    (0.3 s to start, 6.8 s with the other commands' imports, at load 7)."""
    code = (
        "import sys; from testbed_app.cli import main; "
        f"status = main(['report', '--results', {str(tmp_path / 'absent')!r}, "
        f"'--out', {str(tmp_path / 'out')!r}]); "
        "print(status, 'torch' in sys.modules, 'theory_checks' in sys.modules)"
    )
    out = run_python(code)
    assert out.stdout.split() == ["2", "False", "False"], out.stdout + out.stderr
    assert "results directory" in out.stderr and "does not exist" in out.stderr


def test_list_verbose_shows_parameters_and_defaults(capsys):
    assert main(["list", "--verbose"]) == 0
    out = capsys.readouterr().out
    fednest = next(e for e in ESTIMATOR_DB if e.name == "fednest")
    for key, value in fednest.defaults.items():
        assert f"{key}={value!r}" in out
    assert "parameters: seed=0" in out  # the problems' builders
    assert "[workload] kind = 'hyper_representation'" in out and "limits: steps <=" in out
    assert main(["list"]) == 0 and "parameters (defaults)" not in capsys.readouterr().out


def test_list_claim_describes_one_claim_and_names_its_file(capsys):
    assert main(["list", "--claim", "hgp.theorem2.corrected"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hgp.theorem2.corrected  (bias_bound; HGP Thm 2")
    assert "defined in: theory_checks/hgp/theorem2.py" in out
    assert "checks: a stated result (refuted, it counts as a substantive refutation)" in out
    assert "perturbation it must catch:" in out and "Problems:" not in out
    assert main(["list", "--claim", "hgp.theorem2.corected"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "hgp.theorem2.corrected" in err


def test_report_of_a_missing_results_folder_is_one_line_without_a_bar(tmp_path, capsys):
    """`testbed report --results MISSING` drew an empty progress bar before its error."""
    assert (
        main(["report", "--results", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("testbed: error: results directory") and err.count("\n") == 1, err
    assert "report: claims" not in err and "%|" not in err

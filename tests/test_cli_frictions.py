"""What a new user ran into (issue 34): a command's usage line, defaults in --help, where the
report goes without --out, a deploy config given to `testbed run`, "cases 0" beside a
refutation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from testbed_app.cli import COMMANDS
from testbed_app.cli import build_parser
from testbed_app.cli import main
from tests._claim_files import case_record
from tests._claim_files import claim_record
from tests._claim_files import write_claim_file
from tests._claim_files import write_series
from tests._cli_runs import check_argv

#: a positional argument each command needs for its --help to be compared with its defaults
POSITIONALS = {"run": ["x.toml"], "verify": ["aid-fp"], "deploy": ["x.toml"], "audit": ["results"]}


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def test_a_commands_usage_line_names_the_command_once(capsys):
    """It read `usage: testbed [-h] COMMAND ... report [-h] ...`."""
    for command in COMMANDS:
        usage = _help(command, capsys).split("\n\n")[0]
        assert usage.startswith(f"usage: testbed {command} [-h]"), usage
        assert "COMMAND" not in usage


def test_every_option_with_a_default_shows_it_in_help(capsys):
    """`--results` and `--out` showed no default: every option whose default is not "absent"
    (None, or off for a flag) says its default."""
    parser = build_parser()
    for command in COMMANDS:
        text = _help(command, capsys)
        defaults = vars(parser.parse_args([command, *POSITIONALS.get(command, [])]))
        blocks = re.split(r"\n(?=  -)", text.split("options:", 1)[1])
        for block in blocks[1:]:
            flag = re.findall(r"--[a-z0-9-]+", block.splitlines()[0])[0]
            if flag == "--help":
                continue
            dest = flag[2:].replace("-", "_")
            dest = dest if dest in defaults else f"compute_{dest}"  # --device of the claims
            default = defaults[dest]
            if default is None or default is False:
                continue
            assert "default" in " ".join(block.split()), (command, flag, default)
    report = " ".join(_help("report", capsys).split())
    assert "--results RESULTS results directory (default: results)" in report
    assert "(default: the results directory's report/" in report


def _one_claim(results: Path) -> Path:
    """A results folder of one identity claim that holds, its series file a header only (no
    figure to draw)."""
    claim = "classical.toy.identity"
    write_series(results / "series" / f"{claim}.csv", claim, "aid-neumann", [])
    write_claim_file(
        results,
        claim_record(
            claim, "Classical", "exact_identity", "holds", [case_record("p.a", 1e-16, 1e-10, True)]
        ),
    )
    return results


def test_report_without_out_goes_next_to_its_results(tmp_path, monkeypatch, capsys):
    """Without --out the report went to ./reports/output of the current folder: run from the
    repository root, it replaced the main job's report."""
    results = _one_claim(tmp_path / "results")  # one claim, no figure
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["report", "--results", str(results), "--quiet"]) == 0
    assert (results / "report" / "index.html").is_file()
    assert not any(elsewhere.iterdir())
    assert f"report written: {results / 'report' / 'index.html'}" in capsys.readouterr().out


def test_a_section_not_run_says_in_one_line_near_the_top_which_command_fills_it(tmp_path):
    """The main job's report left calibration, mutants, replication and benchmarks "not run",
    each folded at the end: the top of the report lists each in one line with its commands."""
    results = _one_claim(tmp_path / "results")
    assert main(["report", "--results", str(results), "--quiet"]) == 0
    markdown = (results / "report" / "report.md").read_text()
    top = markdown.split("## Sections not run\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    commands = {
        "calibration": "testbed calibrate --seeds 300",
        "mutation": "testbed mutate",
        "replication": "testbed run configs/X.toml --steps 5",
        "bench": "python benchmarks/run.py --quick",
    }
    for anchor, command in commands.items():
        line = next(line for line in top if f"](#{anchor})" in line)
        assert f"`{command} " in line, line
        assert f"## {line.split('[')[1].split(']')[0]} (not run)" in markdown
    page = (results / "report" / "index.html").read_text()
    assert 'id="not-run"' in page and "<code>testbed mutate --results" in page


def test_run_of_a_deploy_config_points_to_deploy(capsys):
    """`testbed run configs/deploy/...` said "unknown section or key 'problem'" only."""
    config = "configs/deploy/fednest_quadratic.toml"
    assert main(["run", config, "--results", "unused", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "unknown section or key 'problem'" in err
    assert f"`testbed deploy {config}` runs it on Flower" in err and err.count("\n") == 1


def test_check_says_what_decided_a_refutation_that_no_case_held_before(tmp_path, capsys):
    """`check` printed "cases 0" beside a claim refuted on its saved counterexample."""
    claim = "fednest.lemma22.per_client_bias"  # fails as stated on its saved counterexample
    assert main(check_argv(tmp_path, [claim], "--quiet", "--profile", "fast", "--claims-only")) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith(claim))
    assert row.split()[1:5] == ["fails", "as", "stated", "0"]
    assert (
        "decided by its saved counterexample, replayed before any drawn case (the check "
        "stops at the first failure)"
    ) in out


def test_every_tox_environment_is_described_and_in_env_list_or_a_label():
    """`tox -l` listed py and lint only (13 environments existed): `tox l` lists each with its
    description, and `tox l -m results` / `-m verify` the groups (tox.ini's comment)."""
    import configparser
    from pathlib import Path

    ini = configparser.ConfigParser(interpolation=None)
    ini.read(Path(__file__).resolve().parents[1] / "tox.ini")
    envs = {name.split(":", 1)[1] for name in ini.sections() if name.startswith("testenv:")}
    listed = {name.strip() for name in ini["tox"]["env_list"].split(",")}
    labelled = {
        name.strip()
        for line in ini["tox"]["labels"].strip().splitlines()
        for name in line.split("=", 1)[1].split(",")
    }
    assert envs == listed | labelled, envs ^ (listed | labelled)
    for env in envs:
        assert ini[f"testenv:{env}"].get("description", "").strip(), env
    # the main job fills the mutants' section (27 s of CPU), then builds the report
    report = ini["testenv:report"]["commands"]
    assert report.index("testbed mutate") < report.index("testbed report")

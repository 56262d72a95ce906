"""The numerical precision policy (``testbed.precision``): TF32 off in every entry point that
computes, unless a config or option asks, and recorded with the results.

The flags are torch's process-wide settings; they are set and read back without a GPU, so these
tests show on the CPU that each entry point sets them (each starts from TF32 switched on, as a
process might have it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from testbed.precision import is_policy
from testbed.precision import precision_record
from testbed.precision import set_precision
from testbed_app import cli
from testbed_app import commands
from testbed_app import report_command
from testbed_app.executors import LocalExecutor
from testbed_app.experiments import runner
from testbed_app.experiments.config import ConfigError
from testbed_app.experiments.config import load_config
from tests.test_experiments import write

#: Commands that only read results files: no policy needed (everything else computes).
READ_ONLY = {"list", "report"}


@pytest.fixture(autouse=True)
def _policy_restored():
    yield
    set_precision()


def test_the_policy_switches_tf32_off_and_on_and_reads_back() -> None:
    on = set_precision(tf32=True)
    assert on["tf32"] is True and is_policy(on, tf32=True) and not is_policy(on)
    assert on["float32_matmul_precision"] == "high"
    off = set_precision()
    assert off == precision_record()
    assert off["tf32"] is False and is_policy(off)
    assert off["float32_matmul_precision"] == "highest"
    flags = {k: v for k, v in off.items() if k not in ("tf32", "float32_matmul_precision")}
    # torch >= 2.9: one flag per backend (cuBLAS matmul, cuDNN conv and RNN); older: booleans
    assert flags in (
        {"cuda_matmul": "ieee", "cudnn_conv": "ieee", "cudnn_rnn": "ieee"},
        {"cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": False},
    )
    with pytest.raises(TypeError, match="bool"):
        set_precision("yes")  # type: ignore[arg-type]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _minimal_argv(name: str, parser: argparse.ArgumentParser) -> list[str]:
    """``name`` and a placeholder for each required positional argument."""
    positional = [a for a in parser._actions if not a.option_strings and a.dest != "help"]
    return [name] + ["placeholder"] * len(positional)


def test_every_command_that_computes_sets_the_policy(monkeypatch) -> None:
    """Every subcommand the parser has (``mutate`` and any later one included) runs under the
    policy, except the two that only read files; the command's own work is replaced by a
    recorder, so the test shows where the flags are set: before the command starts."""
    seen: dict[str, dict[str, Any]] = {}
    for name in _subcommands(cli.build_parser()):

        def record(args: argparse.Namespace, settings: object = None, name: str = name) -> int:
            seen[name] = precision_record()
            return 0

        monkeypatch.setitem(commands.HANDLERS, name, record)
        if name == "report":  # the command line runs it without the commands (no torch)
            monkeypatch.setattr(report_command, "report_command", record)
    parsers = _subcommands(cli.build_parser())
    assert {"check", "calibrate", "regress", "run", "verify"} <= set(parsers)
    assert set(commands.HANDLERS) == set(parsers)  # every command has its handler
    for name, sub in parsers.items():
        set_precision(tf32=True)
        assert cli.main(_minimal_argv(name, sub)) == 0
        if name in READ_ONLY:
            assert seen[name]["tf32"] is True, f"{name} changed the flags"
        else:
            assert is_policy(seen[name]), f"testbed {name} runs without the policy: {seen[name]}"
    # --tf32 asks for it (run: through the config override, see below)
    set_precision()
    assert cli.main(_minimal_argv("run", parsers["run"]) + ["--tf32"]) == 0
    assert is_policy(seen["run"], tf32=True)


def test_a_run_records_its_policy_and_a_config_may_ask_for_tf32(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"run.steps": 1}))
    assert config.run["tf32"] is False
    set_precision(tf32=True)
    runner.run_experiment(config, tmp_path / "off", progress=False)
    meta = json.loads((tmp_path / "off" / "runs" / "tiny" / "metadata.json").read_text())
    assert is_policy(meta["precision"]) and is_policy(precision_record())

    asked = load_config(write(tmp_path, {"run.steps": 1, "run.tf32": True}, name="tf32.toml"))
    runner.run_experiment(asked, tmp_path / "on", progress=False)
    meta = json.loads((tmp_path / "on" / "runs" / "tiny" / "metadata.json").read_text())
    assert is_policy(meta["precision"], tf32=True)
    assert "tf32 = true" in (tmp_path / "on" / "runs" / "tiny" / "config.toml").read_text()


def test_switching_tf32_does_not_resume_the_other_settings_checkpoint(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, {"run.steps": 1}))
    runner.run_experiment(config, tmp_path / "results", progress=False)
    on = load_config(write(tmp_path, {"run.steps": 2}), {"run.tf32": True})
    with pytest.raises(ConfigError, match="different config"):
        runner.run_experiment(on, tmp_path / "results", progress=False)
    # without the key the fingerprint is the one of a config that never had it
    off = load_config(write(tmp_path, {"run.steps": 2, "run.tf32": False}))
    assert runner.run_experiment(off, tmp_path / "results", progress=False)["resumed_from"] == 1


def test_a_bad_tf32_value_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tf32.*true or false"):
        load_config(write(tmp_path, {"run.tf32": "yes"}))


def test_claim_results_record_the_policy(tmp_path: Path) -> None:
    set_precision(tf32=True)
    code = cli.main(
        [
            "check",
            "--claim",
            "classical.neumann.error_identity",
            "--results",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert code == 0
    assert is_policy(json.loads((tmp_path / "metadata.json").read_text())["precision"])


def _worker_precision() -> dict[str, Any]:
    return precision_record()


def test_executor_worker_processes_set_the_policy() -> None:
    """A spawned worker starts with torch's defaults (cuDNN TF32 on): the executor sets the
    policy there too."""
    with LocalExecutor(jobs=2) as executor:
        records = [record for _, record in executor.run([_worker_precision] * 2)]
    assert len(records) == 2 and all(is_policy(r) for r in records)

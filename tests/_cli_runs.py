"""Command lines of ``testbed check``, ``calibrate`` and ``run`` as the tests run them (through
``testbed_app.cli.main``): the claims or configs and the results folder, then the options a test
adds; and results folders checked once and copied by each test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from testbed_app.cli import main


def check_argv(results: Path, claims: list[str], *options: str) -> list[str]:
    """``testbed check --claim CLAIM... --results RESULTS OPTIONS`` (the claims after one flag)."""
    return ["check", "--claim", *claims, "--results", str(results), *options]


def calibrate_argv(results: Path, claim: str, seeds: int = 2, *options: str) -> list[str]:
    """``testbed calibrate --claim CLAIM --seeds SEEDS --results RESULTS --quiet OPTIONS``."""
    return [
        "calibrate",
        "--claim",
        claim,
        "--seeds",
        str(seeds),
        "--results",
        str(results),
        "--quiet",
        *options,
    ]


def run_argv(results: Path, configs: list[Path], *options: str) -> list[str]:
    """``testbed run CONFIG... --results RESULTS --quiet OPTIONS``."""
    return ["run", *map(str, configs), "--results", str(results), "--quiet", *options]


def checked_folder(tmp_path_factory: pytest.TempPathFactory, claims: list[str]) -> Path:
    """A results folder of ``claims`` checked (fast profile): made once by a module's fixture,
    copied by its tests (:func:`copy_results`)."""
    results = tmp_path_factory.mktemp("checked")
    assert main(check_argv(results, claims, "--quiet", "--profile", "fast")) == 0
    return results


def copy_results(folder: Path, tmp_path: Path) -> Path:
    """A copy of the results ``folder`` as ``tmp_path/results``, for one test to change."""
    shutil.copytree(folder, tmp_path / "results")
    return tmp_path / "results"


def verify_argv(results: Path, estimator: str, claim: str, *options: str) -> list[str]:
    """``testbed verify ESTIMATOR --claim CLAIM --results RESULTS --quiet --no-report OPTIONS``."""
    return [
        "verify",
        estimator,
        "--claim",
        claim,
        "--results",
        str(results),
        "--quiet",
        "--no-report",
        *options,
    ]

"""Threads chosen, not inherited (testbed_app/threads.py): the claim commands compute with one
torch thread per process whatever the environment says, ``--threads`` overrides, the number in
force is recorded in ``metadata.json``, and the ``--jobs`` workers get the same number."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from testbed_app.executors import LocalExecutor
from testbed_app.executors import make_executor
from testbed_app.threads import CLAIM_THREADS
from testbed_app.threads import claim_threads
from testbed_app.threads import workload_threads
from theory_checks.settings import ExecutorSettings
from theory_checks.settings import RunSettings

#: a deterministic claim that checks in about a second
CHEAP_CLAIM = "classical.neumann.error_identity"


def _check(results: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``testbed check`` of one cheap claim in a process of its own (its thread count is the
    command's, not this test process's), with the environment asking for 2 threads."""
    env = {**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "testbed_app",
            "check",
            "--claim",
            CHEAP_CLAIM,
            "--results",
            str(results),
            "--quiet",
            *options,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def _recorded_threads(results: Path) -> int:
    return json.loads((results / "metadata.json").read_text())["torch_threads"]


def test_check_computes_on_one_thread_whatever_the_environment_says(tmp_path: Path) -> None:
    done = _check(tmp_path / "default")
    assert done.returncode == 0, done.stderr
    assert _recorded_threads(tmp_path / "default") == CLAIM_THREADS == 1


def test_threads_option_overrides_and_is_recorded(tmp_path: Path) -> None:
    done = _check(tmp_path / "three", "--threads", "3")
    assert done.returncode == 0, done.stderr
    assert _recorded_threads(tmp_path / "three") == 3


def test_threads_with_ray_is_one_clear_line(tmp_path: Path) -> None:
    done = _check(tmp_path / "ray", "--executor", "ray", "--threads", "2")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("testbed: error:")
    assert "--cpus-per-task" in done.stderr
    assert not (tmp_path / "ray").exists()


def _threads_of_worker() -> int:
    return torch.get_num_threads()


def test_local_workers_get_the_chosen_threads() -> None:
    settings = RunSettings(executor=ExecutorSettings("local", jobs=2))
    with make_executor(settings, threads=claim_threads(None)) as executor:
        got = [n for _, n in executor.run([_threads_of_worker] * 2)]
    assert got == [1, 1]


def test_workload_threads_share_the_cores_among_jobs() -> None:
    cores = os.cpu_count() or 1
    assert workload_threads(None, 1) == cores
    assert workload_threads(None, cores * 2) == 1
    assert workload_threads(4, 2) == 4
    assert LocalExecutor(2, workload_threads(3, 2)).threads == 3


def test_settings_refuse_zero_threads() -> None:
    with pytest.raises(ValueError, match="--threads must be >= 1"):
        RunSettings(threads=0)

"""The Ray executor on a two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``):
``testbed check``, ``calibrate``, ``regress`` and ``run`` write the same results files as the
local executor, and a worker killed mid-run (a claim run, an experiment segment) loses nothing.

Run by ``tox -e cluster`` only (it sets ``TESTBED_CLUSTER_TESTS=1`` and runs pytest inside a
network namespace of its own holding only loopback, ``unshare -n``, so every Ray process listens
and talks on 127.0.0.1); skipped everywhere else, and skipped when the namespace has another
interface (Ray would advertise that interface's address).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("TESTBED_CLUSTER_TESTS") != "1":
    pytest.skip(
        "Ray cluster tests: run by tox -e cluster (TESTBED_CLUSTER_TESTS=1)",
        allow_module_level=True,
    )
if {name for _, name in socket.if_nameindex()} != {"lo"}:
    pytest.skip(
        "Ray cluster tests run in a loopback-only network namespace: "
        "unshare -n sh -c 'ip link set lo up; pytest tests/cluster' (as tox -e cluster)",
        allow_module_level=True,
    )
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from testbed_app import cli  # noqa: E402
from tests._segmented_runs import run_files  # noqa: E402
from tests._segmented_runs import write_two_configs  # noqa: E402
from tests.test_executors import CLAIMS  # noqa: E402
from tests.test_executors import results_files  # noqa: E402

pytestmark = pytest.mark.cluster

#: the claims of these tests: the executor tests' ones (variants, a counterexample) and a
#: statistical claim (its Monte Carlo streams come from the claim id, not the worker)
CLUSTER_CLAIMS = (*CLAIMS, "fednest.lemma22.abs_error_as_stated")
CHECK = [
    "check",
    "--profile",
    "fast",
    "--quiet",
    *[arg for claim in CLUSTER_CLAIMS for arg in ("--claim", claim)],
]


def ray_argv(argv: list[str], cluster: Any) -> list[str]:
    """``argv`` run by the Ray executor on ``cluster``."""
    return [*argv, "--executor", "ray", "--address", cluster.address]


def assert_same_files(folder: Path, local: dict[str, bytes]) -> None:
    """The results files under ``folder`` are ``local``'s, name by name."""
    written = results_files(folder)
    assert written.keys() == local.keys()
    for name in local:
        assert written[name] == local[name], name


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head node and a worker node, one CPU each, on 127.0.0.1."""
    two = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1"},
    )
    two.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    two.wait_for_nodes()
    yield two
    two.shutdown()


@pytest.fixture(scope="module")
def local_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("local")
    assert cli.main([*CHECK, "--results", str(folder)]) == 0
    return results_files(folder)


def test_ray_cluster_writes_the_local_executors_results_files(
    cluster: Any, local_results: dict[str, bytes], tmp_path: Path
) -> None:
    assert cli.main(ray_argv([*CHECK, "--results", str(tmp_path)], cluster)) == 0
    assert_same_files(tmp_path, local_results)


def _kill_first_task_worker(killed: list[int], stop: threading.Event) -> None:
    """SIGKILL the first Ray worker process seen running a task (``ray::_ray_call``)."""
    while not stop.is_set():
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                running = b"ray::_ray_call" in cmdline.read_bytes()
            except OSError:
                continue  # the process ended meanwhile
            if running:
                pid = int(cmdline.parent.name)
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.05)


def _with_a_worker_killed(argv: list[str]) -> int:
    """``testbed ARGV`` while the first Ray worker seen running a task is SIGKILLed."""
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_first_task_worker, args=(killed, stop))
    killer.start()
    try:
        status = cli.main(argv)
    finally:
        stop.set()
        killer.join()
    assert killed, "no task worker was seen to kill"
    return status


def test_a_worker_killed_mid_run_loses_nothing(
    cluster: Any, local_results: dict[str, bytes], tmp_path: Path
) -> None:
    status = _with_a_worker_killed(ray_argv([*CHECK, "--results", str(tmp_path)], cluster))
    assert status == 0
    assert_same_files(tmp_path, local_results)


def test_calibration_on_the_cluster_writes_the_local_files(cluster: Any, tmp_path: Path) -> None:
    # the quickest statistical claim, more seeds than nodes (records come back out of order)
    common = [
        "calibrate",
        "--claim",
        "fednest.lemma22.abs_error_per_sample",
        "--seeds",
        "3",
        "--quiet",
        "--profile",
        "fast",
    ]
    assert cli.main([*common, "--results", str(tmp_path / "local")]) in (0, 1)
    assert cli.main(ray_argv([*common, "--results", str(tmp_path / "ray")], cluster)) in (0, 1)
    local, on_ray = results_files(tmp_path / "local"), results_files(tmp_path / "ray")
    assert local and local == on_ray


def test_regress_on_the_cluster_measures_what_the_local_executor_does(
    cluster: Any, tmp_path: Path
) -> None:
    common = ["regress", "--estimator", "lfednest", "--against", "aid-neumann", "--quiet"]
    assert cli.main([*common, "--out", str(tmp_path / "local.json")]) in (0, 1)
    assert cli.main(ray_argv([*common, "--out", str(tmp_path / "ray.json")], cluster)) in (0, 1)
    assert (tmp_path / "local.json").read_bytes() == (tmp_path / "ray.json").read_bytes()


@pytest.fixture(scope="module")
def experiment_configs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two tiny experiment configs of five steps, a checkpoint every two (three segments)."""
    return write_two_configs(tmp_path_factory.mktemp("configs"))


@pytest.fixture(scope="module")
def local_runs(
    experiment_configs: list[str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("local-runs")
    assert cli.main(["run", *experiment_configs, "--quiet", "--results", str(folder)]) == 0
    return run_files(folder)


def test_experiment_configs_on_the_cluster_write_the_local_run_files(
    cluster: Any, experiment_configs: list[str], local_runs: dict[str, bytes], tmp_path: Path
) -> None:
    run = ["run", *experiment_configs, "--quiet", "--results", str(tmp_path)]
    assert cli.main(ray_argv(run, cluster)) == 0
    assert run_files(tmp_path) == local_runs


def test_an_experiment_segment_whose_worker_is_killed_is_rerun(
    cluster: Any, experiment_configs: list[str], local_runs: dict[str, bytes], tmp_path: Path
) -> None:
    run = ["run", *experiment_configs, "--quiet", "--results", str(tmp_path)]
    status = _with_a_worker_killed(ray_argv(run, cluster))
    assert status == 0
    assert run_files(tmp_path) == local_runs

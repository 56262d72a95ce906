"""The two ways to run a deployment, for real: Flower's simulation engine (clients as Ray actors)
and a SuperLink with one SuperNode process per client, started and stopped here, on loopback
only; and a SuperNode killed mid-run.

They need a network namespace holding only loopback (``tox -e flower`` runs pytest inside
``unshare -n``, as the Ray cluster tests do), so every process listens and talks on 127.0.0.1;
elsewhere they skip.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.flower import ONLY_IN_TOX_FLOWER

pytest.importorskip("flwr", reason="tox -e flower installs Flower (the [flower] extra)")

# the network interfaces of this process's namespace (sysfs may show the host's)
LOOPBACK_ONLY = [name for _, name in socket.if_nameindex()] == ["lo"]
pytestmark = [
    ONLY_IN_TOX_FLOWER,
    pytest.mark.skipif(
        not LOOPBACK_ONLY,
        reason="starts Ray / a SuperLink: needs a network namespace holding only "
        "loopback (tox -e flower runs the tests in one, unshare -n)",
    ),
]

from problems import QuadraticBilevel  # noqa: E402
from testbed_app.flower.compare import compare  # noqa: E402
from testbed_app.flower.engines import ISOLATIONS  # noqa: E402
from testbed_app.flower.engines import LocalDeployment  # noqa: E402
from testbed_app.flower.records import read_run  # noqa: E402
from testbed_app.flower.records import run_folder  # noqa: E402
from testbed_app.flower.spec import DeploySpec  # noqa: E402

PROBLEM = QuadraticBilevel.random(3, 3, 4, 10.0, 0.3, seed=1)
# FBO-AggITD with N = 1 (2N + 3 = 5 rounds) on 2 of 3 clients per iteration: every round kind,
# a client set drawn by the server's seeded generator, and few rounds (a round of a local
# deployment takes seconds; tens of seconds where each message starts a ClientApp process)
AGGITD = {"name": "fbo-aggitd", "inner_steps": 1, "outer_step_size": 0.05, "participation": 2}
REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, algorithm: dict, steps: int) -> Path:
    lines = ['name = "deployed"', "[problem]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in PROBLEM.spec().items()]
    lines += ["[algorithm]"] + [f"{key} = {json.dumps(value)}" for key, value in algorithm.items()]
    lines += ["[run]", f"steps = {steps}", "seed = 3"]
    path = tmp_path / "deployed.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _testbed_deploy(
    config: Path, results: Path, *options: str, **run_options: Any
) -> subprocess.CompletedProcess[str]:
    """``testbed deploy CONFIG --results RESULTS OPTIONS`` in a process of its own, its output
    captured (at most 1500 s: Ray and Flower start and stop in it)."""
    return subprocess.run(
        [sys.executable, "-m", "testbed_app", "deploy", str(config), "--results", str(results)]
        + list(options),
        capture_output=True,
        text=True,
        timeout=1500,
        **run_options,
    )


def _deploy(config: Path, results: Path, engine: str) -> dict:
    """``testbed deploy CONFIG --engine ENGINE`` in a process of its own (Ray and Flower start
    and stop there); its run record, after checking the command's verdict."""
    done = _testbed_deploy(config, results, "--engine", engine)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "against the batched simulation: the same" in done.stdout, done.stdout
    name = {"local": "deployment"}.get(engine, engine)
    record, iterates = read_run(run_folder(results, "deployed", name))
    assert record["engine"] == name and record["status"] == "completed"
    # the command's comparison, and this test's own
    comparison = json.loads((run_folder(results, "deployed", name) / "comparison.json").read_text())
    assert comparison["same_numbers"] and comparison["same_counts"]
    spec = DeploySpec.from_json(json.dumps(record["spec"]))
    assert compare(spec, record, iterates)["worst_relative"] <= 1e-12  # float64 round-off
    assert [row["flower"]["exchanges"] for row in record["iterations"]] == [5, 5]
    assert all(row["counts_agree"] for row in record["iterations"])
    return record


def test_testbed_deploy_on_flowers_simulation_engine(tmp_path):
    """Clients as Ray actors (``flwr run`` against a SuperLink in simulation mode), the
    simulation's iterates and counts; every process stopped."""
    results = tmp_path / "results"
    _deploy(_config(tmp_path, AGGITD, steps=2), results, "simulation")
    logs = run_folder(results, "deployed", "simulation") / "logs"
    assert sorted(p.name for p in logs.glob("*.log")) == ["flwr-run.log", "superlink.log"]
    assert not _flower_processes(), "testbed deploy left Flower processes running"


#: What a deprecated or soon-changed API prints: Python's warnings (DeprecationWarning,
#: FutureWarning, PendingDeprecationWarning) and Flower's own "DEPRECATED FEATURE" log line
DEPRECATION = re.compile(
    r"(Pending)?DeprecationWarning|FutureWarning|DEPRECATED FEATURE", re.IGNORECASE
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "config", sorted((REPO / "configs" / "deploy").glob("*.toml")), ids=lambda path: path.stem
)
def test_deploying_a_shipped_config_prints_no_deprecation_or_future_warning(config, tmp_path):
    """Every `testbed deploy` printed Flower's "DEPRECATED FEATURE: The `run_simulation`
    function is deprecated ... use `flwr run`" and Ray's FutureWarning about
    RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO. The command's output and the logs of every process it
    started (the SuperLink's, and `flwr run`'s, which streams the simulation process's output,
    Ray's included) hold no such line."""
    results = tmp_path / "results"
    done = _testbed_deploy(config, results, "--no-compare", cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    logs = sorted(results.glob("deploy/*/simulation/logs/*.log"))
    assert {p.name for p in logs} == {"flwr-run.log", "superlink.log"}
    # the simulation ran in the process whose output flwr-run.log holds
    assert "Starting Flower Simulation" in (logs[0].parent / "flwr-run.log").read_text()
    for name, text in [
        ("output", done.stdout + done.stderr),
        *((p.name, p.read_text()) for p in logs),
    ]:
        found = [line for line in text.splitlines() if DEPRECATION.search(line)]
        assert not found, (config.name, name, found)


def test_testbed_deploy_on_a_local_superlink_and_supernodes(tmp_path):
    """``testbed deploy --engine local``: a SuperLink, 3 SuperNodes and ``flwr run`` as
    separate processes; the iterates and counts of the simulation; every process stopped."""
    results = tmp_path / "results"
    _deploy(_config(tmp_path, AGGITD, steps=2), results, "local")
    logs = run_folder(results, "deployed", "deployment") / "logs"
    assert sorted(p.name for p in logs.glob("supernode-*.log")) == [
        "supernode-0.log",
        "supernode-1.log",
        "supernode-2.log",
    ]
    assert not _flower_processes(), "testbed deploy left Flower processes running"


@pytest.mark.slow
def test_a_long_lived_clientapp_computes_what_a_clientapp_process_per_message_does(tmp_path):
    """A SuperNode in Flower's isolation mode ``process`` with one long-lived ClientApp process
    (``testbed_app.flower.worker``, the server pulling every 0.1 s) against Flower's default,
    a fresh ClientApp process per message and ``Grid.send_and_receive``: the same iterates bit
    for bit and the same counts; every message ran in the long-lived processes."""
    spec = DeploySpec("isolations", {"closed_form": PROBLEM.spec()}, AGGITD, steps=1, seed=3)
    runs = {}
    for isolation in ISOLATIONS:
        results = tmp_path / isolation
        with LocalDeployment(spec.n_clients, results / "logs", isolation=isolation) as deployment:
            record, iterates = read_run(deployment.run(spec, results, wait=1500))
        assert record["status"] == "completed", (isolation, record["status"])
        runs[isolation] = record, iterates
    (before, before_iterates), (after, after_iterates) = runs["subprocess"], runs["process"]
    assert sorted(after_iterates) == sorted(before_iterates)
    for name, values in after_iterates.items():
        assert len(values) == len(before_iterates[name]) == spec.steps + 1
        for value, expected in zip(values, before_iterates[name], strict=True):
            assert torch.equal(value, expected), name
    for row, expected in zip(after["iterations"], before["iterations"], strict=True):
        assert row["ledger"] == expected["ledger"]
        assert row["flower"] == expected["flower"]  # messages, arrays and floats Flower carried
        assert row["counts_agree"] and expected["counts_agree"]
    assert after["client_oracle_calls"] == before["client_oracle_calls"]
    # every message a task of a long-lived process (one log line each): a hello to each of the
    # 3 clients, then the rounds' and the sync's (flower_messages counts them and their replies;
    # 2 clients of 3 per iteration: 2 * (5 + 1) = 12)
    logs = sorted((tmp_path / "process" / "logs").glob("clientapp-*.log"))
    tasks = [line for log in logs for line in log.read_text().splitlines() if "task " in line]
    messages = sum(row["flower"]["flower_messages"] for row in after["iterations"]) // 2
    assert len(logs) == 3 and messages == 12
    assert len(tasks) == 3 + messages and all("completed" in task for task in tasks)
    assert not _flower_processes()


def test_a_killed_supernode_is_reported_with_its_round_and_nothing_written_is_lost(tmp_path):
    spec = DeploySpec(
        "killed",
        {"closed_form": PROBLEM.spec()},
        {"name": "fedmsa", "local_steps": 2},
        steps=20,
        seed=3,
    )
    logs = tmp_path / "logs"
    with LocalDeployment(spec.n_clients, logs) as deployment:
        with deployment.submitted(spec, tmp_path) as run:
            folder = run_folder(tmp_path, spec.name, "deployment")
            deadline = time.monotonic() + 900  # why: a round takes seconds to tens of seconds
            while _iterations(folder) < 1:
                assert run.poll() is None, (logs / "flwr-run.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "no iteration finished in 900 s"
                time.sleep(1.0)
            deployment.kill_supernode(1)
            # Flower declares the node unavailable after 2 missed heartbeats (30 s apart)
            run.wait(timeout=600)
    record, iterates = read_run(folder)
    assert record["status"].startswith("lost: outer iteration"), record["status"]
    lost = record["lost"]
    assert lost["client"] == 1 and "Node Unavailable" in lost["reason"]
    completed = lost["iterations_completed"]
    assert 1 <= completed < spec.steps
    assert [row["iteration"] for row in record["iterations"]] == list(range(1, completed + 1))
    assert all(row["counts_agree"] for row in record["iterations"])
    assert len(iterates["x"]) == completed + 1
    assert f"outer iteration {completed + 1}, round" in lost["round"]
    assert not _flower_processes()


def _iterations(folder: Path) -> int:
    try:
        return len(json.loads((folder / "run.json").read_text())["iterations"])
    except (OSError, ValueError, KeyError):
        return 0


def _flower_processes() -> list[str]:
    """Flower processes still alive, looked for over up to 10 s (a process being stopped takes
    a moment to go). An exited one that its parent has not reaped yet (state Z, ``<defunct>``:
    it runs nothing and holds no resources) is not counted: a ``flwr-serverapp`` was seen so
    right after a killed SuperNode's run (2026-11-26; its parent not established)."""
    names = (
        "flower-superlink",
        "flower-supernode",
        "flwr-serverapp",
        "flwr-clientapp",
        "testbed_app.flower.worker",
    )
    deadline = time.monotonic() + 10.0
    while True:
        out = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
        alive = [
            line.strip()
            for line in out.splitlines()
            if any(name in line for name in names) and not line.strip().startswith("Z")
        ]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)

"""Where a deployed run runs: Flower's simulation engine, or a SuperLink and SuperNodes on this
machine.

- :func:`run_on_simulation`: ``flwr.simulation.run_simulation`` with the testbed's ServerApp and
  ClientApp; the ServerApp runs in this process, the clients as Ray actors (``cpus_per_client``
  CPUs and ``gpus_per_client`` GPUs each: one GPU per actor where asked).
- :class:`LocalDeployment`: ``flower-superlink`` and one ``flower-supernode`` per client, each a
  process of its own on ``127.0.0.1`` (node ``i`` has ``partition-id=i``), and ``flwr run`` of the
  app folder ``testbed_app/flower/app`` against them, exactly as an operator would start them
  (``--insecure``: loopback only). The SuperLink runs the ServerApp in a process of its own and
  each SuperNode runs the ClientApp in a fresh process per message (Flower 1.42's isolation
  mode ``subprocess``). Every process gets its own session, so stopping the deployment stops
  their children too; their logs go to the run folder's ``logs/``.

Both write the run's files under ``<results>/deploy/<name>/<engine>/``
(:mod:`testbed_app.flower.records`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testbed_app.flower import FLOWER_ENV, require_flower
from testbed_app.flower.records import run_folder
from testbed_app.flower.spec import DeploySpec

#: The app folder ``flwr run`` builds a Flower App Bundle from.
APP_DIR = Path(__file__).resolve().parent / "app"
#: The federation name in the temporary Flower configuration of a local deployment.
CONNECTION = "testbed-local"
#: Why 60 s: the SuperLink answers its health endpoint within seconds of starting, even on a
#: loaded 2-core machine (about 3 s measured at load 6).
START_TIMEOUT = 60.0


def run_on_simulation(spec: DeploySpec, results: Path, *, cpus_per_client: float = 1.0,
                      gpus_per_client: float = 0.0, cpus: int | None = None,
                      timeout: float | None = None) -> Path:
    """Run ``spec`` on Flower's simulation engine (Ray actors); the run folder.

    Args:
        cpus_per_client, gpus_per_client: the Ray resources of each ClientApp actor (Flower's
            ``client_resources``); ``gpus_per_client = 1`` gives each actor a GPU.
        cpus: CPUs Ray may use (default: all).
        timeout: seconds the server waits for a round's replies (default: no limit).
    """
    require_flower()
    from flwr.simulation import run_simulation

    from testbed_app.flower.apps import make_client_app, make_server_app

    init_args: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                 "logging_level": "error"}
    if cpus is not None:
        init_args["num_cpus"] = cpus
    if gpus_per_client:
        import torch

        init_args["num_gpus"] = torch.cuda.device_count()
    backend = {"client_resources": {"num_cpus": cpus_per_client, "num_gpus": gpus_per_client},
               "init_args": init_args}
    run_simulation(server_app=make_server_app(spec, results, "simulation", timeout),
                   client_app=make_client_app(spec), num_supernodes=spec.n_clients,
                   backend_config=backend)  # type: ignore[arg-type]
    return run_folder(results, spec.name, "simulation")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _executable(name: str) -> str:
    """A Flower executable of this Python environment (the one running the testbed)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name}: not found beside {sys.executable} or on PATH; "
                                "install Flower into this environment: "
                                "pip install 'hypergradient-testbed[flower]'")
    return found


class LocalDeployment:
    """A SuperLink and ``n_clients`` SuperNodes as separate processes on this machine.

    Use as a context manager: entering starts them (and waits until the SuperLink answers),
    leaving stops every process it started (SIGTERM to each process group, SIGKILL after 10 s).

    Args:
        n_clients: SuperNodes to start; node ``i`` is client ``i`` (``partition-id=i``).
        logs: folder for the processes' output.
        host: the address everything listens on (loopback).
    """

    def __init__(self, n_clients: int, logs: Path, host: str = "127.0.0.1") -> None:
        self.n_clients = n_clients
        self.logs = Path(logs)
        self.host = host
        self.port = 0
        self.home = Path(tempfile.mkdtemp(prefix="testbed-flwr-"))
        self.superlink: subprocess.Popen[bytes] | None = None
        self.supernodes: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, **FLOWER_ENV, "FLWR_HOME": str(self.home),
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                            f"{os.environ.get('PATH', '')}"}

    # ------------------------------------------------------------------ processes
    def __enter__(self) -> LocalDeployment:
        require_flower()
        self.logs.mkdir(parents=True, exist_ok=True)
        try:
            self._start_superlink()
            for client in range(self.n_clients):
                self.supernodes.append(self._start_supernode(client))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, command: list[str], log_name: str) -> subprocess.Popen[bytes]:
        with (self.logs / log_name).open("ab") as log:
            return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                    cwd=self.home, start_new_session=True)

    def _start_superlink(self) -> None:
        self.port = free_port(self.host)
        self.superlink = self._spawn(
            [_executable("flower-superlink"), "--insecure",
             "--disable-runtime-dependency-installation", "--host", self.host,
             "--port", str(self.port)], "superlink.log")
        deadline = time.monotonic() + START_TIMEOUT
        while not self._healthy():
            if self.superlink.poll() is not None:
                raise RuntimeError(f"flower-superlink exited with {self.superlink.returncode}; "
                                   f"see {self.logs / 'superlink.log'}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"flower-superlink did not answer on {self.host}:{self.port} "
                                   f"within {START_TIMEOUT:.0f} s; see "
                                   f"{self.logs / 'superlink.log'}")
            time.sleep(0.2)
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "{self.host}:{self.port}"\ninsecure = true\n')

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/health",
                                        timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _start_supernode(self, client: int) -> subprocess.Popen[bytes]:
        return self._spawn(
            [_executable("flower-supernode"), "--insecure", "--superlink",
             f"{self.host}:{self.port}", "--host", self.host, "--port", str(free_port(self.host)),
             "--node-config", f"partition-id={client} num-partitions={self.n_clients}"],
            f"supernode-{client}.log")

    def kill_supernode(self, client: int) -> None:
        """SIGKILL client ``client``'s SuperNode and everything it started (a crashed node)."""
        _signal_group(self.supernodes[client], signal.SIGKILL)
        self.supernodes[client].wait()

    def stop(self) -> None:
        processes = [*self.supernodes, *([self.superlink] if self.superlink else [])]
        # the ServerApp and ClientApp processes Flower starts in sessions of their own
        spawned = _descendants({process.pid for process in processes})
        for process in processes:
            _signal_group(process, signal.SIGTERM)
        _signal_pids(spawned, signal.SIGTERM)
        deadline = time.monotonic() + 10.0  # why 10 s: Flower's processes exit within ~2 s
        for process in processes:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        for process in processes:  # children left in a group whose leader has exited
            _signal_group(process, signal.SIGKILL)
        while spawned and time.monotonic() < deadline:
            spawned = {pid for pid in spawned if _alive(pid)}
            time.sleep(0.1)
        _signal_pids(spawned, signal.SIGKILL)
        shutil.rmtree(self.home, ignore_errors=True)

    # ------------------------------------------------------------------ runs
    @contextmanager
    def submitted(self, spec: DeploySpec, results: Path,
                  timeout: float | None = None) -> Iterator[subprocess.Popen[bytes]]:
        """``flwr run`` of ``spec`` as a running process (for a caller that acts while the run
        goes on, e.g. a test that stops a SuperNode); stopped on leaving if still running."""
        overrides = self.home / "run-config.toml"
        overrides.write_text(_toml({"spec": spec.to_json(),
                                    "results": str(Path(results).resolve()),
                                    "engine": "deployment", "timeout": float(timeout or 0.0)}))
        process = self._spawn([_executable("flwr"), "run", str(APP_DIR), CONNECTION,
                               "--run-config", str(overrides), "--stream"], "flwr-run.log")
        try:
            yield process
        finally:
            if process.poll() is None:
                _signal_group(process, signal.SIGTERM)
                process.wait()

    def run(self, spec: DeploySpec, results: Path, timeout: float | None = None,
            wait: float | None = None) -> Path:
        """Run ``spec`` to its end (``flwr run ... --stream``); the run folder. ``wait``
        bounds the whole run in seconds (``None``: no bound)."""
        with self.submitted(spec, results, timeout) as process:
            try:
                process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"flwr run did not finish within {wait:.0f} s; see "
                                   f"{self.logs}") from None
        return run_folder(results, spec.name, "deployment")


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_pids(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _descendants(roots: set[int]) -> set[int]:
    """Every live process below ``roots`` (by parent id, /proc), including those Flower starts
    in a session of their own; empty where there is no /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1]
                                           .split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found: set[int] = set()
    frontier = set(roots)
    while frontier:
        children = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= children
        frontier = children
    return found


def _toml(values: dict[str, Any]) -> str:
    import tomli_w

    return tomli_w.dumps(values)


def run_on_local_deployment(spec: DeploySpec, results: Path, timeout: float | None = None,
                            wait: float | None = None) -> Path:
    """Start a local deployment for ``spec``, run it, stop it; the run folder."""
    logs = run_folder(results, spec.name, "deployment") / "logs"
    with LocalDeployment(spec.n_clients, logs) as deployment:
        return deployment.run(spec, results, timeout, wait)


__all__ = ["APP_DIR", "LocalDeployment", "free_port", "run_on_local_deployment",
           "run_on_simulation"]

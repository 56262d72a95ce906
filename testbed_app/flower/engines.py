"""Where a deployed run runs: Flower's simulation engine, or a SuperLink and SuperNodes on this
machine.

- :class:`LocalDeployment`: ``flower-superlink`` and one ``flower-supernode`` per client, each a
  process of its own on ``127.0.0.1`` (node ``i`` has ``partition-id=i``), and ``flwr run`` of the
  app folder ``testbed_app/flower/app`` against them, exactly as an operator would start them
  (``--insecure``: loopback only). The SuperLink runs the ServerApp in a process of its own.
  Each SuperNode runs in Flower's isolation mode ``process`` with one long-lived ClientApp
  process beside it (:mod:`testbed_app.flower.worker`: the imports and the problem once per
  node), and the ServerApp pulls a round's replies every :data:`PULL_INTERVAL` seconds
  (:func:`~testbed_app.flower.transport.exchange`); ``isolation="subprocess"`` is Flower's
  default instead (a fresh ClientApp process per message, and ``Grid.send_and_receive``'s 3 s
  between pulls), kept for comparison (``benchmarks/flower_round.py``). Every process gets its
  own session, so stopping the deployment stops their children too; their logs go to the run
  folder's ``logs/``.
- :class:`LocalSimulation` (:func:`run_on_simulation`): Flower's simulation engine through its
  supported entry point, ``flwr run`` of the same app folder against a SuperLink started with
  ``--simulation``; the SuperLink starts Flower's simulation process, which runs the ServerApp
  and the clients as Ray actors (``cpus_per_client`` CPUs and ``gpus_per_client`` GPUs each:
  one GPU per actor where asked), set by ``flwr run --federation-config``. Flower 1.42 deprecates
  the Python function ``flwr.simulation.run_simulation`` (it printed "DEPRECATED FEATURE ... use
  `flwr run`" on every run).

Both write the run's files under ``<results>/deploy/<name>/<engine>/``, ``<engine>`` being
Flower's name of the engine: ``simulation``, or ``deployment`` for ``--engine local``
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

from testbed_app.flower import FLOWER_ENV
from testbed_app.flower import require_flower
from testbed_app.flower.records import run_folder
from testbed_app.flower.spec import DeploySpec

#: The app folder ``flwr run`` builds a Flower App Bundle from.
APP_DIR = Path(__file__).resolve().parent / "app"
#: The federation name in the temporary Flower configuration of a local deployment.
CONNECTION = "testbed-local"
#: Why 60 s: the SuperLink answers its health endpoint within seconds of starting, even on a
#: loaded 2-core machine (about 3 s measured at load 6).
START_TIMEOUT = 60.0
#: Flower's isolation modes of a SuperNode that :class:`LocalDeployment` starts.
ISOLATIONS = ("process", "subprocess")
#: Seconds between two pulls of a round's replies by the ServerApp of a local deployment in
#: isolation ``process``. Why 0.1 s: Flower's own in-memory grid (the simulation engine's) pulls
#: every 0.1 s; the deployed grid's 3 s would be most of a round.
PULL_INTERVAL = 0.1


def run_on_simulation(
    spec: DeploySpec,
    results: Path,
    *,
    cpus_per_client: int = 1,
    gpus_per_client: float = 0.0,
    cpus: int | None = None,
    timeout: float | None = None,
    wait: float | None = None,
) -> Path:
    """Run ``spec`` on Flower's simulation engine (clients as Ray actors, :class:`LocalSimulation`);
    the run folder.

    Args:
        cpus_per_client, gpus_per_client: the Ray resources of each ClientApp actor (Flower's
            ``client_resources``; whole CPUs, as Flower's simulation config takes them);
            ``gpus_per_client = 1`` gives each actor a GPU.
        cpus: CPUs Ray may use (default: all).
        timeout: seconds the server waits for a round's replies (default: no limit).
        wait: seconds the whole run may take (default: no limit).
    """
    logs = run_folder(results, spec.name, "simulation") / "logs"
    with LocalSimulation(
        spec.n_clients,
        logs,
        cpus_per_client=cpus_per_client,
        gpus_per_client=gpus_per_client,
        cpus=cpus,
    ) as simulation:
        return simulation.run(spec, results, timeout, wait)


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
        raise FileNotFoundError(
            f"{name}: not found beside {sys.executable} or on PATH; "
            "install Flower into this environment: "
            "pip install 'hypergradient-testbed[flower]'"
        )
    return found


class LocalDeployment:
    """A SuperLink and ``n_clients`` SuperNodes as separate processes on this machine.

    Use as a context manager: entering starts them (and waits until the SuperLink answers),
    leaving stops every process it started (SIGTERM to each process group, SIGKILL after 10 s).

    Args:
        n_clients: SuperNodes to start; node ``i`` is client ``i`` (``partition-id=i``).
        logs: folder for the processes' output.
        host: the address everything listens on (loopback).
        isolation: ``"process"`` (default): each SuperNode with ``--isolation process`` and one
            long-lived ClientApp process (:mod:`testbed_app.flower.worker`), the server pulling
            replies every :data:`PULL_INTERVAL` s; ``"subprocess"``: Flower's default, a fresh
            ClientApp process per message and ``Grid.send_and_receive``.
    """

    #: Flower's name of the engine (the run folder's, and the run config's ``engine``)
    engine = "deployment"
    #: options of ``flower-superlink`` beyond the address and the log-free defaults
    superlink_options: tuple[str, ...] = ()

    def __init__(
        self, n_clients: int, logs: Path, host: str = "127.0.0.1", *, isolation: str = "process"
    ) -> None:
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation: one of {', '.join(ISOLATIONS)}, got {isolation!r}")
        self.isolation = isolation
        #: what the run config's ``pull_interval`` says (0: ``Grid.send_and_receive``)
        self.pull_interval = PULL_INTERVAL if isolation == "process" else 0.0
        self.n_clients = n_clients
        self.logs = Path(logs)
        self.host = host
        self.port = 0
        self.home = Path(tempfile.mkdtemp(prefix="testbed-flwr-"))
        self.superlink: subprocess.Popen[bytes] | None = None
        self.supernodes: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []  # isolation "process": ClientApps
        self.env = {
            **os.environ,
            **FLOWER_ENV,
            "FLWR_HOME": str(self.home),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    # ------------------------------------------------------------------ processes
    def __enter__(self) -> LocalDeployment:
        require_flower()
        self.logs.mkdir(parents=True, exist_ok=True)
        try:
            self._start_superlink()
            self._start_clients()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_clients(self) -> None:
        for client in range(self.n_clients):
            api = f"{self.host}:{free_port(self.host)}"
            supernode = self._start_supernode(client, api)
            self.supernodes.append(supernode)
            if self.isolation == "process":
                # it exits when its SuperNode does (--parent-pid), and stop() stops it
                self.workers.append(
                    self._spawn(
                        [
                            sys.executable,
                            "-m",
                            "testbed_app.flower.worker",
                            "--runtime-api-address",
                            api,
                            "--parent-pid",
                            str(supernode.pid),
                        ],
                        f"clientapp-{client}.log",
                    )
                )

    def _spawn(self, command: list[str], log_name: str) -> subprocess.Popen[bytes]:
        with (self.logs / log_name).open("ab") as log:
            return subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.home,
                start_new_session=True,
            )

    def _start_superlink(self) -> None:
        self.port = free_port(self.host)
        self.superlink = self._spawn(
            [
                _executable("flower-superlink"),
                "--insecure",
                "--disable-runtime-dependency-installation",
                *self.superlink_options,
                "--host",
                self.host,
                "--port",
                str(self.port),
            ],
            "superlink.log",
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not self._healthy():
            if self.superlink.poll() is not None:
                raise RuntimeError(
                    f"flower-superlink exited with {self.superlink.returncode}; "
                    f"see {self.logs / 'superlink.log'}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"flower-superlink did not answer on {self.host}:{self.port} "
                    f"within {START_TIMEOUT:.0f} s; see "
                    f"{self.logs / 'superlink.log'}"
                )
            time.sleep(0.2)
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "{self.host}:{self.port}"\ninsecure = true\n'
        )

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://{self.host}:{self.port}/health", timeout=2
            ) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _start_supernode(self, client: int, api: str) -> subprocess.Popen[bytes]:
        """``flower-supernode`` of ``client``, its Runtime API on ``api`` (``HOST:PORT``)."""
        host, port = api.rsplit(":", 1)
        return self._spawn(
            [
                _executable("flower-supernode"),
                "--insecure",
                "--superlink",
                f"{self.host}:{self.port}",
                "--isolation",
                self.isolation,
                "--host",
                host,
                "--port",
                port,
                "--node-config",
                f"partition-id={client} num-partitions={self.n_clients}",
            ],
            f"supernode-{client}.log",
        )

    def kill_supernode(self, client: int) -> None:
        """SIGKILL client ``client``'s SuperNode, everything it started and its ClientApp
        process (a crashed node)."""
        node = [self.supernodes[client], *self.workers[client : client + 1]]
        for process in node:
            _signal_group(process, signal.SIGKILL)
        for process in node:
            process.wait()

    def stop(self) -> None:
        processes = [
            *self.supernodes,
            *self.workers,
            *([self.superlink] if self.superlink else []),
        ]
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
    def submitted(
        self, spec: DeploySpec, results: Path, timeout: float | None = None
    ) -> Iterator[subprocess.Popen[bytes]]:
        """``flwr run`` of ``spec`` as a running process (for a caller that acts while the run
        goes on, e.g. a test that stops a SuperNode); stopped on leaving if still running."""
        overrides = self.home / "run-config.toml"
        overrides.write_text(
            _toml(
                {
                    "spec": spec.to_json(),
                    "results": str(Path(results).resolve()),
                    "engine": self.engine,
                    "timeout": float(timeout or 0.0),
                    "pull_interval": float(self.pull_interval),
                }
            )
        )
        process = self._spawn(
            [
                _executable("flwr"),
                "run",
                str(APP_DIR),
                CONNECTION,
                "--run-config",
                str(overrides),
                *self._federation_options(),
                "--stream",
            ],
            "flwr-run.log",
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                _signal_group(process, signal.SIGTERM)
                process.wait()

    def run(
        self,
        spec: DeploySpec,
        results: Path,
        timeout: float | None = None,
        wait: float | None = None,
    ) -> Path:
        """Run ``spec`` to its end (``flwr run ... --stream``); the run folder. ``wait``
        bounds the whole run in seconds (``None``: no bound)."""
        with self.submitted(spec, results, timeout) as process:
            try:
                process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                raise RuntimeError(
                    f"flwr run did not finish within {wait:.0f} s; see {self.logs}"
                ) from None
        return run_folder(results, spec.name, self.engine)

    def _federation_options(self) -> list[str]:
        """``flwr run``'s options for the federation (none: the SuperNodes are the clients)."""
        return []


class LocalSimulation(LocalDeployment):
    """Flower's simulation engine through ``flwr run``: a SuperLink started with
    ``--simulation`` (no SuperNodes), which runs the ServerApp and ``n_clients`` ClientApps as
    Ray actors in a simulation process of its own. A context manager, as
    :class:`LocalDeployment`.

    Args:
        cpus_per_client, gpus_per_client: each actor's Ray resources (whole CPUs).
        cpus: CPUs Ray may use (default: all).
    """

    engine = "simulation"
    superlink_options = ("--simulation",)

    def __init__(
        self,
        n_clients: int,
        logs: Path,
        host: str = "127.0.0.1",
        *,
        cpus_per_client: int = 1,
        gpus_per_client: float = 0.0,
        cpus: int | None = None,
    ) -> None:
        super().__init__(n_clients, logs, host)
        self.pull_interval = 0.0  # Flower's in-memory grid pulls every 0.1 s itself
        if int(cpus_per_client) != cpus_per_client or cpus_per_client < 1:
            raise ValueError(
                f"--cpus-per-client: whole CPUs on the simulation engine (Flower's "
                f"simulation config takes an integer), got {cpus_per_client}"
            )
        self.federation: dict[str, Any] = {
            "num-supernodes": n_clients,
            "client-resources-num-cpus": int(cpus_per_client),
            "client-resources-num-gpus": float(gpus_per_client),
            "init-args-log-to-driver": False,
            "init-args-logging-level": "error",
        }
        if cpus is not None:
            self.federation["init-args-num-cpus"] = int(cpus)
        if gpus_per_client:
            import torch

            self.federation["init-args-num-gpus"] = torch.cuda.device_count()

    def _start_clients(self) -> None:
        """None to start: the simulation process runs the clients as Ray actors."""

    def _federation_options(self) -> list[str]:
        options = self.home / "federation-config.toml"
        options.write_text(_toml(self.federation))
        return ["--federation-config", str(options)]


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
            parents[int(entry.name)] = int(
                (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            )
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


def run_on_local_deployment(
    spec: DeploySpec,
    results: Path,
    timeout: float | None = None,
    wait: float | None = None,
    isolation: str = "process",
) -> Path:
    """Start a local deployment for ``spec`` (:class:`LocalDeployment`), run it, stop it; the
    run folder."""
    logs = run_folder(results, spec.name, "deployment") / "logs"
    with LocalDeployment(spec.n_clients, logs, isolation=isolation) as deployment:
        return deployment.run(spec, results, timeout, wait)


__all__ = [
    "APP_DIR",
    "ISOLATIONS",
    "PULL_INTERVAL",
    "LocalDeployment",
    "LocalSimulation",
    "free_port",
    "run_on_local_deployment",
    "run_on_simulation",
]

"""A long-lived ClientApp process for a SuperNode started with ``--isolation process``.

Flower 1.42's SuperNode hands each message it pulls to a *task* that its Runtime API (HTTP, on
the SuperNode's ``--host``/``--port``) serves. In the default isolation mode (``subprocess``)
the SuperNode starts ``flower-superexec``, which acquires each task and starts a fresh
``flwr-clientapp --token T`` process for it: one process per message, which imports Python,
Flower, torch and the testbed and builds the problem before it computes a few milliseconds of
client work (on a loaded 2-core machine, seconds to tens of seconds per message). In
``--isolation process`` the SuperNode starts nothing and leaves its tasks to a process outside
it. This module is that process, started once per SuperNode (:class:`~testbed_app.flower.
engines.LocalDeployment` does, ``python -m testbed_app.flower.worker --runtime-api-address
HOST:PORT --parent-pid PID``): a loop that

1. acquires the SuperNode's next ClientApp task (``AcquireTask``, the request
   ``flower-superexec`` makes), every :data:`POLL_INTERVAL` seconds while there is none;
2. runs it in this process as ``flwr-clientapp`` runs it, with Flower's own functions
   (:mod:`flwr.supernode.runtime.run_clientapp`): a task heartbeat, pull the message and the
   ``Context`` (with its ``state``, the client's memory), install the FAB and load the
   ClientApp (once per FAB), call it, push the reply and the context;
3. goes back to 1.

It prints one line per task (``task N: <message type>, <status>, <seconds> s``) to its log.

So the imports happen once per SuperNode, and the problem is built once per process and spec
(:func:`testbed_app.flower.client.problem_of`). What a client computes is unchanged: the
ClientApp gets the same message and the same ``Context`` through the same Runtime API, and its
state goes back to the SuperNode after every message as ``flwr-clientapp`` sends it; a
ClientApp that raises becomes Flower's error reply (``CLIENT_APP_RAISED_EXCEPTION``), as there.
The process exits when its SuperNode does (``--parent-pid``, Flower's parent monitor) or on
SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

# the ClientApp's imports (Flower, torch, the testbed) once, when the process starts; importing
# testbed_app.flower turns Flower's telemetry and update check off first
import testbed_app.flower.apps  # noqa: F401

#: Seconds between two ``AcquireTask`` requests while the SuperNode has no task. Why 0.1 s:
#: Flower's own in-memory grid polls every 0.1 s (its ``pull_interval``); ``flower-superexec``
#: waits 1 s by default (``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``), which a round would add.
POLL_INTERVAL = 0.1


class ClientAppWorker:
    """Acquires a SuperNode's ClientApp tasks and runs each in this process (the module
    docstring). ``runtime_api_address``: the SuperNode's Runtime API, ``HOST:PORT``."""

    def __init__(self, runtime_api_address: str, poll_interval: float = POLL_INTERVAL) -> None:
        from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor
        from flwr.supercore.retry import make_simple_http_retry_invoker
        from flwr.supercore.runtime import RuntimeHttpClient

        self.address = runtime_api_address
        self.poll_interval = poll_interval
        self.apps: dict[str, Any] = {}  # FAB hash -> its loaded ClientApp
        self.tasks = 0
        # the SuperExec's own client: retries while the SuperNode's API is not up yet
        self.client = RuntimeHttpClient.from_server_address(
            server_address=runtime_api_address,
            insecure=True,
            root_certificates=None,
            interceptors=[RuntimeVersionHttpInterceptor(component_name="SuperExec")],
            retry_invoker=make_simple_http_retry_invoker(),
        )

    def acquire(self) -> str | None:
        """The token of the SuperNode's next ClientApp task, or ``None`` when there is none."""
        from flwr.proto.runtime_pb2 import AcquireTaskRequest
        from flwr.supercore.constant import TaskType

        answer = self.client.AcquireTask(
            AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
        )
        if answer.HasField("task") and answer.token:
            return str(answer.token)
        return None

    def serve_forever(self) -> None:
        while True:
            token = self.acquire()
            if token is None:
                time.sleep(self.poll_interval)
                continue
            try:
                self.run_task(token)
            except Exception as error:  # the task is lost (its run stopped): the next one
                print(f"task {self.tasks}: not finished: {type(error).__name__}: {error}")

    def run_task(self, token: str) -> None:
        """Run one task as ``flwr-clientapp --token TOKEN`` would, in this process."""
        from flwr.app import Message
        from flwr.app.error import Error
        from flwr.common.constant import ErrorCode
        from flwr.common.constant import SubStatus
        from flwr.supercore.heartbeat import HeartbeatSender
        from flwr.supercore.heartbeat import make_task_heartbeat_fn_http
        from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor
        from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor
        from flwr.supercore.retry import make_simple_http_retry_invoker
        from flwr.supercore.runtime import RuntimeHttpClient
        from flwr.supernode.runtime.run_clientapp import pull_task_input
        from flwr.supernode.runtime.run_clientapp import push_message
        from flwr.supernode.runtime.run_clientapp import push_task_output

        client = RuntimeHttpClient.from_server_address(
            server_address=self.address,
            insecure=True,
            root_certificates=None,
            interceptors=[
                RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
                RuntimeTokenHttpInterceptor(token),
            ],
            retry_invoker=make_simple_http_retry_invoker(),
        )
        started = time.perf_counter()
        heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))
        heartbeat.start()
        message = reply = context = None
        status, details = SubStatus.FAILED, "ClientApp task failed due to unknown reason"
        try:
            message, context, run, fab = pull_task_input(client)
            app = self.client_app(run, fab)
            reply = app(message=message, context=context)
            status, details = SubStatus.COMPLETED, ""
        except Exception as error:  # as flwr-clientapp: the error goes back as the reply
            code = ErrorCode.CLIENT_APP_RAISED_EXCEPTION
            details = f"{type(error)}:<'{error}'>"
            if message is not None:
                reply = Message(Error(code=code, reason=details), reply_to=message)
        finally:
            try:
                if reply is not None and context is not None:
                    push_message(client, reply, context)
                push_task_output(client=client, context=context, sub_status=status, details=details)
            finally:
                heartbeat.stop()
                client.close()
                self.tasks += 1
                kind = "?" if message is None else message.metadata.message_type
                seconds = time.perf_counter() - started
                print(f"task {self.tasks}: {kind}, {status}, {seconds:.3f} s", flush=True)

    def client_app(self, run: Any, fab: Any) -> Any:
        """The run's ClientApp: its FAB installed and loaded once (``flwr-clientapp`` does both
        for every task)."""
        if fab.hash_str not in self.apps:
            from flwr.cli.install import install_from_fab
            from flwr.clientapp.utils import get_load_client_app_fn

            install_from_fab(fab.content, skip_prompt=True)
            load = get_load_client_app_fn(default_app_ref="", app_path=None, multi_app=True)
            self.apps[fab.hash_str] = load(run.fab_id, run.fab_version, fab.hash_str)
        return self.apps[fab.hash_str]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m testbed_app.flower.worker",
        description="A long-lived ClientApp process for a SuperNode in --isolation process",
    )
    parser.add_argument("--runtime-api-address", required=True, help="the SuperNode's HOST:PORT")
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="exit when this process (the SuperNode) does"
    )
    args = parser.parse_args(argv)
    from flwr.supercore.app_utils import start_parent_process_monitor

    if args.parent_pid is not None:
        start_parent_process_monitor(args.parent_pid)
    try:
        ClientAppWorker(args.runtime_api_address).serve_forever()
    except KeyboardInterrupt:  # SIGINT: the parent monitor's, or Ctrl-C
        pass


if __name__ == "__main__":
    main()

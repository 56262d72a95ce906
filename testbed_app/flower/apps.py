"""The Flower ``ServerApp`` and ``ClientApp`` of a deployed run.

The server (:func:`serve`) is the algorithm's own outer loop with a federated context whose
transport is :class:`~testbed_app.flower.transport.FlowerClients`: ``algorithm.step(ctx, state)``
draws the participants, sends, and aggregates exactly as in the batched simulation, and every
round's client work goes to the clients as Flower messages. The client
(:func:`make_client_app`) answers each message type with :func:`testbed_app.flower.client.handle`,
which runs the same :meth:`~testbed.federation.client_work.ClientWork.run` on its own data.

Message types: ``query.hello`` (once, to learn which SuperNode is which client), then
``train.<work kind>`` for every round (``train.local_iterates``, ``train.ihgp_term``,
``train.hessiv_term``, ``train.msa_global_step``, ...: one per kind of request, handlers
registered with the ClientApp's decorators) and ``query.sync`` at the end of each outer
iteration.

The apps :data:`server_app` / :data:`client_app` read the spec, the results folder and the
engine from the run config (``spec``, ``results``, ``engine``): ``flwr run`` of the app folder
``testbed_app/flower/app`` runs them on both engines (:mod:`testbed_app.flower.engines`).
:func:`make_client_app` with a spec, and :func:`serve`, are the same apps for a grid of one's
own (the tests' in-process grid).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.app import Message
from flwr.app import RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.serverapp import ServerApp

from testbed.federation.client_work import WORK_KINDS
from testbed.federation.context import FederatedContext
from testbed_app.flower.client import handle
from testbed_app.flower.records import RunRecorder
from testbed_app.flower.records import run_folder
from testbed_app.flower.spec import DeploySpec
from testbed_app.flower.transport import REPLY
from testbed_app.flower.transport import ClientLost
from testbed_app.flower.transport import FlowerClients
from testbed_app.flower.transport import exchange

#: How long the server waits for every client's SuperNode to join before it gives up. Why 600 s:
#: a deployment of 100 SuperNodes on a 2-core machine takes a few minutes to start.
JOIN_TIMEOUT = 600.0


def serve(
    grid: Grid,
    spec: DeploySpec,
    results: Path,
    engine: str,
    timeout: float | None = None,
    pull_interval: float | None = None,
) -> None:
    """Run ``spec`` on the clients behind ``grid``, writing the run's files as it goes
    (:mod:`testbed_app.flower.records`); a lost client is recorded and raised again.
    ``pull_interval``: seconds between two pulls of a round's replies
    (:func:`~testbed_app.flower.transport.exchange`; ``None``: ``Grid.send_and_receive``)."""
    problem = spec.build_problem()
    algorithm = spec.build_algorithm()
    algorithm.check_problem(problem)
    formula = algorithm.rounds_formula()
    recorder = RunRecorder(
        run_folder(results, spec.name, engine),
        spec,
        engine,
        None if formula is None else formula.text,
        spec.n_clients,
    )
    try:
        nodes = discover(grid, spec, pull_interval=pull_interval)
        device = problem.initial_point()[0].device
        transport = FlowerClients(grid, nodes, timeout, device, pull_interval)
        ctx = FederatedContext(
            problem,
            np.random.default_rng(spec.seed),
            algorithm.participation,
            None,
            transport=transport,
        )
        state = algorithm.init(problem)
        recorder.start(state)
        for k in range(1, spec.steps + 1):
            transport.begin_iteration(k)
            calls, vectors = ctx.calls(), ctx.ledger.messages
            traffic = transport.traffic.copy()
            started = time.perf_counter()
            state = algorithm.step(ctx, state)
            transport.sync()
            seconds = time.perf_counter() - started
            after = ctx.calls()
            ledger = {
                "rounds": after.comm_rounds - calls.comm_rounds,
                "vectors": ctx.ledger.messages - vectors,
                "floats_up": after.floats_up - calls.floats_up,
                "floats_down": after.floats_down - calls.floats_down,
            }
            expected = None if formula is None else formula.at_iteration(state)
            recorder.iteration(
                k, state, ledger, transport.traffic.minus(traffic), expected, seconds
            )
        recorder.finish(transport.oracle_calls)
    except ClientLost as lost:
        recorder.lost(lost)
        raise
    except BaseException as error:
        recorder.failed(error)
        raise


def discover(
    grid: Grid, spec: DeploySpec, wait: float = JOIN_TIMEOUT, pull_interval: float | None = None
) -> dict[int, int]:
    """The SuperNode of each client ``0..M-1`` (``query.hello``); every client must be there
    once, and no other node."""
    deadline = time.monotonic() + wait
    while len(list(grid.get_node_ids())) < spec.n_clients:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"only {len(list(grid.get_node_ids()))} of {spec.n_clients} "
                f"SuperNodes joined within {wait:.0f} s"
            )
        time.sleep(0.2)
    node_ids = sorted(grid.get_node_ids())
    hello = [
        Message(RecordDict(), dst_node_id=node, message_type="query.hello") for node in node_ids
    ]
    replies = exchange(grid, hello, wait, pull_interval)
    nodes: dict[int, int] = {}
    for reply in replies:
        if reply.has_error():
            raise RuntimeError(f"a SuperNode did not answer hello: {reply.error.reason}")
        answer: Any = reply.content[REPLY]
        client, node = int(answer["client"]), int(reply.metadata.src_node_id)
        if answer["spec"] != spec.name or int(answer["n_clients"]) != spec.n_clients:
            raise RuntimeError(
                f"SuperNode {node} runs {answer['spec']!r} with "
                f"{answer['n_clients']} clients, not {spec.name!r}"
            )
        if client in nodes or not 0 <= client < spec.n_clients:
            raise RuntimeError(
                f"SuperNode {node} says it is client {client}: the partition "
                f"ids must be 0..{spec.n_clients - 1}, each once"
            )
        nodes[client] = node
    if len(nodes) != spec.n_clients:
        raise RuntimeError(f"{len(nodes)} of {spec.n_clients} clients answered hello")
    return nodes


def make_client_app(spec_of: Callable[[Context], DeploySpec] | DeploySpec) -> ClientApp:
    """A ClientApp with a handler for every message type (see the module docstring)."""
    app = ClientApp()

    def respond(message: Message, context: Context) -> Message:
        spec = spec_of if isinstance(spec_of, DeploySpec) else spec_of(context)
        return handle(message, context, spec)

    for kind in WORK_KINDS:
        app.train(kind)(respond)
    app.query("sync")(respond)
    app.query("hello")(respond)
    return app


def _spec_from_run_config(context: Context) -> DeploySpec:
    return DeploySpec.from_json(str(context.run_config["spec"]))


def _serve_from_run_config(grid: Grid, context: Context) -> None:
    config: Any = context.run_config
    timeout = float(config.get("timeout", 0.0)) or None
    serve(
        grid,
        _spec_from_run_config(context),
        Path(str(config["results"])),
        str(config.get("engine", "deployment")),
        timeout,
        float(config.get("pull_interval", 0.0)) or None,
    )


#: For ``flwr run``: the spec, results folder and engine come from the run config.
server_app = ServerApp()
server_app.main()(_serve_from_run_config)
client_app = make_client_app(_spec_from_run_config)

__all__ = ["client_app", "discover", "make_client_app", "serve", "server_app"]

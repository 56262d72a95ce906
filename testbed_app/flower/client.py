"""A deployed client: what a ClientApp does with a message (:func:`handle`).

Client ``i`` (its SuperNode's ``partition-id``) builds the run's problem from the recipe every
party agreed on (:class:`~testbed_app.flower.spec.DeploySpec`) and evaluates only its own row:
its side (:class:`DeployedClient`) gives the work the problem's counted oracles, and the work runs
with ``clients = [i]``. So a client computes exactly what the batched simulation computes for
row ``i`` of its stack, with the same code (:meth:`ClientWork.run`).

Per message it:

1. stores the vectors the message carries in its ``Context.state`` (the client's memory,
   ``held``: the last vector of each name), in the order the ledger recorded them;
2. for a round (``train.<work kind>``), rebuilds the work (:func:`~testbed_app.flower.codec.
   decode_work`) with the vectors it holds, runs it, and replies with its uploads (one array each)
   and its oracle calls; ``query.sync`` only stores, ``query.hello`` says who it is.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

import testbed.registry  # noqa: F401  (imports every algorithm: their client works register)
from problems import Batch
from problems import Problem
from testbed.calls import CallCounter
from testbed.oracles import Oracles
from testbed_app.flower.codec import NotDeployable
from testbed_app.flower.codec import decode_work
from testbed_app.flower.spec import DeploySpec
from testbed_app.flower.transport import DELIVERIES
from testbed_app.flower.transport import REPLY
from testbed_app.flower.transport import UPLOADS
from testbed_app.flower.transport import WORK

HELD = "held"  # the Context.state record of the vectors a client holds


class DeployedClient:
    """One client's side of a round: the problem (its data), counted oracles, and no
    minibatches (deployed runs use exact local objectives, :meth:`DeploySpec.build_algorithm`)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.counter = CallCounter()
        self.oracles = Oracles(problem, self.counter)

    def draw(self, clients: torch.Tensor) -> Batch | None:
        del clients
        return None


@functools.lru_cache(maxsize=2)
def _problem(spec_json: str) -> Any:
    """The run's problem, built once per process (a simulation's actors serve many clients)."""
    return DeploySpec.from_json(spec_json).build_problem()


def problem_of(spec: DeploySpec) -> Any:
    return _problem(spec.to_json())


def handle(message: Any, context: Any, spec: DeploySpec) -> Any:
    """The reply of client ``partition-id`` to ``message`` (see the module docstring)."""
    from flwr.app import Array
    from flwr.app import ArrayRecord
    from flwr.app import ConfigRecord
    from flwr.app import Message
    from flwr.app import RecordDict

    client = int(context.node_config["partition-id"])
    held = dict(context.state[HELD]) if HELD in context.state else {}
    deliveries = message.content[DELIVERIES] if DELIVERIES in message.content else {}
    for key in sorted(deliveries, key=lambda k: int(k.split(":", 1)[0])):
        held[key.split(":", 1)[1]] = deliveries[key]
    context.state[HELD] = ArrayRecord(held)
    kind = message.metadata.message_type
    if kind == "query.sync":
        return Message(RecordDict(), reply_to=message)
    if kind == "query.hello":
        return Message(
            RecordDict(
                {
                    REPLY: ConfigRecord(
                        {"client": client, "spec": spec.name, "n_clients": spec.n_clients}
                    )
                }
            ),
            reply_to=message,
        )
    request = message.content[WORK]
    if int(request["client"]) != client:
        raise NotDeployable(f"a message for client {request['client']} reached client {client}")
    problem = problem_of(spec)
    device = problem.initial_point()[0].device
    vectors = {
        name: torch.from_numpy(array.numpy()).to(device)  # flwr Array: host bytes
        for name, array in held.items()
    }
    work = decode_work(str(request["work"]), vectors)
    side = DeployedClient(problem)
    reply = work.run(side, torch.tensor([client], dtype=torch.long))
    uploads = ArrayRecord(
        {str(j): Array(upload[0].detach().cpu().numpy()) for j, upload in enumerate(reply.uploads)}
    )
    calls = {
        f"calls.{key}": int(value)
        for key, value in side.counter.snapshot().as_dict().items()
        if key in ("grad_f", "grad_g", "hvp", "jvp")
    }
    return Message(
        RecordDict({UPLOADS: uploads, REPLY: ConfigRecord({"client": client, **calls})}),
        reply_to=message,
    )


__all__ = ["DeployedClient", "handle", "problem_of"]

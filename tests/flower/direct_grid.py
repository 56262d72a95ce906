"""An in-process Flower ``Grid`` for tests: the ServerApp's messages reach the ClientApp through
Flower's own serialization (each message deflated to bytes and inflated again, both ways), with
one ``Context`` per SuperNode kept across messages, and no Ray, SuperLink or SuperNode process.

It runs the same ServerApp and ClientApp as the engines (``serve``, ``make_client_app``), so the
tests of numbers and counts can cover every algorithm and participation quickly; the engines'
own tests (``test_engines.py``) run the same apps on Flower's simulation engine and on a local
deployment. A node can be marked lost: its messages then come back with Flower's
``NODE_UNAVAILABLE`` error, as the SuperLink answers for a SuperNode that stopped heartbeating.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from flwr.app import Context
from flwr.app import Error
from flwr.app import Message
from flwr.app import RecordDict
from flwr.serverapp import Grid
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
from flwr.supercore.task_identity import TaskIdentity

NODE_UNAVAILABLE = 5  # flwr.common.constant.ErrorCode.NODE_UNAVAILABLE


def through_the_wire(message: Message) -> Message:
    """``message`` deflated to bytes and inflated back (what a SuperLink stores and serves)."""
    contents = {oid: obj.deflate() for oid, obj in get_all_nested_objects(message).items()}
    copy = inflate_object_from_contents(message.object_id, contents)
    copy.metadata.__dict__["_message_id"] = message.metadata.message_id
    return copy  # type: ignore[return-value]


class DirectGrid(Grid):
    """SuperNodes ``1000 + i`` with ``partition-id = i`` for ``i < n_nodes``, answering through
    ``client_app`` in this process."""

    def __init__(self, client_app: Any, n_nodes: int) -> None:
        # what Flower's ServerApp runtime sets for its process: messages carry the run's id
        TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1
        self.client_app = client_app
        self.contexts = {
            1000 + i: Context(
                run_id=1,
                node_id=1000 + i,
                node_config={"partition-id": i, "num-partitions": n_nodes},
                state=RecordDict(),
                run_config={},
            )
            for i in range(n_nodes)
        }
        self.lost: set[int] = set()
        #: (node, n): the node is lost once it has answered n messages (a SuperNode stopped
        #: mid-run)
        self.lose_after: tuple[int, int] | None = None
        self.delivered: list[Message] = []  # every instruction, as a client received it

    def set_run(self, run: Any) -> None:
        self._run = run

    @property
    def run(self) -> Any:
        return self._run

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        return Message(
            content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id
        )

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise NotImplementedError("DirectGrid answers in send_and_receive")

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        raise NotImplementedError("DirectGrid answers in send_and_receive")

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        replies = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            node = message.metadata.dst_node_id
            if self.lose_after is not None and self.lose_after[0] == node:
                answered = sum(m.metadata.dst_node_id == node for m in self.delivered)
                if answered >= self.lose_after[1]:
                    self.lost.add(node)
            if node in self.lost:
                replies.append(
                    Message(Error(NODE_UNAVAILABLE, "Error: Node Unavailable"), reply_to=message)
                )
                continue
            received = through_the_wire(message)
            self.delivered.append(received)
            reply = self.client_app(received, self.contexts[node])
            replies.append(through_the_wire(reply))
        return replies


def run_direct(spec: Any, results: Any, grid: DirectGrid | None = None) -> tuple[Any, Any, Any]:
    """Run ``spec`` through the testbed's ServerApp on a :class:`DirectGrid`; ``(run.json,
    iterates, grid)``. A lost client's ``ClientLost`` propagates after the files are written."""
    from testbed_app.flower.apps import make_client_app
    from testbed_app.flower.apps import serve
    from testbed_app.flower.records import read_run
    from testbed_app.flower.records import run_folder

    grid = grid or DirectGrid(make_client_app(spec), spec.n_clients)
    try:
        serve(grid, spec, results, "direct")
    finally:
        record, iterates = read_run(run_folder(results, spec.name, "direct"))
    return record, iterates, grid


def carried_floats(grid: DirectGrid) -> int:
    """Floats in the arrays of every message the clients received (the grid's own count,
    independent of the server's tally)."""
    total = 0
    for message in grid.delivered:
        if "deliveries" in message.content:
            total += sum(
                int(array.numpy().size) for array in message.content["deliveries"].values()
            )
    return total

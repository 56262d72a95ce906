"""The server's side of a Flower deployment: a client transport whose clients are SuperNodes.

:class:`FlowerClients` is a :class:`~testbed.federation.client_work.ClientTransport`. Run by the
ServerApp, the algorithm's own ``step`` drives it through the federated context:

- every vector the ledger records as sent to a client (a send, a broadcast, the mean an
  aggregation sends back) is queued for that client under its name, and the server remembers
  what each client holds;
- a round's work (:meth:`FlowerClients.run`) is one exchange (:func:`exchange`: push the
  messages, pull until every reply is there, as ``Grid.send_and_receive``): each participating
  client gets one message of type ``train.<work kind>`` carrying the vectors queued for it
  (an ``ArrayRecord``, one array per ledger message) and the work's description (a
  ``ConfigRecord``: settings, and the names of the vectors it uses,
  :mod:`testbed_app.flower.codec`); its reply carries its uploads, one array per payload;
- an aggregation must average uploads that came back from the clients
  (:meth:`FlowerClients.aggregated` refuses anything else: client work that ran on the server
  would be a simulation, not a deployment);
- at the end of an outer iteration, :meth:`FlowerClients.sync` carries what is still queued
  (the means of the iteration's last round) in ``query.sync`` messages, so the floats Flower
  carried in an iteration are the ledger's of that iteration.

:class:`Traffic` counts what Flower carried: exchanges (a round's push and pulls), messages
both ways, arrays and floats both ways, and the seconds spent in exchanges. A reply with an
error (Flower's ``NODE_UNAVAILABLE`` when a SuperNode stopped sending heartbeats, or an
exception in a ClientApp) or no reply raises :class:`ClientLost` naming the round and the client.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientSide
from testbed.federation.client_work import ClientWork
from testbed_app.flower.codec import NotDeployable
from testbed_app.flower.codec import encode_work

#: Keys of the records a message carries.
DELIVERIES = "deliveries"  # ArrayRecord: "<order>:<name>" -> the vector, in ledger order
WORK = "work"  # ConfigRecord: work (JSON), client, round
UPLOADS = "uploads"  # ArrayRecord of a reply: "<j>" -> upload j of this client
REPLY = "reply"  # ConfigRecord of a reply: client, oracle calls


class ClientLost(RuntimeError):
    """A client did not answer a round: its SuperNode is gone, or its ClientApp failed.

    Attributes:
        round_label: which round (iteration, round number, work kind).
        client: the client's index (its partition id); ``node``: its SuperNode id.
        reason: Flower's error (code and reason) or "no reply within T s".
    """

    def __init__(self, round_label: str, client: int, node: int, reason: str) -> None:
        self.round_label, self.client, self.node, self.reason = round_label, client, node, reason
        super().__init__(f"{round_label}: client {client} (SuperNode {node}) was lost: {reason}")


@dataclasses.dataclass
class Traffic:
    """What Flower carried (cumulative; :meth:`minus` gives one iteration's share)."""

    exchanges: int = 0  # exchanges that carried a round's work
    syncs: int = 0  # exchanges that carried only queued vectors
    messages: int = 0  # Flower messages: instructions and replies
    vectors_down: int = 0  # arrays carried to clients (one per ledger message down)
    vectors_up: int = 0  # arrays carried back (one per upload)
    floats_down: int = 0
    floats_up: int = 0
    seconds_exchanges: float = 0.0
    seconds_syncs: float = 0.0

    def minus(self, before: Traffic) -> Traffic:
        return Traffic(
            **{
                field.name: getattr(self, field.name) - getattr(before, field.name)
                for field in dataclasses.fields(self)
            }
        )

    def copy(self) -> Traffic:
        return dataclasses.replace(self)


@dataclasses.dataclass
class _Held:
    """The server's note of a vector a client holds: the tensor and its version when sent (a
    tensor changed in place afterwards is not what the client got)."""

    value: torch.Tensor
    version: int


class FlowerClients:
    """The deployed clients of one run, reached through a Flower ``Grid``.

    Args:
        grid: the ServerApp's grid.
        nodes: the SuperNode id of each client index (client i is partition ``i``).
        timeout: seconds to wait for a round's replies (``None``: as long as Flower keeps the
            messages; a stopped SuperNode then comes back as Flower's ``NODE_UNAVAILABLE``).
        device: where the server's iterates live (the uploads are moved there).
        pull_interval: seconds between two pulls of a round's replies (:func:`exchange`;
            ``None``: Flower's ``Grid.send_and_receive`` and its own wait).
    """

    def __init__(
        self,
        grid: Any,
        nodes: Mapping[int, int],
        timeout: float | None = None,
        device: torch.device | str = "cpu",
        pull_interval: float | None = None,
    ) -> None:
        self.grid = grid
        self.pull_interval = pull_interval
        self.nodes = dict(nodes)
        self.timeout = timeout
        self.device = torch.device(device)
        self.traffic = Traffic()
        self.iteration = 0
        self.round = 0
        self.oracle_calls: dict[str, int] = {}
        self._queued: dict[int, list[tuple[str, torch.Tensor]]] = {}
        self._held: dict[int, dict[str, _Held]] = {}
        self._uploaded: list[torch.Tensor] = []

    # ------------------------------------------------------------------ the ledger's vectors
    def sent(self, name: str | None, value: torch.Tensor, clients: torch.Tensor) -> None:
        self._queue(name, value, clients)

    def aggregated(
        self, name: str | None, uploads: torch.Tensor, mean: torch.Tensor, clients: torch.Tensor
    ) -> None:
        if not any(uploads is returned for returned in self._uploaded):
            raise NotDeployable(
                f"{self._label('')}: the server averaged values no client uploaded, so client "
                "work ran on the server (an algorithm step that calls the oracles itself "
                "instead of ctx.run_clients); such a step cannot be deployed"
            )
        self._queue(name, mean, clients)

    def _queue(self, name: str | None, value: torch.Tensor, clients: torch.Tensor) -> None:
        if name is None:
            raise NotDeployable(
                f"{self._label('')}: a vector sent without a name (every "
                "send and aggregation of a deployed algorithm names what it "
                "sends, e.g. ctx.send(x, clients, 'x'))"
            )
        value = value.detach()
        for client in clients.tolist():
            self._queued.setdefault(client, []).append((name, value))
            self._held.setdefault(client, {})[name] = _Held(value, value._version)

    # ------------------------------------------------------------------ rounds
    def run(self, side: ClientSide, work: ClientWork, clients: torch.Tensor) -> ClientReply:
        """One round of ``work`` on ``clients``: one message each, their uploads stacked in
        the order of ``clients`` (``side``, the server's context, is not used: the clients
        compute)."""
        del side
        self.round += 1
        label = self._label(work.kind)
        ids = [int(c) for c in clients.tolist()]
        messages = []
        for client in ids:
            text = encode_work(work, functools.partial(self._resolve, client=client, label=label))
            messages.append(
                self._message(client, f"train.{work.kind}", {"work": text, "round": self.round})
            )
        started = time.perf_counter()
        replies = self._exchange(messages, ids, label)
        self.traffic.seconds_exchanges += time.perf_counter() - started
        self.traffic.exchanges += 1
        uploads = self._stack(replies, ids, label)
        self._uploaded = list(uploads)
        return ClientReply(uploads)

    def sync(self) -> None:
        """Carry every queued vector to its client (``query.sync``; the reply is empty)."""
        ids = sorted(client for client, queue in self._queued.items() if queue)
        if not ids:
            return
        label = self._label("sync")
        messages = [self._message(client, "query.sync", {}) for client in ids]
        started = time.perf_counter()
        self._exchange(messages, ids, label)
        self.traffic.seconds_syncs += time.perf_counter() - started
        self.traffic.syncs += 1

    def begin_iteration(self, iteration: int) -> None:
        self.iteration, self.round = iteration, 0

    # ------------------------------------------------------------------ pieces
    def _label(self, kind: str) -> str:
        what = f" ({kind})" if kind else ""
        return f"outer iteration {self.iteration}, round {self.round}{what}"

    def _resolve(self, tensor: torch.Tensor, client: int, label: str) -> str:
        """The name under which ``client`` holds ``tensor`` (the same tensor, or an equal one)."""
        held = self._held.get(client, {})
        for name, note in held.items():
            if note.value is tensor or (
                note.value.shape == tensor.shape
                and note.value.dtype == tensor.dtype
                and note.value.device == tensor.device
                and bool(torch.equal(note.value, tensor.detach()))
            ):
                if note.value._version != note.version:
                    raise NotDeployable(
                        f"{label}: the vector {name!r} sent to client {client} "
                        "was changed in place after it was sent"
                    )
                return name
        raise NotDeployable(
            f"{label}: the work uses a vector of shape {tuple(tensor.shape)} "
            f"that client {client} was never sent (it holds {sorted(held)}); "
            "every vector a client uses must go through ctx.send, "
            "ctx.broadcast or the mean of ctx.aggregate"
        )

    def _message(self, client: int, message_type: str, config: dict[str, Any]) -> Any:
        from flwr.app import Array
        from flwr.app import ArrayRecord
        from flwr.app import ConfigRecord
        from flwr.app import Message
        from flwr.app import RecordDict

        queued = self._queued.pop(client, [])
        arrays = {
            f"{order}:{name}": Array(value.cpu().numpy())
            for order, (name, value) in enumerate(queued)
        }
        self.traffic.vectors_down += len(queued)
        self.traffic.floats_down += sum(int(value.numel()) for _, value in queued)
        content = RecordDict(
            {DELIVERIES: ArrayRecord(arrays), WORK: ConfigRecord({"client": client, **config})}
        )
        return Message(
            content,
            dst_node_id=self.nodes[client],
            message_type=message_type,
            group_id=f"{self.iteration}.{self.round}",
        )

    def _exchange(self, messages: list[Any], ids: list[int], label: str) -> dict[int, Any]:
        """Send, wait for every reply, and return them by client; a client without a reply or
        with an error reply raises :class:`ClientLost`."""
        replies = exchange(self.grid, messages, self.timeout, self.pull_interval)
        self.traffic.messages += len(messages) + len(replies)
        client_of = {self.nodes[client]: client for client in ids}
        by_client: dict[int, Any] = {}
        for reply in replies:
            node = int(reply.metadata.src_node_id)
            if reply.has_error():
                # an error reply of the SuperLink (NODE_UNAVAILABLE) comes from node 1; find the
                # client by the message it answers
                client = self._client_of_reply(reply, messages, ids)
                error = reply.error
                raise ClientLost(
                    label, client, self.nodes[client], f"Flower error {error.code}: {error.reason}"
                )
            if node not in client_of:
                raise ClientLost(label, -1, node, "a reply from a SuperNode that was not asked")
            by_client[client_of[node]] = reply
        for client in ids:
            if client not in by_client:
                raise ClientLost(
                    label, client, self.nodes[client], f"no reply within {self.timeout} s"
                )
        return by_client

    def _client_of_reply(self, reply: Any, messages: list[Any], ids: list[int]) -> int:
        answered = reply.metadata.reply_to_message_id
        for client, message in zip(ids, messages, strict=True):
            if message.metadata.message_id == answered:
                return client
        node = int(reply.metadata.src_node_id)
        client_of = {self.nodes[client]: client for client in ids}
        return client_of.get(node, -1)

    def _stack(
        self, replies: Mapping[int, Any], ids: Iterable[int], label: str
    ) -> tuple[torch.Tensor, ...]:
        rows: list[list[np.ndarray]] = []
        for client in ids:
            content = replies[client].content
            record = content[UPLOADS]
            uploads = [record[str(j)].numpy() for j in range(len(record))]  # flwr Array: host bytes
            if rows and len(uploads) != len(rows[0]):
                raise ClientLost(
                    label,
                    client,
                    self.nodes[client],
                    f"{len(uploads)} uploads where the others sent {len(rows[0])}",
                )
            rows.append(uploads)
            self.traffic.vectors_up += len(uploads)
            self.traffic.floats_up += sum(int(u.size) for u in uploads)
            for key, count in content[REPLY].items():
                if key.startswith("calls."):
                    self.oracle_calls[key[6:]] = self.oracle_calls.get(key[6:], 0) + int(count)
        return tuple(
            torch.from_numpy(np.stack([row[j] for row in rows])).to(self.device)
            for j in range(len(rows[0]))
        )


def exchange(
    grid: Any, messages: list[Any], timeout: float | None, pull_interval: float | None
) -> list[Any]:
    """Push ``messages`` and pull their replies until every one is there or ``timeout`` seconds
    have passed (``None``: no limit): what ``Grid.send_and_receive`` does, with a pull every
    ``pull_interval`` seconds. Flower 1.42's grid of a deployed ServerApp (its ``HttpGrid``)
    waits 3 s between two pulls, hard-coded in its ``send_and_receive``, so each round there
    costs up to 3 s more than its clients' work; ``push_messages`` and ``pull_messages`` are the
    same ``Grid``'s public methods, and the replies and their order of arrival are Flower's.
    ``pull_interval=None`` calls ``send_and_receive`` itself (a grid that has only that, as
    the tests' in-process grid)."""
    if pull_interval is None:
        return list(grid.send_and_receive(messages, timeout=timeout))
    waiting = set(grid.push_messages(messages))
    deadline = None if timeout is None else time.monotonic() + timeout
    replies: list[Any] = []
    while deadline is None or time.monotonic() < deadline:
        pulled = list(grid.pull_messages(waiting))
        replies.extend(pulled)
        waiting.difference_update(reply.metadata.reply_to_message_id for reply in pulled)
        if not waiting:
            break
        time.sleep(pull_interval)
    return replies


__all__ = ["ClientLost", "FlowerClients", "Traffic", "exchange"]

"""The communication ledger: the one place every message between server and clients passes.

A *round* is one aggregation: each participating client uploads a payload, the server averages
the payloads and broadcasts the average back. FedNest counts "2T + N + 3 rounds" in exactly this
unit (its Sec. 2.6), AggITD its Table 1, FedMSA "2 communications per round".

The ledger keeps, per client, the floats it sent up and received down, the number of messages, and
the set of payload sizes seen, so a test can audit that no Hessian-sized message was ever sent.

Recording a message costs O(1): the per-client tallies are accumulated per client set (the
participation sampler hands out one tensor per round, and the same shared tensor under full
participation) and scattered into :attr:`Ledger.floats_up` / :attr:`Ledger.floats_down` when
those are read. A client set's indices are range-checked the first time it is seen, so no
aggregation copies indices to the host or synchronises a device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from testbed.calls import CallCounter

# Why 256: pending client sets are scattered into the per-client arrays once this many distinct
# sets (rounds of partial participation) have accumulated, so the pending list stays small.
_FLUSH_AFTER = 256


class Ledger:
    """Counts rounds, messages and floats for ``n_clients`` clients.

    Args:
        n_clients: M.
        counter: optional shared :class:`CallCounter` that also receives ``comm_rounds``,
            ``floats_up`` and ``floats_down``, so an estimate's cost record includes communication.
    """

    def __init__(self, n_clients: int, counter: CallCounter | None = None) -> None:
        if n_clients < 1:
            raise ValueError(f"Ledger needs at least one client, got {n_clients}")
        self.n_clients = n_clients
        self.counter = counter
        self.rounds = 0
        self.messages = 0
        self._floats_up = np.zeros(n_clients, dtype=np.int64)
        self._floats_down = np.zeros(n_clients, dtype=np.int64)
        self.payload_sizes: set[int] = set()
        # id(clients) -> [clients, version, floats up per client, floats down per client]
        self._pending: dict[int, list] = {}

    # ----------------------------------------------------------------------- tallies
    def _flush(self) -> None:
        for clients, _, up, down in self._pending.values():
            index = clients.detach().cpu().numpy()
            if up:
                np.add.at(self._floats_up, index, up)
            if down:
                np.add.at(self._floats_down, index, down)
        self._pending.clear()

    @property
    def floats_up(self) -> np.ndarray:
        """Floats each client has sent (``(M,)`` int64; the ledger's own array)."""
        self._flush()
        return self._floats_up

    @property
    def floats_down(self) -> np.ndarray:
        """Floats each client has received (``(M,)`` int64; the ledger's own array)."""
        self._flush()
        return self._floats_down

    def _record(self, clients: torch.Tensor, size: int, up: bool) -> None:
        count = int(clients.shape[0])
        entry = self._pending.get(id(clients))
        if entry is None or entry[0] is not clients or entry[1] != clients._version:
            if entry is not None:  # same id, another (or a modified) tensor: settle the old one
                self._flush()
            if count and clients.is_floating_point():
                raise ValueError("client indices must be integers")
            if count and (int(clients.min()) < 0 or int(clients.max()) >= self.n_clients):
                raise ValueError(f"client index out of range [0, {self.n_clients})")
            if len(self._pending) >= _FLUSH_AFTER:
                self._flush()
            entry = self._pending[id(clients)] = [clients, clients._version, 0, 0]
        entry[2 if up else 3] += size
        self.messages += count
        self.payload_sizes.add(size)
        if self.counter is not None:
            self.counter.add("floats_up" if up else "floats_down", size * count)

    # ----------------------------------------------------------------------- messages
    def send(self, value: torch.Tensor, clients: torch.Tensor) -> None:
        """Record that the server sends ``value`` to every client in ``clients`` (the broadcast
        of :meth:`broadcast`, for callers that already hold the value)."""
        self._record(clients, int(value.numel()), up=False)

    def broadcast(self, value: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """Server sends ``value`` to every client in ``clients``; returns one copy per client.

        A broadcast on its own is not a round (it is the second half of the round that produced
        ``value``, or the initial distribution of the model).
        """
        self._record(clients, int(value.numel()), up=False)
        return value.detach().expand(int(clients.shape[0]), *value.shape).clone()

    def aggregate_in_round(self, uploads: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """A second payload averaged inside the round already being held (no new round).

        For messages that ride on another aggregation (AggITD's ``z_i^t`` travels with
        ``q_i^t``, Table 1): each client's upload and the broadcast of the mean are recorded as
        messages, but the round count does not change.
        """
        count = int(clients.shape[0])
        if count == 0 or int(uploads.shape[0]) != count:
            raise ValueError(
                f"{uploads.shape[0]} uploads for {count} clients: one payload per "
                "client, at least one client"
            )
        size = int(uploads[0].numel())
        self._record(clients, size, up=True)
        mean = uploads.mean(dim=0)
        self._record(clients, size, up=False)
        return mean

    def aggregate(
        self, uploads: torch.Tensor, clients: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One round: clients upload ``uploads[c]``, the server averages and broadcasts the mean.

        Args:
            uploads: ``(C, ...)`` payload of each participating client.
            clients: ``(C,)`` their indices.
            weights: optional ``(C,)`` averaging weights summing to one (uniform by default).

        Returns:
            The average payload, shape ``uploads.shape[1:]``.
        """
        count = int(clients.shape[0])
        if count == 0:
            raise ValueError("a round needs at least one participating client")
        if int(uploads.shape[0]) != count:
            raise ValueError(
                f"{uploads.shape[0]} uploads for {count} clients: one payload per client"
            )
        size = int(uploads[0].numel())
        self._record(clients, size, up=True)
        if weights is None:
            mean = uploads.mean(dim=0)
        else:
            mean = torch.tensordot(weights.to(uploads.dtype), uploads, dims=1)
        self._record(clients, size, up=False)
        self.rounds += 1
        if self.counter is not None:
            self.counter.add("comm_rounds", 1)
        return mean

    @property
    def total_floats(self) -> int:
        return int(self.floats_up.sum() + self.floats_down.sum())

    @property
    def largest_payload(self) -> int:
        return max(self.payload_sizes, default=0)

    # ----------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """The counts as plain data (a checkpoint's): ``rounds``, ``messages``, ``floats_up``
        and ``floats_down`` (copies of the per-client arrays) and ``payload_sizes`` (sorted)."""
        return {
            "rounds": self.rounds,
            "messages": self.messages,
            "floats_up": self.floats_up.copy(),
            "floats_down": self.floats_down.copy(),
            "payload_sizes": sorted(self.payload_sizes),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Set the counts to :meth:`state_dict`'s output (the shared counter, if any, is not
        touched: it is restored with the rest of the run's calls)."""
        self._pending.clear()
        self.rounds, self.messages = int(state["rounds"]), int(state["messages"])
        self._floats_up[:] = state["floats_up"]
        self._floats_down[:] = state["floats_down"]
        self.payload_sizes = {int(size) for size in state["payload_sizes"]}

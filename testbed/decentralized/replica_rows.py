"""The rows of a replicated decentralized run, in the order the vectors lie in memory.

HGP's replicated run (:meth:`testbed.decentralized.hgp.HyperGradientPush.run` with
``replicas=R``) holds each client's vector of every replica, ``(R, n, d)``, and evaluates them
as ``R n`` rows of one oracle call. Two orders of those rows occur:

- **replica-major**, row ``r n + i`` (replica ``r``, client ``i``): the order of a contiguous
  ``(R, n, d)`` tensor, and the order every draw is made in (a replica's rows are one block of
  each draw, :class:`~testbed.federation.replicates.StackedGenerator`);
- **client-major**, row ``i R + r``: the order Push-Sum's row form leaves its output in (each
  client's row of every replica side by side, :func:`~testbed.decentralized.ledger.
  mix_beside_shared_column`), a ``(R, n, d)`` view of an ``(n, R, d)`` array.

Evaluating the rows in the order the vectors already lie in spares a transposing copy before
the products and after them, and lets the next Push-Sum read its rows in place (on one CPU
thread, a copy between the two layouts of 18,352 replicas of 4 clients x 3 floats took 0.8
ms, a Push-Sum quotient written across them 1.1 ms against 0.19 ms in place). The oracles
work row by row, so each row's numbers are the same in either order; the draws are made in
replica-major order and their rows then moved to the evaluation's order (:meth:`ReplicaRows.
batch`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import torch

from problems import Batch

Order = Literal["replica", "client"]


def order_of(vectors: torch.Tensor) -> Order:
    """``"client"`` where ``vectors (R, n, d)`` is a view of a contiguous ``(n, R, d)`` array
    (and not itself contiguous), else ``"replica"`` (the order a reshape to rows gives)."""
    if (
        vectors.ndim == 3
        and not vectors.is_contiguous()
        and vectors.transpose(0, 1).is_contiguous()
    ):
        return "client"
    return "replica"


@dataclasses.dataclass
class ReplicaRows:
    """The ``replicas x n_clients`` rows of a replicated run in either order (module docstring).

    Args:
        n_clients: n.
        replicas: R.
    """

    n_clients: int
    replicas: int

    @functools.cached_property
    def _replica_clients(self) -> torch.Tensor:
        return torch.arange(self.n_clients).repeat(self.replicas)

    @functools.cached_property
    def _client_clients(self) -> torch.Tensor:
        return torch.arange(self.n_clients).repeat_interleave(self.replicas)

    def clients(self, order: Order) -> torch.Tensor:
        """Each row's client, ``(R n,)``."""
        return self._replica_clients if order == "replica" else self._client_clients

    def rows(self, vectors: torch.Tensor, order: Order) -> torch.Tensor:
        """``vectors (R, n, d)`` as ``(R n, d)`` rows in ``order`` (a view where the vectors lie
        in that order)."""
        if order == "replica":
            return vectors.reshape(self.replicas * self.n_clients, -1)
        return vectors.transpose(0, 1).reshape(self.replicas * self.n_clients, -1)

    def vectors(self, rows: torch.Tensor, order: Order) -> torch.Tensor:
        """``rows (R n, d)`` in ``order`` as the ``(R, n, d)`` vectors (a view)."""
        R, n = self.replicas, self.n_clients
        if order == "replica":
            return rows.reshape(R, n, -1)
        return rows.reshape(n, R, -1).transpose(0, 1)

    def per_client(self, values: torch.Tensor, order: Order) -> torch.Tensor:
        """Per-client ``values (n, ...)`` repeated for every replica, as rows in ``order``."""
        return values.index_select(0, self.clients(order).to(values.device))

    def batch(self, drawn: Batch | None, order: Order) -> Batch | None:
        """A minibatch drawn for the replica-major rows (:meth:`clients` ``("replica")``), its
        rows moved to ``order``."""
        if drawn is None or order == "replica":
            return drawn
        # the indices as a replica's vectors of b values, moved as rows are (a copy by blocks of
        # b, 4x faster than a gather of the rows at b = 1)
        indices = drawn.indices.reshape(self.replicas, self.n_clients, -1)
        return Batch(self.rows(indices, order))


__all__ = ["Order", "ReplicaRows", "order_of"]

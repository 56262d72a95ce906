"""The graph ledger: the one place every message between decentralized clients passes.

In HGP (Alg. 1, Alg. 2) and SGP the only communication is gossip: at each step every client j
sends ``(z_j / |N_j^out|, omega_j / |N_j^out|)`` to each out-neighbour, a ``d + 1``-float message
per edge (``d`` = the shared model's dimension, the paper's d_x). :meth:`GraphLedger.transmit`
performs that step (the weighted sum ``A @ payload``) and counts, per client and per edge, the
messages and floats. Self-loops are not communication and are not counted.

A test audits the ledger: payload sizes are exactly ``{d_y + 1}``, so no Hessian (d^2 floats)
and no hyperparameter-sized vector (``v_i``) ever leaves a client.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from testbed.calls import CallCounter
from testbed.decentralized.mixing import check_column_stochastic


@dataclasses.dataclass(eq=False)
class GraphLedger:
    """Counts gossip steps, messages and floats for ``n_clients`` clients.

    Args:
        n_clients: n.
        counter: optional :class:`CallCounter`; receives ``comm_rounds`` (one per gossip step)
            and ``floats_up`` (floats sent along edges), so an estimate's cost record includes
            communication.
        validate: check that every mixing matrix is column-stochastic before using it.
    """

    n_clients: int
    counter: CallCounter | None = None
    validate: bool = True

    def __post_init__(self) -> None:
        n = self.n_clients
        if n < 1:
            raise ValueError(f"GraphLedger needs at least one client, got {n}")
        self.steps = 0
        self.messages_sent = np.zeros(n, dtype=np.int64)
        self.floats_sent = np.zeros(n, dtype=np.int64)
        self.floats_received = np.zeros(n, dtype=np.int64)
        self.edge_messages = np.zeros((n, n), dtype=np.int64)  # [i, j]: j -> i
        self.payload_sizes: set[int] = set()

    def transmit(self, payload: torch.Tensor, mixing: np.ndarray) -> torch.Tensor:
        """One gossip step: client i receives ``sum_j A[i, j] payload_j`` from its in-neighbours.

        Args:
            payload: ``(..., n, d)``; leading axes are independent simulated replicas (each one
                a full run; its messages are counted once per replica).
            mixing: ``(n, n)`` column-stochastic weights of this step.

        Returns:
            ``(..., n, d)``: the received weighted sums.
        """
        return self.gossip(payload, np.asarray(mixing)[None], keep_all=False)[-1]

    def gossip(
        self, payload: torch.Tensor, mixings: np.ndarray, keep_all: bool = False
    ) -> list[torch.Tensor]:
        """``S = len(mixings)`` gossip steps of a payload that is mixed linearly each step.

        Counts every message of every step (vectorised over steps), then applies the steps.
        Returns the payload after each step when ``keep_all``, else only the last one.
        """
        n = self.n_clients
        mixings = np.asarray(mixings, dtype=np.float64)
        if payload.shape[-2] != n or mixings.shape[1:] != (n, n):
            raise ValueError(
                f"payload {tuple(payload.shape)} / mixings {mixings.shape} do not match n={n}"
            )
        if self.validate:
            check_column_stochastic(mixings)
        steps = mixings.shape[0]
        size = int(payload.shape[-1])
        replicas = int(np.prod(payload.shape[:-2])) if payload.ndim > 2 else 1
        links = (mixings != 0) & ~np.eye(n, dtype=bool)
        per_edge = links.sum(axis=0) * replicas
        self.edge_messages += per_edge
        sent = per_edge.sum(axis=0)
        self.messages_sent += sent
        self.floats_sent += sent * size
        self.floats_received += per_edge.sum(axis=1) * size
        if steps:
            self.payload_sizes.add(size)
        self.steps += steps
        if self.counter is not None:
            self.counter.add("comm_rounds", steps)
            self.counter.add("floats_up", int(sent.sum()) * size)
        weights = torch.as_tensor(mixings, dtype=payload.dtype, device=payload.device)
        out = [payload]
        for A in weights:
            out.append(A @ out[-1])
            if not keep_all:
                del out[0]
        return out if keep_all else out[-1:]

    @property
    def total_floats(self) -> int:
        return int(self.floats_sent.sum())

    @property
    def largest_payload(self) -> int:
        return max(self.payload_sizes, default=0)

    # ----------------------------------------------------------------------- state
    #: The per-client (and per-edge) count arrays, in the order :meth:`state_dict` holds them.
    _ARRAYS = ("messages_sent", "floats_sent", "floats_received", "edge_messages")

    def state_dict(self) -> dict[str, Any]:
        """The counts as plain data (a checkpoint's): ``steps``, copies of the count arrays
        and ``payload_sizes`` (sorted)."""
        return {
            "steps": self.steps,
            **{name: getattr(self, name).copy() for name in self._ARRAYS},
            "payload_sizes": sorted(self.payload_sizes),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Set the counts to :meth:`state_dict`'s output (the shared counter, if any, is not
        touched: it is restored with the rest of the run's calls)."""
        self.steps = int(state["steps"])
        for name in self._ARRAYS:
            getattr(self, name)[...] = state[name]
        self.payload_sizes = {int(size) for size in state["payload_sizes"]}

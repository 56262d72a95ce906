"""The federated execution context that every server-based algorithm runs in.

A :class:`FederatedContext` bundles what one run needs: the problem, the counted oracles, the
communication ledger (sharing the same counter, so an estimate's :class:`~testbed.Calls` holds
both oracle calls and communication), client sampling, the random generator and the minibatch
size. Algorithms only talk to clients through it:

- ``participants()`` draws this round's clients (all of them under full participation);
- ``draw(clients)`` draws one fresh minibatch per participating client (``None`` when exact);
- ``broadcast`` / ``send`` / ``aggregate`` move vectors through the ledger;
- the client oracles (``grad_inner``, ``grad_outer``, ``hvp``, ``jvp_xy``) evaluate the
  participating clients in one batched call.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from problems import Batch, Problem
from testbed.calls import CallCounter, Calls
from testbed.federation.ledger import Ledger
from testbed.federation.sampling import ClientSampler
from testbed.oracles import Oracles


@dataclasses.dataclass
class FederatedContext:
    """One federated run's problem, oracles, ledger, sampler and randomness.

    Args:
        problem: the federated problem (M = ``problem.n_clients`` clients).
        rng: the run's only source of randomness.
        participation: ``None`` (all clients) or a fraction / count (see :class:`ClientSampler`).
        batch_size: ``None`` for exact local objectives, else the per-client minibatch size.
    """

    problem: Problem
    rng: np.random.Generator
    participation: float | int | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        self.counter = CallCounter()
        self.oracles = Oracles(self.problem, self.counter)
        self.ledger = Ledger(self.problem.n_clients, self.counter)
        self.sampler = ClientSampler(self.problem.n_clients, self.participation)

    # ----------------------------------------------------------------- clients and batches
    def participants(self) -> torch.Tensor:
        return self.sampler.sample(self.rng)

    def all_clients(self) -> torch.Tensor:
        return self.sampler.all_clients()

    def draw(self, clients: torch.Tensor) -> Batch | None:
        if self.batch_size is None:
            return None
        return self.problem.sample_batch(self.rng, clients, self.batch_size)

    # ----------------------------------------------------------------- communication
    def broadcast(self, value: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        return self.ledger.broadcast(value, clients)

    def send(self, value: torch.Tensor, clients: torch.Tensor) -> None:
        """The broadcast of ``value`` to ``clients``, counted, for callers that keep using the
        server's copy (no per-client copies are made)."""
        self.ledger.send(value, clients)

    def aggregate(self, uploads: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        return self.ledger.aggregate(uploads, clients)

    def calls(self) -> Calls:
        return self.counter.snapshot()

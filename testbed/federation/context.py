"""The federated execution context that every server-based algorithm runs in.

A :class:`FederatedContext` bundles what one run needs: the problem, the counted oracles, the
communication ledger (sharing the same counter, so an estimate's :class:`~testbed.Calls` holds
both oracle calls and communication), client sampling, the random generator and the minibatch
size. Algorithms only talk to clients through it:

- ``participants()`` draws this round's clients (all of them under full participation;
  ``all_clients()`` lists every client);
- ``draw(clients)`` draws one fresh minibatch per participating client (``None`` when exact);
- ``broadcast`` / ``send`` / ``aggregate`` (and ``aggregate_in_round``) move vectors through
  the ledger, each under a name (what the vector is: ``"x"``, ``"q"``, ...) that a deployment
  uses for the clients' copy; ``rounds_so_far()`` reads its round count and ``calls()`` the
  oracle calls and communication so far;
- ``run_clients(work, clients)`` has the participating clients compute a round's uploads
  (:class:`~testbed.federation.client_work.ClientWork`) through the context's transport: in
  this process by default (the batched simulation), or on deployed clients;
- ``oracles`` (:class:`~testbed.oracles.Oracles`, counted by the same counter as the ledger)
  evaluate the participating clients in one batched call (the context is the in-process
  clients' side).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch

from problems import Batch
from problems import Problem
from testbed.calls import CallCounter
from testbed.calls import Calls
from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientTransport
from testbed.federation.client_work import ClientWork
from testbed.federation.client_work import InProcessClients
from testbed.federation.ledger import Ledger
from testbed.federation.sampling import ClientSampler
from testbed.oracles import Oracles


class ParticipantSource(Protocol):
    """Who takes part in a round (:class:`ClientSampler`; scripted or fixed subsets in the
    claims' exact enumerations: :class:`~testbed.federation.sampling.ScriptedParticipants`)."""

    def sample(self, rng: np.random.Generator) -> torch.Tensor: ...

    def all_clients(self) -> torch.Tensor: ...


class BatchSource(Protocol):
    """How a round's minibatches are drawn (default: the problem's ``sample_batch``)."""

    def draw(
        self, problem: Problem, rng: np.random.Generator, clients: torch.Tensor, batch_size: int
    ) -> Batch: ...


UploadObserver = Callable[[torch.Tensor, torch.Tensor], None]


@dataclasses.dataclass
class FederatedContext:
    """One federated run's problem, oracles, ledger, sampler and randomness.

    Args:
        problem: the federated problem (M = ``problem.n_clients`` clients).
        rng: the run's only source of randomness.
        participation: ``None`` (all clients) or a fraction / count (see :class:`ClientSampler`).
        batch_size: ``None`` for exact local objectives, else the per-client minibatch size.
        sampler: who takes part in each round; ``None`` means
            ``ClientSampler(M, participation)``. Exact enumerations pass scripted subsets.
        batches: how minibatches are drawn; ``None`` means the problem's ``sample_batch``.
        upload_observer: called with ``(uploads, clients)`` at each aggregation (a check that
            reads what the clients sent), after the ledger has counted it.
        transport: where the clients' work runs and what carries the ledger's vectors;
            ``None`` means :class:`~testbed.federation.client_work.InProcessClients` (the
            batched simulation).

    The sampler, batches and observer compose a context for a check instead of subclassing it.
    """

    problem: Problem
    rng: np.random.Generator
    participation: float | int | None = None
    batch_size: int | None = None
    sampler: ParticipantSource | None = None
    batches: BatchSource | None = None
    upload_observer: UploadObserver | None = None
    transport: ClientTransport | None = None

    def __post_init__(self) -> None:
        self.counter = CallCounter()
        self.oracles = Oracles(self.problem, self.counter)
        self.ledger = Ledger(self.problem.n_clients, self.counter)
        if self.sampler is None:
            self.sampler = ClientSampler(self.problem.n_clients, self.participation)
        if self.transport is None:
            self.transport = InProcessClients()

    # ----------------------------------------------------------------- clients and batches
    def participants(self) -> torch.Tensor:
        assert self.sampler is not None  # set in __post_init__
        return self.sampler.sample(self.rng)

    def all_clients(self) -> torch.Tensor:
        assert self.sampler is not None
        return self.sampler.all_clients()

    def draw(self, clients: torch.Tensor) -> Batch | None:
        if self.batch_size is None:
            return None
        if self.batches is not None:
            return self.batches.draw(self.problem, self.rng, clients, self.batch_size)
        return self.problem.sample_batch(self.rng, clients, self.batch_size)

    # ----------------------------------------------------------------- communication
    def broadcast(
        self, value: torch.Tensor, clients: torch.Tensor, name: str | None = None
    ) -> torch.Tensor:
        """Send ``value`` to ``clients``, counted; one copy per client
        (:meth:`Ledger.broadcast`)."""
        copies = self.ledger.broadcast(value, clients)
        self._transport().sent(name, value, clients)
        return copies

    def send(self, value: torch.Tensor, clients: torch.Tensor, name: str | None = None) -> None:
        """The broadcast of ``value`` to ``clients``, counted, for callers that keep using the
        server's copy (no per-client copies are made)."""
        self.ledger.send(value, clients)
        self._transport().sent(name, value, clients)

    def aggregate(
        self, uploads: torch.Tensor, clients: torch.Tensor, name: str | None = None
    ) -> torch.Tensor:
        """One round: average the clients' ``uploads`` and send the mean back (the clients'
        copy is called ``name``)."""
        mean = self.ledger.aggregate(uploads, clients)
        self._transport().aggregated(name, uploads, mean, clients)
        if self.upload_observer is not None:
            self.upload_observer(uploads, clients)
        return mean

    def aggregate_in_round(
        self, uploads: torch.Tensor, clients: torch.Tensor, name: str | None = None
    ) -> torch.Tensor:
        """A second payload averaged inside the round being held: its messages are counted,
        no new round (:meth:`Ledger.aggregate_in_round`)."""
        mean = self.ledger.aggregate_in_round(uploads, clients)
        self._transport().aggregated(name, uploads, mean, clients)
        return mean

    def run_clients(self, work: ClientWork, clients: torch.Tensor) -> ClientReply:
        """The uploads of ``clients`` for ``work`` (one row each), computed where the
        transport runs the clients: by default in this process, batched over ``clients``."""
        return self._transport().run(self, work, clients)

    def _transport(self) -> ClientTransport:
        assert self.transport is not None  # set in __post_init__
        return self.transport

    def rounds_so_far(self) -> int:
        """Communication rounds (aggregations) held in this context so far; the difference of
        two readings is what the steps between them cost."""
        return self.ledger.rounds

    def calls(self) -> Calls:
        return self.counter.snapshot()


def send(
    ctx: FederatedContext, clients: torch.Tensor, *values: torch.Tensor, **named: torch.Tensor
) -> None:
    """Broadcast each vector to ``clients`` (one message per vector; not a round). Vectors given
    by keyword go under that name, which a deployment needs (``send(ctx, clients, x=x, y=y)``);
    positional ones go unnamed (an in-process variant, e.g. a mutant)."""
    for value in values:
        ctx.send(value, clients)
    for name, value in named.items():
        ctx.send(value, clients, name)

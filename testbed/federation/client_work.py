r"""The clients' side of a round: per-client work, and the transport that takes it to the clients.

Every server-based algorithm alternates server steps (draw the participants, send vectors,
average the uploads) with client work: each participating client computes its upload from what
the server sent it and from its own data. A :class:`ClientWork` is that computation as a small
frozen dataclass: its fields are what the clients use (vectors the server sent them, and the
algorithm's settings), and :meth:`ClientWork.run` evaluates it for a set of clients through a
:class:`ClientSide` (their oracles and minibatches), returning one upload row per client.

Where the work runs is the context's :class:`ClientTransport`:

- :class:`InProcessClients` (the default, the batched simulation): one process holds every
  client's data, and a round's work is one batched call over the participating clients
  (``work.run(ctx, clients)``, the context itself being the clients' side);
- a deployment (``testbed_app.flower``) sends each participating client the vectors the ledger
  recorded for it and the work's description, and each client runs the same ``work.run`` on its
  own data with ``clients`` of length one.

So the server side of an algorithm is its aggregation steps and the client side is
:meth:`ClientWork.run`, one piece of code for both. The transport sees every vector the ledger
records (:meth:`ClientTransport.sent`, :meth:`ClientTransport.aggregated`), which is how a
deployment carries exactly the ledger's messages; the in-process transport ignores them, so the
batched path computes what it computed before the seam, bit for bit.

A work's tensor fields must be vectors the participating clients were sent (a deployment
resolves each against what it delivered to that client and refuses a work that uses anything
else); its other fields are settings (numbers, flags, an algorithm's configuration). Classes that
may appear in a work's fields (works, local directions, maps, configurations) are
:func:`portable`: a deployment rebuilds only registered classes by name.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any
from typing import ClassVar
from typing import NamedTuple
from typing import Protocol
from typing import TypeVar

import torch

from problems import Batch
from problems import Problem
from testbed.oracles import Oracles

T = TypeVar("T")

#: Classes a work's fields may hold, by their registered name (:func:`portable`).
PORTABLE: dict[str, type] = {}


def portable(cls: type[T]) -> type[T]:
    """Register a frozen dataclass that a work's fields may hold (a local direction, an
    algorithm's maps or configuration), so a deployment can rebuild it on a client by name."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__}: only dataclasses can travel in a client work")
    PORTABLE[portable_name(cls)] = cls
    return cls


def portable_name(cls: type) -> str:
    """The name a portable class is registered under (a subclass has its own: registering a
    class does not make its subclasses portable)."""
    return f"{cls.__module__}.{cls.__qualname__}"


class ClientSide(Protocol):
    """What a client computes with: its problem (data), counted oracles and minibatches.

    A :class:`~testbed.federation.context.FederatedContext` is one (all clients in one process);
    a deployed client builds one over its own data.
    """

    problem: Problem
    oracles: Oracles

    def draw(self, clients: torch.Tensor) -> Batch | None: ...


class ClientReply(NamedTuple):
    """What a round's work gives back.

    Attributes:
        uploads: one ``(C, ...)`` tensor per payload, row c from ``clients[c]``; the server
            aggregates each (the first one as the round, later ones inside it).
        trace: what the clients computed on the way, for checks (in-process only: a
            deployment does not send it, and gives ``None``).
    """

    uploads: tuple[torch.Tensor, ...]
    trace: Any = None


@dataclasses.dataclass(frozen=True)
class ClientWork(abc.ABC):
    """The per-client computation of one round (see the module docstring).

    Subclasses set ``kind`` (a Python identifier naming the request, e.g. a Flower message
    type's action) and are registered under it in :data:`WORK_KINDS`.
    """

    kind: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            if not cls.kind.isidentifier():
                raise ValueError(f"{cls.__name__}.kind must be an identifier, got {cls.kind!r}")
            if WORK_KINDS.get(cls.kind, cls) is not cls:
                raise ValueError(
                    f"two client works of kind {cls.kind!r}: "
                    f"{WORK_KINDS[cls.kind].__name__} and {cls.__name__}"
                )
            WORK_KINDS[cls.kind] = cls

    @abc.abstractmethod
    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        """The uploads of ``clients`` (one row each), computed on ``side``."""


#: Every client work by its ``kind``.
WORK_KINDS: dict[str, type[ClientWork]] = {}


@dataclasses.dataclass(frozen=True)
class WorkAtPoint(ClientWork):
    """A client work at the broadcast point ``(x, y)`` (its fields first; a subclass adds the
    vectors and steps it is sent beside them)."""

    x: torch.Tensor
    y: torch.Tensor


@dataclasses.dataclass(frozen=True)
class Together(ClientWork):
    """Several works that ride in the same round (AggITD's ``z^t`` beside the anchor gradient
    or the local steps, Table 1): run in order, their uploads concatenated in order."""

    kind: ClassVar[str] = "together"
    works: tuple[ClientWork, ...]

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        uploads: tuple[torch.Tensor, ...] = ()
        for work in self.works:
            uploads += work.run(side, clients).uploads
        return ClientReply(uploads)


class ClientTransport(Protocol):
    """Takes a round's work to the clients and sees every vector the ledger records."""

    def sent(self, name: str | None, value: torch.Tensor, clients: torch.Tensor) -> None:
        """The server sent ``value`` to ``clients`` (a send or a broadcast)."""

    def aggregated(
        self, name: str | None, uploads: torch.Tensor, mean: torch.Tensor, clients: torch.Tensor
    ) -> None:
        """The server averaged ``uploads`` of ``clients`` and sends them ``mean`` back."""

    def run(self, side: ClientSide, work: ClientWork, clients: torch.Tensor) -> ClientReply:
        """The clients' uploads for ``work``; ``side`` is the server's context."""


class InProcessClients:
    """The batched simulation's clients: every client's data is in this process, and a round's
    work is one batched call on the server's context (nothing is carried anywhere)."""

    def sent(self, name: str | None, value: torch.Tensor, clients: torch.Tensor) -> None:
        del name, value, clients

    def aggregated(
        self, name: str | None, uploads: torch.Tensor, mean: torch.Tensor, clients: torch.Tensor
    ) -> None:
        del name, uploads, mean, clients

    def run(self, side: ClientSide, work: ClientWork, clients: torch.Tensor) -> ClientReply:
        return work.run(side, clients)


__all__ = [
    "PORTABLE",
    "WORK_KINDS",
    "ClientReply",
    "ClientSide",
    "ClientTransport",
    "ClientWork",
    "InProcessClients",
    "Together",
    "WorkAtPoint",
    "portable",
    "portable_name",
]

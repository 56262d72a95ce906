r"""Local steps on the clients, with or without an SVRG/FedLin control variate.

One routine serves FedNest's FedInn (Alg. 4) and FedOut (Alg. 2), LFedNest's FedAvg-type inner
loop, and AggITD's One-Round-Lower (Alg. 2) and One-Round-Upper (Alg. 4):

.. math::

    w_{i,0} = w, \qquad
    d_{i,\nu} = G_i(w_{i,\nu}; \zeta_{i,\nu}) - G_i(w; \zeta_{i,\nu}) + \bar d, \\
    w_{i,\nu+1} = w_{i,\nu} - \eta_i d_{i,\nu}, \quad \nu = 0..\tau_i - 1, \qquad
    w^+ = \tfrac{1}{|S|} \sum_{i \in S} w_{i,\tau_i}  \quad\text{(one round)};

without the control variate, ``d_{i,nu} = G_i(w_{i,nu}; zeta_{i,nu})`` (FedAvg).

The same sample is used at the local point and at the anchor (FedNest Alg. 4; AggITD Alg. 2
line 4). Clients with fewer local steps stop early (device heterogeneity); the per-client step is
``step_size / tau_i`` when ``scale_by_steps`` (the step rule of FedNest Thm 3.1 and AggITD).

The clients' part is :func:`local_iterates`, run as the client work :class:`LocalIterates` (with
its direction ``G_i`` one of the portable directions below) through ``ctx.run_clients``, the
server averaging the uploads in one round (``ctx.aggregate``): one implementation, which the
algorithms, the mutants and the perturbations all run, in the batched simulation and on deployed
clients (:mod:`testbed.federation.client_work`). :meth:`LocalIterates.averaged` is
that round; :func:`outer_steps_round` the one on ``x`` that FedOut and One-Round-Upper share.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from collections.abc import Sequence
from typing import ClassVar

import torch

from problems import Batch
from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientSide
from testbed.federation.client_work import ClientWork
from testbed.federation.client_work import WorkAtPoint
from testbed.federation.client_work import portable
from testbed.federation.context import FederatedContext

# oracle(points (C, d), clients (C,), batch) -> per-client directions (C, d)
LocalOracle = Callable[[torch.Tensor, torch.Tensor, Batch | None], torch.Tensor]


def steps_per_client(local_steps: int | Sequence[int], clients: torch.Tensor) -> torch.Tensor:
    """``tau_i`` for each participating client: one int for all, or a per-client sequence."""
    if isinstance(local_steps, int):
        if local_steps < 1:
            raise ValueError(f"local_steps must be >= 1, got {local_steps}")
        return torch.full((int(clients.shape[0]),), local_steps, dtype=torch.long)
    taus = torch.as_tensor(list(local_steps), dtype=torch.long)
    if bool((taus < 1).any()):
        raise ValueError(f"every client needs at least one local step, got {list(local_steps)}")
    return taus[clients]


def local_iterates(
    side: ClientSide,
    anchor: torch.Tensor,
    clients: torch.Tensor,
    oracle: LocalOracle,
    local_steps: int | Sequence[int],
    step_size: float,
    global_direction: torch.Tensor | None = None,
    scale_by_steps: bool = False,
) -> torch.Tensor:
    """The clients' local steps: their last local iterates ``w_{i,tau_i}``, one row per client in
    ``clients`` (``side`` draws the minibatches).

    Args:
        side: the clients' side (oracles and minibatch draws).
        anchor: the server point ``w`` (already broadcast as part of the previous round).
        clients: participating clients.
        oracle: per-client direction ``G_i`` (for example ``grad_y g_i(x, .)``).
        local_steps: ``tau`` for all clients, or a per-client sequence ``tau_i``.
        step_size: eta; divided by ``tau_i`` when ``scale_by_steps``.
        global_direction: ``d_bar``; when given, the SVRG/FedLin control variate is used.
    """
    taus = steps_per_client(local_steps, clients)
    steps = (
        (step_size / taus.to(anchor.dtype))
        if scale_by_steps
        else torch.full(taus.shape, step_size, dtype=anchor.dtype)
    ).to(anchor.device)
    count = int(clients.shape[0])
    anchors = anchor.detach().expand(count, -1)
    # the first local point is the anchor itself (no copy: every update below is out of place),
    # so the oracles see the same tensor at both points of the first step (ExactCallMemo)
    local = anchors
    column = steps[:, None]
    # Clients with fewer local steps stop early. The schedule is known from the tau_i (host
    # integers), so a step where every client is still running uses the whole stack and the
    # round's own client tensor (no nonzero, gather or index_copy; the problems then use their
    # arrays for that client set as they are), and only the steps of a heterogeneous schedule
    # where some clients have stopped work on the running subset.
    tau_list = taus.tolist()
    for nu in range(max(tau_list)):
        if min(tau_list) > nu:
            batch = side.draw(clients)
            direction = oracle(local, clients, batch)
            if global_direction is not None:
                # in place on the round's own temporary (never on an oracle's output, which
                # may be a problem's array): two (C, d) allocations per step instead of four
                direction = direction - oracle(anchors, clients, batch)
                direction += global_direction
                direction *= column
            else:
                direction = column * direction
            local = local - direction
            continue
        rows = torch.tensor([c for c, tau in enumerate(tau_list) if tau > nu], dtype=torch.long)
        active = clients[rows]
        rows = rows.to(anchor.device)  # index the iterates where they live
        batch = side.draw(active)
        direction = oracle(local[rows], active, batch)
        if global_direction is not None:
            direction = direction - oracle(anchors[rows], active, batch) + global_direction
        local = local.index_copy(0, rows, local[rows] - steps[rows, None] * direction)
    return local


# ------------------------------------------------------------------------------- client work


@dataclasses.dataclass(frozen=True)
class LocalDirection(abc.ABC):
    """A client's local direction ``G_i(points; batch)`` for :class:`LocalIterates`."""

    @abc.abstractmethod
    def __call__(
        self, side: ClientSide, points: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``G_i`` at each row of ``points`` for client ``clients[c]``."""


@portable
@dataclasses.dataclass(frozen=True)
class InnerGradientAt(LocalDirection):
    """``grad_y g_i(x, .)`` at the broadcast ``x`` (FedInn, One-Round-Lower)."""

    x: torch.Tensor

    def __call__(
        self, side: ClientSide, points: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        return side.oracles.grad_inner(self.x, points, clients, batch)


@portable
@dataclasses.dataclass(frozen=True)
class OuterGradientXAt(LocalDirection):
    """``grad_x f_i(., y)`` at the broadcast ``y`` (FedOut's and One-Round-Upper's direct
    part)."""

    y: torch.Tensor

    def __call__(
        self, side: ClientSide, points: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        return side.oracles.grad_outer_x(points, self.y, clients, batch)


@dataclasses.dataclass(frozen=True)
class LocalIterates(ClientWork):
    """:func:`local_iterates` as a round's client work: the upload is each client's last local
    iterate, which the server averages in one round (``ctx.aggregate``)."""

    kind: ClassVar[str] = "local_iterates"
    anchor: torch.Tensor
    direction: LocalDirection
    local_steps: int | tuple[int, ...]
    step_size: float
    global_direction: torch.Tensor | None = None
    scale_by_steps: bool = False

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        def oracle(points: torch.Tensor, active: torch.Tensor, batch: Batch | None) -> torch.Tensor:
            return self.direction(side, points, active, batch)

        return ClientReply(
            (
                local_iterates(
                    side,
                    self.anchor,
                    clients,
                    oracle,
                    self.local_steps,
                    self.step_size,
                    self.global_direction,
                    self.scale_by_steps,
                ),
            )
        )

    def averaged(self, ctx: FederatedContext, clients: torch.Tensor, key: str) -> torch.Tensor:
        """``w^+``: run on ``clients`` as one round's work, the uploads averaged by the server
        (``ctx.aggregate`` under ``key``, the variable's name in the ledger)."""
        (local,) = ctx.run_clients(self, clients).uploads
        return ctx.aggregate(local, clients, key)


def outer_steps_round(
    ctx: FederatedContext,
    clients: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    h: torch.Tensor,
    local_steps: int | tuple[int, ...],
    step_size: float,
    scale_by_steps: bool,
) -> torch.Tensor:
    """``x^+``: each client's ``tau_i`` local steps on ``x`` from the broadcast ``x`` with
    ``G_i = grad_x f_i(., y)``, the drift corrected around the global direction ``h``, averaged
    in one round: FedNest's FedOut (Alg. 2, eq. (10)-(11)), AggITD's One-Round-Upper (Alg. 4)."""
    # the fields in order: anchor, direction, local_steps, step_size, global_direction, scaling
    work = LocalIterates(x, OuterGradientXAt(y), local_steps, step_size, h, scale_by_steps)
    return work.averaged(ctx, clients, "x")


@dataclasses.dataclass(frozen=True)
class InnerGradient(WorkAtPoint):
    """``grad_y g_i(x, y)`` at the broadcast point: the anchor gradient whose average is the
    control variate's ``q`` (FedInn's first round; AggITD's anchor round, Alg. 2)."""

    kind: ClassVar[str] = "inner_gradient"
    #: evaluate at ``y`` expanded to one row per client (FedInn) or at the shared vector
    #: (AggITD): the two shapes take different closed-form kernels, so each caller keeps its own
    #: and its numbers stay what they were
    rows: bool = True

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        points = self.y.expand(int(clients.shape[0]), -1) if self.rows else self.y
        return ClientReply((side.oracles.grad_inner(self.x, points, clients, side.draw(clients)),))

r"""FedIHGP (Tarzanagh et al., ICML 2022, Alg. 3): the federated inverse-Hessian-gradient
product of eqs. (13a)-(13b), its client works (:class:`IHGPFirstTerm`, :class:`IHGPTerm`), its
truncation schedule, and the same computation for many replicates at once
(:func:`fedihgp_replicates`). FedNest's other building blocks and the :class:`~testbed.estimators.
fednest.FedIHGP` estimator are in :mod:`testbed.estimators.fednest`; the notation is its
(docs/glossary.md): ``l = 1 / neumann_step_size``, ``A = I - H / l``, ``N = neumann_terms``.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar
from typing import Literal
from typing import NamedTuple

import numpy as np
import torch

from testbed.estimators.validation import check_positive_int
from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientSide
from testbed.federation.client_work import WorkAtPoint
from testbed.federation.context import FederatedContext
from testbed.federation.context import send
from testbed.federation.replicates import Replicates

Truncation = Literal["random", "deterministic"]
TRUNCATIONS: tuple[str, ...] = ("random", "deterministic")


def check_truncation(truncation: str) -> None:
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")


class IHGPResult(NamedTuple):
    """What FedIHGP returns.

    Attributes:
        p: the server's ``p_{N'}`` (random truncation) or the full sum (deterministic).
        truncation_index: ``N'`` (random) or ``N`` (deterministic: the number of HVP rounds).
        path: ``(p_0, ..., p_{N'})``, the vector after each round.
        rounds: aggregation rounds used (``N' + 1``, or ``N + 1``).
    """

    p: torch.Tensor
    truncation_index: int
    path: tuple[torch.Tensor, ...]
    rounds: int


def fedihgp(
    ctx: FederatedContext,
    x: torch.Tensor,
    y: torch.Tensor,
    neumann_terms: int,
    neumann_step_size: float,
    truncation: Truncation = "random",
    truncation_index: int | None = None,
) -> IHGPResult:
    r"""FedIHGP (Alg. 3): the federated inverse-Hessian-gradient product, eqs. (13a)-(13b).

    Random truncation (the paper): draw ``N' ~ U{0, ..., N-1}``, then

    .. math::

        p_0 = \frac{N}{l} \frac{1}{|S_0|} \sum_{i \in S_0} \nabla_y f_i(x, y; \xi_{i,0}), \qquad
        p_n = \frac{1}{|S_n|} \sum_{i \in S_n}
              \big(I - \tfrac{1}{l} \nabla^2_y g_i(x, y; \zeta_{i,n})\big) p_{n-1},
        \quad n = 1..N',

    one round each (``N' + 1`` rounds), returning ``p_{N'} = H_hat v``; ``E[H_hat] =
    (1/l) sum_{j<N} A^j = H^{-1}(I - A^N)`` (Lemma 2.2). Each ``S_n`` is a fresh draw of
    ``ctx.participants()`` (its size is the ``participation`` parameter).

    Deterministic truncation (the schedule of the authors' code, ucr-optml/FedNest, which counts
    exactly Sec. 2.6's ``2T + N + 3`` rounds): ``p_0`` as above with
    scale ``1/l`` and all ``N`` Hessian rounds, the server summing the powers:
    ``p = (1/l) sum_{j=0}^{N} A^j v`` (``N + 1`` rounds, bias ``-H^{-1} A^{N+1} v``, no
    truncation variance).

    .. warning:: The deterministic variant follows the official code, not Alg. 3; it is the
       schedule that makes FedNest's per-iteration count exactly ``2T + N + 3``.

    Args:
        truncation_index: force ``N'`` (random truncation only); ``None`` draws it from
            ``ctx.rng``. Used to compute exact expectations over ``N'`` as finite sums.
    """
    if truncation == "random" and truncation_index is None:
        check_positive_int(neumann_terms, "neumann_terms", minimum=1)
        truncation_index = int(ctx.rng.integers(neumann_terms))
    n_prime, scale, lam = truncation_schedule(
        neumann_terms, neumann_step_size, truncation, truncation_index
    )
    clients = ctx.participants()
    send(ctx, clients, x=x, y=y)
    (first,) = ctx.run_clients(IHGPFirstTerm(x, y, scale), clients).uploads
    p = ctx.aggregate(first, clients, "p")
    path, total = [p], p
    for _ in range(n_prime):
        previous = clients
        clients = ctx.participants()
        if not torch.equal(previous, clients):  # new clients need the model and p_{n-1}
            send(ctx, clients, x=x, y=y, p=p)
        (term,) = ctx.run_clients(IHGPTerm(x, y, p, lam), clients).uploads
        p = ctx.aggregate(term, clients, "p")
        path.append(p)
        total = total + p
    value = p if truncation == "random" else total
    return IHGPResult(value, n_prime, tuple(path), n_prime + 1)


def fedihgp_replicates(
    side: Replicates, x: torch.Tensor, y: torch.Tensor, schedule: IHGPSchedule
) -> torch.Tensor:
    r"""FedIHGP (Alg. 3, eq. (13b)) of every replicate of ``side`` at once, on one
    ``schedule`` (:func:`truncation_schedule`: the same ``N'`` for all): the paths ``(p_0, ...,
    p_{N'})`` stacked as ``(N' + 1, R, dy)``.

    Replicate ``r`` is :func:`fedihgp` in a context drawing from ``side.rngs[r]``: the same
    rounds, draws and client works (:class:`IHGPFirstTerm`, :class:`IHGPTerm`), one batched
    oracle call per round for every replicate (:class:`~testbed.federation.replicates.
    Replicates`), hence the same numbers row by row. Under full participation a replicate's
    rounds draw nothing but their minibatches, drawn in one call
    (:meth:`~testbed.federation.replicates.Replicates.drawn_ahead`: the same numbers).
    """
    if side.sampler.is_full:  # the rounds' minibatches are the only draws: in one call
        side = side.drawn_ahead([schedule.rounds + 1] * len(side.rngs))
    clients = side.participants()
    (first,) = IHGPFirstTerm(x, y, schedule.scale).run(side, clients).uploads
    path = [side.aggregate(first)]
    for _ in range(schedule.rounds):
        clients = side.participants()
        term = IHGPTerm(x, y, side.rows(path[-1]), schedule.step)
        path.append(side.aggregate(term.run(side, clients).uploads[0]))
    side.check_drawn()
    return torch.stack(path)


class IHGPSchedule(NamedTuple):
    """FedIHGP's rounds: ``rounds`` Hessian rounds (``N'``, or ``N`` deterministic) after
    ``p_0``'s round at scale ``scale`` (``N/l``, or ``1/l``), each of Neumann step ``step``
    (``1/l``)."""

    rounds: int
    scale: float
    step: float


def truncation_schedule(
    neumann_terms: int, neumann_step_size: float, truncation: str, truncation_index: int | None
) -> IHGPSchedule:
    """FedIHGP's schedule: ``N'`` Hessian rounds and ``p_0`` scaled by ``N/l`` under random
    truncation with ``N'`` given (:func:`fedihgp` draws it first when it is not), ``N`` rounds
    and ``1/l`` under the deterministic one.

    Raises:
        ValueError: a random truncation without ``N' in [0, N)``, or an unknown truncation.
    """
    check_positive_int(neumann_terms, "neumann_terms", minimum=1)
    check_truncation(truncation)
    lam = float(neumann_step_size)
    if truncation != "random":
        return IHGPSchedule(neumann_terms, lam, lam)
    if truncation_index is None or not 0 <= truncation_index < neumann_terms:
        raise ValueError(
            f"truncation_index must be in [0, {neumann_terms}), got {truncation_index}"
        )
    return IHGPSchedule(int(truncation_index), neumann_terms * lam, lam)


@dataclasses.dataclass(frozen=True)
class IHGPFirstTerm(WorkAtPoint):
    """FedIHGP's first round (eq. (13b)): ``scale * grad_y f_i(x, y; xi_i)``."""

    kind: ClassVar[str] = "ihgp_first_term"
    scale: float

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        grad_y = side.oracles.grad_outer_y(self.x, self.y, clients, side.draw(clients))
        return ClientReply((self.scale * grad_y,))


@dataclasses.dataclass(frozen=True)
class IHGPTerm(WorkAtPoint):
    """A later FedIHGP round (eq. (13b)): ``p - (1/l) grad^2_y g_i(x, y; zeta_i) p``."""

    kind: ClassVar[str] = "ihgp_term"
    p: torch.Tensor
    neumann_step_size: float

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        products = side.oracles.hvp_inner(self.x, self.y, self.p, clients, side.draw(clients))
        return ClientReply((self.p - self.neumann_step_size * products,))


def truncation_probabilities(neumann_terms: int) -> np.ndarray:
    """``P(N' = n) = 1/N`` for ``n = 0..N-1`` (Alg. 3: N' drawn uniformly at random)."""
    check_positive_int(neumann_terms, "neumann_terms", minimum=1)
    return np.full(neumann_terms, 1.0 / neumann_terms)


__all__ = [
    "IHGPFirstTerm",
    "IHGPResult",
    "IHGPSchedule",
    "IHGPTerm",
    "TRUNCATIONS",
    "Truncation",
    "check_truncation",
    "fedihgp",
    "fedihgp_replicates",
    "truncation_probabilities",
    "truncation_schedule",
]

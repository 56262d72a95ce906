r"""AggITD: aggregated iterative differentiation (Xiao & Ji, ICML 2023, Alg. 1).

The estimator (eq. 5 / the closed form analysed in App. C) is

.. math::

    \widehat{\mathrm{HessIV}} &= \lambda (N+1) \prod_{t=N}^{Q+1}
        \Bigl(I - \tfrac{\lambda}{|S|} \sum_{i \in S} \nabla^2_y G_i(x, y^t; u_{i,t})\Bigr)
        \tfrac{1}{|S|} \sum_{i \in S} \nabla_y F_i(x, y^Q; \xi_{i,Q}), \\
    \tilde h(x) &= \tfrac{1}{|S|} \sum_{i \in S} \bigl[\nabla_x F_i(x, y^N; \xi_i)
        - \nabla^2_{xy} G_i(x, y^N; \chi_i)\, \widehat{\mathrm{HessIV}}\bigr],

with ``Q ~ U{0..N}`` drawn by the server and broadcast, ``y^0`` the warm start and ``y^{t+1}``
one FedSVRG step (Alg. 2, One-Round-Lower) from ``y^t``. The Hessian-vector recursion rides on
the lower-level rounds: every step's ``z^t`` is averaged at the server, so the product is one of
*global* Hessians, each evaluated at the current inner iterate ``y^t``; ``grad_y F`` is taken at
``y^Q`` and the Jacobian at ``y^N``. Averaging over Q gives eq. (11):

.. math::

    \mathbb{E}_Q[\tilde h \mid y^{0..N}] = \nabla_x f(x, y^N) - \lambda \nabla^2_{xy} g(x, y^N)
        \sum_{Q=0}^{N} \prod_{t=N}^{Q+1} (I - \lambda \nabla^2_y g(x, y^t))\, \nabla_y f(x, y^Q).

Communication (Table 1): ``2N + 2`` rounds per call with the FedSVRG lower level (N anchor
rounds carrying ``q^t`` and, from ``t = Q``, ``z^t``; N One-Round-Lower rounds; the ``t = N``
round carrying ``z^N``; the hypergradient round), ``2N + 3`` with FBO-AggITD's One-Round-Upper.

The clients' part of each round is a client work (:mod:`testbed.federation.client_work`):
:class:`HessIVTerm` (``z_i^t``), the anchor gradient and the local steps of
:mod:`testbed.federation.local`, and :class:`AggITDDirection`, so the same per-client code runs
batched and on deployed clients.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import ClassVar

import numpy as np
import torch

from problems import Problem
from testbed.defaults import AGGITD_INNER_STEPS
from testbed.defaults import AGGITD_LOCAL_STEPS
from testbed.estimators.base import InnerState
from testbed.estimators.federated import FederatedEstimator
from testbed.estimators.solvers import default_step_size
from testbed.estimators.validation import check_local_steps
from testbed.estimators.validation import check_positive_int
from testbed.estimators.validation import check_step
from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientSide
from testbed.federation.client_work import ClientWork
from testbed.federation.client_work import Together
from testbed.federation.client_work import WorkAtPoint
from testbed.federation.context import FederatedContext
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalIterates

LOWER_SOLVERS = ("svrg", "sgd")


def check_shared_parameters(config: Any) -> None:
    """The checks of the parameters AggITD and FBO-AggITD share: ``inner_steps`` (N >= 0),
    ``local_steps``, ``inner_step_size``, ``neumann_step_size`` and ``lower_solver``."""
    check_positive_int(config.inner_steps, "inner_steps", minimum=0)
    check_local_steps(config.local_steps)
    check_step(config.inner_step_size, "inner_step_size")
    check_step(config.neumann_step_size, "neumann_step_size")
    if config.lower_solver not in LOWER_SOLVERS:
        raise ValueError(
            f"lower_solver must be one of {LOWER_SOLVERS}, got {config.lower_solver!r}"
        )


def piggyback(ctx: FederatedContext, uploads: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
    """Average a second payload inside the round that is being held (no new round).

    AggITD's ``z_i^t`` travels in the same round as the anchor gradient ``q_i^t`` (Table 1):
    it is a separate message of ``dim_y`` floats each way, recorded in the ledger,
    but it does not open a round of its own.
    """
    return ctx.aggregate_in_round(uploads, clients, "z")


def round_with_term(
    ctx: FederatedContext,
    work: ClientWork,
    term: ClientWork | None,
    clients: torch.Tensor,
    key: str,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One round of ``work`` whose upload the server averages under ``key``, the Hessian-inverse
    ``term`` (if any) riding on it (:func:`piggyback`): ``(the average, z^t or None)``."""
    uploads = ctx.run_clients(work if term is None else Together((term, work)), clients).uploads
    average = ctx.aggregate(uploads[-1], clients, key)
    z = None if term is None else piggyback(ctx, uploads[0], clients)
    return average, z


@dataclasses.dataclass(frozen=True)
class HessIVTerm(WorkAtPoint):
    r"""A client's ``z_i^t`` of Alg. 1: ``grad_y F_i(x, y^t)`` when a term starts here
    (``fresh``: ``t = Q``, or every t in expectation mode), the recursion
    ``z^{t-1} - lambda grad^2_y G_i(x, y^t) z^{t-1}`` from the averaged ``z`` of the round
    before, or their sum (expectation mode, ``t >= 1``)."""

    kind: ClassVar[str] = "hessiv_term"
    z: torch.Tensor | None
    recursion_step: float
    fresh: bool

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        oracles = side.oracles
        if self.fresh:
            r = oracles.grad_outer_y(self.x, self.y, clients, side.draw(clients))
            if self.z is None:
                return ClientReply((r,))
            return ClientReply(
                (
                    self.z
                    - self.recursion_step
                    * oracles.hvp_inner(self.x, self.y, self.z, clients, side.draw(clients))
                    + r,
                )
            )
        assert self.z is not None  # the recursion continues a term started at t = Q
        return ClientReply(
            (
                self.z
                - self.recursion_step
                * oracles.hvp_inner(self.x, self.y, self.z, clients, side.draw(clients)),
            )
        )


@dataclasses.dataclass(frozen=True)
class AggITDDirection(WorkAtPoint):
    r"""The hypergradient round: ``grad_x F_i(x, y^N) - grad^2_xy G_i(x, y^N) p`` with
    ``p = scale z`` (``lambda (N + 1) z^N``; ``lambda z^N`` in expectation mode) from the
    averaged ``z`` the clients hold."""

    kind: ClassVar[str] = "aggitd_direction"
    z: torch.Tensor
    scale: float

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        p = self.scale * self.z
        grad_x = side.oracles.grad_outer_x(self.x, self.y, clients, side.draw(clients))
        cross = side.oracles.jvp_inner_xy(self.x, self.y, p, clients, side.draw(clients))
        return ClientReply((grad_x - cross,))


@dataclasses.dataclass(frozen=True)
class AggITD(FederatedEstimator):
    r"""AggITD hypergradient estimator (Xiao & Ji 2023, Alg. 1; closed form eq. 5, mean eq. 11).

    .. math::

        z^Q &= \tfrac{1}{|S|}\sum_{i \in S} \nabla_y F_i(x, y^Q; \xi_{i,Q}), \qquad
        z^t = \tfrac{1}{|S|}\sum_{i \in S} \bigl(z^{t-1}
              - \lambda \nabla^2_y G_i(x, y^t; u_{i,t}) z^{t-1}\bigr), \quad t = Q+1..N, \\
        p &= \lambda (N+1) z^N, \qquad
        \tilde h = \tfrac{1}{|S|}\sum_{i \in S} \bigl(\nabla_x F_i(x, y^N; \xi_i)
              - \nabla^2_{xy} G_i(x, y^N; \chi_i)\, p\bigr),

    and ``y^{t+1} = One-Round-Lower(x, y^t, q^t, beta)`` (Alg. 2: ``tau_i`` local FedSVRG steps
    of size ``beta / tau_i`` with the anchor gradient ``q^t`` averaged in the round before).

    .. warning::
        Algorithm 1 as printed has two typos (Sec. 2.2, against eq. (5)): line 6 drops the
        ``lambda`` (``z_i^t = z^{t-1} - grad^2_y G_i z^{t-1}``) and line 15 sets
        ``p = lambda (N+1) z^{N-1}`` when ``Q < N``. Both contradict the estimator that the paper
        analyses (eq. 5, eq. 11, Prop. 1, Prop. 2) and the ``2N + 3`` count, which includes the
        ``t = N`` aggregation. This class implements the analysed estimator: ``lambda`` in the
        recursion and ``p = lambda (N+1) z^N`` for every Q. ``as_printed=True`` gives the
        printed algorithm, only so that a claim can show it is wrong.

    Every message goes through the context's ledger. At the start of a call the server sends
    ``x``, ``y`` and ``Q`` to the participating clients (the distribution of the model, not a
    round). Under partial participation one client set ``S`` is drawn per call and used for every
    round of it, so the Hessian product is a product of averages over the same clients (notes
    4.5; the paper's Alg. 1 writes one ``S`` throughout).

    Args:
        inner_steps: N >= 0 (lower-level steps; N + 1 HessIV terms).
        local_steps: ``tau`` for every client, or a per-client tuple ``tau_i``.
        inner_step_size: beta (client i steps ``beta / tau_i``); ``None`` means ``1 / L``.
        neumann_step_size: lambda; ``None`` means ``1 / L``.
        lower_solver: ``"svrg"`` (Alg. 2, FedSVRG) or ``"sgd"`` (FedAvg, the FBO-AggITD_SGD
            variant of Fig. 4: no anchor round, so ``z^t`` rides on the local-step round and a
            call costs ``N + 2`` rounds).
        index: a fixed Q in ``0..N`` instead of a random one (for checks).
        expectation: return the exact conditional mean over Q (eq. 11) instead of one draw:
            ``z^t = (I - lambda H_t) z^{t-1} + r^t`` from ``t = 0`` and ``p = lambda z^N``.
            Same rounds; one more gradient and HVP per step.
        as_printed: the algorithm with the two printed typos (see the warning).
        printed_line6: with ``as_printed``, keep line 6 as printed (no ``lambda``); ``False``
            restores ``lambda`` there (a reader's repair of the obvious typo) and keeps line 15's
            ``z^{N-1}``, the other reading of the printed algorithm.
        participation, batch_size: see :class:`~testbed.FederatedEstimator`.

    Examples:
        >>> from problems import QuadraticBilevel
        >>> p = QuadraticBilevel.random(3, 2, 2, condition_number=2.0, seed=0)
        >>> est = AggITD(inner_steps=30, expectation=True)
        >>> x = torch.zeros(2, dtype=torch.float64)
        >>> out = est.estimate(p, x, est.init(p), np.random.default_rng(0))
        >>> bool(torch.allclose(out.value, p.exact_hypergradient(x), atol=1e-6))
        True
        >>> out.calls.comm_rounds
        62
    """

    inner_steps: int = AGGITD_INNER_STEPS
    local_steps: int | tuple[int, ...] = AGGITD_LOCAL_STEPS
    inner_step_size: float | None = None
    neumann_step_size: float | None = None
    lower_solver: str = "svrg"
    index: int | None = None
    expectation: bool = False
    as_printed: bool = False
    printed_line6: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_shared_parameters(self)
        if self.index is not None:
            check_positive_int(self.index, "index", minimum=0)
            if self.index > self.inner_steps:
                raise ValueError(
                    f"index must be in [0, inner_steps={self.inner_steps}], got {self.index}"
                )
            if self.expectation:
                raise ValueError(
                    "index and expectation exclude each other: expectation "
                    "averages over every index"
                )

    def initial_state(self, problem: Problem) -> InnerState:
        return InnerState(problem.initial_point()[1])

    def step_sizes(self, problem: Problem) -> tuple[float, float]:
        """``(beta, lambda)`` with ``1 / L`` for the ones not given."""
        beta = self.inner_step_size or default_step_size(problem, "AggITD inner_step_size")
        lam = self.neumann_step_size or default_step_size(problem, "AggITD neumann_step_size")
        return beta, lam

    def rounds_per_call(self) -> int:
        """``2N + 2`` (FedSVRG lower level) or ``N + 2`` (FedAvg lower level)."""
        n = self.inner_steps
        return 2 * n + 2 if self.lower_solver == "svrg" else n + 2

    def estimate_in(
        self, ctx: FederatedContext, x: torch.Tensor, state: InnerState
    ) -> tuple[torch.Tensor, InnerState, dict[str, Any]]:
        problem = ctx.problem
        self.check_problem(problem)
        if isinstance(self.local_steps, tuple) and len(self.local_steps) != problem.n_clients:
            raise ValueError(
                f"local_steps has {len(self.local_steps)} entries for {problem.n_clients} clients"
            )
        beta, lam = self.step_sizes(problem)
        n = self.inner_steps
        clients = ctx.participants()
        if self.expectation:
            index = -1  # every step starts a new term: z^t = (I - lam H_t) z^{t-1} + r^t
        elif self.index is not None:
            index = self.index
        else:
            index = draw_index(ctx.rng, n)
        y = state.y.detach().clone()
        ctx.broadcast(x, clients, "x")
        ctx.broadcast(y, clients, "y")
        ctx.broadcast(torch.tensor([float(index)], dtype=x.dtype, device=x.device), clients, "Q")
        recursion_step = 1.0 if self.as_printed and self.printed_line6 else lam
        z: torch.Tensor | None = None
        z_trace: list[torch.Tensor] = []
        trajectory = [y]
        for t in range(n + 1):
            term: ClientWork | None = None
            if t >= index:  # a term starts at t = Q (every t in expectation mode, Q = -1)
                term = HessIVTerm(x, y, z, recursion_step, self.expectation or t == index)
            if t < n:
                y, term_z = self.lower_round(ctx, x, y, term, clients, beta)
                z = z if term_z is None else term_z
                trajectory.append(y)
            else:
                assert term is not None
                (last,) = ctx.run_clients(term, clients).uploads
                z = ctx.aggregate(last, clients, "z")
            if z is not None:
                z_trace.append(z)
        assert z is not None
        if self.expectation:
            scale, used = lam, z
        elif self.as_printed and index < n:
            scale, used = lam * (n + 1), z_trace[-2]  # z^{N-1}, as printed in line 15
        else:
            scale, used = lam * (n + 1), z
        p = scale * used
        (direction,) = ctx.run_clients(AggITDDirection(x, y, used, scale), clients).uploads
        value = ctx.aggregate(direction, clients, "h")
        aux = {
            "y": y,
            "index": index,
            "clients": clients,
            "p": p,
            "trajectory": trajectory,
            "step_sizes": (beta, lam),
        }
        return value, InnerState(y), aux

    def lower_round(
        self,
        ctx: FederatedContext,
        x: torch.Tensor,
        y: torch.Tensor,
        term: ClientWork | None,
        clients: torch.Tensor,
        beta: float,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One lower-level round from ``y`` with the Hessian-inverse ``term`` riding on it:
        ``(y^{t+1}, z^t)`` (``z^t`` None without a term). FedSVRG (``lower_solver="svrg"``): the
        term rides on the anchor-gradient round, then One-Round-Lower's local steps are a round
        of their own; FedAvg: the term rides on the local-step round."""
        if self.lower_solver == "svrg":
            anchor, z = round_with_term(ctx, InnerGradient(x, y, rows=False), term, clients, "q")
            lower = LocalIterates(
                y,
                InnerGradientAt(x),
                self.local_steps,
                beta,
                global_direction=anchor,
                scale_by_steps=True,
            )
            return lower.averaged(ctx, clients, "y"), z
        lower = LocalIterates(y, InnerGradientAt(x), self.local_steps, beta, scale_by_steps=True)
        return round_with_term(ctx, lower, term, clients, "y")


def draw_index(rng: np.random.Generator, inner_steps: int) -> int:
    """``Q ~ U{0..N}``, the server's draw in Alg. 1 line 1."""
    return int(rng.integers(0, inner_steps + 1))

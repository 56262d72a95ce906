r"""FedNest's federated building blocks (Tarzanagh et al., ICML 2022, Algs. 2-4): FedInn, the
FedAvg inner baseline, FedIHGP, the local Neumann series of LFedNest, and FedOut's direction.

Notation (docs/glossary.md): ``H = grad^2_y g`` (global), ``H_i = grad^2_y g_i``,
``J_i = grad^2_xy g_i`` (``dx x dy``), ``l = 1 / neumann_step_size`` (the paper's ``l_{g,1}``),
``A = I - H / l``, ``N = neumann_terms``, ``tau_i = local_steps``, ``beta = inner_step_size``.

Every message goes through the :class:`~testbed.federation.context.FederatedContext`'s ledger and
carries one ``dx``- or ``dy``-vector; no Hessian or Jacobian is ever sent. Client work is one
batched oracle call over the participating clients (no per-client Python loop), and the local
loops are the client work :class:`~testbed.federation.local.LocalIterates`. The algorithms'
rounds hand their client work to the context as
:class:`~testbed.federation.client_work.ClientWork` (:class:`IHGPFirstTerm`, :class:`IHGPTerm`,
:class:`OuterDirection`, the local steps with :class:`LocalHypergradientAt`), so the same
per-client code runs batched here and on deployed clients.

Minimax and compositional problems need no separate oracle: the problem families define
``g_i = -f_i`` (minimax), so ``grad_y g_i = -grad_y f_i`` is FedInn's ascent direction ``G_i``
(Sec. 2.4), and ``g_i = 1/2 ||y - r_i(x)||^2`` (compositional), so ``grad_y g_i = y - r_i(x)``
is the ``q_i`` of Sec. 2.4.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any
from typing import ClassVar

import numpy as np
import torch

from problems import Batch
from problems import Problem
from testbed.defaults import FEDNEST_INNER_STEPS
from testbed.defaults import FEDNEST_LOCAL_STEPS
from testbed.defaults import NEUMANN_TERMS
from testbed.estimators.base import InnerState
from testbed.estimators.federated import FederatedEstimator
from testbed.estimators.fedihgp import IHGPResult
from testbed.estimators.fedihgp import Truncation
from testbed.estimators.fedihgp import check_truncation
from testbed.estimators.fedihgp import fedihgp
from testbed.estimators.fedihgp import fedihgp_replicates
from testbed.estimators.fedihgp import truncation_probabilities
from testbed.estimators.fedihgp import truncation_schedule
from testbed.estimators.solvers import problem_constants
from testbed.estimators.validation import check_local_steps
from testbed.estimators.validation import check_positive_int
from testbed.estimators.validation import check_step
from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientSide
from testbed.federation.client_work import WorkAtPoint
from testbed.federation.client_work import portable
from testbed.federation.context import FederatedContext
from testbed.federation.context import send
from testbed.federation.local import InnerGradient
from testbed.federation.local import InnerGradientAt
from testbed.federation.local import LocalDirection
from testbed.federation.local import LocalIterates
from testbed.federation.local import outer_steps_round
from testbed.federation.local import steps_per_client
from testbed.federation.replicates import NotBatchable
from testbed.federation.replicates import Replicates

LocalSteps = int | tuple[int, ...]


# ------------------------------------------------------------------------------- validation


def check_local_steps_fit(local_steps: LocalSteps, problem: Problem) -> None:
    if not isinstance(local_steps, int) and len(local_steps) != problem.n_clients:
        raise ValueError(
            f"local_steps has {len(local_steps)} entries for "
            f"{problem.n_clients} clients; give one tau_i per client"
        )


def lipschitz_default(problem: Problem, what: str) -> float:
    """``l_{g,1} = max_i lambda_max(H_i)`` (FedNest A1) from the problem's constants."""
    return float(problem_constants(problem, f"{what}: step size").L_clients)


def outer_smoothness(problem: Problem) -> float:
    """``||grad^2 h||`` of a closed-form problem, read off its exact hypergradient.

    The closed-form families have a quadratic ``h(x) = f(x, y*(x))``, so the columns of the
    Hessian are ``grad h(e_j) - grad h(0)``.
    """
    exact = getattr(problem, "exact_hypergradient", None)
    if exact is None:
        raise ValueError(
            f"outer_step_size not given and {type(problem).__name__} has no "
            "exact_hypergradient to read the outer smoothness from; pass it"
        )
    zero = torch.zeros(problem.dim_x, dtype=torch.float64)
    base = exact(zero)
    eye = torch.eye(problem.dim_x, dtype=torch.float64)
    hessian = torch.stack([exact(e) - base for e in eye], dim=1)
    return float(torch.linalg.matrix_norm(0.5 * (hessian + hessian.T), ord=2))


# ------------------------------------------------------------------------------- FedInn


def fedinn(
    ctx: FederatedContext,
    x: torch.Tensor,
    y: torch.Tensor,
    inner_step_size: float,
    local_steps: LocalSteps,
    variance_reduction: bool = True,
    scale_by_steps: bool = True,
) -> torch.Tensor:
    r"""One FedInn call (Alg. 4), or one LFedInn / FedAvg call without ``variance_reduction``.

    .. math::

        q &= |S|^{-1} \sum_{i \in S} G_i(y; \zeta_i) \quad\text{(round 1)}, \\
        y_{i,\nu+1} &= y_{i,\nu} - \beta_i \big(G_i(y_{i,\nu}; \zeta_{i,\nu})
                       - G_i(y; \zeta_{i,\nu}) + q\big), \quad
        y^+ = |S|^{-1} \sum_{i \in S} y_{i,\tau_i} \quad\text{(round 2)},

    with ``G_i = grad_y g_i(x, .)``. Without the control variate (Alg. 6 of App. A, reconstructed
    from Table 2 and the authors' code) the local step is ``G_i(y_{i,nu}; zeta_{i,nu})`` and the
    call is one round. ``beta_i = beta / tau_i`` when ``scale_by_steps`` (the step rule of Thm 3.1).
    A fresh client subset S is drawn per call (the experiments' partial participation).

    On a quadratic inner problem with exact oracles (derived from Alg. 4),
    ``y^+ - y* = (I - P H)(y - y*)`` with ``P = mean_i H_i^{-1}(I - (I - beta_i H_i)^{tau_i})``.
    """
    clients = ctx.participants()
    send(ctx, clients, x=x, y=y)
    direction = None
    if variance_reduction:
        (snapshot,) = ctx.run_clients(InnerGradient(x, y), clients).uploads
        direction = ctx.aggregate(snapshot, clients, "q")
    work = LocalIterates(
        y,
        InnerGradientAt(x),
        local_steps,
        inner_step_size,
        global_direction=direction,
        scale_by_steps=scale_by_steps,
    )
    return work.averaged(ctx, clients, "y")


def local_neumann(
    ctx: ClientSide,
    x: torch.Tensor,
    y: torch.Tensor,
    grad_y: torch.Tensor,
    clients: torch.Tensor,
    neumann_terms: int,
    neumann_step_size: float | torch.Tensor,
) -> torch.Tensor:
    r"""LFedNest's local IHGP: ``p_i = (1/l) sum_{j<N} (I - H_i / l)^j grad_y f_i`` per client.

    Only client i's Hessian-vector products and gradient are used (no communication), so
    ``p_i -> H_i^{-1} grad_y f_i``, not ``H^{-1} grad_y f_i`` (biased under heterogeneity:
    Sec. 2.6 says LFedNest degrades on non-iid data). ``x`` may hold one row per client (local outer
    iterates).

    .. warning:: Alg. 5 (App. A) is not in the paper text this was written from (its appendix
       is cut off); this follows the official code's deterministic local Neumann series
       (ucr-optml/FedNest), not the random truncation of Alg. 3.
    """
    # a column of per-row steps: runs on different problems stacked (fednest_stacked)
    lam = neumann_step_size if torch.is_tensor(neumann_step_size) else float(neumann_step_size)
    power, total = grad_y, grad_y
    for _ in range(neumann_terms - 1):
        power = power - lam * ctx.oracles.hvp_inner(x, y, power, clients, ctx.draw(clients))
        total = total + power
    return lam * total


# ------------------------------------------------------------------------------- FedOut


def client_directions(
    ctx: ClientSide,
    x: torch.Tensor,
    y: torch.Tensor,
    p: torch.Tensor | None,
    clients: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The clients' uploads of Alg. 2: direct ``grad_x f_i(x, y; xi_i)`` and indirect
    ``-grad^2_xy g_i(x, y; zeta_i) p`` parts (eq. (13a)); zero indirect part when ``p`` is None
    (minimax, eq. (12))."""
    direct = ctx.oracles.grad_outer_x(x, y, clients, ctx.draw(clients))
    if p is None:
        return direct, torch.zeros_like(direct)
    indirect = -ctx.oracles.jvp_inner_xy(x, y, p, clients, ctx.draw(clients))
    return direct, indirect


@dataclasses.dataclass(frozen=True)
class OuterDirection(WorkAtPoint):
    """FedOut's first round (Alg. 2, eq. (13a)): each client's direct plus indirect part
    (:func:`client_directions`; ``p`` None: minimax, eq. (12))."""

    kind: ClassVar[str] = "outer_direction"
    p: torch.Tensor | None

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        direct, indirect = client_directions(side, self.x, self.y, self.p, clients)
        return ClientReply((direct + indirect,))


def fedout(
    ctx: FederatedContext,
    x: torch.Tensor,
    y: torch.Tensor,
    p: torch.Tensor | None,
    outer_step_size: float,
    local_steps: LocalSteps,
    scale_by_steps: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""FedOut (Alg. 2) after FedIHGP returned ``p`` (``None``: minimax mode, eq. (12)).

    .. math::

        h &= |S|^{-1} \sum_{i \in S} \big(\nabla_x f_i(x, y^+; \xi_i)
             - \nabla^2_{xy} g_i(x, y^+; \zeta_i)\, p_{N'}\big) \quad\text{(round 1)}, \\
        x_{i,\nu+1} &= x_{i,\nu} - \alpha_i \big(\nabla_x f_i(x_{i,\nu}, y^+; \xi_{i,\nu})
                       - \nabla_x f_i(x, y^+; \xi_{i,\nu}) + h\big), \quad
        x^+ = |S|^{-1} \sum_{i \in S} x_{i,\tau_i} \quad\text{(round 2)}.

    Drift correction acts on the direct part only; the indirect part stays frozen in ``h``
    (eqs. (10)-(11)). The same sample is used at both control-variate points (Alg. 2: one
    ``xi_{i,nu}`` in both terms, so the correction has no sampling noise of its own). Returns
    ``(x^+, h)``.
    """
    clients = ctx.participants()
    send(ctx, clients, x=x, y=y)
    if p is not None:
        send(ctx, clients, p=p)
    (direction,) = ctx.run_clients(OuterDirection(x, y, p), clients).uploads
    h = ctx.aggregate(direction, clients, "h")
    x_plus = outer_steps_round(ctx, clients, x, y, h, local_steps, outer_step_size, scale_by_steps)
    return x_plus, h


def lfedout(
    ctx: FederatedContext,
    x: torch.Tensor,
    y: torch.Tensor,
    outer_step_size: float,
    local_steps: LocalSteps,
    neumann_terms: int,
    neumann_step_size: float,
    indirect: bool = True,
    scale_by_steps: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""LFedOut (Alg. 5 of App. A, reconstructed from Table 2 and the authors' code): local
    hypergradient steps, one round.

    .. math::

        x_{i,\nu+1} = x_{i,\nu} - \alpha_i \big(\nabla_x f_i(x_{i,\nu}, y; \xi_{i,\nu})
            - \nabla^2_{xy} g_i(x_{i,\nu}, y; \zeta_{i,\nu})\, p_i(x_{i,\nu})\big), \qquad
        x^+ = |S|^{-1} \sum_{i \in S} x_{i,\tau_i},

    with ``p_i`` the local Neumann series of :func:`local_neumann` (``indirect=False``: the
    minimax form without the indirect term). Returns ``(x^+, h)`` where
    ``h = (x - x^+) / (alpha tau_bar)`` is the mean applied direction (``tau_bar = 1`` under
    ``scale_by_steps``); it is not communicated.

    .. warning:: Reconstructed: Alg. 5 (App. A) is missing from the paper text this was written
       from (its appendix is cut off).
    """
    clients = ctx.participants()
    send(ctx, clients, x=x, y=y)
    direction = LocalHypergradientAt(y, neumann_terms, neumann_step_size, indirect)
    work = LocalIterates(x, direction, local_steps, outer_step_size, scale_by_steps=scale_by_steps)
    x_plus = work.averaged(ctx, clients, "x")
    taus = steps_per_client(local_steps, clients).to(torch.float64)
    applied = 1.0 if scale_by_steps else float(taus.mean())
    return x_plus, (x - x_plus) / (outer_step_size * applied)


@portable
@dataclasses.dataclass(frozen=True)
class LocalHypergradientAt(LocalDirection):
    r"""LFedOut's local direction at the broadcast ``y``: ``grad_x f_i - grad^2_xy g_i p_i``
    with the client's own Neumann series ``p_i`` (:func:`local_neumann`); ``indirect=False``
    drops the second term (minimax)."""

    y: torch.Tensor
    neumann_terms: int
    neumann_step_size: float
    indirect: bool = True

    def __call__(
        self, side: ClientSide, points: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        direct, grad_y = side.oracles.grad_outer(points, self.y, clients, batch)
        if not self.indirect:
            return direct
        p = local_neumann(
            side, points, self.y, grad_y, clients, self.neumann_terms, self.neumann_step_size
        )
        return direct - side.oracles.jvp_inner_xy(points, self.y, p, clients, side.draw(clients))


# ------------------------------------------------------------------------------- estimator


@dataclasses.dataclass(frozen=True)
class FedIHGP(FederatedEstimator):
    r"""FedNest's hypergradient (Tarzanagh et al. 2022, Algs. 3-4 and the first round of Alg. 2).

    From the warm-started inner iterate ``y`` (the state), ``T`` FedInn calls give ``y^+``;
    FedIHGP gives ``p_{N'} = H_hat v`` (eq. (13b)); one round averages the clients' directions:

    .. math::

        \hat h = \frac{1}{|S|} \sum_{i \in S} \big(\nabla_x f_i(x, y^+; \xi_i)
                 - \nabla^2_{xy} g_i(x, y^+; \zeta_i)\, p_{N'}\big)   \qquad\text{(eq. (13a))},

    with ``E[H_hat] = H^{-1}(I - (I - H/l)^N)`` (Lemma 2.2, eq. (14a)). Rounds per estimate:
    ``2T + (N' + 1) + 1`` (random) or ``2T + (N + 1) + 1`` (deterministic).

    Args:
        inner_steps: T >= 0 FedInn calls (0: use the state's ``y`` as ``y^+``).
        local_steps: tau (one int, or one tau_i per client).
        inner_step_size: beta; ``None`` means ``1 / l_{g,1}`` (``max_i lambda_max(H_i)``).
        neumann_terms: N >= 1.
        neumann_step_size: ``1 / l_{g,1}``; ``None`` reads it from the problem's constants.
        truncation: "random" (Alg. 3) or "deterministic" (the repo's full sum; see
            :func:`fedihgp`).
        scale_by_steps: local steps ``beta / tau_i`` (Thm 3.1's rule).
        participation: client subsets ``S_n`` and ``S`` (``None``: all clients).
        batch_size: per-client minibatch (``None``: exact local objectives).
    """

    inner_steps: int = FEDNEST_INNER_STEPS
    local_steps: LocalSteps = FEDNEST_LOCAL_STEPS
    inner_step_size: float | None = None
    neumann_terms: int = NEUMANN_TERMS
    neumann_step_size: float | None = None
    truncation: Truncation = "random"
    scale_by_steps: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int(self.inner_steps, "inner_steps")
        check_local_steps(self.local_steps)
        check_step(self.inner_step_size, "inner_step_size")
        check_positive_int(self.neumann_terms, "neumann_terms", minimum=1)
        check_step(self.neumann_step_size, "neumann_step_size")
        check_truncation(self.truncation)

    def initial_state(self, problem: Problem) -> InnerState:
        check_local_steps_fit(self.local_steps, problem)
        return InnerState(problem.initial_point()[1])

    def steps(self, problem: Problem) -> tuple[float, float]:
        """``(beta, 1/l)`` with the defaults resolved from the problem's constants."""
        beta = self.inner_step_size or 1.0 / lipschitz_default(problem, "FedIHGP")
        lam = self.neumann_step_size or 1.0 / lipschitz_default(problem, "FedIHGP")
        return beta, lam

    def ihgp(
        self,
        ctx: FederatedContext,
        x: torch.Tensor,
        y: torch.Tensor,
        truncation_index: int | None = None,
    ) -> IHGPResult:
        """FedIHGP at ``(x, y)`` with this estimator's parameters."""
        _, lam = self.steps(ctx.problem)
        return fedihgp(ctx, x, y, self.neumann_terms, lam, self.truncation, truncation_index)

    def replicates(self, problem: Problem, rngs: Sequence[np.random.Generator]) -> Replicates:
        """Replicates of a run on ``problem`` (one per generator), with this estimator's
        participation and batch size: what :meth:`context` is to one run."""
        return Replicates(problem, rngs, self.participation, self.batch_size)

    def ihgp_replicates(
        self, side: Replicates, x: torch.Tensor, y: torch.Tensor, truncation_index: int | None
    ) -> torch.Tensor:
        """:meth:`ihgp`'s paths for every replicate of ``side`` (:func:`fedihgp_replicates`).

        Raises:
            NotBatchable: for a subclass that changes :meth:`ihgp` or :meth:`context`
                (a planted mistake around the real call), whose replicates must run one by one
                through it.
        """
        cls = type(self)
        if cls.ihgp is not FedIHGP.ihgp or cls.context is not FederatedEstimator.context:
            raise NotBatchable(f"{cls.__name__} changes ihgp or context: run it per replicate")
        _, lam = self.steps(side.problem)
        schedule = truncation_schedule(self.neumann_terms, lam, self.truncation, truncation_index)
        return fedihgp_replicates(side, x, y, schedule)

    def truncation_probabilities(self) -> np.ndarray:
        """Distribution of ``N'`` over ``0..N-1`` (random truncation)."""
        return truncation_probabilities(self.neumann_terms)

    def direction(
        self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor, p: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One round: ``(h, per-client direct, per-client indirect)`` at ``(x, y)`` given ``p``."""
        clients = ctx.participants()
        send(ctx, clients, x=x, y=y)
        if p is not None:
            send(ctx, clients, p=p)
        direct, indirect = client_directions(ctx, x, y, p, clients)
        return ctx.aggregate(direct + indirect, clients), direct, indirect

    def inner(self, ctx: FederatedContext, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``T`` FedInn calls from ``y``."""
        beta, _ = self.steps(ctx.problem)
        for _ in range(self.inner_steps):
            y = fedinn(ctx, x, y, beta, self.local_steps, True, self.scale_by_steps)
        return y

    def estimate_in(
        self, ctx: FederatedContext, x: torch.Tensor, state: InnerState
    ) -> tuple[torch.Tensor, InnerState, dict[str, Any]]:
        y = self.inner(ctx, x, state.y)
        result = self.ihgp(ctx, x, y)
        h, _, _ = self.direction(ctx, x, y, result.p)
        return (
            h,
            InnerState(y),
            {"y": y, "p": result.p, "truncation_index": result.truncation_index},
        )


__all__ = [
    "FedIHGP",
    "LocalHypergradientAt",
    "OuterDirection",
    "client_directions",
    "fedinn",
    "fedout",
    "lfedout",
    "local_neumann",
]

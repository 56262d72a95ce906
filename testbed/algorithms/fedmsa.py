r"""FedMSA (Tarzanagh, Li, Sharma, Oymak 2023, arXiv 2306.01648), Algorithm 1.

One round ``r`` (``rho = 1`` and ``K = 1`` at ``r = 0``, Algorithm 1 line 3):

1. **Global step (5)** on all M clients, each with one fresh sample used at the current and the
   previous server points (STORM-type momentum on the previous *global* averages):

   .. math::

       h_r^m &= p^m(x_r, Z_r; \xi_r^m)
               + (1 - \rho)\,(h_{r-1} - p^m(x_{r-1}, Z_{r-1}; \xi_r^m)) \qquad (5a) \\
       q_r^{m,n} &= s^{m,n}(z_r^{n-1}, z_r^n; \zeta_r^{m,n})
               + (1 - \rho)\,(q_{r-1}^n - s^{m,n}(z_{r-1}^{n-1}, z_{r-1}^n; \zeta_r^{m,n}))
               \qquad (5b)

   and the server averages: ``(h_r, q_r) = avg_m (h_r^m, q_r^m)``.
2. **Local SARAH/SPIDER recursion (6)** on one client ``m~ ~ Unif[M]``, for ``k = 1..K``, with a
   fresh sample per step used at both points, and *simultaneous* x/Z updates (lines 10-11):

   .. math::

       h_{r,k} &= p^{m~}(x_{r+1,k}, Z_{r+1,k}; \xi_{r,k}) + h_{r,k-1}
                 - p^{m~}(x_{r+1,k-1}, Z_{r+1,k-1}; \xi_{r,k}) \qquad (6a) \\
       x_{r+1,k+1} &= x_{r+1,k} - \alpha h_{r,k}, \qquad
       z^n_{r+1,k+1} = z^n_{r+1,k} - \beta_n q^n_{r,k},

   from ``h_{r,0} = h_r`` and ``x_{r+1,1} = x_{r+1,0} = x_r`` (so ``h_{r,1} = h_r`` exactly), and
   the server adopts the client's last iterate (line 12).

The maps ``p^m, s^m`` come from a maps object (:mod:`testbed.algorithms.fedmsa_maps`): eq. (10)
for bilevel and minimax problems, eq. (11) for multi-level compositional ones.

**Communication (two rounds per round, Sec. 3: "two rounds of communication ... for each
iteration").** Round 1: the server broadcasts ``(x_r, Z_r)`` (and ``(x_{r-1}, Z_{r-1})`` when
``rho < 1``) to all M clients, which upload ``(h_r^m, q_r^m)``; the ledger's aggregation averages
them and echoes ``(h_r, q_r)`` to every client; that echo is line 6's message to ``m~`` and the
``h_{r-1}`` of the next round's (5). Round 2 is a one-client aggregation: ``m~`` uploads its last
local iterate ``(x_{r+1}, Z_{r+1})``, the server adopts it (the average of one payload) and echoes
it back. So the ledger counts exactly 2 rounds per round; with the "exact" compositional semantics
the global step needs ``1 + N`` aggregations and a round costs ``2 + N``.

**Generalised variant (the Conclusion's, Sec. 6; what the authors' experiments ran).** With
``participation`` a fraction (e.g. 0.1), ``S`` clients run the local recursion from the same ``(h_r,
q_r)`` and the server averages their models (one aggregation over the S clients); constant ``rho``,
full-batch maps. The paper's Conclusion mentions it; there is no theory for it.

.. warning::
   Deviations and readings: (Fed-MSA) writes ``P = sum_m P^m``; Algorithm 1 and every objective
   use averages, so averages are used throughout. (10a) has a typo, corrected in
   :class:`~testbed.algorithms.fedmsa_maps.BilevelMaps`. The proof's per-client batch ``K b``
   in (5) and initial batch ``b_0 = K R`` are not in the algorithm box; here every oracle uses
   ``batch_size`` samples (the batches appear only in App. B's proofs). The output rule (a uniformly
   random local iterate) is left to the caller: the state keeps the last round's local iterates.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any
from typing import ClassVar
from typing import NamedTuple

import torch

from problems import Problem
from testbed.algorithms.base import OuterAlgorithm
from testbed.algorithms.fedmsa_maps import BilevelMaps
from testbed.algorithms.fedmsa_maps import CompositionalMaps
from testbed.algorithms.fedmsa_maps import GlobalStepInputs
from testbed.algorithms.fedmsa_maps import MapInputs
from testbed.algorithms.fedmsa_maps import MSAMaps
from testbed.algorithms.fedmsa_maps import draw_batches
from testbed.algorithms.rounds import RoundsFormula
from testbed.estimators.validation import check_positive_int
from testbed.estimators.validation import check_step_below
from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientSide
from testbed.federation.client_work import ClientWork
from testbed.federation.client_work import portable
from testbed.federation.context import FederatedContext


@dataclasses.dataclass(frozen=True)
class LocalIterate:
    """Local step ``k`` of round ``r`` on the sampled client(s): the point ``(x_{r+1,k},
    Z_{r+1,k})`` at which ``(h_{r,k}, q_{r,k})`` was evaluated, one row per local client."""

    k: int
    x: torch.Tensor
    Z: torch.Tensor
    h: torch.Tensor
    q: torch.Tensor


@dataclasses.dataclass(frozen=True)
class FedMSAState:
    """FedMSA's server state after ``round`` rounds.

    Attributes:
        x, Z: the server point ``(x_r, Z_r)``; ``Z = [z^1; ...; z^N]`` flat (BLO: ``[w; v]``).
        h, q: the global directions ``(h_{r-1}, q_{r-1})`` of the last round (None initially).
        x_prev, Z_prev: the previous server point (``= (x_0, Z_0)`` initially, line 1).
        round: rounds done.
        clients: the client(s) that ran the local phase of the last round.
        anchor_x, anchor_Z: the server point the last round started from.
        local: the last round's local iterates (:class:`LocalIterate`), for the output rule.
    """

    x: torch.Tensor
    Z: torch.Tensor
    h: torch.Tensor | None = None
    q: torch.Tensor | None = None
    x_prev: torch.Tensor | None = None
    Z_prev: torch.Tensor | None = None
    round: int = 0
    clients: torch.Tensor | None = None
    anchor_x: torch.Tensor | None = None
    anchor_Z: torch.Tensor | None = None
    local: tuple[LocalIterate, ...] = ()


def _check_step(value: Any, name: str) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and value > 0.0)
    ):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


@portable
@dataclasses.dataclass(frozen=True)
class FedMSA(OuterAlgorithm):
    """FedMSA (Tarzanagh et al. 2023), Algorithm 1; see the module docstring.

    Args:
        maps: :class:`BilevelMaps` (eq. (10); bilevel and minimax) or
            :class:`CompositionalMaps` (eq. (11); multi-level compositional).
        outer_step_size: alpha, the step on x.
        inner_step_size: beta_n, the step on each ``z^n``: one number for every level or one per
            level (BLO: one level ``[w; v]``).
        momentum: rho in ``[0, 1]`` (1: no momentum); forced to 1 at round 0.
        local_steps: K >= 1; forced to 1 at round 0.
        participation: clients that run the local phase: ``1`` (the paper: one client
            ``m~ ~ Unif[M]``) or a fraction / count (the generalised variant: their models are
            averaged). The global step (5) always uses all M clients.
        batch_size: per-client minibatch of every oracle; ``None`` for exact local maps.
    """

    maps: MSAMaps = dataclasses.field(default_factory=BilevelMaps)
    outer_step_size: float = 0.05
    inner_step_size: float | tuple[float, ...] = 0.1
    momentum: float = 0.5
    local_steps: int = 1
    participation: float | int | None = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.maps, MSAMaps):
            raise ValueError(
                f"maps must be BilevelMaps() or CompositionalMaps(), got {self.maps!r}"
            )
        _check_step(self.outer_step_size, "outer_step_size (alpha)")
        betas = (
            self.inner_step_size
            if isinstance(self.inner_step_size, Sequence)
            else (self.inner_step_size,)
        )
        if len(betas) == 0:
            raise ValueError("inner_step_size (beta) needs at least one value")
        for beta in betas:
            _check_step(beta, "inner_step_size (beta)")
        if (
            isinstance(self.momentum, bool)
            or not isinstance(self.momentum, (int, float))
            or not 0.0 <= self.momentum <= 1.0
        ):
            raise ValueError(f"momentum (rho) must be a number in [0, 1], got {self.momentum!r}")
        check_positive_int(self.local_steps, "local_steps (K)", minimum=1)

    @property
    def supports(self) -> frozenset[str]:  # type: ignore[override]
        return self.maps.kinds

    def rounds_formula(self) -> RoundsFormula | None:
        """2 (Sec. 3: one local round and one aggregation); ``None`` for the "exact"
        compositional semantics, whose count ``2 + N`` depends on the problem
        (:meth:`rounds_per_round`)."""
        if isinstance(self.maps, CompositionalMaps) and self.maps.semantics == "exact":
            return None
        return RoundsFormula("2", {}, "FedMSA (Tarzanagh et al. 2023), Sec. 3")

    def rounds_per_round(self, problem: Problem) -> int:
        """Ledger rounds of one FedMSA round on ``problem``: ``1 + global_rounds``."""
        return 1 + self.maps.global_rounds(problem)

    # ----------------------------------------------------------------- set-up
    def _betas(self, problem: Problem) -> torch.Tensor:
        sizes = self.maps.level_sizes(problem)
        betas = (
            tuple(self.inner_step_size)
            if isinstance(self.inner_step_size, Sequence)
            else (self.inner_step_size,) * len(sizes)
        )
        if len(betas) != len(sizes):
            raise ValueError(
                f"inner_step_size has {len(betas)} values for {len(sizes)} "
                "levels; give one value or one per level"
            )
        return torch.cat(
            [
                torch.full((size,), float(b), dtype=torch.float64)
                for b, size in zip(betas, sizes, strict=True)
            ]
        )

    def init(self, problem: Problem) -> FedMSAState:
        self.check_problem(problem)
        x0, Z0 = self.maps.initial(problem)
        return self.state_at(problem, x0, Z0)

    def state_at(
        self, problem: Problem, x0: torch.Tensor, Z0: torch.Tensor | None = None
    ) -> FedMSAState:
        """Initial state at ``(x_0, Z_0)`` (Z_0 defaults to the maps' initial Z)."""
        self.check_problem(problem)
        self._betas(problem)
        if Z0 is None:
            Z0 = self.maps.initial(problem)[1]
        # floating iterates keep their dtype and device (float32 workloads); others -> float64
        x0 = x0.detach().clone()
        x0 = x0 if x0.is_floating_point() else x0.to(torch.float64)
        Z0 = Z0.detach().clone().to(device=x0.device)
        Z0 = Z0 if Z0.is_floating_point() else Z0.to(torch.float64)
        return FedMSAState(x=x0, Z=Z0, x_prev=x0, Z_prev=Z0)

    # ----------------------------------------------------------------- one round
    def global_directions(self, step: GlobalStepInputs) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h_r, q_r)`` of eq. (5), through the maps' global step (communication 1)."""
        return self.maps.global_step(step)

    def correction_point(
        self,
        current: tuple[torch.Tensor, torch.Tensor],
        previous: tuple[torch.Tensor, torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Where recursion (6) takes its correction's second term: ``p(x_k) - p(x_{k-1})``
        uses the previous local iterate ``(x_{k-1}, Z_{k-1})``."""
        del current
        return previous

    def advance(self, ctx: FederatedContext, state: FedMSAState) -> FedMSAState:
        first = state.round == 0
        rho = 1.0 if first else float(self.momentum)
        K = 1 if first else self.local_steps
        dx = int(state.x.shape[0])
        everyone = ctx.all_clients()
        here = torch.cat([state.x, state.Z])
        # communication 1: the server point(s) down, (h^m, q^m) up, (h_r, q_r) echoed to all
        if rho == 1.0:
            sent = here
            points, prev = ctx.broadcast(sent, everyone, "point"), None
        else:
            assert state.x_prev is not None and state.Z_prev is not None
            sent = torch.cat([here, state.x_prev, state.Z_prev])
            both = ctx.broadcast(sent, everyone, "point")
            points, prev = both[:, : here.shape[0]], both[:, here.shape[0] :]
        h, q = self.global_directions(GlobalStepInputs(ctx, points, prev, state.h, state.q, rho))
        # communication 2: local recursion (6) on the sampled client(s), model up
        local_clients = ctx.participants()
        work = MSALocalRecursion(self, sent, torch.cat([h, q]), dx, K)
        reply = ctx.run_clients(work, local_clients)
        model = ctx.aggregate(reply.uploads[0], local_clients, "model")
        return FedMSAState(
            x=model[:dx],
            Z=model[dx:],
            h=h,
            q=q,
            x_prev=state.x,
            Z_prev=state.Z,
            round=state.round + 1,
            clients=local_clients,
            anchor_x=state.x,
            anchor_Z=state.Z,
            local=reply.trace or (),
        )

    def check_problem(self, problem: Problem) -> None:
        """A problem of the maps' kinds, and steps ``beta`` inside the stability region the
        problem gives (:meth:`MSAMaps.inner_step_region`): a ``beta`` beyond it took ``||x||``
        to 4.4e10 in 3 rounds without a word."""
        if problem.kind not in self.maps.kinds:
            raise ValueError(
                f"FedMSA with {type(self.maps).__name__} does not support "
                f"{problem.kind} problems (supports: {sorted(self.maps.kinds)})"
            )
        if isinstance(self.maps, CompositionalMaps):
            self.maps.level_sizes(problem)  # raises a clear error without level maps
        region = self.maps.inner_step_region(problem)
        if region is None:
            return
        bound, constant = region
        betas = (
            self.inner_step_size
            if isinstance(self.inner_step_size, Sequence)
            else (self.inner_step_size,)
        )
        for beta in betas:
            check_step_below(
                float(beta),
                bound,
                "FedMSA.inner_step_size (beta)",
                problem,
                f"(0, {bound:.6g})",
                constant,
                "FedMSA's default 0.1",
            )


@dataclasses.dataclass(frozen=True)
class MSALocalRecursion(ClientWork):
    r"""The local phase of a round on the sampled client(s): ``K`` steps of recursion (6) from
    the broadcast point ``(x_r, Z_r)`` (the first ``d_0 + d_Z`` entries of ``sent``) and the
    round's averages ``[h_r; q_r]`` (``echo``); the upload is the last local iterate
    ``[x_{r+1}; Z_{r+1}]``, the trace the local iterates (:class:`LocalIterate`).

    The configuration is the algorithm's (``alpha``, the ``beta_n``, the maps and the
    correction point of (6)).
    """

    kind: ClassVar[str] = "msa_local_recursion"
    config: FedMSA
    sent: torch.Tensor
    echo: torch.Tensor
    dim_x: int
    local_steps: int

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        config, dx, S = self.config, self.dim_x, int(clients.shape[0])
        dz = sum(config.maps.level_sizes(side.problem))
        x0, Z0 = self.sent[:dx], self.sent[dx : dx + dz]
        betas = config._betas(side.problem).to(Z0)  # the iterates' dtype and device
        h, q = self.echo[:dx], self.echo[dx:]
        start = LocalStart(x0.expand(S, -1), Z0.expand(S, -1), h.expand(S, -1), q.expand(S, -1))
        return local_recursion(
            config, side, clients, start, self.local_steps, config.outer_step_size, betas
        )


class LocalStart(NamedTuple):
    """Where recursion (6) starts on each local client row: the broadcast point ``(x_r, Z_r)``
    and the round's averages ``(h_r, q_r)``, one row per client."""

    x: torch.Tensor
    Z: torch.Tensor
    h: torch.Tensor
    q: torch.Tensor


def local_recursion(
    config: FedMSA,
    side: ClientSide,
    clients: torch.Tensor,
    start: LocalStart,
    local_steps: int,
    alpha: float | torch.Tensor,
    betas: torch.Tensor,
) -> ClientReply:
    """``K`` steps of recursion (6) on the rows of ``clients`` from ``start``, at the steps
    ``alpha`` and ``betas`` (a row's own when they have rows: runs on stacked problems,
    :mod:`testbed.algorithms.fedmsa_stacked`): the last local iterates ``[x; Z]`` uploaded, the
    local iterates (:class:`LocalIterate`) as the trace."""
    xk, Zk = start.x.clone(), start.Z.clone()
    xa, Za = xk, Zk
    hk, qk = start.h.clone(), start.q.clone()
    S = int(clients.shape[0])
    iterates = []
    for k in range(1, local_steps + 1):
        batches = draw_batches(side, clients, config.maps.n_batches)
        xa, Za = config.correction_point((xk, Zk), (xa, Za))
        at = MapInputs(side.oracles, xk, Zk, clients, batches)
        p, s = config.maps.evaluate(at.twice(xa, Za))
        hk = p[:S] + hk - p[S:]
        qk = s[:S] + qk - s[S:]
        iterates.append(LocalIterate(k, xk, Zk, hk, qk))
        xa, Za = xk, Zk
        xk, Zk = xk - alpha * hk, Zk - betas * qk  # simultaneous (Jacobi)
    return ClientReply((torch.cat([xk, Zk], dim=1),), tuple(iterates))

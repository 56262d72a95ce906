r"""FedMSA's per-client maps ``p^m`` and ``s^m`` for bilevel and multi-level compositional problems.

FedMSA (Tarzanagh, Li, Sharma, Oymak 2023, arXiv 2306.01648) solves the multi-sequence system
(Fed-MSA) ``avg_m P^m(x, Z) = 0``, ``avg_m S^{m,n}(z^{n-1}, z^n) = 0`` (``n = 1..N``, ``z^0 = x``).
A maps object turns a problem into those maps, evaluated for many clients in one batched call:
``evaluate(MapInputs(oracles, x (C, d_0), Z (C, d_Z), clients (C,), batches))`` returns
``p (C, d_0)`` and ``s (C, d_Z)``, where ``Z = [z^1; ...; z^N]`` is stored flat.

- :class:`BilevelMaps` (eq. (10), ``N = 1``, ``z = [w; v]``), from the problem's autodiff oracles
  (:class:`testbed.oracles.Oracles`), so it runs unchanged on any bilevel or minimax problem:

  .. math::

      S^m(x, z) &= [\nabla_w g^m(x, w);\ \nabla^2_w g^m(x, w) v - \nabla_w f^m(x, w)]
          \qquad (10a,\ \text{corrected}), \\
      P^m(x, z) &= \nabla_x f^m(x, w) - \nabla^2_{xw} g^m(x, w) v \qquad (10b).

  At ``w = w*(x)``, ``v = v*(x) = [grad^2_w g]^{-1} grad_w f`` (global averages), P^m is linear
  in the client's quantities and v is shared, so ``avg_m P^m(x, z*(x)) = grad F(x)`` exactly.

  .. warning::
     (10a) as printed has ``grad_x f^m`` in the second block; that is a typo (eq. (2) has ``grad_w
     f^m``): it must be ``grad_w f^m`` (dimensions, eq. (2) and the authors' ``s_func`` agree). The
     corrected map is implemented.

- :class:`CompositionalMaps` (eq. (11), ``N >= 1`` levels, any problem with ``level_map``):

  .. math::

      S^{m,n}(z^{n-1}, z^n) &= z^n - f^{m,n-1}(z^{n-1}) \qquad (11a), \\
      P^m(x, Z) &= \nabla f^{m,0}(x) \nabla f^{m,1}(z^1) \cdots \nabla f^{m,N}(z^N) \qquad (11b),

  with ``grad f`` the transposed Jacobian, computed as a chain of vector-Jacobian products from
  the top. ``semantics="paper"`` is (11b): the server averages the clients' *products*.
  ``semantics="exact"`` is the product of server-averaged Jacobians ((Fed-MCO)'s gradient),
  ``grad fbar^0(x) ... grad fbar^N(z^N)``, the true gradient of (Fed-MCO) at ``Z = Z*(x)``; the
  global step then needs one aggregation per level (:meth:`CompositionalMaps.global_step`).

  .. warning::
     Under Jacobian heterogeneity the average of products is not the product of averages
     (Sec. 2.3, App. D): the fixed point of the "paper" maps is in general not a stationary point
     of (Fed-MCO). Both semantics are offered so that the bias can be measured.

Oracle counting for the compositional maps (``Calls`` has bilevel names): a level value
``f^{m,n-1}(z^{n-1})`` (the ``s`` evaluation, the y-gradient of ``1/2||z - f(u)||^2``) counts as
``grad_g``, the top-level gradient ``grad f^{m,N}`` as ``grad_f`` and each vector-Jacobian product
through a lower level as ``jvp``; one client on one batch counts 1.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any
from typing import ClassVar
from typing import Literal
from typing import NamedTuple

import torch

from problems import Batch
from problems import Problem
from testbed.federation.client_work import ClientReply
from testbed.federation.client_work import ClientSide
from testbed.federation.client_work import ClientWork
from testbed.federation.client_work import portable
from testbed.federation.context import FederatedContext
from testbed.oracles import Oracles

Batches = list[Batch | None]


def repeat_batch(batch: Batch | None, times: int) -> Batch | None:
    """The same per-client sample indices stacked ``times`` times (one sample, several points)."""
    if batch is None:
        return None
    return Batch(batch.indices.repeat(times, 1))


def draw_batches(ctx: ClientSide, clients: torch.Tensor, count: int) -> Batches:
    """``count`` independent minibatches (``xi``, ``zeta^1``, ...) for ``clients``."""
    return [ctx.draw(clients) for _ in range(count)]


class MapInputs(NamedTuple):
    """The rows the maps are evaluated at: ``x (C, d_0)`` and ``Z (C, d_Z)``, row c for client
    ``clients[c]``, on the minibatches ``batches`` (``xi``, ``zeta``), through ``oracles``."""

    oracles: Oracles
    x: torch.Tensor
    Z: torch.Tensor
    clients: torch.Tensor
    batches: Batches

    def twice(self, x_other: torch.Tensor, Z_other: torch.Tensor) -> MapInputs:
        """These rows stacked over the same clients' rows at ``(x_other, Z_other)``, each client
        on the same samples at both points (the differences of eqs. (5) and (6)); the first C
        rows of the maps' values are at this point, the last C at the other."""
        return MapInputs(
            self.oracles,
            torch.cat([self.x, x_other]),
            torch.cat([self.Z, Z_other]),
            self.clients.repeat(2),
            [repeat_batch(b, 2) for b in self.batches],
        )


class GlobalStepInputs(NamedTuple):
    """The inputs of eq. (5)'s global step: the context, the broadcast points ``(x_r, Z_r)``
    (M identical rows ``(M, d_0 + d_Z)``) and ``(x_{r-1}, Z_{r-1})`` (``None`` when ``rho = 1``),
    the previous global averages ``h_{r-1}``, ``q_{r-1}`` (``None`` in round 0) and the momentum
    rho."""

    ctx: FederatedContext
    points: torch.Tensor
    prev: torch.Tensor | None
    h_prev: torch.Tensor | None
    q_prev: torch.Tensor | None
    rho: float


class MSAMaps(abc.ABC):
    """Per-client maps of an MSA reformulation, evaluated for many clients at once."""

    kinds: ClassVar[frozenset[str]]
    #: independent minibatches per evaluation (``xi`` for p, ``zeta^n`` for the s-blocks)
    n_batches: ClassVar[int] = 2

    @abc.abstractmethod
    def level_sizes(self, problem: Problem) -> tuple[int, ...]:
        """Sizes ``(d_1, ..., d_N)`` of the blocks of ``Z`` (BLO: one block ``[w; v]``)."""

    def n_levels(self, problem: Problem) -> int:
        return len(self.level_sizes(problem))

    @abc.abstractmethod
    def initial(self, problem: Problem) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_0, Z_0)``."""

    @abc.abstractmethod
    def inner_step_region(self, problem: Problem) -> tuple[float, str] | None:
        """The end of the stable steps ``beta`` on ``Z`` and the constant it comes from, or
        None when the problem does not give it."""

    @abc.abstractmethod
    def evaluate(self, at: MapInputs) -> tuple[torch.Tensor, torch.Tensor]:
        """``(p^m(x_c, Z_c), s^m(x_c, Z_c))`` for each row c, client ``at.clients[c]``."""

    def global_rounds(self, problem: Problem) -> int:
        """Aggregations used by :meth:`global_step` (1: per-client estimates are averaged)."""
        return 1

    def global_step(self, step: GlobalStepInputs) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Eq. (5) over all M clients, one aggregation; returns ``(h_r, q_r)``.

        Each client uses one sample at both points:
        ``h^m = p^m(x_r; xi) + (1 - rho)(h_{r-1} - p^m(x_{r-1}; xi))``, likewise ``q^m``
        (:class:`MSAGlobalStep`, the clients' part).
        """
        ctx, points, prev, h_prev, q_prev, rho = step
        dx = points.shape[1] - sum(self.level_sizes(ctx.problem))
        clients = ctx.all_clients()
        # what every client was sent, and the averages of the last round it was sent back
        sent = points[0] if prev is None else torch.cat([points[0], prev[0]])
        echo = None if h_prev is None or q_prev is None else torch.cat([h_prev, q_prev])
        work = MSAGlobalStep(self, sent, echo, rho, dx, prev is not None)
        (uploads,) = ctx.run_clients(work, clients).uploads
        mean = ctx.aggregate(uploads, clients, "hq")
        return mean[:dx], mean[dx:]


@dataclasses.dataclass(frozen=True)
class MSAGlobalStep(ClientWork):
    """The clients' part of eq. (5) (:meth:`MSAMaps.global_step`): ``[h^m; q^m]`` from the
    broadcast point (and the previous one) and the averages ``[h_{r-1}; q_{r-1}]`` of the last
    round (``echo``, which every client was sent back).

    Attributes:
        sent: ``[x_r; Z_r]``, or ``[x_r; Z_r; x_{r-1}; Z_{r-1}]`` when ``with_previous``.
        dim_x: ``d_0``, where ``Z`` starts.
    """

    kind: ClassVar[str] = "msa_global_step"
    maps: MSAMaps
    sent: torch.Tensor
    echo: torch.Tensor | None
    rho: float
    dim_x: int
    with_previous: bool

    def run(self, side: ClientSide, clients: torch.Tensor) -> ClientReply:
        M = int(clients.shape[0])
        rows = self.sent.detach().expand(M, -1).clone()  # the broadcast's per-client copies
        return global_step_rows(
            self.maps, side, clients, rows, self.echo, self.rho, self.dim_x, self.with_previous
        )


def global_step_rows(
    maps: MSAMaps,
    side: ClientSide,
    clients: torch.Tensor,
    rows: torch.Tensor,
    echo: torch.Tensor | None,
    rho: float,
    dim_x: int,
    with_previous: bool,
) -> ClientReply:
    """The clients' uploads ``[h^m; q^m]`` of eq. (5) (:class:`MSAGlobalStep`) at the points
    each client row holds (``rows``: ``[x_r; Z_r]``, then ``[x_{r-1}; Z_{r-1}]`` when
    ``with_previous``) with the averages ``echo`` of the last round (one vector, or a row per
    client: runs on stacked problems, :mod:`testbed.algorithms.fedmsa_stacked`)."""
    dx, M = dim_x, int(clients.shape[0])
    if with_previous:
        width = rows.shape[1] // 2
        points, prev = rows[:, :width], rows[:, width:]
    else:
        points, prev = rows, None
    batches = draw_batches(side, clients, maps.n_batches)
    at = MapInputs(side.oracles, points[:, :dx], points[:, dx:], clients, batches)
    if prev is None or rho == 1.0:
        h_m, q_m = maps.evaluate(at)
    else:
        assert echo is not None
        h_prev, q_prev = echo[..., :dx], echo[..., dx:]
        p, s = maps.evaluate(at.twice(prev[:, :dx], prev[:, dx:]))
        h_m = p[:M] + (1.0 - rho) * (h_prev - p[M:])
        q_m = s[:M] + (1.0 - rho) * (q_prev - s[M:])
    return ClientReply((torch.cat([h_m, q_m], dim=1),))


@portable
@dataclasses.dataclass(frozen=True)
class BilevelMaps(MSAMaps):
    """FedMSA's bilevel maps, eq. (10) with the corrected (10a); ``Z = [w; v]``.

    ``batches = [xi, zeta]``: ``xi`` samples the outer objective f, ``zeta`` the inner g.
    One evaluation costs, per row, one ``grad_f`` (both partials), one ``grad_g``, one ``hvp`` and
    one ``jvp``.
    """

    kinds: ClassVar[frozenset[str]] = frozenset({"bilevel", "minimax"})

    def level_sizes(self, problem: Problem) -> tuple[int, ...]:
        return (2 * problem.dim_y,)

    def inner_step_region(self, problem: Problem) -> tuple[float, str] | None:
        """``z = (w, v)`` moves along ``(grad_y g(w), H v - grad_y f(w))``: both multiply their
        error by ``I - beta H``, so ``beta < 2 / L`` (the problem's inner smoothness), as for
        gradient descent; None when the problem has no constants."""
        constants = getattr(problem, "constants", None)
        if constants is None:
            return None
        L = float(constants().L)
        return 2.0 / L, f"L = {L:.6g}"

    def initial(self, problem: Problem) -> tuple[torch.Tensor, torch.Tensor]:
        x0, y0 = problem.initial_point()
        return x0.clone(), torch.cat([y0, torch.zeros_like(y0)])

    def evaluate(self, at: MapInputs) -> tuple[torch.Tensor, torch.Tensor]:
        oracles, x, Z, clients, (xi, zeta) = at
        dy = oracles.problem.dim_y
        w, v = Z[:, :dy], Z[:, dy:]
        fx, fw = oracles.grad_outer(x, w, clients, xi)
        gw = oracles.grad_inner(x, w, clients, zeta)
        Hv = oracles.hvp_inner(x, w, v, clients, zeta)
        Jv = oracles.jvp_inner_xy(x, w, v, clients, zeta)
        return fx - Jv, torch.cat([gw, Hv - fw], dim=1)


@portable
@dataclasses.dataclass(frozen=True)
class CompositionalMaps(MSAMaps):
    """FedMSA's multi-level compositional maps, eq. (11); ``Z = [z^1; ...; z^N]``.

    Args:
        semantics: ``"paper"`` (11b, average of per-client products) or ``"exact"`` (product of
            server-averaged Jacobians, one extra aggregation per level in the global step).

    ``batches = [xi, zeta^1, ..., zeta^N]`` is not fixed in length, so ``n_batches`` is two and
    the s-blocks share ``zeta``; the Jacobians of every level share ``xi`` (as the authors'
    notebook does).
    """

    kinds: ClassVar[frozenset[str]] = frozenset({"compositional"})
    semantics: Literal["paper", "exact"] = "paper"

    def inner_step_region(self, problem: Problem) -> tuple[float, str] | None:
        """``z^n`` moves along ``z^n - f_n(z^{n-1})``, whose derivative in ``z^n`` is the
        identity: ``z^n <- (1 - beta) z^n + beta f_n``, stable for ``beta < 2``."""
        del problem
        return 2.0, "the tracking map z^n - f_n(z^(n-1)) has unit slope in z^n"

    def __post_init__(self) -> None:
        if self.semantics not in ("paper", "exact"):
            raise ValueError(f"semantics must be 'paper' or 'exact', got {self.semantics!r}")

    def level_sizes(self, problem: Problem) -> tuple[int, ...]:
        dims = _dims(problem)
        return tuple(dims[1:])

    def initial(self, problem: Problem) -> tuple[torch.Tensor, torch.Tensor]:
        dims = _dims(problem)
        return (
            torch.zeros(dims[0], dtype=torch.float64),
            torch.zeros(sum(dims[1:]), dtype=torch.float64),
        )

    def split(self, problem: Problem, Z: torch.Tensor) -> list[torch.Tensor]:
        return list(torch.split(Z, list(self.level_sizes(problem)), dim=-1))

    def s_values(
        self,
        oracles: Oracles,
        x: torch.Tensor,
        Z: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        """``[z^n - f^{m,n-1}(z^{n-1})]_{n=1..N}`` (11a); one batched call per level."""
        problem: Any = oracles.problem
        zs = [x, *self.split(problem, Z)]
        blocks = [
            zs[n] - problem.level_map(n - 1, zs[n - 1], clients, batch).detach()
            for n in range(1, len(zs))
        ]
        oracles.counter.add("grad_g", int(clients.shape[0]) * (len(zs) - 1))
        return torch.cat(blocks, dim=1)

    def top_gradient(
        self,
        oracles: Oracles,
        u: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        """``grad f^{m,N}(u)`` per row."""
        problem: Any = oracles.problem
        return _level_gradient(oracles, problem.n_levels, u, None, clients, batch, "grad_f")

    def vjp(
        self,
        oracles: Oracles,
        n: int,
        u: torch.Tensor,
        g: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        """``grad f^{m,n}(u) g`` (transposed Jacobian of level n times g) per row."""
        return _level_gradient(oracles, n, u, g, clients, batch, "jvp")

    def evaluate(self, at: MapInputs) -> tuple[torch.Tensor, torch.Tensor]:
        oracles, x, Z, clients, (xi, zeta) = at
        zs = [x, *self.split(oracles.problem, Z)]
        g = self.top_gradient(oracles, zs[-1], clients, xi)
        for n in range(len(zs) - 2, -1, -1):
            g = self.vjp(oracles, n, zs[n], g, clients, xi)
        return g, self.s_values(oracles, x, Z, clients, zeta)

    def global_rounds(self, problem: Problem) -> int:
        return 1 if self.semantics == "paper" else 1 + self.n_levels(problem)

    def global_step(self, step: GlobalStepInputs) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Eq. (5); with ``"exact"`` semantics the P-part is a chain of aggregations.

        Round 1 uploads ``q^m`` (as in (5b)) and ``grad f^{m,N}(z^N)`` at the current (and
        previous) point; the server averages and echoes. Then for ``n = N-1, ..., 0`` one round
        uploads ``grad f^{m,n}(z^n) gbar_{n+1}`` at both points. The last average is
        ``P(x, Z) = grad fbar^0(x) ... grad fbar^N(z^N)`` at both points and
        ``h_r = P(x_r, Z_r) + (1 - rho)(h_{r-1} - P(x_{r-1}, Z_{r-1}))`` (same samples at both).
        """
        if self.semantics == "paper":
            return super().global_step(step)
        ctx, points, prev, h_prev, q_prev, rho = step
        problem: Any = ctx.problem
        dx = points.shape[1] - sum(self.level_sizes(problem))
        clients = ctx.all_clients()
        M = int(clients.shape[0])
        xi, zeta = draw_batches(ctx, clients, self.n_batches)
        use_prev = prev is not None and rho != 1.0
        rows = torch.cat([points, prev]) if prev is not None and use_prev else points
        copies = 2 if use_prev else 1
        cl = clients.repeat(copies)
        xi2, zeta2 = repeat_batch(xi, copies), repeat_batch(zeta, copies)
        x_rows, Z_rows = rows[:, :dx], rows[:, dx:]
        s = self.s_values(ctx.oracles, x_rows, Z_rows, cl, zeta2)
        if use_prev:
            assert q_prev is not None
            q_m = s[:M] + (1.0 - rho) * (q_prev - s[M:])
        else:
            q_m = s
        zs = [x_rows, *self.split(problem, Z_rows)]
        top = self.top_gradient(ctx.oracles, zs[-1], cl, xi2)
        mean = ctx.aggregate(torch.cat([q_m, _pair(top, M, copies)], dim=1), clients)
        q = mean[: q_m.shape[1]]
        g = _unpair(mean[q_m.shape[1] :], copies)  # (copies, d_N): the averaged top gradients
        for n in range(len(zs) - 2, -1, -1):
            grads = self.vjp(ctx.oracles, n, zs[n], g.repeat_interleave(M, dim=0), cl, xi2)
            g = _unpair(ctx.aggregate(_pair(grads, M, copies), clients), copies)
        if use_prev:
            assert h_prev is not None
            return g[0] + (1.0 - rho) * (h_prev - g[1]), q
        return g[0], q

    def exact_map(self, problem: Any, x: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        """``P(x, Z)`` of the chosen semantics at one point, full objectives, not counted."""
        oracles = Oracles(problem)
        clients = torch.arange(problem.n_clients)
        M = problem.n_clients
        rows_x, rows_Z = x.expand(M, -1), Z.expand(M, -1)
        if self.semantics == "paper":
            at = MapInputs(oracles, rows_x, rows_Z, clients, [None, None])
            return self.evaluate(at)[0].mean(0)
        zs = [rows_x, *self.split(problem, rows_Z)]
        g = self.top_gradient(oracles, zs[-1], clients, None).mean(0)
        for n in range(len(zs) - 2, -1, -1):
            g = self.vjp(oracles, n, zs[n], g.expand(M, -1), clients, None).mean(0)
        return g


def _level_gradient(
    oracles: Oracles,
    n: int,
    u: torch.Tensor,
    g: torch.Tensor | None,
    clients: torch.Tensor,
    batch: Batch | None,
    kind: str,
) -> torch.Tensor:
    """``grad f^{m,n}(u) g`` per row, the gradient of ``f^{m,n}`` itself when ``g`` is None (the
    top level, a scalar per row), counted as ``kind``; a lower level that does not depend on
    ``u`` has a zero Jacobian, the top level must depend on it."""
    problem: Any = oracles.problem
    with torch.enable_grad():
        us = u.detach().clone().requires_grad_(True)
        values = problem.level_map(n, us, clients, batch)
        total = (values if g is None else values * g.detach()).sum()
        (grad,) = torch.autograd.grad(total, (us,), allow_unused=g is not None)
    oracles.counter.add(kind, int(clients.shape[0]))
    return torch.zeros_like(us) if grad is None else grad


def _pair(rows: torch.Tensor, M: int, copies: int) -> torch.Tensor:
    """``(copies * M, d)`` stacked by copy -> ``(M, copies * d)`` per-client payloads."""
    return torch.cat([rows[c * M : (c + 1) * M] for c in range(copies)], dim=1)


def _unpair(mean: torch.Tensor, copies: int) -> torch.Tensor:
    return mean.reshape(copies, -1)


def _dims(problem: Problem) -> tuple[int, ...]:
    dims = getattr(problem, "dims", None)
    if dims is None or getattr(problem, "n_levels", None) is None:
        raise ValueError(
            f"{type(problem).__name__} has no level maps (dims, n_levels, level_map); "
            "the compositional FedMSA maps need a multi-level compositional problem"
        )
    return tuple(int(d) for d in dims)

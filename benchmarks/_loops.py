"""The baselines the batched client axis is measured against, beside it in the same run.

Honest per-client loops (what a competent engineer would write without a client axis), each a
problem wrapper whose oracles loop over the evaluated clients, so the registered algorithms run
on it unchanged (:class:`testbed.Oracles` calls a problem's ``oracle_*`` methods when it has them):

- :class:`ClosedFormLoop`: client i's derivatives from its own matrices, ``A_i @ y - B_i @ x - b_i``
  and so on (``A_i`` is a view of the stacked array: no gather, no copy);
- :class:`AutogradLoop`: autodiff of client i's loss written with two-operand products
  (``0.5 y @ (A_i @ y) - y @ (B_i @ x) - b_i @ y``), one small graph per client;
- :class:`WorkloadLoop`: autodiff of a workload's own row function (``inner_row`` /
  ``outer_row``, the function the batched path vmaps) called on client i's samples directly.

The same-work replica (:func:`fednest_replica`, :func:`fbo_aggitd_replica`) is one outer iteration
written as plain batched tensor code with the same oracle calls as the registered algorithm (the
same 78 per client for FedNest at T = 5, tau = 5, N = 10) and none of the testbed's machinery
(ledger, contexts, counters, validation): the floor of what the batched code could cost with the
same kernels. :class:`ReadCounter` counts the client arrays one outer iteration's oracle calls
must read (each oracle reads only the matrices its formula has: ``grad_y g`` reads A and B,
``grad_x f`` D and E, ``grad_y f`` C and D, an HVP A, a mixed product B; 145 matrix reads per
FedNest round at T = 5, tau = 5, N = 10), and :func:`stream_pass` reads exactly those bytes
with ``torch.sum`` (a pure streaming read): its time, measured beside the round, is the
per-oracle streaming bound.

Every baseline is asserted equal to the batched result where it is timed (the benchmark fails
otherwise).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import torch

from problems import Batch
from problems import Problem
from problems import ProblemWrapper
from problems import QuadraticBilevel
from problems import matvec
from problems import rmatvec

# ------------------------------------------------------------------------------- per-client loops


def _looped(per_client: str) -> Callable[..., torch.Tensor]:
    """The protocol's oracle (``oracle_grad_inner``, ``oracle_hvp_inner``, ``oracle_jvp_inner_xy``)
    as a loop of the method ``per_client`` over the evaluated clients (:meth:`_Loop._each`): it
    takes the protocol's arguments, the vectors (``x, y`` and the product's ``v``), then
    ``clients`` and ``batch``."""

    def oracle(self: _Loop, *arguments: Any) -> torch.Tensor:
        *vectors, clients, batch = arguments
        return self._each(getattr(self, per_client), clients, batch, *vectors)

    return oracle


class _Loop(ProblemWrapper, abc.ABC):
    """Problem contract of ``problem`` with oracles evaluated one client at a time."""

    @property
    def id(self) -> str:
        return f"{type(self).__name__}({self.wrapped.id})"

    def _each(
        self,
        fn: Callable[..., torch.Tensor],
        clients: torch.Tensor,
        batch: Batch | None,
        *vectors: torch.Tensor,
    ) -> torch.Tensor:
        if batch is not None:
            raise ValueError(f"{type(self).__name__} times exact local objectives only")
        out = []
        for c, i in enumerate(clients.tolist()):
            out.append(fn(i, *(v if v.ndim == 1 else v[c] for v in vectors)))
        return torch.stack(out)

    # subclasses give the per-client functions
    @abc.abstractmethod
    def grad_inner_i(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Client ``i``'s ``grad_y g_i``."""

    @abc.abstractmethod
    def grad_outer_i(
        self, i: int, x: torch.Tensor, y: torch.Tensor, wrt: str
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Client ``i``'s ``(grad_x f_i, grad_y f_i)``."""

    @abc.abstractmethod
    def hvp_i(self, i: int, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Client ``i``'s ``grad^2_y g_i v``."""

    @abc.abstractmethod
    def jvp_i(self, i: int, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Client ``i``'s ``grad^2_xy g_i v``."""

    # the ClosedFormOracles protocol, as loops
    oracle_grad_inner = _looped("grad_inner_i")
    oracle_hvp_inner = _looped("hvp_i")
    oracle_jvp_inner_xy = _looped("jvp_i")

    def oracle_grad_outer(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
        wrt: str = "xy",
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if batch is not None:
            raise ValueError(f"{type(self).__name__} times exact local objectives only")
        parts = [
            self.grad_outer_i(i, x if x.ndim == 1 else x[c], y if y.ndim == 1 else y[c], wrt)
            for c, i in enumerate(clients.tolist())
        ]
        gx = torch.stack([p[0] for p in parts]) if "x" in wrt else None
        gy = torch.stack([p[1] for p in parts]) if "y" in wrt else None
        return gx, gy


class ClosedFormLoop(_Loop):
    """Per-client closed forms of :class:`~problems.QuadraticBilevel`: ``A_i @ y - B_i @ x - b_i``
    and so on, ``A_i`` a view of the stacked array."""

    def __init__(self, problem: QuadraticBilevel) -> None:
        super().__init__(problem)
        self.A, self.B, self.b, self.C, self.D, self.c, self.E, self.e = _arrays(problem)

    def grad_inner_i(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.A[i] @ y - self.B[i] @ x - self.b[i]

    def grad_outer_i(
        self, i: int, x: torch.Tensor, y: torch.Tensor, wrt: str
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        gx = self.D[i].T @ y + self.E[i] @ x + self.e[i] if "x" in wrt else None
        gy = self.C[i] @ y + self.D[i] @ x + self.c[i] if "y" in wrt else None
        return gx, gy

    def hvp_i(self, i: int, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.A[i] @ v

    def jvp_i(self, i: int, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return -(self.B[i].T @ v)


class _AutogradRows(_Loop, abc.ABC):
    """Autodiff, one client at a time, of per-client scalar losses ``inner(i, x, y)`` and
    ``outer(i, x, y)`` (subclasses define them)."""

    @abc.abstractmethod
    def inner(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Client ``i``'s ``g_i(x, y)`` (a scalar)."""

    @abc.abstractmethod
    def outer(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Client ``i``'s ``f_i(x, y)`` (a scalar)."""

    def grad_inner_i(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        y = y.detach().requires_grad_(True)
        (gy,) = torch.autograd.grad(self.inner(i, x.detach(), y), (y,))
        return gy

    def grad_outer_i(
        self, i: int, x: torch.Tensor, y: torch.Tensor, wrt: str
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        x = x.detach().requires_grad_("x" in wrt)
        y = y.detach().requires_grad_("y" in wrt)
        targets = [t for t, w in ((x, "x"), (y, "y")) if w in wrt]
        loss = self.outer(i, x, y)
        grads = (
            list(torch.autograd.grad(loss, targets, allow_unused=True))
            if loss.requires_grad
            else [None] * len(targets)
        )
        grads = [
            torch.zeros_like(t) if g is None else g for g, t in zip(grads, targets, strict=True)
        ]
        gx = grads.pop(0) if "x" in wrt else None
        gy = grads.pop(0) if "y" in wrt else None
        return gx, gy

    def _second(
        self, i: int, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor, wrt_x: bool
    ) -> torch.Tensor:
        x = x.detach().requires_grad_(wrt_x)
        y = y.detach().requires_grad_(True)
        (gy,) = torch.autograd.grad(self.inner(i, x, y), (y,), create_graph=True)
        target = x if wrt_x else y
        (out,) = torch.autograd.grad(gy @ v, (target,))
        return out

    def hvp_i(self, i: int, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self._second(i, x, y, v, wrt_x=False)

    def jvp_i(self, i: int, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self._second(i, x, y, v, wrt_x=True)


class AutogradLoop(_AutogradRows):
    """Autodiff of client i's quadratic losses written with two-operand products."""

    def __init__(self, problem: QuadraticBilevel) -> None:
        super().__init__(problem)
        self.A, self.B, self.b, self.C, self.D, self.c, self.E, self.e = _arrays(problem)

    def inner(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 0.5 * y @ (self.A[i] @ y) - y @ (self.B[i] @ x) - self.b[i] @ y

    def outer(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (
            0.5 * y @ (self.C[i] @ y)
            + y @ (self.D[i] @ x)
            + self.c[i] @ y
            + 0.5 * x @ (self.E[i] @ x)
            + self.e[i] @ x
        )


class WorkloadLoop(_AutogradRows):
    """Autodiff of a workload's row functions on client i's own samples (no vmap, no gather)."""

    def __init__(self, problem: Any) -> None:
        super().__init__(problem)
        self.train, self.val = problem.data.train, problem.data.val

    def inner(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = self.train
        return self.wrapped.inner_row(x, y, (s.inputs[i], s.labels[i], s.weights[i]))

    def outer(self, i: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = self.val
        return self.wrapped.outer_row(x, y, (s.inputs[i], s.labels[i], s.weights[i]))


# ------------------------------------------------------------------------------- same-work replica


def _arrays(problem: QuadraticBilevel) -> tuple[torch.Tensor, ...]:
    p = problem
    return p.A, p.B, p.b, p.C, p.D, p.c, p.E, p.e


def _local_steps(step: float, n_clients: int, local_steps: int, dtype: torch.dtype) -> torch.Tensor:
    """Each client's local step size, ``step / tau`` as an ``(M, 1)`` column."""
    return torch.full((n_clients, 1), step, dtype=dtype) / local_steps


def _svrg_round(
    point: torch.Tensor,
    grad: Callable[[torch.Tensor], torch.Tensor],
    direction: torch.Tensor,
    step: torch.Tensor,
    local_steps: int,
) -> torch.Tensor:
    """``tau`` SVRG steps of every client from the shared ``point`` (its anchor), with the
    averaged ``direction`` as the correction, then the average of the local iterates.

    ``grad`` is the clients' stacked gradient at their stacked points; ``step`` the ``(M, 1)``
    step sizes (:func:`_local_steps`)."""
    anchors = point.expand(int(step.shape[0]), -1)
    local = anchors.clone()
    for _ in range(local_steps):
        local = local - step * (grad(local) - grad(anchors) + direction)
    return local.mean(0)


def _fedout(
    problem: QuadraticBilevel,
    x: torch.Tensor,
    y: torch.Tensor,
    p: torch.Tensor,
    alpha: torch.Tensor,
    local_steps: int,
) -> torch.Tensor:
    """FedOut (FedNest Alg. 2, AggITD's outer update): ``h = mean(grad_x f - grad^2_xy g p)``,
    then ``tau`` SVRG steps on x; returns ``x^+``."""

    def grad_x(xs: torch.Tensor) -> torch.Tensor:
        return rmatvec(problem.D, y) + rmatvec(problem.E, xs) + problem.e

    h = (grad_x(x) + rmatvec(problem.B, p)).mean(0)
    return _svrg_round(x, grad_x, h, alpha, local_steps)


def fednest_replica(
    problem: QuadraticBilevel,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    inner_steps: int,
    local_steps: int,
    neumann_terms: int,
    inner_step: float,
    outer_step: float,
    neumann_step: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One FedNest iteration (Alg. 1: T FedInn calls, deterministic FedIHGP, FedOut; full
    participation, exact oracles, SVRG at both levels, steps / tau) as bare batched tensor code.

    Per client: ``T (1 + 2 tau)`` inner gradients, 2 outer gradients, N HVPs, 1 mixed product
    and ``2 tau`` outer gradients in FedOut's local steps: the registered algorithm's calls.
    Returns ``(x^+, y^+)``.
    """
    A, B, b, C, D, c, _, _ = _arrays(problem)
    M = problem.n_clients
    beta = _local_steps(inner_step, M, local_steps, y.dtype)
    alpha = _local_steps(outer_step, M, local_steps, x.dtype)
    lam = neumann_step

    def grad_inner(ys: torch.Tensor) -> torch.Tensor:
        return rmatvec(A, ys) - matvec(B, x) - b

    for _ in range(inner_steps):  # FedInn (Alg. 4): anchor round, then tau SVRG steps
        q = grad_inner(y.expand(M, -1)).mean(0)
        y = _svrg_round(y, grad_inner, q, beta, local_steps)
    # FedIHGP, deterministic truncation: p = lam sum_{j <= N} (I - lam H)^j grad_y f
    p = (lam * (rmatvec(C, y) + matvec(D, x) + c)).mean(0)
    total = p
    for _ in range(neumann_terms):
        p = (p - lam * rmatvec(A, p)).mean(0)
        total = total + p
    return _fedout(problem, x, y, total, alpha, local_steps), y


def fbo_aggitd_replica(
    problem: QuadraticBilevel,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    inner_steps: int,
    local_steps: int,
    index: int,
    inner_step: float,
    outer_step: float,
    neumann_step: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One FBO-AggITD iteration (Alg. 3 with Alg. 1, 2, 4; FedSVRG lower level, full
    participation, exact oracles, draw ``Q = index``) as bare batched tensor code."""
    A, B, b, C, D, c, _, _ = _arrays(problem)
    M, n, lam = problem.n_clients, inner_steps, neumann_step
    beta = _local_steps(inner_step, M, local_steps, y.dtype)
    alpha = _local_steps(outer_step, M, local_steps, x.dtype)

    def grad_inner(ys: torch.Tensor) -> torch.Tensor:
        return rmatvec(A, ys) - matvec(B, x) - b

    z = None
    for t in range(n + 1):
        upload = None
        if t == index:
            upload = rmatvec(C, y) + matvec(D, x) + c
        elif t > index:
            upload = z - lam * rmatvec(A, z)
        if t < n:
            q = grad_inner(y.expand(M, -1)).mean(0)
            if upload is not None:
                z = upload.mean(0)
            y = _svrg_round(y, grad_inner, q, beta, local_steps)
        else:
            z = upload.mean(0)
    return _fedout(problem, x, y, lam * (n + 1) * z, alpha, local_steps), y


# ------------------------------------------------------------------------------- streaming bound

#: The client arrays each closed-form oracle of QuadraticBilevel must read.
READS = {
    "grad_inner": ("A", "B", "b"),
    "grad_outer_x": ("D", "E", "e"),
    "grad_outer_y": ("C", "D", "c"),
    "grad_outer_xy": ("C", "D", "E", "c", "e"),
    "hvp_inner": ("A",),
    "jvp_inner_xy": ("B",),
}


class ReadCounter:
    """``problem`` with its closed-form oracles counted: which client arrays they read.

    ``reads[name]`` is the number of whole-stack reads of array ``name`` (a call over C of the M
    clients counts C / M), ``bytes`` their total size.
    """

    def __init__(self, problem: QuadraticBilevel) -> None:
        self._problem = problem
        self.bytes = 0
        self.reads: dict[str, float] = {}
        self._row_bytes = {k: getattr(problem, k)[0].numel() * 8 for k in "ABbCDcEe"}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._problem, name)

    def _count(self, kind: str, clients: torch.Tensor) -> None:
        share = int(clients.shape[0]) / self._problem.n_clients
        for name in READS[kind]:
            self.reads[name] = self.reads.get(name, 0.0) + share
            self.bytes += int(clients.shape[0]) * self._row_bytes[name]

    def oracle_grad_inner(self, x: Any, y: Any, clients: torch.Tensor, batch: Any) -> Any:
        self._count("grad_inner", clients)
        return self._problem.oracle_grad_inner(x, y, clients, batch)

    def oracle_grad_outer(
        self, x: Any, y: Any, clients: torch.Tensor, batch: Any, wrt: str = "xy"
    ) -> Any:
        self._count({"x": "grad_outer_x", "y": "grad_outer_y"}.get(wrt, "grad_outer_xy"), clients)
        return self._problem.oracle_grad_outer(x, y, clients, batch, wrt)

    def oracle_hvp_inner(self, x: Any, y: Any, v: Any, clients: torch.Tensor, batch: Any) -> Any:
        self._count("hvp_inner", clients)
        return self._problem.oracle_hvp_inner(x, y, v, clients, batch)

    def oracle_jvp_inner_xy(self, x: Any, y: Any, v: Any, clients: torch.Tensor, batch: Any) -> Any:
        self._count("jvp_inner_xy", clients)
        return self._problem.oracle_jvp_inner_xy(x, y, v, clients, batch)


def stream_pass(problem: QuadraticBilevel, reads: dict[str, float]) -> Callable[[], None]:
    """A pure streaming read (``torch.sum``) of the client arrays, each as many whole times as
    ``reads`` says (rounded): timed beside the round, ``bytes / its time`` is the bandwidth of
    this machine for these arrays at this moment and its time the per-oracle streaming bound."""
    plan = [
        getattr(problem, name)
        for name, count in sorted(reads.items())
        for _ in range(int(round(count)))
    ]

    def run() -> None:
        for array in plan:
            array.sum()

    return run


def problem_bytes(problem: Problem) -> int:
    """Bytes of every client array of a closed-form quadratic."""
    return sum(getattr(problem, k).numel() * 8 for k in "ABbCDcEe")

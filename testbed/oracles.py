"""Counted, client-batched first- and second-order oracles: closed forms or torch autodiff.

Every method takes stacked per-client iterates ``x (C, dx)`` and ``y (C, dy)`` (a single
``(d,)`` vector is broadcast to every client), a ``(C,)`` tensor of client indices and an optional
minibatch, and returns one row per evaluated client.

Two paths compute the same numbers (to float64 round-off; ``tests/test_fast_path.py`` cross-checks
them to 1e-12 relative on every closed-form family):

- **closed form**: a problem that knows its derivatives (:class:`problems._base.ClosedFormOracles`:
  the quadratic bilevel, minimax and compositional families) gives them as batched matrix-vector
  products that read only the arrays each formula has, with no autodiff graph at all;
- **autodiff** of the problem's per-client losses, for every other problem (the MLP/CNN
  workloads, :class:`problems.PerClientLoop`), relying only on the row-separability contract of
  :mod:`problems._base`. Only the inputs a derivative is taken with respect to are made to
  require gradients, so e.g. a Hessian-vector product in y does not record the network body's
  forward pass in x. ``Oracles(problem, autograd=True)`` forces this path.

In formulas (row c of each output is client ``clients[c]``'s value at its own iterate):

- ``grad_outer``: ``(grad_x f_i, grad_y f_i)`` (``grad_outer_x`` / ``grad_outer_y``: one part, one
  call each); ``grad_inner``: ``grad_y g_i``;
- ``hvp_inner(v)``: ``grad^2_y g_i v = grad_y <grad_y g_i, v>``;
- ``jvp_inner_xy(v)``: ``grad^2_xy g_i v = grad_x <grad_y g_i, v>``.

Counts: one outer gradient (either part, or both from one pass) counts one ``grad_f`` per client.

**Repeated exact calls** (:class:`ExactCallMemo`). FedOut (FedNest Alg. 2) and FedInn (Alg. 4)
evaluate the SVRG anchor gradient, e.g. ``grad_x f_i(x, y^+; xi_{i,nu})``, at every local step;
with exact local objectives (no minibatch) those are the same call at the same tensors. On the
autodiff path, where one outer gradient of a network is a forward and a backward pass (a third of
a FedNest iteration on the MNIST-shaped MLP), a repeat is answered from the first result. It is
still counted: the counts are the papers' cost model, the calls the algorithm makes (and with
minibatches every call draws new samples and is computed).
"""

from __future__ import annotations

import torch

from problems import Batch
from problems import ClosedFormOracles
from problems import Problem
from problems import RecentCache
from problems import is_plain
from problems import memory_key
from testbed.calls import CallCounter

Key = tuple[object, ...]


def _rows(value: torch.Tensor, count: int) -> torch.Tensor:
    return value.expand(count, -1) if value.ndim == 1 else value


def _leaf(value: torch.Tensor, count: int, grad: bool) -> torch.Tensor:
    """Rows of ``value`` cut from any caller graph; a leaf requiring gradients when ``grad``.

    Rows the caller passed as ``(C, d)`` are used without a copy (``detach`` shares memory); a
    shared ``(d,)`` vector is materialised per client only when a gradient is taken with respect
    to it (autodiff then returns one row per client).
    """
    if value.ndim == 1:
        rows = value.detach().expand(count, -1)
        return rows.clone().requires_grad_(True) if grad else rows
    rows = value.detach()
    return rows.requires_grad_(True) if grad else rows


# Why 2: a local step asks for the gradient at the client's moving point and then at the anchor,
# so the anchor's entry must survive one other call; more entries would only hold more memory
# (one (C, d) result each).
MEMO_SIZE = 2


def _rows_key(value: torch.Tensor) -> Key:
    """The memory key of a stack of rows; a vector broadcast to every client (``(d,)``, or its
    ``expand(C, d)`` view, stride 0 along the clients) keys as that vector, since both give
    every client the same point."""
    if value.ndim == 2 and value.stride(0) == 0:
        value = value[0]
    return memory_key(value)


def _versions(values: tuple[torch.Tensor | None, ...]) -> tuple[int, ...]:
    return tuple(-1 if value is None else value._version for value in values)


class ExactCallMemo:
    """The last result of each exact first-order oracle, for a repeat at the very same tensors.

    Eligible calls have no minibatch and plain tensors (:func:`problems._rows.is_plain`). The key
    is the memory key of ``x`` and ``y`` (:func:`_rows_key`) and the client tensor's identity and
    version; the memo holds those tensors (so their memory is not reused while the entry lives)
    and the ``MEMO_SIZE`` most recently used entries per oracle. An in-place change to any of
    them, or to the result the first call handed out, bumps a version and misses. Hits are
    handed out as copies, so a caller may change what it receives.
    """

    def __init__(self) -> None:
        self._entries: dict[str, RecentCache] = {}  # one per oracle
        self.hits = self.misses = 0

    @staticmethod
    def key(
        x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> Key | None:
        """The call's key, or ``None`` when it is not eligible."""
        if batch is not None or not (is_plain(x) and is_plain(y) and is_plain(clients)):
            return None
        return (*_rows_key(x), *_rows_key(y), id(clients), clients._version)

    def get(self, oracle: str, key: Key | None) -> tuple[torch.Tensor | None, ...] | None:
        if key is None:
            return None
        entries = self._entries.setdefault(oracle, RecentCache(MEMO_SIZE))
        # an entry is (result, the result's versions when stored): changed since, it is stale
        hit = entries.get(key, valid=lambda entry: entry[1] == _versions(entry[0]))
        if hit is None:
            self.misses += 1
            return None
        self.hits += 1
        return tuple(None if part is None else part.clone() for part in hit[0])

    def put(
        self,
        oracle: str,
        key: Key | None,
        holds: tuple[torch.Tensor, ...],
        value: tuple[torch.Tensor | None, ...],
    ) -> None:
        if key is not None:
            entries = self._entries.setdefault(oracle, RecentCache(MEMO_SIZE))
            entries.put(key, holds, (value, _versions(value)))

    def clear(self) -> None:
        self._entries.clear()


class Oracles:
    """Oracles of ``problem`` that add every evaluation to ``counter``.

    Args:
        problem: any :class:`problems.Problem`.
        counter: where the counts go (a fresh one by default).
        autograd: differentiate the losses even when the problem has closed-form oracles (for
            cross-checks).
        memo: answer repeated exact first-order calls on the autodiff path from their first
            result (module docstring; ``False`` recomputes every call, for cross-checks). The
            closed forms are always evaluated: there a call costs about what a lookup does,
            and the benchmarks' same-work replicas make every call.
    """

    def __init__(
        self,
        problem: Problem,
        counter: CallCounter | None = None,
        *,
        autograd: bool = False,
        memo: bool = True,
    ) -> None:
        self.problem = problem
        self.counter = counter if counter is not None else CallCounter()
        self.closed_form: ClosedFormOracles | None = (
            problem if not autograd and isinstance(problem, ClosedFormOracles) else None
        )
        self.memo = ExactCallMemo() if memo else None

    def _recall(
        self,
        oracle: str,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> tuple[Key | None, tuple[torch.Tensor | None, ...] | None]:
        if self.memo is None:
            return None, None
        key = self.memo.key(x, y, clients, batch)
        return key, self.memo.get(oracle, key)

    def _remember(
        self,
        oracle: str,
        key: Key | None,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        value: tuple[torch.Tensor | None, ...],
    ) -> None:
        if self.memo is not None:
            self.memo.put(oracle, key, (x, y, clients), value)

    # ----------------------------------------------------------------------- outer gradients
    def _grad_outer(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
        wrt: str,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        count = int(clients.shape[0])
        if self.closed_form is not None:
            gx, gy = self.closed_form.oracle_grad_outer(x.detach(), y.detach(), clients, batch, wrt)
        else:
            gx, gy = self._autodiff_grad_outer(x, y, clients, batch, wrt)
        self.counter.add("grad_f", count)
        return gx, gy

    def _autodiff_grad_outer(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
        wrt: str,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        key, hit = self._recall(f"grad_f:{wrt}", x, y, clients, batch)
        if hit is not None:
            return hit[0], hit[1]
        count = int(clients.shape[0])
        xs = _leaf(x, count, "x" in wrt)
        ys = _leaf(y, count, "y" in wrt)
        targets = tuple(t for t, w in ((xs, "x"), (ys, "y")) if w in wrt)
        loss = self.problem.outer_loss(xs, ys, clients, batch).sum()
        # a loss that does not depend on the requested part (loss tuning's f_i has no x)
        # has no graph at all: its gradient is zero
        grads = (
            list(torch.autograd.grad(loss, targets, allow_unused=True))
            if loss.requires_grad
            else [None] * len(targets)
        )
        gx = gy = None
        if "x" in wrt:
            gx = grads.pop(0)
            gx = torch.zeros_like(xs) if gx is None else gx
        if "y" in wrt:
            gy = grads.pop(0)
            gy = torch.zeros_like(ys) if gy is None else gy
        self._remember(f"grad_f:{wrt}", key, x, y, clients, (gx, gy))
        return gx, gy

    def grad_outer(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(grad_x f_i, grad_y f_i)`` for each evaluated client: ``(C, dx)``, ``(C, dy)``."""
        gx, gy = self._grad_outer(x, y, clients, batch, "xy")
        assert gx is not None and gy is not None
        return gx, gy

    def grad_outer_x(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None = None,
    ) -> torch.Tensor:
        """``grad_x f_i`` alone (one outer-gradient call per client): ``(C, dx)``."""
        return self._grad_outer_part(x, y, clients, batch, "x")

    def grad_outer_y(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None = None,
    ) -> torch.Tensor:
        """``grad_y f_i`` alone (one outer-gradient call per client): ``(C, dy)``; no gradient
        in x is computed (on a workload, none for the network body)."""
        return self._grad_outer_part(x, y, clients, batch, "y")

    def _grad_outer_part(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None, wrt: str
    ) -> torch.Tensor:
        gx, gy = self._grad_outer(x, y, clients, batch, wrt)
        part = gx if wrt == "x" else gy
        assert part is not None
        return part

    # ----------------------------------------------------------------------- inner derivatives
    def grad_inner(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None = None,
    ) -> torch.Tensor:
        """``grad_y g_i`` for each evaluated client: ``(C, dy)``."""
        count = int(clients.shape[0])
        if self.closed_form is not None:
            gy = self.closed_form.oracle_grad_inner(x.detach(), y.detach(), clients, batch)
        else:
            key, hit = self._recall("grad_g", x, y, clients, batch)
            if hit is not None and hit[0] is not None:
                gy = hit[0]
            else:
                xs, ys = _leaf(x, count, False), _leaf(y, count, True)
                loss = self.problem.inner_loss(xs, ys, clients, batch).sum()
                (gy,) = torch.autograd.grad(loss, (ys,))
                self._remember("grad_g", key, x, y, clients, (gy,))
        self.counter.add("grad_g", count)
        return gy

    def _second_order(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
        wrt_x: bool,
    ) -> torch.Tensor:
        """``grad_x <grad_y g_i, v_i>`` (``wrt_x``) or ``grad_y <grad_y g_i, v_i>``, closed form or
        autodiff, counted as one mixed product (``jvp``) or one HVP per client."""
        if self.closed_form is not None:
            product = (
                self.closed_form.oracle_jvp_inner_xy if wrt_x else self.closed_form.oracle_hvp_inner
            )
            out = product(x.detach(), y.detach(), v.detach(), clients, batch)
        else:
            out = self._autodiff_second_order(x, y, v, clients, batch, wrt_x)
        self.counter.add("jvp" if wrt_x else "hvp", int(clients.shape[0]))
        return out

    def _autodiff_second_order(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
        wrt_x: bool,
    ) -> torch.Tensor:
        count = int(clients.shape[0])
        xs, ys = _leaf(x, count, wrt_x), _leaf(y, count, True)
        loss = self.problem.inner_loss(xs, ys, clients, batch).sum()
        (gy,) = torch.autograd.grad(loss, (ys,), create_graph=True)
        inner = (gy * _rows(v, count).detach()).sum()
        target = xs if wrt_x else ys
        (out,) = torch.autograd.grad(inner, (target,), allow_unused=True)
        return torch.zeros_like(target) if out is None else out.detach()

    def hvp_inner(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None = None,
    ) -> torch.Tensor:
        """``grad^2_y g_i v_i`` for each evaluated client: ``(C, dy)``."""
        return self._second_order(x, y, v, clients, batch, wrt_x=False)

    def jvp_inner_xy(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        v: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None = None,
    ) -> torch.Tensor:
        """``grad^2_xy g_i v_i`` (the ``dx x dy`` cross derivative times v): ``(C, dx)``."""
        return self._second_order(x, y, v, clients, batch, wrt_x=True)

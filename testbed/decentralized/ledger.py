"""The graph ledger: the one place every message between decentralized clients passes.

In HGP (Alg. 1, Alg. 2) and SGP the only communication is gossip: at each step every client j
sends ``(z_j / |N_j^out|, omega_j / |N_j^out|)`` to each out-neighbour, a ``d + 1``-float message
per edge (``d`` = the shared model's dimension, the paper's d_x). :meth:`GraphLedger.transmit`
performs that step (the weighted sum ``A @ payload``) and counts, per client and per edge, the
messages and floats. Self-loops are not communication and are not counted.

A test audits the ledger: payload sizes are exactly ``{d_y + 1}``, so no Hessian (d^2 floats)
and no hyperparameter-sized vector (``v_i``) ever leaves a client.

A step on a payload with replica axes is, on the CPU, torch's batched product ``A @ payload``
computed in the same arithmetic at a fraction of its cost (:func:`mix`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from problems import loop_sum
from testbed.calls import CallCounter
from testbed.decentralized.mixing import check_column_stochastic


@dataclasses.dataclass(eq=False)
class GraphLedger:
    """Counts gossip steps, messages and floats for ``n_clients`` clients.

    Args:
        n_clients: n.
        counter: optional :class:`CallCounter`; receives ``comm_rounds`` (one per gossip step)
            and ``floats_up`` (floats sent along edges), so an estimate's cost record includes
            communication.
        validate: check that every mixing matrix is column-stochastic before using it.
    """

    n_clients: int
    counter: CallCounter | None = None
    validate: bool = True

    def __post_init__(self) -> None:
        n = self.n_clients
        if n < 1:
            raise ValueError(f"GraphLedger needs at least one client, got {n}")
        self.steps = 0
        self.messages_sent = np.zeros(n, dtype=np.int64)
        self.floats_sent = np.zeros(n, dtype=np.int64)
        self.floats_received = np.zeros(n, dtype=np.int64)
        self.edge_messages = np.zeros((n, n), dtype=np.int64)  # [i, j]: j -> i
        self.payload_sizes: set[int] = set()

    def transmit(self, payload: torch.Tensor, mixing: np.ndarray) -> torch.Tensor:
        """One gossip step: client i receives ``sum_j A[i, j] payload_j`` from its in-neighbours.

        Args:
            payload: ``(..., n, d)``; leading axes are independent simulated replicas (each one
                a full run; its messages are counted once per replica).
            mixing: ``(n, n)`` column-stochastic weights of this step.

        Returns:
            ``(..., n, d)``: the received weighted sums.
        """
        return self.gossip(payload, np.asarray(mixing)[None], keep_all=False)[-1]

    def gossip(
        self, payload: torch.Tensor, mixings: np.ndarray, keep_all: bool = False
    ) -> list[torch.Tensor]:
        """``S = len(mixings)`` gossip steps of a payload that is mixed linearly each step.

        Counts every message of every step (vectorised over steps), then applies the steps.
        Returns the payload after each step when ``keep_all``, else only the last one.
        """
        weights = self._counted(tuple(payload.shape), mixings, payload)
        return mix(weights, payload, keep_all)

    def gossip_weighted(
        self, values: torch.Tensor, omega: torch.Tensor, mixings: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Push-Sum's gossip (Alg. 1): :meth:`gossip` of the payload ``values (..., n, d)`` with
        the weights ``omega (..., n)`` as its last column, returned as its two parts after the
        last step, ``(z, omega)``.

        Counted as that payload. Where :func:`mix` mixes rows and the weights are the same in
        every replica, the payload is not built: the values are mixed as its rows and the
        weights once (:func:`mix_beside_shared_column`, the same numbers); the parts may then be
        views of another layout.
        """
        shape = (*values.shape[:-1], int(values.shape[-1]) + 1)
        weights = self._counted(shape, mixings, values)
        parts = mix_beside_shared_column(weights, values, omega)
        if parts is None:
            (mixed,) = mix(weights, torch.cat([values, omega[..., None]], dim=-1))
            parts = mixed[..., :-1], mixed[..., -1]
        return parts

    def _counted(
        self, shape: tuple[int, ...], mixings: np.ndarray, like: torch.Tensor
    ) -> torch.Tensor:
        """Count the ``S = len(mixings)`` steps of a payload of ``shape`` and return their
        weights as a tensor of ``like``'s dtype and device."""
        n = self.n_clients
        mixings = np.asarray(mixings, dtype=np.float64)
        if shape[-2] != n or mixings.shape[1:] != (n, n):
            raise ValueError(f"payload {shape} / mixings {mixings.shape} do not match n={n}")
        if self.validate:
            check_column_stochastic(mixings)
        steps = mixings.shape[0]
        size = int(shape[-1])
        replicas = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        links = (mixings != 0) & ~np.eye(n, dtype=bool)
        per_edge = links.sum(axis=0) * replicas
        self.edge_messages += per_edge
        sent = per_edge.sum(axis=0)
        self.messages_sent += sent
        self.floats_sent += sent * size
        self.floats_received += per_edge.sum(axis=1) * size
        if steps:
            self.payload_sizes.add(size)
        self.steps += steps
        if self.counter is not None:
            self.counter.add("comm_rounds", steps)
            self.counter.add("floats_up", int(sent.sum()) * size)
        return torch.as_tensor(mixings, dtype=like.dtype, device=like.device)

    @property
    def total_floats(self) -> int:
        return int(self.floats_sent.sum())

    @property
    def largest_payload(self) -> int:
        return max(self.payload_sizes, default=0)

    # ----------------------------------------------------------------------- state
    #: The per-client (and per-edge) count arrays, in the order :meth:`state_dict` holds them.
    _ARRAYS = ("messages_sent", "floats_sent", "floats_received", "edge_messages")

    def state_dict(self) -> dict[str, Any]:
        """The counts as plain data (a checkpoint's): ``steps``, copies of the count arrays
        and ``payload_sizes`` (sorted)."""
        return {
            "steps": self.steps,
            **{name: getattr(self, name).copy() for name in self._ARRAYS},
            "payload_sizes": sorted(self.payload_sizes),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Set the counts to :meth:`state_dict`'s output (the shared counter, if any, is not
        touched: it is restored with the rest of the run's calls)."""
        self.steps = int(state["steps"])
        for name in self._ARRAYS:
            getattr(self, name)[...] = state[name]
        self.payload_sizes = {int(size) for size in state["payload_sizes"]}


#: Batched products that torch's CPU kernel computes by a plain loop: fewer than this many
#: multiply-adds per matrix of the batch (``baddbmm_cpu_kernel`` in ATen's ``LinearAlgebra.cpp``;
#: larger ones go to BLAS, whose fused multiply-adds round otherwise).
LOOP_PRODUCT = 400

#: Most columns mixed replica by replica that :func:`mix` mixes a column of ``A`` at a time
#: (:func:`column_steps`); past it, an entry of ``A`` at a time (:func:`entry_steps`, which leaves
#: out the zero entries). Why 1: ``benchmarks/pushsum_forms.py`` (16,000 replicas, one thread,
#: 2-4 clients and 2 or 4 steps, 2026-11-29) summed 9.9 ms by entries against 15.4 ms by columns
#: over the shapes of 2 and 3 columns (21.7 ms with a new tensor a term, the form before), by
#: entries the faster or within 0.02 ms on each; at one column the two were within 0.13 ms of
#: each other (2.0 against 2.1 ms in all), and inside a whole mix by columns was the faster at 3
#: and 4 clients (0.4-1.0 ms against 0.5-1.6 ms). Every form gives the same numbers.
ROW_FORM_COLUMNS = 1

#: Fewest replicas :func:`mix` mixes as rows: below, the product itself was as fast or faster
#: (3 clients x 3 columns, 3 steps: 300 replicas 0.07 ms the product, 0.19 ms as rows; 1,000
#: replicas 0.21 ms either way).
ROW_FORM_REPLICAS = 1000


def mix(weights: torch.Tensor, payload: torch.Tensor, keep_all: bool = False) -> list[torch.Tensor]:
    """``A(s) @ ... @ A(1) @ payload`` for the ``(S, n, n)`` ``weights``, one step at a time:
    the payload after each step when ``keep_all``, else only the last one.

    ``A @ payload`` is torch's batched product over the payload's leading (replica) axes. Where
    that product is the CPU kernel's plain loop (float64, fewer than :data:`LOOP_PRODUCT`
    multiply-adds a replica), each entry is

    .. math::  (A x)_{ij} = ((0 + A_{i1} x_{1j}) + A_{i2} x_{2j}) + \\dots + A_{in} x_{nj},

    every product and every sum rounded on its own, whatever the other entries; so the same
    numbers come from whole rows at once: with the payload client-major, ``(n, replicas x
    size)``, a step is ``n`` products of a column of ``A`` with a row and ``n`` sums
    (:func:`problems.loop_sum`), or, for more columns (:data:`ROW_FORM_COLUMNS`), a product and
    a sum per entry of ``A`` (:func:`_entry_step`, which can leave out the zero entries). A last
    column with the same values in every replica (Push-Sum's weights: the replicas run on the
    same graphs from the same weights) is mixed once, for the first replica.
    ``tests/test_gossip_mix.py`` compares every form with the product exactly on every shape the
    HGP claims draw. Anything else (a GPU, float32, a payload without replica axes or with fewer
    than :data:`ROW_FORM_REPLICAS` replicas, larger products) is the product itself.
    """
    n, size = payload.shape[-2:]
    if not _loop_product(weights, payload):
        return _products(weights, payload, keep_all)
    flat = payload.reshape(-1, n, size)
    if len(flat) < ROW_FORM_REPLICAS:
        return _products(weights, payload, keep_all)
    last = flat[:, :, -1]
    # the columns mixed replica by replica, then the one mixed once (possibly none)
    cut = size - 1 if _same_in_every_replica(last) else size
    steps = _row_steps(weights, flat[:, :, :cut])
    first = flat[:1, :, cut:]
    out = [payload]
    for step, (A, rows) in enumerate(zip(weights, steps, strict=True)):
        first = A @ first  # one replica, by the product itself
        if keep_all or step == len(weights) - 1:
            mixed = torch.empty_like(flat)
            mixed[:, :, :cut] = rows.reshape(n, len(flat), cut).transpose(0, 1)
            mixed[:, :, cut:] = first
            out.append(mixed.reshape(payload.shape))
    return out if keep_all else out[-1:]


def _row_steps(weights: torch.Tensor, columns: torch.Tensor) -> list[torch.Tensor]:
    """The client-major rows ``(n, replicas x cut)`` of ``columns (replicas, n, cut)`` after
    each step of ``weights``: a column of ``A`` at a time (:func:`problems.loop_sum`) or, past
    :data:`ROW_FORM_COLUMNS`, an entry at a time (:func:`entry_steps`)."""
    replicas, n, cut = columns.shape
    rows = columns.transpose(0, 1).reshape(n, replicas * cut)  # client-major
    if cut > ROW_FORM_COLUMNS:
        return entry_steps(weights.tolist(), rows)
    return column_steps(weights, rows)


def column_steps(weights: torch.Tensor, rows: torch.Tensor) -> list[torch.Tensor]:
    """The client-major ``rows (n, m)`` after each step of ``weights``, a column of ``A`` at a
    time: ``sum_k A[:, k] rows[k]`` (:func:`problems.loop_sum`)."""
    steps = []
    for A in weights:
        rows = loop_sum(A.T[:, :, None], rows[:, None, :])
        steps.append(rows)
    return steps


def mix_beside_shared_column(
    weights: torch.Tensor, values: torch.Tensor, column: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """:func:`mix`'s last step of the payload ``values (..., n, d)`` with ``column (..., n)``
    beside it as its last column, as the two parts ``(values, column)`` mixed, without building
    the payload: where :func:`mix` mixes rows and the column is the same in every replica, the
    values are mixed as its rows are (:func:`_row_steps`; returned as a view of the client-major
    rows) and the column once, for the first replica, by the product (returned expanded to every
    replica): the same numbers. None elsewhere (mix the payload)."""
    n, d = values.shape[-2:]
    lead = values.shape[:-2]
    if len(lead) == 0 or values.numel() == 0 or column.shape != values.shape[:-1]:
        return None
    if not _loop_form(weights, n, d + 1, (values, column)):
        return None
    flat = values.reshape(-1, n, d)
    shared = column.reshape(-1, n)
    if len(flat) < ROW_FORM_REPLICAS or not _same_in_every_replica(shared):
        return None
    if len(weights) == 0:
        return values, column
    rows = _row_steps(weights, flat)[-1]
    first = shared[:1, :, None]
    for A in weights:
        first = A @ first  # one replica, by the product itself
    mixed = rows.reshape(n, len(flat), d).transpose(0, 1).reshape(values.shape)
    return mixed, first[0, :, 0].expand(column.shape)


def _same_in_every_replica(column: torch.Tensor) -> bool:
    """Whether every replica's row of ``column (replicas, n)`` (Push-Sum's weights, or a
    payload's last column in :func:`mix`) is the first's: at once for a row expanded to every
    replica (stride 0: the weights as :func:`mix_beside_shared_column` returns them, or
    :func:`~testbed.decentralized.pushsum.push_sum`'s ones), else by comparing them."""
    return column.stride(0) == 0 or torch.equal(column, column[:1].expand_as(column))


def entry_steps(weights: list[list[list[float]]], rows: torch.Tensor) -> list[torch.Tensor]:
    """The client-major ``rows`` after each step of ``weights`` (:func:`_entry_step`), the zero
    entries of ``A`` left out where that gives the same numbers.

    A zero entry adds ``+-0`` to a sum, which changes nothing, unless its row holds an infinity
    or a NaN (``0 x inf`` is NaN). So the zeros are left out when every column of every step
    has a nonzero entry, and the last step's rows are then checked: a value that is not finite,
    at any step, reaches the last step's rows through the nonzero entries of its column (an
    infinity times a nonzero weight is infinite, and a sum with an infinity or a NaN is not
    finite), so finite last rows mean that no left-out product was other than ``+-0``;
    otherwise the steps are computed again with every entry. The rows are known finite when
    their sum is (a sum with an infinity or a NaN is not finite; a sum of finite rows that
    overflows only computes the steps again): one pass, where ``isfinite(rows).all()`` was four
    (a third of a stacked HGP run's Push-Sum)."""
    skip = all(any(A[i][k] != 0.0 for i in range(len(A))) for A in weights for k in range(len(A)))
    steps = _entry_rows(weights, rows, skip)
    if skip and steps and not math.isfinite(float(steps[-1].sum())):
        steps = _entry_rows(weights, rows, False)
    return steps


def _entry_rows(
    weights: list[list[list[float]]], rows: torch.Tensor, skip_zeros: bool
) -> list[torch.Tensor]:
    steps = []
    for A in weights:
        rows = _entry_step(A, rows, skip_zeros)
        steps.append(rows)
    return steps


def _entry_step(A: list[list[float]], rows: torch.Tensor, skip_zeros: bool) -> torch.Tensor:
    """``A @ rows`` for client-major rows, row ``i`` as ``sum_k A[i][k] rows[k]`` from zero,
    one rounded product and one rounded sum per ``k`` in order (the product's loop), the
    zero entries left out when ``skip_zeros``. The first product is written as the sum's start
    (``0 + p`` is ``p`` but for ``p = -0``, whose sums keep a ``-0`` only while every term is
    ``-0``): adding ``+0`` at the end makes those ``+0``, as the loop from zero gives them, and
    changes nothing else."""
    out = torch.empty_like(rows)
    term = torch.empty_like(rows[0])
    for i, weights_i in enumerate(A):
        total, started = out[i], False
        for k, a in enumerate(weights_i):
            if skip_zeros and a == 0.0:
                continue
            if started:
                total.add_(torch.mul(rows[k], a, out=term))
            else:
                torch.mul(rows[k], a, out=total)
                started = True
        if not started:  # every entry left out: the sum of +-0 products from zero
            total.zero_()
    return out.add_(0.0)


def _products(weights: torch.Tensor, payload: torch.Tensor, keep_all: bool) -> list[torch.Tensor]:
    """:func:`mix` as one batched product a step."""
    out = [payload]
    for A in weights:
        out.append(A @ out[-1])
        if not keep_all:
            del out[0]
    return out if keep_all else out[-1:]


def _loop_product(weights: torch.Tensor, payload: torch.Tensor) -> bool:
    """Whether ``A @ payload`` is the CPU kernel's plain loop over the payload's replicas."""
    n, size = payload.shape[-2:]
    return payload.ndim >= 3 and payload.numel() > 0 and _loop_form(weights, n, size, (payload,))


def _loop_form(weights: torch.Tensor, n: int, size: int, payload: Sequence[torch.Tensor]) -> bool:
    """Whether ``A @ payload`` for a payload of ``size`` columns is the CPU kernel's plain loop
    (the tensors of ``payload``: its parts)."""
    return n * n * size < LOOP_PRODUCT and all(
        t.device.type == "cpu" and t.dtype == torch.float64 and not t.requires_grad
        for t in (weights, *payload)
    )

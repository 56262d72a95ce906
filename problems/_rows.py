"""Client rows without copies, and the batched linear algebra and sampling of the client axis.

Under full participation the evaluated clients are ``0..M-1`` in order, so ``array[clients]`` is
the stacked array itself; these helpers use it as it is (no gather, no copy).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from problems._base import Batch
from problems._base import ProblemError
from problems._base import default_device

# ---------------------------------------------------------------------------------------------
# Client rows without copies. Under full participation the evaluated clients are 0..M-1 in order,
# so ``array[clients]`` *is* the stacked array: it is used as it is (no gather, no copy). The
# participation sampler hands out one cached ``arange`` per (M, device) (:func:`all_clients`), so
# the test is an identity check; any other tensor equal to ``arange(M)`` is recognised by value.
# ---------------------------------------------------------------------------------------------

_ALL_CLIENTS: dict[tuple[int, str], torch.Tensor] = {}
_SHARED_IDS: dict[int, torch.Tensor] = {}  # id -> the shared tensor (a fast identity test)


def all_clients(n_clients: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The shared ``arange(n_clients)`` (int64): "every client, in order", on ``device``
    (default: torch's default device, where ``--device`` and ``with torch.device(...)`` put the
    problems; the CPU otherwise).

    The same tensor object is returned on every call (unless someone modified it in place, which
    its version counter reveals: then a fresh one replaces it), so :func:`is_all_clients` can
    recognise full participation by identity. Treat it as read-only.
    """
    key = (int(n_clients), str(default_device() if device is None else torch.device(device)))
    cached = _ALL_CLIENTS.get(key)
    if cached is None or cached._version != 0:
        if cached is not None:
            _SHARED_IDS.pop(id(cached), None)
        cached = torch.arange(key[0], device=key[1])
        _ALL_CLIENTS[key] = cached
        _SHARED_IDS[id(cached)] = cached
    return cached


def is_all_clients(clients: torch.Tensor, n_clients: int) -> bool:
    """``True`` when ``clients`` is ``0, 1, ..., n_clients - 1`` in order (every client once)."""
    if _SHARED_IDS.get(id(clients)) is clients and clients._version == 0:
        return int(clients.shape[0]) == n_clients
    if clients.ndim != 1 or int(clients.shape[0]) != n_clients:
        return False
    return torch.equal(clients, all_clients(n_clients, clients.device))


def is_plain(value: torch.Tensor) -> bool:
    """A tensor outside autograd and torch.func transforms, so that its memory can key a cache
    (a tensor that requires gradients, or a functorch wrapper, may stand for other values)."""
    return (
        type(value) is torch.Tensor
        and not value.requires_grad
        and not torch._C._functorch.is_functorch_wrapped_tensor(value)
    )


class RecentCache:
    """The ``size`` most recently used entries, found by key: the one mechanism behind the
    workloads' feature cache and the oracles' memo of repeated exact calls.

    An entry holds the tensors its key was made from (``holds``), so their memory cannot be freed
    and reused by another tensor while it lives (keys are made with :func:`memory_key`). A hit
    moves its entry to the front; a new entry evicts the least recently used beyond ``size``.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: list[tuple[object, tuple[object, ...], object]] = []
        self.hits = self.misses = 0

    def get(self, key: object, valid: Callable[[Any], bool] | None = None) -> Any:
        """The value stored under ``key`` (and accepted by ``valid``), or ``None``."""
        for position, (entry_key, _, value) in enumerate(self._entries):
            if entry_key == key and (valid is None or valid(value)):
                self.hits += 1
                self._entries.insert(0, self._entries.pop(position))
                return value
        self.misses += 1
        return None

    def put(self, key: object, holds: tuple[object, ...], value: object) -> None:
        self._entries.insert(0, (key, holds, value))
        del self._entries[self.size :]

    def clear(self) -> None:
        self._entries.clear()


def memory_key(value: torch.Tensor) -> tuple[object, ...]:
    """What identifies the values of a plain tensor while a cache holds it: storage address,
    offset, shape, strides, version counter (bumped by every in-place change), dtype, device.

    A cache keyed on this must hold ``value`` itself, so that its memory cannot be freed and
    reused by another tensor while the entry lives.
    """
    return (
        value.untyped_storage().data_ptr(),
        value.storage_offset(),
        tuple(value.shape),
        value.stride(),
        value._version,
        value.dtype,
        value.device,
    )


# Gathers use ``index_select`` rather than advanced indexing: on small tensors torch's parallel
# advanced-indexing kernel costs ~100x more (enough to dominate replicated HGP runs and the
# batched closed-form rounds in benchmarks/closed_form_rounds.py).
def rows(array: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
    """``array[clients]`` for per-client arrays ``(M, ...)``: row c is client ``clients[c]``'s.

    Every client in order (full participation) returns ``array`` itself: no copy.
    """
    if is_all_clients(clients, int(array.shape[0])):
        return array
    return array.index_select(0, clients)


class ClientRows:
    """Gathered client rows of a problem's arrays, kept for the client set last asked about.

    Under partial participation one round evaluates the same client subset many times (an SVRG
    anchor, ``tau`` local steps, ...). :meth:`get` gathers each array once for that subset and
    hands out the same gathered tensor until another subset is asked for, so a round costs one
    gather per array it reads, not one per oracle call. The key is the ``clients`` tensor object
    itself (held, so its memory cannot be reused by another tensor) and its version counter (an
    in-place change invalidates it); under full participation nothing is gathered or kept.
    """

    def __init__(self) -> None:
        self._clients: torch.Tensor | None = None
        self._version = -1
        self._rows: dict[int, torch.Tensor] = {}

    def get(self, array: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        """``array[clients]``, gathered at most once per client set."""
        if is_all_clients(clients, int(array.shape[0])):
            return array
        if clients is not self._clients or clients._version != self._version:
            self._clients, self._version, self._rows = clients, clients._version, {}
        key = id(array)
        hit = self._rows.get(key)
        if hit is None:
            hit = self._rows[key] = array.index_select(0, clients)
        return hit

    def clear(self) -> None:
        self._clients, self._version, self._rows = None, -1, {}


def matvec(matrices: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """``(matrices[c] @ vectors[c])_c``: ``(C, m, n) x (C, n) -> (C, m)``; a 1-D ``(n,)`` vector
    is shared by every row (one matrix-vector product over the stacked ``(C m, n)`` rows).

    Per-client vectors go through the row-vector form ``vectors[c]^T matrices[c]^T`` (a
    transposed view, no copy): on one CPU thread torch's batched kernel for it streams the
    matrices 1.6-1.7x faster than ``matrices @ vectors[..., None]`` at d = 50 and 200 (1.9 ms
    against 3.1 ms for 1000 clients at d = 50, float64; equal at d = 10); the sums differ only in
    their rounding (1.8e-14 on values of order 10).
    """
    if vectors.ndim == 1:
        return torch.matmul(matrices, vectors)
    return torch.matmul(vectors.unsqueeze(-2), matrices.transpose(-1, -2)).squeeze(-2)


def rmatvec(matrices: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """``(matrices[c]^T @ vectors[c])_c``: ``(C, m, n) x (C, m) -> (C, n)``, without a transposed
    copy (``vectors[c]^T matrices[c]`` as a row-vector product)."""
    if vectors.ndim == 1:
        return torch.matmul(vectors, matrices)
    return torch.matmul(vectors.unsqueeze(-2), matrices).squeeze(-2)


#: Most columns of the small matrices whose products :func:`loop_matvec` and
#: :func:`loop_rmatvec` compute as whole-row elementwise sums. Why 2: on one CPU thread, for
#: 51,520 rows (a stacked HGP step of 16 calibration seeds), HGP's three products of a step took
#: 0.7-1.4 ms elementwise against 2.0-2.5 ms by the batched product at ``d_y = 1`` and 2.0-2.5 ms
#: against 2.8-3.3 ms at ``d_y = 2``, but 4.7-5.4 ms against 4.0-4.6 ms at ``d_y = 3``.
LOOP_FORM_COLUMNS = 2


def loop_form(matrices: torch.Tensor, vectors: torch.Tensor) -> bool:
    """Whether :func:`loop_matvec` / :func:`loop_rmatvec` give the batched product's numbers
    and pay: float64 on the CPU without autograd, whose batched product of matrices this small
    is the kernel's plain loop (``baddbmm_cpu_kernel`` in ATen's ``LinearAlgebra.cpp``: fewer
    than 400 multiply-adds a matrix), with at most :data:`LOOP_FORM_COLUMNS` columns."""
    return (
        matrices.shape[-1] <= LOOP_FORM_COLUMNS
        and matrices.shape[-2] <= LOOP_FORM_COLUMNS
        and vectors.ndim == 2
        and all(
            t.device.type == "cpu" and t.dtype == torch.float64 and not t.requires_grad
            for t in (matrices, vectors)
        )
    )


def loop_sum(
    first: Sequence[torch.Tensor] | torch.Tensor, second: Sequence[torch.Tensor] | torch.Tensor
) -> torch.Tensor:
    """``sum_k first[k] * second[k]`` (broadcast), from zero, one rounded product and one rounded
    sum per ``k`` in order, as elementwise operations over whole rows: the arithmetic of each
    entry of a batched product that is the kernel's plain loop (``baddbmm_cpu_kernel``; Push-Sum's
    row form in ``testbed.decentralized.ledger``, :func:`loop_matvec`, :func:`loop_rmatvec`).

    Written into two buffers, not into a new tensor a term and a zero start (that form took
    1.4x the time over the shapes of ``benchmarks/pushsum_forms.py``, 24.0 against 17.5 ms at
    16,000 replicas). The first product is the sum's start and ``+0`` is added at the end (``0 +
    t`` is ``t`` but for ``t = -0``, and a sum keeps a ``-0`` only while every term is ``-0``):
    the same numbers and signed zeros as the sum from zero."""
    total: torch.Tensor | None = None
    term = None
    for a, b in zip(first, second, strict=True):
        if total is None:
            total = torch.mul(a, b)
            term = torch.empty_like(total)
        else:
            total.add_(torch.mul(a, b, out=term))
    assert total is not None, "loop_sum needs at least one term"
    return total.add_(0.0)


def loop_matvec(matrices: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """:func:`matvec` of per-row vectors as the batched product's plain loop computes it, entry
    ``i`` of row ``c`` being ``sum_k matrices[c, i, k] vectors[c, k]`` from zero in ``k``'s order
    (:func:`loop_sum` over ``k``; :func:`loop_form` says where it is exact;
    ``tests/test_rows_loop_products.py`` compares them)."""
    return loop_sum(matrices.permute(2, 0, 1), vectors.T[:, :, None])


def loop_rmatvec(matrices: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """:func:`rmatvec` of per-row vectors as the plain loop computes it: entry ``j`` of row ``c``
    is ``sum_k vectors[c, k] matrices[c, k, j]`` from zero in ``k``'s order (see
    :func:`loop_matvec`)."""
    return loop_sum(matrices.transpose(0, 1), vectors.T[:, :, None])


def gather_mean(samples: torch.Tensor, clients: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Minibatch mean of per-sample arrays ``samples`` of shape ``(M, n_samples, ...)``.

    Returns ``(C, ...)``: for each evaluated client, the mean over its drawn sample indices.
    """
    n_samples = samples.shape[1]
    flat = samples.reshape(-1, *samples.shape[2:])
    index = (clients[:, None] * n_samples + batch.indices).reshape(-1)
    picked = flat.index_select(0, index).reshape(*batch.indices.shape, *samples.shape[2:])
    return picked.mean(dim=1)


def draw_indices(
    rng: np.random.Generator,
    clients: torch.Tensor,
    n_samples: int,
    batch_size: int,
    problem: str,
) -> Batch:
    if n_samples == 0:
        raise ProblemError(
            f"{problem}: built without samples (n_samples=0), so it has no stochastic oracle"
        )
    if batch_size < 1:
        raise ProblemError(f"{problem}: batch size must be >= 1, got {batch_size}")
    indices = rng.integers(0, n_samples, size=(int(clients.shape[0]), batch_size))
    return Batch(torch.as_tensor(indices, dtype=torch.long, device=clients.device))


def centered_noise(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    """Gaussian noise along axis 1 (the sample axis), centred so its sample mean is exactly 0.

    Centring makes the finite-sample mean of the per-sample objectives equal the client's
    objective exactly, so minibatch oracles are unbiased with an exactly computable variance.
    """
    noise = rng.standard_normal(shape) * scale
    if shape[1] > 0:
        noise -= noise.mean(axis=1, keepdims=True)
    return noise


def samples_around(
    rng: np.random.Generator, clients: np.ndarray, n_samples: int, scale: float
) -> np.ndarray:
    """``n_samples`` per-sample arrays around each client array: ``clients (M, ...)`` plus
    :func:`centered_noise` of shape ``(M, n_samples, ...)``, so each client's sample mean is its
    array exactly."""
    shape = (clients.shape[0], n_samples, *clients.shape[1:])
    return clients[:, None] + centered_noise(rng, shape, scale)

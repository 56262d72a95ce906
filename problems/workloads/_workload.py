r"""The part every classification workload shares: the Problem contract over stacked clients.

A workload defines two per-client functions of one client's iterates and samples,

.. math::  f_i(x, y) = F(x, y; \mathcal{D}^{val}_i), \qquad g_i(x, y) = G(x, y; \mathcal{D}^{tr}_i),

as :meth:`ClientWorkload.outer_row` / :meth:`ClientWorkload.inner_row` (one client, weighted
samples, a scalar). :meth:`outer_loss` / :meth:`inner_loss` evaluate them for a stack of clients
with :func:`torch.func.vmap` over the client axis of ``x (C, dim_x)``, ``y (C, dim_y)`` and the
gathered samples, so row ``c`` depends on row ``c`` only (the contract of :mod:`problems._base`)
and autodiff of the summed rows gives every client's gradient at once. There is no Python loop
over clients.

Both rows are weighted cross-entropies of the network's logits, ``f_i`` with the
``validation_weights`` and ``g_i`` plus a regulariser ``R(y)``; a workload gives the logits
(:meth:`ClientWorkload.inner_logits`, :meth:`ClientWorkload.outer_logits`), the weights and ``R``.

**The body's forward pass is computed once per outer point.** A workload whose logits factor as
``head_logits(y, features(x, inputs))`` (hyper-representation: the network body is x, the head y)
declares :meth:`ClientWorkload.feature_row` and :meth:`ClientWorkload.head_logits`. When no
gradient in ``x`` is asked for (inner gradients, Hessian-vector products and ``grad_y f``, all at
a fixed x: a whole FedInn loop, every Neumann term of FedIHGP), the features ``phi(u; x)`` of the
evaluated clients' samples are computed once and reused until ``x``, the client set or the
minibatch changes (:class:`FeatureCache`); only the head is evaluated and differentiated per call.
The numbers are those of the fused rows: the same operations in the same order, split into two
``vmap`` calls.
"""

from __future__ import annotations

import abc
import copy
from typing import Any
from typing import Literal

import numpy as np
import torch

from problems._base import Batch
from problems._base import ProblemError
from problems._base import ProblemKind
from problems._rows import RecentCache
from problems._rows import is_plain
from problems._rows import memory_key
from problems.workloads._client_data import ClientData
from problems.workloads._client_data import ClientSamples
from problems.workloads._client_data import LabelledSamples
from problems.workloads.models import Network

# Why 4: a round reuses at most two feature sets at a time (training and validation samples of one
# client set, or an SVRG step's minibatch at its local point and anchor); 4 keeps both while a
# new x replaces old entries, and bounds the memory to 4 x C x n x features floats.
FEATURE_CACHE_SIZE = 4


class FeatureCache(RecentCache):
    """Features ``phi(u; x)`` of evaluated clients' samples, kept for the last few keys.

    The key is the outer point's memory (storage, offset, shape, strides, version counter), the
    sample set, the client tensor (identity and version) and the minibatch index tensor
    (identity); the cache holds those tensors, so their memory cannot be reused by another tensor
    while an entry lives, and an in-place change to any of them bumps a version and misses.
    """

    def __init__(self, size: int = FEATURE_CACHE_SIZE) -> None:
        super().__init__(size)

    @staticmethod
    def key(
        x: torch.Tensor, samples: Any, clients: torch.Tensor, batch: Batch | None
    ) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        index = None if batch is None else batch.indices
        key = (
            *memory_key(x),
            id(samples),
            id(clients),
            clients._version,
            None if index is None else (id(index), index._version),
        )
        return key, (x, samples, clients, index)


def weighted_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """``sum_j w_j CE(logits_j, labels_j)``: a client's (masked) mean loss."""
    losses = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    return (weights * losses).sum()


# Why 4096: test-set evaluation runs in chunks of this many images so a CNN forward pass on
# CIFAR-10's 10,000 test images never holds all activations at once (about 100 MB per chunk).
EVAL_CHUNK = 4096


def as_rows(value: torch.Tensor, dim: int, name: str, what: str) -> torch.Tensor:
    """``(dim,)`` as is, or the mean of ``(C, dim)`` rows (the model those rows average to)."""
    if value.ndim == 1 and value.shape[0] == dim:
        return value
    if value.ndim == 2 and value.shape[1] == dim and value.shape[0] >= 1:
        return value.mean(dim=0)
    raise ProblemError(
        f"{what}: {name} must have shape ({dim},) or (C, {dim}), got {tuple(value.shape)}"
    )


class ClientWorkload(abc.ABC):
    """A bilevel classification workload over ``M`` clients; subclasses give the two losses.

    Args:
        name: short name used in :attr:`id`.
        network: the model (body and head as flat models).
        data: every client's training and validation samples, on ``device`` in ``dtype``.
        test_inputs, test_labels: the test set for :meth:`evaluate`.
        x0, y0: the initial point.
        description: JSON-able facts for results files (dataset, split, histogram, options).
    """

    kind: ProblemKind = "bilevel"

    def __init__(
        self,
        *,
        name: str,
        network: Network,
        data: ClientData,
        test_inputs: torch.Tensor,
        test_labels: torch.Tensor,
        x0: torch.Tensor,
        y0: torch.Tensor,
        description: dict[str, Any],
    ) -> None:
        self.name = name
        self.network = network
        self.data = data
        self.test_inputs = test_inputs
        self.test_labels = test_labels
        self.x0 = x0
        self.y0 = y0
        self.description = description
        self.n_clients = data.n_clients
        self.dim_x = int(x0.shape[0])
        self.dim_y = int(y0.shape[0])
        self._features = FeatureCache()

    # ----------------------------------------------------------------------- identity
    @property
    def id(self) -> str:
        d = self.description
        split = d.get("split", {})
        return (
            f"{self.name}.{d.get('dataset')}.{self.network.name}.{split.get('scheme')}"
            f".m{self.n_clients}.seed{d.get('seed')}"
        )

    @property
    def dtype(self) -> torch.dtype:
        return self.x0.dtype

    @property
    def device(self) -> torch.device:
        return self.x0.device

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self.id!r}, dim_x={self.dim_x}, dim_y={self.dim_y}, "
            f"dtype={self.dtype}, device={self.device})"
        )

    # ----------------------------------------------------------------------- per-client losses
    # Both rows are weighted cross-entropies of the network's logits (module docstring):
    #   f_i = sum_j w'_j CE(outer_logits(x, y, u_j), c_j), w' = validation_weights(c, w),
    #   g_i = sum_j w_j CE(inner_logits(x, y, u_j), c_j) + R(y);
    # a workload gives the logits, the weights and R.
    def outer_row(self, x: torch.Tensor, y: torch.Tensor, samples: LabelledSamples) -> torch.Tensor:
        """``f_i`` of one client (``x (dim_x,)``, ``y (dim_y,)``) on its weighted val samples."""
        inputs, labels, weights = samples
        logits = self.outer_logits(x, y, inputs)
        return weighted_cross_entropy(logits, labels, self.validation_weights(labels, weights))

    def inner_row(self, x: torch.Tensor, y: torch.Tensor, samples: LabelledSamples) -> torch.Tensor:
        """``g_i`` of one client on its weighted training samples."""
        inputs, labels, weights = samples
        loss = weighted_cross_entropy(self.inner_logits(x, y, inputs), labels, weights)
        return loss + self.regularizer(y)

    @abc.abstractmethod
    def inner_logits(self, x: torch.Tensor, y: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """The logits of ``g_i``'s cross-entropy on one client's inputs."""

    def outer_logits(self, x: torch.Tensor, y: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """The logits of ``f_i``'s cross-entropy (by default :meth:`inner_logits`)."""
        return self.inner_logits(x, y, inputs)

    def validation_weights(self, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """The weights of ``f_i``'s samples given their labels (by default the sample weights)."""
        return weights

    @abc.abstractmethod
    def regularizer(self, y: torch.Tensor) -> torch.Tensor:
        """``R(y)``, added to ``g_i``."""

    @abc.abstractmethod
    def test_logits(self, x: torch.Tensor, y: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Logits of the model defined by the global ``x (dim_x,)``, ``y (dim_y,)``."""

    # A workload whose logits are head_logits(y, feature_row(x, inputs)) sets these two (see the
    # module docstring); ``feature_row = None`` means "does not factor".
    feature_row: Any = None

    def head_logits(self, y: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # the rows above on the body's features: the same operations, after feature_row
    def outer_head_row(
        self, y: torch.Tensor, features: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        logits = self.head_logits(y, features)
        return weighted_cross_entropy(logits, labels, self.validation_weights(labels, weights))

    def inner_head_row(
        self, y: torch.Tensor, features: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        loss = weighted_cross_entropy(self.head_logits(y, features), labels, weights)
        return loss + self.regularizer(y)

    def _check(self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor) -> None:
        count = int(clients.shape[0]) if clients.ndim == 1 else -1
        if count < 0 or x.shape != (count, self.dim_x) or y.shape != (count, self.dim_y):
            raise ProblemError(
                f"{self.id}: expected x ({count}, {self.dim_x}), y ({count}, {self.dim_y}) for "
                f"clients of shape {tuple(clients.shape)}; got x {tuple(x.shape)}, "
                f"y {tuple(y.shape)}"
            )

    def _samples(
        self, samples: ClientSamples, clients: torch.Tensor, batch: Batch | None, positions: Any
    ) -> LabelledSamples:
        if batch is None:
            return samples.full(clients)
        return samples.picked(clients, positions(clients, batch))

    def _rows(
        self,
        side: Literal["outer", "inner"],
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        """``f_i`` (``side="outer"``: the validation samples) or ``g_i`` (``"inner"``: the
        training samples) per evaluated client, ``(C,)``: the rows' loss on the features cached
        per ``(x, clients, batch)`` when the model has a feature map, else the whole row."""
        if side == "outer":
            row, head_row, samples = self.outer_row, self.outer_head_row, self.data.val
            positions = self.data.val_positions
        else:
            row, head_row, samples = self.inner_row, self.inner_head_row, self.data.train
            positions = self.data.train_positions
        self._check(x, y, clients)
        if (
            self.feature_row is not None
            and is_plain(x)
            and is_plain(clients)
            and (batch is None or is_plain(batch.indices))
        ):
            key, holds = self._features.key(x, samples, clients, batch)
            hit = self._features.get(key)
            if hit is None:
                inputs, labels, weights = self._samples(samples, clients, batch, positions)
                hit = (torch.func.vmap(self.feature_row)(x, inputs), labels, weights)
                self._features.put(key, holds, hit)
            features, labels, weights = hit
            out: torch.Tensor = torch.func.vmap(head_row)(y, features, labels, weights)
            return out
        out = torch.func.vmap(row)(x, y, self._samples(samples, clients, batch, positions))
        return out

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``(f_i(x_c, y_c))_c`` on the validation samples (all, or the batch's), ``(C,)``."""
        return self._rows("outer", x, y, clients, batch)

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``(g_i(x_c, y_c))_c`` on the training samples (all, or the batch's), ``(C,)``."""
        return self._rows("inner", x, y, clients, batch)

    def sample_batch(
        self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int
    ) -> Batch:
        """Uniform per-client minibatch (with replacement) of both sample sets."""
        return self.data.sample_batch(rng, clients, batch_size, self.id)

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x0.clone(), self.y0.clone()

    def clear_caches(self) -> None:
        """Forget the cached body features (benchmarks time each round from a cold cache)."""
        self._features.clear()

    # ----------------------------------------------------------------------- evaluation
    def objectives(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """``(f(x, y), g(x, y))``: means over all clients of the full local objectives."""
        xg = as_rows(x, self.dim_x, "x", self.id)
        yg = as_rows(y, self.dim_y, "y", self.id)
        clients = torch.arange(self.n_clients, device=self.device)
        xs, ys = xg.expand(self.n_clients, -1), yg.expand(self.n_clients, -1)
        with torch.no_grad():
            f = self.outer_loss(xs, ys, clients, None).mean()
            g = self.inner_loss(xs, ys, clients, None).mean()
        return float(f), float(g)

    def evaluate(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """Test metrics of the model defined by the global ``x`` and ``y``.

        ``x``/``y`` are ``(dim,)`` vectors or ``(C, dim)`` per-client rows; rows are averaged
        first (the model a server aggregation of those rows gives). Returns ``test_accuracy``,
        ``test_loss`` (cross-entropy of the plain logits), ``test_balanced_accuracy`` (mean
        per-class recall), ``outer_loss`` ``f(x, y)`` and ``inner_loss`` ``g(x, y)``.
        """
        xg = as_rows(x, self.dim_x, "x", self.id).to(device=self.device, dtype=self.dtype)
        yg = as_rows(y, self.dim_y, "y", self.id).to(device=self.device, dtype=self.dtype)
        n_classes = self.network.n_classes
        loss = torch.zeros((), dtype=self.dtype, device=self.device)
        hits = torch.zeros(n_classes, dtype=torch.long, device=self.device)
        totals = torch.zeros(n_classes, dtype=torch.long, device=self.device)
        with torch.no_grad():
            for start in range(0, int(self.test_labels.shape[0]), EVAL_CHUNK):
                inputs = self.test_inputs[start : start + EVAL_CHUNK]
                labels = self.test_labels[start : start + EVAL_CHUNK]
                logits = self.test_logits(xg, yg, inputs)
                loss = loss + torch.nn.functional.cross_entropy(logits, labels, reduction="sum")
                correct = (logits.argmax(dim=1) == labels).long()
                hits.index_add_(0, labels, correct)
                totals += torch.bincount(labels, minlength=n_classes)
        n_test = int(totals.sum())
        present = totals > 0
        recall = hits[present].to(torch.float64) / totals[present].to(torch.float64)
        f, g = self.objectives(xg, yg)
        return {
            "test_accuracy": float(hits.sum()) / n_test,
            "test_loss": float(loss) / n_test,
            "test_balanced_accuracy": float(recall.mean()),
            "outer_loss": f,
            "inner_loss": g,
        }

    # ----------------------------------------------------------------------- placement
    def _extra_tensors(self) -> tuple[str, ...]:
        """Names of further float tensor attributes a subclass keeps (moved by :meth:`to`)."""
        return ()

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> Any:
        """A copy with every tensor on ``device`` (and in ``dtype``, default: unchanged)."""
        dtype = self.dtype if dtype is None else dtype
        if not dtype.is_floating_point:
            raise ProblemError(f"{self.id}: dtype must be a floating type, got {dtype}")
        moved = copy.copy(self)
        moved._features = FeatureCache()
        moved.data = self.data.to(device, dtype)
        moved.test_inputs = self.test_inputs.to(device=device, dtype=dtype)
        moved.test_labels = self.test_labels.to(device=device)
        moved.x0 = self.x0.to(device=device, dtype=dtype)
        moved.y0 = self.y0.to(device=device, dtype=dtype)
        for name in self._extra_tensors():
            setattr(moved, name, getattr(self, name).to(device=device, dtype=dtype))
        return moved

r"""Per-client train/validation samples stacked on a client axis, and their minibatches.

Client ``i`` owns ``n_i`` training and ``m_i`` validation samples. They are stored as
``(M, n_max, ...)`` arrays padded with copies of the client's first sample; the padded slots get
weight zero, so a full local objective is the weighted sum

.. math::  \ell_i = \sum_{j < n_{\max}} w_{ij}\, \ell(u_{ij}), \qquad
           w_{ij} = \mathbb{1}[j < n_i] / n_i ,

and one vmapped call evaluates any set of clients (rows may repeat).

**Minibatches.** The problem contract hands one :class:`~problems.Batch` of per-client indices to
either loss, so a batch index must pick a uniform training sample *and* a uniform validation
sample of its client. Index ``k`` is drawn uniformly from ``{0, ..., n_i m_i - 1}`` and decoded as

.. math::  (k \bmod n_i,\ \lfloor k / n_i \rfloor) \in \{0..n_i-1\} \times \{0..m_i-1\},

a bijection onto the product set, so both marginals are exactly uniform and a minibatch mean is an
unbiased estimate of each full local objective.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from problems._base import Batch
from problems._base import ProblemError
from problems._rows import is_all_clients

#: One client's samples, or a stack of clients' (a leading client axis): ``(inputs, labels,
#: weights)``, what :meth:`ClientSamples.full` and :meth:`ClientSamples.picked` give and a
#: workload's loss rows take.
LabelledSamples = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclasses.dataclass(frozen=True, eq=False)
class ClientSamples:
    """One sample set per client, padded to the largest.

    Attributes:
        inputs: ``(M, n_max, *input_shape)``.
        labels: ``(M, n_max)`` int64.
        counts: ``(M,)`` int64, the real number of samples of each client (on ``inputs``' device).
        weights: ``(M, n_max)``, ``1 / n_i`` on real samples and 0 on padding.
    """

    inputs: torch.Tensor
    labels: torch.Tensor
    counts: torch.Tensor
    weights: torch.Tensor

    @classmethod
    def stack(
        cls, inputs: torch.Tensor, labels: torch.Tensor, index_sets: Sequence[np.ndarray], what: str
    ) -> ClientSamples:
        """Gather ``inputs[index_sets[i]]`` for every client ``i`` and pad to one array."""
        sizes = [int(ix.shape[0]) for ix in index_sets]
        if not sizes or min(sizes) < 1:
            raise ProblemError(f"{what}: every client needs at least one sample, got sizes {sizes}")
        n_max = max(sizes)
        padded = np.stack(
            [np.concatenate([ix, np.full(n_max - ix.shape[0], ix[0])]) for ix in index_sets]
        ).astype(np.int64)
        index = torch.from_numpy(padded).to(inputs.device)
        counts = torch.tensor(sizes, dtype=torch.long, device=inputs.device)
        mask = torch.arange(n_max, device=inputs.device)[None, :] < counts[:, None]
        weights = mask.to(inputs.dtype) / counts[:, None].to(inputs.dtype)
        return cls(inputs[index], labels[index], counts, weights)

    @property
    def n_clients(self) -> int:
        return int(self.counts.shape[0])

    def to(self, device: torch.device | str, dtype: torch.dtype) -> ClientSamples:
        counts = self.counts.to(device=device)
        # 1/n_i recomputed in the new dtype, not cast: a float32 1/n_i cast to float64 would keep
        # its float32 rounding and break float64 identities
        weights = (self.weights > 0).to(device=device, dtype=dtype) / counts[:, None].to(dtype)
        return ClientSamples(
            self.inputs.to(device=device, dtype=dtype),
            self.labels.to(device=device),
            counts,
            weights,
        )

    def full(self, clients: torch.Tensor) -> LabelledSamples:
        """``(inputs, labels, weights)`` of every sample of each evaluated client."""
        if is_all_clients(clients, self.n_clients):
            # every client in order (the sampler's shared tensor is recognised by identity, on
            # the host, so a GPU workload does not synchronise): no copy
            return self.inputs, self.labels, self.weights
        rows = clients.to(self.counts.device)
        return self.inputs[rows], self.labels[rows], self.weights[rows]

    def picked(self, clients: torch.Tensor, positions: torch.Tensor) -> LabelledSamples:
        """Samples ``positions[c]`` (``(C, b)``) of client ``clients[c]``, weights ``1 / b``."""
        rows = clients.to(self.counts.device)[:, None]
        cols = positions.to(self.counts.device)
        weights = torch.full(
            cols.shape, 1.0 / cols.shape[1], dtype=self.weights.dtype, device=self.weights.device
        )
        return self.inputs[rows, cols], self.labels[rows, cols], weights


@dataclasses.dataclass(frozen=True, eq=False)
class ClientData:
    """Training and validation samples of every client (see the module docstring)."""

    train: ClientSamples
    val: ClientSamples

    def __post_init__(self) -> None:
        if self.train.n_clients != self.val.n_clients:
            raise ProblemError(
                f"{self.train.n_clients} training sets for {self.val.n_clients} validation sets"
            )

    @property
    def n_clients(self) -> int:
        return self.train.n_clients

    def to(self, device: torch.device | str, dtype: torch.dtype) -> ClientData:
        return ClientData(self.train.to(device, dtype), self.val.to(device, dtype))

    def sample_batch(
        self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int, what: str
    ) -> Batch:
        """``batch_size`` indices per evaluated client, uniform on its (train, val) pairs."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ProblemError(f"{what}: batch size must be an integer >= 1, got {batch_size!r}")
        rows = clients.detach().cpu()
        pairs = (self.train.counts.cpu()[rows] * self.val.counts.cpu()[rows]).cpu().numpy()
        draws = rng.integers(0, pairs[:, None], size=(int(rows.shape[0]), batch_size))
        return Batch(torch.as_tensor(draws, dtype=torch.long))

    def train_positions(self, clients: torch.Tensor, batch: Batch) -> torch.Tensor:
        """``k mod n_i``: the training sample each batch index picks."""
        n_train = self.train.counts[clients.to(self.train.counts.device)]
        return batch.indices.to(n_train.device) % n_train[:, None]

    def val_positions(self, clients: torch.Tensor, batch: Batch) -> torch.Tensor:
        """``floor(k / n_i)``: the validation sample each batch index picks."""
        n_train = self.train.counts[clients.to(self.train.counts.device)]
        return torch.div(batch.indices.to(n_train.device), n_train[:, None], rounding_mode="floor")


def standardize(inputs: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Per-channel ``(u - mean) / std`` with the statistics of ``reference`` (the train set).

    On MNIST these are FedNest's constants 0.1307 / 0.3081 (its ``transforms.Normalize``).
    """
    mean = reference.mean(dim=(0, 2, 3), keepdim=True)
    std = reference.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-12)
    return (inputs - mean[0]) / std[0]

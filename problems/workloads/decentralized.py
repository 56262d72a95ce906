"""Per-client problems on real data for HGP's experiments (Terashita & Hara, sec. 5.2 and 5.3):
what they share.

Paper letters -> testbed (docs/glossary.md): the paper's shared model x is our inner variable
``y`` (a flat parameter vector, ``dim_y`` = d_x), client i's hyperparameter lambda_i is block i
of our outer variable ``x = [lambda_1; ...; lambda_n]`` (``dim_hyper`` = d_lambda). Every problem
here has the per-client interface that :class:`testbed.decentralized.HyperGradientPush` and
:class:`testbed.decentralized.StochasticGradientPush` use (``kind``, ``n_clients``, ``dim_x``,
``dim_y``, ``dim_hyper``, ``hyper_blocks``, row-separable ``inner_loss`` / ``outer_loss``,
``sample_batch``, ``initial_point``), so those algorithms run on them unchanged.

Client data are :class:`~problems.workloads._client_data.ClientSamples` (padded to a common
length ``N`` with weights ``1/N_i`` on real samples, 0 on padding); a minibatch draws uniformly
from the client's own ``N_i`` samples (unbiased for the full local loss). Every per-client
evaluation is one ``torch.func.vmap`` over the stacked rows; there is no loop over clients.

:class:`PerClientClassification` holds that machinery; the problems are
:class:`~problems.workloads.influence.InfluenceProblem` (sec. 5.2, eq. 12: per-sample loss
weights) and :class:`~problems.workloads.personalization.PersonalizationProblem` (sec. 5.3:
HGP-PL and HGP-MTL), on the networks of :mod:`problems.workloads.classifiers`.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence

import numpy as np
import torch

from problems._base import Batch
from problems._base import ProblemError
from problems._base import ProblemKind
from problems.workloads._client_data import ClientSamples
from problems.workloads.classifiers import Classifier


def own_blocks(x: torch.Tensor, clients: torch.Tensor, n: int, block: int) -> torch.Tensor:
    """Row c: block ``clients[c]`` (size ``block``) of ``x[c]`` (x is ``(C, n * block)``)."""
    count = x.shape[0]
    index = torch.arange(count, device=x.device) * n + clients.to(x.device)
    return x.reshape(count * n, block).index_select(0, index)


def replicated(value: torch.Tensor, count: int) -> torch.Tensor:
    """``value`` as ``count`` rows: a vector repeated (a view), a ``(count, d)`` stack as is."""
    return value.expand(count, -1) if value.ndim == 1 else value


def client_samples(
    images: torch.Tensor,
    labels: torch.Tensor,
    index_sets: Sequence[np.ndarray],
    what: str,
    *,
    dtype: torch.dtype,
    device: torch.device | str,
) -> ClientSamples:
    """Every client's samples ``images[index_sets[i]]``, padded, in ``dtype`` on ``device``.

    The images are cast first, so the weights ``1/N_i`` are computed in ``dtype`` (casting a
    float32 ``1/N_i`` afterwards would keep its float32 rounding).
    """
    return ClientSamples.stack(
        images.to(device=device, dtype=dtype),
        labels.to(device),
        [np.asarray(ix, dtype=np.int64) for ix in index_sets],
        what,
    )


class PerClientClassification(abc.ABC):
    """Shared machinery: per-row losses by vmap, minibatches, global sums over clients.

    Subclasses define :meth:`sample_losses` (per-sample losses of one row from its model
    parameters and its lambda_i) and may replace :meth:`sample_weights`,
    :meth:`outer_penalty`, :meth:`initial_hyper` and :meth:`initial_model`.
    """

    kind: ProblemKind = "bilevel"

    def __init__(
        self,
        net: Classifier,
        train: ClientSamples,
        outer: ClientSamples,
        *,
        dim_y: int,
        dim_hyper: int,
        weight_decay: float,
        seed: int,
        name: str,
    ) -> None:
        if train.n_clients != outer.n_clients:
            raise ProblemError(
                f"{name}: train data has {train.n_clients} clients, outer data {outer.n_clients}"
            )
        if not (math.isfinite(weight_decay) and weight_decay >= 0.0):
            raise ProblemError(f"{name}: weight_decay must be finite and >= 0, got {weight_decay}")
        self.net, self.train, self.outer = net, train, outer
        self.name, self.seed = name, seed
        self.n_clients = train.n_clients
        self.dim_y, self.dim_hyper = dim_y, dim_hyper
        self.dim_x = self.n_clients * dim_hyper
        self.weight_decay = float(weight_decay)
        self.dtype, self.device = train.inputs.dtype, train.inputs.device

    # ----------------------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def sample_losses(
        self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        """Per-sample losses of one row from its model parameters ``y`` and its ``lambda_i``."""

    def sample_weights(
        self, lam: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor | None
    ) -> torch.Tensor:
        """Per-sample weights of g_i (``1/N_i`` or ``1/b``, times any sample hyperparameter)."""
        return weights

    def outer_penalty(self, lam: torch.Tensor) -> torch.Tensor:
        """The term of f_i in ``lambda_i`` alone, per row (none by default)."""
        return torch.zeros(lam.shape[0], dtype=lam.dtype, device=lam.device)

    # ----------------------------------------------------------------- interface
    @property
    def id(self) -> str:
        return (
            f"{self.name}.{self.net.name}.n{self.n_clients}.dy{self.dim_y}"
            f".dl{self.dim_hyper}.seed{self.seed}"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, dtype={self.dtype}, device={self.device})"

    def hyper_blocks(self, x: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        return own_blocks(x, clients, self.n_clients, self.dim_hyper)

    def _losses(
        self, y: torch.Tensor, lam: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        """``(C, N)`` per-sample losses, one vmapped call over the C rows."""
        out: torch.Tensor = torch.func.vmap(self.sample_losses)(y, lam, inputs, labels)
        return out

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i(y_c, lambda_i)`` per evaluated client (full local loss or minibatch mean)."""
        clients = clients.to(self.device)
        lam = self.hyper_blocks(x, clients)
        positions = None if batch is None else batch.indices.to(self.device)
        if positions is None:
            inputs, labels, weights = self.train.full(clients)
        else:
            inputs, labels, weights = self.train.picked(clients, positions)
        weights = self.sample_weights(lam, weights, positions)
        losses = self._losses(y, lam, inputs, labels)
        return (weights * losses).sum(-1) + 0.5 * self.weight_decay * (y * y).sum(-1)

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``f_i(y_c, lambda_i)``: mean loss on client i's outer data (+ the lambda penalty);
        deterministic (HGP samples only the Jacobians of g, Alg. 2), ``batch`` is ignored."""
        clients = clients.to(self.device)
        lam = self.hyper_blocks(x, clients)
        inputs, labels, weights = self.outer.full(clients)
        losses = self._losses(y, lam, inputs, labels)
        return (weights * losses).sum(-1) + self.outer_penalty(lam)

    def sample_batch(
        self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int
    ) -> Batch:
        """Uniform draws with replacement from each evaluated client's own ``N_i`` samples."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ProblemError(
                f"{self.name}: batch size must be an integer >= 1, got {batch_size!r}"
            )
        sizes = self.train.counts.cpu().numpy()[clients.cpu().numpy()]
        draws = rng.integers(0, sizes[:, None], size=(int(clients.shape[0]), batch_size))
        return Batch(torch.as_tensor(draws, dtype=torch.long))

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.initial_hyper(), self.initial_model()

    def initial_hyper(self) -> torch.Tensor:
        """The starting ``x`` (every ``lambda_i``): zeros by default."""
        return torch.zeros(self.dim_x, dtype=self.dtype, device=self.device)

    def initial_model(self) -> torch.Tensor:
        """The starting ``y``: the network's seeded initial vector."""
        return self.net.initial(self.seed).to(device=self.device, dtype=self.dtype)

    # ----------------------------------------------------------------- global quantities
    def every_client(self) -> torch.Tensor:
        """The indices ``0, ..., n - 1`` on the problem's device."""
        return torch.arange(self.n_clients, device=self.device)

    def total_inner(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``G(y) = sum_i g_i(y, lambda_i)`` at one shared model ``y (dim_y,)``."""
        n = self.n_clients
        return self.inner_loss(replicated(x, n), replicated(y, n), self.every_client(), None).sum()

    def total_outer(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``F = sum_i f_i(y, lambda_i)`` at one shared model ``y (dim_y,)`` (the paper's f)."""
        n = self.n_clients
        return self.outer_loss(replicated(x, n), replicated(y, n), self.every_client(), None).sum()


__all__ = ["PerClientClassification", "client_samples", "own_blocks", "replicated"]

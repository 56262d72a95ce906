"""The per-client-loop reference of a problem: one client at a time, then stacked.

Every problem family evaluates a whole round in one batched call (the client axis is the leading
tensor axis, :mod:`problems._base`). :class:`PerClientLoop` wraps any such problem and evaluates
the same losses the slow way, the way a federated simulation without a client axis would: a
Python loop over the evaluated clients, each row ``c`` passed through the wrapped problem with
``C = 1``, the ``(1,)`` results concatenated into ``(C,)``.

Row ``c`` of a problem's losses depends only on row ``c`` of ``x``, ``y``, ``clients`` and the
batch (the row-separability contract), so the wrapper computes the same function:

.. math::

    \\mathrm{loop}(x, y, \\text{clients})_c = \\ell(x_{c:c+1}, y_{c:c+1}, \\text{clients}_{c:c+1})_0
    = \\ell(x, y, \\text{clients})_c,

and every oracle of :class:`testbed.Oracles` (which differentiates the *sum* of the rows) gives
the same per-client derivatives, up to float64 round-off from a different summation order inside
the batched kernels. It is the reference that ``benchmarks/`` times the batched client axis
against and that ``tests/test_loop_reference.py`` compares it with.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from problems._base import Batch
from problems._base import Problem
from problems._base import ProblemError
from problems._base import ProblemKind

Loss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Batch | None], torch.Tensor]


class ProblemWrapper:
    """``problem``'s Problem contract, forwarded: its kind, dimensions, losses, minibatches and
    starting point (a subclass changes how some of them are computed). Closed-form extras of
    the wrapped problem (``constants()``, exact answers) stay on :attr:`wrapped`."""

    def __init__(self, problem: Problem) -> None:
        self.wrapped = problem
        self.kind: ProblemKind = problem.kind
        self.n_clients = problem.n_clients
        self.dim_x = problem.dim_x
        self.dim_y = problem.dim_y

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        return self.wrapped.outer_loss(x, y, clients, batch)

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        return self.wrapped.inner_loss(x, y, clients, batch)

    def sample_batch(
        self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int
    ) -> Batch:
        """The wrapped problem's draw: same generator use, so both sides see the same samples."""
        return self.wrapped.sample_batch(rng, clients, batch_size)

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.wrapped.initial_point()


class PerClientLoop(ProblemWrapper):
    """``problem`` evaluated one client at a time (satisfies :class:`problems.Problem`).

    Only the Problem contract is exposed (losses, minibatches, starting point, dimensions);
    closed-form extras of the wrapped problem (``constants()``, exact answers) stay on
    :attr:`wrapped`, so algorithms that read defaults from them must be given explicit values,
    the same for both sides of a comparison.

    Raises:
        ProblemError: if ``problem`` does not satisfy the Problem contract.
    """

    def __init__(self, problem: Problem) -> None:
        if not isinstance(problem, Problem):
            raise ProblemError(
                f"PerClientLoop: {type(problem).__name__} does not satisfy the "
                "Problem contract (outer_loss, inner_loss, sample_batch, ...)"
            )
        super().__init__(problem)

    @property
    def id(self) -> str:
        return f"loop({self.wrapped.id})"

    def __repr__(self) -> str:
        return f"PerClientLoop({self.wrapped!r})"

    def _looped(
        self,
        loss: Loss,
        x: torch.Tensor,
        y: torch.Tensor,
        clients: torch.Tensor,
        batch: Batch | None,
    ) -> torch.Tensor:
        count = int(clients.shape[0])
        if int(x.shape[0]) != count or int(y.shape[0]) != count:
            raise ProblemError(
                f"{self.id}: x has {x.shape[0]} rows and y {y.shape[0]} for "
                f"{count} clients; one row per evaluated client"
            )
        rows = []
        for c in range(count):
            row_batch = None if batch is None else Batch(batch.indices[c : c + 1])
            rows.append(loss(x[c : c + 1], y[c : c + 1], clients[c : c + 1], row_batch))
        return torch.cat(rows)

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``f_i(x_c, y_c)`` per evaluated client, one client per call of the wrapped problem."""
        return self._looped(self.wrapped.outer_loss, x, y, clients, batch)

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Batch | None
    ) -> torch.Tensor:
        """``g_i(x_c, y_c)`` per evaluated client, one client per call of the wrapped problem."""
        return self._looped(self.wrapped.inner_loss, x, y, clients, batch)

r"""FedMSA (Tarzanagh et al. 2023, Algorithm 1) on ``R`` *different* problems of one shape at
once: the round-savings comparison's FedMSA runs, one per drawn problem.

The comparison (``comparison.fedmsa_tenfold_fewer_rounds``) runs FedMSA with its bilevel maps
(eq. (10)), exact oracles and one local client per round (``m~ ~ Unif[M]``, Algorithm 1 line
7), each run on its own generator, which draws only that client. On the stacked problems
(:class:`~testbed.algorithms.stacked.StackedRuns`) a round is the unbatched one: the global
step (5) on every client of every run (:func:`~testbed.algorithms.fedmsa_maps.
global_step_rows`, the clients' part of :class:`~testbed.algorithms.fedmsa_maps.MSAGlobalStep`,
at each run's rows), then each run's client ``m~_r``, drawn from run ``r``'s own generator in
the call its own context makes, runs recursion (6) (:func:`~testbed.algorithms.fedmsa.
local_recursion`, the one :class:`~testbed.algorithms.fedmsa.MSALocalRecursion` runs) with its
run's ``alpha`` and ``beta`` as rows:

.. math::

    (h_r, q_r) = \tfrac1M \sum_m (h^m_r, q^m_r) \ \text{(5)}, \qquad
    (x_{r+1}, Z_{r+1}) = \text{recursion (6) on } m~_r \text{ from } (x_r, Z_r, h_r, q_r).

Bit for bit, row by row (:mod:`testbed.algorithms.stacked`; every map is evaluated at rows in
the unbatched run too; tests/test_comparison_batched.py compares every iterate). Refused
(:class:`~testbed.federation.replicates.NotBatchable`, before anything runs): a subclass of
FedMSA (the perturbations and mutants run their own code), maps other than
:class:`~testbed.algorithms.fedmsa_maps.BilevelMaps` itself, more than one local client,
minibatches, runs that differ in anything but their steps, and the problems
:func:`~testbed.algorithms.stacked.check_problems` refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from typing import cast

import numpy as np
import torch

from testbed.algorithms.fedmsa import FedMSA
from testbed.algorithms.fedmsa import LocalStart
from testbed.algorithms.fedmsa import local_recursion
from testbed.algorithms.fedmsa_maps import BilevelMaps
from testbed.algorithms.fedmsa_maps import global_step_rows
from testbed.algorithms.stacked import StackedRuns
from testbed.algorithms.stacked import StackedState
from testbed.algorithms.stacked import check_problems
from testbed.algorithms.stacked import check_runs
from testbed.federation.replicates import NotBatchable
from testbed.federation.sampling import ClientSampler


def check_stackable(algorithms: Sequence[FedMSA], problems: Sequence[Any]) -> None:
    """Raise :class:`NotBatchable` unless :class:`StackedFedMSA` computes, row by row, exactly
    what ``iterate_within_rounds(algorithms[r], problems[r], rngs[r], ...)`` does (module
    docstring)."""
    first = check_runs(algorithms, problems, FedMSA)
    for algorithm in algorithms:
        if type(algorithm.maps) is not BilevelMaps:
            raise NotBatchable(f"FedMSA's maps {type(algorithm.maps).__name__}: run alone")
        if not isinstance(algorithm.inner_step_size, float):
            raise NotBatchable("one beta per level: not stacked")
    if first.participation != 1 or first.batch_size is not None:
        raise NotBatchable("more than one local client, or minibatches: not stacked")
    check_problems(problems, 1)  # FedMSA's local steps are its own K, on one client


class StackedFedMSA(StackedRuns):
    """FedMSA's rounds on each of ``problems``, run ``r`` as ``algorithms[r]`` on
    ``problems[r]`` drawing its local client from ``rngs[r]`` (:func:`check_stackable`):
    :attr:`start` and :meth:`step` give what the unbatched runs' states hold, row by row;
    :meth:`keep` drops the runs that stopped. The state's ``y`` is FedMSA's ``Z = [w; v]``;
    the round's ``(h, q)`` and the previous point are kept here."""

    def __init__(
        self,
        algorithms: Sequence[FedMSA],
        problems: Sequence[Any],
        rngs: Sequence[np.random.Generator],
    ) -> None:
        check_stackable(algorithms, problems)
        self.config = algorithms[0]
        states = [a.init(p) for a, p in zip(algorithms, problems, strict=True)]
        self.start = StackedState(
            torch.stack([s.x for s in states]), torch.stack([s.Z for s in states])
        )
        self.rngs = list(rngs)
        self.sampler = ClientSampler(problems[0].n_clients, self.config.participation)
        # (alpha, beta): FedMSA's beta is one number for its one level [w; v]
        steps = [(a.outer_step_size, cast(float, a.inner_step_size)) for a in algorithms]
        super().__init__(problems, steps)
        self.round = 0
        self._memory: tuple[torch.Tensor, ...] | None = None  # h, q, x_prev, Z_prev

    def keep(self, state: StackedState, rows: Sequence[int]) -> StackedState:
        self.rngs = [self.rngs[r] for r in rows]
        if self._memory is not None:
            index = torch.tensor(list(rows), dtype=torch.long)
            self._memory = tuple(m.index_select(0, index) for m in self._memory)
        return super().keep(state, rows)

    def rounds_per_iteration(self) -> int:
        """2 (Sec. 3): the global step's aggregation and the local client's."""
        return self.config.rounds_per_round(self.problems[0])

    def step(self, state: StackedState) -> StackedState:
        """One round of every run: :meth:`FedMSA.advance
        <testbed.algorithms.fedmsa.FedMSA.advance>`, row by row."""
        side, config = self.side, self.config
        count, M = len(self.problems), self.side.per_run
        x, Z = state.x, state.y
        dx = int(x.shape[1])
        first = self.round == 0
        rho = 1.0 if first else float(config.momentum)
        K = 1 if first else config.local_steps
        here = torch.cat([x, Z], dim=1)
        echo = None
        if self._memory is None or rho == 1.0:
            sent = here
        else:
            h_prev, q_prev, x_prev, Z_prev = self._memory
            sent = torch.cat([here, x_prev, Z_prev], dim=1)
            echo = side.rows(torch.cat([h_prev, q_prev], dim=1))
        # communication 1: eq. (5) on every client of every run
        (uploads,) = global_step_rows(
            config.maps, side, side.participants(), side.rows(sent), echo, rho, dx, echo is not None
        ).uploads
        mean = side.aggregate(uploads)
        h, q = mean[:, :dx], mean[:, dx:]
        # communication 2: each run's own client m~ runs recursion (6)
        offsets = torch.arange(count, dtype=torch.long) * M
        local = torch.cat([self.sampler.sample(rng) for rng in self.rngs]) + offsets
        alpha = self.column(0)[::M, None]
        betas = self.column(1)[::M, None].expand(-1, Z.shape[1])
        reply = local_recursion(config, side, local, LocalStart(x, Z, h, q), K, alpha, betas)
        model = side.aggregate(reply.uploads[0])  # the one client's upload, adopted
        self._memory = (h, q, x, Z)
        self.round += 1
        return StackedState(model[:, :dx], model[:, dx:])


__all__ = ["StackedFedMSA", "check_stackable"]

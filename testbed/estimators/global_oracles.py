"""Oracles of the *global* objectives ``f = mean_i f_i`` and ``g = mean_i g_i``.

The centralised (classical) estimators see the federated problem as one problem: every global
oracle call evaluates all M clients in one batched call and averages, and counts M per-client
evaluations. Under ``batch_size`` each call draws a fresh minibatch for every client.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from problems import Batch
from problems import Problem
from problems import all_clients
from testbed.oracles import Oracles


@dataclasses.dataclass
class GlobalOracles:
    """Global gradients and products of ``problem`` at a shared ``(x, y)``.

    Args:
        oracles: the counted per-client oracles.
        rng: generator for minibatches.
        batch_size: ``None`` for full local objectives, else the per-client minibatch size.
    """

    oracles: Oracles
    rng: np.random.Generator
    batch_size: int | None = None

    @property
    def problem(self) -> Problem:
        return self.oracles.problem

    @property
    def clients(self) -> torch.Tensor:
        return all_clients(self.problem.n_clients)

    def draw(self) -> Batch | None:
        if self.batch_size is None:
            return None
        return self.problem.sample_batch(self.rng, self.clients, self.batch_size)

    def grad_outer(
        self, x: torch.Tensor, y: torch.Tensor, batch: Batch | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        gx, gy = self.oracles.grad_outer(x, y, self.clients, batch or self.draw())
        return gx.mean(0), gy.mean(0)

    def grad_inner(
        self, x: torch.Tensor, y: torch.Tensor, batch: Batch | None = None
    ) -> torch.Tensor:
        return self.oracles.grad_inner(x, y, self.clients, batch or self.draw()).mean(0)

    def hvp(
        self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor, batch: Batch | None = None
    ) -> torch.Tensor:
        return self.oracles.hvp_inner(x, y, v, self.clients, batch or self.draw()).mean(0)

    def jvp_xy(
        self, x: torch.Tensor, y: torch.Tensor, v: torch.Tensor, batch: Batch | None = None
    ) -> torch.Tensor:
        return self.oracles.jvp_inner_xy(x, y, v, self.clients, batch or self.draw()).mean(0)

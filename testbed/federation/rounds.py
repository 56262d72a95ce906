"""A plain federated gradient round: the smallest algorithm built on the federation core.

The server broadcasts the current ``(x, y)`` to the participating clients, each client computes
``grad_y g_i(x, y)`` on its data, and one aggregation returns the average to everyone. Every
message goes through the :class:`~testbed.Ledger`, so the counts are exact:

- floats down: ``C (dim_x + dim_y)`` for the broadcast plus ``C dim_y`` for the average,
- floats up: ``C dim_y``, rounds: 1, inner-gradient calls: ``C``,

for ``C`` participating clients.
"""

from __future__ import annotations

import numpy as np
import torch

from problems import Problem
from testbed.federation.ledger import Ledger
from testbed.federation.sampling import ClientSampler
from testbed.oracles import Oracles


def federated_gradient_round(
    problem: Problem,
    oracles: Oracles,
    ledger: Ledger,
    sampler: ClientSampler,
    x: torch.Tensor,
    y: torch.Tensor,
    rng: np.random.Generator,
    batch_size: int | None = None,
) -> torch.Tensor:
    """Average of ``grad_y g_i(x, y)`` over this round's participating clients."""
    clients = sampler.sample(rng)
    model = ledger.broadcast(torch.cat([x, y]), clients)
    x_local, y_local = model[:, : problem.dim_x], model[:, problem.dim_x :]
    batch = None if batch_size is None else problem.sample_batch(rng, clients, batch_size)
    gradients = oracles.grad_inner(x_local, y_local, clients, batch)
    return ledger.aggregate(gradients, clients)

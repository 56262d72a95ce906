"""A replicated HGP run without its trajectory (``keep_trajectory=False``, what the replicated
checks ask for) gives ``v^(M)`` exactly as the full run's last step, for the stochastic forms
the HGP claims draw, on replicas whose gossip takes each of :func:`~testbed.decentralized.
ledger.mix`'s forms."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import PerClientQuadratic
from testbed.decentralized import HGPState
from testbed.decentralized import HyperGradientPush


@pytest.mark.parametrize(("n", "dy", "replicas"), [(4, 3, 1200), (3, 2, 1100), (4, 2, 7)])
@pytest.mark.parametrize("practical", [False, True])
def test_the_last_step_alone_is_the_trajectorys_last(n, dy, replicas, practical):
    problem = PerClientQuadratic.random(
        n, 2, dy, seed=3, n_samples=16, hessian_noise=0.3, cross_noise=0.3, gradient_noise=0.3
    )
    est = HyperGradientPush(
        neumann_terms=5,
        pushsum_steps=3,
        batch_size=4 if practical else 1,
        shared_sample=practical,
        keep_weights=practical,
        graph_seed=2,
    )
    x = torch.as_tensor(np.random.default_rng(1).standard_normal(problem.dim_x))
    y0 = problem.initial_point()[1]
    runs = [
        est.run(
            problem,
            x,
            HGPState(y0.expand(n, -1).clone(), torch.ones(n, dtype=torch.float64), 0),
            np.random.default_rng(9),
            replicas=replicas,
            track_consensus=False,
            keep_trajectory=keep,
        )
        for keep in (True, False)
    ]
    full, last = runs
    assert full.trajectory.shape[0] == 6 and last.trajectory.shape[0] == 1
    assert torch.equal(last.trajectory[-1], full.trajectory[-1])
    assert full.calls == last.calls

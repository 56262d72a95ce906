"""A replicated HGP run without its trajectory (``keep_trajectory=False``, what the replicated
checks ask for) gives ``v^(M)`` exactly as the full run's last step, for the stochastic forms
the HGP claims draw, on replicas whose gossip takes each of :func:`~testbed.decentralized.
ledger.mix`'s forms."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests._stochastic_hgp import noisy_problem
from tests._stochastic_hgp import point
from tests._stochastic_hgp import start
from tests._stochastic_hgp import stochastic_hgp


@pytest.mark.parametrize(("n", "dy", "replicas"), [(4, 3, 1200), (3, 2, 1100), (4, 2, 7)])
@pytest.mark.parametrize("practical", [False, True])
def test_the_last_step_alone_is_the_trajectorys_last(n, dy, replicas, practical):
    problem = noisy_problem(n, dy, seed=3)
    est = stochastic_hgp(practical, neumann_terms=5, pushsum_steps=3, graph_seed=2)
    x = point(problem, 1)
    runs = [
        est.run(
            problem,
            x,
            start(problem),
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

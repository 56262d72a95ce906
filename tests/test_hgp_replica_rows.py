"""HGP's replicated run evaluates its rows in the order the vectors lie in
(testbed.decentralized.replica_rows): client-major after Push-Sum's row form. Each replica's
numbers are still its own run's, bit for bit, and its calls are counted as its own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import Batch
from testbed.decentralized.ledger import ROW_FORM_REPLICAS
from testbed.decentralized.ledger import mix_beside_shared_column
from testbed.decentralized.replica_rows import ReplicaRows
from testbed.decentralized.replica_rows import order_of
from testbed.federation.replicates import StackedGenerator
from tests._stochastic_hgp import noisy_problem
from tests._stochastic_hgp import point
from tests._stochastic_hgp import start
from tests._stochastic_hgp import stochastic_hgp


def test_the_orders_and_their_rows():
    R, n, d = 5, 3, 2
    stacked = ReplicaRows(n, R)
    replica_major = torch.arange(R * n * d, dtype=torch.float64).reshape(R, n, d)
    client_major = replica_major.transpose(0, 1).contiguous().transpose(0, 1)
    assert torch.equal(client_major, replica_major)
    assert order_of(replica_major) == "replica" and order_of(client_major) == "client"
    assert order_of(replica_major.expand(2, R, n, d)[0]) == "replica"
    for vectors, order in ((replica_major, "replica"), (client_major, "client")):
        rows = stacked.rows(vectors, order)
        clients = stacked.clients(order)
        # row k holds client clients[k]'s vector, and the rows are a view of the vectors
        for k in range(R * n):
            r = k // n if order == "replica" else k % R
            assert torch.equal(rows[k], vectors[r, int(clients[k])])
        assert rows.data_ptr() == vectors.data_ptr()
        assert torch.equal(stacked.vectors(rows, order), vectors)
        y = torch.randn(n, d, dtype=torch.float64)
        assert torch.equal(stacked.per_client(y, order), y[clients])


def test_a_batch_drawn_replica_major_moves_with_its_rows():
    R, n, b = 4, 3, 2
    stacked = ReplicaRows(n, R)
    drawn = Batch(torch.arange(R * n * b).reshape(R * n, b))
    assert stacked.batch(drawn, "replica") is drawn and stacked.batch(None, "client") is None
    moved = stacked.batch(drawn, "client")
    for i in range(n):
        for r in range(R):
            assert torch.equal(moved.indices[i * R + r], drawn.indices[r * n + i])


def test_pushsum_row_form_leaves_the_values_client_major():
    """The order the replicated run meets: the row form's output, a view of client rows."""
    R, n, d = ROW_FORM_REPLICAS, 3, 2
    weights = torch.tensor([[[0.5, 0.0, 0.5], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]])
    values = torch.randn(R, n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    parts = mix_beside_shared_column(weights.double(), values, torch.ones(R, n).double())
    assert parts is not None and order_of(parts[0]) == "client"


@pytest.mark.parametrize("practical", [False, True])
def test_each_replica_of_a_client_major_run_is_its_own_run(practical: bool):
    """A replicated run over a stacked generator (R >= ROW_FORM_REPLICAS: Push-Sum by rows,
    the products client-major) against single runs of a few of its replicas from their own
    generators (the product form, replica-major): the same ``v^(M)`` bit for bit, and every
    call counted once per replica (the outer gradients, computed once for all, included)."""
    n, R = 3, ROW_FORM_REPLICAS
    problem = noisy_problem(n, dy=2, seed=4)
    est = stochastic_hgp(practical, neumann_terms=3, pushsum_steps=2, graph_seed=5)
    x = point(problem, 2)

    def generator(r: int) -> np.random.Generator:
        return np.random.default_rng([r, 17])

    stacked = StackedGenerator([generator(r) for r in range(R)], rows=n)
    together = est.run(problem, x, start(problem), stacked, replicas=R, track_consensus=False)
    for r in (0, 1, R // 2, R - 1):
        alone = est.run(problem, x, start(problem), generator(r), track_consensus=False)
        assert torch.equal(together.trajectory[:, r], alone.trajectory[:, 0]), r
    single = est.run(problem, x, start(problem), generator(0), track_consensus=False)
    for count in ("grad_f", "hvp", "jvp", "floats_up"):
        assert getattr(together.calls, count) == R * getattr(single.calls, count), count
    assert together.calls.comm_rounds == single.calls.comm_rounds  # one gossip step serves all

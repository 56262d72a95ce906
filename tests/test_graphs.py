"""Graph families, mixing weights, Push-Sum and the graph ledger (HGP Alg. 1, Sec. 2.1)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from testbed.decentralized import CONNECTED_FAMILIES
from testbed.decentralized import GRAPH_FAMILIES
from testbed.decentralized import GraphLedger
from testbed.decentralized import GraphSequence
from testbed.decentralized import MixingError
from testbed.decentralized import check_column_stochastic
from testbed.decentralized import consensus_error
from testbed.decentralized import push_sum
from testbed.decentralized import pushsum_operator
from testbed.decentralized import pushsum_weights
from testbed.decentralized import slem

FAMILIES = st.sampled_from(GRAPH_FAMILIES)


@given(FAMILIES, st.integers(2, 7), st.integers(0, 1000), st.integers(0, 600))
@settings(max_examples=40)
def test_mixing_is_column_stochastic_with_self_loops(family, n, seed, start):
    graph = GraphSequence(family, n, seed)
    E = graph.edges(start, 5)
    assert E[:, np.arange(n), np.arange(n)].all()
    check_column_stochastic(graph.mixing(start, 5))


@given(FAMILIES, st.integers(2, 6), st.integers(0, 1000), st.integers(0, 700), st.integers(1, 30))
@settings(max_examples=30)
def test_sequences_are_seeded_and_random_access(family, n, seed, start, count):
    """Steps are reproducible and independent of how the sequence is sliced (chunked draws)."""
    a = GraphSequence(family, n, seed).edges(start, count)
    b = GraphSequence(family, n, seed).edges(0, start + count)[start:]
    np.testing.assert_array_equal(a, b)


def test_random_sequences_differ_between_seeds_and_steps():
    g = GraphSequence("random_directed", 6, 1)
    assert not np.array_equal(g.edges(0, 10), GraphSequence("random_directed", 6, 2).edges(0, 10))
    assert not np.array_equal(g.edges(0, 1), g.edges(1, 1))


def test_column_check_rejects_row_stochastic_weights():
    E = GraphSequence("random_directed", 5, 3).edges(0, 1)[0]
    rows = E / E.sum(axis=1, keepdims=True)
    if np.allclose(rows.sum(axis=0), 1.0):  # pragma: no cover - a regular graph by chance
        pytest.skip("regular graph")
    with pytest.raises(MixingError, match="not column-stochastic: column"):
        check_column_stochastic(rows)
    with pytest.raises(MixingError, match="negative"):
        check_column_stochastic(-np.eye(3))
    with pytest.raises(MixingError, match="self-loop"):
        pushsum_weights(np.zeros((3, 3), dtype=bool))


def test_families_match_networkx_structure():
    assert GraphSequence("fully_connected", 4).edges(0, 1).all()
    ring = GraphSequence("directed_ring", 5).edges(0, 1)[0]
    expected = nx.to_numpy_array(nx.cycle_graph(5, create_using=nx.DiGraph), dtype=bool).T
    np.testing.assert_array_equal(ring & ~np.eye(5, dtype=bool), expected)
    W = GraphSequence("static_undirected", 6, 0, 0.5).static_weights()
    np.testing.assert_allclose(W, W.T)
    np.testing.assert_allclose(W.sum(0), 1.0)


@pytest.mark.parametrize("family", CONNECTED_FAMILIES)
def test_connected_families_satisfy_assumption_1(family):
    graph = GraphSequence(family, 5, 7)
    B = graph.measured_window(40)
    assert B is not None and B <= max(graph.window, 8)
    assert graph.assumption_violation(40) is None


def test_negative_control_violates_assumption_1_with_a_clear_message():
    message = GraphSequence("disconnected", 5, 7).assumption_violation(50)
    assert message is not None and "Assumption 1" in message


@given(
    st.sampled_from(CONNECTED_FAMILIES),
    st.integers(1, 6),
    st.integers(0, 100),
    st.integers(0, 12),
    st.integers(1, 4),
)
@settings(max_examples=40)
def test_pushsum_message_passing_equals_the_operator(family, n, seed, S, d):
    """Alg. 1 by messages equals D^{-1} P; Theta_hat 1 = 1; mass conserved; omega > 0."""
    graph = GraphSequence(family, n, seed)
    mixings = graph.mixing(0, S)
    values = torch.as_tensor(np.random.default_rng(seed).standard_normal((n, d)))
    ledger = GraphLedger(n)
    out = push_sum(values, mixings, ledger)
    theta = pushsum_operator(mixings)
    np.testing.assert_allclose(out.y.numpy(), theta @ values.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(theta.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(out.z.sum(0).numpy(), values.sum(0).numpy(), atol=1e-12)
    np.testing.assert_allclose(float(out.omega.sum()), n, atol=1e-12)
    assert (out.omega > 0).all()
    consensus = push_sum(torch.ones(n, d) * 3.0, mixings, GraphLedger(n)).y
    np.testing.assert_allclose(consensus.numpy(), 3.0, atol=1e-12)


def test_fully_connected_is_exact_and_static_is_w_power():
    n = 5
    fc = pushsum_operator(GraphSequence("fully_connected", n).mixing(0, 1))
    np.testing.assert_allclose(fc, np.full((n, n), 1 / n), atol=1e-15)
    g = GraphSequence("static_undirected", n, 3, 0.5)
    W = g.static_weights()
    np.testing.assert_allclose(
        pushsum_operator(g.mixing(0, 4)), np.linalg.matrix_power(W, 4), atol=1e-14
    )
    # symmetric W: sigma_max(W^S - 11^T/n) = SLEM(W)^S exactly
    assert consensus_error(np.linalg.matrix_power(W, 4)) == pytest.approx(slem(W) ** 4, rel=1e-10)


def test_ledger_counts_messages_and_floats_per_edge():
    n, d = 4, 3
    graph = GraphSequence("random_directed", n, 5)
    mixings = graph.mixing(0, 6)
    ledger = GraphLedger(n)
    push_sum(torch.zeros(n, d), mixings, ledger)
    links = graph.edges(0, 6) & ~np.eye(n, dtype=bool)
    np.testing.assert_array_equal(ledger.edge_messages, links.sum(0))
    np.testing.assert_array_equal(ledger.floats_sent, links.sum((0, 1)) * (d + 1))
    np.testing.assert_array_equal(ledger.floats_received, links.sum((0, 2)) * (d + 1))
    assert ledger.payload_sizes == {d + 1} and ledger.steps == 6
    with pytest.raises(MixingError):
        ledger.transmit(torch.zeros(n, d), np.eye(n) * 0.5)

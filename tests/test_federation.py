"""Ledger and client sampling: exact counts for a plain federated gradient round."""

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from testbed import CallCounter
from testbed import ClientSampler
from testbed import Ledger
from testbed import Oracles
from testbed.federation.rounds import federated_gradient_round


@pytest.mark.parametrize("participation", [None, 0.5, 3])
def test_federated_gradient_round_counts_are_exact(participation):
    M, dx, dy = 8, 3, 5
    p = QuadraticBilevel.random(M, dx, dy, 10.0, 0.3, seed=0, gradient_heterogeneity=1.0)
    counter = CallCounter()
    ledger = Ledger(M, counter)
    sampler = ClientSampler(M, participation)
    rng = np.random.default_rng(7)
    x, y = torch.randn(dx), torch.randn(dy)
    mean = federated_gradient_round(p, Oracles(p, counter), ledger, sampler, x, y, rng)
    C = sampler.per_round
    calls = counter.snapshot()
    assert ledger.rounds == calls.comm_rounds == 1
    assert calls.grad_g == C
    assert int(ledger.floats_up.sum()) == calls.floats_up == C * dy
    assert int(ledger.floats_down.sum()) == calls.floats_down == C * (dx + dy) + C * dy
    assert ledger.messages == 3 * C
    assert ledger.largest_payload == dx + dy  # no Hessian-sized message
    participating = np.flatnonzero(ledger.floats_up)
    assert len(participating) == C
    expected = torch.stack([p.A[i] @ y - p.B[i] @ x - p.b[i] for i in participating]).mean(0)
    torch.testing.assert_close(mean, expected, rtol=1e-12, atol=1e-12)


def test_full_participation_round_is_the_global_gradient():
    p = QuadraticBilevel.random(6, 2, 4, 5.0, 0.5, seed=1, gradient_heterogeneity=2.0)
    x, y = torch.randn(2), torch.randn(4)
    mean = federated_gradient_round(
        p, Oracles(p), Ledger(6), ClientSampler(6), x, y, np.random.default_rng(0)
    )
    torch.testing.assert_close(mean, p.inner_grad_y(x, y), rtol=1e-12, atol=1e-12)


def test_sampler_is_seeded_and_uniform_without_replacement():
    sampler = ClientSampler(10, 0.3)
    a = sampler.sample(np.random.default_rng(3))
    b = sampler.sample(np.random.default_rng(3))
    assert torch.equal(a, b) and len(set(a.tolist())) == 3 == sampler.per_round
    counts = np.zeros(10)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        counts[sampler.sample(rng).numpy()] += 1
    # Why 5 sigma: each count is Binomial(2000, 0.3) with sd ~20.5; a 5-sigma band makes a false
    # failure (probability ~6e-6 over 10 counts) negligible while a biased sampler fails.
    assert np.all(np.abs(counts - 600) < 5 * np.sqrt(2000 * 0.3 * 0.7))


@pytest.mark.parametrize("bad", [0, 11, 0.0, 1.5, float("nan"), True, "all"])
def test_sampler_rejects_bad_participation(bad):
    with pytest.raises(ValueError, match="participation"):
        ClientSampler(10, bad)


def test_ledger_rejects_bad_messages():
    ledger = Ledger(3)
    with pytest.raises(ValueError, match="one payload per client"):
        ledger.aggregate(torch.zeros(2, 4), torch.arange(3))
    with pytest.raises(ValueError, match="out of range"):
        ledger.broadcast(torch.zeros(4), torch.tensor([5]))
    with pytest.raises(ValueError, match="at least one client"):
        Ledger(0)

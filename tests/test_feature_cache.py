"""The workloads' body-feature cache (issue 12) changes no number and never serves stale
features: oracles with the cache equal those with it cleared before every call, bit for bit, and
an in-place change of x, a different minibatch or client set, or a new x all miss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems.workloads import build_workload
from problems.workloads import load_dataset
from problems.workloads.models import mlp
from testbed.oracles import Oracles


@pytest.fixture(scope="module")
def problem():
    digits = load_dataset("digits", limit=120)
    network = mlp(digits.input_shape, digits.n_classes, hidden=(6,))
    return build_workload(
        "hyper_representation",
        digits,
        {"scheme": "iid", "n_clients": 4},
        model=network,
        seed=0,
        dtype=torch.float64,
    )


def _point(problem, seed):
    gen = torch.Generator().manual_seed(seed)
    x0, y0 = problem.initial_point()
    return (
        x0 + 0.1 * torch.randn(x0.shape, generator=gen, dtype=x0.dtype),
        y0 + 0.1 * torch.randn(y0.shape, generator=gen, dtype=y0.dtype),
    )


def _second_order(problem, oracles, x, y, v, clients, batch, cold):
    """Inner gradient, HVP, grad_y f at (x, y): the calls a FedInn loop and a Neumann series
    make at one x (the cache's use); ``cold`` clears the cache before each call."""
    out = []
    for call in (
        lambda: oracles.grad_inner(x, y, clients, batch),
        lambda: oracles.hvp_inner(x, y, v, clients, batch),
        lambda: oracles.hvp_inner(x, y, 2.0 * v, clients, batch),
        lambda: oracles.grad_outer_y(x, y, clients, batch),
    ):
        if cold:
            problem.clear_caches()
        out.append(call())
    return out


@pytest.mark.parametrize("minibatch", [False, True])
def test_cached_features_change_no_number(problem, minibatch):
    oracles = Oracles(problem, memo=False)  # the feature cache alone (no call memo)
    x, y = _point(problem, 1)
    v = torch.randn(y.shape, generator=torch.Generator().manual_seed(2), dtype=y.dtype)
    clients = torch.arange(problem.n_clients)
    batch = problem.sample_batch(np.random.default_rng(3), clients, 5) if minibatch else None
    problem.clear_caches()
    hits = problem._features.hits
    warm = _second_order(problem, oracles, x, y, v, clients, batch, cold=False)
    # the two HVPs reuse the features of the inner gradient (grad_y f reads the validation set)
    assert problem._features.hits >= hits + 2
    cold = _second_order(problem, oracles, x, y, v, clients, batch, cold=True)
    for a, b in zip(warm, cold, strict=True):
        assert torch.equal(a, b)


def test_changed_inputs_miss_the_cache(problem):
    oracles = Oracles(problem, memo=False)  # the feature cache alone (no call memo)
    x, y = _point(problem, 4)
    clients = torch.arange(problem.n_clients)
    problem.clear_caches()
    first = oracles.grad_inner(x, y, clients)

    def fresh(x_, clients_=clients, batch=None):
        problem.clear_caches()
        return oracles.grad_inner(x_, y, clients_, batch)

    problem.clear_caches()
    oracles.grad_inner(x, y, clients)  # x's features cached
    with torch.no_grad():
        x.add_(0.05)  # in place: same storage, new version
    changed = oracles.grad_inner(x, y, clients)
    assert not torch.equal(changed, first)
    assert torch.equal(changed, fresh(x))
    other = x.clone() + 0.05  # a new tensor
    assert torch.equal(oracles.grad_inner(other, y, clients), fresh(other))
    subset = torch.tensor([2, 0])  # another client set at the same x
    assert torch.equal(oracles.grad_inner(x, y, subset), fresh(x, subset))
    batch_a = problem.sample_batch(np.random.default_rng(5), clients, 5)
    batch_b = problem.sample_batch(np.random.default_rng(6), clients, 5)
    a = oracles.grad_inner(x, y, clients, batch_a)
    b = oracles.grad_inner(x, y, clients, batch_b)
    assert torch.equal(a, fresh(x, clients, batch_a))
    assert torch.equal(b, fresh(x, clients, batch_b))


def test_a_key_without_the_version_is_caught(problem, monkeypatch):
    """The test above can fail: a cache key that ignores x's version counter serves the features
    of x before an in-place update."""
    from problems.workloads._workload import FeatureCache

    original = FeatureCache.key

    def versionless(x, samples, clients, batch):
        key, holds = original(x, samples, clients, batch)
        return key[:4] + key[5:], holds

    monkeypatch.setattr(FeatureCache, "key", staticmethod(versionless))
    with pytest.raises(AssertionError):
        test_changed_inputs_miss_the_cache(problem)

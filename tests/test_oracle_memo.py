"""The oracles' memo of repeated exact calls (testbed.oracles.ExactCallMemo, issue 12).

FedOut and FedInn ask for the SVRG anchor gradient at every local step; with exact objectives the
autodiff path answers the repeats from the first result. What must hold: the same numbers (bit
for bit) and the same counts as recomputing every call, a hit exactly where the inputs are the
same tensors with the same contents, and never a hit after an in-place change or with a
minibatch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from problems.workloads import build_workload
from problems.workloads import load_dataset
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.fednest import FedNest
from testbed.federation.context import FederatedContext
from testbed.oracles import MEMO_SIZE
from testbed.oracles import Oracles


@pytest.fixture(scope="module")
def workload():
    # 150 digits over 5 clients, the 64-200-10 MLP: a few ms per oracle call, float64 so
    # that "bit-identical" is a statement about the testbed's default precision
    digits = load_dataset("digits", limit=150)
    return build_workload(
        "hyper_representation",
        digits,
        {"scheme": "iid", "n_clients": 5},
        model="mlp",
        seed=0,
        dtype=torch.float64,
    )


def one_step(algorithm, problem, memo: bool):
    getattr(problem, "clear_caches", lambda: None)()
    ctx = FederatedContext(
        problem, np.random.default_rng(0), algorithm.participation, algorithm.batch_size
    )
    ctx.oracles = Oracles(problem, ctx.counter, memo=memo)
    state = algorithm.step(ctx, algorithm.init(problem))
    return state, ctx.calls(), ctx.oracles.memo


def _fednest(inner_steps: int, neumann_terms: int, local_steps: int, **options) -> FedNest:
    """FedNest with deterministic truncation and every step size 0.01."""
    return FedNest(
        inner_steps=inner_steps,
        neumann_terms=neumann_terms,
        local_steps=local_steps,
        truncation="deterministic",
        inner_step_size=0.01,
        outer_step_size=0.01,
        neumann_step_size=0.01,
        **options,
    )


@pytest.mark.parametrize("participation", [None, 3])
def test_a_fednest_iteration_is_bit_identical_with_and_without_the_memo(workload, participation):
    fednest = _fednest(2, 3, 4, participation=participation)
    (remembered, calls, memo), (recomputed, calls_plain, _) = (
        one_step(fednest, workload, memo=True),
        one_step(fednest, workload, memo=False),
    )
    assert torch.equal(remembered.x, recomputed.x) and torch.equal(remembered.y, recomputed.y)
    assert calls == calls_plain  # the papers' cost model counts every call the algorithm makes
    # FedOut: the anchor gradient at every one of the 4 local steps and the first local point
    # (the anchor itself) repeat the direct gradient of round 1: 5 hits; FedInn likewise for
    # grad_y g at each of its 2 calls: 2 x 5.
    assert memo.hits == 5 + 2 * 5


def test_minibatches_are_always_computed(workload):
    fednest = _fednest(1, 2, 3, batch_size=4)
    _, _, memo = one_step(fednest, workload, memo=True)
    assert memo.hits == 0 and memo.misses == 0  # no minibatch call is even looked up


def test_a_hit_needs_the_same_tensors_with_the_same_contents(workload):
    oracles = Oracles(workload)
    clients = torch.arange(workload.n_clients)
    x, y = workload.initial_point()
    first = oracles.grad_outer_x(x, y, clients)
    again = oracles.grad_outer_x(x, y, clients)
    assert oracles.memo.hits == 1 and torch.equal(first, again) and again is not first
    broadcast = oracles.grad_outer_x(x.expand(workload.n_clients, -1), y, clients)
    assert oracles.memo.hits == 2 and torch.equal(first, broadcast)  # the same rows, keyed alike
    x.add_(1e-3)  # in place: a new point under the same tensor
    moved = oracles.grad_outer_x(x, y, clients)
    assert oracles.memo.hits == 2 and not torch.equal(moved, first)
    assert torch.equal(moved, Oracles(workload, memo=False).grad_outer_x(x, y, clients))
    oracles.grad_outer_x(x.clone(), y, clients)  # equal values, another tensor: computed
    assert oracles.memo.hits == 2
    assert oracles.counter.snapshot().grad_f == 5 * workload.n_clients


def test_a_result_changed_in_place_by_its_caller_is_not_handed_out_again(workload):
    oracles = Oracles(workload)
    clients = torch.arange(workload.n_clients)
    x, y = workload.initial_point()
    first = oracles.grad_inner(x, y, clients)
    expected = first.clone()
    first.zero_()
    assert torch.equal(oracles.grad_inner(x, y, clients), expected)
    assert oracles.memo.hits == 0


def test_the_memo_keeps_the_most_recently_used_entries(workload):
    oracles = Oracles(workload)
    clients = torch.arange(workload.n_clients)
    x, y = workload.initial_point()
    anchor = oracles.grad_outer_x(x, y, clients)
    for step in range(3):  # a local step: a new point, then the anchor again
        oracles.grad_outer_x(x + step + 1.0, y, clients)
        assert torch.equal(oracles.grad_outer_x(x, y, clients), anchor)
    assert oracles.memo.hits == 3 and MEMO_SIZE == 2


def test_closed_form_problems_compute_every_call():
    problem = QuadraticBilevel.random(4, 3, 3, 5.0, 0.3, seed=0)
    state, _, memo = one_step(FBOAggITD(inner_steps=3, local_steps=2), problem, memo=True)
    assert memo.hits == 0 and memo.misses == 0
    assert torch.isfinite(state.x).all()

"""FedIHGP's replicate axis (testbed.federation.replicates, fedihgp_replicates) and the (14b)
check's draws computed a block at a time: every replicate's numbers are, bit for bit, those of
its own unbatched run; minibatches drawn ahead (Replicates.drawn_ahead, DrawnAhead) are the
generators' own calls' values and leave them in the same states."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from testbed import FederatedContext
from testbed.estimators.fedihgp import fedihgp
from testbed.estimators.fedihgp import fedihgp_replicates
from testbed.estimators.fedihgp import truncation_schedule
from testbed.estimators.fednest import FedIHGP
from testbed.federation.replicates import DrawnAhead
from testbed.federation.replicates import NotBatchable
from testbed.federation.replicates import Replicates
from theory_checks.decision import Design
from theory_checks.fednest.lemma22.checks import AbsErrorDraws
from theory_checks.fednest.lemma22.checks import LinearOuterProbe
from theory_checks.fednest.perturbations import ScaledIHGP


def _problem(clients: int = 3) -> QuadraticBilevel:
    # three clients with sample Hessians: partial participation and minibatches both draw; one
    # client (the (14b) cases' usual one) draws one sample index a replicate and round
    return QuadraticBilevel.random(
        clients, 2, 2, 3.0, seed=1, n_samples=4, gradient_noise=0.5, hessian_noise=0.3
    )


def _point(problem: QuadraticBilevel) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(7)
    return (
        torch.as_tensor(rng.standard_normal(problem.dim_x)),
        torch.as_tensor(rng.standard_normal(problem.dim_y)),
    )


@pytest.mark.parametrize("participation", [None, 2])
@pytest.mark.parametrize("batch_size", [None, 1, 3])
@pytest.mark.parametrize(
    ("truncation", "index"), [("random", 3), ("random", 0), ("deterministic", None)]
)
def test_each_replicate_is_its_own_run(participation, batch_size, truncation, index):
    problem = _problem()
    x, y = _point(problem)
    seeds = range(5)
    side = Replicates(problem, [np.random.default_rng(s) for s in seeds], participation, batch_size)
    paths = fedihgp_replicates(side, x, y, truncation_schedule(4, 0.3, truncation, index))
    for r, seed in enumerate(seeds):
        ctx = FederatedContext(problem, np.random.default_rng(seed), participation, batch_size)
        alone = torch.stack(fedihgp(ctx, x, y, 4, 0.3, truncation, index).path)
        assert torch.equal(paths[:, r], alone), (r, (paths[:, r] - alone).abs().max())


def test_random_truncation_needs_one_index_for_every_replicate():
    with pytest.raises(ValueError, match="truncation_index"):
        truncation_schedule(4, 0.3, "random", None)
    with pytest.raises(ValueError, match="truncation_index"):
        truncation_schedule(4, 0.3, "random", 4)
    assert truncation_schedule(4, 0.25, "random", 2) == (2, 1.0, 0.25)
    assert truncation_schedule(4, 0.25, "deterministic", None) == (4, 0.25, 0.25)


def _estimator(cls, participation):
    """FedIHGP alone (no inner steps) as the (14b) check builds it: N = 5, b = 1."""
    return cls(
        inner_steps=0,
        neumann_terms=5,
        neumann_step_size=0.25,
        batch_size=1,
        participation=participation,
    )


def _draws_one_by_one(estimator, problem, x, y, H_inv, last, design, draws):
    """The (14b) check's draws as it computed them before the replicate axis: one FedIHGP run
    per probe and draw, in its own context."""
    values = []
    for j in draws:
        paths = []
        for e in torch.eye(problem.dim_y, dtype=torch.float64):
            ctx = estimator.context(LinearOuterProbe(problem, e), design.rng(j))
            paths.append(torch.stack(estimator.ihgp(ctx, x, y, truncation_index=last).path))
        H_hats = torch.stack(paths, dim=2)
        values.append(float(torch.linalg.matrix_norm(H_inv - H_hats, ord=2).mean()))
    return values


@pytest.mark.parametrize(("participation", "clients"), [(None, 3), (2, 3), (None, 1)])
@pytest.mark.parametrize("cls", [FedIHGP, ScaledIHGP])
def test_abs_error_draws_equal_the_unbatched_draws(participation, clients, cls):
    """A block of draws (FedIHGP's replicates; a changed ``ihgp`` per replicate through it)
    gives every draw's ``Z_j`` exactly; the looks ask for blocks up to each look."""
    problem = _problem(clients)
    x, y = _point(problem)
    H_inv = torch.linalg.inv(problem.A.mean(0))
    estimator = _estimator(cls, participation)
    design = Design(seed=(3, 1, 4))
    draws = AbsErrorDraws(estimator, problem, x, y, H_inv, 4, design)
    expected = _draws_one_by_one(estimator, problem, x, y, H_inv, 4, design, range(9))
    assert draws.values(range(9)) == expected
    draw = draws.look_ahead([3, 9])
    assert [draw(j) for j in range(9)] == expected
    if cls is ScaledIHGP:  # the planted mistake changes the draws: it is not bypassed
        honest = _estimator(FedIHGP, participation)
        assert AbsErrorDraws(honest, problem, x, y, H_inv, 4, design).values(range(9)) != expected


class _ExtraDraw(QuadraticBilevel):
    """A problem whose minibatch draw also makes a draw without a row per client."""

    def sample_batch(self, rng, clients, batch_size):
        batch = super().sample_batch(rng, clients, batch_size)
        rng.random()
        return batch


def test_a_draw_without_rows_runs_each_replicate_alone_from_fresh_generators():
    problem = _ExtraDraw.random(
        3, 2, 2, 3.0, seed=1, n_samples=4, gradient_noise=0.5, hessian_noise=0.3
    )
    x, y = _point(problem)
    side = Replicates(problem, [np.random.default_rng(0), np.random.default_rng(1)], None, 1)
    with pytest.raises(NotBatchable, match="stack"):
        fedihgp_replicates(side, x, y, truncation_schedule(4, 0.3, "random", 2))
    H_inv = torch.linalg.inv(problem.A.mean(0))
    estimator = _estimator(FedIHGP, 2)
    design = Design(seed=(3, 1, 4))
    expected = _draws_one_by_one(estimator, problem, x, y, H_inv, 4, design, range(4))
    assert AbsErrorDraws(estimator, problem, x, y, H_inv, 4, design).values(range(4)) == expected


# Each call's replicates (``members``), in turn: all of them, then fewer, as AggITD's term
# rounds select theirs; replicate r is served COUNTS[r] draws in all.
_CALLS = [[0, 1, 2, 3], [1, 2, 3], [1, 2, 3], [2, 3], [2, 3], [2], [2], [2]]
_COUNTS = [1, 3, 8, 5]


@pytest.mark.parametrize("high", [1, 2, 16, 1000, 2**31 + 7, 2**32])
@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (2, 4)])
def test_draws_ahead_are_the_generators_own_calls(high, shape):
    """Every replicate's draws, served in its calls' order whatever the other replicates ask,
    are its generator's own ``integers(0, n, size=(C, b))`` calls' values, and the generators
    end in the states those calls leave; a replicate asking for more is a wrong count."""
    own = [np.random.default_rng([11, r]) for r in range(4)]
    generators = [np.random.default_rng([11, r]) for r in range(4)]
    ahead = DrawnAhead(generators, high, _COUNTS, shape)
    for members in _CALLS:
        size = (len(members) * shape[0], shape[1])
        expected = np.concatenate([own[r].integers(0, high, size=shape) for r in members])
        got = ahead.next(np.array(members), 0, high, size)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
    ahead.check_used()
    assert [g.bit_generator.state for g in generators] == [g.bit_generator.state for g in own]
    with pytest.raises(AssertionError, match="more minibatches"):
        ahead.next(np.array([2]), 0, high, shape)


def test_draws_ahead_refuse_what_they_cannot_serve():
    """Another bound or shape is not served (NotBatchable: the run is made one by one); draws
    left unused are a wrong count."""
    ahead = DrawnAhead([np.random.default_rng(r) for r in range(2)], 16, [2, 2], (3, 1))
    members = np.arange(2)
    for low, high, size in ((0, 8, (6, 1)), (1, 16, (6, 1)), (0, 16, (3, 1)), (0, 16, None)):
        with pytest.raises(NotBatchable):
            ahead.next(members, low, high, size)
    ahead.next(members, 0, 16, (6, 1))
    with pytest.raises(AssertionError, match="not all used"):
        ahead.check_used()


def test_replicates_draw_ahead_only_what_they_draw():
    """Exact oracles and a problem without samples draw nothing ahead (the replicates
    themselves); a served copy hands each replicate its own draws, also through
    :meth:`Replicates.select`, checks its counts, and is not served draws ahead again (its
    generators are past them)."""
    problem = _problem()
    rngs = [np.random.default_rng(s) for s in range(3)]
    exact = Replicates(problem, rngs, None, None)
    assert exact.drawn_ahead([2, 2, 2]) is exact
    unsampled = QuadraticBilevel.random(3, 2, 2, 3.0, seed=1)
    side = Replicates(unsampled, rngs, None, 1)
    assert side.drawn_ahead([2, 2, 2]) is side
    side = Replicates(problem, [np.random.default_rng(s) for s in range(3)], None, 2)
    served = side.drawn_ahead([1, 2, 2])
    assert served is not side and side.ahead is None
    clients = served.participants()
    own = [np.random.default_rng(s) for s in range(3)]
    first = served.draw(clients)
    expected = np.concatenate([g.integers(0, 4, size=(3, 2)) for g in own])
    assert np.array_equal(first.indices.numpy(), expected)
    part = served.select([2, 1])
    second = part.draw(part.participants())
    expected = np.concatenate([own[r].integers(0, 4, size=(3, 2)) for r in (2, 1)])
    assert np.array_equal(second.indices.numpy(), expected)
    served.check_drawn()
    with pytest.raises(AssertionError, match="already served"):
        part.drawn_ahead([1, 1])

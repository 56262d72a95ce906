"""FedMSA (Tarzanagh et al. 2023, Algorithm 1): reductions, invariances, exact counts, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from problems import LinearCompositional
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from problems import RiskAverse
from testbed import run_algorithm
from testbed.algorithms.fedmsa import FedMSA
from testbed.algorithms.fedmsa_maps import BilevelMaps
from testbed.algorithms.fedmsa_maps import CompositionalMaps
from testbed.registry import get_estimator
from tests._tol import IDENTITY_RTOL
from theory_checks.fedmsa.common import mean_maps
from theory_checks.fedmsa.common import reference_maps
from theory_checks.fedmsa.constants import heterogeneity_tau


def _bilevel(M: int = 4, hh: float = 0.3, seed: int = 0, **kw) -> QuadraticBilevel:
    return QuadraticBilevel.random(
        M, 3, 2, 3.0, seed=seed, hessian_heterogeneity=hh, gradient_heterogeneity=1.0, **kw
    )


def _run(alg, problem, rounds, seed=0, state=None):
    return run_algorithm(alg, problem, rounds, np.random.default_rng(seed), state=state)


def _centralised(problem, x, Z, alpha, beta, steps):
    """Single-timescale MSA on the averaged maps (reference maps read off the arrays)."""
    out = [(x, Z)]
    for _ in range(steps):
        P, S = mean_maps(problem, out[-1][0][None], out[-1][1][None])
        out.append((out[-1][0] - alpha * P[0], out[-1][1] - beta * S[0]))
    return out


def _close(a, b, scale=1.0):
    assert float((a - b).abs().max()) <= IDENTITY_RTOL * max(scale, 1.0), (a, b)


# --------------------------------------------------------------------------- reductions


@pytest.mark.parametrize(
    "problem",
    [
        _bilevel(M=1, hh=0.0),
        QuadraticMinimax.random(1, 2, 3, 4.0, seed=2),
        LinearCompositional.random(1, [2, 3, 3], 5, value_heterogeneity=1.0),
    ],
    ids=["bilevel", "minimax", "compositional"],
)
@pytest.mark.parametrize("K", [1, 3])
def test_single_client_reproduces_centralised_msa(problem, K):
    name = "fedmsa-mco" if problem.kind == "compositional" else "fedmsa"
    alg = get_estimator(name).build(
        local_steps=K, outer_step_size=0.05, inner_step_size=0.1, momentum=0.4
    )
    R = 5
    records = _run(alg, problem, R)
    ref = _centralised(problem, records[0].x, records[0].state.Z, 0.05, 0.1, 1 + (R - 1) * K)
    for rec in records[1:]:
        x_ref, Z_ref = ref[1 + (rec.iteration - 1) * K]
        _close(rec.state.x, x_ref, float(x_ref.abs().max()))
        _close(rec.state.Z, Z_ref, float(Z_ref.abs().max()))


def test_identical_clients_equal_one_client():
    one = _bilevel(M=1, hh=0.0, seed=3)
    many = QuadraticBilevel(
        *(
            getattr(one, k).repeat(5, *([1] * (getattr(one, k).ndim - 1)))
            for k in ("A", "B", "b", "C", "D", "c", "E", "e")
        )
    )
    alg = get_estimator("fedmsa").build(local_steps=3, momentum=0.2)
    a, b = _run(alg, one, 6), _run(alg, many, 6)
    for ra, rb in zip(a, b, strict=True):
        _close(ra.state.x, rb.state.x, 10.0)
        _close(ra.state.Z, rb.state.Z, 10.0)


def test_tau_zero_with_value_heterogeneity_equals_centralised_msa():
    problem = _bilevel(M=5, hh=0.0, seed=4)
    assert heterogeneity_tau(problem) < 1e-12
    K, R = 3, 5
    alg = get_estimator("fedmsa").build(
        local_steps=K, outer_step_size=0.05, inner_step_size=0.05, momentum=0.7
    )
    records = _run(alg, problem, R)
    ref = _centralised(problem, records[0].x, records[0].state.Z, 0.05, 0.05, 1 + (R - 1) * K)
    _close(records[-1].x, ref[-1][0], 10.0)


def test_h_first_local_step_is_global_direction_and_telescopes():
    problem = _bilevel(M=4, hh=0.4, seed=5)
    alg = get_estimator("fedmsa").build(local_steps=4, momentum=0.3)
    for rec in _run(alg, problem, 4)[1:]:
        state = rec.state
        _close(state.local[0].h, state.h[None], 10.0)
        P_a, _ = reference_maps(problem, state.anchor_x[None], state.anchor_Z[None])
        _close(state.h, P_a[0].mean(0), 10.0)  # h_r = P(x_r, Z_r) exactly when sigma = 0
        m = int(state.clients[0])
        for it in state.local:
            P_k, _ = reference_maps(problem, it.x, it.Z)
            _close(it.h[0], state.h + P_k[0, m] - P_a[0, m], 10.0)


def test_round_zero_uses_one_local_step_and_no_momentum():
    problem = _bilevel()
    state = _run(get_estimator("fedmsa").build(local_steps=5, momentum=0.0), problem, 1)[1].state
    assert len(state.local) == 1
    P, S = mean_maps(problem, state.anchor_x[None], state.anchor_Z[None])
    _close(state.h, P[0], 10.0)
    _close(state.q, S[0], 10.0)


def test_exact_and_paper_compositional_semantics_agree_when_jacobians_are_homogeneous():
    problem = LinearCompositional.random(
        4, [2, 3, 3], 1, jacobian_heterogeneity=0.0, value_heterogeneity=2.0
    )
    runs = [
        _run(get_estimator("fedmsa-mco").build(semantics=s, local_steps=2), problem, 5)
        for s in ("paper", "exact")
    ]
    _close(runs[0][-1].x, runs[1][-1].x, 10.0)


def test_exact_semantics_converges_to_the_optimum_and_paper_semantics_does_not():
    problem = LinearCompositional.random(
        3, [2, 3], 0, jacobian_heterogeneity=0.4, value_heterogeneity=2.0
    )
    x_star = problem.optimum()
    gaps = {}
    for semantics in ("paper", "exact"):
        alg = get_estimator("fedmsa-mco").build(
            semantics=semantics, local_steps=2, outer_step_size=0.1, inner_step_size=0.3
        )
        gaps[semantics] = float((_run(alg, problem, 300)[-1].x - x_star).norm())
    assert gaps["exact"] < 1e-8 < 1e-3 < gaps["paper"]


# --------------------------------------------------------------------------- invariances


def _permuted(problem: QuadraticBilevel, perm: torch.Tensor) -> QuadraticBilevel:
    return QuadraticBilevel(
        *(getattr(problem, k)[perm] for k in ("A", "B", "b", "C", "D", "c", "E", "e"))
    )


def test_permuting_clients_changes_nothing_under_full_local_participation():
    problem = _bilevel(M=5, hh=0.4, seed=6)
    perm = torch.tensor([3, 0, 4, 1, 2])
    alg = get_estimator("fedmsa-generalised").build(participation=1.0, local_steps=3)
    a, b = _run(alg, problem, 6), _run(alg, _permuted(problem, perm), 6)
    _close(a[-1].x, b[-1].x, 10.0)
    _close(a[-1].state.Z, b[-1].state.Z, 10.0)


def test_permuting_clients_with_the_sampled_client_mapped_changes_nothing():
    problem = _bilevel(M=5, hh=0.4, seed=7)
    perm = torch.tensor([2, 4, 0, 1, 3])  # new client i is old client perm[i]
    alg = get_estimator("fedmsa").build(local_steps=3)
    b = _run(alg, _permuted(problem, perm), 6)
    # replaying the permuted run's sampled clients, mapped back, on the original problem
    chosen = [int(perm[r.state.clients[0]]) for r in b[1:]]

    @dataclasses.dataclass(frozen=True)
    class Scripted(FedMSA):
        def advance(self, ctx, state):
            ctx.sampler = _Fixed(chosen[state.round], ctx.sampler.n_clients)
            return super().advance(ctx, state)

    replay = _run(
        Scripted(**{f.name: getattr(alg, f.name) for f in dataclasses.fields(alg)}), problem, 6
    )
    _close(replay[-1].x, b[-1].x, 10.0)
    _close(replay[-1].state.Z, b[-1].state.Z, 10.0)


@dataclasses.dataclass(frozen=True)
class _Fixed:
    client: int
    n_clients: int

    def sample(self, rng):
        return torch.tensor([self.client])

    def all_clients(self):
        return torch.arange(self.n_clients)


# --------------------------------------------------------------------------- ledger and cost


@pytest.mark.parametrize("momentum", [0.5, 1.0])
def test_ledger_counts_two_rounds_per_round_and_exact_floats(momentum):
    M, dx, dy, R, K = 4, 3, 2, 5, 3
    problem = _bilevel(M=M)
    alg = get_estimator("fedmsa").build(local_steps=K, momentum=momentum)
    assert alg.rounds_per_iteration() == 2 == alg.rounds_per_round(problem)
    records = _run(alg, problem, R)
    d = dx + 2 * dy
    for prev, rec in zip(records, records[1:], strict=False):
        assert rec.calls.comm_rounds - prev.calls.comm_rounds == 2
    calls = records[-1].calls
    assert calls.comm_rounds == 2 * R
    points = [1] + [1 if momentum == 1.0 else 2] * (R - 1)  # server points broadcast per round
    assert calls.floats_down == sum(M * p * d for p in points) + R * (M * d + d)
    assert calls.floats_up == R * (M * d + d)
    # oracle calls: (5) evaluates M clients at 1 or 2 points; (6) 2 points per local step
    evals = sum(M * min(p, 2) for p in points) + 2 * (1 + (R - 1) * K)
    assert calls.grad_f == calls.grad_g == calls.hvp == calls.jvp == evals


def test_exact_semantics_costs_one_round_per_level_more():
    problem = LinearCompositional.random(3, [2, 3, 3, 2], 0, jacobian_heterogeneity=0.2)
    alg = get_estimator("fedmsa-mco").build(semantics="exact")
    assert alg.rounds_per_iteration() is None and alg.rounds_per_round(problem) == 2 + 3
    assert _run(alg, problem, 4)[-1].calls.comm_rounds == 4 * (2 + 3)
    paper = get_estimator("fedmsa-mco").build()
    assert _run(paper, problem, 4)[-1].calls.comm_rounds == 8


def test_generalised_variant_averages_the_sampled_clients():
    problem = _bilevel(M=10, hh=0.3)
    alg = get_estimator("fedmsa-generalised").build()
    records = _run(alg, problem, 3)
    assert all(len(r.state.clients) == 1 for r in records[1:])  # 10% of 10 clients
    alg = get_estimator("fedmsa-generalised").build(participation=0.3)
    state = _run(alg, problem, 2)[-1].state
    assert len(state.clients) == 3
    last = state.local[-1]
    expected_x = (last.x - alg.outer_step_size * last.h).mean(0)
    _close(state.x, expected_x, 10.0)


# --------------------------------------------------------------------------- randomness


def test_seeded_runs_are_reproducible_and_seeds_matter():
    problem = _bilevel(M=6, n_samples=5, gradient_noise=0.5, hessian_noise=0.1)
    alg = get_estimator("fedmsa").build(batch_size=2, local_steps=3)
    a, b, c = _run(alg, problem, 5, 1), _run(alg, problem, 5, 1), _run(alg, problem, 5, 2)
    assert torch.equal(a[-1].x, b[-1].x) and torch.equal(a[-1].state.Z, b[-1].state.Z)
    assert not torch.equal(a[-1].x, c[-1].x)


def test_stochastic_first_local_step_uses_the_same_sample_at_both_points():
    problem = LinearCompositional.random(
        4, [2, 3], 0, jacobian_heterogeneity=0.3, n_samples=6, matrix_noise=0.2, value_noise=0.5
    )
    alg = get_estimator("fedmsa-mco").build(batch_size=2, local_steps=3)
    for rec in _run(alg, problem, 4)[1:]:
        _close(rec.state.local[0].h, rec.state.h[None], 10.0)
        _close(rec.state.local[0].q, rec.state.q[None], 10.0)


# --------------------------------------------------------------------------- other problems


def test_runs_on_risk_averse_and_decreases_the_objective():
    problem = RiskAverse(n_clients=2, n_examples=200, seed=0)
    alg = get_estimator("fedmsa-mco").build(
        outer_step_size=1e-4, inner_step_size=0.5, local_steps=5, momentum=0.5, batch_size=20
    )
    x0 = torch.full((problem.dims[0],), 0.1)  # the authors' notebook start (x = 0 is stationary)
    state = alg.state_at(problem, x0, torch.cat(problem.level_values(x0)[1:]))
    records = _run(alg, problem, 20, state=state)
    assert float(problem.objective(records[-1].x)) < 0.5 * float(problem.objective(x0))
    assert records[-1].calls.comm_rounds == 40


def test_minimax_converges_to_the_saddle():
    problem = QuadraticMinimax.random(
        4, 2, 2, 2.0, seed=3, hessian_heterogeneity=0.3, gradient_heterogeneity=1.0
    )
    alg = get_estimator("fedmsa").build(local_steps=3, outer_step_size=0.1, inner_step_size=0.2)
    x = _run(alg, problem, 300)[-1].x
    assert float(problem.exact_hypergradient(x).norm()) < 1e-8


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"outer_step_size": 0.0}, "outer_step_size"),
        ({"outer_step_size": float("nan")}, "outer_step_size"),
        ({"inner_step_size": -1.0}, "inner_step_size"),
        ({"inner_step_size": ()}, "inner_step_size"),
        ({"momentum": 1.5}, "momentum"),
        ({"momentum": -0.1}, "momentum"),
        ({"local_steps": 0}, "local_steps"),
        ({"local_steps": 2.5}, "local_steps"),
        ({"batch_size": 0}, "batch_size"),
        ({"participation": "all"}, "participation"),
        ({"maps": "bilevel"}, "maps"),
    ],
)
def test_bad_parameters_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FedMSA(**kwargs)


def test_bad_semantics_and_unsupported_problems_raise():
    with pytest.raises(ValueError, match="semantics"):
        CompositionalMaps("average")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not support compositional"):
        FedMSA(maps=BilevelMaps()).init(LinearCompositional.random(2, [1, 2], 0))
    with pytest.raises(ValueError, match="does not support bilevel"):
        FedMSA(maps=CompositionalMaps()).init(_bilevel())
    with pytest.raises(ValueError, match="one value or one per level"):
        FedMSA(maps=CompositionalMaps(), inner_step_size=(0.1, 0.2)).init(
            LinearCompositional.random(2, [1, 2], 0)
        )


def test_per_level_steps_are_used():
    problem = LinearCompositional.random(2, [1, 2, 2], 0)
    alg = FedMSA(maps=CompositionalMaps(), inner_step_size=(0.1, 0.0001), local_steps=1)
    state = _run(alg, problem, 1)[-1].state
    q = state.local[0].q[0]
    expected = -torch.cat([0.1 * q[:2], 0.0001 * q[2:]])
    _close(state.Z, expected, 10.0)

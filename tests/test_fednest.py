"""FedNest (Tarzanagh et al. 2022): FedIHGP, FedInn, FedOut and the outer loops.

Reductions to centralized estimators, permutation invariance, exact communication counts, payload
sizes, reproducibility and parameter validation. The paper's quantitative claims live in
``theory_checks/fednest.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from problems import LinearCompositional
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from testbed import FederatedContext
from testbed import GlobalOracles
from testbed import GradientDescent
from testbed import ImplicitDifferentiation
from testbed import InnerState
from testbed import Neumann
from testbed import Oracles
from testbed import run_algorithm
from testbed.algorithms.fednest import FedNest
from testbed.estimators.fedihgp import fedihgp
from testbed.estimators.fednest import FedIHGP
from testbed.estimators.fednest import fedinn
from testbed.registry import get_estimator
from tests._tol import IDENTITY_RTOL

VARIANTS = ("fednest", "lfednest", "fednest-sgd", "lfednest-svrg")


def _close(a: torch.Tensor, b: torch.Tensor, scale: float = 1.0) -> None:
    tol = IDENTITY_RTOL * (scale + float(b.abs().max()))
    torch.testing.assert_close(a, b, rtol=0.0, atol=tol)


def _problem(m: int = 4, seed: int = 0) -> QuadraticBilevel:
    return QuadraticBilevel.random(
        m, 3, 4, 8.0, seed=seed, hessian_heterogeneity=0.5, gradient_heterogeneity=1.5
    )


# ------------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("terms", [1, 4, 12])
def test_deterministic_fedihgp_equals_aid_neumann(m, terms):
    """Full participation: the server's averaged HVPs are the global HVPs, so the deterministic
    FedIHGP (p_0 and N Hessian rounds) is AID-Neumann with N + 1 terms at the same y."""
    p = _problem(m)
    lam = 1.0 / p.constants().L_clients
    x, y = torch.randn(3, generator=torch.Generator().manual_seed(1)), torch.ones(4)
    fed = FedIHGP(
        inner_steps=0, neumann_terms=terms, neumann_step_size=lam, truncation="deterministic"
    )
    out = fed.estimate(p, x, InnerState(y), np.random.default_rng(0))
    aid = ImplicitDifferentiation(GradientDescent(0), Neumann(terms + 1, lam))
    ref = aid.estimate(p, x, InnerState(y), np.random.default_rng(0))
    _close(out.value, ref.value)
    assert out.calls.hvp == m * terms and out.calls.comm_rounds == terms + 2


def test_random_fedihgp_single_draw_is_scaled_power():
    """One draw of Alg. 3: p_{N'} = (N/l) (I - H/l)^{N'} grad_y f (full participation)."""
    p = _problem(3)
    lam, terms = 1.0 / p.constants().L_clients, 7
    x, y = torch.zeros(3), torch.ones(4)
    ctx = FederatedContext(p, np.random.default_rng(5))
    result = fedihgp(ctx, x, y, terms, lam)
    A = torch.eye(4) - lam * p.means["A"]
    expected = (
        terms * lam * torch.linalg.matrix_power(A, result.truncation_index) @ p.outer_grad_y(x, y)
    )
    _close(result.p, expected)
    assert result.rounds == result.truncation_index + 1 == ctx.ledger.rounds


@pytest.mark.parametrize("tau", [1, 3])
def test_single_client_fedinn_is_gradient_descent(tau):
    """One client: the control variate cancels, FedInn is tau GD steps with step beta, i.e.
    ``y^+ = y - P grad g(y)`` with the effective step ``P = H^{-1}(I - (I - beta H)^tau)``."""
    p = _problem(1)
    beta = 0.7 / p.constants().L
    x, y = torch.ones(3), torch.zeros(4)
    ctx = FederatedContext(p, np.random.default_rng(0))
    y_plus = fedinn(ctx, x, y, beta, tau, scale_by_steps=False)
    gd = GradientDescent(tau, beta).run(
        GlobalOracles(Oracles(p), np.random.default_rng(0)), x, y, keep_trajectory=False
    )
    _close(y_plus, gd.y)
    H = p.means["A"]
    P = torch.linalg.solve(
        H, torch.eye(4) - torch.linalg.matrix_power(torch.eye(4) - beta * H, tau)
    )
    _close(y_plus, y - P @ p.inner_grad_y(x, y))


def test_single_client_fednest_is_the_centralized_loop():
    """One client, exact oracles, deterministic truncation: FedNest = warm-started GD on y,
    Neumann hypergradient, and tau local steps on x with the frozen indirect term."""
    p = _problem(1, seed=3)
    T, N, tau, beta, alpha = 3, 5, 2, 0.5, 0.1
    lam = 1.0 / p.constants().L_clients
    algo = FedNest(
        inner_steps=T,
        neumann_terms=N,
        local_steps=tau,
        inner_step_size=beta,
        outer_step_size=alpha,
        truncation="deterministic",
        scale_by_steps=False,
    )
    records = run_algorithm(algo, p, 4, np.random.default_rng(0))
    glob = GlobalOracles(Oracles(p), np.random.default_rng(0))
    x, y = p.initial_point()
    for record in records[1:]:
        for _ in range(T):
            y = GradientDescent(tau, beta).run(glob, x, y, keep_trajectory=False).y
        gx, gy = glob.grad_outer(x, y)
        v = Neumann(N + 1, lam).solve(lambda u, x=x, y=y: glob.hvp(x, y, u), gy, p)
        h = gx - glob.jvp_xy(x, y, v)
        x_local = x
        for _ in range(tau):
            x_local = x_local - alpha * (
                glob.grad_outer(x_local, y)[0] - glob.grad_outer(x, y)[0] + h
            )
        x = x_local
        _close(record.state.x, x, 1.0)
        _close(record.state.y, y, 1.0)
        _close(record.state.h, h, 1.0)


# ------------------------------------------------------------------------------- invariances


def _permuted(p: QuadraticBilevel, order: torch.Tensor) -> QuadraticBilevel:
    arrays = {k: getattr(p, k)[order] for k in ("A", "B", "b", "C", "D", "c", "E", "e")}
    return QuadraticBilevel(**arrays)


@pytest.mark.parametrize("name", VARIANTS)
def test_permuting_clients_changes_nothing(name):
    p = _problem(5, seed=2)
    order = torch.tensor([3, 0, 4, 1, 2])
    taus = (1, 2, 3, 1, 2)
    algo = get_estimator(name).build(
        inner_steps=2, neumann_terms=4, truncation="deterministic", local_steps=taus
    )
    permuted_algo = get_estimator(name).build(
        inner_steps=2,
        neumann_terms=4,
        truncation="deterministic",
        local_steps=tuple(taus[int(i)] for i in order),
    )
    a = run_algorithm(algo, p, 3, np.random.default_rng(0))[-1].state
    b = run_algorithm(permuted_algo, _permuted(p, order), 3, np.random.default_rng(0))[-1].state
    _close(a.x, b.x, 1.0)
    _close(a.y, b.y, 1.0)


# ------------------------------------------------------------------------------- communication


@pytest.mark.parametrize("name", [*VARIANTS, "fednest-minimax"])
@pytest.mark.parametrize("participation", [None, 2])
def test_ledger_counts_and_payloads(name, participation):
    if name == "fednest-minimax":
        p = QuadraticMinimax.random(4, 2, 3, 5.0, 0.3, seed=1)
    else:
        p = QuadraticBilevel.random(4, 2, 3, 5.0, 0.3, seed=1)
    T, N = 2, 3
    algo = get_estimator(name).build(
        inner_steps=T,
        neumann_terms=N,
        local_steps=(1, 2, 1, 3),
        truncation="deterministic",
        participation=participation,
    )
    ctx = FederatedContext(p, np.random.default_rng(0), participation)
    state = algo.init(p)
    for _ in range(3):
        before = ctx.ledger.rounds
        state = algo.step(ctx, state)
        assert ctx.ledger.rounds - before == state.rounds == algo.rounds_per_iteration()
    expected = {
        "fednest": 2 * T + N + 3,
        "lfednest": T + 1,
        "fednest-sgd": T + N + 3,
        "lfednest-svrg": 2 * T + 1,
        "fednest-minimax": 2 * T + 2,
    }[name]
    assert algo.rounds_per_iteration() == expected
    # no Hessian or Jacobian is ever sent: every payload is one x- or y-vector
    assert ctx.ledger.payload_sizes <= {p.dim_x, p.dim_y}
    assert ctx.ledger.largest_payload <= max(p.dim_x, p.dim_y)
    assert ctx.calls().comm_rounds == ctx.ledger.rounds


def test_random_truncation_uses_n_prime_plus_one_ihgp_rounds():
    p = _problem(3)
    algo = FedNest(inner_steps=2, neumann_terms=6)
    records = run_algorithm(algo, p, 6, np.random.default_rng(4))
    for before, after in zip(records[:-1], records[1:], strict=True):
        rounds = after.calls.comm_rounds - before.calls.comm_rounds
        assert rounds == after.state.rounds == 2 * 2 + after.state.truncation_index + 3
        assert rounds <= algo.rounds_per_iteration() - 1


# ------------------------------------------------------------------------------- randomness


def _stochastic_problem() -> QuadraticBilevel:
    return QuadraticBilevel.random(
        6, 2, 3, 4.0, 0.3, seed=0, n_samples=8, gradient_noise=0.5, hessian_noise=0.2
    )


@pytest.mark.parametrize("name", VARIANTS)
def test_reproducible_from_the_seed(name):
    p = _stochastic_problem()
    algo = get_estimator(name).build(
        inner_steps=2, neumann_terms=4, participation=0.5, batch_size=2, local_steps=2
    )
    a = run_algorithm(algo, p, 3, np.random.default_rng(11))[-1]
    b = run_algorithm(algo, p, 3, np.random.default_rng(11))[-1]
    c = run_algorithm(algo, p, 3, np.random.default_rng(12))[-1]
    assert torch.equal(a.x, b.x) and torch.equal(a.state.y, b.state.y) and a.calls == b.calls
    assert not torch.equal(a.x, c.x)


def test_fedihgp_estimator_is_reproducible():
    p = _stochastic_problem()
    est = FedIHGP(inner_steps=1, neumann_terms=5, participation=3, batch_size=2, local_steps=2)
    x = torch.ones(2)
    a = est.estimate(p, x, est.init(p), np.random.default_rng(3))
    b = est.estimate(p, x, est.init(p), np.random.default_rng(3))
    assert torch.equal(a.value, b.value) and a.aux["truncation_index"] == b.aux["truncation_index"]


# ------------------------------------------------------------------------------- kinds


def test_minimax_fixed_point_is_the_saddle_point():
    p = QuadraticMinimax.random(4, 2, 3, 4.0, 0.5, seed=0)
    algo = get_estimator("fednest-minimax").build(inner_steps=3, local_steps=2)
    x_star, y_star = p.saddle_point()
    state = algo.init(p)._replace(x=x_star, y=y_star)
    after = algo.step(FederatedContext(p, np.random.default_rng(0)), state)
    _close(after.x, x_star, 1.0)
    _close(after.y, y_star, 1.0)


def test_compositional_single_term_fednest_converges():
    p = LinearCompositional.random(3, (2, 3), seed=0, heterogeneity=0.5)
    # T = 1 and beta = 1 (Cor. 3.3 and Sec. 2.4): each FedInn call lands on y*(x) exactly
    algo = FedNest(
        inner_steps=1, neumann_terms=1, local_steps=1, inner_step_size=1.0, scale_by_steps=False
    )
    records = run_algorithm(algo, p, 80, np.random.default_rng(0))
    assert float(p.exact_hypergradient(records[-1].x).norm()) < 1e-6


# ------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (FedNest, {"neumann_terms": 0}, "neumann_terms"),
        (FedNest, {"inner_steps": 0}, "inner_steps"),
        (FedNest, {"local_steps": 0}, "local_steps"),
        (FedNest, {"local_steps": (1, 0)}, "local_steps"),
        (FedNest, {"local_steps": True}, "local_steps"),
        (FedNest, {"truncation": "geometric"}, "truncation"),
        (FedNest, {"inner_method": "adam"}, "inner_method"),
        (FedNest, {"outer_method": "joint"}, "outer_method"),
        (FedNest, {"outer_step_size": -1.0}, "outer_step_size"),
        (FedNest, {"inner_step_size": float("nan")}, "inner_step_size"),
        (FedNest, {"neumann_step_size": 0.0}, "neumann_step_size"),
        (FedNest, {"batch_size": 0}, "batch_size"),
        (FedNest, {"participation": "half"}, "participation"),
        (FedIHGP, {"neumann_terms": 0}, "neumann_terms"),
        (FedIHGP, {"inner_steps": -1}, "inner_steps"),
        (FedIHGP, {"truncation": "none"}, "truncation"),
        (FedIHGP, {"local_steps": ()}, "local_steps"),
    ],
)
def test_bad_parameters_raise(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_bad_problem_pairings_raise():
    p = _problem(3)
    with pytest.raises(ValueError, match="minimax"):
        FedNest(outer_method="minimax").init(p)
    with pytest.raises(ValueError, match="one tau_i per client"):
        FedNest(local_steps=(1, 2)).init(p)
    with pytest.raises(ValueError, match="truncation_index"):
        fedihgp(
            FederatedContext(p, np.random.default_rng(0)),
            torch.zeros(3),
            torch.zeros(4),
            3,
            0.1,
            truncation_index=3,
        )

"""Classical estimators against the exact hypergradient, the NumPy references and exact counts."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from problems import QuadraticBilevel
from problems import strategies
from testbed import ConjugateGradient
from testbed import ExactInnerSolution
from testbed import GradientDescent
from testbed import ImplicitDifferentiation
from testbed import InnerState
from testbed import IterativeDifferentiation
from testbed import Neumann
from testbed.registry import ESTIMATOR_DB
from tests._tol import IDENTITY_RTOL
from tests.reference import classical as ref


def _point(p, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(p.dim_x), rng.standard_normal(p.dim_y)


def _run(est, p, x, y0, seed=0):
    return est.estimate(
        p, torch.as_tensor(x), InnerState(torch.as_tensor(y0)), np.random.default_rng(seed)
    )


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b))) / (1 + np.linalg.norm(b))


@settings(max_examples=15)
@given(
    strategies.quadratic_bilevel(max_clients=5, max_dim=5), st.integers(0, 30), st.integers(1, 30)
)
def test_estimators_match_numpy_references(p, steps, terms):
    arrays = p.to_arrays()
    x, y0 = _point(p)
    beta = 1.0 / p.constants().L
    y_T = ref.gradient_descent(arrays, x, y0, steps, beta)[-1]
    got = _run(
        ImplicitDifferentiation(GradientDescent(steps, beta), Neumann(terms, beta)), p, x, y0
    )
    assert _rel(got.value, ref.aid_neumann(arrays, x, y_T, terms, beta)) < IDENTITY_RTOL
    got = _run(
        ImplicitDifferentiation(GradientDescent(steps, beta), ConjugateGradient(terms)), p, x, y0
    )
    # Why 1e-8: CG recurrences in two implementations round differently; the gap grows with
    # kappa (<= 100) and the iteration count (<= 30) but stays orders below any real error.
    assert _rel(got.value, ref.aid_cg(arrays, x, y_T, terms)) < 1e-8
    got = _run(IterativeDifferentiation(GradientDescent(steps, beta)), p, x, y0)
    assert _rel(got.value, ref.itd(arrays, x, y0, steps, beta)) < IDENTITY_RTOL


@settings(max_examples=6)
@given(strategies.quadratic_bilevel(max_clients=5, max_dim=5, kappa=(1.0, 5.0)))
def test_every_classical_estimator_converges_to_the_exact_hypergradient(p):
    x = torch.as_tensor(_point(p)[0])
    exact = p.exact_hypergradient(x)
    for info in [i for i in ESTIMATOR_DB if i.paper == "Classical"]:
        # Why 250 steps / 250 terms: (1 - 1/5)^250 < 1e-24, so every truncation error is below
        # float64 round-off for kappa <= 5.
        overrides = {
            k: v
            for k, v in {"inner_steps": 250, "neumann_terms": 250, "cg_iterations": p.dim_y}.items()
            if k in info.defaults
        }
        est = info.build(**overrides)
        out = est.estimate(p, x, est.init(p), np.random.default_rng(0))
        assert _rel(out.value, exact) < 1e-9, info.name


def test_call_counts_are_exact():
    M, T, N = 3, 7, 5
    p = QuadraticBilevel.random(M, 2, 4, 5.0, 0.2, seed=0)
    x, y0 = _point(p)
    out = _run(ImplicitDifferentiation(GradientDescent(T), Neumann(N)), p, x, y0)
    c = out.calls
    assert (c.grad_g, c.grad_f, c.hvp, c.jvp) == (M * T, M, M * (N - 1), M)
    out = _run(ImplicitDifferentiation(GradientDescent(T), ConjugateGradient(3)), p, x, y0)
    assert (out.calls.hvp, out.calls.jvp) == (3 * M, M)
    out = _run(IterativeDifferentiation(GradientDescent(T)), p, x, y0)
    c = out.calls
    assert (c.grad_g, c.grad_f, c.hvp, c.jvp) == (M * T, M, M * (T - 1), M * T)
    assert c.comm_rounds == 0 and c.floats_sent == 0


def test_state_carries_the_inner_iterate_and_keeps_its_structure():
    p = QuadraticBilevel.random(2, 2, 3, 5.0, seed=1)
    est = ImplicitDifferentiation(GradientDescent(5), Neumann(3))
    state = est.init(p)
    out = est.estimate(p, torch.zeros(2), state, np.random.default_rng(0))
    assert type(out.state) is type(state)
    assert out.state.y.shape == state.y.shape and out.state.y.dtype == state.y.dtype
    again = est.estimate(p, torch.zeros(2), out.state, np.random.default_rng(0))
    y_star = p.exact_inner_solution(torch.zeros(2))
    assert (again.state.y - y_star).norm() < (out.state.y - y_star).norm()


def test_stochastic_estimates_are_reproducible_from_the_seed():
    p = QuadraticBilevel.random(
        3, 2, 3, 5.0, 0.3, seed=2, n_samples=8, gradient_noise=0.5, hessian_noise=0.3
    )
    for est in (
        ImplicitDifferentiation(GradientDescent(10), Neumann(5), batch_size=2),
        IterativeDifferentiation(GradientDescent(10), batch_size=2),
    ):
        a = est.estimate(p, torch.zeros(2), est.init(p), np.random.default_rng(5)).value
        b = est.estimate(p, torch.zeros(2), est.init(p), np.random.default_rng(5)).value
        c = est.estimate(p, torch.zeros(2), est.init(p), np.random.default_rng(6)).value
        assert torch.equal(a, b) and not torch.equal(a, c)


def test_stochastic_itd_is_the_derivative_of_the_sampled_unrolled_map():
    """With minibatches, ITD differentiates the sampled trajectory exactly (autograd replay)."""
    p = QuadraticBilevel.random(
        2, 2, 3, 5.0, 0.3, seed=3, n_samples=6, gradient_noise=0.5, hessian_noise=0.3
    )
    steps, beta = 6, 0.1
    est = IterativeDifferentiation(GradientDescent(steps, beta), batch_size=2)
    x0 = torch.randn(2, generator=torch.Generator().manual_seed(0))
    out = est.estimate(p, x0, est.init(p), np.random.default_rng(9))
    # Replay ITD's draws in its order: one batch per inner step, then the outer batch.
    rng = np.random.default_rng(9)
    clients = torch.arange(2)
    x = x0.clone().requires_grad_(True)
    y = torch.zeros(3, requires_grad=True)
    for _ in range(steps):
        batch = p.sample_batch(rng, clients, 2)
        loss = p.inner_loss(x.expand(2, -1), y.expand(2, -1), clients, batch).mean()
        (g,) = torch.autograd.grad(loss, y, create_graph=True)
        y = y - beta * g
    outer_batch = p.sample_batch(rng, clients, 2)
    loss = p.outer_loss(x.expand(2, -1), y.expand(2, -1), clients, outer_batch).mean()
    (auto,) = torch.autograd.grad(loss, x)
    torch.testing.assert_close(out.value, auto, rtol=IDENTITY_RTOL, atol=IDENTITY_RTOL)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: GradientDescent(-1), "steps must be an integer"),
        (lambda: GradientDescent(3, step_size=-0.1), "step_size must be a positive"),
        (lambda: Neumann(0), "terms must be an integer >= 1"),
        (lambda: ConjugateGradient(2.5), "iterations must be an integer"),
        (lambda: ImplicitDifferentiation(batch_size=0), "batch_size must be an integer >= 1"),
        (lambda: IterativeDifferentiation(inner=ExactInnerSolution()), "unrolls GradientDescent"),
    ],
)
def test_bad_parameters_raise_clear_errors(factory, message):
    with pytest.raises(ValueError, match=message):
        factory()


def test_single_client_equals_centralised_problem_with_same_arrays():
    p = QuadraticBilevel.random(1, 2, 3, 5.0, seed=4)
    x, y0 = _point(p)
    est = ImplicitDifferentiation(GradientDescent(20), Neumann(10))
    arrays = p.to_arrays()
    beta = 1.0 / p.constants().L
    y_T = ref.gradient_descent(arrays, x, y0, 20, beta)[-1]
    assert _rel(_run(est, p, x, y0).value, ref.aid_neumann(arrays, x, y_T, 10, beta)) < 1e-12

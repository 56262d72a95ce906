"""The per-client-hyperparameter families: exact answers, classical estimators, validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings

from problems import PerClientLogistic
from problems import PerClientQuadratic
from problems import ProblemError
from problems import from_spec
from problems import strategies
from testbed.oracles import Oracles
from testbed.registry import get_estimator

FD_RTOL = 1e-6  # central differences with step eps^(1/3): ~eps^(2/3) times the curvature scale


def _fd(fn, x):
    step = np.finfo(np.float64).eps ** (1 / 3) * max(1.0, float(x.abs().max()))
    eye = torch.eye(x.shape[0], dtype=torch.float64)
    return torch.stack([(fn(x + step * e) - fn(x - step * e)) / (2 * step) for e in eye])


@given(strategies.per_client_quadratic(), strategies.SEEDS)
@settings(max_examples=15)
def test_quadratic_hypergradient_matches_finite_differences_and_aid(problem, seed):
    x = torch.as_tensor(np.random.default_rng(seed).standard_normal(problem.dim_x))
    exact = problem.exact_hypergradient(x)
    fd = _fd(problem.outer_objective, x)
    assert float((exact - fd).norm()) <= FD_RTOL * (1 + float(fd.norm()))
    cg = get_estimator("aid-cg").build(inner_steps=None, cg_iterations=problem.dim_y)
    out = cg.estimate(problem, x, cg.init(problem), np.random.default_rng(0)).value
    assert float((out - exact).norm()) <= 1e-9 * (1 + float(exact.norm()))


def test_losses_use_only_the_own_block():
    p = PerClientQuadratic.random(
        3, 2, 2, 3.0, 0, outer_coupling=0.5, n_samples=4, hessian_noise=0.2, cross_noise=0.3
    )
    x, y = torch.randn(p.dim_x), torch.randn(p.dim_y)
    clients = torch.arange(3)
    gx, _ = Oracles(p).grad_outer(x, y, clients)
    jv = Oracles(p).jvp_inner_xy(x, y, torch.randn(3, 2), clients)
    for i in range(3):
        others = [j for j in range(3) if j != i]
        assert float(gx[i].reshape(3, 2)[others].abs().max()) == 0.0
        assert float(jv[i].reshape(3, 2)[others].abs().max()) == 0.0


def test_minibatch_oracle_is_unbiased_exactly():
    p = PerClientQuadratic.random(
        2, 2, 3, 3.0, 1, n_samples=5, hessian_noise=0.3, cross_noise=0.4, gradient_noise=0.5
    )
    x, y = torch.randn(p.dim_x), torch.randn(p.dim_y)
    clients = torch.arange(2).repeat_interleave(5)
    from problems import Batch

    batch = Batch(torch.arange(5).repeat(2)[:, None])  # every sample exactly once
    per_sample = p.inner_loss(x.expand(10, -1), y.expand(10, -1), clients, batch)
    full = p.inner_loss(x.expand(2, -1), y.expand(2, -1), torch.arange(2), None)
    np.testing.assert_allclose(per_sample.reshape(2, 5).mean(1).numpy(), full.numpy(), rtol=1e-12)


def test_outer_minimizer_and_constants():
    p = PerClientQuadratic.random(3, 2, 2, 4.0, 2, outer_coupling=1.0, rho=0.5)
    assert float(p.exact_hypergradient(p.outer_minimizer()).norm()) <= 1e-12
    consts = p.hgp_constants()
    assert consts["alpha"] <= p.constants().mu_clients + 1e-12 and consts["nu_g"] == 0.0


def test_spec_round_trip_and_arrays():
    p = PerClientQuadratic.random(3, 1, 2, 2.0, 5, n_samples=3, hessian_noise=0.1)
    q = from_spec(p.spec())
    for key, value in p.to_arrays().items():
        np.testing.assert_array_equal(q.to_arrays()[key], value)
    r = from_spec(PerClientLogistic.random(2, 3, 10, 10, 4).spec())
    assert r.id == PerClientLogistic.random(2, 3, 10, 10, 4).id


def test_invalid_input_is_rejected_clearly():
    with pytest.raises(ProblemError, match="positive definite"):
        PerClientQuadratic(
            -np.eye(2)[None],
            np.zeros((1, 2)),
            np.zeros((1, 2, 1)),
            np.eye(2)[None],
            np.zeros((1, 2)),
            np.zeros((1, 2, 1)),
            0.1,
        )
    with pytest.raises(ProblemError, match="mu must be > 0"):
        PerClientLogistic(
            np.zeros((1, 2, 2)), np.zeros((1, 2)), np.zeros((1, 2, 2)), np.zeros((1, 2)), mu=0.0
        )


@pytest.mark.parametrize("hyper", ["decay", "weights"])
def test_logistic_newton_and_hypergradient(hyper):
    p = PerClientLogistic.random(3, 4, 30, 20, 1, mu=0.2, hyper=hyper)
    noise = torch.randn(p.dim_x, generator=torch.Generator().manual_seed(0))
    x = p.initial_point()[0] + 0.1 * noise
    y = p.exact_inner_solution(x)
    grad = Oracles(p).grad_inner(x, y.expand(3, -1), torch.arange(3)).sum(0)
    assert float(grad.norm()) <= 1e-13  # Newton to machine precision
    fd = _fd(p.outer_objective, x)
    assert float((p.exact_hypergradient(x) - fd).norm()) <= FD_RTOL * (1 + float(fd.norm()))


def test_removal_effect_is_retraining():
    p = PerClientLogistic.random(2, 3, 20, 20, 3, hyper="weights")
    x = p.initial_point()[0]
    effect = p.removal_effects(x, 1, torch.tensor([4]))[0]
    lam = x.reshape(2, 20).clone()
    lam[1, 4] = 0.0
    assert float(effect) == pytest.approx(
        float(p.total_outer(lam.reshape(-1)) - p.total_outer(x)), rel=1e-12
    )

"""The influence protocol of HGP's Table 4 experiment (testbed_app/experiments/hgp.py,
problems/workloads/influence.py, spectral.py): why the retraining step must be below
2/lambda_max (the review's finding, reproduced), the eigenvalue estimators it relies on, the
refusal of an unstable configured step, and Hessian damping where the averaged Hessian is
indefinite."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest
import torch

from problems.workloads.influence import InfluenceProblem
from problems.workloads.spectral import POWER_RTOL
from problems.workloads.spectral import descend
from problems.workloads.spectral import largest_eigenvalue
from problems.workloads.spectral import momentum_bound
from problems.workloads.spectral import smallest_eigenvalue
from testbed.decentralized.hgp import HGPState
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.influence_metrics import pearson_r
from testbed.decentralized.influence_metrics import sign_agreement
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.oracles import Oracles
from testbed_app.experiments.base import ExperimentConfig
from testbed_app.experiments.hgp import build_hgp_influence
from tests._influence import experiment_config
from tests._influence import influence_problem


def _problem(model: str, per_client: int, weight_decay: float) -> InfluenceProblem:
    """Two iid clients, ``per_client`` training and as many validation digits each, float64."""
    return influence_problem(2, per_client, model=model, weight_decay=weight_decay)


def _symmetric(eigenvalues: list[float], seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((len(eigenvalues), len(eigenvalues))))
    return torch.as_tensor(q @ np.diag(eigenvalues) @ q.T)


# ------------------------------------------------------------------------------ the finding


def test_unstable_retraining_step_leaves_the_actual_effect_unresolved() -> None:
    """The review's finding on a small convex problem: retraining by gradient descent with
    ``eta lambda_max = 3.2`` (the CNN config's 0.05 x 64.6) makes the retrained validation loss
    depend on a 1e-6 jitter of the start as much as on the removal itself; the protocol's step
    1/lambda_max, run to a gradient tolerance, resolves the effect to round-off and equals the
    exact re-solve."""
    problem = _problem("logreg", 10, 0.05)
    x = problem.initial_point()[0]
    y_star = problem.exact_inner_solution(x)
    lam = largest_eigenvalue(lambda v: problem.total_hvp(x, y_star, v), problem.dim_y, seed=0).value
    mu = smallest_eigenvalue(lambda v: problem.total_hvp(x, y_star, v), problem.dim_y, seed=0).value
    beta = (1.0 - math.sqrt(mu / lam)) / (1.0 + math.sqrt(mu / lam))
    jitter = 1e-6 * torch.as_tensor(np.random.default_rng(1).standard_normal(problem.dim_y))
    f_star = float(problem.total_outer(x, y_star))

    def plain_gd(x_k: torch.Tensor, start: torch.Tensor, step: float) -> torch.Tensor:
        y = start.clone()
        # the review's retraining: a fixed number of steps (|1 - eta lambda_max| = 2.2 amplifies
        # the jitter e-fold every 1.3 steps; 100 steps saturate it)
        for _ in range(100):
            y = y - step * problem.total_grad(x_k, y)
        return y

    exact, unstable_jitter, stable_jitter = [], [], []
    for sample in (0, 1):
        x_k = problem.without(x, 0, sample)
        exact_effect = (
            float(problem.total_outer(x_k, problem.exact_inner_solution(x_k, start=y_star)))
            - f_star
        )
        exact.append(abs(exact_effect))
        a, b = plain_gd(x_k, y_star, 3.2 / lam), plain_gd(x_k, y_star + jitter, 3.2 / lam)
        unstable_jitter.append(
            abs(float(problem.total_outer(x_k, a) - problem.total_outer(x_k, b)))
        )
        # the protocol: step 1/lambda_max with Nesterov's momentum, to ||grad|| <= 1e-9
        # (float64 reaches it; the cap is 10x the ~sqrt(kappa) ln(1e8) ~ 100 steps it needs)
        runs = [
            descend(
                functools.partial(problem.total_grad, x_k),
                start,
                step=1.0 / lam,
                tol=1e-9,
                max_steps=1000,
                momentum=beta,
            )
            for start in (y_star, y_star + jitter)
        ]
        assert all(run.reached for run in runs)
        values = [float(problem.total_outer(x_k, run.y)) for run in runs]
        stable_jitter.append(abs(values[0] - values[1]))
        # Why this bound: ||y - y*_k|| <= ||grad|| / mu for a mu-strongly convex objective,
        # so F moves by at most ||grad F|| ||grad|| / mu; the factor 2 covers F's curvature over
        # that distance (~1e-8: its second-order term is ~1e-16)
        grad_f = float(
            torch.func.grad(functools.partial(problem.total_outer, x_k))(runs[0].y).norm()
        )
        assert abs(values[0] - f_star - exact_effect) <= 2 * grad_f * runs[0].grad_norm / mu
    # unstable: the jitter moves F by at least as much as the removals do (measured: ~9x)
    assert np.mean(unstable_jitter) >= np.mean(exact)
    # stable: the jitter moves F by round-off (measured 3e-11); 1e-6 of the effects is far
    # above float64 round-off and far below any effect the R^2 could resolve
    assert np.mean(stable_jitter) <= 1e-6 * np.mean(exact)


# ------------------------------------------------------------------------------ eigenvalues


@pytest.mark.parametrize(
    ("spectrum", "expected"),
    [
        ([5.0, 3.0, 1.0, 0.5, -2.0], 5.0),  # dominant eigenvalue positive
        ([1.0, 0.5, -0.2, -3.0, -6.0], 1.0),  # dominant negative: the shifted second pass
    ],
)
def test_power_iteration_returns_lambda_max_of_a_known_matrix(
    spectrum: list[float], expected: float
) -> None:
    matrix = _symmetric(spectrum, seed=3)
    estimate = largest_eigenvalue(lambda v: matrix @ v, len(spectrum), seed=0)
    assert estimate.converged
    # Why POWER_RTOL * |lambda_max|: the stopping rule ||A v - rho v|| <= rtol |rho| puts an
    # eigenvalue of the symmetric A within rtol |rho| of rho (here the top one: the other
    # eigenvalues are >= 0.5 away, far more than rtol |rho|)
    assert abs(estimate.value - expected) <= POWER_RTOL * abs(expected)


def test_power_iteration_reports_non_convergence_at_its_cap() -> None:
    # gap ratio 0.999: the residual falls like 0.999^k, far from 1e-4 after 5 products
    matrix = _symmetric([1.0, 0.999, 0.1], seed=4)
    estimate = largest_eigenvalue(lambda v: matrix @ v, 3, seed=0, iterations=5)
    assert not estimate.converged and estimate.products == 5


def test_lanczos_returns_lambda_min_of_a_known_matrix() -> None:
    spectrum = list(np.linspace(0.1, 4.0, 60)) + [-0.7]
    matrix = _symmetric(spectrum, seed=5)
    estimate = smallest_eigenvalue(lambda v: matrix @ v, len(spectrum), seed=0)
    assert estimate.converged
    # Why 1e-6: ARPACK's tol (1e-3) bounds the Ritz residual relative to the eigenvalue; the
    # eigenvalue error is that residual squared over the gap (0.8), ~1e-6 at worst
    assert abs(estimate.value + 0.7) <= 1e-6


# ------------------------------------------------------------------------------ damping


def test_damping_changes_only_the_hessian() -> None:
    problem = _problem("logreg", 4, 0.05)
    damped = problem.with_damping(0.7)
    gen = torch.Generator().manual_seed(2)
    x = problem.initial_point()[0] * (0.5 + torch.rand(problem.dim_x, generator=gen))
    y = 0.3 * torch.randn(problem.dim_y, generator=gen, dtype=torch.float64)
    v = torch.randn(problem.dim_y, generator=gen, dtype=torch.float64)
    # values and gradients are those of the undamped problem, exactly (the added term is 0)
    assert float(damped.total_inner(x, y)) == float(problem.total_inner(x, y))
    assert torch.equal(damped.total_grad(x, y), problem.total_grad(x, y))
    # Why 1e-12: the same float64 products, plus 0.7 v added once
    torch.testing.assert_close(
        damped.total_hvp(x, y, v),
        problem.total_hvp(x, y, v) + 2 * 0.7 * v,  # n = 2 clients
        rtol=1e-12,
        atol=1e-12,
    )
    # the per-client oracles HGP uses: H_i + delta I, J_i unchanged
    n, clients = problem.n_clients, torch.arange(problem.n_clients)
    xs, ys, vs = x.expand(n, -1), y.expand(n, -1), v.expand(n, -1)
    torch.testing.assert_close(
        Oracles(damped).hvp_inner(xs, ys, vs, clients),
        Oracles(problem).hvp_inner(xs, ys, vs, clients) + 0.7 * vs,
        rtol=1e-12,
        atol=1e-12,
    )
    assert torch.equal(
        Oracles(damped).jvp_inner_xy(xs, ys, vs, clients),
        Oracles(problem).jvp_inner_xy(xs, ys, vs, clients),
    )
    with pytest.raises(ValueError, match="damping"):
        problem.with_damping(-1.0)


def _jacobian_norm(problem: InfluenceProblem, x: torch.Tensor, y: torch.Tensor) -> float:
    """Spectral norm of ``J = d(grad_y G)/dx`` (dim_y x dim_x, dim_x small): its columns
    ``J e_j`` by the double-vjp trick (``J e_j = d/dw <J^T w, e_j>``, J^T w linear in w)."""
    xs = x.detach().clone().requires_grad_(True)
    ys = y.detach().clone().requires_grad_(True)
    (grad_y,) = torch.autograd.grad(problem.total_inner(xs, ys), (ys,), create_graph=True)
    w = torch.zeros_like(y, requires_grad=True)
    (jt_w,) = torch.autograd.grad((grad_y * w).sum(), (xs,), create_graph=True)
    columns = [
        torch.autograd.grad(jt_w[j], (w,), retain_graph=True)[0] for j in range(problem.dim_x)
    ]
    return float(torch.linalg.matrix_norm(torch.stack(columns, 1), ord=2))


def test_damping_keeps_the_neumann_iterates_bounded_on_an_indefinite_hessian() -> None:
    """An MLP at its initial point: the averaged Hessian is indefinite (lambda_min ~ -1.0,
    lambda_max ~ 1.65). Undamped, HGP's Neumann iterates grow like (1 + eta |lambda_min|)^m;
    with delta = |lambda_min| + 1/(eta M) (the experiment's rule) every m stays below the
    bound ``eta ||J|| ||c_bar|| / (1 - rho)``, rho = max |1 - eta (lambda + delta)| < 1."""
    problem = _problem("mlp", 4, 1e-3)
    x, y = problem.initial_point()
    n = problem.n_clients

    def averaged(v: torch.Tensor) -> torch.Tensor:
        return problem.total_hvp(x, y, v) / n

    top = largest_eigenvalue(averaged, problem.dim_y, seed=0).value
    low = smallest_eigenvalue(averaged, problem.dim_y, seed=0).value
    assert low < 0.0 < top  # indefinite: the case damping exists for
    eta, terms = 1.0 / top, 150
    delta = -low + 1.0 / (eta * terms)
    assert eta * (top + delta) < 2.0  # the experiment's refusal condition holds
    estimator = HyperGradientPush(
        neumann_terms=terms,
        pushsum_steps=1,
        neumann_step_size=eta,
        averaging="exact",
        inner=StochasticGradientPush(steps=0, step_size=0.1),
    )
    state = HGPState(y.expand(n, -1).clone(), torch.ones(n, dtype=y.dtype), 0)
    growth = {}
    for damping in (0.0, delta):
        run = estimator.run(
            problem.with_damping(damping), x, state, np.random.default_rng(0), track_consensus=False
        )
        moved = (run.trajectory[:, 0] - run.trajectory[0, 0]).flatten(1).norm(dim=1)
        growth[damping] = moved
    # undamped: the iterates explode ((1 + 0.6)^150 ~ 1e30 on this problem)
    assert float(growth[0.0][-1]) > 1e10
    c_bar = torch.func.grad(lambda w: problem.total_outer(x, w))(y) / n
    rho = max(abs(1.0 - eta * (low + delta)), abs(1.0 - eta * (top + delta)))
    bound = eta * _jacobian_norm(problem, x, y) * float(c_bar.norm()) / (1.0 - rho)
    # Why the factor 1.01: lambda_min and lambda_max are estimates (Lanczos to 1e-3 relative,
    # power iteration to 1e-4), which moves rho by ~1e-3 eta; 1% covers that
    assert float(growth[delta].max()) <= 1.01 * bound
    assert math.isfinite(float(growth[delta].max()))


# ------------------------------------------------------------------------------ experiment


def _config(**workload: Any) -> ExperimentConfig:
    """The small influence experiment on 2 clients sharing 80 digits, jitter and a tolerance on
    the training gradient set, with the step sizes the protocol's bound allows (0.5)."""
    return experiment_config(
        "hgp_influence",
        name="influence-protocol-test",
        data={"limit": 80},
        split={"n_clients": 2},
        workload={"jitter_count": 2, "train_grad_tol": 1e-4, **workload},
        algorithm={
            "neumann_terms": 40,
            "neumann_step_size": 0.5,
            "inner_steps": 20,
            "inner_step_size": 0.5,
            "sgp_variant": "assran",
        },
    )


def test_a_retraining_step_above_the_stable_bound_is_refused() -> None:
    experiment = build_hgp_influence(_config(retrain_step_size=100.0))
    with pytest.raises(
        ValueError,
        match=r"retrain_step_size = 100 is not below the stable "
        r"bound .* lambda_max",
    ):
        experiment.step()


def test_the_protocol_records_its_figures() -> None:
    experiment = build_hgp_influence(_config())
    rows = [experiment.step() for _ in range(3)]
    first, last = rows[0], rows[-1]
    assert first["train_stationary"] == 1.0 and first["train_grad_norm"] <= 1e-4
    # the step actually used is 1/lambda_max, below the bound momentum_bound(beta)/lambda_max
    assert first["retrain_step"] == pytest.approx(1.0 / first["lambda_max"], rel=1e-12)
    assert (
        first["retrain_step"]
        < first["retrain_step_bound"]
        == pytest.approx(momentum_bound(first["retrain_momentum"]) / first["lambda_max"], rel=1e-12)
    )
    # softmax regression with weight decay: the averaged Hessian is positive definite, so no
    # damping, and the Neumann step is inside the stable range
    assert first["hessian_lambda_min"] > 0.0 and first["damping"] == 0.0
    assert first["neumann_eta_lambda"] < 2.0
    assert last["n_retrained"] == 4.0 and last["n_jitter"] == 2.0
    assert last["pearson_r2"] == pytest.approx(last["pearson_r"] ** 2, rel=1e-12)
    # exact re-solves: the jitter is round-off of the float64 Newton solve, the effects are not
    assert last["jitter_mean_abs"] < 1e-6 * last["effect_mean_abs"]
    for key in ("r2", "pearson_r", "sign_agreement"):  # (f1 is NaN without a negative)
        assert math.isfinite(last[key]), (key, last)


def test_pearson_and_sign_agreement() -> None:
    actual = np.array([1.0, -2.0, 3.0, -1.0])
    assert pearson_r(actual, 2.0 * actual + 5.0) == pytest.approx(1.0, rel=1e-12)
    assert pearson_r(actual, -actual) == pytest.approx(-1.0, rel=1e-12)
    assert math.isnan(pearson_r(actual, np.ones(4)))
    assert sign_agreement(actual, actual) == 1.0
    assert sign_agreement(actual, np.array([1.0, 2.0, 3.0, 4.0])) == 0.5
    assert math.isnan(sign_agreement(np.array([]), np.array([])))

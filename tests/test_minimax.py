"""QuadraticMinimax: saddle point, Danskin, FedNest's synthetic instance, oracles,
input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from problems import Batch
from problems import ProblemError
from problems import QuadraticMinimax
from problems import from_spec
from problems.strategies import quadratic_minimax
from tests._bad_arrays import assert_edit_refused

FAST = settings(max_examples=15, deadline=None)


def _norm(v: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(v))


def _full_batch(p: QuadraticMinimax) -> Batch:
    return Batch(torch.arange(p.n_samples).expand(p.n_clients, -1))


@FAST
@given(quadratic_minimax())
def test_saddle_point_is_stationary(p: QuadraticMinimax) -> None:
    x, y = p.saddle_point()
    m = p.means
    matrices = sum(float(torch.linalg.matrix_norm(m[k], 2)) for k in ("P", "A", "Lam"))
    scale = (1 + matrices) * (1 + _norm(x) + _norm(y)) + _norm(m["b"]) + _norm(m["e"])
    phi_cond = float(torch.linalg.cond(p.outer_hessian()))
    # Why: x* and y*(x*) come from two backward-stable solves, so each residual is
    # O(eps * cond * scale); 1e-12 ~ 4500 eps leaves room for the O(d) summations.
    tol = 1e-12 * p.constants().kappa * phi_cond * scale
    assert _norm(p.outer_grad_y(x, y)) <= tol
    assert _norm(p.outer_grad_x(x, y)) <= tol
    assert _norm(p.exact_hypergradient(x)) <= tol


@FAST
@given(quadratic_minimax(), st.integers(0, 2**31 - 1))
def test_danskin_holds_for_the_mean_not_per_client(p: QuadraticMinimax, seed: int) -> None:
    """FedNest Sec. 2.4 read per client: grad_y f(x, y*) = 0 on average, not client by client."""
    x = torch.as_tensor(np.random.default_rng(seed).standard_normal(p.dim_x))
    y = p.exact_inner_solution(x)
    per_client = p.client_outer_grad_y(x, y)
    scale = 1 + _norm(p.means["b"]) + float(p.P.abs().max()) * (1 + _norm(y))
    # Why 1e-10: the mean of M float64 rows cancels to round-off of O(scale) entries.
    assert _norm(per_client.mean(0)) <= 1e-10 * scale * (1 + _norm(x))
    assert _norm(p.outer_grad_y(x, y)) <= 1e-10 * scale * (1 + _norm(x))


def test_per_client_inner_gradients_do_not_vanish_under_heterogeneity() -> None:
    p = QuadraticMinimax.random(4, 2, 3, 10.0, heterogeneity=0.5, seed=2)
    x = torch.ones(2, dtype=torch.float64)
    per_client = p.client_outer_grad_y(x, p.exact_inner_solution(x))
    assert float(torch.linalg.vector_norm(per_client, dim=1).min()) > 1e-3


@FAST
@given(quadratic_minimax(max_clients=4, max_dim=4), st.integers(0, 2**31 - 1))
def test_losses_agree_with_means(p: QuadraticMinimax, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = torch.as_tensor(rng.standard_normal(p.dim_x))
    y = torch.as_tensor(rng.standard_normal(p.dim_y))
    clients = torch.arange(p.n_clients)
    xs, ys = x.expand(p.n_clients, -1), y.expand(p.n_clients, -1)
    f = p.outer_loss(xs, ys, clients, None)
    assert torch.equal(p.inner_loss(xs, ys, clients, None), -f)
    # f(x, y*(x)) = phi(x): the loss family and the closed form describe one problem.
    ystar = p.exact_inner_solution(x).expand(p.n_clients, -1)
    phi = p.outer_loss(xs, ystar, clients, None).mean()
    # Why 1e-10: two evaluations of the same O(scale) quadratic in float64.
    assert abs(float(phi - p.outer_objective(x))) <= 1e-10 * (1 + abs(float(phi)))


def test_fednest_synthetic_matches_the_paper() -> None:
    p = QuadraticMinimax.fednest_synthetic(n_clients=50, dim=10, s=1.0, seed=3)
    eye = torch.eye(10, dtype=torch.float64)
    assert p.kind == "minimax" and p.n_clients == 50 and p.dim_x == p.dim_y == 10
    assert torch.equal(p.P, eye.expand(50, -1, -1))
    assert torch.equal(p.Lam, 10.0 * eye.expand(50, -1, -1))
    t = p.A[:, 0, 0]
    assert torch.equal(p.A, t[:, None, None] * eye)
    assert float(t.min()) > 0.0 and float(t.max()) < 0.1
    # Why 1e-15: centring leaves only the round-off of a mean of 50 O(1) numbers.
    assert _norm(p.means["b"]) <= 1e-15 * 50
    x_star, y_star = p.saddle_point()
    assert _norm(x_star) <= 1e-15 * 50 and _norm(y_star) <= 1e-15 * 50
    c = p.constants()
    assert c.mu == c.L == 1.0 and c.kappa == 1.0
    x = torch.linspace(-1.0, 1.0, 10, dtype=torch.float64)
    t_bar, b_bar = float(t.mean()), p.means["b"]
    expected = 0.5 * _norm(t_bar * x - b_bar) ** 2 + 5.0 * _norm(x) ** 2
    # Why 1e-12: the closed form vs the solve-based phi, O(1) values.
    assert abs(float(p.outer_objective(x)) - expected) <= 1e-12 * expected
    assert torch.allclose(p.exact_inner_solution(x), b_bar - t_bar * x, atol=1e-14)


def test_fednest_synthetic_heterogeneity_scales_only_b() -> None:
    small = QuadraticMinimax.fednest_synthetic(n_clients=20, s=1.0, seed=5)
    large = QuadraticMinimax.fednest_synthetic(n_clients=20, s=10.0, seed=5)
    assert torch.equal(small.A, large.A)
    # Why 1e-13: b scales by 10 before centring; centring adds round-off only.
    assert torch.allclose(large.b, 10.0 * small.b, rtol=1e-13, atol=1e-13)
    assert QuadraticMinimax.fednest_synthetic().n_clients == 1000
    assert small.id == "fednest.minimax.m20.d10.s1.lam10.seed5"


@FAST
@given(
    quadratic_minimax(max_clients=4, max_dim=3, n_samples=5, gradient_noise=0.5, hessian_noise=0.05)
)
def test_full_sample_set_equals_full_objective(p: QuadraticMinimax) -> None:
    clients = torch.arange(p.n_clients)
    x = torch.ones(p.n_clients, p.dim_x, dtype=torch.float64)
    y = -torch.ones(p.n_clients, p.dim_y, dtype=torch.float64)
    full = p.outer_loss(x, y, clients, None)
    batched = p.outer_loss(x, y, clients, _full_batch(p))
    # Why 1e-12: sample means equal the client arrays up to round-off (checked at 1e-9
    # relative on construction, far tighter in practice).
    assert torch.allclose(batched, full, rtol=1e-12, atol=1e-12)


def test_noise_variance_matches_enumeration() -> None:
    p = QuadraticMinimax.random(
        3, 2, 3, 5.0, 0.3, seed=11, n_samples=6, gradient_noise=0.7, hessian_noise=0.2
    )
    x = torch.tensor([0.3, -1.2], dtype=torch.float64)
    y = torch.tensor([1.0, 0.5, -0.4], dtype=torch.float64)
    clients = torch.arange(3)
    xs, ys = x.expand(3, -1), y.expand(3, -1).clone().requires_grad_(True)

    def grad_y(batch: Batch | None) -> torch.Tensor:
        (g,) = torch.autograd.grad(p.inner_loss(xs, ys, clients, batch).sum(), ys)
        return g

    full = grad_y(None)
    per_sample = torch.stack([grad_y(Batch(torch.full((3, 1), j))) for j in range(6)], 1)
    enumerated = ((per_sample - full[:, None]) ** 2).sum(-1).mean(1)
    exact = p.noise_variance(x, y, batch_size=2)
    # Why 1e-12: the same finite sums computed two ways in float64.
    assert torch.allclose(exact["grad_inner_y"], enumerated / 2, rtol=1e-12, atol=1e-14)
    assert torch.equal(exact["grad_inner_y"], exact["grad_outer_y"])


def test_seeds_reproduce_and_differ() -> None:
    a = QuadraticMinimax.random(3, 2, 2, 10.0, 0.5, seed=7, n_samples=3, gradient_noise=1.0)
    b = QuadraticMinimax.random(3, 2, 2, 10.0, 0.5, seed=7, n_samples=3, gradient_noise=1.0)
    c = QuadraticMinimax.random(3, 2, 2, 10.0, 0.5, seed=8, n_samples=3, gradient_noise=1.0)
    arrays_a, arrays_b, arrays_c = a.to_arrays(), b.to_arrays(), c.to_arrays()
    assert arrays_a.keys() == arrays_b.keys()
    assert all(np.array_equal(arrays_a[k], arrays_b[k]) for k in arrays_a)
    assert not np.array_equal(arrays_a["P"], arrays_c["P"])
    assert not np.array_equal(arrays_a["b"], arrays_c["b"])
    rebuilt = from_spec(a.spec())
    assert isinstance(rebuilt, QuadraticMinimax) and rebuilt.id == a.id
    assert all(np.array_equal(rebuilt.to_arrays()[k], arrays_a[k]) for k in arrays_a)


def _arrays(M: int = 2, dx: int = 2, dy: int = 3) -> dict[str, np.ndarray]:
    return {
        "P": np.broadcast_to(np.eye(dy), (M, dy, dy)).copy(),
        "b": np.ones((M, dy)),
        "A": np.ones((M, dy, dx)),
        "Lam": np.broadcast_to(np.eye(dx), (M, dx, dx)).copy(),
        "e": np.zeros((M, dx)),
    }


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda a: a["P"].__setitem__((0, 0, 0), -5.0), "not positive definite"),
        (lambda a: a.__setitem__("b", np.ones((2, 4))), "shape"),
        (lambda a: a.__setitem__("A", np.ones((3, 3, 2))), "shape"),
        (lambda a: a["e"].__setitem__((1, 0), np.nan), "NaN or inf"),
        (lambda a: a["A"].__setitem__((0, 0, 0), np.inf), "NaN or inf"),
        (lambda a: a.__setitem__("Lam", -a["Lam"] * 50), "not strongly convex"),
        (lambda a: a["Lam"].__setitem__((0, 0, 1), 1.0), "symmetric"),
    ],
)
def test_bad_arrays_raise_named_errors(edit, message: str) -> None:
    assert_edit_refused(QuadraticMinimax, _arrays(), edit, message)


def test_bad_knobs_raise_named_errors() -> None:
    with pytest.raises(ProblemError, match="QuadraticMinimax.*at least one client"):
        QuadraticMinimax(**_arrays(M=0))
    with pytest.raises(ProblemError, match="QuadraticMinimax.random.*condition number"):
        QuadraticMinimax.random(2, 2, 2, 0.5)
    with pytest.raises(ProblemError, match="QuadraticMinimax.random.*>= 1"):
        QuadraticMinimax.random(2, 2, 2, 2.0, hessian_heterogeneity=0.7, hessian_noise=0.4)
    with pytest.raises(ProblemError, match="fednest_synthetic.*at least one client"):
        QuadraticMinimax.fednest_synthetic(n_clients=0)
    with pytest.raises(ProblemError, match="QuadraticMinimax.*no oracle noise"):
        QuadraticMinimax(**_arrays()).noise_variance(torch.zeros(2), torch.zeros(3))

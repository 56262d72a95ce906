"""LinearCompositional (FedMSA F3 / FedNest compositional) and FedMSA's RiskAverse."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from problems import Batch
from problems import LinearCompositional
from problems import ProblemError
from problems import RiskAverse
from problems import from_spec
from problems.strategies import linear_compositional
from tests._bad_arrays import assert_edit_refused

FAST = settings(max_examples=15, deadline=None)
EPS = float(np.finfo(np.float64).eps)


def _norm(v: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(v))


def _x(p: LinearCompositional | RiskAverse, seed: int) -> torch.Tensor:
    return torch.as_tensor(np.random.default_rng(seed).standard_normal(p.dims[0]))


def _full_batch(n_clients: int, n_samples: int) -> Batch:
    return Batch(torch.arange(n_samples).expand(n_clients, -1))


# ------------------------------------------------------------------ LinearCompositional
@FAST
@given(linear_compositional())
def test_optimum_is_stationary(p: LinearCompositional) -> None:
    x = p.optimum()
    c = p.level_constants()
    G, m = p.composed_matrix(), p.means
    offset = p.level_values(torch.zeros_like(x))[-1]
    scale = c["L"] * _norm(x) + _norm(G.T @ (m["Q"] @ offset - m["t"]))
    # Why: x* solves (G^T Q G) x = rhs backward-stably, so the gradient residual is
    # O(eps * kappa * scale); 1e-12 ~ 4500 eps covers the N-fold matrix products.
    assert _norm(p.exact_gradient(x)) <= 1e-12 * (c["L"] / c["mu"]) * (1 + scale)
    # Strong convexity: any other point is worse.
    assert float(p.objective(x + 0.1)) > float(p.objective(x))


@FAST
@given(linear_compositional(max_clients=4), st.integers(0, 2**31 - 1))
def test_client_level_maps_average_to_the_mean_maps(p: LinearCompositional, seed: int) -> None:
    clients = torch.arange(p.n_clients)
    values = p.level_values(_x(p, seed))
    for n, level in enumerate(p.level_maps):
        u = values[n].expand(p.n_clients, -1)
        per_client = level(u, clients)
        # Why 1e-12: a mean of M affine evaluations vs the affine map of the means.
        assert torch.allclose(
            per_client.mean(0), p.mean_level_map(n, values[n]), rtol=1e-12, atol=1e-12
        )
    assert torch.equal(
        p.objective(values[0]),
        values[-1] @ p.means["Q"] @ values[-1] / 2 - p.means["t"] @ values[-1],
    )


@FAST
@given(linear_compositional(max_levels=1), st.integers(0, 2**31 - 1))
def test_single_level_is_fednest_compositional_bilevel(p: LinearCompositional, seed: int) -> None:
    """FedNest eq. (7) with the 1/2 convention: y* = rbar(x), Hessian I, b = 0."""
    x = _x(p, seed)
    y = p.exact_inner_solution(x)
    clients = torch.arange(p.n_clients)
    xs = x.expand(p.n_clients, -1)
    ys = y.expand(p.n_clients, -1).clone().requires_grad_(True)
    (grad_y,) = torch.autograd.grad(p.inner_loss(xs, ys, clients, None).sum(), ys)
    # Why 1e-12: y*(x) zeroes the mean inner gradient up to round-off.
    assert _norm(grad_y.mean(0)) <= 1e-12 * (1 + _norm(y))
    assert torch.equal(p.exact_hypergradient(x), p.exact_gradient(x))
    assert torch.equal(p.outer_objective(x), p.objective(x))
    c = p.constants()
    assert (c.mu, c.L, c.hessian_heterogeneity, c.outer_grad_x_lipschitz) == (
        1,
        1,
        0,
        0,
    )
    assert c.cross_norm == pytest.approx(float(torch.linalg.matrix_norm(p.W[0].mean(0), 2)))


def test_multi_level_rejects_the_bilevel_view() -> None:
    p = LinearCompositional.random(2, (2, 3, 3), seed=0)
    x, y = p.initial_point()
    clients = torch.arange(2)
    calls = [
        lambda: p.exact_inner_solution(x),
        lambda: p.exact_hypergradient(x),
        lambda: p.outer_objective(x),
        lambda: p.constants(),
        lambda: p.inner_loss(x[None], y[None], clients[:1], None),
        lambda: p.outer_loss(x[None], y[None], clients[:1], None),
    ]
    for call in calls:
        with pytest.raises(ProblemError, match=r"LinearCompositional.*only for N == 1"):
            call()
    assert p.objective(x).shape == () and p.exact_gradient(x).shape == (2,)


def test_heterogeneity_is_the_requested_tau() -> None:
    p = LinearCompositional.random(
        5,
        (2, 3, 4),
        seed=1,
        jacobian_heterogeneity=0.25,
        hessian_heterogeneity=0.5,
        condition_number=10.0,
    )
    c = p.level_constants()
    # Why 1e-12: spreads are scaled to the requested spectral norm exactly, up to
    # round-off of one SVD.
    assert c["tau_0"] == pytest.approx(0.25, rel=1e-12)
    assert c["tau_1"] == pytest.approx(0.25, rel=1e-12)
    assert 1.0 - 1e-12 <= c["mu"] and c["L"] <= 10.0 * (1 + 1e-12)
    assert float(torch.linalg.eigvalsh(p.Q).min()) > 0.0


@FAST
@given(
    linear_compositional(
        max_clients=3, max_levels=3, max_dim=4, n_samples=4, matrix_noise=0.5, value_noise=0.5
    ),
    st.integers(0, 2**31 - 1),
)
def test_full_sample_set_equals_full_maps(p: LinearCompositional, seed: int) -> None:
    clients = torch.arange(p.n_clients)
    batch = _full_batch(p.n_clients, p.n_samples)
    values = p.level_values(_x(p, seed))
    for n in range(p.n_levels + 1):
        u = values[n].expand(p.n_clients, -1)
        # Why 1e-12: sample means equal the client arrays up to round-off.
        assert torch.allclose(
            p.level_map(n, u, clients, batch),
            p.level_map(n, u, clients),
            rtol=1e-12,
            atol=1e-12,
        )
    if p.n_levels == 1:
        xs, ys = values[0].expand(p.n_clients, -1), values[1].expand(p.n_clients, -1)
        for loss in (p.inner_loss, p.outer_loss):
            assert torch.allclose(
                loss(xs, ys, clients, batch),
                loss(xs, ys, clients, None),
                rtol=1e-12,
                atol=1e-12,
            )


def test_noise_variance_matches_enumeration() -> None:
    p = LinearCompositional.random(
        3, (2, 3, 2), seed=4, heterogeneity=0.3, n_samples=5, matrix_noise=0.4, value_noise=0.6
    )
    clients = torch.arange(3)
    points = p.level_values(torch.tensor([0.5, -1.5], dtype=torch.float64))
    exact = p.noise_variance(*points, batch_size=3)
    for n in range(p.n_levels + 1):
        u = points[n].expand(3, -1)
        full = p.level_map(n, u, clients)
        samples = torch.stack(
            [p.level_map(n, u, clients, Batch(torch.full((3, 1), j))) for j in range(5)],
            1,
        )
        dev = samples - full[:, None]
        enumerated = (dev**2).sum(-1) if dev.ndim == 3 else dev**2
        # Why 1e-12: the same finite sums computed two ways in float64.
        assert torch.allclose(exact[f"value_{n}"], enumerated.mean(1) / 3, rtol=1e-12, atol=1e-15)
    p1 = LinearCompositional.random(2, (2, 2), seed=5, n_samples=3, value_noise=1.0)
    keys = p1.noise_variance(*p1.level_values(torch.ones(2, dtype=torch.float64))).keys()
    assert {"grad_inner_y", "grad_outer_y", "grad_outer_x", "hessian_inner"} <= set(keys)


def test_seeds_reproduce_and_differ() -> None:
    kw = {"heterogeneity": 0.4, "n_samples": 2, "matrix_noise": 0.1, "value_noise": 0.1}
    a = LinearCompositional.random(3, (2, 3, 2), 9, **kw).to_arrays()
    b = LinearCompositional.random(3, (2, 3, 2), 9, **kw).to_arrays()
    c = LinearCompositional.random(3, (2, 3, 2), 10, **kw).to_arrays()
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["W0"], c["W0"]) and not np.array_equal(a["t"], c["t"])
    p = LinearCompositional.random(3, (2, 3, 2), 9, **kw)
    rebuilt = from_spec(p.spec())
    assert isinstance(rebuilt, LinearCompositional) and rebuilt.id == p.id


def _arrays() -> dict:
    M = 2
    return {
        "W": [np.ones((M, 3, 2)) * np.eye(3, 2)],
        "w": [np.zeros((M, 3))],
        "Q": np.broadcast_to(np.eye(3), (M, 3, 3)).copy(),
        "t": np.ones((M, 3)),
    }


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda a: a.__setitem__("Q", -a["Q"]), "Q_bar is not positive definite"),
        (
            lambda a: a["W"][0].__setitem__((slice(None), slice(None), 1), 0.0),
            "full column rank",
        ),
        (lambda a: a.__setitem__("t", np.ones((2, 2))), "shape"),
        (lambda a: a.__setitem__("w", [np.ones((2, 4))]), "shape"),
        (lambda a: a["W"][0].__setitem__((0, 0, 0), np.nan), "NaN or inf"),
        (lambda a: a["t"].__setitem__((0, 0), np.inf), "NaN or inf"),
        (lambda a: a.__setitem__("w", []), "levels"),
    ],
)
def test_bad_arrays_raise_named_errors(edit, message: str) -> None:
    assert_edit_refused(LinearCompositional, _arrays(), edit, message)


def test_bad_knobs_raise_named_errors() -> None:
    arrays = _arrays()
    arrays.update(
        W=[np.ones((0, 3, 2))],
        w=[np.ones((0, 3))],
        Q=np.ones((0, 3, 3)),
        t=np.ones((0, 3)),
    )
    with pytest.raises(ProblemError, match="LinearCompositional.*at least one client"):
        LinearCompositional(**arrays)
    with pytest.raises(ProblemError, match="LinearCompositional.random.*condition"):
        LinearCompositional.random(2, (2, 3), condition_number=0.9)
    with pytest.raises(ProblemError, match="LinearCompositional.random.*full column rank"):
        LinearCompositional.random(2, (3, 2))
    with pytest.raises(ProblemError, match="LinearCompositional.random.*at least one"):
        LinearCompositional.random(0, (2, 3))


# ------------------------------------------------------------------ RiskAverse
@pytest.fixture(scope="module")
def risk() -> RiskAverse:
    return RiskAverse()


def test_risk_averse_data_and_objective(risk: RiskAverse) -> None:
    assert risk.a.shape == (2, 500, 10) and risk.b.shape == (2, 500)
    assert risk.dims == (10, 11, 2) and risk.lam == 0.1 and risk.delta == 0.1
    x = _x(risk, 0)
    U = (risk.b.reshape(-1) - (risk.a.reshape(-1, 10) @ x) ** 2) ** 2
    semi = torch.clamp(U - U.mean(), min=0.0) ** 2
    expected = U.mean() + 0.1 * torch.sqrt(semi.mean() + 0.1)
    # Why 1e-12: one full-data formula vs the level-by-level client means.
    assert float(risk.objective(x)) == pytest.approx(float(expected), rel=1e-12)
    assert float(risk.objective(-x)) == pytest.approx(float(risk.objective(x)), rel=1e-12)


def test_risk_averse_gradient_matches_finite_differences(risk: RiskAverse) -> None:
    x = _x(risk, 1)
    grad = risk.exact_gradient(x)
    # Why eps^(1/3): central differences err by O(h^2 f''') + O(eps f / h); the sum is
    # smallest at h ~ eps^(1/3) * scale, leaving O(eps^(2/3)) ~ 4e-11 relative error.
    steps = EPS ** (1 / 3) * torch.clamp(x.abs(), min=1.0)
    fd = torch.stack(
        [
            (risk.objective(x + h * e) - risk.objective(x - h * e)) / (2 * h)
            for h, e in zip(steps, torch.eye(10, dtype=torch.float64), strict=True)
        ]
    )
    # Why 1e-6: the quartic U has large third derivatives; 1e-6 still catches any
    # formula error (those are O(1) relative).
    assert _norm(fd - grad) <= 1e-6 * _norm(grad)


def test_risk_averse_optimum_is_stationary(risk: RiskAverse) -> None:
    x = risk.optimum()
    # Why 1e-7: the tolerance optimum() guarantees (BFGS gtol 1e-10 on an O(1) loss).
    assert _norm(risk.exact_gradient(x)) <= 1e-7
    assert float(risk.objective(x)) <= float(risk.objective(risk.x_true))
    assert torch.equal(risk.optimum(), x)


def test_risk_averse_minibatches_and_seeds(risk: RiskAverse) -> None:
    clients = torch.arange(2)
    batch = _full_batch(2, risk.n_samples)
    values = risk.level_values(_x(risk, 2))
    for n in range(3):
        u = values[n].expand(2, -1)
        assert torch.equal(risk.level_map(n, u, clients, batch), risk.level_map(n, u, clients))
    same = RiskAverse(seed=0).to_arrays()
    other = RiskAverse(seed=1).to_arrays()
    assert all(np.array_equal(same[k], risk.to_arrays()[k]) for k in same)
    assert not np.array_equal(same["a"], other["a"])
    assert from_spec(risk.spec()).id == risk.id
    with pytest.raises(ProblemError, match="RiskAverse.*divisible"):
        RiskAverse(n_clients=3)
    with pytest.raises(ProblemError, match="RiskAverse.*at least one client"):
        RiskAverse(n_clients=0)

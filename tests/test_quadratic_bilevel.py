"""QuadraticBilevel: construction, knobs, bad input, stochastic oracle."""

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings

from problems import ProblemError
from problems import QuadraticBilevel
from problems import from_spec
from problems import strategies
from tests._tol import IDENTITY_RTOL


def test_spectrum_matches_requested_condition_number():
    p = QuadraticBilevel.random(5, 3, 6, condition_number=37.0, seed=2, mu=0.5)
    c = p.constants()
    assert c.mu == pytest.approx(0.5, rel=IDENTITY_RTOL)
    assert c.kappa == pytest.approx(37.0, rel=IDENTITY_RTOL)


def test_heterogeneity_knobs_are_measured_exactly():
    p = QuadraticBilevel.random(
        6, 3, 4, 10.0, seed=1, hessian_heterogeneity=0.4, gradient_heterogeneity=2.5
    )
    c = p.constants()
    assert c.gradient_heterogeneity == pytest.approx(2.5, rel=IDENTITY_RTOL)
    assert c.hessian_heterogeneity > 0
    # client Hessians keep eigenvalues in [(1-h) mu, (1+h) L]
    assert c.mu_clients >= (1 - 0.4) * c.mu - 1e-12
    assert c.L_clients <= (1 + 0.4) * c.L + 1e-12


def test_zero_hessian_heterogeneity_means_identical_second_order_terms():
    p = QuadraticBilevel.random(
        4, 2, 3, 5.0, seed=3, hessian_heterogeneity=0.0, gradient_heterogeneity=1.0
    )
    for name in ("A", "B", "C", "D", "E"):
        arr = getattr(p, name)
        assert torch.equal(arr, arr[:1].expand_as(arr)), name
    assert p.constants().hessian_heterogeneity == 0.0
    assert not torch.equal(p.b, p.b[:1].expand_as(p.b))


def test_client_means_are_exact():
    p = QuadraticBilevel.random(7, 2, 3, 8.0, 0.5, seed=4)
    A_bar = p.inner_hessian()
    eigenvalues = torch.linalg.eigvalsh(A_bar)
    assert float(eigenvalues.min()) == pytest.approx(1.0, rel=1e-10)


def test_same_seed_same_arrays_and_spec_round_trip():
    a = QuadraticBilevel.random(3, 2, 2, 4.0, 0.3, seed=11, n_samples=4, gradient_noise=0.1)
    b = from_spec(a.spec())
    for key, value in a.to_arrays().items():
        np.testing.assert_array_equal(value, b.to_arrays()[key])
    c = QuadraticBilevel.random(3, 2, 2, 4.0, 0.3, seed=12)
    assert not np.array_equal(a.to_arrays()["A"], c.to_arrays()["A"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_clients": 0}, "at least one client"),
        ({"condition_number": 0.5}, "condition number must be"),
        ({"condition_number": float("nan")}, "condition number must be"),
        ({"hessian_heterogeneity": 1.2}, "not positive definite"),
        ({"hessian_heterogeneity": 0.6, "hessian_noise": 0.5}, "not positive definite"),
        ({"gradient_heterogeneity": -1.0}, "gradient_heterogeneity must be"),
        ({"dim_x": 0}, "dimensions must be"),
    ],
)
def test_random_rejects_bad_input(kwargs, message):
    args = {"n_clients": 3, "dim_x": 2, "dim_y": 2, "condition_number": 4.0, **kwargs}
    with pytest.raises(ProblemError, match=message) as info:
        QuadraticBilevel.random(**args)
    assert "QuadraticBilevel" in str(info.value)


def _arrays(M=2, dx=2, dy=3):
    p = QuadraticBilevel.random(M, dx, dy, 4.0, seed=0)
    return {k: v for k, v in p.to_arrays().items()}


def test_constructor_rejects_non_pd_hessian():
    arrays = _arrays()
    arrays["A"][1] = -np.eye(3)
    with pytest.raises(ProblemError, match="QuadraticBilevel: inner Hessian 'A' is not positive"):
        QuadraticBilevel(**arrays)


def test_constructor_rejects_mismatched_shapes():
    arrays = _arrays()
    arrays["b"] = arrays["b"][:, :2]
    with pytest.raises(ProblemError, match=r"array 'b' has shape \(2, 2\), expected \(2, 3\)"):
        QuadraticBilevel(**arrays)


def test_constructor_rejects_nan_and_inf():
    for bad in (np.nan, np.inf):
        arrays = _arrays()
        arrays["D"][0, 0, 0] = bad
        with pytest.raises(ProblemError, match="'D' has NaN or inf"):
            QuadraticBilevel(**arrays)


def test_constructor_rejects_zero_clients():
    arrays = {k: v[:0] for k, v in _arrays().items()}
    with pytest.raises(ProblemError, match="at least one client"):
        QuadraticBilevel(**arrays)


def test_minibatch_over_whole_sample_set_is_the_full_objective():
    p = QuadraticBilevel.random(
        3, 2, 3, 5.0, 0.3, seed=5, n_samples=6, gradient_noise=0.3, hessian_noise=0.2
    )
    clients = torch.arange(3)
    from problems import Batch

    batch = Batch(torch.arange(6).expand(3, 6))
    x, y = torch.randn(3, 2), torch.randn(3, 3)
    torch.testing.assert_close(
        p.inner_loss(x, y, clients, batch),
        p.inner_loss(x, y, clients, None),
        rtol=1e-12,
        atol=1e-12,
    )
    torch.testing.assert_close(
        p.outer_loss(x, y, clients, batch),
        p.outer_loss(x, y, clients, None),
        rtol=1e-12,
        atol=1e-12,
    )


def test_noise_variance_equals_empirical_variance_over_all_single_samples():
    p = QuadraticBilevel.random(
        2, 2, 3, 5.0, 0.3, seed=6, n_samples=5, gradient_noise=0.3, hessian_noise=0.2
    )
    from problems import Batch
    from testbed import Oracles

    x, y = torch.randn(2), torch.randn(3)
    oracles = Oracles(p)
    full = oracles.grad_inner(x, y, torch.arange(2))
    per_sample = torch.stack(
        [oracles.grad_inner(x, y, torch.arange(2), Batch(torch.full((2, 1), j))) for j in range(5)]
    )  # (5, M, dy)
    empirical = ((per_sample - full) ** 2).sum(-1).mean(0)
    exact = p.noise_variance(x, y, batch_size=1)["grad_inner_y"]
    torch.testing.assert_close(empirical, exact, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(p.noise_variance(x, y, batch_size=4)["grad_inner_y"], exact / 4)


def test_deterministic_problem_has_no_stochastic_oracle():
    p = QuadraticBilevel.random(2, 2, 2, 3.0, seed=0)
    with pytest.raises(ProblemError, match="without samples"):
        p.sample_batch(np.random.default_rng(0), torch.arange(2), 3)


@settings(max_examples=20)
@given(
    strategies.quadratic_bilevel(
        n_samples=3, gradient_noise=0.1, hessian_noise=0.05, max_hessian_heterogeneity=0.9
    )
)
def test_drawn_problems_are_well_posed(problem):
    c = problem.constants()
    assert 1.0 <= c.kappa <= 100.0 + 1e-8
    assert c.mu_clients > 0
    x = torch.zeros(problem.dim_x)
    assert torch.isfinite(problem.exact_hypergradient(x)).all()


@settings(max_examples=15)
@given(strategies.quadratic_bilevel(max_clients=4, max_dim=5))
def test_outer_hessian_and_minimiser(problem):
    gen = torch.Generator().manual_seed(0)
    x, u = torch.randn(problem.dim_x, generator=gen), torch.randn(problem.dim_x, generator=gen)
    # h is quadratic: its gradient is affine with slope grad^2 h
    torch.testing.assert_close(
        problem.exact_hypergradient(x + u) - problem.exact_hypergradient(x),
        problem.outer_hessian() @ u,
        rtol=1e-9,
        atol=1e-9,
    )
    lowest = float(torch.linalg.eigvalsh(problem.outer_hessian()).min())
    if lowest > 0.0:
        assert torch.equal(problem.strongly_convex_outer_hessian(), problem.outer_hessian())
    if lowest > 1e-6:
        x_star = problem.outer_minimizer()
        assert float(problem.exact_hypergradient(x_star).norm()) < 1e-8 * (
            1 + float(problem.outer_hessian().norm()) * float(x_star.norm())
        )
    elif lowest <= 0.0:
        with pytest.raises(ProblemError, match="not strongly convex"):
            problem.outer_minimizer()
        with pytest.raises(ProblemError, match="not strongly convex"):
            problem.strongly_convex_outer_hessian()


def test_constants_are_computed_once_and_equal_a_fresh_computation() -> None:
    """``constants()`` is cached per problem (step rules read it at every run's start): the
    cached value is the one computed, the same object on every call, equal field for field
    (``repr``: bit for bit) to what a fresh problem of the same draw computes."""
    for seed in range(6):
        spec = {"n_clients": 2 + seed % 3, "dim_x": 2, "dim_y": 2 + seed % 2, "seed": seed}
        p = QuadraticBilevel.random(condition_number=3.0, hessian_heterogeneity=0.3, **spec)
        first = p.constants()
        assert p.constants() is first
        fresh = QuadraticBilevel.random(condition_number=3.0, hessian_heterogeneity=0.3, **spec)
        assert "_constants" not in vars(fresh)
        assert repr(fresh.constants()) == repr(first)


def test_exact_hypergradients_are_each_problems_own() -> None:
    """``QuadraticBilevel.exact_hypergradients`` (the linear solves batched over problems)
    gives, bit for bit (``torch.equal``), each problem's own ``exact_hypergradient`` at its
    point, and the same norm: every shape from scalars to ``dim_y = 5``, one to four clients,
    points from 1e-3 to 1e3 and one that is not finite."""
    for clients, dim_x, dim_y in itertools.product((1, 2, 4), (1, 2, 3), (1, 2, 3, 5)):
        problems = [
            QuadraticBilevel.random(
                clients,
                dim_x,
                dim_y,
                condition_number=3.0,
                hessian_heterogeneity=0.3,
                gradient_heterogeneity=1.0,
                seed=seed,
            )
            for seed in range(12)
        ]
        rng = np.random.default_rng([clients, dim_x, dim_y])
        points = [
            torch.from_numpy(rng.standard_normal(dim_x) * 10.0 ** rng.integers(-3, 4))
            for _ in problems
        ]
        points[-1] = torch.full((dim_x,), float("inf"), dtype=torch.float64)
        together = QuadraticBilevel.exact_hypergradients(problems, points)
        for problem, x, grad in zip(problems, points, together, strict=True):
            alone = problem.exact_hypergradient(x)
            assert torch.equal(alone, grad) or (alone.isnan().all() and grad.isnan().all())
            assert repr(float(alone.norm())) == repr(float(grad.norm()))

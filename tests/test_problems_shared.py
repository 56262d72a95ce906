"""The pieces the problem families share: recipe checks, array and sample checks, the spectral
draws and the one non-negativity rule (problems.family, problems._base, problems._spectra)."""

import numpy as np
import pytest
import torch

from problems import LinearCompositional
from problems import PerClientQuadratic
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from problems import _spectra
from problems._base import ProblemError
from problems._spectra import sample_spreads
from problems._spectra import spectral_stack
from problems.checks import check_arrays
from problems.checks import check_nonnegative
from problems.checks import check_samples
from problems.checks import symmetric_operator
from problems.family import recipe_rng
from problems.workloads import WorkloadError

SPEC = {
    "family": "X.random",
    "n_clients": 3,
    "dim_x": 2,
    "dim_y": 2,
    "condition_number": 4.0,
    "mu": 1.0,
    "hessian_heterogeneity": 0.3,
    "hessian_noise": 0.2,
    "n_samples": 2,
    "seed": 0,
}


def _rng(**changes):
    return recipe_rng(
        {**SPEC, **changes},
        nonnegative=("hessian_heterogeneity", "hessian_noise"),
        positive=("mu",),
        dims=("dim_x", "dim_y"),
        below_one=("hessian_heterogeneity", "hessian_noise"),
    )


def test_a_recipe_gives_the_seeded_generator():
    assert _rng().standard_normal() == np.random.default_rng(0).standard_normal()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_clients": 0}, "X.random: needs at least one client"),
        ({"condition_number": 0.5}, "condition number must be a finite number >= 1"),
        ({"hessian_noise": -0.1}, "hessian_noise must be finite and >= 0"),
        ({"hessian_heterogeneity": "high"}, "hessian_heterogeneity must be a number >= 0"),
        ({"hessian_noise": 0.7}, r"hessian_heterogeneity \+ hessian_noise = 1 >= 1"),
        ({"mu": 0.0}, "mu must be a positive number, got 0.0"),
        ({"dim_x": 2.0}, "dim_x must be an integer, got 2.0"),
        ({"dim_y": 0}, r"dimensions must be >= 1, got \(2, 0\)"),
        ({"n_samples": -1}, "n_samples must be >= 0, got -1"),
        ({"seed": -1}, "seed must be an integer >= 0"),
    ],
)
def test_a_recipe_names_its_bad_knob(changes, message):
    with pytest.raises(ProblemError, match=message):
        _rng(**changes)


@pytest.mark.parametrize("family", [QuadraticBilevel, QuadraticMinimax])
def test_the_spectral_families_share_their_knob_rules(family):
    for bad, message in (
        ({"hessian_noise": 0.8, "n_samples": 2}, "would make an inner Hessian"),
        ({"gradient_noise": float("nan")}, "gradient_noise must be finite"),
        ({"mu": -1.0}, "mu must be a positive number"),
    ):
        with pytest.raises(ProblemError, match=message):
            family.random(3, 2, 2, 4.0, 0.3, seed=0, **bad)


def test_the_per_client_and_compositional_families_check_their_recipes_too():
    with pytest.raises(ProblemError, match="n_samples must be >= 0"):
        PerClientQuadratic.random(3, 2, 2, n_samples=-1)
    with pytest.raises(ProblemError, match="mu must be a positive number"):
        PerClientQuadratic.random(3, 2, 2, mu=0.0)
    with pytest.raises(ProblemError, match="value_noise must be finite and >= 0"):
        LinearCompositional.random(3, [2, 3], value_noise=-1.0)


def test_check_arrays_binds_each_axis_once():
    arrays, sizes = check_arrays(
        "P",
        {"A": np.eye(2)[None].repeat(3, 0), "b": np.ones((3, 2)), "B": np.ones((3, 2, 4))},
        {"A": "M dy dy", "b": "M dy", "B": "M dy dx"},
        symmetric=("A",),
    )
    assert sizes == {"M": 3, "dy": 2, "dx": 4}
    assert arrays["B"].dtype == torch.float64
    with pytest.raises(ProblemError, match=r"array 'b' has shape \(3, 3\), expected \(3, 2\)"):
        check_arrays(
            "P", {"A": np.ones((3, 2, 2)), "b": np.ones((3, 3))}, {"A": "M dy dy", "b": "M dy"}
        )
    with pytest.raises(ProblemError, match=r"array 'A' must have shape \(M, dy, dy\)"):
        check_arrays("P", {"A": np.ones((3, 2))}, {"A": "M dy dy"})
    with pytest.raises(ProblemError, match="array 'A' must be symmetric"):
        check_arrays(
            "P", {"A": np.arange(12.0).reshape(3, 2, 2)}, {"A": "M dy dy"}, symmetric=("A",)
        )


def test_check_samples_wants_all_or_none_with_unbiased_means():
    clients = {"b": torch.ones(3, 2), "c": torch.zeros(3, 1)}
    assert check_samples("P", {"b": None, "c": None}, clients) == (0, {})
    with pytest.raises(ProblemError, match="give all of .*b_samples.*c_samples"):
        check_samples("P", {"b": np.ones((3, 4, 2)), "c": None}, clients)
    n, samples = check_samples("P", {"b": np.ones((3, 4, 2)), "c": np.zeros((3, 4, 1))}, clients)
    assert n == 4 and set(samples) == {"b_samples", "c_samples"}
    with pytest.raises(ProblemError, match="the stochastic oracle would be biased"):
        check_samples("P", {"b": 2 * np.ones((3, 4, 2)), "c": np.zeros((3, 4, 1))}, clients)
    with pytest.raises(ProblemError, match="at least one sample per client"):
        check_samples("P", {"b": np.ones((3, 0, 2)), "c": np.zeros((3, 0, 1))}, clients)


@pytest.mark.parametrize("keep_spread", [True, False])
def test_the_spectral_stack_is_the_whole_array_formula(keep_spread):
    """Same generator use and the same bits as ``R (I + S_i) R`` written out."""
    stack = spectral_stack(np.random.default_rng(3), 5, 4, 0.5, 20.0, 0.4, keep_spread=keep_spread)
    rng = np.random.default_rng(3)
    mean = _spectra.spd_with_spectrum(rng, _spectra.log_spaced_spectrum(4, 0.5, 20.0))
    root = _spectra.symmetric_sqrt(mean)
    spread = _spectra.centered_symmetric_spread(rng, 5, 4, 0.4)
    assert np.array_equal(stack.root, root)
    assert np.array_equal(stack.stack, root @ (np.eye(4) + spread) @ root)
    assert (stack.spread is None) == (not keep_spread)
    if keep_spread:
        noise = np.random.default_rng(9)
        samples = stack.samples(noise, 3, 0.1)
        assert samples.shape == (5, 3, 4, 4)
        assert np.allclose(samples.mean(axis=1), stack.stack, atol=1e-12)


def test_one_sample_draws_no_spread():
    rng = np.random.default_rng(0)
    assert not sample_spreads(rng, 4, 1, (2, 3), 0.5).any()
    assert rng.standard_normal() == np.random.default_rng(0).standard_normal()


def test_check_nonnegative_is_one_rule_for_problems_and_workloads():
    assert check_nonnegative("P", "s", 2) == 2.0
    assert isinstance(check_nonnegative("P", "s", np.float32(0.5)), float)
    for bad in (True, "1", float("inf"), -1e-9):
        with pytest.raises(ProblemError, match="P: s must be"):
            check_nonnegative("P", "s", bad)  # type: ignore[arg-type]
    with pytest.raises(WorkloadError, match="loss_tuning: inner_regularization must be"):
        check_nonnegative("loss_tuning", "inner_regularization", -1.0, WorkloadError)


@pytest.mark.parametrize(
    "build",
    [
        lambda: QuadraticBilevel.random(3, 2, 3, 4.0, 0.3, seed=1, n_samples=2, hessian_noise=0.1),
        lambda: QuadraticMinimax.random(3, 2, 3, 4.0, 0.3, seed=1, n_samples=2, hessian_noise=0.1),
        lambda: PerClientQuadratic.random(3, 2, 3, seed=1, n_samples=2, hessian_noise=0.1),
    ],
)
def test_minibatch_curvature_is_the_mean_of_the_drawn_sample_hessians(build):
    problem = build()
    name = "P" if isinstance(problem, QuadraticMinimax) else "A"
    clients = torch.tensor([2, 0])
    batch = problem.sample_batch(np.random.default_rng(0), clients, 5)
    samples = getattr(problem, f"{name}_samples")
    expected = torch.stack(
        [samples[c, batch.indices[k]].mean(0) for k, c in enumerate(clients.tolist())]
    )
    assert torch.allclose(problem._sampled(name, clients, batch), expected, atol=1e-14)
    assert torch.equal(problem._sampled(name, clients, None), getattr(problem, name)[clients])


@pytest.mark.parametrize("symmetric", [True, False])
def test_the_spreads_are_scaled_by_each_matrix_norm_as_computed_alone(symmetric):
    """The spreads are scaled so the largest spectral norm is the spread, the norms computed a
    chunk of matrices per batched SVD: the same bits as each matrix's own
    ``np.linalg.norm(m, 2)`` (the draw written out with the per-matrix loop), on shapes and
    client counts the families draw and beyond."""
    for count in (2, 3, 4, 7, 40):
        for shape in ((2, 2), (3, 3), (3, 2), (2, 3), (6, 6)):
            if symmetric and shape[0] != shape[1]:
                continue
            seed = [count, *shape]
            if symmetric:
                got = _spectra.centered_symmetric_spread(
                    np.random.default_rng(seed), count, shape[0], 0.3
                )
            else:
                got = _spectra.centered_matrix_spread(
                    np.random.default_rng(seed), count, shape, 0.3
                )
            raw = np.random.default_rng(seed).standard_normal((count, *shape))
            if symmetric:
                raw = 0.5 * (raw + np.swapaxes(raw, 1, 2))
            raw -= _spectra.client_mean(raw)
            largest = max(float(np.linalg.norm(m, 2)) for m in raw)
            assert np.array_equal(got, raw * (0.3 / largest)), (count, shape)


def test_applied_as_stored_is_the_symmetric_operator_decision():
    """``applied_as_stored`` reports the construction's own decision, the one
    :func:`~problems.checks.symmetric_operator` makes on the array (a drawn problem's symmetric
    arrays as stored; one symmetric only to 1e-12 through a symmetrised copy)."""
    drawn = QuadraticBilevel.random(3, 2, 3, condition_number=4.0, heterogeneity=0.3, seed=5)
    arrays = drawn.to_arrays()
    arrays["E"][:, 1, 0] -= 1e-12
    skewed = QuadraticBilevel(**arrays)
    for problem in (drawn, skewed):
        for name in QuadraticBilevel.OPERATORS:
            array = getattr(problem, name)
            assert problem.applied_as_stored(name) == (symmetric_operator(array) is array)
    assert not skewed.applied_as_stored("E") and skewed.applied_as_stored("C")

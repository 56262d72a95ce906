"""Quadratic bilevel problems drawn together (QuadraticBilevel.random_together,
drawn_with_minimizer; theory_checks.comparison.batched.draw_problems) against the same problems
drawn one by one (from_spec, runs.draw_problem).

Every problem drawn together must be its one-by-one draw bit for bit: every array
(``torch.equal``, with its dtype, shape and strides), the client eigenvalues the constructor
keeps, the recipe (and its key order), the id, ``repr`` of its constants, the oracles' operators
and what its exact answers and oracles give; the redraw of a problem without an outer minimiser
takes the same seeds from the same generator, which ends in the same state. The batched checks
reject what the one-by-one checks reject, each problem against its own scale.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import numpy as np
import pytest
import torch

from problems import PerClientQuadratic
from problems import ProblemError
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from problems import from_spec
from problems.checks import check_arrays
from problems.checks import check_positive_definite
from problems.checks import symmetric_operator
from problems.checks import symmetric_to_round_off
from theory_checks.comparison import batched
from theory_checks.comparison import runs


def _spec(n_clients: int, dim_x: int, dim_y: int, **knobs: Any) -> dict[str, Any]:
    return QuadraticBilevel.random(n_clients, dim_x, dim_y, 2.5, seed=0, **knobs).spec()


_HETEROGENEOUS = {"hessian_heterogeneity": 0.2, "gradient_heterogeneity": 1.5}
_SAMPLES = {"n_samples": 4, "gradient_noise": 0.3, "hessian_noise": 0.2}
#: The families: the comparisons' (heterogeneous, homogeneous; dims 2-3, M 2-8), with sample
#: sets (one sample: no Hessian noise drawn; several), the scale knobs, one client, dimension 1.
FAMILIES = [
    _spec(3, 2, 2, **_HETEROGENEOUS),
    _spec(8, 3, 3, **_HETEROGENEOUS),
    _spec(5, 2, 3, hessian_heterogeneity=0.3, gradient_heterogeneity=1.0),
    _spec(2, 2, 2),
    _spec(7, 3, 2),
    _spec(4, 3, 3, **_HETEROGENEOUS, **_SAMPLES),
    _spec(3, 2, 2, **_HETEROGENEOUS, n_samples=1, gradient_noise=0.5),
    _spec(2, 3, 2, **_SAMPLES),
    _spec(6, 2, 3, **_HETEROGENEOUS, cross_scale=0.1, outer_curvature=0.5),
    _spec(1, 1, 4, **_HETEROGENEOUS, **_SAMPLES),
]


def assert_same_problem(together: QuadraticBilevel, alone: QuadraticBilevel) -> None:
    """``together`` is ``alone`` bit for bit: arrays, kept eigenvalues, recipe, id, constants,
    operators, attributes, and what its exact answers and oracles give."""
    assert type(together) is type(alone)
    assert list(vars(together)) == list(vars(alone))  # the same attributes, set in one order
    for name in (*alone.ARRAY_NAMES, *alone.SAMPLE_NAMES, "_client_eigenvalues"):
        a, b = getattr(together, name), getattr(alone, name)
        if b is None:
            assert a is None, name
            continue
        assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride()), name
        assert torch.equal(a, b), name
    for name in alone.OPERATORS:
        assert torch.equal(together._operators[name], alone._operators[name]), name
        assert together.applied_as_stored(name) == alone.applied_as_stored(name), name
    assert together._samples_symmetric == alone._samples_symmetric
    assert together.spec() == alone.spec() and list(together.spec()) == list(alone.spec())
    assert (together.id, together.name, repr(together)) == (alone.id, alone.name, repr(alone))
    assert (together.n_clients, together.dim_x, together.dim_y, together.n_samples) == (
        alone.n_clients,
        alone.dim_x,
        alone.dim_y,
        alone.n_samples,
    )
    assert repr(together.constants()) == repr(alone.constants())
    x = torch.linspace(-1.0, 1.0, alone.dim_x, dtype=torch.float64)
    y = torch.linspace(0.5, -0.5, alone.dim_y, dtype=torch.float64)
    assert torch.equal(together.exact_hypergradient(x), alone.exact_hypergradient(x))
    assert torch.equal(together.outer_hessian(), alone.outer_hessian())
    clients = torch.arange(alone.n_clients)
    xs, ys = x.expand(alone.n_clients, -1), y.expand(alone.n_clients, -1)
    for oracle in ("oracle_grad_inner", "inner_loss", "outer_loss"):
        got = getattr(together, oracle)(xs, ys, clients, None)
        assert torch.equal(got, getattr(alone, oracle)(xs, ys, clients, None)), oracle
    if alone.n_samples:
        got, want = together.noise_variance(x, y, 2), alone.noise_variance(x, y, 2)
        assert all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize(
    "spec",
    FAMILIES,
    ids=lambda s: (
        QuadraticBilevel.recipe(**{k: v for k, v in s.items() if k != "family"})["family"]
        + f"-m{s['n_clients']}-dx{s['dim_x']}-dy{s['dim_y']}-n{s['n_samples']}"
    ),
)
def test_problems_drawn_together_are_those_drawn_alone(spec: dict[str, Any]) -> None:
    seeds = [0, 1, 7, 12345, 2**31 - 1, *np.random.default_rng(11).integers(2**31, size=7)]
    together = QuadraticBilevel.random_together(spec, [int(s) for s in seeds])
    assert len(together) == len(seeds)
    for seed, problem in zip(seeds, together, strict=True):
        assert_same_problem(problem, from_spec({**spec, "seed": int(seed)}))  # type: ignore[arg-type]


def test_one_problem_and_none_together() -> None:
    spec = FAMILIES[0]
    (one,) = QuadraticBilevel.random_together(spec, [5])
    assert_same_problem(one, from_spec({**spec, "seed": 5}))  # type: ignore[arg-type]
    assert QuadraticBilevel.random_together(spec, []) == []


def _streams(count: int) -> list[np.random.Generator]:
    return [np.random.default_rng([2024, i]) for i in range(count)]


@pytest.mark.parametrize("spec", [FAMILIES[0], FAMILIES[1], FAMILIES[3], FAMILIES[7]])
def test_drawn_with_minimizer_redraws_as_draw_problem(spec: dict[str, Any]) -> None:
    """Each generator's problem is ``runs.draw_problem``'s and the generator ends where
    ``draw_problem`` leaves it, redraws included: on each of these families (heterogeneous,
    homogeneous, with samples) some of the 60 first draws have no outer minimiser (2-5,
    measured) and are redrawn."""
    count = 60
    alone_streams, together_streams = _streams(count), _streams(count)
    alone = [runs.draw_problem(spec, rng) for rng in alone_streams]
    together = QuadraticBilevel.drawn_with_minimizer(spec, together_streams)
    for a, b, rng_a, rng_b in zip(alone, together, alone_streams, together_streams, strict=True):
        assert_same_problem(b, a)
        assert rng_a.bit_generator.state == rng_b.bit_generator.state
    first_seeds = [int(rng.integers(2**31)) for rng in _streams(count)]
    assert any(p.spec()["seed"] != s for p, s in zip(together, first_seeds, strict=True))
    # tries is draw_problem's (theory_checks.comparison.batched passes runs.DRAW_TRIES)
    assert inspect.signature(runs.draw_problem).parameters["tries"].default == runs.DRAW_TRIES


def test_strongly_convex_together_is_each_problems_check() -> None:
    """Both answers occur, each the one-by-one check's."""
    spec = _spec(8, 3, 3, **_HETEROGENEOUS)
    problems = QuadraticBilevel.random_together(spec, list(range(80)))
    together = QuadraticBilevel.strongly_convex_together(problems)
    alone = []
    for problem in problems:
        try:
            problem.strongly_convex_outer_hessian()
            alone.append(True)
        except ProblemError:
            alone.append(False)
    assert together == alone
    assert set(alone) == {True, False}  # the problems give both answers
    assert QuadraticBilevel.strongly_convex_together([]) == []
    # its premise: the batched solve and eigenvalues are each problem's own floats
    means = [p.means for p in problems]
    jacobians = torch.linalg.solve(
        torch.stack([m["A"] for m in means]), torch.stack([m["B"] for m in means])
    )
    hessians = [p.outer_hessian() for p in problems]
    lowest = torch.linalg.eigvalsh(torch.stack(hessians))
    for p, jacobian, hessian, values in zip(problems, jacobians, hessians, lowest, strict=True):
        assert torch.equal(jacobian, p.hypergradient_jacobian())
        assert torch.equal(values, torch.linalg.eigvalsh(hessian))


def test_draw_problems_at_the_call_site_is_draw_problem() -> None:
    """batched.draw_problems: together for a quadratic bilevel family, one by one (the same
    generators' numbers) for another family or a recipe that is not drawn together."""
    spec = FAMILIES[1]
    got = batched.draw_problems(spec, _streams(12))
    for problem, rng in zip(got, _streams(12), strict=True):
        assert_same_problem(problem, runs.draw_problem(spec, rng))
    other = PerClientQuadratic.random(3, 2, 2, 2.0, 0, outer_coupling=0.5).spec()
    for problem, rng in zip(batched.draw_problems(other, _streams(3)), _streams(3), strict=True):
        want = runs.draw_problem(other, rng)
        assert problem.spec() == want.spec()
        assert all(
            np.array_equal(a, b)
            for a, b in zip(problem.to_arrays().values(), want.to_arrays().values(), strict=True)
        )
    with pytest.raises(KeyError, match="no builder"):
        batched.draw_problems({**spec, "family": "Nowhere.random"}, _streams(2))


def test_random_together_refuses_what_it_does_not_draw() -> None:
    minimax = QuadraticMinimax.random(3, 2, 2, 2.0, seed=0).spec()
    with pytest.raises(ProblemError, match="not drawn together"):
        QuadraticBilevel.random_together(minimax, [1])
    with pytest.raises(ProblemError, match="seed"):  # a seed is checked as alone
        QuadraticBilevel.random_together(FAMILIES[0], [1, -3])
    with pytest.raises(ProblemError, match="condition number"):
        QuadraticBilevel.random_together({**FAMILIES[0], "condition_number": 0.5}, [1])


def _pair(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return np.stack([first, second])


def test_batched_checks_check_each_problem_against_its_own_scale() -> None:
    """A batch passes only when every problem passes alone: an asymmetry of 1e-9 in a problem
    of entries ~1 fails its symmetry check even beside a problem of entries ~1e3 (whose scale
    would let it pass), and so does a matrix that is not positive definite, a NaN, a bad
    shape."""
    eye = np.broadcast_to(np.eye(2), (3, 2, 2)).copy()
    skewed = eye.copy()
    skewed[1, 0, 1] += 1e-9
    shapes = {"A": "M d d"}
    with pytest.raises(ProblemError, match="must be symmetric"):
        check_arrays("p", {"A": _pair(1e3 * eye, skewed)}, shapes, ("A",), together=True)
    with pytest.raises(ProblemError, match="must be symmetric"):
        check_arrays("p", {"A": skewed}, shapes, ("A",))
    checked, sizes = check_arrays("p", {"A": _pair(1e3 * eye, eye)}, shapes, ("A",), together=True)
    assert sizes == {"M": 3, "d": 2} and checked["A"].shape == (2, 3, 2, 2)
    indefinite = eye.copy()
    indefinite[2, 1, 1] = -1e-3
    with pytest.raises(ProblemError, match="not positive definite"):
        check_positive_definite("A", "p", torch.from_numpy(_pair(eye, indefinite)), together=True)
    eigenvalues = check_positive_definite(
        "A", "p", torch.from_numpy(_pair(eye, 2 * eye)), together=True
    )
    assert torch.equal(eigenvalues[1], check_positive_definite("A", "p", torch.from_numpy(2 * eye)))
    broken = eye.copy()
    broken[0, 0, 0] = np.nan
    with pytest.raises(ProblemError, match="NaN or inf"):
        check_arrays("p", {"A": _pair(eye, broken)}, shapes, together=True)
    with pytest.raises(ProblemError, match="must have shape"):
        check_arrays("p", {"A": eye}, shapes, together=True)


def test_symmetric_to_round_off_is_each_problems_operator_decision() -> None:
    eye = np.broadcast_to(np.eye(3), (2, 3, 3)).copy()
    near = eye.copy()
    near[0, 0, 2] += 1e-12  # symmetric to 1e-10 (accepted), not to round-off (symmetrised)
    batch = torch.from_numpy(np.stack([1e4 * eye, near, eye]))
    decisions = symmetric_to_round_off(batch)
    assert decisions == [symmetric_operator(stack) is stack for stack in batch.unbind()]
    assert decisions == [True, False, True]


def test_generators_are_restored_before_drawing_one_by_one() -> None:
    """draw_problems falls back from the generators' states before the batched draw, which
    took a seed from each before refusing the family."""
    other = PerClientQuadratic.random(3, 2, 2, 2.0, 0, outer_coupling=0.5).spec()
    streams = _streams(2)
    before = copy.deepcopy(streams)
    got = batched.draw_problems(other, streams)
    want = [runs.draw_problem(other, rng) for rng in before]
    assert [p.spec()["seed"] for p in got] == [p.spec()["seed"] for p in want]
    assert [r.bit_generator.state for r in streams] == [r.bit_generator.state for r in before]

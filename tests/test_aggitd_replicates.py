"""FBO-AggITD's replicate axis (testbed.algorithms.aggitd_replicates) and Theorem 1's rate check
on it (theory_checks.aggitd.thm1.replicates): every replicate's iterates and recorded values
are, bit for bit, those of its own unbatched run; what is not batched runs per replicate."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from problems import QuadraticMinimax
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.aggitd_replicates import fbo_aggitd_replicates
from testbed.algorithms.base import run_algorithm
from testbed.estimators.validation import DivergenceError
from testbed.federation.replicates import NotBatchable
from theory_checks.aggitd.mutants import ShortIndexDraw
from theory_checks.aggitd.mutants import WithEstimator
from theory_checks.aggitd.thm1 import RATE_IN_K
from theory_checks.aggitd.thm1 import DecayingOuterStep
from theory_checks.aggitd.thm1 import check_thm1_rate
from theory_checks.aggitd.thm1.replicates import batched_averages
from theory_checks.aggitd.thm1.replicates import horizon_averages
from theory_checks.aggitd.thm1.replicates import run_average
from theory_checks.claim import Case
from theory_checks.decision import first_design
from theory_checks.exact_quantities import outer_affine
from theory_checks.replicates import seed_batch
from theory_checks.replicates import sibling


def _problem(clients: int, dx: int, dy: int, seed: int) -> QuadraticMinimax:
    # Theorem 1's cases (theory_checks.aggitd.thm1.thm1_cases): noisy samples, kappa <= 2
    return QuadraticMinimax.random(
        clients,
        dx,
        dy,
        1.5,
        seed=seed,
        n_samples=6,
        gradient_noise=0.2,
        hessian_noise=0.05,
        hessian_heterogeneity=0.3,
    )


def _start(problem: QuadraticMinimax, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    return (
        torch.as_tensor(rng.standard_normal(problem.dim_x)),
        torch.as_tensor(rng.standard_normal(problem.dim_y)),
    )


def _alone(algorithm, problem, start, iterations, rng) -> tuple[torch.Tensor, torch.Tensor]:
    state = algorithm.init(problem)._replace(x=start[0], y=start[1])
    records = run_algorithm(algorithm, problem, iterations, rng, state=state)
    return torch.stack([r.x for r in records]), torch.stack([r.state.y for r in records])


# (clients, dx, dy, problem seed) x the algorithm's settings: Theorem 1's (N = 1, tau = 1,
# batch 1, full participation) and others the batched run covers (N = 0..3, tau = 2, batch 2,
# partial participation)
CASES = [
    ((1, 1, 1, 0), {"inner_steps": 1, "local_steps": 1, "batch_size": 1}),
    ((3, 2, 2, 1), {"inner_steps": 1, "local_steps": 1, "batch_size": 1}),
    ((2, 2, 1, 2), {"inner_steps": 1, "local_steps": 1, "batch_size": 1}),
    ((2, 1, 3, 3), {"inner_steps": 3, "local_steps": 2, "batch_size": 2}),
    ((3, 2, 2, 4), {"inner_steps": 0, "local_steps": 1, "batch_size": 1}),
    ((3, 2, 2, 5), {"inner_steps": 2, "local_steps": 1, "batch_size": 1, "participation": 2}),
    ((2, 2, 2, 6), {"inner_steps": 2, "local_steps": 2, "batch_size": None}),
]


@pytest.mark.parametrize(("shape", "settings"), CASES)
@pytest.mark.parametrize("seed", [0, 11])
def test_each_replicate_is_its_own_run(shape, settings, seed):
    problem = _problem(*shape)
    start = _start(problem, seed)
    algorithm = FBOAggITD(
        inner_step_size=0.3, neumann_step_size=0.4, outer_step_size=0.2, **settings
    )
    streams = [(seed, r) for r in range(4)]
    runs = fbo_aggitd_replicates(
        algorithm, problem, [np.random.default_rng(s) for s in streams], start, 12
    )
    assert not runs.diverged.any()
    for r, stream in enumerate(streams):
        xs, ys = _alone(algorithm, problem, start, 12, np.random.default_rng(stream))
        assert torch.equal(runs.x[r], xs), (r, (runs.x[r] - xs).abs().max())
        assert torch.equal(runs.y[r], ys), (r, (runs.y[r] - ys).abs().max())


def test_a_diverging_replicate_is_infinite_as_alone():
    problem = _problem(2, 2, 2, 1)
    start = _start(problem, 0)
    outer = outer_affine(problem)
    rngs = [np.random.default_rng(r) for r in range(3)]
    # an outer step of 50 on an outer Hessian of order 1: |1 - 50 mu_h| >> 1, so every run grows
    # past GROWTH_FACTOR times its start within the 48 iterations
    algorithm = FBOAggITD(inner_steps=1, local_steps=1, batch_size=1, outer_step_size=50.0)
    with pytest.raises(DivergenceError):
        _alone(algorithm, problem, start, 48, np.random.default_rng(0))
    values = batched_averages(problem, algorithm, start, 48, rngs, outer)
    alone = [
        run_average(problem, algorithm, start, 48, np.random.default_rng(r), outer)
        for r in range(3)
    ]
    assert values.tolist() == alone == [math.inf] * 3


@pytest.mark.parametrize("bound", [2, 6, 7, 1000])
def test_one_call_of_a_bound_draws_what_its_blocks_draw(bound):
    # what DrawnAhead relies on: the blocks of one rng.integers(0, n, size=m) are the draws
    # of the separate calls, whatever their sizes and a draw of another bound before them, on
    # the generators a Design makes
    design = first_design(5, 0, 1e-3, "fast")
    sizes = [(3, 1), (1, 1), (2, 2), (3, 1), (1, 4), (2, 1)]
    for r in range(50):
        alone, merged = design.rng(r), design.rng(r)
        assert alone.integers(0, 2) == merged.integers(0, 2)
        calls = np.concatenate([alone.integers(0, bound, size=s).reshape(-1) for s in sizes])
        one = merged.integers(0, bound, size=sum(a * b for a, b in sizes))
        assert np.array_equal(calls, one)
        assert alone.integers(0, 2) == merged.integers(0, 2)


@dataclasses.dataclass(frozen=True)
class SameAlgorithm(FBOAggITD):
    """FBO-AggITD itself under another class: not batched, so it runs per replicate."""


@pytest.mark.parametrize(
    "algorithm",
    [
        DecayingOuterStep(inner_steps=1, batch_size=1),  # Theorem 1's perturbation
        WithEstimator(inner_steps=1, batch_size=1, estimator_class=ShortIndexDraw),  # a mutant
        SameAlgorithm(inner_steps=1, batch_size=1),
        FBOAggITD(inner_steps=1, batch_size=1, lower_solver="sgd"),
        FBOAggITD(inner_steps=1, batch_size=1, local_steps=(1, 2, 1)),
    ],
)
def test_what_is_not_batched_runs_per_replicate(algorithm):
    problem = _problem(3, 2, 2, 1)
    start = _start(problem, 0)
    with pytest.raises(NotBatchable):
        fbo_aggitd_replicates(algorithm, problem, [np.random.default_rng(0)], start, 4)
    design = first_design(5, 0, 1e-3, "fast")
    outer = outer_affine(problem)
    values = horizon_averages(problem, algorithm, start, 12, design, 3, outer)
    alone = [run_average(problem, algorithm, start, 12, design.rng(r), outer) for r in range(3)]
    assert values.tolist() == alone


def test_larger_outer_dimensions_other_problems_and_devices_are_not_batched():
    wide = _problem(2, 3, 2, 0)
    bilevel = QuadraticBilevel.random(2, 2, 2, 2.0, seed=0, n_samples=4, gradient_noise=0.2)
    algorithm = FBOAggITD(inner_steps=1, batch_size=1)
    for problem in (wide, bilevel):
        with pytest.raises(NotBatchable):
            fbo_aggitd_replicates(
                algorithm, problem, [np.random.default_rng(0)], _start(problem, 0), 4
            )
    # off the CPU (CUDA's kernels are not shown equal here): refused before anything runs
    problem = _problem(2, 2, 2, 0)
    off = tuple(v.to("meta") for v in _start(problem, 0))
    with pytest.raises(NotBatchable, match="tensors on meta"):
        fbo_aggitd_replicates(algorithm, problem, [np.random.default_rng(0)], off, 4)


def test_a_calibration_block_stacks_its_seeds_replicates():
    problem = _problem(3, 2, 2, 1)
    start = _start(problem, 0)
    outer = outer_affine(problem)
    algorithm = FBOAggITD(inner_steps=1, batch_size=1, outer_step_size=0.2)
    design = first_design(5, 0, 1e-3, "fast")
    seeds = (0, 1, 2)
    alone = [
        horizon_averages(problem, algorithm, start, 12, sibling(design, s), 4, outer) for s in seeds
    ]
    with seed_batch(seeds) as block:
        stacked = [
            horizon_averages(problem, algorithm, start, 12, sibling(design, s), 4, outer)
            for s in seeds
        ]
    assert block.batched_runs == 1
    assert [v.tolist() for v in stacked] == [v.tolist() for v in alone]
    assert alone[0].tolist() == [
        run_average(problem, algorithm, start, 12, design.rng(r), outer) for r in range(4)
    ]


@pytest.mark.parametrize("problem_seed", [7])
def test_the_checks_measurement_is_the_unbatched_one(problem_seed):
    case = Case(_problem(2, 2, 2, problem_seed), {"point_seed": 3})
    # a false-failure rate of 0.3 sizes a few replicates a horizon (the full rate's 28 take
    # seconds unbatched)
    design = first_design(5, 0, 0.3, "fast")
    batched = check_thm1_rate(RATE_IN_K, case, FBOAggITD, design)
    alone = check_thm1_rate(RATE_IN_K, case, SameAlgorithm, design)
    assert batched.details["replicates"] >= 3
    assert repr(batched) == repr(alone)

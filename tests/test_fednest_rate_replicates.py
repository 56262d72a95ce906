"""FedNest's replicate axis (testbed.algorithms.fednest_replicates) against one run per replicate.

Every iterate of the batched run must equal, bit for bit, what ``run_algorithm`` gives replicate
``r`` on its own generator: on the K-rate claims' problems (bilevel, minimax, compositional),
under random truncation (replicates draw different ``N'``), the deterministic one, LFedInn,
T = tau = 2 and partial participation; a configuration it does not reproduce is refused
before any draw (NotBatchable) and the check then runs each replicate unbatched, with the same
numbers (``fednest.thm31.k_rate_bilevel``'s Measurement compared in full).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from problems import LinearCompositional
from problems import QuadraticBilevel
from problems import QuadraticMinimax
from testbed.algorithms.base import run_algorithm
from testbed.algorithms.fednest import FedNest
from testbed.algorithms.fednest_replicates import CHUNK_ITERATIONS
from testbed.algorithms.fednest_replicates import run_fednest_replicates
from testbed.estimators.validation import DivergenceError
from testbed.federation.replicates import NotBatchable
from testbed.registry import get_estimator
from theory_checks.claim import Case
from theory_checks.claim import Measurement
from theory_checks.decision import first_design
from theory_checks.fednest.k_rate import stationarity_norms
from theory_checks.fednest.perturbations import DriftingOuter
from theory_checks.registry import get_claim
from theory_checks.replicates import seed_batch
from theory_checks.runner import claim_seed
from theory_checks.runner import measure

# Why K = 6 and 5 replicates: with N = 4 the replicates' N' differ within the first iterations
# (drawn uniformly on 0..3), so every subset of Hessian rounds runs; small K keeps this fast.
K, R = 6, 5


def _problems() -> dict[str, object]:
    knobs = {"n_samples": 8, "gradient_noise": 0.5, "hessian_noise": 0.3}
    return {
        "bilevel-dy1": QuadraticBilevel.random(3, 1, 1, 1.0, seed=11, **knobs),
        "bilevel-dy2": QuadraticBilevel.random(4, 1, 2, 2.0, seed=12, **knobs),
        "bilevel-dx2": QuadraticBilevel.random(3, 2, 2, 2.0, seed=13, **knobs),
        "minimax": QuadraticMinimax.random(3, 1, 1, 1.0, seed=14, **knobs),
        "compositional": LinearCompositional.random(
            3, [1, 3], 15, heterogeneity=0.5, n_samples=8, matrix_noise=0.5, value_noise=0.5
        ),
    }


def _algorithm(problem: object, **kw: object) -> FedNest:
    base = {
        "inner_steps": 1,
        "local_steps": 1,
        "inner_step_size": 0.3,
        "outer_step_size": 0.2,
        "neumann_terms": 4,
        "neumann_step_size": 0.5,
        "batch_size": 1,
    }
    if getattr(problem, "kind", None) == "minimax":
        base["outer_method"] = "minimax"
    return FedNest(**{**base, **kw})  # type: ignore[arg-type]


def _start(algorithm: FedNest, problem: object) -> object:
    x, y = problem.initial_point()  # type: ignore[attr-defined]
    return algorithm.init(problem)._replace(x=x + 0.7, y=y - 0.4)  # type: ignore[arg-type]


def _assert_same_runs(algorithm: FedNest, problem: object, seed: int) -> None:
    state = _start(algorithm, problem)
    rngs = [np.random.default_rng([seed, r]) for r in range(R)]
    batched = run_fednest_replicates(algorithm, problem, K, rngs, state)  # type: ignore[arg-type]
    assert len(batched) == K + 1
    for r in range(R):
        alone = run_algorithm(
            algorithm,
            problem,  # type: ignore[arg-type]
            K,
            np.random.default_rng([seed, r]),
            state=state,
        )
        for k, record in enumerate(alone):
            mine = batched[k].replicate(r, state.steps)  # type: ignore[attr-defined]
            ref = record.state
            assert torch.equal(mine.x, ref.x), (r, k)
            assert torch.equal(mine.y, ref.y), (r, k)
            assert (mine.h is None) == (ref.h is None)
            assert mine.h is None or torch.equal(mine.h, ref.h), (r, k)
            assert mine.truncation_index == ref.truncation_index, (r, k)
            assert mine.rounds == ref.rounds, (r, k)


@pytest.mark.parametrize("seed", [3, 8])
@pytest.mark.parametrize("name", list(_problems()))
def test_batched_iterates_equal_each_run(name: str, seed: int) -> None:
    problem = _problems()[name]
    _assert_same_runs(_algorithm(problem), problem, seed=seed)


@pytest.mark.parametrize("bound", [2, 5, 8, 1000])
@pytest.mark.parametrize("terms", [1, 2, 4, 7])
def test_one_call_draws_what_the_rounds_draw(bound: int, terms: int) -> None:
    """What the draws made ahead rely on (testbed.algorithms.fednest_replicates._drawn_ahead):
    on the generators the K-rate check makes (``design.rng(r, horizon)``), a stretch of
    minibatch draws ``integers(0, n, size=(C, b))`` in one call is the separate calls' draws,
    around a replicate's ``N' = integers(N)`` between two stretches; and ``integers(1)`` is 0
    and takes nothing from the stream (why N = 1 draws no N' and an iteration is one stretch)."""
    design = first_design(claim_seed(_CLAIMS["bilevel"]), 2, 1e-3, "thorough")
    shapes = [(3, 1), (3, 1), (4, 2), (1, 1), (3, 1)]
    for r in range(40):
        alone, ahead = design.rng(r, r % 2), design.rng(r, r % 2)
        for _ in range(3):  # three iterations: a stretch, N', a stretch
            calls = [alone.integers(0, bound, size=s).reshape(-1) for s in shapes]
            one = ahead.integers(0, bound, size=sum(a * b for a, b in shapes))
            assert np.array_equal(np.concatenate(calls), one)
            before = ahead.bit_generator.state
            n_prime = int(ahead.integers(terms))
            assert n_prime == int(alone.integers(terms))
            if terms == 1:
                assert n_prime == 0 and ahead.bit_generator.state == before
        assert alone.bit_generator.state == ahead.bit_generator.state


class _CountingGenerator:
    """A generator that counts its ``integers`` calls (every draw the runs make)."""

    def __init__(self, seed: list[int]) -> None:
        self.rng, self.calls = np.random.default_rng(seed), 0

    def integers(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.rng.integers(*args, **kwargs)


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("minimax", {}),
        ("bilevel-dy2", {"truncation": "deterministic"}),
        ("bilevel-dx2", {"truncation": "deterministic", "inner_method": "sgd"}),
        ("compositional", {"neumann_terms": 1}),
        ("bilevel-dy1", {"neumann_terms": 1, "inner_steps": 2, "local_steps": 2}),
    ],
    ids=["minimax", "deterministic", "deterministic-lfedinn", "compositional-N1", "N1-T2-tau2"],
)
def test_runs_longer_than_a_chunk_equal_each_run(name: str, settings: dict[str, object]) -> None:
    """Where an iteration draws nothing but minibatches (minimax, deterministic truncation,
    N = 1: the K-rate claims' compositional runs), a replicate draws CHUNK_ITERATIONS
    iterations' minibatches in one call: a run across two chunks equals each run, and the
    batched run made one call per replicate per chunk."""
    problem = _problems()[name]
    algorithm = _algorithm(problem, **settings)
    state = _start(algorithm, problem)
    iterations, count = CHUNK_ITERATIONS + 6, 3
    counting = [_CountingGenerator([9, r]) for r in range(count)]
    batched = run_fednest_replicates(algorithm, problem, iterations, counting, state)  # type: ignore[arg-type]
    assert [g.calls for g in counting] == [2] * count
    for r in range(count):
        rng = np.random.default_rng([9, r])
        alone = run_algorithm(algorithm, problem, iterations, rng, state=state)  # type: ignore[arg-type]
        assert rng.bit_generator.state == counting[r].rng.bit_generator.state  # the same draws
        for k, record in enumerate(alone):
            mine = batched[k].replicate(r, state.steps)  # type: ignore[attr-defined]
            assert torch.equal(mine.x, record.state.x), (r, k)
            assert torch.equal(mine.y, record.state.y), (r, k)
            assert mine.truncation_index == record.state.truncation_index, (r, k)
            assert mine.rounds == record.state.rounds, (r, k)


def test_replicates_draw_different_truncations() -> None:
    """The case the subsets of Hessian rounds exist for: some replicates stop before others."""
    problem = _problems()["bilevel-dy2"]
    algorithm = _algorithm(problem)
    rngs = [np.random.default_rng([3, r]) for r in range(R)]
    records = run_fednest_replicates(algorithm, problem, K, rngs, _start(algorithm, problem))
    assert len({record.truncation_index for record in records[1:]}) > 1
    assert any(len(set(record.truncation_index)) > 1 for record in records[1:])


@pytest.mark.parametrize(
    "settings",
    [
        {"truncation": "deterministic"},
        {"inner_method": "sgd"},
        {"inner_steps": 2, "local_steps": 2},
        {"participation": 2},
    ],
    ids=["deterministic", "lfedinn", "T2-tau2", "partial"],
)
def test_other_configurations_equal_each_run(settings: dict[str, object]) -> None:
    problem = _problems()["bilevel-dy2"]
    _assert_same_runs(_algorithm(problem, **settings), problem, seed=5)


class _OtherFamily(QuadraticBilevel):
    """A family whose oracles the batched rounds were not checked against (it could override
    one with a kernel that depends on a vector's form)."""


def test_refuses_what_it_does_not_reproduce() -> None:
    problem = _problems()["bilevel-dy1"]
    start = _start(_algorithm(problem), problem)
    drifting = DriftingOuter(**dataclasses.asdict(_algorithm(problem)))
    for algorithm, target in (
        (drifting, problem),
        (_algorithm(problem, outer_method="local"), problem),
        (_algorithm(problem, local_steps=(1, 2, 1)), problem),
        (_algorithm(problem), QuadraticBilevel.random(3, 3, 1, 1.0, seed=1, n_samples=8)),
        (_algorithm(problem), _OtherFamily.random(3, 1, 1, 1.0, seed=1, n_samples=8)),
    ):
        rng = np.random.default_rng(0)
        before = rng.bit_generator.state
        with pytest.raises(NotBatchable):
            run_fednest_replicates(algorithm, target, 2, [rng], start)  # type: ignore[arg-type]
        assert rng.bit_generator.state == before  # refused before any draw


def test_refuses_tensors_off_the_cpu() -> None:
    # the row-exactness of the kernels was read on the CPU's; a meta tensor stands for CUDA here
    problem = _problems()["bilevel-dy1"]
    start = _start(_algorithm(problem), problem)
    off = start._replace(x=start.x.to("meta"), y=start.y.to("meta"))
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    with pytest.raises(NotBatchable, match="tensors on meta"):
        run_fednest_replicates(_algorithm(problem), problem, 2, [rng], off)
    assert rng.bit_generator.state == before


# ----------------------------------------------------------------------------- the check


class _PlainFedNest(FedNest):
    """FedNest itself under another name: the check cannot batch it (not FedNest exactly), so
    it runs every replicate unbatched, the path the batched one must reproduce."""


def _rate_case(kind: str) -> Case:
    knobs = {"n_samples": 8, "gradient_noise": 0.6, "hessian_noise": 0.2}
    problem = {
        "bilevel": lambda: QuadraticBilevel.random(3, 1, 2, 2.0, seed=21, **knobs),
        "minimax": lambda: QuadraticMinimax.random(3, 1, 1, 1.0, seed=22, **knobs),
        "compositional": lambda: LinearCompositional.random(
            3, [1, 3], 23, heterogeneity=0.5, n_samples=8, matrix_noise=0.4, value_noise=0.4
        ),
    }[kind]()
    return Case(problem, {"point_seed": 4})


_CLAIMS = {
    "bilevel": "fednest.thm31.k_rate_bilevel",
    "minimax": "fednest.cor32.k_rate_minimax",
    "compositional": "fednest.cor33.k_rate_compositional",
}


def _makes(kind: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    entry = get_estimator("fednest-minimax" if kind == "minimax" else "fednest")

    def plain(**kw: Any) -> Any:
        built = entry.build(**kw)
        return _PlainFedNest(**{f.name: getattr(built, f.name) for f in dataclasses.fields(built)})

    return entry.build, plain


def _numbers(measurement: Measurement) -> str:
    """Every number of a Measurement, as text (a test's evidence has no repr of its own)."""
    tests = [(t.quantity, t.low, t.high, repr(vars(t.evidence))) for t in measurement.tests]
    return repr((dataclasses.replace(measurement, tests=()), tests))


@pytest.mark.parametrize("kind", list(_CLAIMS))
def test_check_measurement_is_the_unbatched_one(kind: str) -> None:
    """Every number of check_k_rate's Measurement (fast profile), batched and unbatched."""
    claim, case = get_claim(_CLAIMS[kind]), _rate_case(kind)
    batched, plain = _makes(kind)
    design = first_design(claim_seed(claim.id), 0, claim.false_fail_rate, "fast")
    mine = measure(claim, case, batched, design)
    theirs = measure(claim, case, plain, design)
    assert mine.fit is not None and mine.details["replicates"] == 2
    assert _numbers(mine) == _numbers(theirs)


def test_check_seeds_stacked_in_a_block_are_each_seeds_own() -> None:
    """A calibration block runs every seed's replicates of a look as one batched run; each
    seed's Measurement is the one it gets alone."""
    claim, case = get_claim(_CLAIMS["minimax"]), _rate_case("minimax")
    batched, _ = _makes("minimax")
    designs = [
        first_design(claim_seed(claim.id), k, claim.false_fail_rate, "fast") for k in (0, 1, 2)
    ]
    alone = [_numbers(measure(claim, case, batched, d)) for d in designs]
    with seed_batch([0, 1, 2]) as block:
        together = [_numbers(measure(claim, case, batched, d)) for d in designs]
    assert block.batched_runs == 1 and together == alone
    assert len(set(alone)) == 3  # the seeds differ


def test_check_divergence_is_the_unbatched_one() -> None:
    """A stochastic run that diverges raises what the unbatched check raises (the same
    replicate's error), whether the replicates run batched, unbatched or stacked."""
    claim, case = get_claim(_CLAIMS["minimax"]), _rate_case("minimax")
    batched, plain = _makes("minimax")

    def diverging(make: Callable[..., Any]) -> Callable[..., Any]:
        # only the stochastic runs (batch_size 1) take the step that diverges: the exact-oracle
        # map that sets the steps still contracts
        return lambda **kw: make(**{**kw, "outer_step_size": 40.0} if kw["batch_size"] else kw)

    design = first_design(claim_seed(claim.id), 0, claim.false_fail_rate, "fast")
    errors = []
    for make in (batched, plain):
        with pytest.raises(DivergenceError) as raised:
            measure(claim, case, diverging(make), design)
        errors.append(str(raised.value).replace("_PlainFedNest", "FedNest"))
    with seed_batch([0, 1]), pytest.raises(DivergenceError) as raised:
        measure(claim, case, diverging(batched), design)
    assert "diverged at step" in errors[0]
    assert errors[0] == errors[1] == str(raised.value)


@pytest.mark.parametrize("name", ["bilevel-dy1", "bilevel-dy2", "minimax", "compositional"])
def test_stationarity_norms_are_each_rows_own(name: str) -> None:
    """||grad f(x)||^2 of many rows at once, each the float of its row alone (batched where
    dim_x = dim_y = 1, row by row otherwise)."""
    problem = _problems()[name]
    rows = torch.randn(
        300, problem.dim_x, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )  # type: ignore[attr-defined]
    alone = [float(problem.exact_hypergradient(x).norm() ** 2) for x in 3.0 * rows]  # type: ignore[attr-defined]
    assert stationarity_norms(problem, 3.0 * rows) == alone


@pytest.mark.slow
def test_thorough_check_measurement_is_the_unbatched_one() -> None:
    """The thorough design (K_2 = 16 K_1, 16 replicates at the first look, up to 54): every
    number of the Measurement batched and unbatched (~1 min unbatched on one core)."""
    claim, case = get_claim(_CLAIMS["minimax"]), _rate_case("minimax")
    batched, plain = _makes("minimax")
    design = first_design(claim_seed(claim.id), 0, claim.false_fail_rate, "thorough")
    mine = measure(claim, case, batched, design)
    assert mine.details["replicates"] >= 16
    assert _numbers(mine) == _numbers(measure(claim, case, plain, design))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "seeds", "second_look"),
    [
        ("minimax", (0, 1, 2), [True, True, True]),
        ("compositional", (0, 1, 2, 3), [False, True, False, True]),
    ],
)
def test_thorough_block_of_seeds_is_each_seeds_own(
    kind: str, seeds: tuple[int, ...], second_look: list[bool]
) -> None:
    """On the thorough design in a calibration block: each look stacked over the block's later
    seeds when the first seed reaches it; every Measurement the one the seed gets alone. The
    compositional case's seeds 0 and 2 stop at the first look: the second is stacked for seeds
    1-3 when seed 1 reaches it, seed 2 leaves its part unused and seed 3 is served after it
    (~6-8 s at load 2)."""
    claim, case = get_claim(_CLAIMS[kind]), _rate_case(kind)
    batched, _ = _makes(kind)
    designs = [
        first_design(claim_seed(claim.id), k, claim.false_fail_rate, "thorough") for k in seeds
    ]
    alone = [measure(claim, case, batched, d) for d in designs]
    with seed_batch(list(seeds)) as block:
        together = [measure(claim, case, batched, d) for d in designs]
    assert block.batched_runs == 2  # the two looks
    assert [m.details["replicates"] > m.details["looks"][0] for m in alone] == second_look
    assert [_numbers(m) for m in together] == [_numbers(m) for m in alone]

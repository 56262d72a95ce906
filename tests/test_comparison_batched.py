"""The round-savings comparisons' stacked runs (testbed.algorithms.fednest_stacked,
theory_checks.comparison.batched) against one run per problem.

Every iterate of FedNest on stacked problems must equal, bit for bit, what its unbatched run on
each problem gives; each problem's Reach, Verdict and one-iteration flag equal the unbatched
ones (``repr``) for the three closed-form comparisons, on the families their claims draw
(heterogeneous, homogeneous; dim_x = 2 stacked, dim_x = 3 refused and run one by one); and a
calibration block's per-seed Measurements equal the unbatched check's in full.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any
from typing import NamedTuple

import numpy as np
import pytest
import torch

from problems import ProblemError
from problems import QuadraticBilevel
from problems import from_spec
from testbed.algorithms.aggitd_stacked import check_stackable as check_aggitd
from testbed.algorithms.base import iterate_within_rounds
from testbed.algorithms.fednest_stacked import check_stackable
from testbed.estimators.fednest import outer_smoothness as smoothness
from testbed.federation.replicates import NotBatchable
from theory_checks.claim import Case
from theory_checks.comparison import batched
from theory_checks.comparison import common
from theory_checks.comparison import reaching
from theory_checks.comparison import runs
from theory_checks.comparison.aggitd_fewer_rounds_than_fednest import AGGITD_DROPS_CLIENT
from theory_checks.comparison.runs import COMPARISONS
from theory_checks.decision import first_design
from theory_checks.registry import get_claim
from theory_checks.replicates import seed_batch
from theory_checks.runner import claim_seed
from theory_checks.runner import measure

_HETEROGENEOUS = {
    "family": "QuadraticBilevel.random",
    "n_clients": 3,
    "dim_x": 2,
    "dim_y": 2,
    "condition_number": 2.0,
    "hessian_heterogeneity": 0.1,
    "gradient_heterogeneity": 1.0,
    "mu": 1.0,
    "n_samples": 0,
    "gradient_noise": 0.0,
    "hessian_noise": 0.0,
}
_HOMOGENEOUS = {
    **_HETEROGENEOUS,
    "n_clients": 2,
    "hessian_heterogeneity": 0.0,
    "gradient_heterogeneity": 0.0,
}
# the claims' families: dim_x = 2 is stacked; dim_y = 3 and more clients too
_SPECS = {
    "heterogeneous": _HETEROGENEOUS,
    "homogeneous": _HOMOGENEOUS,
    "wider": {**_HETEROGENEOUS, "n_clients": 5, "dim_y": 3, "condition_number": 3.0},
}


def _rngs(count: int) -> list[np.random.Generator]:
    """Each run's own stream (FedMSA draws its local client from it)."""
    return [np.random.default_rng([99, r]) for r in range(count)]


def _problems(spec: dict[str, Any], count: int, stream: int) -> list[Any]:
    return [runs.draw_problem(spec, np.random.default_rng([stream, j])) for j in range(count)]


def _fednests(problems: list[Any], multiple: float, which: str = "fednest") -> list[Any]:
    """FedNest as the comparisons run it (AggITD's setting), or the candidate ``which``
    (LFedNest, FBO-AggITD, FedMSA) as its claim does."""
    if which in ("lfednest", "aggitd", "fedmsa"):
        comparison, role = COMPARISONS[which], "candidate"
    else:
        comparison, role = COMPARISONS["aggitd"], "baseline"
    make = functools.partial(runs.build_algorithm, comparison.candidate, {})
    return [runs.built(comparison, role, p, make, multiple) for p in problems]


@pytest.mark.parametrize("which", ["fednest", "lfednest", "aggitd", "fedmsa"])
@pytest.mark.parametrize("spec", sorted(_SPECS))
def test_stacked_iterates_are_each_runs(spec: str, which: str) -> None:
    problems = _problems(_SPECS[spec], 5, 3)
    algorithms = _fednests(problems, 2.0, which)  # c = 2: some runs oscillate, others do not
    stacked = batched.stacked_runs(algorithms, problems, _rngs(5))
    alone = [
        iterate_within_rounds(a, p, rng, 10**9)
        for a, p, rng in zip(algorithms, problems, _rngs(5), strict=True)
    ]
    state = stacked.start
    for k in range(6):
        for r, records in enumerate(alone):
            record = next(records)
            assert record.iteration == k
            assert torch.equal(state.x[r], record.x), (spec, k, r)
            inner = record.state.Z if which == "fedmsa" else record.state.y
            assert torch.equal(state.y[r], inner), (spec, k, r)
            assert record.calls.comm_rounds == k * stacked.rounds_per_iteration()
        if k == 3:  # runs leave the stack: the others go on unchanged
            state = stacked.keep(state, [0, 2, 4])
            alone = [alone[0], alone[2], alone[4]]
        state = stacked.step(state)


@pytest.mark.parametrize("key", sorted(COMPARISONS))
@pytest.mark.parametrize("multiple", [1.0, 2.0])
def test_verdicts_equal_the_unbatched_ones(key: str, multiple: float) -> None:
    comparison = COMPARISONS[key]
    spec = _HOMOGENEOUS if key == "lfednest" else _HETEROGENEOUS
    problems = _problems(spec, 8, 7)
    make = functools.partial(runs.build_algorithm, comparison.candidate, {})

    def streams(j: int) -> Any:
        return lambda role: np.random.default_rng([j, int(role == "baseline")])

    alone = [
        runs.compare_at(comparison, p, make, multiple, multiple, streams(j))
        for j, p in enumerate(problems)
    ]
    together = batched.compare_all(
        comparison, problems, make, (multiple, multiple), [streams(j) for j in range(8)]
    )
    assert repr(together) == repr(alone)
    solved = [runs.solved_in_one_iteration(comparison, p) for p in problems]
    assert batched.solved_in_one_iteration(comparison, problems) == solved
    # the one-iteration answers read off FedNest's stacked runs where they are its prescribed
    # run (multiple 1), the others run: the same answers, the same verdicts
    both = batched.compare_and_solve(
        comparison, problems, make, (multiple, multiple), [streams(j) for j in range(8)]
    )
    assert repr(both) == repr((alone, solved))
    stops = {v.baseline.stop for v in alone if v.baseline is not None}
    assert stops  # FedNest ran on some problem (its stacked form was compared)


@pytest.mark.parametrize("which", ["fednest", "lfednest", "aggitd", "fedmsa"])
def test_reaches_with_stops_equal_run_to_target(which: str) -> None:
    problems = _problems(_HETEROGENEOUS, 6, 11)
    algorithms = _fednests(problems, 1.0, which)
    stops = [None, 10.0, 40.0, 100.0, 18.0, 0.5]  # pruned, reached, at once
    alone = [
        reaching.run_to_target(a, p, rng, stop_after=s)
        for a, p, rng, s in zip(algorithms, problems, _rngs(6), stops, strict=True)
    ]
    together = batched.reaches(algorithms, problems, _rngs(6), stops)
    assert repr(together) == repr(alone)
    assert {r.stop for r in alone} >= {"reached", "pruned"}


@pytest.mark.parametrize("which", ["fednest", "aggitd", "fedmsa"])
def test_runs_of_every_step_stop_as_alone(which: str) -> None:
    """Runs of every step multiple in one stack (c = 4 diverges, c = 0.25 is slow), stopping
    at different iterations for every reason: each equal to its unbatched run."""
    problems = _problems(_HETEROGENEOUS, 10, 13)
    multiples = [1.0, 4.0, 0.25, 2.0, 0.5, 1.0, 0.25, 1.0, 0.5, 2.0]
    algorithms = [_fednests([p], c, which)[0] for p, c in zip(problems, multiples, strict=True)]
    stops = [None, None, None, 200.0, None, 30.0, None, 60.0, 10.0, None]
    alone = [
        reaching.run_to_target(a, p, rng, stop_after=s)
        for a, p, rng, s in zip(algorithms, problems, _rngs(10), stops, strict=True)
    ]
    together = batched.reaches(algorithms, problems, _rngs(10), stops)
    assert repr(together) == repr(alone)
    assert len({r.iterations for r in alone}) >= 4  # the runs stop at different iterations


@pytest.mark.parametrize("dim", [1, 2])
def test_norms_of_rows_are_each_rows_norm(dim: int) -> None:
    """The stacked runs take every row's ``||grad h||`` with one call: for ``dim_x <= 2``
    (``MAX_DIM_X``) each is the float the row's own ``norm()`` gives, at every scale."""
    generator = torch.Generator().manual_seed(5)
    for scale in (1e-300, 1e-8, 1.0, 1e8, 1e160):
        rows = torch.randn(4000, dim, dtype=torch.float64, generator=generator) * scale
        together = torch.linalg.vector_norm(rows, dim=1).tolist()
        assert together == [float(row.norm()) for row in rows], scale


def _skewed(problem: Any) -> Any:
    """``problem`` with ``C`` symmetric only to 1e-12: its oracles apply a symmetrised copy."""
    arrays = problem.to_arrays()
    arrays["C"][:, 0, 1] += 1e-12
    skewed = QuadraticBilevel(**arrays)
    assert not skewed.applied_as_stored("C") and problem.applied_as_stored("C")
    return skewed


def test_what_the_stack_does_not_reproduce_is_refused() -> None:
    problems = _problems(_HETEROGENEOUS, 2, 1)
    algorithms = _fednests(problems, 1.0)
    check_stackable(algorithms, problems)
    wide = _problems({**_HETEROGENEOUS, "dim_x": 3}, 2, 1)
    for bad_algorithms, bad_problems in (
        ([dataclasses.replace(a, truncation="random") for a in algorithms], problems),
        ([dataclasses.replace(a, local_steps=2) for a in algorithms], problems),
        ([dataclasses.replace(a, participation=2) for a in algorithms], problems),
        ([algorithms[0], dataclasses.replace(algorithms[1], neumann_terms=2)], problems),
        (_fednests(wide, 1.0), wide),
        (algorithms, [problems[0], _problems(_HOMOGENEOUS, 1, 1)[0]]),
        (algorithms, [problems[0], _skewed(problems[1])]),
    ):
        with pytest.raises(NotBatchable):
            check_stackable(bad_algorithms, bad_problems)
    aggitds = _fednests(problems, 1.0, "aggitd")
    check_aggitd(aggitds, problems)
    for bad in (
        [dataclasses.replace(a, expectation=False) for a in aggitds],
        [dataclasses.replace(a, lower_solver="sgd") for a in aggitds],
        [aggitds[0], dataclasses.replace(aggitds[1], inner_steps=2)],
        [  # the claim's perturbation (a subclass) runs its own code
            runs.built(COMPARISONS["aggitd"], "candidate", p, AGGITD_DROPS_CLIENT.build, 1.0)
            for p in problems
        ],
    ):
        with pytest.raises(NotBatchable):
            check_aggitd(bad, problems)
    # refused problems still get their unbatched runs' numbers
    alone = [
        reaching.run_to_target(a, p, np.random.default_rng(0))
        for a, p in zip(_fednests(wide, 1.0), wide, strict=True)
    ]
    together = batched.reaches(
        _fednests(wide, 1.0), wide, [np.random.default_rng(0)] * 2, [None, None]
    )
    assert repr(together) == repr(alone)


_CLAIMS = {
    "aggitd": ("comparison.aggitd_fewer_rounds_than_fednest", _HETEROGENEOUS),
    "fedmsa": ("comparison.fedmsa_tenfold_fewer_rounds", _HETEROGENEOUS),
    "lfednest": ("comparison.lfednest_fewer_rounds_homogeneous", _HOMOGENEOUS),
}


def _run_rng(design: Any, j: int, role: str) -> np.random.Generator:
    """The stream of problem ``j``'s run of ``role`` (the check's ``_RUN`` key, 2)."""
    return design.rng(2, j, int(role == "baseline"))


def _problem_by_problem(claim: Any, case: Any, design: Any, details: Any) -> list:
    """The check's loop as it ran before the stacked evaluation: each problem drawn and run
    alone (compare_at, solved_in_one_iteration), look by look, at the measured tuning."""
    comparison = COMPARISONS[claim.estimators[0].split("-")[-1]]
    make = functools.partial(runs.build_algorithm, comparison.candidate, {})
    spec = case.problem.spec()
    multiples = (details["candidate_multiple"], details["tuning"]["fednest"]["multiple"])
    looks, rate = details["looks"], design.false_fail_rate
    records: list[dict[str, Any]] = []
    for j in range(looks[-1]):
        if j in looks:
            at_look = common.sequential_binomial(
                sum(r["within_claim"] for r in records), j, len(looks)
            )
            if at_look.lower(rate) >= 0.5 or at_look.upper(rate) < 0.5:
                break
        drawn = runs.draw_problem(spec, design.rng(1, j))
        verdict = runs.compare_at(
            comparison, drawn, make, *multiples, functools.partial(_run_rng, design, j)
        )
        base = verdict.baseline
        records.append(
            {
                "seed": drawn.spec()["seed"],
                "within_claim": verdict.within,
                "fednest_one_iteration": runs.solved_in_one_iteration(comparison, drawn),
                "ratio": verdict.ratio,
                "candidate_rounds": verdict.candidate.rounds,
                "candidate_stop": verdict.candidate.stop,
                "fednest_rounds": None if base is None else base.rounds,
                "fednest_stop": None if base is None else base.stop,
            }
        )
    return records


def _numbers(measurement: Any) -> tuple[str, ...]:
    """Every recorded number of a Measurement (``repr``), and its test's bounds."""
    test = measurement.tests[0]
    rate = 1e-3
    return (
        repr(measurement.measured),
        repr(measurement.series),
        json.dumps(measurement.details, sort_keys=True, default=repr),
        repr((test.evidence.lower(rate), test.evidence.upper(rate))),
    )


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(_CLAIMS))
def test_block_measurements_are_each_seeds_unbatched_ones(key: str) -> None:
    """Seeds 0-2 of a claim's calibration block (every look's problems of every seed
    stacked): each seed's Measurement is what it measures alone, and its problems' records
    are the problem-by-problem loop's (~5-20 s a claim on one core)."""
    claim_id, spec = _CLAIMS[key]
    claim = get_claim(claim_id)
    case = Case(from_spec({**spec, "seed": 0}), {})
    make = functools.partial(runs.build_algorithm, claim.estimators[0], {})
    designs = [
        first_design(claim_seed(claim.id), k, claim.false_fail_rate, "fast") for k in (0, 1, 2)
    ]
    alone = [measure(claim, case, make, d) for d in designs]
    with seed_batch([0, 1, 2]) as block:
        together = [measure(claim, case, make, d) for d in designs]
    assert block.batched_runs >= 1
    assert [_numbers(m) for m in together] == [_numbers(m) for m in alone]
    for design, measurement in zip(designs, together, strict=True):
        details = measurement.details
        assert repr(details["per_problem"]) == repr(
            _problem_by_problem(claim, case, design, details)
        )
    assert len({repr(m.details["per_problem"]) for m in together}) == 3  # the seeds differ
    if key == "fedmsa":  # a seed evaluates the second look's problems (stacked after the first)
        assert any(m.details["problems"] > m.details["looks"][0] for m in together)


class _Verdict(NamedTuple):
    """A fake problem's verdict: only whether its ratio is within the claim."""

    within: bool


@pytest.mark.parametrize("looks", [[4], [3, 7], [2, 5, 9], [1, 2, 3, 10]])
def test_the_evaluation_reaches_every_problem_the_check_reaches(
    looks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check's loop (``measure_rounds``) records problem ``j`` from
    :func:`batched.evaluate_until_decided`'s evaluation of it, and has no other path: the
    evaluation must evaluate exactly the problems the loop reaches, ``j < looks[-1]`` with no
    look ``l <= j`` decided on the problems before ``l``. Checked on several looks, decision
    rules (never, at each look, the check's own Clopper-Pearson test, a clear majority) and checks
    stacked as in a calibration block (each its own verdicts: mostly within, mostly not, split,
    all, none), on fake problems and verdicts: what is under test is which problems are
    evaluated, not their runs."""
    checks, per_check = 5, looks[-1]
    rng = np.random.default_rng(len(looks))
    share = np.array([[0.9], [0.1], [0.5], [1.0], [0.0]])
    withins = rng.random((checks, per_check)) < share
    monkeypatch.setattr(batched, "draw_problems", lambda spec, streams: list(streams))
    monkeypatch.setattr(
        batched,
        "compare_and_solve",
        lambda comparison, problems, build, multiples, rngs: (
            [_Verdict(bool(withins[c, j])) for c, j, _ in problems],
            [False] * len(problems),
        ),
    )
    streams: list[Any] = [
        (c, j, role)
        for c in range(checks)
        for j in range(per_check)
        for role in ("problem", "candidate", "baseline")
    ]

    def clopper_pearson(successes: int, trials: int) -> bool:  # the check's test at 1e-3
        at_look = common.sequential_binomial(successes, trials, len(looks))
        return at_look.lower(1e-3) >= 0.5 or at_look.upper(1e-3) < 0.5

    rules: dict[str, Any] = {
        "never": lambda successes, trials: False,
        "clopper-pearson": clopper_pearson,
        "clear majority": lambda successes, trials: abs(successes - trials / 2) > trials / 4,
    }
    for look in looks:  # a rule that decides at each look
        rules[f"at {look}"] = lambda successes, trials, look=look: trials == look
    stops = set()
    for name, decided in rules.items():
        out = batched.evaluate_until_decided(
            COMPARISONS["aggitd"], {}, runs.build_algorithm, (1.0, 1.0), streams, looks, decided
        )
        for c in range(checks):
            reached = []
            for j in range(per_check):  # the check's loop
                if j in looks and decided(int(withins[c, :j].sum()), j):
                    break
                reached.append(j)
            stops.add(len(reached))
            mine = out[3 * per_check * c : 3 * per_check * (c + 1)]
            evaluated = [j for j in range(per_check) if mine[3 * j] is not None]
            assert evaluated == reached, (name, c)
            assert all(mine[3 * j + k] is None for j in range(per_check) for k in (1, 2))
            assert [mine[3 * j].verdict.within for j in reached] == withins[c, reached].tolist()
    assert stops >= set(looks)  # every look stopped some check


def test_outer_smoothness_is_computed_once_per_problem() -> None:
    """``runs.outer_smoothness`` keeps each problem's ``L_h`` (the tuned steps read it at every
    run's start): the kept value is the one FedNest's own reading gives, bit for bit, on
    problems of every family the claims draw."""
    for name, spec in sorted(_SPECS.items()):
        for problem in _problems(spec, 4, 11):
            kept = runs.outer_smoothness(problem)
            assert repr(kept) == repr(smoothness(problem)), name
            assert runs.outer_smoothness(problem) is kept


def test_outer_smoothness_read_together_is_each_problems() -> None:
    """``runs.read_outer_smoothness`` reads the ``L_h`` of many problems together (their
    exact hypergradients in one call per point, their Hessians' norms in one): each is FedNest's
    own reading of the problem alone, bit for bit, for ``dim_x`` 1-3 and problems of several
    shapes in one call."""
    problems = [
        problem
        for dim in (1, 2, 3)
        for name, spec in sorted(_SPECS.items())
        for problem in _problems({**spec, "dim_x": dim}, 12, 17)
    ]
    runs.read_outer_smoothness(problems)
    for problem in problems:
        assert repr(runs.outer_smoothness(problem)) == repr(smoothness(problem)), problem.id


def test_draw_problem_redraws_what_has_no_outer_minimizer() -> None:
    """``draw_problem`` checks a draw's outer Hessian only (``strongly_convex_outer_hessian``),
    not its minimiser: the same problems as a redraw on ``outer_minimizer`` raising, on a family
    where 7-24% of draws have none (the cross scale 1, 2, 4)."""
    for scale in (1.0, 2.0, 4.0):
        spec = {**_HETEROGENEOUS, "cross_scale": scale}
        redrawn = 0
        for stream in range(25):
            rng = np.random.default_rng([stream, 7])
            for _ in range(50):
                expected = from_spec({**spec, "seed": int(rng.integers(2**31))})
                try:
                    expected.outer_minimizer()
                    break
                except ProblemError:
                    redrawn += 1
            drawn = runs.draw_problem(spec, np.random.default_rng([stream, 7]))
            assert drawn.id == expected.id
        assert redrawn > 0  # the family has draws without a minimiser

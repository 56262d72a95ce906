r"""The round-savings comparisons on many problems at once: the runs stacked.

A comparison's check (:func:`theory_checks.comparison.common.measure_rounds`) draws problems
``P_0, P_1, ...`` of a family and, on each, runs the candidate and FedNest to the target
(:func:`~theory_checks.comparison.runs.compare_at`), each run with its own stopping. Both run
with exact oracles and every client, FedNest and FBO-AggITD in their deterministic-sum forms
(LFedNest's is deterministic too): they draw nothing, so one algorithm's runs on
``P_0, ..., P_{n-1}`` can be one batched run over the stacked problems
(:func:`stacked_runs`: :class:`~testbed.algorithms.fednest_stacked.StackedFedNest` for FedNest
and LFedNest, :class:`~testbed.algorithms.aggitd_stacked.StackedFBOAggITD`), each row stopped
as :func:`~theory_checks.comparison.reaching.run_to_target` stops it (the one definition,
:class:`~theory_checks.comparison.reaching.Reaching`; a stopped row leaves the batch), and so can
the one iteration that says whether FedNest solves a problem at once
(:func:`~theory_checks.comparison.runs.solved_in_one_iteration`). :func:`compare_all` is
:func:`~theory_checks.comparison.runs.compare_at` of every problem in that form. FedMSA's runs
run stacked too, each drawing its local client from its own generator
(:class:`~testbed.algorithms.fedmsa_stacked.StackedFedMSA`).

Bit for bit: each row is its unbatched run's (tests/test_comparison_batched.py compares every
iterate, :class:`~theory_checks.comparison.reaching.Reach` and Measurement). What the stack does
not reproduce exactly (:class:`~testbed.federation.replicates.NotBatchable`: a perturbed or
mutated algorithm, a problem with ``dim_x > 2``, ...) or any error of the stacked run runs the
problems one by one with the unbatched code, which then raises what it raises.

:func:`evaluate_until_decided` evaluates a check's problems look by look; in a calibration
block (:func:`theory_checks.replicates.seed_batch`) every seed's problems of a look are one
such batch (through :func:`~theory_checks.replicates.replicated_streams`: each seed's problem
``j`` is drawn from its own ``design.rng(_PROBLEM, j)``, as its unbatched check draws it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import NamedTuple

import numpy as np

from problems import QuadraticBilevel
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.aggitd_stacked import StackedFBOAggITD
from testbed.algorithms.fedmsa import FedMSA
from testbed.algorithms.fedmsa_stacked import StackedFedMSA
from testbed.algorithms.fednest_stacked import StackedFedNest
from testbed.algorithms.stacked import StackedRuns
from theory_checks.comparison import reaching
from theory_checks.comparison import runs
from theory_checks.comparison.reaching import CAP
from theory_checks.comparison.reaching import ROUND_BUDGET
from theory_checks.comparison.reaching import TARGET
from theory_checks.comparison.reaching import Reach
from theory_checks.comparison.reaching import Reaching
from theory_checks.comparison.runs import Comparison
from theory_checks.comparison.runs import Verdict


def stacked_runs(
    algorithms: Sequence[Any], problems: Sequence[Any], rngs: Sequence[np.random.Generator]
) -> Any:
    """The runs of ``algorithms[r]`` on ``problems[r]`` (drawing from ``rngs[r]``) stacked:
    FBO-AggITD's (:class:`~testbed.algorithms.aggitd_stacked.StackedFBOAggITD`), FedMSA's
    (:class:`~testbed.algorithms.fedmsa_stacked.StackedFedMSA`, whose runs draw their local
    client) or FedNest's and LFedNest's (:class:`~testbed.algorithms.fednest_stacked.
    StackedFedNest`); raises :class:`~testbed.federation.replicates.NotBatchable` for what none
    reproduces."""
    if algorithms and isinstance(algorithms[0], FBOAggITD):
        return StackedFBOAggITD(algorithms, problems)
    if algorithms and isinstance(algorithms[0], FedMSA):
        # on copies of the generators: an unbatched rerun draws from the untouched ones (the
        # other stacks draw nothing)
        return StackedFedMSA(algorithms, problems, copy.deepcopy(list(rngs)))
    return StackedFedNest(algorithms, problems)


def _stacked_reaches(
    algorithms: Sequence[Any],
    problems: Sequence[Any],
    rngs: Sequence[np.random.Generator],
    stop_afters: Sequence[float | None],
) -> list[Reach]:
    """:func:`~theory_checks.comparison.reaching.run_to_target` of each run, all as one stacked
    run (:func:`stacked_runs`; raises :class:`NotBatchable` when it cannot be)."""
    stacked: StackedRuns = stacked_runs(algorithms, problems, rngs)
    per_iteration = stacked.rounds_per_iteration()
    progress = [Reaching(reaching.limit_for(s)) for s in stop_afters]
    results: list[Reach | None] = [None] * len(problems)
    active = list(range(len(problems)))
    state = stacked.start
    iteration = rounds = 0
    while True:
        points = state.x.unbind()
        exact = QuadraticBilevel.exact_hypergradients([problems[r] for r in active], points)
        for position, r in enumerate(active):
            norm = float(exact[position].norm())
            stop = progress[r].observe(iteration, float(rounds), points[position], norm)
            if stop is not None:
                results[r] = progress[r].reach(stop)
        going = [position for position, r in enumerate(active) if results[r] is None]
        if not going:
            break
        if rounds >= ROUND_BUDGET:  # the budget ends every run still going
            for position in going:
                results[active[position]] = progress[active[position]].reach("budget")
            break
        if len(going) < len(active):
            state = stacked.keep(state, going)
            active = [active[position] for position in going]
        state = stacked.step(state)
        iteration += 1
        rounds += per_iteration
    return [r for r in results if r is not None]


def reaches(
    algorithms: Sequence[Any],
    problems: Sequence[Any],
    rngs: Sequence[np.random.Generator],
    stop_afters: Sequence[float | None],
) -> list[Reach]:
    """``run_to_target(algorithms[i], problems[i], rngs[i], stop_after=stop_afters[i])`` for
    every ``i``: stacked where that is exact, else (or when the stacked run fails) one by
    one."""
    if not problems:
        return []
    try:  # the stacks leave the generators untouched (stacked_runs)
        return _stacked_reaches(algorithms, problems, rngs, stop_afters)
    except Exception:  # noqa: BLE001 - not stackable: the unbatched runs, which raise as they do
        return [
            reaching.run_to_target(a, p, rng, stop_after=s)
            for a, p, rng, s in zip(algorithms, problems, rngs, stop_afters, strict=True)
        ]


def solved_in_one_iteration(comparison: Comparison, problems: Sequence[Any]) -> list[bool]:
    """:func:`~theory_checks.comparison.runs.solved_in_one_iteration` of each problem: FedNest
    at its prescribed step, one iteration of every problem stacked where that is exact."""
    if not problems:
        return []
    try:  # the prescribed 1 / L_h given as each run's step: the float FedNest reads itself
        algorithms = [
            runs.build_algorithm(
                runs.BASELINE,
                comparison.baseline_config,
                outer_step_size=1.0 / runs.outer_smoothness(problem),
            )
            for problem in problems
        ]
        stacked = StackedFedNest(algorithms, problems)  # draws nothing
        after = stacked.step(stacked.start)
    except Exception:  # noqa: BLE001 - not stackable: the unbatched iteration
        return [runs.solved_in_one_iteration(comparison, p) for p in problems]
    starts = QuadraticBilevel.exact_hypergradients(problems, stacked.start.x.unbind())
    firsts = QuadraticBilevel.exact_hypergradients(problems, after.x.unbind())
    return [
        float(first.norm()) <= TARGET * float(start.norm())
        for start, first in zip(starts, firsts, strict=True)
    ]


def compare_all(
    comparison: Comparison,
    problems: Sequence[Any],
    candidate_build: Callable[..., Any],
    multiples: tuple[float, float],
    rngs_for: Sequence[Callable[[str], np.random.Generator]],
) -> list[Verdict]:
    """:func:`~theory_checks.comparison.runs.compare_at` of every problem (problem ``i`` with
    the streams ``rngs_for[i]``, at the step multiples ``(candidate, FedNest)``), FedNest's
    runs stacked (:func:`reaches`), each with the stop
    ``compare_at`` gives it; the candidates' too where the stack runs them (FBO-AggITD,
    LFedNest, FedMSA), else one by one (a perturbation, a mutant)."""
    bound, count = comparison.bound, len(problems)

    def run(role: str, indices: list[int], stops: Sequence[float | None]) -> dict[int, Reach]:
        multiple = multiples[0] if role == "candidate" else multiples[1]
        algorithms = [
            runs.built(comparison, role, problems[i], candidate_build, multiple) for i in indices
        ]
        found = reaches(
            algorithms,
            [problems[i] for i in indices],
            [rngs_for[i](role) for i in indices],
            stops,
        )
        return dict(zip(indices, found, strict=True))

    everyone = list(range(count))
    if bound >= 1.0:
        base = run("baseline", everyone, [None] * count)
        cand = run("candidate", everyone, [bound * base[i].capped for i in everyone])
        return [runs.verdict_of(bound, cand[i], base[i]) for i in everyone]
    cand = run("candidate", everyone, [bound * CAP] * count)
    reached = [i for i in everyone if cand[i].rounds is not None]
    base = run("baseline", reached, [cand[i].capped / bound for i in reached])
    return [runs.verdict_of(bound, cand[i], base.get(i)) for i in everyone]


class Evaluated(NamedTuple):
    """One drawn problem of a comparison's check: the problem, its verdict and whether FedNest
    solves it in one outer iteration."""

    problem: Any
    verdict: Verdict
    solved_at_once: bool


def evaluate_until_decided(
    comparison: Comparison,
    spec: dict[str, Any],
    candidate_build: Callable[..., Any],
    multiples: tuple[float, float],
    streams: Sequence[np.random.Generator],
    looks: Sequence[int],
    decided: Callable[[int, int], bool],
) -> list[Evaluated | None]:
    """The problems of one or more checks of ``spec``'s family, evaluated look by look until
    each check's look decides, every check's problems of a look together.

    ``streams`` holds, check after check, per problem ``j < looks[-1]`` its draw's stream and
    its candidate's and FedNest's run streams (three in a row, the layout
    :func:`~theory_checks.replicates.replicated_streams` serves). A check evaluates problems
    ``0..looks[0]-1``, then at each look ``j`` (``decided(successes, j)``, its problems
    within the claim so far) stops or evaluates up to the next look, as
    :func:`theory_checks.comparison.common._draw_until_decided`'s loop does. One
    :class:`Evaluated` per problem evaluated, at the first of its three positions; ``None``
    elsewhere."""
    per_check = 3 * looks[-1]
    checks = len(streams) // per_check
    out: list[Evaluated | None] = [None] * len(streams)
    withins: list[list[bool]] = [[] for _ in range(checks)]
    going = list(range(checks))
    bounds = sorted({0, *looks})
    for start, end in zip(bounds, [*bounds[1:], looks[-1]], strict=True):
        if start >= looks[-1]:
            break
        if start in looks:
            going = [c for c in going if not decided(sum(withins[c]), start)]
        pairs = [(c, j) for c in going for j in range(start, end)]
        if not pairs:
            continue
        at = [c * per_check + 3 * j for c, j in pairs]
        problems = [runs.draw_problem(spec, streams[i]) for i in at]
        rngs = [{"candidate": streams[i + 1], "baseline": streams[i + 2]}.__getitem__ for i in at]
        verdicts = compare_all(comparison, problems, candidate_build, multiples, rngs)
        solved = solved_in_one_iteration(comparison, problems)
        for (c, _), i, problem, verdict, at_once in zip(
            pairs, at, problems, verdicts, solved, strict=True
        ):
            out[i] = Evaluated(problem, verdict, at_once)
            withins[c].append(verdict.within)
    return out


__all__ = [
    "Evaluated",
    "compare_all",
    "evaluate_until_decided",
    "reaches",
    "stacked_runs",
    "solved_in_one_iteration",
]

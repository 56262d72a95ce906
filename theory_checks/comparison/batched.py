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
(:func:`~theory_checks.comparison.runs.solved_in_one_iteration`), which is read off FedNest's
stacked run where that run is FedNest at its prescribed step (:func:`compare_and_solve`).
:func:`compare_all` is :func:`~theory_checks.comparison.runs.compare_at` of every problem in
that form. FedMSA's runs run stacked too, each drawing its local client from its own generator
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
import torch

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


#: A run's raw ``||grad h(x_0)||`` and ``||grad h(x_1)||`` (what :func:`solved_in_one_iteration`
#: compares), or ``None`` when it did not run its first iteration in the stack.
Opening = tuple[float, float] | None


def _stacked_reaches(
    algorithms: Sequence[Any],
    problems: Sequence[Any],
    rngs: Sequence[np.random.Generator],
    stop_afters: Sequence[float | None],
) -> tuple[list[Reach], list[Opening]]:
    """:func:`~theory_checks.comparison.reaching.run_to_target` of each run, all as one stacked
    run (:func:`stacked_runs`; raises :class:`NotBatchable` when it cannot be), and each run's
    :data:`Opening`.

    Every iteration observes every row (:meth:`Reaching.observe
    <theory_checks.comparison.reaching.Reaching.observe>`, the one rule) with one call for their
    exact hypergradients (per problem, as :meth:`~problems.QuadraticBilevel.exact_hypergradient`
    computes each), one for their norms and one for their iterates' finiteness: a norm of
    ``dim_x <= 2`` entries is the same float in a batch as alone (``MAX_DIM_X``; the tests
    compare both). A stopped row leaves the stack
    (:meth:`~testbed.algorithms.stacked.StackedRuns.keep`)."""
    stacked: StackedRuns = stacked_runs(algorithms, problems, rngs)
    per_iteration = stacked.rounds_per_iteration()
    progress = [Reaching(reaching.limit_for(s)) for s in stop_afters]
    results: list[Reach | None] = [None] * len(problems)
    norms_seen: list[list[float]] = [[] for _ in problems]
    active = list(range(len(problems)))  # the run of each row of the stack
    state = stacked.start
    iteration = rounds = 0
    while True:
        exact = QuadraticBilevel.exact_hypergradients([problems[r] for r in active], state.x)
        norms = torch.linalg.vector_norm(torch.stack(exact), dim=1).tolist()
        finite = torch.isfinite(state.x).all(dim=1).tolist()
        going: list[int] = []  # the rows that go on
        for position, (r, norm, ok) in enumerate(zip(active, norms, finite, strict=True)):
            if iteration < 2:
                norms_seen[r].append(norm)
            stop = progress[r].observe(iteration, float(rounds), norm, ok)
            if stop is None:
                going.append(position)
            else:
                results[r] = progress[r].reach(stop)
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
    openings: list[Opening] = [(n[0], n[1]) if len(n) == 2 else None for n in norms_seen]
    return [r for r in results if r is not None], openings


def _reaches_and_openings(
    algorithms: Sequence[Any],
    problems: Sequence[Any],
    rngs: Sequence[np.random.Generator],
    stop_afters: Sequence[float | None],
) -> tuple[list[Reach], list[Opening]]:
    """:func:`reaches` and, where the runs were stacked, each run's :data:`Opening` (``None``
    for every run when they ran one by one)."""
    if not problems:
        return [], []
    try:  # the stacks leave the generators untouched (stacked_runs)
        return _stacked_reaches(algorithms, problems, rngs, stop_afters)
    except Exception:  # noqa: BLE001 - not stackable: the unbatched runs, which raise as they do
        alone = [
            reaching.run_to_target(a, p, rng, stop_after=s)
            for a, p, rng, s in zip(algorithms, problems, rngs, stop_afters, strict=True)
        ]
        return alone, [None] * len(alone)


def reaches(
    algorithms: Sequence[Any],
    problems: Sequence[Any],
    rngs: Sequence[np.random.Generator],
    stop_afters: Sequence[float | None],
) -> list[Reach]:
    """``run_to_target(algorithms[i], problems[i], rngs[i], stop_after=stop_afters[i])`` for
    every ``i``: stacked where that is exact, else (or when the stacked run fails) one by
    one."""
    return _reaches_and_openings(algorithms, problems, rngs, stop_afters)[0]


def _prescribed(comparison: Comparison, problem: Any) -> Any:
    """FedNest at its prescribed step ``1 / L_h`` given as its step: the float FedNest reads
    itself (:func:`~theory_checks.comparison.runs.solved_in_one_iteration`'s run)."""
    return runs.build_algorithm(
        runs.BASELINE,
        comparison.baseline_config,
        outer_step_size=1.0 / runs.outer_smoothness(problem),
    )


def solved_in_one_iteration(
    comparison: Comparison, problems: Sequence[Any], known: Sequence[bool | None] = ()
) -> list[bool]:
    """:func:`~theory_checks.comparison.runs.solved_in_one_iteration` of each problem: FedNest
    at its prescribed step, one iteration of every problem stacked where that is exact.
    ``known[i]``, where given and not ``None``, is problem ``i``'s answer already (read off a
    stacked run of that very FedNest, :func:`compare_and_solve`): only the others run."""
    answers = [None if i >= len(known) else known[i] for i in range(len(problems))]
    todo = [i for i, answer in enumerate(answers) if answer is None]
    if not todo:
        return [bool(answer) for answer in answers]
    rest = [problems[i] for i in todo]
    runs.read_outer_smoothness(rest)
    try:
        stacked = StackedFedNest([_prescribed(comparison, p) for p in rest], rest)  # draws nothing
        after = stacked.step(stacked.start)
    except Exception:  # noqa: BLE001 - not stackable: the unbatched iteration
        found = [runs.solved_in_one_iteration(comparison, p) for p in rest]
    else:
        starts = QuadraticBilevel.exact_hypergradients(rest, stacked.start.x.unbind())
        firsts = QuadraticBilevel.exact_hypergradients(rest, after.x.unbind())
        found = [
            float(first.norm()) <= TARGET * float(start.norm())
            for start, first in zip(starts, firsts, strict=True)
        ]
    for i, answer in zip(todo, found, strict=True):
        answers[i] = answer
    return [bool(answer) for answer in answers]


def _compare(
    comparison: Comparison,
    problems: Sequence[Any],
    candidate_build: Callable[..., Any],
    multiples: tuple[float, float],
    rngs_for: Sequence[Callable[[str], np.random.Generator]],
    known: list[bool | None] | None = None,
) -> list[Verdict]:
    """:func:`compare_all`; with ``known``, sets ``known[i]`` to problem ``i``'s one-iteration
    answer where FedNest's stacked run is FedNest at its prescribed step (the tuned ``c = 1``
    FedNest usually selects: the algorithms compare equal, so its first iteration is the same
    arithmetic on the same floats) and went past its first iteration."""
    bound, count = comparison.bound, len(problems)
    runs.read_outer_smoothness(problems)  # every run's step reads L_h

    def run(role: str, indices: list[int], stops: Sequence[float | None]) -> dict[int, Reach]:
        multiple = multiples[0] if role == "candidate" else multiples[1]
        algorithms = [
            runs.built(comparison, role, problems[i], candidate_build, multiple) for i in indices
        ]
        found, openings = _reaches_and_openings(
            algorithms,
            [problems[i] for i in indices],
            [rngs_for[i](role) for i in indices],
            stops,
        )
        if known is not None and role == "baseline":
            for i, algorithm, opening in zip(indices, algorithms, openings, strict=True):
                if opening is not None and algorithm == _prescribed(comparison, problems[i]):
                    known[i] = opening[1] <= TARGET * opening[0]
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
    return _compare(comparison, problems, candidate_build, multiples, rngs_for)


def compare_and_solve(
    comparison: Comparison,
    problems: Sequence[Any],
    candidate_build: Callable[..., Any],
    multiples: tuple[float, float],
    rngs_for: Sequence[Callable[[str], np.random.Generator]],
) -> tuple[list[Verdict], list[bool]]:
    """:func:`compare_all` and :func:`solved_in_one_iteration` of every problem, the latter
    read off FedNest's stacked runs where they are its one iteration (:func:`_compare`); the
    other problems run their one iteration stacked."""
    known: list[bool | None] = [None] * len(problems)
    verdicts = _compare(comparison, problems, candidate_build, multiples, rngs_for, known)
    return verdicts, solved_in_one_iteration(comparison, problems, known)


def draw_problems(spec: dict[str, Any], rngs: Sequence[np.random.Generator]) -> list[Any]:
    """:func:`~theory_checks.comparison.runs.draw_problem` of ``spec`` from each generator:
    a quadratic bilevel family's draws together, bit for bit
    (:meth:`~problems.QuadraticBilevel.drawn_with_minimizer`, as many tries as
    ``draw_problem``, :data:`~theory_checks.comparison.runs.DRAW_TRIES`); any other family, or
    on any error, one by one from the generators' states before, which then raises what it
    raises."""
    states = [rng.bit_generator.state for rng in rngs]
    try:
        return QuadraticBilevel.drawn_with_minimizer(spec, rngs, tries=runs.DRAW_TRIES)
    except Exception:  # noqa: BLE001 - not drawn together: the unbatched draws
        for rng, state in zip(rngs, states, strict=True):
            rng.bit_generator.state = state
        return [runs.draw_problem(spec, rng) for rng in rngs]


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
        problems = draw_problems(spec, [streams[i] for i in at])
        rngs = [{"candidate": streams[i + 1], "baseline": streams[i + 2]}.__getitem__ for i in at]
        verdicts, solved = compare_and_solve(comparison, problems, candidate_build, multiples, rngs)
        for (c, _), i, problem, verdict, at_once in zip(
            pairs, at, problems, verdicts, solved, strict=True
        ):
            out[i] = Evaluated(problem, verdict, at_once)
            withins[c].append(verdict.within)
    return out


__all__ = [
    "Evaluated",
    "compare_all",
    "compare_and_solve",
    "draw_problems",
    "evaluate_until_decided",
    "reaches",
    "stacked_runs",
    "solved_in_one_iteration",
]

"""A statistical claim checked under a block of calibration seeds, its cases drawn once.

``testbed calibrate`` checks a claim under calibration seeds ``0..K-1``
(:mod:`theory_checks.calibration`); every seed's run draws the same cases (the search is seeded
by the claim's id, :func:`~theory_checks.runner.drawn_cases`) and seed ``k`` changes only the
Monte Carlo streams. :func:`check_block` therefore runs hypothesis's search once, for the
block's first seed, recording the cases it is handed and whether that seed could measure each
(valid or rejected, all the search learns from a statistical claim's check: it never raises),
and checks every later seed on the recorded cases, in the same order, with the runner's own
:class:`~theory_checks.runner.CaseTally` (its decisions, confirmations and verdict are the
unbatched run's code, not a copy). A later seed whose measurability agrees with the first's at
every recorded case would have been handed the same cases by its own search, so its result is
its unbatched run's; the margins of the claim's hypotheses on a case are computed once for the
block. A seed that disagrees somewhere (a case it cannot measure where the first seed could,
or the reverse), or whose check raises, is checked by its own search, as outside a block. The
recorded cases are kept for the later blocks of the same claim in the process (the last
``SEARCHES_KEPT`` searches), whose seeds are all replayed on them: one search per claim and
process, not per block.

Inside :func:`theory_checks.replicates.seed_batch`, the checks' replicated computations are in
addition stacked across the block's seeds (:func:`~theory_checks.replicates.replicated`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

from hypothesis import assume

from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.hypotheses import HypothesisMargin
from theory_checks.recently_used import RecentlyUsed
from theory_checks.runner import CaseTally
from theory_checks.runner import ClaimResult
from theory_checks.runner import ClaimRun
from theory_checks.runner import OutsideHypotheses
from theory_checks.runner import check_drawn_cases
from theory_checks.runner import check_run
from theory_checks.runner import drawn_cases
from theory_checks.runner import hypothesis_margins
from theory_checks.runner import over_readings
from theory_checks.runner import search


class DrawnCase:
    """A case the block's search drew, whether the first seed could measure it, and the
    claim's hypotheses evaluated on it once for every seed (:meth:`margins`)."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.measurable = True
        self._margins: list[HypothesisMargin] | OutsideHypotheses | None = None

    def margins(self, claim: Claim, case: Case) -> list[HypothesisMargin]:
        """:func:`~theory_checks.runner.hypothesis_margins` of this case, computed at the first
        call (it raises :class:`~theory_checks.runner.OutsideHypotheses` at every call when
        the case is outside them)."""
        if self._margins is None:
            try:
                self._margins = hypothesis_margins(claim, case)
            except OutsideHypotheses as outside:
                self._margins = outside
        if isinstance(self._margins, OutsideHypotheses):
            raise OutsideHypotheses(self._margins.margins)
        return self._margins


def check_block(run: ClaimRun, seeds: Sequence[int]) -> list[ClaimResult]:
    """``run`` under each calibration seed of ``seeds``: what
    :func:`~theory_checks.runner.check_run` gives for that seed, one search for the block (a
    claim with readings: one per reading). A deterministic claim has nothing to share: each
    seed is checked alone."""
    if not run.claim.statistical:
        return [check_run(run.seeded(seed)) for seed in seeds]
    if not run.claim.readings:
        return _check_drawn_block(run, seeds, run.claim, None)
    per_reading = [
        _check_drawn_block(run.under(r), seeds, run.claim, r.name) for r in run.claim.readings
    ]
    return [over_readings(run.claim, list(results)) for results in zip(*per_reading, strict=True)]


#: How many searches (one claim's drawn cases under one reading) a process keeps for its later
#: blocks. Why 4: a calibration runs one claim's blocks after one another (with at most 2
#: readings), so its blocks find their cases here, while the cases' problems kept stay few
#: (a problem's tables of minibatch means, PerClientQuadratic's, are up to ~40 MB).
SEARCHES_KEPT = 4

# by (the claim's identity, reading, profile, builder, estimator): the claim object itself is
# kept with its cases, so that its identity cannot pass to another claim while the entry lives
_SEARCHES: RecentlyUsed[tuple[Claim, list[DrawnCase]]] = RecentlyUsed(SEARCHES_KEPT)


def _check_drawn_block(
    run: ClaimRun, seeds: Sequence[int], claim: Claim, reading: str | None
) -> list[ClaimResult]:
    """:func:`check_block` of ``claim`` without readings or under ``reading`` (``run`` is that):
    :func:`~theory_checks.runner.check_drawn_cases` per seed. The cases of an earlier block's
    search of the same run in this process are replayed (:func:`_replayed`, as for every seed
    but a block's first), not searched for again."""
    key = (id(claim), reading, run.profile, run.make, run.estimator)
    if key in _SEARCHES:
        _, drawn = _SEARCHES.get(key)
        return [_replayed(run.seeded(seed), drawn) for seed in seeds]
    searched = _searched_block(run, seeds)
    _SEARCHES.put(key, (claim, searched.cases))
    return searched.results


class _Searched(NamedTuple):
    cases: list[DrawnCase]
    results: list[ClaimResult]


def _searched_block(run: ClaimRun, seeds: Sequence[int]) -> _Searched:
    """The block's first seed checked by its own search, which records the cases it draws; the
    later seeds replayed on them."""
    first = CaseTally(run.seeded(seeds[0]))
    drawn: list[DrawnCase] = []

    @drawn_cases(run.claim, run.profile)
    def property_(case: Case) -> None:
        seen = DrawnCase(case)
        drawn.append(seen)
        seen.measurable = first.visit(case, seen.margins)
        if not seen.measurable:
            assume(False)

    start = time.perf_counter()
    search(property_, first.failed)
    results = [first.result(time.perf_counter() - start)]
    for seed in seeds[1:]:
        results.append(_replayed(run.seeded(seed), drawn))
    return _Searched(drawn, results)


def _replayed(run: ClaimRun, drawn: list[DrawnCase]) -> ClaimResult:
    """``run`` on the first seed's cases ``drawn``; its own search (:func:`~theory_checks.
    runner.check_drawn_cases`) where that search could have drawn others."""
    tally = CaseTally(run)
    start = time.perf_counter()
    try:
        same = all(tally.visit(d.case, d.margins) == d.measurable for d in drawn)
    except Exception:  # noqa: BLE001 - the seed's own search raises (or not) as it would alone
        same = False
    if not same:
        return check_drawn_cases(run)
    return tally.result(time.perf_counter() - start)

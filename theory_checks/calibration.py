"""Calibration of statistical claims: their observed false-failure rate, measured.

A statistical claim states a family-wise false-failure rate (:mod:`theory_checks.decision`).
:func:`calibrate_claim` runs it on the correct implementation under ``K`` independent Monte Carlo
seeds (the same drawn cases; calibration seed ``k`` changes every stream the check draws) and
counts the verdicts. For a claim the testbed has established to hold, every "fails as stated" is
a false failure: the observed rate ``f / K`` with its exact (Clopper-Pearson) 95% interval is
*consistent* with the stated rate when the interval's lower end does not exceed it (the data do
not show more false failures than stated). That is all a few seeds can show: 0 false failures
in 20 seeds bounds the rate at 16.8% (the interval's upper end), not at the stated 1e-3, and
bounding it at 1e-3 takes 3688 clean seeds (two-sided 95% interval)
(:func:`seeds_to_bound`). The table says both. For a claim established to fail, the fraction of
seeds that confirm the refutation is the check's power on it. Undecided runs are counted apart:
they are neither false failures nor decisions.

Results: ``calibration/<claim>.json`` (one record per seed, appended as each finishes, so an
interrupted calibration resumes) and ``calibration/summary.json``.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import math
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from results_format.layout import CALIBRATION
from results_format.layout import SUMMARY
from results_format.locks import holding
from results_format.records import calibration_record_problem
from results_format.records import usable_calibration_runs
from results_format.resume import read_fresh
from results_format.resume import write_json
from results_format.validation import seal
from theory_checks.claim import Claim
from theory_checks.claim_batch import RegisteredClaimTask
from theory_checks.claim_batch import plugin_failures_named
from theory_checks.decision import clopper_pearson
from theory_checks.replicates import seed_batch
from theory_checks.runner import ClaimResult
from theory_checks.runner import ClaimRun
from theory_checks.runner import Profile
from theory_checks.runner import claim_fingerprint
from theory_checks.runner import run_claim
from theory_checks.seed_blocks import check_block
from theory_checks.units import driver_dtype
from theory_checks.units import run_in_process


def _warn(message: str) -> None:
    print(f"testbed: warning: {message}", file=sys.stderr)


# Why 95%: the calibration table's interval is a report to a reader (how precisely K seeds pin
# the rate down), not a decision on a paper's claim.
CALIBRATION_CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class CalibrationSummary:
    """Verdict counts of one claim over ``seeds`` calibration seeds.

    Attributes:
        false_failures: seeds on which a claim expected to hold was recorded "fails as stated".
        refuted: seeds on which a claim expected to fail was (its power on the refutation).
        undecided: seeds whose verdict was "undecided".
        rate_low, rate_high: the 95% Clopper-Pearson interval of the observed false-failure rate
            (of a holds claim) or of the refutation rate (of a fails claim).
        consistent: for a holds claim, ``rate_low <= stated_rate``; for a fails claim, whether
            every decided seed refuted it.
    """

    claim: str
    expected: str
    profile: str
    seeds: int
    stated_rate: float
    false_failures: int
    refuted: int
    undecided: int
    verdicts: dict[str, int]
    rate_low: float
    rate_high: float
    consistent: bool
    seconds: float


def seeds_to_bound(rate: float, confidence: float = CALIBRATION_CONFIDENCE) -> int:
    """Clean seeds (no false failure) whose two-sided Clopper-Pearson interval at
    ``confidence`` ends at or below ``rate``: the smallest ``K`` with ``1 - (tail)^(1/K) <= rate``
    (3688 for 1e-3 at 95%, tail 0.025)."""
    tail = (1.0 - confidence) / 2.0
    return int(math.ceil(math.log(tail) / math.log1p(-rate)))


def summarize(claim: Claim, profile: str, records: list[dict[str, Any]]) -> CalibrationSummary:
    verdicts: dict[str, int] = {}
    for r in records:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    seeds = len(records)
    refuted = verdicts.get("fails as stated", 0)
    undecided = verdicts.get("undecided", 0)
    tail = (1.0 - CALIBRATION_CONFIDENCE) / 2.0
    low, high = clopper_pearson(refuted, seeds, tail)
    if claim.expected == "holds":
        false_failures, consistent = refuted, low <= claim.false_fail_rate
    else:
        false_failures = 0
        consistent = refuted == seeds - undecided and refuted > 0
    return CalibrationSummary(
        claim.id,
        claim.expected,
        profile,
        seeds,
        claim.false_fail_rate,
        false_failures,
        refuted,
        undecided,
        verdicts,
        low,
        high,
        consistent,
        sum(float(r["seconds"]) for r in records),
    )


def _load(
    path: Path, fingerprint: str, profile: str, notify: Callable[[str], None] = _warn
) -> list[dict[str, Any]]:
    """The seeds already run (same claim definition and profile); a torn file, or one that
    does not fit its schema (:func:`results_format.records.calibration_record_problem`),
    starts over, and a seed's record that cannot be believed
    (:func:`~results_format.records.usable_calibration_runs`) is run again, each with a note
    naming the file."""
    data = read_fresh(path, fingerprint, profile, keys=("runs",))
    if data is None:
        return []
    problem = calibration_record_problem(data, path.stem)
    if problem is not None:
        notify(f"{path}: not trusted ({problem}); its seeds are run again")
        return []
    runs, problems = usable_calibration_runs(data["runs"])
    for problem in problems:
        notify(f"{path}: not trusted ({problem}); that seed is run again")
    return runs


@dataclasses.dataclass
class CalibrationTask(RegisteredClaimTask):
    """One claim x calibration seed as a picklable unit of work (``testbed calibrate
    --executor``; :class:`~theory_checks.claim_batch.RegisteredClaimTask`): calling it gives the
    seed's record."""

    claim_id: str
    seed: int
    profile: Profile
    default_dtype: str = "float64"
    make: Callable[..., Any] | None = None
    claim: Claim | None = None

    def __call__(self) -> dict[str, Any]:
        return seed_record(self.resolved_claim(), self.profile, self.make, self.seed)


def seed_record(
    claim: Claim, profile: Profile, make: Callable[..., Any] | None, seed: int
) -> dict[str, Any]:
    """Calibration seed ``seed``'s record: the verdict of the claim's run under it."""
    start = time.perf_counter()
    with plugin_failures_named(claim, claim.estimators[0]):  # a plugin's error: one line
        result = run_claim(claim, profile, make=make, calibration_seed=seed)
    return _record(seed, result, time.perf_counter() - start)


def _record(seed: int, result: ClaimResult, seconds: float) -> dict[str, Any]:
    return {
        "seed": seed,
        "verdict": result.verdict,
        "n_undecided": len(result.undecided),
        "n_unconfirmed": len(result.unconfirmed),
        "seconds": seconds,
    }


#: Seeds of one claim run as one block (:class:`CalibrationBlock`). Why 16: a block's seeds share
#: its stacked replicates' run (the case search and the seed-independent values are kept for the
#: process's later blocks besides, :mod:`theory_checks.seed_blocks`, :mod:`theory_checks.
#: replicates`), so a larger block costs less per seed (little past 16: the stacked HGP
#: replicates cost the same per seed at 16 and 32 seeds, their arithmetic grows with the rows),
#: while its records are written when the whole block ends, so an interrupted calibration loses
#: at most the blocks in flight (16 seeds of the costliest claim,
#: fednest.lemma22.abs_error_as_stated, are ~5 min on one loaded core).
BLOCK_SEEDS = 16


@dataclasses.dataclass
class CalibrationBlock(RegisteredClaimTask):
    """A block of one claim's calibration seeds as one unit of work (the batched path): one
    process, one search for the claim's cases (:func:`theory_checks.seed_blocks.check_block`;
    none where an earlier block of the claim in the process searched),
    the seeds' Monte Carlo replicates computed as one batch where the check allows
    (:mod:`theory_checks.replicates`); calling it gives each seed's record, equal (but for
    ``seconds``, which for the first seed include the search and the stacked replicates of
    all) to what :class:`CalibrationTask` gives for that seed."""

    claim_id: str
    seeds: tuple[int, ...]
    profile: Profile
    default_dtype: str = "float64"
    make: Callable[..., Any] | None = None
    claim: Claim | None = None

    def __call__(self) -> list[dict[str, Any]]:
        claim = self.resolved_claim()
        run = ClaimRun(claim, self.profile, self.make, None, self.seeds[0])
        # a plugin's error: one line
        with plugin_failures_named(claim, claim.estimators[0]), seed_batch(self.seeds):
            results = check_block(run, self.seeds)
        return [
            _record(seed, result, result.seconds)
            for seed, result in zip(self.seeds, results, strict=True)
        ]


#: How an executor runs tasks (``testbed_app.executors``): ``(index, result)`` as each finishes.
Execute = Callable[[Sequence[CalibrationBlock]], Iterable[tuple[int, list[dict[str, Any]]]]]


#: Most calibration seeds a claim takes. Why 100,000: bounding a stated false-failure rate
#: of 1e-3 (the default) takes 3,688 clean seeds (:func:`seeds_to_bound`), and 100,000 bound
#: 3.7e-5, below every claim's rate; past it the work is days on the fast profile and each
#: claim's record (one row per seed, rewritten as each seed ends) grows past 10 MB.
MAX_SEEDS = 100_000


def check_seeds(seeds: int) -> None:
    """``--seeds``: an integer in ``[1, MAX_SEEDS]`` (ValueError naming the bound)."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"--seeds must be an integer >= 1, got {seeds!r}")
    if seeds > MAX_SEEDS:
        raise ValueError(
            f"--seeds {seeds:,} is above {MAX_SEEDS:,}: that many clean seeds "
            f"bound a false-failure rate of {3.7e-5:g}, below every claim's "
            f"stated rate ({seeds_to_bound(1e-3):,} bound the default 1e-3)"
        )


def _check_calibratable(claim: Claim, seeds: int) -> None:
    if not claim.statistical:
        raise ValueError(f"{claim.id} is deterministic: there is nothing to calibrate")
    check_seeds(seeds)


def _claim_of(items: Sequence[Any], starts: Sequence[int], index: int) -> tuple[int, int]:
    """``(claim's position, index)`` of item ``index`` (negative: from the end) of ``items``,
    a sequence whose claim ``c`` holds the items ``starts[c]`` to ``starts[c + 1] - 1``; a
    TypeError for an index that is not an integer, an IndexError for one out of range."""
    if not isinstance(index, int):
        raise TypeError(f"{type(items).__name__} takes integer indices")
    if index < 0:
        index += len(items)
    if not 0 <= index < len(items):
        raise IndexError(index)
    return bisect.bisect_right(starts, index) - 1, index


class PendingTasks(Sequence[CalibrationTask]):
    """The seeds still to run, claim after claim, as a sequence whose items are built when
    asked for: ``calibrate --seeds 1000000000`` built every task first (2.47 GB after 53 s,
    before any seed ran), and each membership test rebuilt the set of recorded seeds. Its
    memory is the recorded seeds', whatever ``seeds``."""

    def __init__(
        self,
        claims: Sequence[Claim],
        seeds: int,
        profile: Profile,
        dtype: str,
        make: Callable[..., Any] | None,
        done: dict[str, Iterable[int]],
    ) -> None:
        self._claims, self._profile, self._dtype, self._make = list(claims), profile, dtype, make
        # per claim: the recorded seeds below ``seeds``, sorted (the missing ones are run)
        self._done = [
            sorted({k for k in map(int, done.get(c.id, ())) if 0 <= k < seeds})
            for c in self._claims
        ]
        self._counts = [seeds - len(d) for d in self._done]
        self._starts = list(itertools.accumulate([0, *self._counts]))

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: int) -> CalibrationTask:  # type: ignore[override]
        which, seed = self.locate(index)
        claim = self._claims[which]
        return CalibrationTask(claim.id, seed, self._profile, self._dtype, self._make, claim)

    def locate(self, index: int) -> tuple[int, int]:
        """``(claim's position, seed)`` of pending task ``index``."""
        which, index = _claim_of(self, self._starts, index)
        return which, self.pending_seed(which, index - self._starts[which])

    def pending_seed(self, which: int, position: int) -> int:
        """The ``position``-th seed of claim ``which`` not yet recorded."""
        done = self._done[which]
        # the position-th seed not in ``done``: the smallest k with k - #(done <= k) == position
        low, high = position, position + len(done)
        while low < high:
            middle = (low + high) // 2
            if middle - bisect.bisect_right(done, middle) < position:
                low = middle + 1
            else:
                high = middle
        return low

    def pending(self, which: int) -> int:
        """How many seeds of claim ``which`` are still to run."""
        return self._counts[which]

    @property
    def claim_count(self) -> int:
        return len(self._claims)

    def block(self, which: int, seeds: tuple[int, ...]) -> CalibrationBlock:
        """Seeds ``seeds`` of claim ``which`` as one unit of work."""
        claim = self._claims[which]
        return CalibrationBlock(claim.id, seeds, self._profile, self._dtype, self._make, claim)


class PendingBlocks(Sequence[CalibrationBlock]):
    """The seeds still to run (:class:`PendingTasks`) in blocks of at most ``block`` seeds of
    one claim, in seed order, built when asked for (memory independent of ``seeds``)."""

    def __init__(self, tasks: PendingTasks, block: int = BLOCK_SEEDS) -> None:
        self._tasks, self._block = tasks, int(block)
        per_claim = [-(-tasks.pending(which) // self._block) for which in range(tasks.claim_count)]
        self._starts = list(itertools.accumulate([0, *per_claim]))

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: int) -> CalibrationBlock:  # type: ignore[override]
        which, index = _claim_of(self, self._starts, index)
        first = (index - self._starts[which]) * self._block
        last = min(first + self._block, self._tasks.pending(which))
        seeds = tuple(self._tasks.pending_seed(which, p) for p in range(first, last))
        return self._tasks.block(which, seeds)


def calibrate_claim(
    claim: Claim,
    seeds: int,
    profile: Profile,
    out_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    make: Callable[..., Any] | None = None,
) -> CalibrationSummary:
    """Run ``claim`` under calibration seeds ``0..seeds-1`` (resuming from ``out_dir``);
    ``make`` replaces the registry's builder (a variant under study)."""
    return calibrate_claims([claim], seeds, profile, out_dir, progress, make=make)[0]


def calibrate_claims(
    claims: Sequence[Claim],
    seeds: int,
    profile: Profile,
    out_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    execute: Execute | None = None,
    make: Callable[..., Any] | None = None,
) -> list[CalibrationSummary]:
    """Every ``claim`` x seed not yet recorded, run by ``execute`` (default: one by one in this
    process); this process (the driver) appends each record to ``calibration/<claim>.json`` as
    it arrives, in seed order within the file, so an interrupted run resumes and the files do not
    depend on the executor (but for the measured ``seconds``)."""
    for claim in claims:
        _check_calibratable(claim, seeds)
    if out_dir is None:
        return _calibrate_claims(claims, seeds, profile, None, progress, execute, make)
    # one writer per claim's calibration record (results_format.locks)
    with holding(
        out_dir,
        [(f"calibration-{c.id}", f"the calibration of {c.id} in {out_dir}") for c in claims],
    ):
        return _calibrate_claims(claims, seeds, profile, out_dir, progress, execute, make)


def _calibrate_claims(
    claims: Sequence[Claim],
    seeds: int,
    profile: Profile,
    out_dir: Path | None,
    progress: Callable[[str], None] | None,
    execute: Execute | None,
    make: Callable[..., Any] | None,
) -> list[CalibrationSummary]:
    """:func:`calibrate_claims` with the records locked."""
    dtype = driver_dtype()
    stamps = {c.id: claim_fingerprint(c, profile) for c in claims}
    paths = {c.id: (out_dir / CALIBRATION / f"{c.id}.json" if out_dir else None) for c in claims}
    records: dict[str, list[dict[str, Any]]] = {}
    for c in claims:
        path = paths[c.id]
        records[c.id] = _load(path, stamps[c.id], profile.name) if path is not None else []
    tasks = PendingTasks(
        claims,
        seeds,
        profile,
        dtype,
        make,
        {c.id: [int(r["seed"]) for r in records[c.id]] for c in claims},
    )
    blocks = PendingBlocks(tasks)
    for index, block_records in (execute or run_in_process)(blocks):
        claim_id = blocks[index].claim_id
        records[claim_id] = sorted([*records[claim_id], *block_records], key=lambda r: r["seed"])
        path = paths[claim_id]
        if path is not None:  # sealed: checked before a seed is believed (_load)
            write_json(
                path,
                seal(
                    {
                        "claim": claim_id,
                        "fingerprint": stamps[claim_id],
                        "profile": profile.name,
                        "runs": records[claim_id],
                    }
                ),
                indent=2,
            )
        if progress is not None:
            for record in block_records:
                progress(f"{claim_id} seed {record['seed']}: {record['verdict']}")
    return [
        summarize(c, profile.name, [r for r in records[c.id] if int(r["seed"]) < seeds])
        for c in claims
    ]


def calibrate(
    claims: Iterable[Claim],
    seeds: int,
    profile: Profile,
    out_dir: Path,
    progress: Callable[[str], None] | None = None,
    execute: Execute | None = None,
) -> list[CalibrationSummary]:
    """Calibrate every statistical claim in ``claims``; write ``calibration/summary.json``."""
    summaries = calibrate_claims(
        [c for c in claims if c.statistical], seeds, profile, out_dir, progress, execute
    )
    # sealed: the report checks the seal and recomputes the counts before it shows a number
    summary = {
        "profile": profile.name,
        "seeds": seeds,
        "confidence": CALIBRATION_CONFIDENCE,
        "claims": [
            dataclasses.asdict(s) | {"what_the_seeds_show": what_seeds_show(s)} for s in summaries
        ],
    }
    write_json(out_dir / CALIBRATION / SUMMARY, seal(json.loads(json.dumps(summary))), indent=2)
    return summaries


def format_table(summaries: Iterable[CalibrationSummary]) -> str:
    """The calibration table as text (the report renders the same rows)."""
    rows = list(summaries)
    if not rows:
        return "no statistical claim to calibrate"
    width = max(len(s.claim) for s in rows)
    lines = [
        f"{'claim':{width}s} expected seeds  fails undecided  observed rate [95% CI]"
        "       stated  consistent  what the seeds show"
    ]
    for s in rows:
        observed = s.refuted / s.seeds
        lines.append(
            f"{s.claim:{width}s} {s.expected:8s} {s.seeds:5d} {s.refuted:6d} "
            f"{s.undecided:9d}  {observed:.3f} [{s.rate_low:.3f}, {s.rate_high:.3f}]"
            f"  {s.stated_rate:8.0e}  {'yes' if s.consistent else 'NO ':3s}         "
            f"{what_seeds_show(s)}"
        )
    return "\n".join(lines)


def what_seeds_show(summary: CalibrationSummary) -> str:
    """One line on what the calibration can resolve: for a holds claim, the rate its seeds bound
    (the interval's upper end) and the clean seeds it would take to bound the stated rate."""
    if summary.expected != "holds":
        return f"refuted on {summary.refuted} of {summary.seeds - summary.undecided} decided seeds"
    shown = (
        f"false-failure rate at most {summary.rate_high:.3g} at 95% "
        f"({summary.false_failures} of {summary.seeds})"
    )
    if summary.rate_high > summary.stated_rate:
        shown += (
            f"; bounding it at the stated {summary.stated_rate:.0e} takes "
            f"{seeds_to_bound(summary.stated_rate)} clean seeds"
        )
    return shown

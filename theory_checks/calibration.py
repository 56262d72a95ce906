"""Calibration of statistical claims: their observed false-failure rate, measured.

A statistical claim states a family-wise false-failure rate (:mod:`theory_checks.decision`).
:func:`calibrate_claim` runs it on the correct implementation under ``K`` independent Monte Carlo
seeds (the same drawn cases; calibration seed ``k`` changes every stream the check draws) and
counts the verdicts. For a claim the testbed has established to hold, every "fails as stated" is
a false failure: the observed rate ``f / K`` with its exact (Clopper-Pearson) 95% interval is
*consistent* with the stated rate when the interval's lower end does not exceed it (the data do
not show more false failures than stated). For a claim established to fail, the fraction of
seeds that confirm the refutation is the check's power on it. Undecided runs are counted apart:
they are neither false failures nor decisions.

Results: ``calibration/<claim>.json`` (one record per seed, appended as each finishes, so an
interrupted calibration resumes) and ``calibration/summary.json``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from results_format.resume import read_fresh, write_json
from theory_checks.claim import Claim
from theory_checks.decision import clopper_pearson
from theory_checks.runner import Profile, claim_fingerprint, run_claim

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
    return CalibrationSummary(claim.id, claim.expected, profile, seeds, claim.false_fail_rate,
                              false_failures, refuted, undecided, verdicts, low, high,
                              consistent, sum(float(r["seconds"]) for r in records))


def _load(path: Path, fingerprint: str, profile: str) -> list[dict[str, Any]]:
    """The seeds already run (same claim definition and profile); a torn file starts over."""
    data = read_fresh(path, fingerprint, profile, keys=("runs",))
    if data is None or not isinstance(data["runs"], list):
        return []
    return [r for r in data["runs"] if isinstance(r, dict) and {"seed", "verdict"} <= set(r)]


def calibrate_claim(claim: Claim, seeds: int, profile: Profile, out_dir: Path | None = None,
                    progress: Callable[[str], None] | None = None,
                    make: Callable[..., Any] | None = None) -> CalibrationSummary:
    """Run ``claim`` under calibration seeds ``0..seeds-1`` (resuming from ``out_dir``);
    ``make`` replaces the registry's builder (a variant under study)."""
    if not claim.statistical:
        raise ValueError(f"{claim.id} is deterministic: there is nothing to calibrate")
    if seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {seeds}")
    fingerprint = claim_fingerprint(claim, profile)
    path = out_dir / "calibration" / f"{claim.id}.json" if out_dir else None
    records = _load(path, fingerprint, profile.name) if path else []
    done = {int(r["seed"]) for r in records}
    for k in range(seeds):
        if k in done:
            continue
        start = time.perf_counter()
        result = run_claim(claim, profile, make=make, calibration_seed=k)
        records.append({"seed": k, "verdict": result.verdict,
                        "n_undecided": len(result.undecided),
                        "n_unconfirmed": len(result.unconfirmed),
                        "seconds": time.perf_counter() - start})
        if path is not None:
            write_json(path, {"claim": claim.id, "fingerprint": fingerprint,
                              "profile": profile.name, "runs": records}, indent=2)
        if progress is not None:
            progress(f"{claim.id} seed {k}: {result.verdict}")
    records = sorted((r for r in records if int(r["seed"]) < seeds), key=lambda r: r["seed"])
    return summarize(claim, profile.name, records)


def calibrate(claims: Iterable[Claim], seeds: int, profile: Profile, out_dir: Path,
              progress: Callable[[str], None] | None = None) -> list[CalibrationSummary]:
    """Calibrate every statistical claim in ``claims``; write ``calibration/summary.json``."""
    summaries = [calibrate_claim(c, seeds, profile, out_dir, progress)
                 for c in claims if c.statistical]
    write_json(out_dir / "calibration" / "summary.json",
               {"profile": profile.name, "seeds": seeds, "confidence": CALIBRATION_CONFIDENCE,
                "claims": [dataclasses.asdict(s) for s in summaries]}, indent=2)
    return summaries


def format_table(summaries: Iterable[CalibrationSummary]) -> str:
    """The calibration table as text (the report renders the same rows)."""
    rows = list(summaries)
    if not rows:
        return "no statistical claim to calibrate"
    width = max(len(s.claim) for s in rows)
    lines = [f"{'claim':{width}s} expected seeds  fails undecided  observed rate [95% CI]"
             "       stated  consistent"]
    for s in rows:
        observed = s.refuted / s.seeds
        lines.append(f"{s.claim:{width}s} {s.expected:8s} {s.seeds:5d} {s.refuted:6d} "
                     f"{s.undecided:9d}  {observed:.3f} [{s.rate_low:.3f}, {s.rate_high:.3f}]"
                     f"  {s.stated_rate:8.0e}  {'yes' if s.consistent else 'NO'}")
    return "\n".join(lines)

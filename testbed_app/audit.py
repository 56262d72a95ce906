"""``testbed audit RESULTS``: do the verdicts of a results folder re-derive, and do they reproduce?

A results folder gets shared (attached to a paper, handed to a co-author, kept as a CI
artifact). Its files carry seals (:mod:`results_format.validation`), but a seal anyone can
recompute guards against accidents, not against edits; and re-deriving every verdict from the
recorded numbers (:func:`results_format.claim_checks.recomputed_problems`) catches an edit that
forgets an outcome, a count or a verdict, not one that changes the numbers together with them.
The audit therefore measures again, with this checkout's code, on the cases the folder records:

1. every claim file is read as ``testbed check`` reads it (schema, seal, each case's outcome,
   the counts and the verdict re-derived, the companion files' digests);
2. every saved counterexample is replayed: the case is rebuilt from its spec and measured again
   (a statistical one on a fresh Monte Carlo stream, with its confirmation), and must fail again;
3. a seeded random sample of each claim's passing (and undecided) cases (``--sample K``; every
   one with ``--all``) is measured again with the design it was measured with (the same
   streams), and must give the recorded outcome and numbers;
4. every calibration and mutation record is checked (schema, seal, a mutant's status from its
   runs), then run again: a seeded sample of a calibration record's seeds (the same ``--sample``
   and ``--seed``; every seed with ``--all``) must give the recorded verdicts, and the run
   that killed a mutant must kill it again; ``calibration/summary.json`` and
   ``mutation/summary.json`` are recomputed from those records.

One line per claim (``reproduced`` or ``differs``, with the numbers), then one per summary and a
last line with the counts. Nothing is written: the audited folder may be read-only, and a
folder from elsewhere is never changed. Exit status: 0 when everything reproduced, 1 on any
difference (a file not trusted, a claim not registered here or defined differently, a replay
or a re-measurement that differs), 2 on bad input (no such folder, not a results folder, a bad
option).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import TypeVar

from problems import from_spec
from results_format.claim_file import NOT_A_CLAIM_RESULT
from results_format.claim_file import read_claim_file
from results_format.layout import CALIBRATION
from results_format.layout import CLAIMS
from results_format.layout import MUTATION
from results_format.layout import SUMMARY
from results_format.records import calibration_record_problem
from results_format.records import calibration_records_problem
from results_format.records import calibration_summary_problem
from results_format.records import mutation_record_problem
from results_format.records import mutation_summary_problem
from results_format.records import usable_calibration_runs
from theory_checks.calibration import CalibrationTask
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim_results import CaseResult
from theory_checks.claim_results import claim_fingerprint
from theory_checks.decision import first_design
from theory_checks.mutants import get_mutant
from theory_checks.mutation import mutant_fingerprint
from theory_checks.mutation import planned_runs
from theory_checks.mutation import run_once
from theory_checks.registry import get_claim
from theory_checks.runner import Profile
from theory_checks.runner import case_rate
from theory_checks.runner import claim_seed
from theory_checks.runner import default_make
from theory_checks.runner import get_profile
from theory_checks.runner import measure_and_decide
from theory_checks.runner import replay_counterexample

#: Passing cases re-measured per claim by default. Why 2: with the counterexample replayed,
#: every claim is measured again at least once and the audit of a fast-profile folder takes a
#: fraction of the check's time (docs/audit.md); ``--all`` re-measures every case.
DEFAULT_SAMPLE = 2
# Why 1e-6 on the case's scale, max(|recorded|, |again|, |bound|): a case is measured again on
# the same derandomized problem, parameters and Monte Carlo streams, so on one machine the
# numbers repeat bit for bit; another machine's BLAS sums in another order, a relative change
# near 1e-13 on these float64 computations (benchmarks/compare_devices.py compares CPU and GPU
# on the same scale). An edited number (e.g. a recorded 0 changed to 0.37 against a bound of
# 1e-10) is many orders above.
AUDIT_RTOL = 1e-6

T = TypeVar("T")


def differs(recorded: float, again: float, bound: float) -> float:
    """The difference of a number measured again from the recorded one, on the case's scale
    ``max(|recorded|, |again|, |bound|)`` (0 when equal, inf when only one is infinite)."""
    if recorded == again:
        return 0.0
    if not (math.isfinite(recorded) and math.isfinite(again)):
        return math.inf
    scale = max(abs(recorded), abs(again), abs(bound) if math.isfinite(bound) else 0.0)
    return abs(recorded - again) / scale if scale > 0 else math.inf


def _case(saved: Mapping[str, Any]) -> Case:
    """A recorded case rebuilt: its problem from the spec, its parameters as the check was
    given them (JSON turned the tuples into lists)."""
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in saved["params"].items()}
    return Case(from_spec(dict(saved["spec"])), params)


def _compare(
    saved: Mapping[str, Any], again: CaseResult, compare_numbers: bool
) -> tuple[str | None, float]:
    """Why a case measured again differs from its record (its outcome, or its number on the
    case's scale beyond :data:`AUDIT_RTOL`), or ``None``; and the difference."""
    gap = differs(
        float(saved["measured"]), float(again.measurement.measured), float(saved["bound"])
    )
    if again.outcome != saved["outcome"]:
        return (
            f"{saved['problem_id']}: recorded {saved['outcome']} (measured "
            f"{saved['measured']:.6g}), again {again.outcome} (measured "
            f"{again.measurement.measured:.6g} vs bound {again.measurement.bound:.6g})",
            gap,
        )
    if compare_numbers and gap > AUDIT_RTOL:
        return (
            f"{saved['problem_id']}: measured {saved['measured']:.6g} recorded, "
            f"{again.measurement.measured:.6g} again (difference {gap:.2g} of its scale)",
            gap,
        )
    return None, gap


class ClaimAudit:
    """One claim file audited: whether it reproduced, and the line that says so."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.problems: list[str] = []
        self.done: list[str] = []

    @property
    def reproduced(self) -> bool:
        return not self.problems

    def line(self) -> str:
        if self.reproduced:
            return f"{self.name}: reproduced ({'; '.join(self.done)})"
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        return f"{self.name}: differs: {self.problems[0]}{more}"


def audit_claim(
    data: Mapping[str, Any], results: Path, sample: int | None, seed: int
) -> ClaimAudit:
    """Replay the counterexample of a believed claim record and re-measure a seeded sample of
    its passing and undecided cases (``sample``; ``None``: every one)."""
    audit = ClaimAudit(str(data["id"]))
    try:
        claim = get_claim(str(data["claim"]))
    except KeyError:
        audit.problems.append(
            f"claim {data['claim']} is not registered here (a plugin not "
            "installed?): it cannot be measured again"
        )
        return audit
    try:
        profile = get_profile(str(data["profile"]))
    except (KeyError, ValueError):
        audit.problems.append(f"profile {data['profile']!r} is not one of this testbed's")
        return audit
    here = claim_fingerprint(claim, profile)
    if data["fingerprint"] != here:
        audit.problems.append(
            f"the claim's definition differs from this checkout's "
            f"(fingerprint {data['fingerprint']} recorded, {here} here)"
        )
        return audit
    try:
        make = default_make(claim, str(data["estimator"]))
    except KeyError:
        audit.problems.append(
            f"estimator {data['estimator']} is not registered here (a plugin "
            "not installed?): it cannot be measured again"
        )
        return audit
    audit.done.append(str(data["verdict"]))
    if data["counterexample"]:
        _replay(audit, claim, json.loads((results / data["counterexample"]).read_text()), make)
    _remeasure(audit, claim, profile, data, make, sample, seed)
    return audit


def _replay(audit: ClaimAudit, claim: Claim, saved: dict[str, Any], make: Any) -> None:
    """The saved counterexample rebuilt and measured again: it must fail again (a statistical
    one on a fresh stream, so only its outcome is compared)."""
    try:
        again = replay_counterexample(claim, saved, make)
    except Exception as error:  # a case that cannot be rebuilt or measured: named
        audit.problems.append(
            f"its counterexample cannot be measured again ({type(error).__name__}: {error})"
        )
        return
    problem, gap = _compare(saved, again, not claim.statistical)
    if problem is not None:
        audit.problems.append(f"counterexample {problem}")
        return
    audit.done.append(
        f"counterexample fails again, measured {again.measurement.measured:.3g} "
        f"vs bound {again.measurement.bound:.3g}"
        + ("" if claim.statistical else f", difference {gap:.1g}")
    )


def _remeasure(
    audit: ClaimAudit,
    claim: Claim,
    profile: Profile,
    data: Mapping[str, Any],
    make: Any,
    sample: int | None,
    seed: int,
) -> None:
    """A seeded sample of the recorded passing and undecided cases measured again with the
    design they were measured with: the same outcome and numbers."""
    cases = [c for c in data["cases"] if c["outcome"] != "fails"]
    if sample is not None and sample < len(cases):
        # seeded per claim: the same --seed picks the same cases whatever else is audited
        chosen = sorted(random.Random(f"{seed}:{data['id']}").sample(range(len(cases)), sample))
        cases = [cases[i] for i in chosen]
    rate = case_rate(claim, profile) if claim.statistical else 0.0
    design = (
        first_design(
            claim_seed(claim.id), int(data.get("calibration_seed") or 0), rate, profile.name
        )
        if claim.statistical
        else None
    )
    largest = 0.0
    for saved in cases:
        try:
            again = measure_and_decide(claim, _case(saved), make, design, rate)
        except Exception as error:  # a case that cannot be rebuilt or measured: named
            audit.problems.append(
                f"{saved['problem_id']} cannot be measured again ({type(error).__name__}: {error})"
            )
            continue
        problem, gap = _compare(saved, again, True)
        if problem is not None:
            audit.problems.append(problem)
        largest = max(largest, gap)
    total = sum(c["outcome"] != "fails" for c in data["cases"])
    audit.done.append(
        f"{len(cases)} of {total} passing or undecided case(s) measured again"
        + (f", largest difference {largest:.1g}" if cases else "")
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _registered(
    record: Mapping[str, Any], key: str, lookup: Callable[[str], T]
) -> tuple[T, Profile]:
    """``lookup(record[key])`` (the registered claim or mutant a record names) and the profile
    it names; a :class:`ValueError` naming what this checkout lacks."""
    try:
        return lookup(str(record[key])), get_profile(str(record["profile"]))
    except KeyError as error:
        raise ValueError(
            f"{error.args[0] if error.args else error}: it cannot be run again here"
        ) from None


def _claim_and_profile(record: Mapping[str, Any]) -> tuple[Claim, Profile]:
    """The registered claim and the profile a calibration record names, its definition the one
    recorded (:class:`ValueError` naming what differs)."""
    claim, profile = _registered(record, "claim", get_claim)
    if record["fingerprint"] != claim_fingerprint(claim, profile):
        raise ValueError(
            "the claim's definition differs from this checkout's (fingerprint "
            f"{record['fingerprint']} recorded, {claim_fingerprint(claim, profile)}"
            " here)"
        )
    return claim, profile


def audit_calibration(record: Mapping[str, Any], sample: int | None, seed: int) -> str | None:
    """A seeded sample of a believed calibration record's seeds run again
    (:class:`~theory_checks.calibration.CalibrationTask`, the streams of that seed): the same
    verdict and counts; why not, or ``None``."""
    claim, profile = _claim_and_profile(record)
    runs = list(record["runs"])
    if sample is not None and sample < len(runs):
        runs = random.Random(f"{seed}:{record['claim']}").sample(runs, sample)
    for run in sorted(runs, key=lambda r: r["seed"]):
        again = CalibrationTask(claim.id, int(run["seed"]), profile, claim=claim)()
        for key in ("verdict", "n_undecided", "n_unconfirmed"):
            if key in run and run[key] != again[key]:
                return f"seed {run['seed']}: {key} {run[key]!r} recorded, {again[key]!r} again"
    return None


def audit_mutant(record: Mapping[str, Any]) -> str | None:
    """The run that killed a believed mutant record's mutant run again (its claim on the
    mutated entry): it must kill it again; why not, or ``None``. A mutant that survived is
    not run again (``testbed mutate`` runs every claim)."""
    mutant, profile = _registered(record, "mutant", get_mutant)
    here = mutant_fingerprint(mutant, profile, planned_runs(mutant, profile))
    if record["fingerprint"] != here:
        raise ValueError(
            f"the mutant or its claims differ from this checkout's (fingerprint "
            f"{record['fingerprint']} recorded, {here} here)"
        )
    killing = next((r for r in record["runs"] if r["killed"]), None)
    if killing is None or killing["estimator"] not in mutant.builds:
        return None
    again = run_once(
        get_claim(killing["claim"]),
        killing["estimator"],
        mutant.builds[killing["estimator"]],
        profile,
    )
    if again["verdict"] != killing["verdict"] or not again["killed"]:
        return (
            f"its kill by {killing['claim']}: {killing['verdict']!r} recorded, "
            f"{again['verdict']!r} again"
        )
    return None


def _rerun(
    name: str, data: Mapping[str, Any], sample: int | None, seed: int
) -> tuple[str | None, str]:
    """A believed calibration or mutation record run again: (why it differs, what was run)."""
    try:
        if name == CALIBRATION:
            count = len(data["runs"]) if sample is None else min(sample, len(data["runs"]))
            return audit_calibration(data, sample, seed), f"{count} seed(s) run again"
        killed = any(r["killed"] for r in data["runs"])
        return audit_mutant(data), (
            "its kill run again" if killed else f"{data['status']}, not run again"
        )
    except ValueError as error:
        return str(error), ""
    except Exception as error:  # a seed or a kill that cannot be run again: named
        return f"it cannot be run again ({type(error).__name__}: {error})", ""


def audit_summaries(
    results: Path, sample: int | None = 0, seed: int = 0
) -> Iterator[tuple[bool, str]]:
    """The calibration and mutation records (each believed, then run again: a seeded sample of
    ``sample`` seeds, a mutant's kill) and their summaries: ``(reproduced, line)`` each."""
    for name, record_problem, summary_problem in (
        (
            CALIBRATION,
            calibration_record_problem,
            lambda d: calibration_summary_problem(d) or calibration_records_problem(d, results),
        ),
        (MUTATION, mutation_record_problem, lambda d: mutation_summary_problem(d, results)),
    ):
        folder = results / name
        if not folder.is_dir():
            continue
        records = [p for p in sorted(folder.glob("*.json")) if p.name != SUMMARY]
        for path in records:
            data = _json(path)
            problem = "unreadable or not JSON" if data is None else record_problem(data, path.stem)
            if problem is None and name == CALIBRATION:
                dropped = usable_calibration_runs(data["runs"])[1]
                problem = dropped[0] if dropped else None
            if problem is not None:
                yield False, f"{name}/{path.name}: differs: not trusted ({problem})"
                continue
            if sample == 0:
                continue
            differing, done = _rerun(name, data, sample, seed)
            yield (
                differing is None,
                f"{name}/{path.name}: "
                + (f"differs: {differing}" if differing else f"reproduced ({done})"),
            )
        summary = folder / SUMMARY
        if summary.is_file():
            data = _json(summary)
            problem = "unreadable or not JSON" if data is None else summary_problem(data)
            yield (
                problem is None,
                f"{name}/{SUMMARY}: "
                + (
                    f"differs: {problem}"
                    if problem
                    else f"reproduced from its {len(records)} record(s)"
                ),
            )


def audit_folder(results: Path, sample: int | None, seed: int, out: Any = print) -> tuple[int, int]:
    """Audit every file of ``results``, one line each through ``out``; (audited, differing)."""
    audited = differing = 0
    for path in sorted((results / CLAIMS).glob("*.json")):
        data, reason = read_claim_file(path, results)
        if data is None and str(reason).startswith(NOT_A_CLAIM_RESULT):
            out(f"{CLAIMS}/{path.name}: foreign, not audited ({reason})")
            continue
        audited += 1
        if data is None:
            out(f"{path.stem}: differs: {reason}")
            differing += 1
            continue
        audit = audit_claim(data, results, sample, seed)
        out(audit.line())
        differing += not audit.reproduced
    for reproduced, line in audit_summaries(results, sample, seed):
        audited += 1
        differing += not reproduced
        out(line)
    return audited, differing


def _results_folder(text: str) -> Path:
    results = Path(text)
    if not results.is_dir():
        raise FileNotFoundError(f"{results}: no such results folder")
    if not any((results / name).is_dir() for name in (CLAIMS, CALIBRATION, MUTATION)):
        raise ValueError(
            f"{results} is not a results folder: it has none of {CLAIMS}/, "
            f"{CALIBRATION}/, {MUTATION}/"
        )
    return results


def audit_command(args: argparse.Namespace) -> int:
    """``testbed audit``: the exit status of the module docstring."""
    if args.all and args.sample is not None:
        raise ValueError("--all and --sample exclude each other: --all measures every case again")
    results = _results_folder(args.results)
    sample = None if args.all else (DEFAULT_SAMPLE if args.sample is None else args.sample)
    start = time.perf_counter()
    audited, differing = audit_folder(results, sample, args.seed)
    what = "every case" if sample is None else f"up to {sample} passing case(s) per claim"
    print(
        f"\n{audited} file(s) audited in {time.perf_counter() - start:.0f} s ({what}, "
        f"--seed {args.seed}): {audited - differing} reproduced, {differing} differ"
    )
    return 1 if differing else 0

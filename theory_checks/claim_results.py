"""A claim run's results and its files: the result types, the files a run writes (rendered as
bytes, then written atomically, claim JSON last since its presence marks the run done), the
freshness check that resumes, and the run's metadata. See :mod:`theory_checks.runner` for the
layout of the results folder."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from problems import default_device
from problems import from_spec
from results_format import atomic_write_bytes
from results_format import json_default
from results_format.claim_file import claim_file_problem
from results_format.claim_record import CaseRecord
from results_format.claim_record import ClaimRecord
from results_format.claim_record import ComputedByRecord
from results_format.claim_record import ControlRecord
from results_format.claim_record import DecidedOnRecord
from results_format.claim_record import EstimatorEntryRecord
from results_format.claim_record import FitRecord
from results_format.claim_record import HypothesisRecord
from results_format.claim_record import PowerRecord
from results_format.claim_record import ReadingRecord
from results_format.layout import CLAIMS
from results_format.layout import COUNTEREXAMPLES
from results_format.layout import METADATA
from results_format.layout import SERIES
from results_format.paths import inside
from results_format.provenance import git_commit
from results_format.provenance import provenance
from results_format.resume import fingerprint
from results_format.resume import read_fresh
from results_format.resume import write_json
from results_format.validation import file_digest
from results_format.validation import seal
from results_format.verdicts import comparison_for
from results_format.verdicts import readings_as_expected
from testbed.precision import precision_record
from testbed.registry import BUILTIN
from testbed.registry import get_estimator
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Verdict
from theory_checks.claim import fit_record
from theory_checks.decision import Design
from theory_checks.decision import Outcome
from theory_checks.decision import TestDecision
from theory_checks.hypotheses import OUTSIDE_PREFIX
from theory_checks.hypotheses import HypothesisMargin
from theory_checks.profiles import Profile
from theory_checks.profiles import claim_max_examples
from theory_checks.registry import BUILT_IN
from theory_checks.registry import CLAIM_DB
from theory_checks.registry import run_origin

SERIES_COLUMNS = (
    "claim",
    "estimator",
    "problem_id",
    "seed",
    "params",
    "series",
    "step_name",
    "step",
    "value",
    "oracle_calls",
    "comm_rounds",
)


@dataclasses.dataclass
class CaseResult:
    """One measured case: the measurement, its outcome and, for a statistical claim, the
    decision of each test and the confirmation run of a first-stage failure."""

    problem_id: str
    spec: dict[str, Any]
    params: dict[str, Any]
    measurement: Measurement
    outcome: Outcome = "holds"
    decisions: list[TestDecision] = dataclasses.field(default_factory=list)
    design: Design | None = None
    confirmation: CaseResult | None = None
    hypotheses: list[HypothesisMargin] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class ReadingResult:
    """A claim checked under one reading of its statement (:class:`~theory_checks.hypotheses.
    Reading`): its own verdict, case count and counterexample."""

    name: str
    statement: str
    verdict: Verdict
    n_cases: int
    counterexample: CaseResult | None
    #: the outcome the claim declares under this reading (``Reading.expected``), if any
    expected: str | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "statement": self.statement,
            "verdict": self.verdict,
            "expected": self.expected,
            "n_cases": self.n_cases,
            "counterexample": case_summary(self.counterexample)
            if self.counterexample is not None
            else None,
        }


@dataclasses.dataclass
class ClaimResult:
    claim: Claim
    verdict: Verdict
    cases: list[CaseResult]
    counterexample: CaseResult | None
    rejected: list[str]
    seconds: float
    estimator: str = ""
    profile: str = "fast"
    undecided: list[CaseResult] = dataclasses.field(default_factory=list)
    unconfirmed: list[CaseResult] = dataclasses.field(default_factory=list)
    case_rate: float | None = None
    calibration_seed: int = 0
    readings: list[ReadingResult] = dataclasses.field(default_factory=list)

    @property
    def holding_readings(self) -> list[str]:
        """The readings under which the claim holds (empty without readings)."""
        return [r.name for r in self.readings if r.verdict in ("holds", "holds once corrected")]

    @property
    def run_id(self) -> str:
        """The claim id, suffixed ``@estimator`` for a variant enrolled through the registry."""
        if not self.estimator or self.estimator == self.claim.estimators[0]:
            return self.claim.id
        return f"{self.claim.id}@{self.estimator}"

    @property
    def as_expected(self) -> bool:
        """The verdict is one the testbed expects, and so is each reading's that declares its
        own (the rule a results file is checked against, :mod:`results_format.verdicts`)."""
        expected = self.claim.expected_verdicts(self.profile)
        return self.verdict in expected and readings_as_expected(
            ({"verdict": r.verdict, "expected": r.expected} for r in self.readings), expected
        )


@dataclasses.dataclass(frozen=True)
class ControlRuns:
    """What a claim's own run (its first estimator) records beside its verdict, each ``None``
    when not run: the perturbation's ``power`` (:func:`~theory_checks.controls.run_power`), the
    positive ``control`` (:func:`~theory_checks.controls.run_positive_control`) and the outcomes
    at the values of the parameters the testbed ``added`` (:func:`~theory_checks.controls.
    run_added_parameters`)."""

    power: dict[str, Any] | None = None
    control: dict[str, Any] | None = None
    added: list[dict[str, Any]] | None = None


#: A run that records nothing beside its verdict (an enrolled estimator's, or a test's).
NO_CONTROLS = ControlRuns()


# --------------------------------------------------------------------------- results files


def claim_fingerprint(claim: Claim, profile: Profile) -> str:
    """Changes when the claim's definition on ``profile`` changes, so stale results are not
    reused."""
    return fingerprint(*claim_definition(claim, profile))


def claim_definition(claim: Claim, profile: Profile) -> list[str]:
    """The parts of ``claim`` on ``profile`` that :func:`claim_fingerprint` hashes, in order."""
    parts = [
        claim.id,
        claim.reference,
        claim.kind,
        claim.statement,
        ",".join(claim.estimators),
        claim.check.__qualname__,
        str(claim_max_examples(claim, profile)),
        claim.decision,
        repr(claim.false_fail_rate),
        claim.perturbation.name if claim.perturbation else "",
        "control" if claim.positive_control else "",
    ]
    # hypotheses and readings join the definition only where declared, so the fingerprints of
    # claims without them are those of before they existed
    if claim.hypotheses:
        parts.append("|".join(f"{h.name}: {h.statement}" for h in claim.hypotheses))
    if claim.readings:
        parts.append(
            "|".join(f"{r.name}: {r.statement} {sorted(r.params.items())}" for r in claim.readings)
        )
    if claim.scale:
        parts.append(claim.scale)
    if claim.added_parameters:
        parts.append(
            "|".join(
                f"{p.name}: {p.statement} {p.checked} {p.values}" for p in claim.added_parameters
            )
        )
    return parts


def _decision_summary(d: TestDecision) -> dict[str, Any]:
    return dataclasses.asdict(d)


def case_summary(r: CaseResult) -> dict[str, Any]:
    m = r.measurement
    summary: dict[str, Any] = {
        "problem_id": r.problem_id,
        "spec": r.spec,
        "params": r.params,
        "measured": m.measured,
        "bound": m.bound,
        "passed": m.passed,
        "relation": m.relation,
        "outcome": r.outcome,
        # a deterministic claim's case has no Monte Carlo design: its data are exact
        "fit": fit_record(m.fit, exact=r.design is None) if m.fit else None,
        "details": dict(m.details),
    }
    # how passed follows from these numbers, so that a reader re-derives it
    # (results_format.claim_checks.comparison_problem)
    summary["comparison"] = comparison_for(
        m.relation, m.measured, m.bound, m.passed, m.slack, summary["fit"], m.rule
    )
    if r.decisions:
        summary["decisions"] = [_decision_summary(d) for d in r.decisions]
    if r.design is not None:
        summary["design"] = {
            "seed": list(r.design.seed),
            "scale": r.design.scale,
            "false_fail_rate": r.design.false_fail_rate,
        }
    if r.confirmation is not None:
        summary["confirmation"] = case_summary(r.confirmation)
    if r.hypotheses:
        summary["hypotheses"] = [m.as_dict() for m in r.hypotheses]
    return summary


#: A run's results files: each path (relative to the results folder, ``/``-separated) with its
#: bytes, in the order they are written; the claim's JSON comes last, since its presence marks
#: the run done (:func:`is_done`). Picklable: what a worker sends back to the driver.
ClaimFiles = dict[str, bytes]


def _json_bytes(data: Any, **options: Any) -> bytes:
    """What :func:`~results_format.resume.write_json` writes for ``data``, as bytes."""
    return json.dumps(data, **options).encode()


def _counterexample_files(result: ClaimResult, profile: Profile) -> tuple[ClaimFiles, Path | None]:
    """The saved counterexample (its JSON and, where the problem has arrays, its ``.npz``) and
    the JSON's path relative to the results folder; nothing without a counterexample."""
    claim, ce = result.claim, result.counterexample
    if ce is None:
        return {}, None
    path = Path(COUNTEREXAMPLES) / f"{result.run_id}.json"
    files: ClaimFiles = {
        path.as_posix(): _json_bytes(
            {
                "claim": claim.id,
                "profile": profile.name,
                "decision": claim.decision,
                **case_summary(ce),
            },
            indent=2,
            default=json_default,
        )
    }
    arrays = getattr(_rebuild_problem(ce.spec), "to_arrays", None)
    if arrays is not None:
        buffer = io.BytesIO()
        np.savez(buffer, **arrays())
        files[f"{COUNTEREXAMPLES}/{result.run_id}.npz"] = buffer.getvalue()
    return files, path


def _series_csv(claim: Claim, estimator: str, cases: Sequence[CaseResult]) -> bytes:
    """Every recorded point of every case's series, one row each (:data:`SERIES_COLUMNS`)."""
    with io.StringIO(newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SERIES_COLUMNS)
        for r in cases:
            params = json.dumps(r.params, sort_keys=True, default=json_default)
            seed = r.spec.get("seed", "")
            for p in r.measurement.series:
                writer.writerow(
                    [
                        claim.id,
                        p.label or estimator,
                        r.problem_id,
                        seed,
                        params,
                        p.series,
                        p.step_name,
                        p.step,
                        repr(p.value),
                        p.oracle_calls,
                        p.comm_rounds,
                    ]
                )
        return handle.getvalue().encode()


def render_claim_result(
    result: ClaimResult, profile: Profile, controls: ControlRuns = NO_CONTROLS
) -> ClaimFiles:
    """The claim's JSON, its series CSV and any counterexample, as :data:`ClaimFiles`, with
    ``controls`` recorded beside the verdict."""
    claim = result.claim
    run_id, estimator = result.run_id, result.estimator or claim.estimators[0]
    files, counter_path = _counterexample_files(result, profile)
    cases = (
        result.cases + result.undecided + ([result.counterexample] if result.counterexample else [])
    )
    files[f"{SERIES}/{run_id}.csv"] = _series_csv(claim, estimator, cases)
    record = _claim_record(result, profile, cases, counter_path, files, controls)
    # sealed: a reader recomputes the verdict from the cases and checks the seal before it
    # believes the file (results_format.claim_file.claim_file_problem)
    files[f"{CLAIMS}/{run_id}.json"] = _json_bytes(
        seal(json.loads(_json_bytes(record.to_json(), default=json_default))), indent=2
    )
    return files


def _claim_record(
    result: ClaimResult,
    profile: Profile,
    cases: Sequence[CaseResult],
    counter_path: Path | None,
    files: ClaimFiles,
    controls: ControlRuns,
) -> ClaimRecord:
    """The claim file's record (the digests of ``files``, its companions, written in it)."""
    claim = result.claim
    run_id, estimator = result.run_id, result.estimator or claim.estimators[0]
    outside = [reason for reason in result.rejected if reason.startswith(OUTSIDE_PREFIX)]
    fits = [
        fit_record(r.measurement.fit, exact=not claim.statistical) | {"problem_id": r.problem_id}
        for r in cases
        if r.measurement.fit is not None
    ]
    return ClaimRecord(
        id=run_id,
        claim=claim.id,
        estimator=estimator,
        estimator_entry=estimator_entry(estimator),
        paper=claim.paper,
        reference=claim.reference,
        kind=claim.kind,
        about=claim.about,
        serves=claim.serves,
        power_from=tuple(claim.power_from),
        statement=claim.statement,
        estimators=tuple(claim.estimators),
        corrects=claim.corrects,
        expected=claim.expected,
        notes=claim.notes,
        expected_verdicts=tuple(claim.expected_verdicts(profile.name)),
        verdict=result.verdict,
        as_expected=result.as_expected,
        decision=claim.decision,
        false_fail_rate=claim.false_fail_rate if claim.statistical else None,
        case_false_fail_rate=result.case_rate,
        calibration_seed=result.calibration_seed,
        profile=profile.name,
        fingerprint=claim_fingerprint(claim, profile),
        n_cases=len(result.cases),
        n_undecided=len(result.undecided),
        n_unconfirmed=len(result.unconfirmed),
        n_rejected=len(result.rejected),
        n_outside_hypotheses=len(outside),
        # the distinct reasons, first ten: which hypothesis drawn cases fell outside, by how much
        outside_hypotheses=tuple(sorted(set(outside))[:10]),
        seconds=result.seconds,
        counterexample=str(counter_path) if counter_path else None,
        cases=tuple(CaseRecord.from_json(case_summary(r)) for r in cases),
        unconfirmed=tuple(CaseRecord.from_json(case_summary(r)) for r in result.unconfirmed),
        fits=tuple(FitRecord.from_json(f) for f in fits),
        series_file=str(Path(SERIES) / f"{run_id}.csv"),
        power=PowerRecord.from_json(controls.power) if controls.power is not None else None,
        positive_control=(
            ControlRecord.from_json(controls.control) if controls.control is not None else None
        ),
        added_parameters=tuple(controls.added) if controls.added is not None else None,
        origin=run_origin(claim, estimator),
        decided_on=_decided_on(claim, profile.name),
        hypotheses=tuple(
            HypothesisRecord(name=h.name, statement=h.statement, reference=h.reference)
            for h in claim.hypotheses
        ),
        readings=tuple(ReadingRecord.from_json(r.summary()) for r in result.readings),
        holding_readings=result.holding_readings,
        scale=claim.scale or None,
        # the code and the device that computed this record: a later run that reuses it says
        # when either differs from its own (theory_checks.claim_batch.reused_note)
        computed_by=ComputedByRecord.from_json(computed_by()),
        # the companion files' digests, so a reader can tell they are the ones written here
        files={relative: file_digest(data) for relative, data in files.items()},
    )


def computed_by() -> dict[str, str]:
    """``{"git_commit": ..., "device": ...}``: what a claim record computed here names as its
    provenance (``metadata.json`` names the last run's, which a resumed folder mixes)."""
    return {"git_commit": git_commit(), "device": str(default_device())}


def reused_from_elsewhere(records: Sequence[dict[str, Any]]) -> list[str]:
    """The run ids of ``records`` computed by other code or on another device than this
    process's (:func:`computed_by`), or before records named theirs. Nothing when this checkout's
    commit is unknown (an installed copy outside git): it cannot be compared."""
    here = computed_by()
    if here["git_commit"] == "unknown":
        return []
    out = []
    for record in records:
        there = record.get("computed_by") or {}
        commit = there.get("git_commit")
        if (commit != "unknown" and commit != here["git_commit"]) or there.get(
            "device", here["device"]
        ) != here["device"]:
            out.append(str(record["id"]))
    return out


def _decided_on(claim: Claim, profile: str) -> DecidedOnRecord | None:
    """For a claim this profile cannot decide: the profile that does, and the measured wall
    time of its command (the report says how to decide the claim)."""
    deciding = claim.deciding_profile(profile)
    if deciding is None:
        return None
    return DecidedOnRecord(profile=deciding, seconds=claim.decide_seconds)


def write_claim_files(files: ClaimFiles, out_dir: Path) -> Path:
    """Write ``files`` (:func:`render_claim_result`) under ``out_dir``, each atomically and in
    their order (the claim's JSON last); return the claim JSON's path."""
    last = None
    for relative, data in files.items():
        last = inside(out_dir, relative, "a claim run's file")  # a plugin's id is a name
        atomic_write_bytes(last, data)
    if last is None or last.parent.name != CLAIMS:
        raise ValueError("a claim run's files end with its claims/<run_id>.json")
    return last


def write_claim_result(
    result: ClaimResult, out_dir: Path, profile: Profile, controls: ControlRuns = NO_CONTROLS
) -> Path:
    """Write the claim's JSON, its series CSV and any counterexample, with ``controls`` beside
    the verdict (:func:`render_claim_result`); return the JSON path."""
    return write_claim_files(render_claim_result(result, profile, controls), out_dir)


def _rebuild_problem(spec: dict[str, Any]) -> Any:
    try:
        return from_spec(spec)
    except (KeyError, ValueError):
        return None


def is_done(claim: Claim, out_dir: Path, profile: Profile, run_id: str | None = None) -> bool:
    """Whether the claim's results file is there, whole, and of this profile and definition
    (a missing, torn, foreign or stale one: rerun the claim). What the claim checks (``about``,
    ``serves``) and its companions (``power_from``) are not in the fingerprint, which the
    mutation and calibration records share: a file that records others is stale too."""
    stem = run_id or claim.id
    record = read_fresh(
        out_dir / CLAIMS / f"{stem}.json",
        claim_fingerprint(claim, profile),
        profile.name,
        keys=("verdict", "as_expected"),
    )
    return (
        record is not None
        and claim_file_problem(record, out_dir, stem) is None
        and record["expected_verdicts"] == list(claim.expected_verdicts(profile.name))
        and (record["about"], record["serves"], record["power_from"])
        == (claim.about, claim.serves, list(claim.power_from))
    )


def estimator_entry(name: str) -> EstimatorEntryRecord | None:
    """What the report needs of the estimator a run checked: its entry's paper (a library's
    name for an adapter), reference (with the library's version) and whether it is one of the
    testbed's own (``builtin``: a plugin's or an adapter's runs stay out of the papers'
    counts)."""
    try:
        info = get_estimator(name)
    except KeyError:
        return None
    return EstimatorEntryRecord(
        paper=info.paper,
        reference=info.reference,
        builtin=any(b.name == name for b in BUILTIN),
    )


def write_metadata(
    out_dir: Path, profile: Profile, runs: Sequence[tuple[Claim, str]] | None = None
) -> None:
    """``metadata.json``: provenance, the profile, and what these results are about: every
    registered claim by default, or the given ``(claim, estimator)`` runs (``testbed verify``),
    each with its id and origin (the report lists the ones without results as "not
    checked")."""
    pairs = [(c, c.estimators[0]) for c in CLAIM_DB] if runs is None else runs
    registered = [
        {
            "id": c.id if e == c.estimators[0] else f"{c.id}@{e}",
            "paper": c.paper,
            "reference": c.reference,
            "kind": c.kind,
            "about": c.about,
            "statement": c.statement,
            "estimators": list(c.estimators),
            "estimator": e,
            "expected": c.expected,
            "decision": c.decision,
            "corrects": c.corrects,
            "origin": origin,
            "builtin": origin == BUILT_IN,
        }
        for c, e in pairs
        for origin in (run_origin(c, e),)
    ]
    meta = {
        **provenance(),
        "precision": precision_record(),
        "device": str(default_device()),
        "torch_threads": torch.get_num_threads(),  # testbed_app.threads chose it
        "profile": dataclasses.asdict(profile),
        "hypothesis": "seed = sha256(claim id), no database",
        "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "claims_registered": registered,
    }
    write_json(out_dir / METADATA, meta, indent=2)

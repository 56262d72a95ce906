"""Run claims on hypothesis-drawn cases, turn outcomes into verdicts, write results files.

A claim's check runs on cases drawn by its strategy under a fixed, derandomized hypothesis
profile, so the same profile gives the same cases and numbers. When a check fails, hypothesis
shrinks the case; the minimal failing case is saved as a counterexample (JSON spec + the arrays
that define the problem) and the verdict is "fails as stated".

Results are written per claim, atomically, as soon as the claim finishes; a rerun of the same
profile skips the claims whose results are already there, so an interrupted run resumes with
nothing lost. Layout under the results directory (``results/`` by default):

- ``metadata.json``: git commit, package versions, profile, seeds;
- ``claims/<run_id>.json``: claim metadata, verdict, per-case summaries, fits (``run_id`` is the
  claim id, or ``<claim_id>@<estimator>`` for a registered variant enrolled in the claim);
- ``series/<run_id>.csv``: tidy rows (claim, estimator, problem_id, seed, params, series,
  step_name, step, value, oracle_calls, comm_rounds) behind the plots;
- ``counterexamples/<run_id>.json`` and ``.npz``: the minimal failing case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, assume, example, given, seed, settings
from hypothesis.errors import Unsatisfiable

from problems import from_spec
from results_format.claim_file import read_claim_file
from results_format.layout import CLAIMS
from results_format.locks import holding

# git_commit and package_versions lived here; re-exported (``X as X``) for their importers
from results_format.provenance import git_commit as git_commit
from results_format.provenance import package_versions as package_versions
from results_format.verdicts import verdict_of, verdict_over_readings
from testbed import plugins
from testbed.estimators.validation import DivergenceError
from testbed.progress import Progress
from testbed.registry import BUILTIN, ESTIMATOR_DB, get_estimator
from theory_checks import determinism  # noqa: F401  (before any draw: seed-only draws)
from theory_checks.claim import Case, Claim, Measurement, NotMeasurable, PerProfile, Verdict

# the result types and files live in theory_checks.claim_results; re-exported here
from theory_checks.claim_results import (  # noqa: E402, F401
    SERIES_COLUMNS,
    CaseResult,
    ClaimFiles,
    ClaimResult,
    ReadingResult,
    case_summary,
    claim_fingerprint,
    is_done,
    render_claim_result,
    reused_from_elsewhere,
    write_claim_files,
    write_claim_result,
    write_metadata,
)
from theory_checks.decision import Design, Outcome, TestDecision, decide_tests, first_design
from theory_checks.hypotheses import HypothesisMargin, Reading, margins, rejection_reason

# the profiles live in theory_checks.profiles; re-exported here (``X as X``) for their importers
from theory_checks.profiles import PROFILES as PROFILES
from theory_checks.profiles import Profile as Profile
from theory_checks.profiles import claim_max_examples as claim_max_examples
from theory_checks.profiles import get_profile as get_profile
from theory_checks.profiles import per_profile as per_profile
from theory_checks.registry import BUILT_IN, BUILTIN_CLAIMS, CLAIM_DB, get_claim, run_origin
from theory_checks.units import SentByName, driver_dtype, run_in_process  # noqa: F401


def claim_seed(claim_id: str) -> int:
    """The seed of a claim's case draws: sha256 of its id (benchopt's RunContext.get_seed)."""
    return int.from_bytes(hashlib.sha256(claim_id.encode()).digest()[:4], "little")


def default_make(claim: Claim, estimator: str | None = None) -> Callable[..., Any]:
    """Builder of ``estimator`` (default: the claim's first estimator) from its registry entry."""
    return get_estimator(estimator or claim.estimators[0]).build


def enrolled_variants(claim: Claim) -> list[str]:
    """Registered entries that list ``claim`` without being named by it: variants added later.

    A variant is checked against every claim its registry entry lists, with no edit to the
    claim: this is what makes "one file plus one registry entry" enough to add one.
    """
    return [
        info.name
        for info in ESTIMATOR_DB
        if claim.id in info.enrolled_claims and info.name not in claim.estimators
    ]


def claim_runs(claims: Iterable[Claim]) -> list[tuple[Claim, str]]:
    """Every (claim, estimator) pair to check: the claim's own estimator, then its variants."""
    return [
        (claim, name)
        for claim in claims
        for name in [claim.estimators[0], *enrolled_variants(claim)]
    ]


def registered_runs() -> list[tuple[Claim, str]]:
    """What a results folder of ``testbed check`` is about (``metadata.json``; the report shows
    those without results as "not checked"): every registered claim on its own estimator, and
    its runs on the testbed's own variants enrolled in it, as ``testbed list`` lists them."""
    return [
        (claim, name)
        for claim, name in claim_runs(CLAIM_DB)
        if name == claim.estimators[0] or run_origin(claim, name) == BUILT_IN
    ]


def planned_cases(claim: Claim, profile: Profile) -> int:
    """Cases a run may measure: drawn ones (profile- and claim-capped) plus the known ones."""
    cap = claim_max_examples(claim, profile)
    drawn = profile.max_examples if cap is None else min(profile.max_examples, cap)
    return drawn + len(claim.examples)


def case_rate(claim: Claim, profile: Profile) -> float:
    """A statistical claim's per-case false-failure rate: its family-wise rate split by
    Bonferroni over every case the run may measure."""
    return claim.false_fail_rate / planned_cases(claim, profile)


def measure(
    claim: Claim, case: Case, make: Callable[..., Any], design: Design | None = None
) -> Measurement:
    """Run ``claim``'s check on ``case``; a statistical check also gets ``design`` (the first
    stage of calibration seed 0 at the claim's whole rate when none is given)."""
    if not claim.statistical:
        try:
            return claim.check(claim, case, make)
        except DivergenceError as error:
            # A deterministic claim states a finite value; an estimate that is not finite (the
            # estimator's entry point refuses to return it) fails the case, it is not a crash
            # of the run (a library's CG dividing 0 by 0 past convergence is one).
            return Measurement(
                math.inf,
                math.inf,
                False,
                "the estimate is finite",
                details={"diverged": str(error)},
            )
    if design is None:
        design = first_design(claim_seed(claim.id), 0, claim.false_fail_rate, "fast")
    return claim.check(claim, case, make, design)


def decide_case(
    claim: Claim, measurement: Measurement, rate: float
) -> tuple[Outcome, list[TestDecision]]:
    """A case's outcome: a deterministic part that fails fails the case; the statistical tests
    are decided at ``rate`` (:func:`theory_checks.decision.decide_tests`)."""
    if not claim.statistical:
        if measurement.tests:
            raise ValueError(f"{claim.id}: a deterministic check returned statistical tests")
        return ("holds" if measurement.passed else "fails"), []
    outcome, decisions = decide_tests(measurement.tests, rate)
    if not measurement.passed:
        outcome = "fails"
    elif not measurement.tests:
        raise ValueError(f"{claim.id}: a statistical check returned no test to decide")
    return outcome, decisions


def _case_result(
    case: Case,
    measurement: Measurement,
    outcome: Outcome = "holds",
    decisions: list[TestDecision] | None = None,
    design: Design | None = None,
    hypotheses: list[HypothesisMargin] | None = None,
) -> CaseResult:
    problem = case.problem
    spec = problem.spec() if hasattr(problem, "spec") else {"id": problem.id}
    return CaseResult(
        problem.id,
        spec,
        dict(case.params),
        measurement,
        outcome,
        list(decisions or []),
        design,
        hypotheses=list(hypotheses or []),
    )


class OutsideHypotheses(NotMeasurable):
    """A case outside one of the claim's hypotheses: it can neither pass nor refute the claim.
    Carries the margins (every one evaluated, the violated ones named in the message)."""

    def __init__(self, found: list[HypothesisMargin]) -> None:
        super().__init__(rejection_reason(found))
        self.margins = found


def hypothesis_margins(claim: Claim, case: Case) -> list[HypothesisMargin]:
    """The claim's hypotheses evaluated on ``case``; :class:`OutsideHypotheses` when the case
    violates one (the runner rejects it before measuring)."""
    found = margins(claim.hypotheses, case)
    if any(not m.holds for m in found):
        raise OutsideHypotheses(found)
    return found


def _case_key(case: Case) -> str:
    return f"{case.problem.id}|{json.dumps(dict(case.params), sort_keys=True, default=str)}"


def measure_and_decide(
    claim: Claim, case: Case, make: Callable[..., Any], design: Design | None, rate: float
) -> CaseResult:
    """Measure one case and decide it; a statistical first-stage failure is confirmed on a fresh
    stream with :data:`~theory_checks.decision.CONFIRMATION_SCALE` times the samples, and the
    case takes the confirmation's outcome (a failure is recorded only when both stages fail)."""
    found = hypothesis_margins(claim, case)
    if design is not None:
        design = design.for_case(_case_key(case))
    measurement = measure(claim, case, make, design)
    outcome, decisions = decide_case(claim, measurement, rate)
    result = _case_result(case, measurement, outcome, decisions, design, found)
    if claim.statistical and outcome == "fails" and design is not None:
        second_design = design.confirmation()
        second = measure(claim, case, make, second_design)
        second_outcome, second_decisions = decide_case(claim, second, rate)
        result.confirmation = _case_result(
            case, second, second_outcome, second_decisions, second_design, found
        )
        result.outcome = second_outcome
    return result


def run_claim(
    claim: Claim,
    profile: Profile,
    make: Callable[..., Any] | None = None,
    estimator: str | None = None,
    calibration_seed: int = 0,
) -> ClaimResult:
    """Check ``claim`` on cases drawn for ``profile`` and give its verdict
    (:func:`_check_claim`); a claim with readings is checked under each
    (:func:`_check_readings`)."""
    if claim.readings:
        return _check_readings(claim, profile, make, estimator, calibration_seed)
    return _check_claim(claim, profile, make, estimator, calibration_seed)


def with_reading(case: Case, reading: Reading) -> Case:
    """``case`` under ``reading``: the reading's parameters join the case's."""
    return Case(case.problem, {**case.params, **reading.params})


def under_reading(claim: Claim, reading: Reading) -> Claim:
    """The claim checked under one reading: the same cases (strategy and saved examples), each
    with the reading's parameters; no readings of its own."""

    def read(case: Case) -> Case:
        return with_reading(case, reading)

    def read_all(strategy: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: strategy().map(read)

    def saved(known: Callable[[], Case]) -> Callable[[], Case]:
        return lambda: read(known())

    strategy = claim.strategy
    cases = (
        PerProfile(read_all(strategy.fast), read_all(strategy.thorough))
        if isinstance(strategy, PerProfile)
        else read_all(strategy)
    )
    return dataclasses.replace(
        claim, readings=(), strategy=cases, examples=tuple(saved(known) for known in claim.examples)
    )


def _check_readings(
    claim: Claim,
    profile: Profile,
    make: Callable[..., Any] | None,
    estimator: str | None,
    calibration_seed: int,
) -> ClaimResult:
    """A claim with several readings: each is checked on the same cases. The claim "fails as
    stated" only when every reading fails; when some reading holds, the verdict is that
    reading's (and :attr:`ClaimResult.holding_readings` names the readings that hold); otherwise
    it is undecided. The cases recorded are those of the first holding reading (or the first
    reading's)."""
    results = [
        _check_claim(under_reading(claim, reading), profile, make, estimator, calibration_seed)
        for reading in claim.readings
    ]
    per_reading = [
        ReadingResult(
            reading.name,
            reading.statement,
            r.verdict,
            len(r.cases),
            r.counterexample,
            reading.expected,
        )
        for reading, r in zip(claim.readings, results, strict=True)
    ]
    # the rule a results file is checked against when read back (results_format.verdicts)
    verdict = verdict_over_readings(r.verdict for r in results)
    chosen = next(r for r in results if r.verdict == verdict)
    return dataclasses.replace(
        chosen,
        claim=claim,
        readings=per_reading,
        rejected=[reason for r in results for reason in r.rejected],
        seconds=sum(r.seconds for r in results),
    )


def _check_claim(
    claim: Claim,
    profile: Profile,
    make: Callable[..., Any] | None = None,
    estimator: str | None = None,
    calibration_seed: int = 0,
) -> ClaimResult:
    """Check ``claim`` on drawn cases and give its verdict.

    Deterministic claims: the first failing case is shrunk to a minimal one (when the claim
    allows) and saved; the verdict is "fails as stated", else "holds". Statistical claims
    (:mod:`theory_checks.decision`): each case is decided at the claim's rate split over the
    planned cases; a failure is confirmed on fresh seeds before it is recorded; no shrinking;
    the verdict is "fails as stated" on a confirmed failure, "undecided" when some case could not
    be decided (or none could be measured), else "holds".

    Args:
        claim: the claim.
        profile: how many cases to draw.
        make: estimator builder; the registry's by default (tests pass perturbed ones).
        estimator: registry name to check (default: the claim's first estimator).
        calibration_seed: selects the Monte Carlo streams of a statistical claim (0 for the
            recorded run; ``testbed calibrate`` runs 0..K-1); the drawn cases stay the same.
    """
    builder = make or default_make(claim, estimator)
    passed: list[CaseResult] = []
    failed: list[CaseResult] = []
    undecided: list[CaseResult] = []
    unconfirmed: list[CaseResult] = []
    rejected: list[str] = []
    rate = case_rate(claim, profile) if claim.statistical else None
    design = (
        first_design(claim_seed(claim.id), calibration_seed, rate, profile.name)
        if rate is not None
        else None
    )

    # The cases come from an explicit seed derived from the claim id (not from hypothesis's
    # derandomize, which hashes the test function's source and so changes with any edit here).
    drawn = planned_cases(claim, profile) - len(claim.examples)
    # a profile on which a claim draws no case runs its saved cases only (its explicit phase)
    phases = (
        (Phase.explicit,)
        if drawn < 1
        else (
            Phase.explicit,
            Phase.generate,
            *((Phase.shrink,) if claim.shrink and not claim.statistical else ()),
        )
    )

    @seed(claim_seed(claim.id))
    @settings(
        max_examples=max(drawn, 1),
        derandomize=False,
        database=None,
        deadline=None,
        phases=phases,
        print_blob=False,
        suppress_health_check=(
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ),
    )
    @given(claim.cases(profile.name))
    def property_(case: Case) -> None:
        if claim.statistical and failed:
            return  # a confirmed failure decides the claim; no more cases are measured
        try:
            result = measure_and_decide(claim, case, builder, design, rate or 0.0)
        except NotMeasurable as reason:
            rejected.append(str(reason))
            assume(False)
            return
        if result.confirmation is not None and result.outcome != "fails":
            unconfirmed.append(result)
        {"holds": passed, "fails": failed, "undecided": undecided}[result.outcome].append(result)
        if claim.statistical:
            return  # decided here; raising would make hypothesis replay the costly case
        m = result.measurement
        assert m.passed, (
            f"{claim.id}: measured {m.measured:.6g} vs {m.bound:.6g} "
            f"({m.relation}) on {result.problem_id}"
        )

    for known in claim.examples:
        property_ = example(known())(property_)
    start = time.perf_counter()
    counterexample = None
    try:
        property_()
    except AssertionError:
        if not failed:
            raise
    except Unsatisfiable:
        pass  # no drawn case could measure the claim: the verdict says undecided
    if failed:
        # hypothesis replays the minimal failing case last (deterministic claims)
        counterexample = failed[-1] if not claim.statistical else failed[0]
    seconds = time.perf_counter() - start
    # the rule a results file is checked against when read back (results_format.verdicts)
    outcomes = [r.outcome for r in passed + undecided] + (["fails"] if counterexample else [])
    verdict: Verdict = verdict_of(outcomes, bool(claim.corrects))  # type: ignore[assignment]
    unique: dict[str, CaseResult] = {}
    for r in passed:
        unique.setdefault(f"{r.problem_id}|{json.dumps(r.params, sort_keys=True)}", r)
    return ClaimResult(
        claim,
        verdict,
        list(unique.values()),
        counterexample,
        rejected,
        seconds,
        estimator or claim.estimators[0],
        profile.name,
        undecided,
        unconfirmed,
        rate,
        calibration_seed,
    )


# --------------------------------------------------------------------------- power, controls


def power_profile(claim: Claim, profile: Profile) -> Profile:
    """The profile a claim's perturbation runs on (its own cap on cases; its own profile when
    the check is decisive only there)."""
    assert claim.perturbation is not None
    base = PROFILES.get(claim.perturbation.profile or profile.name, profile)
    return Profile(base.name, min(base.max_examples, claim.perturbation.max_examples))


def run_power(claim: Claim, profile: Profile) -> dict[str, Any] | None:
    """Run the claim on its perturbation: ``caught`` when the verdict is "fails as stated"
    (confirmed, for a statistical claim). ``None`` when the claim declares none."""
    if claim.perturbation is None:
        return None
    p = claim.perturbation
    result = run_claim(claim, power_profile(claim, profile), make=p.build)
    ce = result.counterexample
    return {
        "name": p.name,
        "description": p.description,
        "verdict": result.verdict,
        "caught": result.verdict == "fails as stated",
        "profile": power_profile(claim, profile).name,
        "seconds": result.seconds,
        "counterexample": case_summary(ce) if ce else None,
    }


def run_positive_control(claim: Claim, profile: Profile) -> dict[str, Any] | None:
    """Run the check on the claim's positive control (a case inside its conditions where it
    holds): ``holds`` must be the outcome (under some reading of a claim with readings) for the
    check to be able to say both. A control outside the claim's hypotheses is no control."""
    if claim.positive_control is None:
        return None
    base = claim.positive_control()
    rate = claim.false_fail_rate if claim.statistical else 0.0
    design = (
        first_design(claim_seed(claim.id), 0, rate, profile.name) if claim.statistical else None
    )
    start = time.perf_counter()
    readings = claim.readings or (Reading("as stated", claim.statement),)
    outcomes, summaries = [], []
    for reading in readings:
        case = with_reading(base, reading)
        try:
            result = measure_and_decide(claim, case, default_make(claim), design, rate)
        except OutsideHypotheses as outside:
            # a control outside the paper's hypotheses shows nothing: it is no control
            return {
                "outcome": "outside hypotheses",
                "holds": False,
                "reason": str(outside),
                "seconds": time.perf_counter() - start,
                "hypotheses": [m.as_dict() for m in outside.margins],
            }
        outcomes.append(result.outcome)
        summaries.append(case_summary(result))
    # the control shows the check can say "holds": under some reading (a claim refuted under
    # every reading may have readings no case inside the hypotheses satisfies)
    holding = [i for i, o in enumerate(outcomes) if o == "holds"]
    outcome = "holds" if holding else ("undecided" if "undecided" in outcomes else "fails")
    return {
        "outcome": outcome,
        "holds": outcome == "holds",
        "seconds": time.perf_counter() - start,
        "case": summaries[holding[0] if holding else 0],
        **(
            {"readings": {r.name: o for r, o in zip(claim.readings, outcomes, strict=True)}}
            if claim.readings
            else {}
        ),
    }


def run_added_parameters(claim: Claim, profile: Profile) -> list[dict[str, Any]] | None:
    """The check at each declared value of each parameter the testbed adds to the paper's setting
    (:class:`~theory_checks.hypotheses.AddedParameter`), under every reading: the outcome at a
    value is "holds" when some reading holds, "fails" when every reading fails, else
    "undecided" (the rule of the verdict over readings); a case outside the hypotheses or not
    measurable says so. ``None`` when the claim declares none."""
    if not claim.added_parameters:
        return None
    rate = claim.false_fail_rate if claim.statistical else 0.0
    design = (
        first_design(claim_seed(claim.id), 0, rate, profile.name) if claim.statistical else None
    )
    readings = claim.readings or (Reading("as stated", claim.statement),)
    records = []
    for added in claim.added_parameters:
        outcomes = []
        for value in added.values:
            start = time.perf_counter()
            base = added.at(value)
            found: dict[str, Any] = {}
            for reading in readings:
                try:
                    result = measure_and_decide(
                        claim, with_reading(base, reading), default_make(claim), design, rate
                    )
                except NotMeasurable as reason:  # outside the hypotheses included
                    found[reading.name] = {"outcome": "not measured", "reason": str(reason)}
                    continue
                m = result.measurement
                found[reading.name] = {
                    "outcome": result.outcome,
                    "measured": m.measured,
                    "bound": m.bound,
                    "relation": m.relation,
                    **{key: m.details[key] for key in added.shown if key in m.details},
                }
            measured = [r["outcome"] for r in found.values() if r["outcome"] != "not measured"]
            outcome = (
                "not measured"
                if not measured
                else "holds"
                if "holds" in measured
                else "fails"
                if all(o == "fails" for o in measured)
                else "undecided"
            )
            shown = next(
                (r for r in found.values() if r["outcome"] == outcome), next(iter(found.values()))
            )
            outcomes.append(
                {
                    "value": value,
                    "outcome": outcome,
                    "measured": shown.get("measured"),
                    "bound": shown.get("bound"),
                    "shown": {key: shown[key] for key in added.shown if key in shown},
                    "problem_id": base.problem.id,
                    "readings": found,
                    "seconds": time.perf_counter() - start,
                }
            )
        records.append(
            {
                "name": added.name,
                "statement": added.statement,
                "checked": list(added.checked),
                "outcomes": outcomes,
            }
        )
    return records


def replay_counterexample(
    claim: Claim, saved: dict[str, Any], make: Callable[..., Any], attempt: int = 0
) -> CaseResult:
    """Rebuild a saved counterexample and decide it again; a statistical one on a fresh stream
    (never the one that produced it) at the claim's whole rate, with the confirmation's samples."""
    # JSON turns tuples (e.g. per-client local steps) into lists; the parameters were tuples.
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in saved["params"].items()}
    case = Case(from_spec(saved["spec"]), params)
    if not claim.statistical:
        return measure_and_decide(claim, case, make, None, 0.0)
    design = first_design(
        claim_seed(claim.id), 0, claim.false_fail_rate, str(saved.get("profile", "fast"))
    ).replay(attempt)
    return measure_and_decide(claim, case, make, design, claim.false_fail_rate)


def compute_claim_run(claim: Claim, estimator: str, profile: Profile) -> ClaimFiles:
    """Check one ``(claim, estimator)`` run on ``profile`` and give its results files, unwritten
    (the unit of work an executor runs: the driver writes them, :func:`write_claim_files`).

    The perturbation and the positive control are the claim check's, not the estimator's: they
    run once, with the claim's own estimator.
    """
    own = estimator == claim.estimators[0]
    with plugin_failures_named(claim, estimator):
        power = run_power(claim, profile) if own else None
        control = run_positive_control(claim, profile) if own else None
        added = run_added_parameters(claim, profile) if own else None
        try:
            result = run_claim(claim, profile, estimator=estimator)
        except (ValueError, RuntimeError, IndexError, TypeError) as error:
            if plugins.raised_in(error, _outside_code(claim, estimator)) is not None:
                raise  # the plugin's own code raised it: plugin_failures_named says so
            # an estimator whose output the check cannot use (say a trajectory one entry
            # longer: "operands could not be broadcast together with shapes (32,) (31,)"):
            # name the claim and the estimator beside what failed
            raise ClaimRunError(
                f"claim {claim.id} on estimator {estimator}: the check could not use the "
                f"estimator's output ({type(error).__name__}: {error}); it expects what "
                f"{claim.estimators[0]} returns, with the same shapes"
            ) from error
    return render_claim_result(result, profile, power, control, added)


@contextlib.contextmanager
def plugin_failures_named(claim: Claim, estimator: str) -> Iterator[None]:
    """Run a claim's check on ``estimator`` inside: an exception of a plugin's code (or of a
    ``module:object`` target's) becomes a :class:`ClaimRunError` of one line naming the
    plugin, the claim, the estimator, the exception and where it was raised (a
    ZeroDivisionError in a plugin's ``estimate`` ended in a traceback); on the testbed's own
    claim and estimator it is an internal error and keeps its traceback. Ctrl-C is never
    caught."""
    try:
        yield
    except ClaimRunError:
        raise
    except (Exception, SystemExit) as error:
        origin = run_origin(claim, estimator)
        if origin == BUILT_IN:
            raise
        raise ClaimRunError(_plugin_failure(claim, estimator, origin, error)) from error


def _outside_code(claim: Claim, estimator: str) -> set[str]:
    """The top-level module names of the code a run takes from outside the testbed: a plugin
    (or ``module:object``) estimator's class and builder, a plugin claim's functions."""
    names: set[str] = set()
    if estimator not in {info.name for info in BUILTIN}:
        info = get_estimator(estimator)
        names |= plugins.modules_of(info.cls, info.make)
    if claim.id not in {c.id for c in BUILTIN_CLAIMS}:
        names |= plugins.modules_of(
            *(
                getattr(claim, f.name)
                for f in dataclasses.fields(claim)
                if callable(getattr(claim, f.name))
            )
        )
    return names


def _plugin_failure(claim: Claim, estimator: str, origin: str, error: BaseException) -> str:
    """One line on a run whose plugin code raised: the plugin, the claim, the estimator, the
    exception and where it was raised."""
    outside = _outside_code(claim, estimator)
    where = plugins.raised_in(error, outside)
    source = (
        origin
        if origin.startswith("plugin")
        else f"code from outside the testbed ({', '.join(sorted(outside)) or 'unknown module'})"
    )
    return (
        f"{source}: claim {claim.id} on estimator {estimator} raised "
        f"{plugins.describe_failure(error)}"
        + (f" (at {where})" if where else " (in the testbed, on the plugin's code or output)")
        + "; the run is not recorded"
    )


class ClaimRunError(ValueError):
    """A claim run that could not be measured: names the claim, the estimator and the cause."""


class RegisteredClaimTask(SentByName):
    """A unit of work on one claim that pickles to a worker (a local process or a Ray node;
    :class:`~theory_checks.units.SentByName`): it carries the claim's id and finds the claim in
    the worker's registry. Subclasses are dataclasses with the fields ``claim_id``,
    ``default_dtype`` and ``claim`` (the driver's object)."""

    held = "claim"
    claim_id: str
    claim: Claim | None

    def resolved_claim(self) -> Claim:
        """The claim object: the driver's, or, in a worker, the registry's."""
        return self._resolved(get_claim, self.claim_id)


@dataclasses.dataclass
class ClaimRunTask(RegisteredClaimTask):
    """One ``(claim, estimator)`` run as a picklable unit of work
    (:class:`RegisteredClaimTask`): calling it gives the run's :data:`ClaimFiles`."""

    claim_id: str
    estimator: str
    profile: Profile
    default_dtype: str = "float64"
    claim: Claim | None = None

    def __call__(self) -> ClaimFiles:
        return compute_claim_run(self.resolved_claim(), self.estimator, self.profile)


def claim_run_task(claim: Claim, estimator: str, profile: Profile) -> ClaimRunTask:
    """The :class:`ClaimRunTask` of one run, with the driver's torch default dtype."""
    return ClaimRunTask(claim.id, estimator, profile, driver_dtype(), claim)


#: How an executor runs tasks: given the tasks, it yields ``(index, result)`` for each as it
#: finishes, in any order (``testbed_app.executors``); the default runs them one by one here.
Execute = Callable[[Sequence[ClaimRunTask]], Iterable[tuple[int, ClaimFiles]]]


def run_claims(
    claims: Iterable[Claim],
    out_dir: Path,
    profile: Profile,
    resume: bool = True,
    progress: bool = True,
    execute: Execute | None = None,
) -> list[dict[str, Any]]:
    """Run every claim (skipping finished ones when ``resume``), write results, return summaries;
    ``execute`` runs the claims' runs (in this process, one by one, by default)."""
    return run_claim_runs(claim_runs(claims), out_dir, profile, resume, progress, execute)


def run_claim_runs(
    runs: Sequence[tuple[Claim, str]],
    out_dir: Path,
    profile: Profile,
    resume: bool = True,
    progress: bool = True,
    execute: Execute | None = None,
    only_these: bool = False,
) -> list[dict[str, Any]]:
    """Run the given ``(claim, estimator)`` pairs (:func:`claim_runs`, or a subset of them such
    as ``testbed verify``'s), write their results, return their summaries. ``metadata.json``
    lists every registered claim (the report shows those without results as "not checked"),
    or, with ``only_these``, these runs alone (``testbed verify``: its results are about its
    target)."""
    return _run_claim_runs(
        runs, out_dir, profile, resume, progress, execute or run_in_process, only_these
    )


def _run_claim_runs(
    runs: Sequence[tuple[Claim, str]],
    out_dir: Path,
    profile: Profile,
    resume: bool,
    progress: bool,
    execute: Execute,
    only_these: bool = False,
) -> list[dict[str, Any]]:
    """The driver: skips the finished runs, hands the others to ``execute`` and writes each
    one's files as it comes back (so an interrupted run resumes with nothing lost), with one
    progress bar over every run."""
    run_ids = [
        claim.id if estimator == claim.estimators[0] else f"{claim.id}@{estimator}"
        for claim, estimator in runs
    ]
    # a second process checking one of these claims into this folder stops before any work
    with holding(
        out_dir,
        [(f"claim-{run_id}", f"the results of claim {run_id} in {out_dir}") for run_id in run_ids],
    ):
        write_metadata(out_dir, profile, runs if only_these else registered_runs())
        if resume:
            warn_untrusted(out_dir, run_ids)
        reused = {
            run_id
            for run_id, (claim, _) in zip(run_ids, runs, strict=True)
            if resume and is_done(claim, out_dir, profile, run_id)
        }
        pending = [
            (run_id, claim_run_task(claim, estimator, profile))
            for run_id, (claim, estimator) in zip(run_ids, runs, strict=True)
            if run_id not in reused
        ]
        _execute_and_write(pending, len(runs), out_dir, progress, execute)
    summaries = [
        json.loads((out_dir / CLAIMS / f"{run_id}.json").read_text()) for run_id in run_ids
    ]
    note = reused_note([s for s in summaries if s["id"] in reused], out_dir)
    if note:
        print(note, file=sys.stderr)
    return summaries


def warn_untrusted(out_dir: Path, run_ids: Sequence[str]) -> None:
    """One line on stderr for each of these runs' claim files that cannot be believed
    (:func:`results_format.claim_file.read_claim_file`: its schema, its re-derived outcomes,
    counts and verdict, its seal, its companion files), which the run measures again."""
    for run_id in run_ids:
        path = out_dir / CLAIMS / f"{run_id}.json"
        if path.is_file():
            _, reason = read_claim_file(path, out_dir)
            if reason is not None:
                print(f"testbed: warning: {path}: {reason}; rerun", file=sys.stderr)


def reused_note(reused: Sequence[dict[str, Any]], out_dir: Path) -> str | None:
    """One line when results reused from ``out_dir`` were computed by other code or on another
    device than this run's (:func:`~theory_checks.claim_results.reused_from_elsewhere`): the
    fingerprint covers a claim's definition, not the code that checks it, so a result from
    before a fix of the check stays fresh; ``--fresh`` recomputes it."""
    elsewhere = set(reused_from_elsewhere(reused))
    if not elsewhere:
        return None
    sources = sorted({_computed_where(s) for s in reused if s["id"] in elsewhere})
    names = sorted(elsewhere)
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return (
        f"testbed: note: {len(names)} claim result(s) in {out_dir} were reused from "
        f"{'; '.join(sources)} ({shown}); --fresh recomputes them"
    )


def _computed_where(record: dict[str, Any]) -> str:
    there = record.get("computed_by")
    if not there:
        return "a version of the testbed that did not record its commit"
    return f"commit {str(there.get('git_commit'))[:10]} on {there.get('device')}"


def _execute_and_write(
    pending: Sequence[tuple[str, ClaimRunTask]],
    total: int,
    out_dir: Path,
    progress: bool,
    execute: Execute,
) -> None:
    """Run the ``pending`` tasks through ``execute``, writing each one's files as it comes
    back, with one progress bar over the ``total`` runs."""
    # the bar names the claim running (executors start the tasks in this order)
    with Progress(
        total=total,
        initial=total - len(pending),
        desc="claims",
        unit="claim",
        enabled=progress,
        names=[run_id for run_id, _ in pending],
    ) as bar:
        for index, files in execute([task for _, task in pending]):
            write_claim_files(files, out_dir)
            bar.finish(pending[index][0])

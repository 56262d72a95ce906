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

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import assume
from hypothesis import example
from hypothesis import given
from hypothesis import seed
from hypothesis import settings
from hypothesis.errors import Unsatisfiable

from problems import from_spec
from results_format.verdicts import verdict_of
from results_format.verdicts import verdict_over_readings
from testbed.estimators.validation import DivergenceError
from testbed.registry import ESTIMATOR_DB
from testbed.registry import get_estimator
from theory_checks import determinism  # noqa: F401  (before any draw: seed-only draws)
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import PerProfile
from theory_checks.claim import Verdict
from theory_checks.claim_results import CaseResult

# What a caller of run_claim takes with it: the profile it passes (theory_checks.profiles) and
# the result it gets, with how it is written and fingerprinted (theory_checks.claim_results).
from theory_checks.claim_results import ClaimResult as ClaimResult
from theory_checks.claim_results import ReadingResult
from theory_checks.claim_results import claim_fingerprint as claim_fingerprint
from theory_checks.claim_results import write_claim_result as write_claim_result
from theory_checks.decision import Design
from theory_checks.decision import Outcome
from theory_checks.decision import TestDecision
from theory_checks.decision import decide_tests
from theory_checks.decision import first_design
from theory_checks.hypotheses import HypothesisMargin
from theory_checks.hypotheses import Reading
from theory_checks.hypotheses import margins
from theory_checks.hypotheses import rejection_reason
from theory_checks.profiles import PROFILES as PROFILES
from theory_checks.profiles import Profile as Profile
from theory_checks.profiles import claim_max_examples as claim_max_examples
from theory_checks.profiles import get_profile as get_profile
from theory_checks.registry import BUILT_IN
from theory_checks.registry import CLAIM_DB
from theory_checks.registry import run_origin


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
    claim: Claim,
    case: Case,
    make: Callable[..., Any],
    design: Design | None,
    rate: float,
    found: Callable[[Claim, Case], list[HypothesisMargin]] = hypothesis_margins,
) -> CaseResult:
    """Measure one case and decide it; a statistical first-stage failure is confirmed on a fresh
    stream with :data:`~theory_checks.decision.CONFIRMATION_SCALE` times the samples, and the
    case takes the confirmation's outcome (a failure is recorded only when both stages fail).
    ``found`` evaluates the claim's hypotheses on the case (:func:`hypothesis_margins`, or the
    same margins computed once for several calibration seeds)."""
    margins_found = found(claim, case)
    if design is not None:
        design = design.for_case(_case_key(case))
    measurement = measure(claim, case, make, design)
    outcome, decisions = decide_case(claim, measurement, rate)
    result = _case_result(case, measurement, outcome, decisions, design, margins_found)
    if claim.statistical and outcome == "fails" and design is not None:
        second_design = design.confirmation()
        second = measure(claim, case, make, second_design)
        second_outcome, second_decisions = decide_case(claim, second, rate)
        result.confirmation = _case_result(
            case, second, second_outcome, second_decisions, second_design, margins_found
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
    """Check ``claim`` on cases drawn for ``profile`` and give its verdict (:func:`check_run`).

    Args:
        claim: the claim.
        profile: how many cases to draw.
        make: estimator builder; the registry's by default (tests pass perturbed ones).
        estimator: registry name to check (default: the claim's first estimator).
        calibration_seed: selects the Monte Carlo streams of a statistical claim (0 for the
            recorded run; ``testbed calibrate`` runs 0..K-1); the drawn cases stay the same.
    """
    return check_run(ClaimRun(claim, profile, make, estimator, calibration_seed))


@dataclasses.dataclass(frozen=True)
class ClaimRun:
    """What one check of a claim is (the arguments of :func:`run_claim`): the claim, the
    profile whose cases it draws, the estimator's builder (``make``, or the registry's
    ``estimator``'s) and the calibration seed of its Monte Carlo streams."""

    claim: Claim
    profile: Profile
    make: Callable[..., Any] | None
    estimator: str | None
    calibration_seed: int

    def under(self, reading: Reading) -> ClaimRun:
        """This run of the claim under one of its readings (:func:`under_reading`)."""
        return dataclasses.replace(self, claim=under_reading(self.claim, reading))

    def seeded(self, calibration_seed: int) -> ClaimRun:
        """This run under another calibration seed: the same cases, other Monte Carlo streams."""
        return dataclasses.replace(self, calibration_seed=int(calibration_seed))


def check_run(run: ClaimRun) -> ClaimResult:
    """A claim's verdict (:func:`check_drawn_cases`); a claim with readings is checked under
    each (:func:`over_readings`)."""
    if run.claim.readings:
        return over_readings(
            run.claim, [check_drawn_cases(run.under(r)) for r in run.claim.readings]
        )
    return check_drawn_cases(run)


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


def over_readings(claim: Claim, results: list[ClaimResult]) -> ClaimResult:
    """A claim with several readings, from its result under each (``results``, in the order of
    ``claim.readings``, on the same cases). The claim "fails as stated" only when every reading
    fails; when some reading holds, the verdict is that reading's (and
    :attr:`ClaimResult.holding_readings` names the readings that hold); otherwise it is
    undecided. The cases recorded are those of the first holding reading (or the first
    reading's)."""
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


class CaseTally:
    """The cases of one run (:class:`ClaimRun`) as they are decided, by outcome, and the run's
    :class:`ClaimResult` from them.

    Deterministic claims: the first failing case is shrunk to a minimal one (when the claim
    allows) and saved; the verdict is "fails as stated", else "holds". Statistical claims
    (:mod:`theory_checks.decision`): each case is decided at the claim's rate split over the
    planned cases; a failure is confirmed on fresh seeds before it is recorded; no shrinking;
    the verdict is "fails as stated" on a confirmed failure, "undecided" when some case could not
    be decided (or none could be measured), else "holds".
    """

    def __init__(self, run: ClaimRun) -> None:
        self.run = run
        claim = run.claim
        self.builder = run.make or default_make(claim, run.estimator)
        self.passed: list[CaseResult] = []
        self.failed: list[CaseResult] = []
        self.undecided: list[CaseResult] = []
        self.unconfirmed: list[CaseResult] = []
        self.rejected: list[str] = []
        self.rate = case_rate(claim, run.profile) if claim.statistical else None
        self.design = (
            first_design(claim_seed(claim.id), run.calibration_seed, self.rate, run.profile.name)
            if self.rate is not None
            else None
        )

    def visit(
        self,
        case: Case,
        found: Callable[[Claim, Case], list[HypothesisMargin]] = hypothesis_margins,
    ) -> bool:
        """Measure and decide ``case`` (:func:`measure_and_decide`, ``found`` its margins);
        False when it cannot be measured (the reason joins ``rejected``). A deterministic case
        that fails raises AssertionError (hypothesis then shrinks it)."""
        claim = self.run.claim
        if claim.statistical and self.failed:
            return True  # a confirmed failure decides the claim; no more cases are measured
        try:
            result = measure_and_decide(
                claim, case, self.builder, self.design, self.rate or 0.0, found
            )
        except NotMeasurable as reason:
            self.rejected.append(str(reason))
            return False
        if result.confirmation is not None and result.outcome != "fails":
            self.unconfirmed.append(result)
        {"holds": self.passed, "fails": self.failed, "undecided": self.undecided}[
            result.outcome
        ].append(result)
        m = result.measurement
        # a statistical case is decided here: raising would make hypothesis replay the costly case
        assert claim.statistical or m.passed, (
            f"{claim.id}: measured {m.measured:.6g} vs {m.bound:.6g} "
            f"({m.relation}) on {result.problem_id}"
        )
        return True

    def result(self, seconds: float) -> ClaimResult:
        """The run's result from the cases visited: its counterexample is a statistical claim's
        first, confirmed failure (no shrinking) or a deterministic claim's last, the minimal
        case hypothesis replays last."""
        claim, run = self.run.claim, self.run
        counterexample = None
        if self.failed:
            counterexample = self.failed[0] if claim.statistical else self.failed[-1]
        # the rule a results file is checked against when read back (results_format.verdicts)
        outcomes = [r.outcome for r in self.passed + self.undecided]
        outcomes += ["fails"] if counterexample else []
        verdict: Verdict = verdict_of(outcomes, bool(claim.corrects))  # type: ignore[assignment]
        return ClaimResult(
            claim,
            verdict,
            _distinct(self.passed),
            counterexample,
            self.rejected,
            seconds,
            run.estimator or claim.estimators[0],
            run.profile.name,
            self.undecided,
            self.unconfirmed,
            self.rate,
            run.calibration_seed,
        )


def check_drawn_cases(run: ClaimRun) -> ClaimResult:
    """Check ``run``'s claim on the cases :func:`drawn_cases` draws and give its verdict
    (:class:`CaseTally`)."""
    tally = CaseTally(run)

    @drawn_cases(run.claim, run.profile)
    def property_(case: Case) -> None:
        if not tally.visit(case):
            assume(False)

    start = time.perf_counter()
    search(property_, tally.failed)
    return tally.result(time.perf_counter() - start)


def search(check: Callable[[], None], failed: list[CaseResult]) -> None:
    """Run ``check`` over its cases (:func:`drawn_cases`); a deterministic failure hypothesis
    raises after shrinking is already in ``failed``."""
    try:
        check()
    except AssertionError:
        if not failed:
            raise
    except Unsatisfiable:
        pass  # no drawn case could measure the claim: the verdict says undecided


def _distinct(passed: list[CaseResult]) -> list[CaseResult]:
    """The passing cases, each problem and parameters once (hypothesis may replay a case)."""
    unique: dict[str, CaseResult] = {}
    for r in passed:
        unique.setdefault(f"{r.problem_id}|{json.dumps(r.params, sort_keys=True)}", r)
    return list(unique.values())


def drawn_cases(claim: Claim, profile: Profile) -> Callable[[Callable[..., None]], Any]:
    """The decorator that runs a check on the claim's cases: its saved ones (``claim.examples``,
    the explicit phase), then those drawn from its strategy for ``profile``, capped by the
    profile and the claim, shrunk when the claim allows (deterministic claims only).

    The cases come from an explicit seed derived from the claim id (not from hypothesis's
    derandomize, which hashes the test function's source and so changes with any edit here)."""
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

    def decorate(check: Callable[..., None]) -> Any:
        run = seed(claim_seed(claim.id))(
            settings(
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
            )(given(claim.cases(profile.name))(check))
        )
        for known in claim.examples:
            run = example(known())(run)
        return run

    return decorate


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

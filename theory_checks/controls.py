"""What a claim run checks beside the claim's cases: its perturbation (the power run: a
realistic bug the check must catch), its positive control (a case inside its conditions where
it holds: the check can say both) and the parameters the testbed adds to the paper's setting,
each measured at its declared values. The claim's own estimator runs them, once per claim.
"""

from __future__ import annotations

import time
from typing import Any

from theory_checks.claim import Claim
from theory_checks.claim import NotMeasurable
from theory_checks.claim_results import case_summary
from theory_checks.decision import first_design
from theory_checks.hypotheses import Reading
from theory_checks.profiles import PROFILES
from theory_checks.profiles import Profile
from theory_checks.runner import OutsideHypotheses
from theory_checks.runner import claim_seed
from theory_checks.runner import default_make
from theory_checks.runner import measure_and_decide
from theory_checks.runner import run_claim
from theory_checks.runner import with_reading


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


__all__ = ["power_profile", "run_added_parameters", "run_positive_control", "run_power"]

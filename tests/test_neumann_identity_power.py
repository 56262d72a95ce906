"""Found while verifying the example plugin: `classical.neumann.error_identity` held for an
estimator with one Neumann term too few, because on its fast profile's 8 cases the Neumann error
vanishes whatever N (minimax problems: grad_y f(x, y*) = 0; kappa ~ 1: I - lambda H ~ 0). Those
cases are now rejected as unable to test the claim, and the off-by-one is caught.

The same held for `classical.itd.error_identity` (flagged last session, measured here): on the
fast profile an ITD one unrolled step short passed 4 of its 5 cases (minimax at kappa = 1 and
compositional problems, whose identity inner Hessian makes beta H = I: every T >= 1 gives the
same ITD); the claim still failed it on the fifth. Cases whose identity does not change between
T - 1, T and T + 1 are now rejected.

And for `aggitd.alg1.per_index_identity`: with kappa = 1 and Q < N the indirect term, and with it
the importance weight lambda (N + 1) the identity is about, vanishes; an estimator weighting Q by
lambda N passed 14 fast-profile cases before one caught it. Those cases are now rejected."""

from __future__ import annotations

import dataclasses

import pytest

from problems import QuadraticBilevel
from testbed.estimators.solvers import Neumann
from testbed.registry import get_estimator
from theory_checks.aggitd.alg1 import check_per_index_identity
from theory_checks.claim import Case
from theory_checks.claim import NotMeasurable
from theory_checks.registry import get_claim
from theory_checks.runner import get_profile
from theory_checks.runner import run_claim


def _one_term_short(**kw):
    est = get_estimator("aid-neumann").build(**kw)
    solver = est.linear_solver
    return dataclasses.replace(
        est, linear_solver=Neumann(max(solver.terms - 1, 1), solver.step_size)
    )


def test_an_off_by_one_in_the_neumann_terms_fails_the_identity():
    claim = get_claim("classical.neumann.error_identity")
    result = run_claim(claim, get_profile("fast"), make=_one_term_short)
    assert result.verdict == "fails as stated"
    assert any("below what the identity resolves" in r for r in result.rejected)


def test_the_correct_estimator_still_holds_on_cases_that_test_it():
    result = run_claim(get_claim("classical.neumann.error_identity"), get_profile("fast"))
    assert result.verdict == "holds" and len(result.cases) >= 8
    assert all(c.measurement.passed for c in result.cases)


def test_itd_cases_that_cannot_tell_t_from_t_minus_one_are_rejected():
    from theory_checks.classical.itd import ITD_ONE_STEP_SHORT

    claim = get_claim("classical.itd.error_identity")
    correct = run_claim(claim, get_profile("fast"))
    assert correct.verdict == "holds" and len(correct.cases) >= 8
    assert any("an off-by-one in T would pass" in r for r in correct.rejected)
    short = run_claim(claim, get_profile("fast"), make=ITD_ONE_STEP_SHORT.build)
    assert short.verdict == "fails as stated"
    assert not [c for c in short.cases if c.measurement.passed]  # was 4 of 5 cases


def test_aggitd_cases_whose_indirect_term_vanishes_are_rejected():
    claim = get_claim("aggitd.alg1.per_index_identity")
    correct = run_claim(claim, get_profile("fast"))
    assert correct.verdict == "holds once corrected" and len(correct.cases) >= 8
    # with Assumption 2's joint L_g, lambda H = I (kappa = 1) needs no cross term, so the fast
    # draws no longer hit a vanishing indirect term; a case without a cross term (J = 0) shows
    # the rejection
    no_cross = QuadraticBilevel.random(1, 1, 1, 1.0, seed=0, cross_scale=0.0)
    with pytest.raises(NotMeasurable, match="the importance weight is untested"):
        check_per_index_identity(
            claim, Case(no_cross, {"point_seed": 24}), get_estimator("aggitd").build
        )
    weight_n = run_claim(claim, get_profile("fast"), make=claim.perturbation.build)
    assert weight_n.verdict == "fails as stated"
    assert not [c for c in weight_n.cases if c.measurement.passed]  # was 14 cases

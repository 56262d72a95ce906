"""The claims the mutation review found unable to fail on realistic bugs (issue 22), each
reproduced with the bug from the catalogue (:mod:`theory_checks.mutants`).

Degenerate cases counted as passes (the figures before the fix, fast profile): an AID-CG one
iteration short passed 4 of the 8 cases of ``classical.cg.exact_after_dim_y`` (compositional
H = I and minimax grad_y f(x, y*) = 0: CG is exact early); a FedInn with one local step too
many passed 4 of 8 of ``fednest.compositional.one_call_exact`` (beta = 1.0: one local step
reaches y*); an HGP with M + 1 iterations passed 1 of 8 of
``hgp.exact_averaging.error_identity`` (kappa = 1 at eta = 1/L; and at M = 0 a halved eta passed
2 of 8); the corrected FedMCO maps that
evaluate the paper's products passed 4 of 8 (44 of 59 thorough) of
``fedmsa.mco.exact_semantics_fixed_point_stationary`` (homogeneous Jacobians); an LFedOut one
local Neumann term short passed both fast cases of ``fednest.lfednest.heterogeneity_bias``
(kappa = 1: A_i^N below resolution). Found by the same scan of every exact identity and count
claim against the catalogue: ``aggitd.prop1.mean_identity``'s N = 0 cases passed a forgotten
weight (1 of 4), and ``fednest.rounds.random_truncation``'s two random draws of N' passed a
FedIHGP drawing from 0..N on 4 of 8 cases. Those cases are now rejected with their reason (the
last one reads the largest draw instead).

Loose bounds (before: every case passed): a halved Neumann step passed
``hgp.theorem1.high_probability_bound`` (5 of 5) and ``aggitd.thm1.rate_in_K``; a FedIHGP with
N + 1 terms passed ``fednest.ihgp.variance_linear_in_n`` (8 of 8); a halved lambda and the
weight lambda N passed ``aggitd.cor1.floor_kept`` (4 of 4 each); a halved or doubled beta passed
``fedmsa.lemma_b1.contraction_corrected`` (8 of 8). Each claim now has a companion measurement
of the same run that fails on the bug.
"""

from __future__ import annotations

import pytest

from tests._power import correct_run
from tests._power import outcomes_on
from tests._power import passes_on_accepted_cases
from theory_checks.mutants import get_mutant
from theory_checks.registry import get_claim
from theory_checks.runner import get_profile
from theory_checks.runner import run_claim

FAST = get_profile("fast")


def _builder(mutant: str, entry: str):
    return get_mutant(mutant).builds[entry]


def _assert_each_fails_every_case(correct, mutants: tuple[str, ...], entry: str) -> None:
    """Each of ``mutants`` (its build for estimator ``entry``) fails on every case the correct
    run measured."""
    for mutant in mutants:
        outcomes = outcomes_on(correct, _builder(mutant, entry))
        assert all(o == "fails" for _, o in outcomes), (mutant, outcomes)


@pytest.mark.parametrize(
    ("claim_id", "mutant", "entry", "reason"),
    [
        (
            "classical.cg.exact_after_dim_y",
            "aid-cg.iterations_minus_one",
            "aid-cg",
            "CG is exact here after dim_y - 1 iterations",
        ),
        (
            "fednest.compositional.one_call_exact",
            "fedinn.local_step_extra",
            "fednest",
            "a local step too many or too few would pass",
        ),
        (
            "fedmsa.mco.exact_semantics_fixed_point_stationary",
            "fedmsa-mco.paper_products",
            "fedmsa-mco",
            "cannot tell the correction from the original",
        ),
    ],
    ids=("cg", "one_call", "mco"),
)
def test_cases_that_cannot_tell_the_bug_are_rejected(claim_id, mutant, entry, reason):
    correct = correct_run(get_claim(claim_id), FAST, entry)
    outcomes = outcomes_on(correct, _builder(mutant, entry))
    assert len(outcomes) >= 8 and all(o == "fails" for _, o in outcomes), outcomes
    assert any(reason in r for r in correct.rejected), correct.rejected


def test_hgp_identity_cases_that_cannot_tell_m_or_eta_are_rejected():
    """M + 1 and M - 1 fail on every accepted case; so do a halved eta and a sign-flipped
    v-update, which passed the M = 0 cases (no iteration) before those were rejected too."""
    correct = correct_run(get_claim("hgp.exact_averaging.error_identity"), FAST)
    assert len(correct.cases) >= 8
    assert any("an iteration too many or too few would pass" in r for r in correct.rejected)
    mutants = ("hgp.terms_plus_one", "hgp.terms_minus_one", "hgp.step_halved", "hgp.v_sign_flipped")
    _assert_each_fails_every_case(correct, mutants, "hgp-exact-averaging")


def test_aggitd_mean_identity_rejects_n_zero_and_reads_the_index_support():
    """N = 0 cases (no lower round, weight lambda) passed a forgotten weight, a halved beta and
    a Q drawn from 0..N - 1 (1 of 4 fast cases each); the index draw was never read."""
    correct = correct_run(get_claim("aggitd.prop1.mean_identity"), FAST)
    assert any("N = 0" in r for r in correct.rejected) or all(
        c.measurement.details["inner_steps"] > 0 for c in correct.cases
    )
    mutants = ("aggitd.weight_forgotten", "aggitd.inner_step_halved", "aggitd.index_draw_short")
    _assert_each_fails_every_case(correct, mutants, "aggitd")


def test_fednest_random_truncation_count_reads_the_top_of_the_draw():
    """Two random draws of N' reached N (an off-by-one in the draw range) on 4 of 8 fast cases
    only; the run at the largest draw reads it on every case."""
    correct = correct_run(get_claim("fednest.rounds.random_truncation"), FAST)
    outcomes = outcomes_on(correct, _builder("fedout.ihgp_terms_plus_one", "fednest"))
    assert len(outcomes) >= 8 and all(o == "fails" for _, o in outcomes), outcomes


def test_lfednest_fails_a_local_series_a_term_short_on_every_case_where_there_is_one():
    """N - 1 terms at N = 1 is no bug (the mutant runs 1 term): every other accepted case fails
    it. (With A1's joint l_{g,1} the drawn cases no longer have A_i ~ 0; the rejection of cases
    whose formula is the same at N - 1 or N + 1 stays for those that would.)"""
    correct = correct_run(get_claim("fednest.lfednest.heterogeneity_bias"), FAST)
    outcomes = outcomes_on(correct, _builder("lfedout.terms_minus_one", "lfednest"))
    assert outcomes and all((o == "holds") == (p["neumann_terms"] == 1) for p, o in outcomes)


@pytest.mark.parametrize(
    ("claim_id", "mutant", "entry"),
    [
        ("fednest.ihgp.variance_linear_in_n", "fedihgp.terms_plus_one", "fedihgp"),
        ("aggitd.cor1.floor_kept", "aggitd.neumann_step_halved", "fbo-aggitd"),
        ("aggitd.cor1.floor_kept", "aggitd.weight_lambda_n", "fbo-aggitd"),
        ("aggitd.cor1.floor_kept", "aggitd.extra_lower_round", "fbo-aggitd"),
        ("fedmsa.lemma_b1.contraction_corrected", "fedmsa.inner_step_halved", "fedmsa"),
    ],
)
def test_a_loose_claim_fails_the_bug_on_every_case_through_its_companion(claim_id, mutant, entry):
    passed, accepted = passes_on_accepted_cases(
        get_claim(claim_id), _builder(mutant, entry), FAST, entry
    )
    assert accepted >= 4 and passed == 0, (claim_id, mutant, passed, accepted)


@pytest.mark.parametrize(
    ("claim_id", "mutant", "entry"),
    [
        ("hgp.theorem1.high_probability_bound", "hgp.step_halved", "hgp-stochastic"),
        ("aggitd.thm1.rate_in_K", "aggitd.neumann_step_halved", "fbo-aggitd"),
    ],
)
def test_a_loose_statistical_claim_fails_the_bug(claim_id, mutant, entry):
    """The companion is exact (deterministic), so the refutation is confirmed on fresh seeds
    without sampling: the correct code's verdict is tested in theory_checks/test_claims.py."""
    result = run_claim(get_claim(claim_id), FAST, make=_builder(mutant, entry), estimator=entry)
    assert result.verdict == "fails as stated", result.verdict
    ce = result.counterexample
    assert ce is not None and ce.confirmation is not None and ce.confirmation.outcome == "fails"

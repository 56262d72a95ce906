"""Each classical claim check fails on a deliberately wrong estimator (the checks can fail).

A perturbed builder is handed to the check in place of the registry's; the runner must then
return "fails as stated" with a counterexample, and the counterexample must be saved as data that
rebuilds the failing problem.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from testbed import ConjugateGradient, GradientDescent, IterativeDifferentiation, Neumann, Oracles
from testbed._estimators.classical import ExactHypergradient, ImplicitDifferentiation
from testbed.registry import get_estimator
from tests._replay import assert_perturbation_detected
from theory_checks.registry import get_claim
from theory_checks.runner import Profile, run_claim

PROFILE = Profile("perturbation", max_examples=5)


def _short_cg(**kw):
    est = get_estimator("aid-cg").build(**kw)
    return dataclasses.replace(
        est, linear_solver=ConjugateGradient(max(est.linear_solver.iterations - 1, 0)))


def _slow_gd(**kw):
    est = get_estimator("aid-neumann").build(**kw)
    inner = est.inner
    return dataclasses.replace(est, inner=GradientDescent(inner.steps, 0.8 * inner.step_size))


def _itd_missing_last_jvp(**kw):
    est = get_estimator("itd").build(**kw)

    @dataclasses.dataclass(frozen=True)
    class Truncated(IterativeDifferentiation):
        def estimate(self, problem, x, state, rng):
            short = IterativeDifferentiation(GradientDescent(max(self.inner.steps - 1, 0),
                                                             self.inner.step_size))
            return short.estimate(problem, x, state, rng)

    return Truncated(est.inner, est.batch_size)


def _itd_flipped_indirect(**kw):
    """ITD whose indirect part has the wrong sign: direct - indirect instead of direct + it."""
    est = get_estimator("itd").build(**kw)

    @dataclasses.dataclass(frozen=True)
    class Flipped(IterativeDifferentiation):
        def estimate(self, problem, x, state, rng):
            out = super().estimate(problem, x, state, rng)
            clients = torch.arange(problem.n_clients)
            direct = Oracles(problem).grad_outer(x, out.aux["y"], clients)[0].mean(0)
            return out._replace(value=2 * direct - out.value)

    return Flipped(est.inner, est.batch_size)


def _biased_exact(**kw):
    @dataclasses.dataclass(frozen=True)
    class Biased(ExactHypergradient):
        def estimate(self, problem, x, state, rng):
            out = super().estimate(problem, x, state, rng)
            return out._replace(value=out.value * (1 + 1e-4))

    return Biased()


def _neumann_wrong_step(**kw):
    est = get_estimator("aid-neumann").build(**kw)
    lam = est.linear_solver.step_size
    return ImplicitDifferentiation(est.inner, Neumann(est.linear_solver.terms, 0.9 * lam),
                                   est.batch_size)


PERTURBATIONS = {
    "classical.neumann.error_identity": _neumann_wrong_step,
    "classical.neumann.error_bound": _neumann_wrong_step,
    "classical.neumann.decay_rate": _neumann_wrong_step,
    "classical.cg.exact_after_dim_y": _short_cg,
    "classical.gd.linear_rate": _slow_gd,
    "classical.itd.error_identity": _itd_missing_last_jvp,
    "classical.itd.error_bound": _itd_flipped_indirect,
    "classical.exact.finite_differences": _biased_exact,
}


def test_every_claim_has_a_perturbation():
    from theory_checks.registry import CLAIM_DB

    assert {c.id for c in CLAIM_DB if c.paper == "Classical"} == set(PERTURBATIONS)


@pytest.mark.parametrize("claim_id", sorted(PERTURBATIONS))
def test_perturbed_estimator_fails_the_check(claim_id, tmp_path):
    claim = get_claim(claim_id)
    assert_perturbation_detected(claim, PERTURBATIONS[claim_id], tmp_path, PROFILE)


def test_unperturbed_checks_pass_on_the_same_profile():
    claim = get_claim("classical.neumann.error_identity")
    assert run_claim(claim, PROFILE).verdict == "holds"

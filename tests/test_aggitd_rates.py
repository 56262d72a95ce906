"""The AggITD rate, errata and scaling checks of theory_checks/aggitd_rates.py can fail.

For each claim the testbed expects to hold, a deliberately wrong estimator or algorithm makes
the runner answer "fails as stated" with a saved, replayable counterexample. For the refuted
paper statement, a builder under which the statement is true makes the same check pass.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from testbed._algorithms.aggitd import AggITDState, FBOAggITD
from testbed._estimators.aggitd import AggITD
from testbed._estimators.base import InnerState
from testbed._federation.local import local_round
from testbed.oracles import Oracles
from tests._replay import assert_perturbation_detected, assert_saved_and_replays
from theory_checks import aggitd_rates
from theory_checks.aggitd_rates import FixedIndex, interval_meets
from theory_checks.claim import Fit
from theory_checks.registry import get_claim
from theory_checks.runner import Profile, run_claim

PROFILE = Profile("perturbation", max_examples=5)


@dataclasses.dataclass(frozen=True)
class _ScaledIndirect(AggITD):
    """AggITD whose indirect part is multiplied by ``factor`` (a mis-scaled HessIV)."""

    factor: float = 1.0

    def estimate_in(self, ctx, x, state):
        value, new_state, aux = super().estimate_in(ctx, x, state)
        direct = Oracles(ctx.problem).grad_outer(x, aux["y"], aux["clients"])[0].mean(0)
        return direct + self.factor * (value - direct), new_state, aux


@dataclasses.dataclass(frozen=True)
class _UnscaledUpper(FBOAggITD):
    """One-Round-Upper with local step ``alpha * step_factor`` (not ``alpha / tau_i``)."""

    step_factor: str = "one"

    def step(self, ctx, state):
        h, inner, aux = self.estimator.estimate_in(ctx, state.x, InnerState(state.y))
        y = inner.y
        tau = self.local_steps
        alpha = self.outer_step_size * (tau if self.step_factor == "tau" else 1)

        def direct(points, active, batch):
            return ctx.oracles.grad_outer(points, y, active, batch)[0]

        x_next = local_round(ctx, state.x, aux["clients"], direct, tau, alpha,
                             global_direction=h, scale_by_steps=False)
        return AggITDState(x_next, y, h, aux["index"])


@dataclasses.dataclass(frozen=True)
class _DividesByM(FBOAggITD):
    """The server divides the clients' summed x-update by M instead of |S|."""

    def step(self, ctx, state):
        new = super().step(ctx, state)
        share = int(ctx.participants().shape[0]) / ctx.problem.n_clients
        return new._replace(x=state.x + share * (new.x - state.x))


def _fbo(cls=FBOAggITD, **extra):
    def make(**kw):
        return cls(lower_solver="svrg", **{**kw, **extra})

    return make


def _step_not_forwarded(**kw):
    """The outer step size is dropped on the way (the algorithm's default 0.01 is used)."""
    return FBOAggITD(lower_solver="svrg", **{**kw, "outer_step_size": None})


def _estimator(**extra):
    def make(**kw):
        return _ScaledIndirect(**{**kw, **extra})

    return make


PERTURBATIONS = {
    "aggitd.thm1.rate_in_K": _step_not_forwarded,
    "aggitd.lemma3.drift_bound": _fbo(_UnscaledUpper, step_factor="tau"),
    # the check measures Alg. 4's local directions: an upper loop that is not Alg. 4 is caught
    "aggitd.errata.dh_theorem2_constant": _fbo(_UnscaledUpper),
    "aggitd.errata.prop2_sum_corrected": _estimator(factor=1.01),
    "aggitd.errata.prop1_alpha3_eq45": _estimator(factor=0.5),
    "aggitd.scaling.tau_stationarity": _fbo(_UnscaledUpper),
    "aggitd.scaling.participation_algorithm": _fbo(_DividesByM),
}
# the refuted statement holds for an estimator whose indirect part is 40% smaller (the printed
# sum misses at most half of the corrected one: 1 + (1 - lam mu)^2 <= 2 at N = 1)
CORRECTED_BUILDERS = {"aggitd.errata.prop2_sum_as_printed": _estimator(factor=0.6)}
SLOW = {"aggitd.thm1.rate_in_K"}  # two Monte Carlo designs of ~5 s each


def test_every_new_aggitd_claim_is_covered():
    ids = {c.id for c in aggitd_rates.CLAIMS}
    assert ids == set(PERTURBATIONS) | set(CORRECTED_BUILDERS)
    for claim_id in CORRECTED_BUILDERS:
        assert get_claim(claim_id).expected == "fails"
    for claim_id in PERTURBATIONS:
        assert get_claim(claim_id).expected == "holds"


@pytest.mark.parametrize("claim_id", [
    pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in sorted(PERTURBATIONS)])
def test_perturbed_algorithm_fails_the_check(claim_id, tmp_path):
    claim = get_claim(claim_id)
    assert_perturbation_detected(claim, PERTURBATIONS[claim_id], tmp_path, PROFILE)


@pytest.mark.parametrize("claim_id", sorted(CORRECTED_BUILDERS))
def test_refuted_statement_check_can_pass(claim_id):
    result = run_claim(get_claim(claim_id), PROFILE, make=CORRECTED_BUILDERS[claim_id])
    assert result.verdict == "holds" and result.cases


def test_refuted_statement_saves_its_counterexample(tmp_path):
    claim = get_claim("aggitd.errata.prop2_sum_as_printed")
    result = run_claim(claim, PROFILE)
    assert result.verdict == "fails as stated"
    assert_saved_and_replays(result, _estimator(factor=1.0), tmp_path, PROFILE)


def test_fixed_index_is_the_only_draw_allowed():
    rng = FixedIndex(2)
    assert rng.integers(0, 3) == 2
    with pytest.raises(ValueError, match="outside"):
        rng.integers(0, 2)
    with pytest.raises(AttributeError):
        rng.choice(3)


def test_interval_decision():
    inside = Fit("e", -0.7, -0.9, -0.55, -0.5, 0.1)
    outside = Fit("e", -1.0, -1.2, -0.8, -0.5, 0.1)
    assert interval_meets(inside, "two") and not interval_meets(outside, "two")
    assert interval_meets(outside, "upper") and not interval_meets(
        Fit("e", 0.0, -0.3, 0.3, -0.8, 0.1), "upper")
    with pytest.raises(ValueError, match="side"):
        interval_meets(inside, "left")


def test_geometric_sum_bounds_differ_by_the_q0_term():
    from theory_checks.aggitd_rates import geometric_sum_bound

    params = {"neumann_step_size": 0.5, "inner_steps": 3, "mu": 1.0, "L_g": 2.0, "M": 1.0}
    printed = geometric_sum_bound(None, {**params, "extra_power": 0})
    corrected = geometric_sum_bound(None, {**params, "extra_power": 2})
    # lam^2 (N+1) L_g^2 M^2 = 4; sum_{Q=0}^{3} 0.25^Q vs sum_{Q=0}^{2} 0.25^Q
    torch.testing.assert_close(corrected - printed, 4.0 * 0.25**3, rtol=1e-12, atol=0.0)

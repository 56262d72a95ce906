"""Each AggITD claim check fails on a deliberately wrong estimator or algorithm.

For the claims the testbed expects to hold, a perturbed builder replaces the registry's and the
runner must answer "fails as stated" with a saved, replayable counterexample (as in
tests/test_claims_detect_bugs.py). For the paper statements the testbed refutes
(``expected="fails"``), the check must be able to pass: a corrected builder makes it hold.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from testbed._algorithms.aggitd import AggITDState, FBOAggITD, one_round_upper
from testbed._estimators.aggitd import AggITD
from testbed._estimators.base import InnerState
from testbed._federation.local import local_round
from testbed.oracles import Oracles
from tests._replay import assert_perturbation_detected
from theory_checks import aggitd_rates
from theory_checks.registry import CLAIM_DB, get_claim
from theory_checks.runner import Profile, run_claim

PROFILE = Profile("perturbation", max_examples=5)


@dataclasses.dataclass(frozen=True)
class ScaledIndirect(AggITD):
    """AggITD whose indirect part is multiplied by ``factor(N)`` (a wrong HessIV scaling)."""

    factor: float | None = None
    power_of_n_plus_1: float = 0.0

    def estimate_in(self, ctx, x, state):
        value, new_state, aux = super().estimate_in(ctx, x, state)
        clients = aux["clients"]
        direct = Oracles(ctx.problem).grad_outer(x, aux["y"], clients)[0].mean(0)
        scale = (self.factor or 1.0) * (self.inner_steps + 1) ** self.power_of_n_plus_1
        return direct + scale * (value - direct), new_state, aux


@dataclasses.dataclass(frozen=True)
class WrongNeumannStep(AggITD):
    """AggITD that uses 0.9 lambda instead of the lambda it is given."""

    def step_sizes(self, problem):
        beta, lam = super().step_sizes(problem)
        return beta, 0.9 * lam


@dataclasses.dataclass(frozen=True)
class MeanOverAllClients(AggITD):
    """AggITD whose server divides the hypergradient sum by M instead of |S|."""

    def estimate_in(self, ctx, x, state):
        value, new_state, aux = super().estimate_in(ctx, x, state)
        return value * aux["clients"].shape[0] / ctx.problem.n_clients, new_state, aux


def _estimator(cls, **extra):
    def make(**kw):
        return cls(**{**kw, **extra})

    return make


@dataclasses.dataclass(frozen=True)
class ExtraRound(FBOAggITD):
    """FBO-AggITD that aggregates z in a round of its own once per iteration."""

    def step(self, ctx, state):
        new = super().step(ctx, state)
        clients = ctx.all_clients()
        ctx.aggregate(new.y.expand(int(clients.shape[0]), -1), clients)
        return new


@dataclasses.dataclass(frozen=True)
class UnscaledUpper(FBOAggITD):
    """FBO-AggITD whose One-Round-Upper steps alpha instead of alpha / tau_i."""

    def step(self, ctx, state):
        h, inner, aux = self.estimator.estimate_in(ctx, state.x, InnerState(state.y))
        y = inner.y

        def direct(points, active, batch):
            return ctx.oracles.grad_outer(points, y, active, batch)[0]

        x_next = local_round(ctx, state.x, aux["clients"], direct, self.local_steps,
                             self.outer_step_size, global_direction=h, scale_by_steps=False)
        return AggITDState(x_next, y, h, aux["index"])


@dataclasses.dataclass(frozen=True)
class FlippedIndirect(FBOAggITD):
    """FBO-AggITD whose estimator adds the indirect part instead of subtracting it."""

    @property
    def estimator(self):
        base = super().estimator
        return ScaledIndirect(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)},
                              factor=-1.0)


@dataclasses.dataclass(frozen=True)
class UntruncatedHypergradient(FBOAggITD):
    """FBO-AggITD's outer loop fed the exact hypergradient (no truncation, hence no floor)."""

    def step(self, ctx, state):
        problem = ctx.problem
        h = problem.exact_hypergradient(state.x)
        y = problem.exact_inner_solution(state.x)
        x_next = one_round_upper(ctx, state.x, y, h, ctx.participants(), self.local_steps,
                                 self.outer_step_size)
        return AggITDState(x_next, y, h, None)


def _algorithm(cls, lower_solver="svrg"):
    def make(**kw):
        return cls(lower_solver=lower_solver, **kw)

    return make


def _slow_lower(**kw):
    return AggITD(**{**kw, "inner_step_size": kw["inner_step_size"] / 10.0})


PERTURBATIONS = {
    "aggitd.prop1.mean_identity": _estimator(ScaledIndirect, factor=1.0,
                                             power_of_n_plus_1=0.01),
    "aggitd.alg1.per_index_identity": _estimator(AggITD, as_printed=True),
    "aggitd.prop1.bias_bound": _estimator(ScaledIndirect, factor=0.5),
    "aggitd.prop2.second_moment": _estimator(ScaledIndirect, power_of_n_plus_1=0.5),
    "aggitd.lower.contraction": _slow_lower,
    "aggitd.comm.rounds_per_iteration": _algorithm(ExtraRound),
    "aggitd.comm.sgd_rounds_per_iteration": _algorithm(ExtraRound, "sgd"),
    "aggitd.cor1.floor_kept": _algorithm(FlippedIndirect),
    "aggitd.scaling.bias_rate_in_n": _estimator(WrongNeumannStep),
    "aggitd.scaling.tau_invariance": _algorithm(UnscaledUpper),
    "aggitd.scaling.participation": _estimator(MeanOverAllClients),
}

# paper statements the testbed refutes, and a builder under which the same check holds
CORRECTED_BUILDERS = {
    "aggitd.alg1.as_printed": _estimator(AggITD),
    "aggitd.cor1.no_floor": _algorithm(UntruncatedHypergradient),
}


def test_every_aggitd_claim_is_covered():
    # theory_checks/aggitd_rates.py's claims are covered by tests/test_aggitd_rates.py
    ids = {c.id for c in CLAIM_DB if c.paper == "AggITD" and c.id.startswith("aggitd.")} - {
        c.id for c in aggitd_rates.CLAIMS}
    assert ids == set(PERTURBATIONS) | set(CORRECTED_BUILDERS)
    for claim_id in CORRECTED_BUILDERS:
        assert get_claim(claim_id).expected == "fails"
    for claim_id in PERTURBATIONS:
        assert get_claim(claim_id).expected == "holds"


@pytest.mark.parametrize("claim_id", sorted(PERTURBATIONS))
def test_perturbed_estimator_fails_the_check(claim_id, tmp_path):
    claim = get_claim(claim_id)
    assert_perturbation_detected(claim, PERTURBATIONS[claim_id], tmp_path, PROFILE)


@pytest.mark.parametrize("claim_id", sorted(CORRECTED_BUILDERS))
def test_refuted_statement_check_can_pass(claim_id):
    claim = get_claim(claim_id)
    result = run_claim(claim, PROFILE, make=CORRECTED_BUILDERS[claim_id])
    assert result.verdict == "holds", claim_id
    assert result.cases


def test_scaled_indirect_is_a_real_perturbation():
    from problems import QuadraticBilevel

    p = QuadraticBilevel.random(2, 2, 2, 3.0, seed=0)
    x, y = torch.randn(2), torch.randn(2)
    a = AggITD(inner_steps=3, index=1).estimate(p, x, InnerState(y), np.random.default_rng(0))
    b = ScaledIndirect(inner_steps=3, index=1, factor=1.0).estimate(
        p, x, InnerState(y), np.random.default_rng(0))
    torch.testing.assert_close(a.value, b.value)

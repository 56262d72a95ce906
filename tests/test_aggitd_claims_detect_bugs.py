"""Every AggITD claim can say both "holds" and "fails", and its perturbations are the bugs named.

The perturbations (in the result modules and :mod:`theory_checks.aggitd.perturbations`) and
positive controls are claim data; ``theory_checks/test_claims.py`` runs them (each perturbation
must be caught with a replayable counterexample, each positive control must hold). This file
checks that every AggITD claim declares one, and that the deliberately wrong estimators are the
bugs they say they are.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from testbed.algorithms.aggitd import FBOAggITD
from testbed.algorithms.base import run_algorithm
from testbed.estimators.aggitd import AggITD
from testbed.estimators.base import InnerState
from testbed.oracles import Oracles
from theory_checks import aggitd
from theory_checks.aggitd import comm
from theory_checks.aggitd import lower
from theory_checks.aggitd import perturbations as perturbed
from theory_checks.aggitd import prop1
from theory_checks.aggitd import thm1

CLAIMS = aggitd.CLAIMS


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_every_aggitd_claim_can_say_both(claim):
    if claim.expected == "holds":
        assert claim.perturbation is not None and claim.positive_control is None
        assert claim.perturbation.description and claim.perturbation.name
    else:
        assert claim.positive_control is not None and claim.perturbation is None


def _problem():
    return QuadraticBilevel.random(
        2, 2, 2, 3.0, seed=0, hessian_heterogeneity=0.3, gradient_heterogeneity=1.0
    )


def _estimate(estimator, problem, x, y):
    return estimator.estimate(problem, x, InnerState(y), np.random.default_rng(0)).value


@pytest.mark.parametrize(("weight", "scale"), [("exact", 1.0), ("n", 3 / 4), ("none", 1 / 4)])
def test_scaled_indirect_scales_the_indirect_part(weight, scale):
    p = _problem()
    x = torch.tensor([0.3, -0.2], dtype=torch.float64)
    y = torch.tensor([1.0, 0.5], dtype=torch.float64)
    right = AggITD(inner_steps=3, index=1)
    out = right.estimate(p, x, InnerState(y), np.random.default_rng(0))
    direct = Oracles(p).grad_outer(x, out.state.y, torch.arange(2))[0].mean(0)
    wrong = _estimate(perturbed.ScaledIndirect(inner_steps=3, index=1, weight=weight), p, x, y)
    torch.testing.assert_close(wrong - direct, scale * (out.value - direct), rtol=1e-12, atol=1e-14)


def test_float32_neumann_step_is_a_float32_number():
    p = _problem()
    lam = 1.0 / 3.0
    _, wrong = prop1.Float32Neumann(neumann_step_size=lam).step_sizes(p)
    assert wrong == float(np.float32(lam)) and 0.0 < abs(wrong - lam) / lam < 1e-7


def test_decaying_outer_step_uses_alpha_over_k_plus_1():
    """The perturbation's iteration count comes from the ledger: iteration k must step
    alpha / (k + 1), exactly as FBO-AggITD run with that step."""
    p = _problem()
    alpha, params = 0.2, {"inner_steps": 2, "expectation": True}
    records = run_algorithm(
        thm1.DecayingOuterStep(outer_step_size=alpha, **params), p, 3, np.random.default_rng(0)
    )
    state = records[0].state
    for k in range(3):
        one = run_algorithm(
            FBOAggITD(outer_step_size=alpha / (k + 1), **params),
            p,
            1,
            np.random.default_rng(0),
            state=state,
        )
        torch.testing.assert_close(records[k + 1].x, one[1].x, rtol=1e-12, atol=1e-14)
        state = one[1].state


def test_unscaled_upper_steps_alpha_or_alpha_tau():
    """With the local correction h_nu = h + E (x_nu - x) a one-client, tau-step round moves x
    by a polynomial in the step; the unscaled round at alpha equals the scaled one at tau alpha."""
    p = QuadraticBilevel.random(1, 2, 2, 2.0, seed=1)
    params = {"inner_steps": 1, "local_steps": 3, "expectation": True}
    x_unscaled = run_algorithm(
        perturbed.UnscaledUpper(outer_step_size=0.05, **params), p, 1, np.random.default_rng(0)
    )[1].x
    x_scaled = run_algorithm(
        FBOAggITD(outer_step_size=0.15, **params), p, 1, np.random.default_rng(0)
    )[1].x
    torch.testing.assert_close(x_unscaled, x_scaled, rtol=1e-12, atol=1e-14)
    x_tau = run_algorithm(
        perturbed.UnscaledUpper(outer_step_size=0.05, outer_step_factor="tau", **params),
        p,
        1,
        np.random.default_rng(0),
    )[1].x
    x_tau2 = run_algorithm(
        FBOAggITD(outer_step_size=0.45, **params), p, 1, np.random.default_rng(0)
    )[1].x
    torch.testing.assert_close(x_tau, x_tau2, rtol=1e-12, atol=1e-14)


def test_extra_round_costs_one_round():
    p = _problem()
    right, wrong = (cls(inner_steps=2) for cls in (FBOAggITD, comm.ExtraRound))
    rounds = [
        run_algorithm(a, p, 1, np.random.default_rng(0))[1].calls.comm_rounds
        for a in (right, wrong)
    ]
    assert rounds == [2 * 2 + 3, 2 * 2 + 4]


def test_inner_step_per_call_divides_by_n():
    est = lower.INNER_STEP_PER_CALL.build(inner_steps=30, inner_step_size=0.3)
    assert math.isclose(est.inner_step_size, 0.01)
    assert dataclasses.replace(est, inner_step_size=0.3) == AggITD(
        inner_steps=30, inner_step_size=0.3
    )

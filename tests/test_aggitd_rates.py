"""The AggITD rate, errata and scaling checks (theory_checks/aggitd/thm1/, errata.py): Theorem 1's
statistical design, the refuted Prop. 2 sum and the helpers.

Perturbations and positive controls are claim data, run by ``theory_checks/test_claims.py``.
"""

from __future__ import annotations

import math

import pytest
import torch

from testbed.registry import get_estimator
from tests._replay import assert_saved_and_replays
from theory_checks.aggitd import thm1
from theory_checks.aggitd.common import FixedIndex
from theory_checks.decision import Design
from theory_checks.decision import first_design
from theory_checks.registry import get_claim
from theory_checks.runner import Profile
from theory_checks.runner import measure
from theory_checks.runner import run_claim

PROFILE = Profile("thorough", max_examples=5)


def test_refuted_statement_saves_its_counterexample(tmp_path):
    claim = get_claim("aggitd.errata.prop2_sum_as_printed")
    result = run_claim(claim, PROFILE)
    assert result.verdict == "fails as stated"
    assert_saved_and_replays(result, get_estimator("aggitd").build, tmp_path, PROFILE)


def test_fixed_index_is_the_only_draw_allowed():
    rng = FixedIndex(2)
    assert rng.integers(0, 3) == 2
    with pytest.raises(ValueError, match="outside"):
        rng.integers(0, 2)
    with pytest.raises(AttributeError):
        rng.choice(3)


def test_geometric_sum_bounds_differ_by_the_q0_term():
    from theory_checks.aggitd.errata import geometric_sum_bound

    params = {"neumann_step_size": 0.5, "inner_steps": 3, "mu": 1.0, "L_g": 2.0, "M": 1.0}
    printed = geometric_sum_bound(None, {**params, "extra_power": 0})
    corrected = geometric_sum_bound(None, {**params, "extra_power": 2})
    # lam^2 (N+1) L_g^2 M^2 = 4; sum_{Q=0}^{3} 0.25^Q vs sum_{Q=0}^{2} 0.25^Q
    torch.testing.assert_close(corrected - printed, 4.0 * 0.25**3, rtol=1e-12, atol=0.0)


def test_thm1_replicates_come_from_the_rate_and_the_effect():
    """The smallest n whose Student-t half-width at the design's rate (split over the 3 tests)
    is <= (4^-0.4 - 4^-0.5) A(K_1) at the planning sd; the confirmation multiplies it."""
    from theory_checks.decision import t_quantile

    effect = 4.0**-0.4 - 4.0**-0.5
    for rate, profile in ((1e-3, "fast"), (1e-3 / 6, "thorough")):
        design = Design((1, 0, 0), 1, rate, profile)
        n = thm1.thm1_replicates(design, tests=3)
        sd = thm1.THM1_PLANNING_SD
        assert t_quantile(rate / 3, n - 1) * sd / math.sqrt(n) <= effect
        assert t_quantile(rate / 3, n - 2) * sd / math.sqrt(n - 1) > effect
        assert thm1.thm1_replicates(design.confirmation(), tests=3) == 4 * n
    assert thm1.thm1_replicates(Design((1, 0, 0), 1, 1e-3, "fast"), tests=3) == 28


def _thm1_case():
    from problems import QuadraticMinimax
    from theory_checks.claim import Case

    p = QuadraticMinimax.random(
        1, 1, 1, 1.0, seed=0, n_samples=6, gradient_noise=0.2, hessian_noise=0.05
    )
    return Case(p, {"point_seed": 0})


def test_thm1_draws_only_from_the_design(monkeypatch):
    """Same design, same numbers; another calibration seed or the confirmation stage, other
    numbers: every draw comes from design.rng (K_1 = 1, K_2 = 4 to keep it fast)."""
    monkeypatch.setattr(thm1, "THM1_K", (1, 4))
    claim = get_claim("aggitd.thm1.rate_in_K")
    case = _thm1_case()
    make = get_estimator("fbo-aggitd").build
    design = first_design(7, 0, 1e-3, "fast")

    def means(d):
        return measure(claim, case, make, d).details["means"]

    first = means(design)
    assert means(design) == first
    assert means(first_design(7, 1, 1e-3, "fast")) != first
    assert means(design.confirmation()) != first


def test_thm1_tests_are_the_rate_and_the_bounds(monkeypatch):
    monkeypatch.setattr(thm1, "THM1_K", (1, 4))
    m = measure(
        get_claim("aggitd.thm1.rate_in_K"),
        _thm1_case(),
        get_estimator("fbo-aggitd").build,
        first_design(7, 0, 1e-3, "fast"),
    )
    rate, low_k, high_k = m.tests
    assert rate.high == 0.0 and math.isinf(rate.low)
    assert (low_k.high, high_k.high) == tuple(m.details["bounds"])
    # the rate statistic is A_r(K_2) - 4^-0.4 A_r(K_1), linear in the replicate's values
    a1, a2 = m.details["means"]
    assert rate.evidence.estimate == pytest.approx(a2 - 4.0**-0.4 * a1, rel=1e-12)
    assert low_k.evidence.estimate == pytest.approx(a1, rel=1e-12)


def test_thm1_a_diverging_run_fails(monkeypatch):
    """A(K) infinite is a failure of the deterministic part, not an error of the evidence."""
    from testbed.algorithms.aggitd import FBOAggITD
    from theory_checks.runner import decide_case

    monkeypatch.setattr(thm1, "THM1_K", (1, 4))
    claim = get_claim("aggitd.thm1.rate_in_K")
    m = measure(
        claim,
        _thm1_case(),
        lambda **kw: FBOAggITD(**{**kw, "outer_step_size": 1e300}),
        first_design(7, 0, 1e-3, "fast"),
    )
    assert not m.passed and not m.tests and m.details["diverged_runs"] > 0
    assert decide_case(claim, m, 1e-3)[0] == "fails"

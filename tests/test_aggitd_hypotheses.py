"""AggITD's constants, hypotheses and readings (theory_checks/aggitd/constants.py), the review's
findings reproduced (issue 22), and each refutation recomputed without the check's code.

The findings: Prop. 2's printed sum was refuted on a case outside the lambda cap (L_g taken as
max(||H||, ||J||) = 0.640 instead of Assumption 2's joint 0.9375, so lambda = 1.56 > 1/L_g =
1.07); the tau-invariance claim was tested two-sided (|exponent| <= 0.05) though its statement is
one-sided. Each refutation is then recomputed here from the problem's arrays in numpy (closed
forms, no estimator, no check), on its saved case, which must satisfy every hypothesis.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from problems import QuadraticBilevel
from problems import from_spec
from testbed.registry import get_estimator
from theory_checks.aggitd.alg1 import check_per_index_identity
from theory_checks.aggitd.constants import A2_M_GLOBAL
from theory_checks.aggitd.constants import LAMBDA_CAP
from theory_checks.aggitd.constants import THEOREM1
from theory_checks.aggitd.constants import aggitd_constants
from theory_checks.aggitd.constants import inner_step
from theory_checks.aggitd.constants import neumann_step
from theory_checks.aggitd.constants import theorem1_outer_step
from theory_checks.aggitd.cor1 import check_cor1_no_floor
from theory_checks.aggitd.errata import check_geometric_sum_printed
from theory_checks.aggitd.scaling import check_tau_invariance
from theory_checks.claim import Case
from theory_checks.claim import bilevel_spec
from theory_checks.exact_quantities import outer_affine
from theory_checks.hypotheses import margins
from theory_checks.registry import get_claim

# The case aggitd.errata.prop2_sum_as_printed saved before the constants were Assumption 2's.
OLD_PROP2_CASE = bilevel_spec(mu=0.5)


def _saved(claim_id: str) -> Case:
    return get_claim(claim_id).examples[0]()


def _joint_norm(A: np.ndarray, B: np.ndarray) -> float:
    """||[[0, -B^T], [-B, A]]||: the Hessian of g = y'Ay/2 - y'(Bx + b) in (x, y), by numpy."""
    dx = B.shape[1]
    H = np.block([[np.zeros((dx, dx)), -B.T], [-B, A]])
    return float(np.abs(np.linalg.eigvalsh(H)).max())


def _old_max_constant(problem) -> float:
    """The constant the AggITD checks used before (not Assumption 2's): max(||H||, ||J||)."""
    c = problem.constants()
    return max(c.L, c.L_clients, c.cross_norm)


def _printed_ratio(lam: float, mu: float, L: float, M: float, J: float, g: float, n: int) -> float:
    """E_Q ||h^I||^2 over Prop. 2's printed sum on a one-dimensional inner problem from y*:
    ``lam^2 (N+1) sum_{k<=N} (J (1 - lam mu)^k g)^2`` over ``lam^2 (N+1) L^2 M^2 sum_{k<N}``."""
    r = (1.0 - lam * mu) ** 2
    moment = J**2 * g**2 * sum(r**k for k in range(n + 1))
    return moment / (L**2 * M**2 * sum(r**k for k in range(n)))


def test_L_g_is_the_joint_norm_not_the_largest_block():
    p = QuadraticBilevel.random(3, 2, 3, 4.0, seed=5, hessian_heterogeneity=0.3)
    c = aggitd_constants(p)
    joint = max(_joint_norm(p.A[i].numpy(), p.B[i].numpy()) for i in range(3))
    assert c.L_g == pytest.approx(joint, rel=1e-12)
    assert c.L_g > _old_max_constant(p) * 1.01  # a cross term makes the joint norm larger
    # Assumption 1 is per client: mu is the smallest client eigenvalue, below the mean's
    mu_clients = min(float(np.linalg.eigvalsh(p.A[i].numpy()).min()) for i in range(3))
    assert c.mu == pytest.approx(mu_clients, rel=1e-12) and c.mu < p.constants().mu


def test_finding_prop2_saved_case_was_outside_the_lambda_cap():
    p = from_spec(OLD_PROP2_CASE)
    old = _old_max_constant(p)
    joint = aggitd_constants(p).L_g
    assert (round(old, 3), round(joint, 4)) == (0.64, 0.9375)
    # the old check's lambda = 1/0.640 = 1.56 exceeds Assumption 2's cap 1/L_g = 1.07
    case = Case(p, {"point_seed": 0, "neumann_step_size": 1.0 / old})
    assert LAMBDA_CAP.evaluate(case).margin == pytest.approx(1.0 - 0.9375 / 0.6404, rel=1e-3)
    assert not LAMBDA_CAP.evaluate(case).holds
    # under the right constant the old case's ratio is 0.568 (M = ||grad_y f(x, y*)||, the
    # review's figure) and 0.065 with Assumption 2's M (its f is quadratic, ||grad F|| includes x)
    A, B = float(p.A[0, 0, 0]), float(p.B[0, 0, 0])
    x = torch.as_tensor(np.random.default_rng(0).standard_normal(1))
    y_star = p.exact_inner_solution(x)
    g = float(p.C[0, 0, 0] * y_star[0] + p.D[0, 0, 0] * x[0] + p.c[0, 0])
    lam = 1.0 / joint
    assert _printed_ratio(lam, A, joint, abs(g), abs(B), abs(g), 1) == pytest.approx(
        0.568, abs=5e-4
    )
    check = check_geometric_sum_printed(
        get_claim("aggitd.errata.prop2_sum_as_printed"),
        Case(p, {"point_seed": 0}),
        get_estimator("aggitd").build,
    )
    assert check.passed and check.measured == pytest.approx(0.065, abs=5e-4)
    # the review's valid case: mu = 0.1, ||J|| = 1, ratio 1.65 with M = ||grad_y f||
    q = from_spec(bilevel_spec(mu=0.1, cross_scale=1.0 / 0.6404226504432821))
    L = _joint_norm(q.A[0].numpy(), q.B[0].numpy())
    assert _printed_ratio(1.0 / L, 0.1, L, 1.0, 1.0, 1.0, 1) == pytest.approx(1.65, abs=5e-3)


def test_prop2_counterexample_is_inside_and_recomputed_in_numpy():
    case = _saved("aggitd.errata.prop2_sum_as_printed")
    p = case.problem
    claim = get_claim("aggitd.errata.prop2_sum_as_printed")
    assert all(m.holds for m in margins(claim.hypotheses, case))
    assert A2_M_GLOBAL.evaluate(case).margin == 0.0  # f affine: M holds on the whole space
    # numpy, from the arrays: g = y'Ay/2 - y'(Bx + b), f = c'y + e'x (outer curvature 0)
    A, B = p.A[0].numpy(), p.B[0].numpy()
    c, e = p.c[0].numpy(), p.e[0].numpy()
    L = _joint_norm(A, B)
    M = float(np.sqrt((c**2).sum() + (e**2).sum()))  # ||grad F|| is constant: f is affine
    mu = float(A[0, 0])
    ratios = [
        _printed_ratio(1.0 / L, mu, L, M, float(abs(B[0, 0])), float(abs(c[0])), n)
        for n in (1, 2, 4)
    ]
    assert ratios == pytest.approx([1.786, 1.341, 1.120], abs=1e-3)
    check = check_geometric_sum_printed(claim, case, get_estimator("aggitd").build)
    assert not check.passed
    assert check.details["ratios"] == pytest.approx(ratios, rel=1e-9)


def test_prop2_positive_control_holds_inside():
    claim = get_claim("aggitd.errata.prop2_sum_as_printed")
    control = claim.positive_control()
    assert all(m.holds for m in margins(claim.hypotheses, control))
    check = check_geometric_sum_printed(claim, control, get_estimator("aggitd").build)
    assert check.passed and check.measured == pytest.approx(0.751, abs=1e-3)


def test_finding_tau_invariance_two_sided_would_refute_a_holding_case():
    p = from_spec(OLD_PROP2_CASE | {"mu": 1.0})
    G, _ = outer_affine(p)
    L_h = float(torch.linalg.matrix_norm(G, ord=2))
    old = _old_max_constant(p)
    make = get_estimator("fbo-aggitd").build
    found = {}
    for factor in (0.1, 0.2):
        params = {
            "point_seed": 0,
            "outer_step_size": factor / L_h,
            "neumann_step_size": 1.0 / old,
            "inner_step_size": 1.0 / old,
        }
        found[factor] = check_tau_invariance(
            get_claim("aggitd.scaling.tau_invariance"), Case(p, params), make
        )
    assert found[0.1].measured == pytest.approx(-0.0484, abs=1e-4)  # the old worst case
    drifts = found[0.2].details["drifts"]
    assert (round(drifts[0], 3), round(drifts[-1], 3)) == (0.552, 0.418)
    assert all(b < a for a, b in zip(drifts, drifts[1:], strict=False))  # falls with tau
    assert found[0.2].measured == pytest.approx(-0.0954, abs=1e-4)
    # the statement "does not grow with tau" holds there; the old |exponent| <= 0.05 did not
    assert found[0.2].passed and abs(found[0.2].measured) > 0.05
    # at Lemma 3's step (the claim's hypotheses) the exponent is ~0
    inside = check_tau_invariance(None, Case(p, {"point_seed": 0}), make)
    assert inside.passed and abs(inside.measured) < 1e-3


def test_cor1_floor_recomputed_in_numpy():
    """The limit of FBO-AggITD (exact mean over Q) solves grad_x f - J H^{-1}(I - (I - lam
    H)^{N+1}) grad_y f = 0 at y = y*(x) (eq. 11 at a stationary trajectory); its stationarity
    ||J H^{-1} (I - lam H)^{N+1} grad_y f||^2 is the floor Corollary 1 drops."""
    case = _saved("aggitd.cor1.no_floor")
    claim = get_claim("aggitd.cor1.no_floor")
    p = case.problem
    assert all(m.holds for m in margins(THEOREM1, case))
    A, B, C, D, E = (p.A[0].numpy(), p.B[0].numpy(), p.C[0].numpy(), p.D[0].numpy(), p.E[0].numpy())
    b, c, e = p.b[0].numpy(), p.c[0].numpy(), p.e[0].numpy()
    lam = neumann_step(case)
    assert lam == pytest.approx(1.0 / _joint_norm(A, B), rel=1e-12)
    Ainv = np.linalg.inv(A)
    found = {}
    for per_kappa in (1, 4):
        n = per_kappa * math.ceil(_joint_norm(A, B) / float(np.linalg.eigvalsh(A).min()))
        T = np.linalg.matrix_power(np.eye(len(A)) - lam * A, n + 1)
        # y*(x) = A^{-1}(Bx + b); grad_y f = C y + D x + c; grad_x f = D'y + E x + e; J = -B'
        Y, y0 = Ainv @ B, Ainv @ b  # y* = Y x + y0
        gy = (C @ Y + D, C @ y0 + c)
        gx = (D.T @ Y + E, D.T @ y0 + e)
        est = (
            gx[0] + B.T @ Ainv @ (np.eye(len(A)) - T) @ gy[0],
            gx[1] + B.T @ Ainv @ (np.eye(len(A)) - T) @ gy[1],
        )
        x_inf = np.linalg.solve(est[0], -est[1])
        floor = float(np.sum((B.T @ Ainv @ T @ (gy[0] @ x_inf + gy[1])) ** 2))
        run = check_cor1_no_floor(
            claim,
            Case(p, {**case.params, "inner_steps_per_kappa": per_kappa, "stationarity": "average"}),
            get_estimator("fbo-aggitd").build,
        )
        assert not run.passed
        assert run.details["limit_stationarity"] == pytest.approx(floor, rel=1e-6)
        found[per_kappa] = floor
    assert found[1] == pytest.approx(1.55e-5, rel=1e-2)
    assert found[4] == pytest.approx(5.39e-10, rel=1e-2)
    # Theorem 1's step rule: the outer step is the smallest cap, ~2e-4 here
    assert theorem1_outer_step(case) == pytest.approx(2.067e-4, rel=1e-3)
    assert inner_step(case) == pytest.approx(min(1.0, lam, lam / 6.0), rel=1e-12)


def test_alg1_as_printed_recomputed_in_numpy():
    """Alg. 1 as printed on the saved case (identical clients, d = 1): p = lam (N+1) z^{N-1} with
    z^t = (1 - s H) z^{t-1}, s = 1 (line 6 literal) or lam (restored), against eq. (5)."""
    case = _saved("aggitd.alg1.as_printed")
    p = case.problem
    seed = case.params["point_seed"]
    n, q = 1 + seed % 12, (seed // 12) % (1 + seed % 12)
    assert q < n
    H, J = float(p.A[0, 0, 0]), -float(p.B[0, 0, 0])
    lam = neumann_step(case)
    for printed_line6 in (True, False):
        s = 1.0 if printed_line6 else lam
        # eq. (5): lam (N+1) J (1 - lam H)^{N-Q} g; printed: lam (N+1) J (1 - s H)^{N-1-Q} g
        analysed = lam * (n + 1) * J * (1.0 - lam * H) ** (n - q)
        printed = lam * (n + 1) * J * (1.0 - s * H) ** (n - 1 - q)
        assert abs(printed - analysed) > 0.1 * abs(analysed)
        check = check_per_index_identity(
            get_claim("aggitd.alg1.as_printed"),
            Case(p, {**case.params, "printed_line6": printed_line6}),
            get_estimator("aggitd-as-printed").build,
        )
        assert not check.passed and check.measured > 1e-3

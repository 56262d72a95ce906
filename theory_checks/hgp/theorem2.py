"""HGP Theorem 2 (App. D): the hypergradient error at an inexact inner solution.

The result (App. D.3): under Assumptions 1-4 and Thm 1's conditions, HGP evaluated at an
inexact inner solution ``y_hat`` (Hessians, Jacobians and ``d f`` taken there; Remark 4,
eq. 22) satisfies, with probability >= 1 - eps,

.. math::

    \\frac{\\|v^{(M)} - d_\\lambda f\\|}{\\|\\partial_x f\\|} \\le
    [\\text{Thm 1's noise term}] + \\frac{2\\beta}{\\eta\\alpha^2} c
    + \\Big\\{ \\frac{2\\nu_g}{\\alpha}\\Big(1 + \\frac{\\beta}{\\alpha}\\Big)(1 + c)
    + \\frac{\\nu_f}{\\|\\partial_x f\\|} \\frac{\\beta}{\\alpha} \\Big\\}
    \\|\\hat y - y^*\\| + \\exp(-O(M)),

``c = (8 sqrt(n)/delta) tau^S`` the Push-Sum error (Lemma 2), ``nu_f``, ``nu_g`` the Lipschitz
constants of Assumption 4. The proof's decomposition has a term ``(C) = grad_lambda f(y_hat) -
grad_lambda f(y*)`` of size up to ``nu_f ||y_hat - y*||`` that the statement drops (App. D.3's
proof bounds it, the statement omits it); bounding (D3) consistently gives the coefficient ``nu_f (1
+ 2 beta/alpha)``.

Hypotheses: exact averaging (A1 with ``c = 0``), A2 (strong convexity), A4 (Lipschitz second
derivatives), ``0 < eta alpha < 1``, the step condition ``eta L <= 2 - eta alpha`` the proof
uses, and the S condition (trivial at ``c = 0``); exact Jacobians (no noise term), ``nu_g = 0``
on the quadratic problems.

Checked, by :func:`_theorem2`: exact-averaging HGP at ``y_hat = y* + t Delta`` for t in
{1e-3, 1e-2, 0.1, 1} along the worst direction of the (C) term, against the bound as stated
(``hgp.theorem2.as_stated``, expected to fail, with a saved counterexample and a positive
control without (C)) and corrected (``hgp.theorem2.corrected``), the ``exp(-O(M))`` term read
as the proof's ``(beta/alpha) rho_bar^M ||d_x f||`` at M and 2M. Perturbation of the corrected
claim: a v step slipped by 1e-2 (:data:`STEP_SLIP_THM2`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from problems import PerClientQuadratic
from problems import strategies
from results_format.verdicts import ABOUT_RESULT
from testbed.decentralized.hgp import HGPState
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Perturbation
from theory_checks.claim import SeriesPoint
from theory_checks.claim import known_case
from theory_checks.exact_quantities import sign_fixed
from theory_checks.hgp.common import global_grad
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.common import per_client_spec
from theory_checks.hgp.common import point
from theory_checks.hgp.common import run_hgp
from theory_checks.hgp.common import scale
from theory_checks.hgp.common import stacked_error
from theory_checks.hgp.common import terms_for
from theory_checks.hgp.constants import A4_LIPSCHITZ
from theory_checks.hgp.constants import EXACT_AVERAGING_ASSUMPTIONS
from theory_checks.hgp.constants import S_CONDITION_EXACT
from theory_checks.hgp.constants import deterministic_contractions
from theory_checks.hgp.constants import eta_alpha_below_one
from theory_checks.hgp.constants import hgp_constants
from theory_checks.hgp.constants import step_condition
from theory_checks.hgp.constants import step_size
from theory_checks.hgp.perturbations import StepSlip
from theory_checks.hgp.perturbations import swap
from theory_checks.tolerances import IDENTITY_RTOL


def _theorem2(case: Case, make: Callable[..., Any], corrected: bool) -> Measurement:
    """Error of exact-averaging HGP evaluated at ``y_hat = y* +- t Delta`` against Thm 2's
    linear term; Delta is the worst direction of the (C) term ``grad_lambda f(y_hat) -
    grad_lambda f(y*)`` (top singular vector of blockdiag(P_i^T Q_i)), taken with both signs:
    the theorem bounds the error at every ``y_hat``, and a singular vector's sign is arbitrary
    (LAPACK and cuSOLVER choose differently; :func:`sign_fixed` orders the two).

    The statement's ``exp(-O(M))`` has unspecified constants, so a shortfall counts only when it
    does not diminish with M: each distance is run at M (``rho_bar^M <= 1e-12``) and at 2M, the
    bound's M-term taken as the proof's ``(beta/alpha) rho_bar^M ||d_x f||`` at each, and the
    case fails only where the error exceeds the bound at both (by the same amount: the error
    converges in M, the excess is the (C) term). The measured number and the series are those of
    the sign whose worst excess is larger (of :func:`sign_fixed`'s sign where they tie).
    """
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    blocks = problem.client_blocks(x)
    k = hgp_constants(problem)
    eta = step_size(case, k)  # 1/L
    rho_bar = deterministic_contractions(blocks, eta)["rho_bar"]
    alpha, beta, nu_f = k.alpha, k.beta, k.nu_f
    M = terms_for(rho_bar, 1e-12, 2000)
    PtQ = problem.P.transpose(1, 2) @ problem.Q
    n, dy = problem.n_clients, problem.dim_y
    direction = torch.zeros(n, dy, dtype=torch.float64)
    if float(PtQ.abs().max()) > 0:
        _, svals, Vh = torch.linalg.svd(PtQ)
        # the first client whose top singular value is the largest to round-off (1e-12
        # relative): P_i^T Q_i often has the same norm on every client (the outer coupling),
        # and an argmax over equal values is decided by round-off, differently on each device
        largest = svals[:, 0]
        top = int(torch.nonzero(largest >= float(largest.max()) * (1.0 - 1e-12))[0, 0])
        direction[top] = sign_fixed(Vh[top, 0])
    else:
        direction[0, 0] = 1.0
    exact = global_grad(problem, x)
    grad_norm = float(blocks["c"].norm())
    coefficient = (1 + 2 * beta / alpha) if corrected else beta / alpha
    tolerance = IDENTITY_RTOL * scale(blocks)
    sides = [
        _thm2_side(
            make,
            problem,
            x,
            blocks,
            exact,
            sign * direction,
            M,
            eta,
            (nu_f * coefficient, (beta / alpha) * grad_norm, rho_bar),
            tolerance,
        )
        for sign in (1.0, -1.0)
    ]
    # the sign_fixed side unless the other is worse by more than round-off (their excesses are
    # often equal to 1e-13, and a choice made by round-off would differ between devices)
    decisive = sides[1] if sides[1]["worst"] > sides[0]["worst"] + tolerance else sides[0]
    return Measurement(
        decisive["last"][0],
        decisive["last"][1],
        decisive["worst"] <= 0.0,
        "<= at every ||y_hat - y*|| (at M or 2M), both signs of the direction",
        series=tuple(decisive["series"]),
        details={
            "beta_over_alpha": beta / alpha,
            "nu_f": nu_f,
            "neumann_terms": M,
            "excess_at_M_and_2M": decisive["excesses"],
            "worst_excess_by_sign": [side["worst"] for side in sides],
        },
    )


def _thm2_side(
    make: Callable[..., Any],
    problem: Any,
    x: torch.Tensor,
    blocks: dict[str, Any],
    exact: torch.Tensor,
    direction: torch.Tensor,
    M: int,
    eta: float,
    bound_terms: tuple[float, float, float],
    tolerance: float,
) -> dict[str, Any]:
    """The distances ``t`` in (1e-3, 1e-2, 1e-1, 1) along one signed direction: the worst
    excess over the bound (at M or 2M, the smaller), the series, and the last (error, bound).
    ``bound_terms``: (the distance's coefficient nu_f * c, the M-term's (beta / alpha) *
    ||d_x f||, rho_bar)."""
    linear, geometric, rho_bar = bound_terms
    n = problem.n_clients
    series, worst, last, excesses = [], -math.inf, (0.0, 0.0), []
    for t in (1e-3, 1e-2, 1e-1, 1.0):
        y_hat = blocks["y"] + t * direction
        state = HGPState(y_hat, torch.ones(n, dtype=torch.float64), 0)
        est = make(neumann_terms=2 * M, neumann_step_size=eta, inner_steps=0)
        run = stacked_error(run_hgp(est, problem, x, state).trajectory[:, 0], exact)
        distance = float((y_hat - blocks["y"]).norm())
        excess = [
            float(run[terms]) - (linear * distance + geometric * rho_bar**terms)
            for terms in (M, 2 * M)
        ]
        worst = max(worst, min(excess) - tolerance)
        excesses.append(excess)
        error, bound = float(run[M]), linear * distance + geometric * rho_bar**M
        series += [
            SeriesPoint("measured", "inner_error", distance, error),
            SeriesPoint("bound", "inner_error", distance, bound),
        ]
        last = (error, bound)
    return {"worst": worst, "series": series, "last": last, "excesses": excesses}


def check_theorem2_as_stated(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Theorem 2 with its stated constant (see ``_theorem2``)."""
    return _theorem2(case, make, corrected=False)


def check_theorem2_corrected(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Theorem 2 with the corrected constant (see ``_theorem2``)."""
    return _theorem2(case, make, corrected=True)


def thm2_cases() -> st.SearchStrategy[Case]:
    """Theorem 2's cases: kappa in [1, 3], a cross term in [0.05, 1], an outer coupling in
    [0.5, 2], and a point."""
    return st.builds(
        lambda problem, seed: Case(problem, {"point_seed": seed}),
        strategies.per_client_quadratic(
            kappa=(1.0, 3.0), cross_scale=(0.05, 1.0), outer_coupling=(0.5, 2.0)
        ),
        strategies.SEEDS,
    )


STEP_SLIP_THM2 = Perturbation(
    "v step (1 + 1e-2) eta",
    "the v-update uses 1.01 eta while the u-update uses eta: at ||y_hat - y*|| = 1e-3 Thm 2's "
    "corrected bound leaves a slack of about 2 (beta/alpha) nu_f 1e-3, of the order of 1e-3 of "
    "the indirect term, so 1e-2 is the smallest slip that reliably exceeds it",
    swap("hgp-exact-averaging", StepSlip, slip=1e-2),
    slow=True,  # ~4 s on one core: hypergradient shrinking of the found case
)

# Positive control of claim hgp.theorem2.as_stated
theorem2_as_stated_control = known_case(
    PerClientQuadratic.random(3, 2, 2, 2.0, 0, outer_coupling=0.0).spec(), {"point_seed": 0}
)

# --------------------------------------------------------------------------- the claims


# What every claim of this result shares.
theorem2_claim = hgp_claim.but(
    kind="bias_bound",
    about=ABOUT_RESULT,
    estimators=("hgp-exact-averaging",),
    strategy=thm2_cases,
    hypotheses=(
        *EXACT_AVERAGING_ASSUMPTIONS,
        A4_LIPSCHITZ,
        eta_alpha_below_one(),
        step_condition(),
        S_CONDITION_EXACT,
    ),
)


AS_STATED = theorem2_claim(
    id="hgp.theorem2.as_stated",
    reference="HGP Thm 2 (App. D.3) as stated",
    statement=(
        "exact Jacobians, exact averaging, y_hat != y*: error <= ((2 nu_g/alpha)(1 + "
        "beta/alpha)(1 + c) ||d_x f|| + nu_f beta/alpha) ||y_hat - y*|| + exp(-O(M))"
    ),
    check=check_theorem2_as_stated,
    expected="fails",
    # no y-dependence of grad_lambda f (P = 0, outer coupling 0): the dropped term (C) vanishes and
    # the stated bound holds (error 0.20 <= 1.21)
    positive_control=theorem2_as_stated_control,
    notes=(
        "The statement drops term (C) = grad_lambda f(y_hat) - grad_lambda f(y*), of size up "
        "to nu_f ||y_hat - y*||; with small beta/alpha the stated bound is below it. The "
        "saved case is inside every hypothesis, the unstated step condition included (eta "
        "alpha = 1/3, eta L = 1 <= 2 - eta alpha), and the excess (0.384 at ||y_hat - y*|| = "
        "1) is the same at M = 26 and 2M, so no exp(-O(M)) term absorbs it. The case saved "
        "before the hypotheses (identical clients, kappa = 1: eta alpha = 1) was outside the "
        "stated 0 < alpha < 1/eta and is now rejected."
    ),
    # Saved counterexample (found by hypothesis under the hypotheses; the one saved before them had
    # kappa = 1 with identical clients, eta alpha = 1: outside 0 < alpha < 1/eta): Hessians 1 +-
    # 0.5 (alpha = 0.5, L = 1.5, eta alpha = 1/3), beta/alpha = 0.5, nu_f = 1: at ||y_hat - y*|| =
    # 1 the error is 0.884 against 0.5, the same excess (0.384) at M = 26 and 2M.
    examples=(
        known_case(
            per_client_spec(hessian_heterogeneity=0.5, cross_scale=0.25, outer_coupling=1.0),
            {"point_seed": 0},
        ),
    ),
)


CORRECTED = theorem2_claim(
    id="hgp.theorem2.corrected",
    reference="HGP Thm 2 (App. D.3) with its proof's term (C) restored",
    statement=(
        "error <= ((2 nu_g/alpha)(1 + beta/alpha)(1 + c) ||d_x f|| + nu_f (1 + 2 "
        "beta/alpha)) ||y_hat - y*|| + (beta/alpha) rho^M ||d_x f||  (nu_g = 0 here)"
    ),
    check=check_theorem2_corrected,
    corrects=AS_STATED.id,
    perturbation=STEP_SLIP_THM2,
)


CLAIMS: tuple[Claim, ...] = (
    AS_STATED,
    CORRECTED,
)

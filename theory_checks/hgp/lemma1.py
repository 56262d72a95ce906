"""HGP Lemma 1 (Sec. 3.2, App. B): the eta-free stationarity condition, and eq. (10)'s fixed
point.

The result (Sec. 3.2-3.3, App. B): with ``Theta = (1/n) 1 1^T`` the exact average over the n
clients, ``x(lambda) = phi'(x(lambda), lambda)`` with

.. math::  \\phi'(x, \\lambda) = \\Theta\\,(x - \\eta\\, \\partial_x g(x, \\lambda))     \\qquad (9)

holds iff ``x(lambda)`` solves the consensus problem (2), for any ``eta != 0``. Consequently the
hypergradient ``d_lambda f = -eta d2_{x lambda} g Theta sum_m ((I - eta d2_x g) Theta)^m d_x f +
d_lambda f`` and the fixed point of its iteration (10),
``v^(m) = -eta d2_{x lambda} g Theta u^(m-1) + v^(m-1)``,
``u^(m) = (I - eta d2_x g) Theta u^(m-1)``, is GlobalGrad whatever eta.

Hypotheses: Assumption 1 with exact averaging (``Theta_hat = Theta``), Assumption 2 (each g_i
strongly convex in y), and a step at which eq. (10) converges (``eta lambda_max(H_bar) < 2``).

Checked (:func:`check_lemma1`, ``hgp.lemma1.eta_invariance``), in float64 to 1e-10: at
``eta`` = 0.75/L, 1/L and 1.25/L the consensus optimum y* is a fixed point of (9), a shifted
consensus point is not, and exact-averaging HGP run to ``rho_bar^M <= 1e-13`` returns the same
GlobalGrad at every eta (a linear solve gives the reference). Perturbation: float32 messages.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from results_format.verdicts import ABOUT_RESULT
from testbed.oracles import Oracles
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.hgp.common import exact_averaging_cases
from theory_checks.hgp.common import global_grad
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.common import point
from theory_checks.hgp.common import run_hgp
from theory_checks.hgp.common import scale
from theory_checks.hgp.common import terms_for
from theory_checks.hgp.constants import EXACT_AVERAGING_ASSUMPTIONS
from theory_checks.hgp.constants import deterministic_contractions
from theory_checks.hgp.constants import hgp_constants
from theory_checks.hgp.constants import series_converges
from theory_checks.hgp.perturbations import FLOAT32_MESSAGES
from theory_checks.tolerances import IDENTITY_RTOL

#: The steps Lemma 1's check runs at, in units of 1/L: eq. (10)'s fixed point must be the same
#: at each; the largest (1.25/L) keeps ``eta lambda_max(H_bar) < 2`` (the series converges).
LEMMA1_ETA_FACTORS = (0.75, 1.0, 1.25)
#: eq. (10) converges at each of Lemma 1's steps (the claim's hypothesis).
LEMMA1_SERIES_CONVERGES = series_converges(LEMMA1_ETA_FACTORS)


def check_lemma1(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Lemma 1 (eq. 9): consensus y* is the fixed point of Theta(y - eta grad g) for every eta,
    a non-optimal consensus point is not, and HGP with exact averaging converges to the same
    GlobalGrad for every eta (the eq. 10 fixed point is eta-independent)."""
    problem = case.problem
    x = point(problem, case.params["point_seed"])
    blocks = problem.client_blocks(x)
    exact = global_grad(problem, x)
    unit = scale(blocks)
    L = hgp_constants(problem).L
    y_star = blocks["y"]
    clients = torch.arange(problem.n_clients)
    oracles = Oracles(problem)
    values, residuals, worst = [], [], 0.0
    for factor in LEMMA1_ETA_FACTORS:
        eta = factor / L
        rho_bar = deterministic_contractions(blocks, eta)["rho_bar"]
        # Why 1e-13: the truncation J H_bar^{-1}(I - eta H_bar)^M c_bar (notes D2) is then below
        # the identity tolerance by three orders, so any remaining gap is the estimator's.
        M = terms_for(rho_bar, 1e-13, 2000)
        est = make(neumann_terms=M, neumann_step_size=eta)
        v = run_hgp(est, problem, x).trajectory[-1, 0]
        values.append(v)
        worst = max(worst, float((v - exact).norm()) / unit)
        rows = y_star.expand(problem.n_clients, -1)
        grads = oracles.grad_inner(x, rows, clients)
        fixed = (rows - eta * grads).mean(0)  # Theta(y - eta grad g), a consensus vector
        residuals.append(float((fixed - y_star).norm()) / (1.0 + float(y_star.norm())))
        shifted = rows + 1.0
        moved = (shifted - eta * oracles.grad_inner(x, shifted, clients)).mean(0)
        if float((moved - shifted[0]).norm()) <= IDENTITY_RTOL:
            worst = math.inf  # a non-optimal point must not be a fixed point
    spread = max(float((a - b).norm()) for a in values for b in values) / unit
    measured = max(worst, spread, max(residuals))
    return Measurement(
        measured,
        IDENTITY_RTOL,
        measured <= IDENTITY_RTOL,
        "max(relative error, eta-spread, fixed-point residual) <=",
        details={"eta_spread": spread, "fixed_point_residual": max(residuals)},
    )


# Why kappa <= 3: M grows like kappa log(1e13) for the smallest eta; small kappa keeps three
# runs of a few hundred iterations within the fast profile's budget.
ETA_INVARIANCE_CASES = exact_averaging_cases(kappa=(1.0, 3.0), hessian_heterogeneity=(0.0, 0.3))

# --------------------------------------------------------------------------- the claim


ETA_INVARIANCE = hgp_claim(
    id="hgp.lemma1.eta_invariance",
    reference="Terashita & Hara, Lemma 1 (eq. 9) and App. B; GlobalGrad independent of eta",
    kind="exact_identity",
    about=ABOUT_RESULT,
    statement=(
        "y* = Theta(y* - eta grad g(y*)) for every eta (and not at other consensus "
        "points); the eq. (10) fixed point -eta J Theta sum((I - eta H)Theta)^m c + e = "
        "GlobalGrad, independent of eta (1e-10)"
    ),
    estimators=("hgp-exact-averaging",),
    strategy=ETA_INVARIANCE_CASES,
    check=check_lemma1,
    hypotheses=(*EXACT_AVERAGING_ASSUMPTIONS, LEMMA1_SERIES_CONVERGES),
    perturbation=FLOAT32_MESSAGES,
)


CLAIMS: tuple[Claim, ...] = (ETA_INVARIANCE,)

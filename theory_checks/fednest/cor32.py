"""FedNest's Corollary 3.2, minimax (Tarzanagh et al. 2022, Sec. 3.1): the rate in
the horizon K of stochastic minimax FedNest.

The result. For ``min_x max_y (1/m) sum_i f_i(x, y)`` with ``f_i`` ``mu_f``-strongly concave in
``y`` (``b = 0``: no FedIHGP), ``kappa_f = l_{f,1} / mu_f``, under Thm 3.1's conditions and
``T = O(kappa_f)``::

    (1/K) sum_{k=1}^K E||grad phi(x^k)||^2 = O(kappa_f^2 / K + kappa_f / sqrt(K)),

an ``O(K^{-1/2})`` rate.

What is checked (``k_rate_minimax``, the shared K-rate check
:func:`~theory_checks.fednest.k_rate.check_k_rate`): on minimax quadratics with ``dim_y = 1``
(``kappa_f = 1``, so ``T = 1 = O(kappa_f)``) and stochastic oracles, the exponent of ``E (1/K)
sum_k ||grad phi(x_k)||^2`` in K is at most -1/4 (the claim is -1/2), Student-t over
independent replicates; decided on the thorough profile. Hypothesis: A2 for ``g_i = -f_i``.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from problems import strategies
from theory_checks.claim import Claim
from theory_checks.fednest.common import case_builder
from theory_checks.fednest.k_rate import K_RATE_DESIGN_NOTES
from theory_checks.fednest.k_rate import k_rate_claim
from theory_checks.fednest.perturbations import drifting_outer

# =========================================================================================== cases


def rate_minimax() -> st.SearchStrategy[Any]:
    return strategies.quadratic_minimax(
        max_clients=4,
        max_dim=1,
        kappa=(1.0, 1.0),
        max_hessian_heterogeneity=0.3,
        n_samples=8,
        gradient_noise=0.5,
        hessian_noise=0.3,
    )


# Cases of claim fednest.cor32.k_rate_minimax
cor32_k_rate_minimax_cases = case_builder(rate_minimax())


# ==================================================================================== perturbation

# FedNest (minimax) with the drifting outer step (theory_checks.fednest.perturbations.DriftingOuter)
DRIFTING_OUTER_MINIMAX = drifting_outer("fednest-minimax")


# ====================================================================================== the claims


K_RATE_MINIMAX = k_rate_claim(
    id="fednest.cor32.k_rate_minimax",
    reference="Tarzanagh et al. 2022, Cor. 3.2 (Sec. 3.1; minimax, b = 0)",
    statement=(
        "minimax FedNest, stochastic: (1/K) sum E||grad phi(x_k)||^2 = O(K^{-1/2}): the "
        "exponent in K is -1/2 (checked: <= -1/4, Student-t over replicates)"
    ),
    estimators=("fednest-minimax",),
    strategy=cor32_k_rate_minimax_cases,
    # wall time of `testbed check --profile thorough --claim ID` (it decides the claim; start-up
    # and the perturbation run included), 2 cores at load 6-7, 2026-11-26
    decide_seconds=26,
    perturbation=DRIFTING_OUTER_MINIMAX,
    notes=(K_RATE_DESIGN_NOTES + "kappa_f = 1 (dim_y = 1), so T = 1 = O(kappa_f)."),
)


CLAIMS: tuple[Claim, ...] = (K_RATE_MINIMAX,)

"""FedNest's Corollary 3.3, compositional (Tarzanagh et al. 2022, Sec. 3.2; eq. (7) against
Sec. 3.2's 1/2 convention): the rate in the horizon K of stochastic compositional FedNest.

The result. For ``min_x f(y*(x))`` with ``g_i = (1/2)||y - r_i(x)||^2`` (``b = 0``, ``kappa_g =
1``), with ``T = 1`` in (16)::

    (1/K) sum_{k=1}^K E||grad f(x^k)||^2 = O(1 / sqrt(K)).

What is checked (``k_rate_compositional``, the shared K-rate check
:func:`~theory_checks.fednest.k_rate.check_k_rate`): on one-level linear compositional problems
with sampled ``r_i``, ``T = 1``, ``N = 1`` and FedIHGP's ``l_{g,1} = 1`` (the 1/2 convention
of Sec. 3.2), the exponent of ``E (1/K) sum_k ||grad f(x_k)||^2`` in K is at most -1/4 (the claim
is -1/2), Student-t over independent replicates; decided on the thorough profile. Hypothesis:
A2.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from problems import LinearCompositional
from problems import strategies
from theory_checks.claim import Claim
from theory_checks.fednest.common import case_builder
from theory_checks.fednest.k_rate import K_RATE_DESIGN_NOTES
from theory_checks.fednest.k_rate import k_rate_claim
from theory_checks.fednest.perturbations import DRIFTING_OUTER_FEDNEST

# =========================================================================================== cases


def rate_compositional() -> st.SearchStrategy[Any]:
    return st.builds(
        lambda m, d1, het, noise, seed: LinearCompositional.random(
            m, [1, d1], seed, heterogeneity=het, n_samples=8, matrix_noise=noise, value_noise=noise
        ),
        st.integers(2, 4),
        st.integers(1, 3),
        st.floats(0.0, 1.0),
        st.floats(0.2, 1.0),
        strategies.SEEDS,
    )


# Cases of claim fednest.cor33.k_rate_compositional
cor33_k_rate_compositional_cases = case_builder(rate_compositional())


# ====================================================================================== the claims


K_RATE_COMPOSITIONAL = k_rate_claim(
    id="fednest.cor33.k_rate_compositional",
    reference="Tarzanagh et al. 2022, Cor. 3.3 (Sec. 3.2; compositional, T = 1, b = 0)",
    statement=(
        "compositional FedNest, stochastic, T = 1, N = 1: (1/K) sum E||grad f(x_k)||^2 = "
        "O(K^{-1/2}): the exponent in K is -1/2 (checked: <= -1/4, Student-t over "
        "replicates)"
    ),
    estimators=("fednest",),
    strategy=cor33_k_rate_compositional_cases,
    # wall time of `testbed check --profile thorough --claim ID` (it decides the claim; start-up
    # and the perturbation run included), 2 cores at load 6-7, 2026-11-26
    decide_seconds=54,
    perturbation=DRIFTING_OUTER_FEDNEST,
    notes=(
        K_RATE_DESIGN_NOTES + "l_{g,1} = 1 (Sec. 3.2's 1/2 convention), N = 1 (Sec. 2.4's h_i)."
    ),
)


CLAIMS: tuple[Claim, ...] = (K_RATE_COMPOSITIONAL,)

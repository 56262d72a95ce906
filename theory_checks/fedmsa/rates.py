"""FedMSA Theorem 3.1, stochastic: rates in M, tau and R (the rho statement), scaling in S.

Companion of :mod:`theory_checks.fedmsa` (same maps, criterion and output rule, whose helpers it
reuses). Theorem 3.1 bounds the output-rule criterion

.. math::  E\\|P(\\tilde x)\\|^2 + \\|\\tilde Z - Z^*(\\tilde x)\\|^2
           = O\\big(\\tau/R + 1/(\\sqrt K R) + \\sigma^2/(MKR) + (\\sigma/(MKR))^{2/3}\\big)
           \\qquad \\text{(Thm 3.1, eq. (49))},

where the expectation is over the minibatches, the local client ``m~ ~ Unif[M]`` of every round
and the output index ``(r, k) ~ Unif([R] x [K])`` (Algorithm 1 line 13).

**Exact expectations, not Monte Carlo.** On the closed-form families with additive sample noise
(finite per-client sample sets, ``hessian_noise = 0``) one FedMSA round is, for each local client
``m``, an affine map of the state ``s = (x, Z, h, q, x_prev, Z_prev)`` plus a sum over the
round's minibatch slots of a term that depends only on that slot's sample:

.. math::  s_{r+1} = T_m s_r + c_m + \\sum_{j} \\delta_{m,j}(i_j), \\qquad
           i_j \\sim \\mathrm{Unif}\\{0..n-1\\} \\text{ independent},

(eqs. (5)-(6) are linear in the maps, the maps are affine in the point and in the sample's
noise, and the same sample enters both points of a difference). :func:`identify_round` reads
``T_m``, ``c_m`` and every ``delta_{m,j}`` off the *registered algorithm* (built by ``make``),
running single rounds in a :func:`scripted_round_context` that fixes the local client and each
minibatch slot's sample; :func:`validate_round` then checks the identified model against a round
with a random state, client and draws (to round-off, else the case is not measurable). The mean
and covariance of the state then follow exactly, round by round (a mixture over ``m`` with
probability 1/M), and so does ``E`` of the criterion, a quadratic form (:func:`criterion_form`,
:func:`expected_criteria`). Every claim here is therefore decided in float64, deterministically:
there is no sampling error to control, and a refutation is a computation, not a fluke.

- **M** (clients): identical client means (tau = 0), own sample sets, started at the fixed point
  so that the criterion is the noise part alone; the theorem's slowest term in M is ``M^{-2/3}``.
- **tau** (heterogeneity): a one-parameter family whose client Jacobian deviations scale with one
  knob; steps ``alpha, beta = c / (tau K)`` as the theorem prescribes; an *upper bound* on the
  growth of the criterion at fixed R (see the claim's notes for what it does not decide).
- **rho** (notes 6 item 4): the theorem says ``rho = Theta(1/R)``, the proof takes ``rho =
  max(1/R, rho_2)`` with ``rho_2 ~ R^{-2/3}`` and an initial batch ``b_0 = K R`` that the algorithm
  box omits. Measured from the fixed point, where only the noise terms remain.
- **S** (clients averaged in the local phase, the generalised variant): exact enumeration.

This module holds the claims (:data:`CLAIMS`); the code they run lives in one-job modules and is
in its own module: :mod:`theory_checks.fedmsa.exact` (the exact moments) and
:mod:`theory_checks.fedmsa.stochastic_rates` (the checks in M, tau, rho and S, and their cases).
"""

from __future__ import annotations

from pathlib import Path

from theory_checks.claim import (
    Claim,
)
from theory_checks.claim_file import load_claims

# the names this module has always offered (helpers moved to the modules above)
__all__ = [
    "CLAIMS", "_EXACT_NOTE", "_PAPER", "_RHO_NOTE",
]

# =============================================================================== the claims

_PAPER = "FedMSA"
_EXACT_NOTE = (
    "Exact expectations (module docstring): each round of the registered algorithm is "
    "identified as an affine map of the state plus one term per minibatch slot, in a context "
    "that fixes the local client and every slot's sample, and validated on a random round to "
    "1e-8; mean and covariance then propagate exactly (a mixture over the local client), so "
    "the verdict is a float64 computation with no sampling error."
)
_RHO_NOTE = (
    "Started at the fixed point (x*, Z*(x*)), so the deterministic terms of Thm 3.1 vanish and "
    "the criterion is the noise part; additive noise only (3 samples per client, gradient "
    "noise 1), K = 1, batch 1, R in R_0 (1, 2, 4, 8) with R_0 >= 32 and >= 4 contraction "
    "horizons, steps inside Lemmas B.1-B.2. The theorem's slowest noise term is "
    "(sigma/(MKR))^{2/3}. " + _EXACT_NOTE
)

CLAIMS: tuple[Claim, ...] = load_claims(Path(__file__).with_name("rates.toml"))

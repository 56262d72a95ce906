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
running single rounds in a :class:`_ScriptedContext` that fixes the local client and each
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
in its own module: :mod:`theory_checks.fedmsa_exact` (the exact moments) and
:mod:`theory_checks.fedmsa_stochastic_rates` (the checks in M, tau, rho and S, and their cases).
"""

from __future__ import annotations

from theory_checks.claim import (
    Claim,
    Perturbation,
)
from theory_checks.fedmsa_stochastic_rates import (
    _heterogeneous_four,
    _identical_clients,
    _noise_free_control,
    _noisy_cases,
    _tau_cases,
    check_participation,
    check_rate_M,
    check_rate_tau,
    check_rho_as_stated,
    check_rho_proof_choice,
)
from theory_checks.perturbations import fedmsa as perturbed
from theory_checks.runner import per_profile

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
    "horizons, steps from single_timescale_step. The theorem's slowest noise term is "
    "(sigma/(MKR))^{2/3}. " + _EXACT_NOTE
)

CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="fedmsa.rate.M_stochastic",
        paper=_PAPER,
        reference="Theorem 3.1 / Cor. C.1, terms sigma^2/(MKR) + (sigma/(MKR))^{2/3}; notes "
                  "3.9-3.11, 5.3",
        kind="scaling_exponent",
        statement="noise-dominated (start at the fixed point), M iid clients (tau = 0, one "
                  "sigma): E of the output-rule criterion decays in M at least like M^{-2/3}: "
                  "exact exponent <= -2/3 + 0.1",
        estimators=("fedmsa",),
        strategy=_identical_clients,
        check=check_rate_M,
        max_examples=per_profile(1, 6),
        shrink=False,
        perturbation=Perturbation(
            "global step on one client",
            "Eq. (5) takes client 0's maps instead of the average over the M clients (the "
            "local phase's one-client rule applied to the global step): the noise no longer "
            "averages over M, the exponent goes from -1 to 0. The check resolves only changes "
            "of the exponent (a bug that keeps the noise ~ 1/M, e.g. averaging over half the "
            "clients, does not matter to the claim and is not caught).",
            perturbed.one_client_global, max_examples=1),
        notes="M in {1, 2, 4} (thorough {1, 2, 4, 8}) copies of one client, its sample set "
              "included (iid clients: tau = 0, the same sigma for every M; gradient noise 1), "
              "K = 1, rho = 1/2, R = 6, batch 1, steps from single_timescale_step. Only the "
              "global step (5) averages over M, so the exact exponent is -1 (the "
              "sigma^2/(MKR) form): the linear speedup the paper claims. " + _EXACT_NOTE,
    ),
    Claim(
        id="fedmsa.rate.tau_stochastic",
        paper=_PAPER,
        reference="Theorem 3.1 term tau/R with alpha, beta = O(1/(tau K)); notes 3.9-3.11, 5.3",
        kind="scaling_exponent",
        statement="stochastic, alpha = beta = c/(tau K), fixed R = 8: E of the output-rule "
                  "criterion grows at most linearly in the heterogeneity tau over tau_knob in "
                  "{0.1, 0.2, 0.4}: exact exponent <= 1 + 0.1 (an upper bound only: it does "
                  "not show that the tau/R growth is attained)",
        estimators=("fedmsa",),
        strategy=_tau_cases,
        check=check_rate_tau,
        max_examples=per_profile(1, 6),
        shrink=False,
        perturbation=Perturbation(
            "global step on one client",
            "Eq. (5) takes client 0's maps instead of the average over the M clients: the "
            "algorithm is pulled to client 0's fixed point, whose distance to the true one "
            "grows with the heterogeneity, so the criterion at fixed R grows faster than "
            "linearly in tau. Slow: ~6 s on one core with its replay (three identifications of "
            "two-step rounds).",
            perturbed.one_client_global, max_examples=1, slow=True),
        notes="What it decides: the theorem's bound grows like tau/R, so at fixed R the "
              "criterion may grow at most linearly in tau; the measured exponent (0.2-0.3 "
              "before, by Monte Carlo: 0.23 [-0.06, 0.51]) is far below 1, and R = 8 is too "
              "short for the tau/R term to dominate, so the check is an upper bound on the "
              "growth, not a measurement of the tau/R law. One instance per case rebuilt with "
              "hessian_heterogeneity in {0.1, 0.2, 0.4} (same seed, so the clients' Jacobian "
              "deviations scale together; tau measured by heterogeneity_tau), value "
              "heterogeneity 0, gradient noise 0.05, K = 2, R = 8, rho = 1/R, b_0 = KR; "
              "alpha, beta = the contracting pair at the smallest tau times tau_min / tau; "
              "start x0 seeded, Z0 = Z*(x0). " + _EXACT_NOTE,
    ),
    Claim(
        id="fedmsa.rho.as_stated",
        paper=_PAPER,
        reference="Theorem 3.1 and Cor. C.1 (rho = Theta(1/R)) with Algorithm 1's box (no "
                  "initial batch); notes 3.9, 6 item 4",
        kind="scaling_exponent",
        statement="rho = 1/R, every round batch b: the output-rule criterion is "
                  "O(tau/R + 1/(sqrt(K) R) + sigma^2/(MKR) + (sigma/(MKR))^{2/3}), so its exact "
                  "expectation decays in R at least like R^{-2/3}: exponent <= -2/3 + 0.1",
        estimators=("fedmsa",),
        strategy=_noisy_cases,
        check=check_rho_as_stated,
        max_examples=per_profile(2, 8),
        shrink=False,
        expected="fails",
        positive_control=_noise_free_control(),
        notes="Refuted: with rho = 1/R the round-0 momentum error survives (1 - 1/R)^R ~ e^{-1} "
              "of its size through every round, so the noise part of the criterion does not "
              "decay in R (exact exponent near 0, e.g. 0.02 and -0.01 over R = 16..1024). The "
              "proof needs b_0 = KR (absent from the algorithm) and takes rho ~ R^{-2/3}. "
              "Positive control: sigma = 0 from an offset start (only the deterministic terms): "
              "exponent -1, holds. " + _RHO_NOTE,
    ),
    Claim(
        id="fedmsa.rho.proof_choice",
        paper=_PAPER,
        reference="Theorem 3.1's proof (App. B.2, final parameter choice: rho = max(1/R, "
                  "rho_2), rho_2 ~ R^{-2/3}, b_0 = KR); notes 3.9, 6 item 4",
        kind="scaling_exponent",
        statement="rho = max(1/R, R^{-2/3}) and an initial batch b_0 = K R: the noise part of "
                  "the criterion decays in R at least like R^{-2/3}: exact exponent of its "
                  "expectation <= -2/3 + 0.1",
        estimators=("fedmsa",),
        strategy=_noisy_cases,
        check=check_rho_proof_choice,
        corrects="fedmsa.rho.as_stated",
        max_examples=per_profile(2, 8),
        shrink=False,
        perturbation=Perturbation(
            "fresh sample at the previous point",
            "Eqs. (5)-(6) evaluate p(x_{r-1}; xi) on another sample than p(x_r; xi) (a second "
            "draw instead of reusing xi): the STORM difference no longer cancels the noise, the "
            "momentum error's variance grows like sigma^2/rho instead of rho sigma^2, and the "
            "criterion grows with R. A one-line bug that keeps every estimate unbiased.",
            perturbed.fresh_sample_at_old_point, max_examples=1),
        notes="rho_2 is taken with constant 1 (the proof's constant has Delta_W = W_0 - W_R, "
              "which is ~0 from the fixed point). Exact exponents -0.59 to -0.66 over R = "
              "16..1024; the approach to -2/3 is slow (relative corrections ~ horizon / R). "
              + _RHO_NOTE,
    ),
    Claim(
        id="fedmsa.scaling.participation",
        paper=_PAPER,
        reference="not stated in the paper (theory: one client; Conclusion: generalised "
                  "variant with S clients averaged, notes 2.6); derived here",
        kind="scaling_exponent",
        statement="Var over uniformly sampled S-subsets of the server point after a round of "
                  "the generalised variant (exact maps) is proportional to (M-S)/(S(M-1)): "
                  "fitted exponent 1 (0.02)",
        estimators=("fedmsa",),
        strategy=_heterogeneous_four,
        check=check_participation,
        max_examples=per_profile(3, None),
        shrink=False,
        perturbation=Perturbation(
            "adopt the first sampled client",
            "The server adopts the first of the S sampled clients' models instead of their "
            "average (Algorithm 1 line 12's one-client rule kept for S > 1): the variance "
            "stops shrinking like (M-S)/(S(M-1)).",
            perturbed.adopt_first, max_examples=3),
        notes="Deterministic: every S-subset is enumerated (exact variance, no sampling). The "
              "paper states no exponent in S; this records the measured one. Round 0 (K = 1, "
              "same for every client) then round 1 with K = 3 on every subset of M = 4 "
              "clients.",
    ),
)

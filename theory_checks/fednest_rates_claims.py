"""The claims of :mod:`theory_checks.fednest_rates` as data: the K-rate notes, the (14b)
counterexample and positive control, and the ``CLAIMS`` literal.
"""

from __future__ import annotations

from hypothesis import strategies as st

from problems import QuadraticBilevel
from theory_checks.claim import Claim, known_case
from theory_checks.fednest_abs_error import (
    _abs_error_cases,
    abs_error_bound_as_stated,
    abs_error_bound_per_sample,
    check_abs_error,
)
from theory_checks.fednest_common import PAPER, REF, _bilevel, _case_builder
from theory_checks.fednest_floor_slope import check_floor_slope
from theory_checks.fednest_k_rate import (
    _rate_bilevel,
    _rate_compositional,
    _rate_minimax,
    check_k_rate,
)
from theory_checks.fednest_lfednest import _lfednest_cases, check_lfednest_bias
from theory_checks.fednest_sampling import _sampling_cases, check_sampling_variance_n
from theory_checks.perturbations import fednest as perturb
from theory_checks.runner import per_profile

_RATE_NOTES = ("Steps: alpha_1 = 1/||grad^2 f|| halved until the exact-oracle iteration "
               "contracts (Thm 3.1's alpha_bar_1..3 are such constants; the seed gives none), "
               "alpha_bar = (alpha_1/2) sqrt(K_1) (the cap never binds; largest step alpha_1/2, "
               "off the one-step-solver point alpha_1 = 1/L_h where the transient vanishes), "
               "beta_bar = T/(alpha_1 l); K_1 the first power of two by which the slowest "
               "exact-oracle mode decays by e^{-4}, K_2 = 16 K_1. Independent replicates r give "
               "p_r = log(Q_r(K_2)/Q_r(K_1))/log 16; Student-t interval of their mean against "
               "p <= -1/4 (halfway between the claimed -1/2 and a floor's 0), replicates sized "
               "for a half-width 0.1 (<= 58 replicates x 17 K_1 iterations, <= 16000, ~2 min on "
               "one core), two looks (16, all) at half the rate each. Fast: 2 replicates of K_1, "
               "4 K_1, a smoke run that cannot decide (undecided).")

# The (14b) counterexample: one client, kappa = 1 (mu_g = l_{g,1} = 1), two samples whose
# Hessians are 0.1 and 1.9: every factor of H_hat has norm 0.9 > 1 - mu_g/l = 0.
_ABS_ERROR_COUNTEREXAMPLE = known_case(
    {"family": "QuadraticBilevel.random", "n_clients": 1, "dim_x": 1, "dim_y": 1,
     "condition_number": 1.0, "seed": 0, "hessian_heterogeneity": 0.0,
     "gradient_heterogeneity": 0.0, "mu": 1.0, "n_samples": 2, "gradient_noise": 0.5,
     "hessian_noise": 0.9},
    {"point_seed": 0, "neumann_terms": 8, "participation": None})

# Positive control of (14b) as stated: the sample Hessians equal the client's (no Hessian noise),
# so every factor I - H_s/l has norm <= 1 - mu_g/l and the lemma's proof goes through. One
# client, H = diag(1, 4), l = 4, N = 2: H_hat is (2/l) I or (2/l)(I - H/l), and E||H^{-1} - H_hat||
# = (0.5 + 0.625)/2 = 0.5625 against 2/mu_g = 2 (the Hoeffding interval reaches ~1.6).
_ABS_ERROR_CONTROL = known_case(
    QuadraticBilevel.random(1, 1, 2, 4.0, seed=0, n_samples=2, gradient_noise=0.5,
                            hessian_noise=0.0).spec(),
    {"point_seed": 0, "neumann_terms": 2, "participation": None})

CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="fednest.thm31.k_rate_bilevel",
        paper=PAPER,
        reference=f"{REF}, Thm 3.1 and Cor. 3.1 (stochastic, step rule (16)); notes 3.4-3.5, T10",
        kind="scaling_exponent",
        statement="(1/K) sum_{k=1}^K E||grad f(x_k)||^2 = O(K^{-1/2}) with alpha_K ~ 1/sqrt(K), "
                  "beta_K = beta_bar alpha_K / T, N = O(kappa_g log K): the exponent of the "
                  "mean in K is -1/2 (checked: <= -1/4, Student-t over replicates)",
        estimators=("fednest",),
        strategy=_case_builder(_rate_bilevel()),
        check=check_k_rate,
        # one case: ~1.5 s (fast) / 0.5-2 min (thorough) on one core
        max_examples=1,
        shrink=False,
        decision="statistical",
        undecided_on=("fast",),
        perturbation=perturb.DRIFTING_OUTER["fednest"],
        notes=_RATE_NOTES + " N_K: smallest N with b_N^2 <= 1e-2 ||grad f(x_0)||^2 / sqrt(K) "
                            "(corrected constant of (15)).",
    ),
    Claim(
        id="fednest.cor32.k_rate_minimax",
        paper=PAPER,
        reference=f"{REF}, Cor. 3.2 (minimax, b = 0); notes 3.6, T14",
        kind="scaling_exponent",
        statement="minimax FedNest, stochastic: (1/K) sum E||grad phi(x_k)||^2 = O(K^{-1/2}): "
                  "the exponent in K is -1/2 (checked: <= -1/4, Student-t over replicates)",
        estimators=("fednest-minimax",),
        strategy=_case_builder(_rate_minimax()),
        check=check_k_rate,
        # one case: ~1.5 s (fast) / 0.5-2 min (thorough) on one core
        max_examples=1,
        shrink=False,
        decision="statistical",
        undecided_on=("fast",),
        perturbation=perturb.DRIFTING_OUTER["fednest-minimax"],
        notes=_RATE_NOTES + " kappa_f = 1 (dim_y = 1), so T = 1 = O(kappa_f).",
    ),
    Claim(
        id="fednest.cor33.k_rate_compositional",
        paper=PAPER,
        reference=f"{REF}, Cor. 3.3 (compositional, T = 1, b = 0); notes 3.7, T15",
        kind="scaling_exponent",
        statement="compositional FedNest, stochastic, T = 1, N = 1: (1/K) sum E||grad f(x_k)||^2 "
                  "= O(K^{-1/2}): the exponent in K is -1/2 (checked: <= -1/4, Student-t over "
                  "replicates)",
        estimators=("fednest",),
        strategy=_case_builder(_rate_compositional()),
        check=check_k_rate,
        # one case: ~1.5 s (fast) / 0.5-2 min (thorough) on one core
        max_examples=1,
        shrink=False,
        decision="statistical",
        undecided_on=("fast",),
        perturbation=perturb.DRIFTING_OUTER["fednest"],
        notes=_RATE_NOTES + " l_{g,1} = 1 (1/2 convention), N = 1 (notes issue 7).",
    ),
    Claim(
        id="fednest.thm31.floor_slope_in_n",
        paper=PAPER,
        reference=f"{REF}, Thm 3.1 (b^2 term) with Lemma 2.2 eq. (15); notes 3.2 [D], 5.3, T11",
        kind="linear_rate",
        statement="deterministic FedNest's stationarity floor ||grad f(x_N)|| decays in N with "
                  "fitted slope log(1 - mu/l) (5%), no shallower than b's log((kappa_g - 1)/"
                  "kappa_g)",
        estimators=("fednest",),
        strategy=_case_builder(_bilevel(max_clients=3, max_dim=2, kappa=(1.5, 5.0),
                                        min_dim_y=2), inner_steps=st.integers(2, 4)),
        check=check_floor_slope,
        # Why no shrinking: each case reads five exact limits (~0.6 s); a shrunk case says no
        # more than the failing one (this claim is expected to hold).
        shrink=False,
        perturbation=perturb.NEUMANN_STEP_0_9,
        max_examples=per_profile(1, 2),
        notes="Slope of the norm; the squared floor of Thm 3.1 has twice it. mu = "
              "lambda_min(H_bar), l = max_i lambda_max(H_i) (the Neumann step). Each case reads "
              "five exact limits through fednest.thm31.stationarity_floor's check.",
    ),
    Claim(
        id="fednest.lemma22.abs_error_as_stated",
        paper=PAPER,
        reference=f"{REF}, Lemma 2.2, eq. (14b) with A1-A2's constants; notes issue 4",
        kind="bias_bound",
        statement="E_W||H^{-1} - H_hat|| <= 2/mu_g, mu_g = min_i lambda_min(H_i), "
                  "l_{g,1} = max_i lambda_max(H_i) (stochastic Hessians, sampled clients)",
        estimators=("fedihgp",),
        strategy=_abs_error_cases,
        check=check_abs_error,
        positive_control=_ABS_ERROR_CONTROL,
        bound=abs_error_bound_as_stated,
        decision="statistical",
        expected="fails",
        max_examples=4,
        shrink=False,
        examples=(_ABS_ERROR_COUNTEREXAMPLE,),
        notes="A and B bound only the clients' mean Hessians; sample Hessians outside "
              "[mu_g, l_{g,1}] make ||I - H_sample/l|| exceed 1 - mu_g/l, and E||H_hat|| "
              "exceeds 1/mu_g. Saved counterexample: mean Z = 5.5 vs 2 (Hoeffding margin 3).",
    ),
    Claim(
        id="fednest.lemma22.abs_error_per_sample",
        paper=PAPER,
        reference=f"{REF}, Lemma 2.2, eq. (14b) with per-sample Hessian bounds; notes issue 4",
        kind="bias_bound",
        statement="E_W||H^{-1} - H_hat|| <= 2/mu_s when every sample Hessian lies in "
                  "[mu_s, l] and FedIHGP uses 1/l",
        estimators=("fedihgp",),
        strategy=_abs_error_cases,
        check=check_abs_error,
        perturbation=perturb.IHGP_HALVED_LIPSCHITZ,
        bound=abs_error_bound_per_sample,
        decision="statistical",
        corrects="fednest.lemma22.abs_error_as_stated",
        max_examples=per_profile(1, 3),
        shrink=False,
        examples=(_ABS_ERROR_COUNTEREXAMPLE,),
        notes="||H^{-1}|| + (1/l) sum_n (1 - mu_s/l)^n <= 1/mu + 1/mu_s <= 2/mu_s.",
    ),
    Claim(
        id="fednest.lfednest.heterogeneity_bias",
        paper=PAPER,
        reference=f"{REF}, Sec. 2.4 / Fig. 2 (LFedNest degrades under non-iid data); notes 2.7 "
                  "[D], T19",
        kind="scaling_exponent",
        statement="LFedNest's direction = mean_i[grad_x f_i - J_i H_i^{-1}(I - A_i^N) grad_y f_i]; "
                  "its gap to FedNest's E[h] is 0 for identical Hessians and grows with exponent "
                  "1 in the Hessian heterogeneity; FedNest's bias does not depend on it",
        estimators=("lfednest",),
        strategy=_lfednest_cases,
        check=check_lfednest_bias,
        perturbation=perturb.LOCAL_NEUMANN_STEP_0_9,
        max_examples=per_profile(2, 3),
        notes="Gradient heterogeneity >= 0.5 (the first-order term is the covariance of the "
              "Hessian/Jacobian spread with the gradient spread). h in {0, 1e-3, ..., 8e-3}.",
    ),
    Claim(
        id="fednest.ihgp.client_sampling_variance_n",
        paper=PAPER,
        reference=f"{REF}, Alg. 3 (S_0..S_N' drawn UAR); notes 3.2 [D], 5.3 (no paper law)",
        kind="exact_identity",
        statement="|S_n| = s UAR, N > 1: E p = full-participation E p and Var(p) = "
                  "N l^{-2} sum_{n<N} tr M_n - ||E p||^2 with M_n = E[A_S M_{n-1} A_S^T], "
                  "M_0 = E[v_S v_S^T] (finite-population factor (m - s)/(s (m - 1)))",
        estimators=("fedihgp",),
        strategy=_sampling_cases,
        check=check_sampling_variance_n,
        # Why no shrinking: each case enumerates up to 4^2 x 6 subset sequences per size; a
        # shrunk case says no more than the failing one (this claim is expected to hold).
        shrink=False,
        perturbation=perturb.IHGP_SAME_SUBSET,
        max_examples=per_profile(2, 4),
        notes="Derived law (the paper states none; notes issue 17). Exact: every sequence of "
              "subsets is enumerated. Var(s) - Var(m) is a degree-N polynomial in the factor, "
              "so the N = 1 exponent-1 law does not carry over.",
    ),
)

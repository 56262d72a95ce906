"""The CORE_CLAIMS literal of HGP (Lemmas 1-2, Corollary 1, Theorems 1-2): the deterministic
claims, each wired to its check in the sibling modules; :mod:`theory_checks.hgp` adds the rest.
"""

from __future__ import annotations

from problems import PerClientQuadratic, strategies
from testbed.decentralized.graphs import CONNECTED_FAMILIES
from theory_checks.claim import Claim, known_case
from theory_checks.hgp_common import graph_cases
from theory_checks.hgp_core_helpers import _cases
from theory_checks.hgp_exact_averaging import (
    _identity_cases,
    _thm2_cases,
    check_error_identity,
    check_lemma1,
    check_theorem2_as_stated,
    check_theorem2_corrected,
)
from theory_checks.hgp_pushsum import _lemma2_cases, check_lemma2_geometric, check_lemma2_sqrt_n
from theory_checks.hgp_theorem1 import (
    _rate_s_cases,
    _step_cases,
    check_corollary1,
    check_rate_in_m,
    check_rate_in_s,
    check_stated_step_condition,
)
from theory_checks.perturbations import hgp as perturb

# --------------------------------------------------------------------------- the claims

CORE_CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="hgp.lemma1.eta_invariance",
        paper="HGP",
        reference="Terashita & Hara, Lemma 1 (eq. 9) and App. B; notes 2.5-2.6 (1)",
        kind="exact_identity",
        statement="y* = Theta(y* - eta grad g(y*)) for every eta (and not at other consensus "
                  "points); the eq. (10) fixed point -eta J Theta sum((I - eta H)Theta)^m c + e "
                  "= GlobalGrad, independent of eta (1e-10)",
        estimators=("hgp-exact-averaging",),
        # Why kappa <= 3: M grows like kappa log(1e13) for the smallest eta; small kappa keeps
        # three runs of a few hundred iterations within the fast profile's budget.
        strategy=_cases(kappa=(1.0, 3.0), hessian_heterogeneity=(0.0, 0.3)),
        check=check_lemma1,
        perturbation=perturb.FLOAT32_MESSAGES,
    ),
    Claim(
        id="hgp.exact_averaging.error_identity",
        paper="HGP",
        reference="HGP eq. (10)/(16) with exact Theta; notes 4.6 D2",
        kind="exact_identity",
        statement="v_i^(M) - GlobalGrad_i = J_i H_bar^{-1} (I - eta H_bar)^M c_bar (1e-10), "
                  "exact averaging and the centralized (server) variant",
        estimators=("hgp-exact-averaging", "hgp-centralized"),
        strategy=_identity_cases,
        check=check_error_identity,
        perturbation=perturb.FLOAT32_MESSAGES,
    ),
    Claim(
        id="hgp.lemma2.sqrt_n_constant",
        paper="HGP",
        reference="HGP proof of Lemma 2 (App. C.1), the step to eq. (15) -- a step of the "
                  "proof, not the lemma; notes 4.2, 7.2 item 10",
        kind="bias_bound",
        statement="proof step: sigma_max(Theta_hat_S - Theta) <= sqrt(n) max_ij |(Theta_hat_S "
                  "- Theta)_ij| (the step from Nedic-Olshevsky's entrywise (8/delta) tau^S to "
                  "the stated 8 sqrt(n)/delta)",
        estimators=("hgp",),
        strategy=_lemma2_cases,
        check=check_lemma2_sqrt_n,
        expected="fails",
        # a directed ring of three clients: a circulant Push-Sum error whose spectral norm
        # stays below sqrt(3) max|E_ij| (ratio 0.87) at every S: the step can hold
        positive_control=known_case(
            PerClientQuadratic.random(3, 1, 1, 1.0, 0).spec(),
            {"point_seed": 0, "graph_family": "directed_ring", "graph_seed": 0,
             "pushsum_steps": 1}),
        notes="A refuted step of the proof, not a refutation of Lemma 2: the lemma only claims "
              "that some delta > 0 and tau < 1 exist, and a larger constant (8n/delta) absorbs "
              "the gap. The spectral norm of an n x n matrix is only bounded by n times its "
              "largest entry; a rank-one Push-Sum error with rows (a, -a) already gives "
              "sigma_max = 2|a| = n max|E| for n = 2. The constant the proof supports is "
              "8n/delta (checked, with explicit tau and delta, by hgp.lemma2.geometric_consensus"
              "); the sqrt(n) factors downstream (Thm 1's S-condition) inherit the gap.",
    ),
    Claim(
        id="hgp.lemma2.geometric_consensus",
        paper="HGP",
        reference="HGP Lemma 2 with the corrected constant 8n/delta; notes 4.2, 6.3 T2",
        kind="linear_rate",
        statement="c_S = sigma_max(Theta_hat_S - Theta) <= (n - 1) tau(A(S:1)) / delta_S "
                  "at every S (the proof's constant made explicit: tau = Dobrushin's "
                  "coefficient of the Push-Sum product, delta_S = its smallest weight), and "
                  "log c_S decays linearly in S (95% interval of the fitted slope < 0) on every "
                  "family satisfying Assumption 1",
        estimators=("hgp",),
        strategy=_lemma2_cases,
        check=check_lemma2_geometric,
        corrects="hgp.lemma2.sqrt_n_constant",
        perturbation=perturb.PUSHSUM_ONE_STEP_SHORT,
        notes="The bound n max|E_ij| of the earlier version held for every matrix (sigma_max "
              "<= Frobenius <= n max entry), so it could not fail; the entrywise part now has "
              "explicit constants computed from the graph sequence, and the bound is nearly "
              "tight (max c_S / bound 0.82 on mixing graphs, 1.0 on an edgeless step).",
    ),
    Claim(
        id="hgp.corollary1.explicit_bound",
        paper="HGP",
        reference="HGP Cor. 1 made explicit with the measured Push-Sum error (notes 4.6 D1)",
        kind="bias_bound",
        statement="||v^(m) - d_lambda f|| / ||d_x f|| <= eta beta c_S (1 - rho + r) / ((1 - q)"
                  "(1 - rho)) + eta beta rho^m / (1 - rho), r = max||I - eta H_k||, "
                  "rho = ||I - eta H_bar||, q = r (1 + c_S) < 1, eta = 1/L, every graph family",
        estimators=("hgp",),
        strategy=graph_cases(strategies.per_client_quadratic(), CONNECTED_FAMILIES),
        check=check_corollary1,
        corrects="hgp.theorem1.stated_step_condition",
        perturbation=perturb.STEP_SLIP,
    ),
    Claim(
        id="hgp.theorem1.stated_step_condition",
        paper="HGP",
        reference="HGP Thm 1 / Cor. 1 proof (App. C.2, sigma_max(I - eta H) <= 1 - eta alpha); "
                  "notes 7.2 item 9",
        kind="bias_bound",
        statement="under the stated 0 < eta alpha < 1 only: ||v^(m) - d_lambda f|| / ||d_x f|| "
                  "<= (beta/alpha)(1 - eta alpha)^m + (2 beta/(eta alpha^2)) c_S",
        estimators=("hgp",),
        strategy=_step_cases,
        check=check_stated_step_condition,
        expected="fails",
        # eta alpha = 0.1 on a kappa-3 problem: eta L = 0.44 <= 1, the condition the proof
        # needs, and the stated bound holds (error 0.073 <= 0.136 at the worst m)
        positive_control=known_case(
            PerClientQuadratic.random(3, 2, 2, 3.0, 2, hessian_heterogeneity=0.3).spec(),
            {"point_seed": 0, "eta_alpha": 0.1}),
        notes="The proof needs eta L <= 2 - eta alpha (e.g. eta <= 1/L); with eta alpha < 1 "
              "only, I - eta H_k can have norm above 1 and the iteration contracts more slowly "
              "than (1 - eta alpha)^m or diverges.",
    ),
    Claim(
        id="hgp.theorem1.rate_in_m",
        paper="HGP",
        reference="HGP Thm 1, third term exp(-O(M)); notes 4.4, 4.6 D2",
        kind="linear_rate",
        statement="slope of log||v^(M) - d_lambda f|| in M = log rho_bar (5%), rho_bar = "
                  "||I - eta H_bar||, and <= log(1 - eta alpha / 2)",
        estimators=("hgp-exact-averaging",),
        strategy=_cases(min_clients=2, kappa=(2.0, 5.0)),
        check=check_rate_in_m,
        perturbation=perturb.STEP_SLIP_EXACT,
    ),
    Claim(
        id="hgp.theorem1.rate_in_s",
        paper="HGP",
        reference="HGP Thm 1, second term (2 beta/(eta alpha^2)) c tau^S; notes 3.5, 6.3 T6",
        kind="linear_rate",
        statement="static network (Theta_hat = W^S): slope of log error floor in S = log "
                  "SLEM(W) within 25%",
        estimators=("hgp-static",),
        strategy=_rate_s_cases,
        check=check_rate_in_s,
        perturbation=perturb.STEP_SLIP_STATIC,
    ),
    Claim(
        id="hgp.theorem2.as_stated",
        paper="HGP",
        reference="HGP Thm 2 (App. D) as stated; notes 4.5, 7.2 item 17",
        kind="bias_bound",
        statement="exact Jacobians, exact averaging, y_hat != y*: error <= ((2 nu_g/alpha)(1 + "
                  "beta/alpha)(1 + c) ||d_x f|| + nu_f beta/alpha) ||y_hat - y*|| + exp(-O(M))",
        estimators=("hgp-exact-averaging",),
        strategy=_thm2_cases,
        check=check_theorem2_as_stated,
        expected="fails",
        # no y-dependence of grad_lambda f (P = 0, outer coupling 0): the dropped term (C)
        # vanishes and the stated bound holds (error 0.20 <= 1.21)
        positive_control=known_case(
            PerClientQuadratic.random(3, 2, 2, 2.0, 0, outer_coupling=0.0).spec(),
            {"point_seed": 0}),
        notes="The statement drops term (C) = grad_lambda f(y_hat) - grad_lambda f(y*), of size "
              "up to nu_f ||y_hat - y*||; with small beta/alpha the stated bound is below it.",
    ),
    Claim(
        id="hgp.theorem2.corrected",
        paper="HGP",
        reference="HGP Thm 2 with term (C) restored; notes 4.5",
        kind="bias_bound",
        statement="error <= ((2 nu_g/alpha)(1 + beta/alpha)(1 + c) ||d_x f|| + nu_f (1 + 2 "
                  "beta/alpha)) ||y_hat - y*|| + (beta/alpha) rho^M ||d_x f||  (nu_g = 0 here)",
        estimators=("hgp-exact-averaging",),
        strategy=_thm2_cases,
        check=check_theorem2_corrected,
        corrects="hgp.theorem2.as_stated",
        perturbation=perturb.STEP_SLIP_THM2,
    ),
)

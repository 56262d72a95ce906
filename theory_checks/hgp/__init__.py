"""Claims of the HGP paper (Terashita & Hara, "Decentralized Hyper-Gradient Computation over
Time-Varying Directed Networks"): Lemmas 1-2, Theorems 1-2, Corollary 1, their errata, the
negative control and the applications (Sec. 5).

Citations follow the numbering of arXiv:2210.02129 v3 (Sections 1-6, Algorithms 1-2, Assumptions
1-4, Lemmas 1-2, Theorems 1-2, Corollaries 1-2, Remarks 1-4, Tables 1-8, equations (1)-(22);
Appendices A-D: Lemma 1's proof in App. B, Lemma 2 and Theorem 1's proof in App. C, the
corollaries and Theorem 2 in App. D).

Notation (Sec. 3.3, the paper's convention, sum over clients ``F = sum_k f_k``): at the consensus
optimum ``H_k = d2_y g_k`` (d_y x d_y), ``J_k = d2_{y lambda} g_k`` (d_lambda x d_y),
``c_k = grad_y f_k``, ``e_k = grad_lambda f_k``, ``H_bar``, ``c_bar`` their client means;
``GlobalGrad_i = e_i - J_i (sum H)^{-1} sum c``. ``Theta = (1/n) 1 1^T`` is exact averaging,
``Theta_hat`` its S-step Push-Sum approximation (Alg. 1), M the number of fixed-point iterations
of eq. (10), eta their step; ``alpha``, ``beta``, ``L``, ``mu``, ``nu``, ``c_S`` are the paper's
constants (:mod:`theory_checks.hgp.constants`). Every check compares the estimator's output with
a bound from the paper's formula (or an explicit version derived from its proof) and the problem's
constants.

Each result lives in one module, with its statement, hypotheses, cases, check(s),
perturbation(s), positive control and claims:

=========================================  ======================  ===========================
result                                     module                  claims
=========================================  ======================  ===========================
Algorithm 1 (Push-Sum in stochastic HGP)   :mod:`.alg1`            ``pushsum_operator``,
                                                                   ``static_operator``
Lemma 1 (eq. 9, eq. 10's fixed point)      :mod:`.lemma1`          ``eta_invariance``
exact averaging: eq. (16)'s error (D2)     :mod:`.exact_averaging` ``error_identity``
Lemma 2 (Push-Sum error, eq. 15)           :mod:`.lemma2`          ``sqrt_n_constant``,
                                                                   ``geometric_consensus``
Corollary 1 (exact Jacobians; D1)          :mod:`.corollary1`      ``explicit_bound``
Theorem 1 (and Cor. 2)                     :mod:`.theorem1`        ``stated_step_condition``,
                                                                   ``rate_in_m``, ``rate_in_s``,
                                                                   ``noise_exponent_b``,
                                                                   ``high_probability_bound``
Theorem 2 (inexact inner solution)         :mod:`.theorem2`        ``as_stated``, ``corrected``
stochastic HGP unbiased (Remark 3; D3)     :mod:`.stochastic`      ``unbiased``
noise term ~ sqrt(eta) (erratum; D4)       :mod:`.noise`           ``sqrt_eta``
Assumption 1 violated (negative control)   :mod:`.negative_control` ``not_strongly_connected``
GlobalGrad / ClientGrad / LocalGrad        :mod:`.taxonomy`        ``closed_forms``
vector-only messages (Alg. 1-2)            :mod:`.communication`   ``vector_messages``
influence estimation (Sec. 5.2, Table 4)   :mod:`.influence`       ``r2``, ``r2_retraining``
personalization (Sec. 5.3, Table 2)        :mod:`.personalization` ``gain``
=========================================  ======================  ===========================

Shared by several results: :mod:`.constants` (the paper's constants, assumptions and
conditions as hypotheses), :mod:`.common` (mixing families, case strategies, a run, exact
blocks, the exact noise moments and the stochastic claims' conformance tests),
:mod:`.perturbations` (the wrong estimators several results' perturbations build);
:mod:`.mutants` holds the realistic bugs ``testbed mutate`` runs against these claims.
"""

from __future__ import annotations

from theory_checks.claim import Claim
from theory_checks.discovery import declared_claims

#: The claims of every result module of this package (modules in name order).
CLAIMS: tuple[Claim, ...] = declared_claims(__name__, __path__)

__all__ = ["CLAIMS"]

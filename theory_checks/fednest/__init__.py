"""Claims of FedNest (Tarzanagh, Li, Thrampoulidis, Oymak; ICML 2022) and its errata.

Citations follow the numbering of arXiv:2205.02215 (the ICML 2022 version: Sections 1-6,
Algorithms 1-4, Lemmas 2.1-2.2, Theorem 3.1, Corollaries 3.1-3.3, equations (1)-(18); Appendix A
holds LFedNest, Algorithms 5-6 and Table 2).

Notation (the glossary of the documentation, docs/glossary.md): ``H = grad^2_y g``,
``H_i = grad^2_y g_i``, ``J_i = grad^2_xy g_i`` (``dx x dy``), bars for client means,
``l = l_{g,1}`` (``1 / neumann_step_size``), ``A = I - H / l``, ``N = neumann_terms``,
``N' ~ U{0..N-1}`` the random truncation index, ``T = inner_steps``, ``tau = local_steps``,
``beta = inner_step_size``, ``alpha = outer_step_size``.

Expectations over ``N'`` are exact finite sums: under full participation and exact oracles the
only randomness of FedIHGP is ``N'``, and the vector after round ``n`` of a run with
``N' = N - 1`` is exactly ``p_n`` of a run stopped at ``N' = n`` (the rounds are the same), so one
run gives the whole distribution. Linear maps of the algorithms (FedInn's per-call map, the
outer loop's per-iteration map) are read off column by column from single calls at ``z* + e_j``.
So most claims are deterministic (``decision="deterministic"``): the client-sampling variances
enumerate every subset through a scripted context, and the communication counts read the ledger
of runs whose seeded draws (N', subsets) are recorded with each iteration. The Monte Carlo
claims (Thm 3.1 / Cors. 3.2-3.3's K-rates, Lemma 2.2's (14b)) are statistical. Each claim that
holds names its perturbation, each refuted one a positive control.

Speed: oracle calls cost about 1-2 ms on the reference machine, so the strategies use small
dimensions, few clients and small kappa; each deterministic claim's fast profile (8 cases)
stays near 5 s.

One module per result of the paper (``fednest.<subject>.<name>`` lives in
``theory_checks/fednest/<subject>.py``, or in the package ``<subject>/`` of a long result:
``lemma22/``), with its statement, cases, checks, perturbations, positive controls and claims:

===================================================  ================  ==========================
result                                               module            claims
===================================================  ================  ==========================
Lemma 2.2, (13b)-(15): FedIHGP's bias               ``lemma22``       inverse_hessian_identity,
                                                                       inverse_hessian_bound,
                                                                       per_client_bias,
                                                                       averaged_bias,
                                                                       paper_constant,
                                                                       abs_error_as_stated,
                                                                       abs_error_per_sample
Alg. 3: FedIHGP's variance (derived laws)            ``ihgp``          variance_exact,
                                                                       variance_linear_in_n,
                                                                       client_sampling_variance,
                                                                       client_sampling_variance_n
Alg. 4, Sec. 2.5: FedInn                             ``fedinn``        linear_rate, tau_exponent
Sec. 2.5, Fig. 2(b): FedAvg's inner drift            ``fedavg``        biased_fixed_point
Sec. 2.4, Sec. 4.3: minimax                          ``minimax``       synthetic_linear_rate,
                                                                       per_client_indirect_zero,
                                                                       averaged_indirect_zero
Sec. 2.4, Cor. 3.3: compositional                    ``compositional`` one_call_exact,
                                                                       paper_indirect_form,
                                                                       single_term_unbiased
Sec. 2.6, Table 2: communication rounds              ``rounds``        paper_count_random,
                                                                       random_truncation, one per
                                                                       variant (fednest,
                                                                       lfednest, fednest_sgd,
                                                                       lfednest_svrg,
                                                                       fednest_minimax)
Thm 3.1, Cor. 3.1: bilevel convergence               ``thm31``         stationarity_floor,
                                                                       k_rate_bilevel,
                                                                       floor_slope_in_n
Cor. 3.2: minimax rate                               ``cor32``         k_rate_minimax
Cor. 3.3: compositional rate                         ``cor33``         k_rate_compositional
Sec. 2.6, Fig. 2: LFedNest's heterogeneity bias      ``lfednest``      heterogeneity_bias
===================================================  ================  ==========================

Shared: :mod:`~theory_checks.fednest.constants` (A1-A2's constants and hypotheses),
:mod:`~theory_checks.fednest.common` (the claim constructors, helpers, shared case strategies,
Thm 3.1's floor),
:mod:`~theory_checks.fednest.k_rate` (the K-rate check of Thm 3.1 / Cors. 3.2-3.3),
:mod:`~theory_checks.fednest.perturbations` (the
perturbations several results use and the wrong estimators the mutants reuse) and
:mod:`~theory_checks.fednest.mutants`.
"""

from __future__ import annotations

from theory_checks.claim import Claim
from theory_checks.discovery import declared_claims

#: The claims of every result module of this package (modules in name order).
CLAIMS: tuple[Claim, ...] = declared_claims(__name__, __path__)

__all__ = ["CLAIMS"]

"""Claims of the AggITD paper (Xiao & Ji, ICML 2023) and its errata.

Citations follow the numbering of arXiv:2302.04969 (the ICML 2023 version: Sections 1-6,
Algorithms 1-4, Propositions 1-2, Lemmas 1-3, Theorem 1, Corollary 1, Table 1-2, equations
(1)-(48); Appendices A-D, whose Lemmas 4-7 and Theorem 2 restate and prove the main text's).

Notation (the glossary of the documentation, docs/glossary.md): ``N`` = ``inner_steps``, ``tau`` =
``local_steps``, ``beta`` = ``inner_step_size``, ``alpha`` = ``outer_step_size``, ``lambda`` =
``neumann_step_size``, ``S`` = participating clients. ``H = grad^2_y g`` and ``J = grad^2_xy g`` are
constant on the closed-form families (so the paper's Hessian-Lipschitz constant ``rho`` is 0 and the
``alpha_1``, ``alpha_2`` terms of Prop. 1 vanish).

The paper's constants, step rules and assumptions are in one module,
:mod:`theory_checks.aggitd.constants`, which every check uses and whose hypotheses every claim
declares: ``mu`` is Assumption 1's (the smallest eigenvalue of every client's and sample's inner
Hessian), ``L_g`` and ``L_f`` Assumption 2's (spectral norms of every client's and sample's
Hessian of ``g_i`` and ``f_i`` in ``z = (x, y)`` jointly), ``M`` the largest ``||grad_z F_i||``
at the points a statement evaluates (the whole space's when ``f`` is affine: no quadratic ``f``
is Lipschitz globally, so Assumptions 2 and 4 hold only on bounded sets), ``sigma_g^2`` Assumption
4's dissimilarity ``E_i ||grad_z g_i - grad_z g||^2`` at those points (exact oracles: ``sigma_1 =
0``); the steps are ``lambda = min{10, 1/L_g}``, ``beta = min{1, lambda, 1/(6 L_g)}`` and the outer
steps of Lemma 3 and Theorem 1 unless a case names its own.

Every claim but Theorem 1's is deterministic: exact oracles, full participation (or every client
subset enumerated) and the expectation over the server's index Q computed exactly (one run per
``Q = 0..N``, or the expectation mode, eq. 11), so each measured figure is a float64 quantity
compared with round-off tolerances; the runs get :data:`~theory_checks.aggitd.common.NO_DRAWS`,
which raises on any random draw. Theorem 1's stochastic rate is the statistical claim.

=======================================  ===============  =====================================
result                                   module           claims
=======================================  ===============  =====================================
Prop. 1: mean over Q (eq. 11), bias      :mod:`.prop1`    mean_identity, bias_bound
(eq. 4)
Alg. 1 and its closed form (eq. 5)       :mod:`.alg1`     as_printed, per_index_identity
Prop. 2: second moment sigma_h^2         :mod:`.prop2`    second_moment
lower level, eqs. (14)-(15)              :mod:`.lower`    contraction
Table 1: rounds per iteration            :mod:`.comm`     rounds_per_iteration,
                                                          sgd_rounds_per_iteration
Corollary 1 (and Thm 1's floor)          :mod:`.cor1`     no_floor, floor_kept
scaling in N, tau and S                  :mod:`.scaling`  bias_rate_in_n, tau_invariance,
                                                          participation, tau_stationarity,
                                                          participation_algorithm
Theorem 1: rate in K (eq. 48)            :mod:`.thm1`     rate_in_K
Lemma 3: client drift                    :mod:`.lemma3`   drift_bound
errata: Thm 2, Prop. 2's proof, eq. (45) :mod:`.errata`   dh_theorem2_constant,
                                                          prop2_sum_as_printed,
                                                          prop2_sum_corrected, prop1_alpha3_eq45
=======================================  ===============  =====================================

Shared: :mod:`.constants` (the paper's constants, step rules and hypotheses), :mod:`.common`
(case strategies, exact runs, the affine iteration, the upper round, Prop. 1's bias check),
:mod:`.perturbations` (the wrong estimators several results or the mutants use),
:mod:`.mutants`.
"""

from __future__ import annotations

from theory_checks.claim import Claim
from theory_checks.discovery import declared_claims

#: The claims of every result module of this package (modules in name order).
CLAIMS: tuple[Claim, ...] = declared_claims(__name__, __path__)

__all__ = ["CLAIMS"]

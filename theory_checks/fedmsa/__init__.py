"""Claims of FedMSA (Tarzanagh, Li, Sharma, Oymak 2023, arXiv 2306.01648) and their errata.

Citations follow the numbering of arXiv:2306.01648 (Sections 1-6, Algorithm 1, Assumptions A-I,
Theorem 3.1, equations (1)-(11), Lemmas B.1-B.5, C.1, D.1, E.1-E.3, Corollaries C.1 and D.1;
the text read stops partway through Lemma E.3).

Notation (the glossary of the documentation, docs/glossary.md): ``N`` nested levels, ``tau`` the
Jacobian heterogeneity (Def. 2.2 with averages), ``K`` local steps (``local_steps``), ``R`` rounds,
``rho`` momentum, ``alpha``/``beta`` the steps on x and Z. ``P^m, S^m`` are the maps of eq. (10)
(bilevel, minimax) or (11) (compositional), ``P, S`` their client averages.

Every check compares the registered algorithm (built by ``make``) with a reference written here
independently of :mod:`testbed.algorithms.fedmsa_maps`: the maps of each closed-form family are
read off the family's arrays (:func:`~theory_checks.fedmsa.common.reference_maps`), so a wrong
map in the algorithm shows.

=========================================================  ============  ===================
result                                                     module        claims
=========================================================  ============  ===================
Algorithm 1, eqs. (5)-(6): first local step, telescoping   ``local``     2
tau = 0: FedMSA is centralised MSA (from eqs. (5)-(6))     ``tau_zero``  1
eq. (10): the bilevel fixed point gives the hypergradient  ``blo``       1
eq. (11), Corollary D.1: the compositional fixed point     ``mco``       2 (as printed, fix)
Lemma B.1: contraction of the inner variables              ``lemma_b1``  2 (as printed, fix)
Lemma B.5: the momentum error of (5), exact (add. noise)   ``lemma_b5``  1
Theorem 3.1: rates in R, K, M and tau                      ``rate``      4
Theorem 3.1: rho = Theta(1/R) and the initial batch b_0    ``rho``       3 (as printed, fix)
generalised variant: variance in the S clients averaged    ``scaling``   1
=========================================================  ============  ===================

Shared modules: :mod:`~theory_checks.fedmsa.constants` (the paper's constants, step and batch
conditions and assumptions as hypotheses), :mod:`~theory_checks.fedmsa.common` (reference maps,
criterion, case builders), :mod:`~theory_checks.fedmsa.claim_makers` (the constructors of its
claims per kind of claim), :mod:`~theory_checks.fedmsa.moments` (the criterion's exact moments
over a run, round by round), :mod:`~theory_checks.fedmsa.perturbations` (the wrong
estimators the claims' perturbations and the mutants build) and
:mod:`~theory_checks.fedmsa.mutants`.
"""

from __future__ import annotations

from theory_checks.claim import Claim
from theory_checks.discovery import declared_claims

#: The claims of every result module of this package (modules in name order).
CLAIMS: tuple[Claim, ...] = declared_claims(__name__, __path__)

__all__ = ["CLAIMS"]

"""Claims of FedMSA (Tarzanagh, Li, Sharma, Oymak 2023, arXiv 2306.01648) and their errata.

Notation (README glossary; notes section 0): ``N`` nested levels, ``tau`` the Jacobian
heterogeneity (Def. 2.2 with averages), ``K`` local steps (``local_steps``), ``R`` rounds,
``rho`` momentum, ``alpha``/``beta`` the steps on x and Z. ``P^m, S^m`` are the maps of eq. (10)
(bilevel, minimax) or (11) (compositional), ``P, S`` their client averages.

Every check compares the registered algorithm (built by ``make``) with a reference written here
independently of :mod:`testbed.algorithms.fedmsa_maps`: the maps of each closed-form family are
read off the family's arrays (:func:`reference_maps`), so a wrong map in the algorithm shows.

The claims are data, :file:`claims.toml` and :file:`rates.toml`, read by
:mod:`theory_checks.fedmsa.claims` (which holds the cases and controls they name) and
:mod:`theory_checks.fedmsa.rates`; the checks live in one-job modules:
:mod:`theory_checks.fedmsa.constants` (the paper's constants, step and batch conditions and
assumptions as hypotheses, which every claim declares),
:mod:`theory_checks.fedmsa.reference` (reference maps, criterion, helpers),
:mod:`theory_checks.fedmsa.cases` (case strategies),
:mod:`theory_checks.fedmsa.identities` (exact identities, Lemma B.1) and
:mod:`theory_checks.fedmsa.deterministic_rates` (rates in R and K).
"""

from __future__ import annotations

from theory_checks.fedmsa import rates
from theory_checks.fedmsa.claims import CLAIMS as FIRST_CLAIMS

CLAIMS = FIRST_CLAIMS + rates.CLAIMS

__all__ = ["CLAIMS"]

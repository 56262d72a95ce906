"""Comparisons between the papers' algorithms: rounds to a target on the same problems, each
method tuned on the same step grid, and a paper's headline factor under its own protocol.

=========================================================  ======================================
result                                                     module (one claim each)
=========================================================  ======================================
AggITD, abstract and Sec. 4: fewer rounds than FedNest     ``aggitd_fewer_rounds_than_fednest``
FedMSA, abstract and Fig. 4: 1/10 of FedNest's rounds      ``fedmsa_tenfold_fewer_rounds``
FedNest, Sec. 2.6 / 4.1: LFedNest fewer rounds (homog.)    ``lfednest_fewer_rounds_homogeneous``
AggITD, Table 2: the rounds factor to 90% test accuracy    ``aggitd_table2_factor``
=========================================================  ======================================

Shared: :mod:`~theory_checks.comparison.common` (the closed-form comparisons' check, its
statistical test and cases). Not claims: :mod:`~theory_checks.comparison.runs` (the runs'
definitions: target, budget, grid, configurations) and :mod:`~theory_checks.comparison.table`
(the rounds-to-target table `testbed check` records).
"""

from __future__ import annotations

from theory_checks.claim import Claim
from theory_checks.discovery import declared_claims

#: The claims of every result module of this package (modules in name order).
CLAIMS: tuple[Claim, ...] = declared_claims(__name__, __path__)

__all__ = ["CLAIMS"]

"""CLAIM_DB: every claim the testbed checks, gathered from the per-paper modules."""

from __future__ import annotations

from theory_checks import (
    aggitd,
    aggitd_rates,
    classical,
    comparison,
    fedmsa,
    fedmsa_rates,
    fednest,
    fednest_rates,
    hgp,
)
from theory_checks.claim import Claim

CLAIM_DB: tuple[Claim, ...] = tuple(sorted(
    classical.CLAIMS + fednest.CLAIMS + fednest_rates.CLAIMS + aggitd.CLAIMS
    + aggitd_rates.CLAIMS + fedmsa.CLAIMS + fedmsa_rates.CLAIMS + hgp.CLAIMS + comparison.CLAIMS,
    key=lambda c: c.id,
))


def get_claim(claim_id: str) -> Claim:
    for claim in CLAIM_DB:
        if claim.id == claim_id:
            return claim
    raise KeyError(f"no claim {claim_id!r}; known: {', '.join(c.id for c in CLAIM_DB)}")

"""CLAIM_DB: every claim the testbed checks, gathered from the per-paper modules."""

from __future__ import annotations

from theory_checks import aggitd, classical, comparison, fedmsa, fednest, hgp
from theory_checks.aggitd import rates as aggitd_rates
from theory_checks.claim import Claim
from theory_checks.fedmsa import rates as fedmsa_rates
from theory_checks.fednest import rates as fednest_rates

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


def claims_of(estimator: str) -> tuple[Claim, ...]:
    """The claims that check ``estimator``: those that name it, then those its registry entry
    enrolls it in (each link is written once, on one side)."""
    from testbed.registry import get_estimator

    enrolled = set(get_estimator(estimator).enrolled_claims)
    return tuple(c for c in CLAIM_DB if estimator in c.estimators or c.id in enrolled)

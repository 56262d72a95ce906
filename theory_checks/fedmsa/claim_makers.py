"""The constructors of FedMSA's claims per kind of claim: what every claim of a kind shares (its
kind, the estimator it is about, the paper's assumptions it is checked under), so that a result
module states only what differs (:class:`~theory_checks.claim.ClaimMaker`).

- :data:`identity_claim`: exact identities of FedMSA's maps and recursion (eqs. (5)-(6), (10),
  (11), Lemma B.5), under A1 (the fixed points they are about exist and are unique);
  :data:`step_identity_claim` those about a step of Algorithm 1 or of its derivation.
- :data:`exponent_claim`: exponents of Theorem 3.1's criterion (in R, K, M, tau, rho, S) at the
  theorem's steps, under A1 and A5 on the averaged maps. Their checks run whole algorithms, so
  a failing case is kept as drawn (shrinking would rerun them many times).
"""

from __future__ import annotations

from results_format.verdicts import ABOUT_STEP
from theory_checks.fedmsa.common import fedmsa_claim
from theory_checks.fedmsa.constants import A1_UNIQUE_FIXED_POINT
from theory_checks.fedmsa.constants import A5_AVERAGED
from theory_checks.fedmsa.constants import THEOREM31_STEPS

identity_claim = fedmsa_claim.but(
    kind="exact_identity", estimators=("fedmsa",), hypotheses=(A1_UNIQUE_FIXED_POINT,)
)

step_identity_claim = identity_claim.but(about=ABOUT_STEP)

exponent_claim = fedmsa_claim.but(
    kind="scaling_exponent",
    estimators=("fedmsa",),
    hypotheses=(A1_UNIQUE_FIXED_POINT, A5_AVERAGED, THEOREM31_STEPS),
    shrink=False,
)

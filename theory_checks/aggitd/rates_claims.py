"""The claim records of the exact AggITD companion checks (Lemma 3, errata 7-9, scaling);
Theorem 1's statistical claim heads :data:`theory_checks.aggitd.rates.CLAIMS`."""

from __future__ import annotations

from pathlib import Path

from problems import QuadraticBilevel
from theory_checks.claim import Claim, known_case
from theory_checks.claim_file import load_claims

# Positive control of the printed sum: the saved counterexample's problem (one client, f affine,
# so Assumption 2's M holds on the whole space) at mu = 1 instead of 0.1: lambda mu = 0.43 and
# ||J||^2 / L_g^2 = 0.57 leave the second moment at 0.75 of the printed sum (N = 1), inside.
_SUM_CONTROL = QuadraticBilevel.random(1, 1, 1, 1.0, seed=164, mu=1.0, hessian_heterogeneity=0.0,
                                       gradient_heterogeneity=0.0, outer_curvature=0.0).spec()


# Every claim of the companion but Theorem 1's, in the order of CLAIMS.
# Positive control of claim aggitd.errata.prop2_sum_as_printed
errata_prop2_sum_as_printed_control = known_case(_SUM_CONTROL, {"point_seed": 0})


EXACT_CLAIMS: tuple[Claim, ...] = load_claims(Path(__file__).with_name("rates_claims.toml"))

"""The claim records (:class:`~theory_checks.claim.Claim`) of the AggITD estimator-level,
communication and Corollary 1 checks, and their positive-control problems."""

from __future__ import annotations

from pathlib import Path

from problems import QuadraticBilevel, QuadraticMinimax
from theory_checks.claim import Claim, known_case
from theory_checks.claim_file import load_claims

# Positive controls of the refuted statements: cases inside their conditions where they hold.
# Any problem with Q = N (point_seed 12: N = 1, Q = 1): the HessIV product is empty, so neither
# printed typo of Alg. 1 (lambda dropped in line 6, z^{N-1} in line 15) changes the estimate.
_CONTROL_PROBLEM = QuadraticBilevel.random(2, 2, 2, 3.0, seed=0).spec()
# A minimax instance (g = -f): grad_y f(x, y*(x)) = 0, so the HessIV's truncation has nothing to
# truncate at the limit, whose stationarity is 0 to round-off at Theorem 1's steps and Corollary
# 1's N, under every reading of the claim.
_NO_FLOOR_CONTROL = QuadraticMinimax.random(2, 1, 2, 1.5, seed=0).spec()

# Positive control of claim aggitd.alg1.as_printed
alg1_as_printed_control = known_case(_CONTROL_PROBLEM, {"point_seed": 12})

# Positive control of claim aggitd.cor1.no_floor
cor1_no_floor_control = known_case(_NO_FLOOR_CONTROL, {"point_seed": 0})


CLAIMS: tuple[Claim, ...] = load_claims(Path(__file__).with_name("claims.toml"))

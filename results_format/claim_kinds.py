"""The kinds of claim, declared once: what a claim's check measures, and how it is read.

A claim's ``kind`` (``theory_checks.claim.Claim.kind``, recorded as ``kind`` in its results file)
is one of :data:`CLAIM_KINDS`. What the readers of a results file need to know about a kind is
declared here beside the name, so that no reader keeps its own list:

- a **rate** (:data:`RATE_KINDS`) is checked by a fitted slope or exponent: a geometric rate
  (``linear_rate``: the log of the error is linear in the step) or a power law
  (``scaling_exponent``: linear on log-log axes); :data:`RATE_LAWS` names the law;
- a **bound** (:data:`BOUND_KINDS`) compares each case's measured value with a bound or a
  formula of its own, so measured against bound is a meaningful summary of its cases;
- a **count** (:data:`COMMUNICATION_COUNT`) records one exact count per case and iteration.

Standard library only (see :mod:`results_format`).
"""

from __future__ import annotations

from typing import Literal
from typing import get_args

ClaimKind = Literal[
    "exact_identity",
    "bias_bound",
    "variance_bound",
    "linear_rate",
    "scaling_exponent",
    "communication_count",
]
#: Every kind of claim, in the order ``testbed list`` documents them.
CLAIM_KINDS: tuple[str, ...] = get_args(ClaimKind)

BIAS_BOUND = "bias_bound"
VARIANCE_BOUND = "variance_bound"
LINEAR_RATE = "linear_rate"
SCALING_EXPONENT = "scaling_exponent"
COMMUNICATION_COUNT = "communication_count"

#: The law a rate's fit follows: "geometric" (a straight line on a log y-axis) or "power" (a
#: straight line on log-log axes).
RATE_LAWS: dict[str, str] = {LINEAR_RATE: "geometric", SCALING_EXPONENT: "power"}
#: The kinds checked by a fitted rate or exponent.
RATE_KINDS: tuple[str, ...] = tuple(RATE_LAWS)
#: The kinds whose cases each compare a measured value with a bound or a formula.
BOUND_KINDS: tuple[str, ...] = (
    BIAS_BOUND,
    VARIANCE_BOUND,
    LINEAR_RATE,
    SCALING_EXPONENT,
    COMMUNICATION_COUNT,
)

__all__ = [
    "BIAS_BOUND",
    "BOUND_KINDS",
    "CLAIM_KINDS",
    "COMMUNICATION_COUNT",
    "LINEAR_RATE",
    "RATE_KINDS",
    "RATE_LAWS",
    "SCALING_EXPONENT",
    "VARIANCE_BOUND",
    "ClaimKind",
]

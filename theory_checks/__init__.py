"""Paper claims as data, the checks that measure them, and their verdicts."""

from theory_checks.claim import CLAIM_KINDS
from theory_checks.claim import VERDICTS
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Fit
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import SeriesPoint

__all__ = [
    "CLAIM_KINDS",
    "VERDICTS",
    "Case",
    "Claim",
    "Fit",
    "Measurement",
    "NotMeasurable",
    "SeriesPoint",
]

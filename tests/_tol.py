"""The tolerance table, shared with the claim checks: see :mod:`theory_checks.tolerances`."""

from theory_checks.tolerances import FINITE_DIFFERENCE_RTOL
from theory_checks.tolerances import IDENTITY_RTOL

__all__ = ["FINITE_DIFFERENCE_RTOL", "IDENTITY_RTOL"]

"""The tolerance table of the checks and the tests (float64), in three tiers; one home.

- ``IDENTITY_RTOL``: closed-form identities (exact in real arithmetic) compared in float64 after
  O(N dim) matrix products, O(M) mixing products or O(dim K R) recursion steps, with condition
  numbers up to 100 and quantities of order one: round-off stays near 1e-14 to 1e-13 relative,
  so 1e-10 leaves three orders of margin, while an algebraic mistake shows as an O(1) relative
  error.
- ``FINITE_DIFFERENCE_RTOL``: central differences with step eps^(1/3) leave about eps^(2/3) of
  error (about 4e-11 relative for well-scaled functions); 1e-6 covers third derivatives up to
  1e4 times the function's scale.
- ``UNRESOLVED_TERM``: an identity case tests what its formula is about (a count of terms or
  steps, a weight) only when the term carrying it stands out of ``IDENTITY_RTOL``: a term below
  1e3 x ``IDENTITY_RTOL`` = 1e-7 of the scale (where one Neumann term more or less, a factor
  ``1 - lambda mu <= 0.99`` at kappa <= 100, changes it by at least 1%, still 1e-9 of the scale,
  ten times the tolerance) makes the case unable to test the claim; it is rejected, not passed.
- ``RATE_RTOL``: a fitted rate (a slope of a log-error line, an exponent) against the theory's,
  5% relative; the fit windows are chosen so that faster modes perturb the slope by well under
  1%. ``FIT_FLOOR``: errors below 1e-9 of the largest term leave the fit window (float64
  round-off, about 1e-13 of it, would bend the log-error line there).
- Iterative results are never compared with a bare number: they are checked against the claimed
  bound times (1 + slack), with the slack stated beside each claim.
"""

IDENTITY_RTOL = 1e-10
FINITE_DIFFERENCE_RTOL = 1e-6
UNRESOLVED_TERM = 1e3 * IDENTITY_RTOL
RATE_RTOL = 0.05
FIT_FLOOR = 1e-9

__all__ = ["FINITE_DIFFERENCE_RTOL", "FIT_FLOOR", "IDENTITY_RTOL", "RATE_RTOL", "UNRESOLVED_TERM"]

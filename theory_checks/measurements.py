"""Small constructors of what checks record, shared by the papers' checks.

- :func:`identity_residual`: the measurement of an exact identity. An identity that holds in
  real arithmetic (a closed form, a derived update, an expectation summed exactly) is compared
  in float64 as ``||measured - predicted|| / scale``; it passes at most
  :data:`~theory_checks.tolerances.IDENTITY_RTOL` (the float64 error of a few hundred
  operations on numbers of the scale, :mod:`theory_checks.tolerances`).
- :class:`BoundOnGrid`: a bound checked at every point of a grid.
- :func:`slope_fit`: a line fitted to exact data (:mod:`theory_checks.stats`) beside the slope
  the theory gives.
"""

from __future__ import annotations

import math
from typing import Any

from theory_checks.claim import Fit
from theory_checks.claim import Measurement
from theory_checks.claim import SeriesPoint
from theory_checks.stats import LinearFit
from theory_checks.tolerances import IDENTITY_RTOL


def identity_residual(residual: float, **fields: Any) -> Measurement:
    """The measurement of an identity whose relative residual is ``residual``: it passes when
    ``residual <= IDENTITY_RTOL``; ``fields`` are the measurement's other fields (``details``,
    ``series``)."""
    return Measurement(
        residual, IDENTITY_RTOL, residual <= IDENTITY_RTOL, "relative residual <=", **fields
    )


class BoundOnGrid:
    """A bound checked at every point of a grid: ``measured <= bound + slack`` at each. Keeps
    the plotted series (measured and bound at each point), the worst excess ``measured - bound
    - slack`` and the last point, which the measurement records (the claim's figure is the
    grid's last point; it passes only if every point does)."""

    def __init__(self, axis: str) -> None:
        self.axis = axis
        self.series: list[SeriesPoint] = []
        self.worst = -math.inf
        self.last = (0.0, 0.0)

    def add(self, at: float, measured: float, bound: float, slack: float, *cost: int) -> None:
        """The point ``axis = at``; ``cost``: its oracle calls and communication rounds."""
        self.worst = max(self.worst, measured - bound - slack)
        self.series += [
            SeriesPoint("measured", self.axis, at, measured, *cost),
            SeriesPoint("bound", self.axis, at, bound, *cost),
        ]
        self.last = (measured, bound)

    def measurement(self, relation: str, **fields: Any) -> Measurement:
        """The grid's measurement: its last point, passed when no point exceeds its bound."""
        measured, bound = self.last
        return Measurement(
            measured, bound, self.worst <= 0.0, relation, series=tuple(self.series), **fields
        )


def slope_fit(quantity: str, fit: LinearFit, theory: float, tolerance: float) -> Fit:
    """``fit`` (a line through exact data) against the slope ``theory``, agreeing within
    ``tolerance``; it keeps the largest residual, which the results record for exact data
    (:func:`~theory_checks.claim.fit_record`)."""
    return Fit(
        quantity,
        fit.slope,
        fit.ci_low,
        fit.ci_high,
        theory,
        tolerance,
        residual=fit.residual_max,
    )

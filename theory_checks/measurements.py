"""Small constructors of what checks record, shared by the papers' checks.

- :func:`identity_residual`: the measurement of an exact identity. An identity that holds in
  real arithmetic (a closed form, a derived update, an expectation summed exactly) is compared
  in float64 as ``||measured - predicted|| / scale``; it passes at most
  :data:`~theory_checks.tolerances.IDENTITY_RTOL` (the float64 error of a few hundred
  operations on numbers of the scale, :mod:`theory_checks.tolerances`).
- :func:`bound_at_point`: a bound checked at one value of the claim's axis, plotted as the
  measured figure and the bound there; :class:`BoundOnGrid`: a bound checked at every point of
  a grid.
- :func:`bound_on_grid`: the same measurement from a grid's worst excess, last point and series
  computed by the caller.

Fitted rates are :mod:`theory_checks.rate_fits`'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from theory_checks.claim import Measurement
from theory_checks.claim import SeriesPoint
from theory_checks.tolerances import IDENTITY_RTOL


def identity_residual(residual: float, **fields: Any) -> Measurement:
    """The measurement of an identity whose relative residual is ``residual``: it passes when
    ``residual <= IDENTITY_RTOL``; ``fields`` are the measurement's other fields (``details``,
    ``series``)."""
    return Measurement(
        residual, IDENTITY_RTOL, residual <= IDENTITY_RTOL, "relative residual <=", **fields
    )


def bound_at_point(
    measured: float, bound: float, passed: bool, relation: str, axis: str, at: float, **fields: Any
) -> Measurement:
    """The measurement ``measured`` against ``bound`` at ``axis = at``, its series the two points
    there; ``fields`` are the measurement's other fields (``details``, ``tests``)."""
    series = (SeriesPoint("measured", axis, at, measured), SeriesPoint("bound", axis, at, bound))
    return Measurement(measured, bound, passed, relation, series=series, **fields)


class BoundOnGrid:
    """A bound checked at every point of a grid of ``axis``: ``measured <= bound + slack`` at
    each, ``slack`` one round-off allowance for the whole grid. Keeps the plotted series
    (measured and bound at each point), the worst excess ``measured - bound - slack`` and the
    last point, which the measurement records (the claim's figure is the grid's last point; it
    passes only if every point does)."""

    def __init__(self, axis: str, slack: float) -> None:
        self.axis = axis
        self.slack = slack
        self.series: list[SeriesPoint] = []
        self.worst = -math.inf
        self.last = (0.0, 0.0)

    def add(
        self, at: float, measured: float, bound: float, oracle_calls: int = 0, comm_rounds: int = 0
    ) -> None:
        """The point ``axis = at``, with its oracle calls and communication rounds."""
        self.worst = max(self.worst, measured - bound - self.slack)
        self.series += [
            SeriesPoint("measured", self.axis, at, measured, oracle_calls, comm_rounds),
            SeriesPoint("bound", self.axis, at, bound, oracle_calls, comm_rounds),
        ]
        self.last = (measured, bound)

    def measurement(self, relation: str, **fields: Any) -> Measurement:
        """The grid's measurement: its last point, passed when no point exceeds its bound."""
        return bound_on_grid(self.last, self.worst, self.series, relation=relation, **fields)


def bound_on_grid(
    last: tuple[float, float],
    worst: float,
    series: Sequence[SeriesPoint],
    axis: str = "",
    relation: str | None = None,
    **fields: Any,
) -> Measurement:
    """The measurement of a bound checked at every point of a grid of ``axis``: it holds when
    ``worst``, the largest excess (measured - bound - slack) over the points, is at most 0;
    ``last`` is the last point's (measured, bound), ``series`` every point's; ``relation``
    defaults to "<= at every ``axis`` on the grid"; ``fields`` are the measurement's other
    fields (``details``, ``slack``)."""
    if relation is None:
        relation = f"<= at every {axis} on the grid"
    return Measurement(last[0], last[1], worst <= 0.0, relation, series=tuple(series), **fields)

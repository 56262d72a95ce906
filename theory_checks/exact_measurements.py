"""How an exact check's findings become its :class:`~theory_checks.claim.Measurement`, for the
two verdict rules the papers' exact checks share.

- :func:`identity_measurement`: an exact identity holds when its relative residual is at most
  :data:`~theory_checks.tolerances.IDENTITY_RTOL` (1e-10, float64 round-off with margin);
- :func:`bound_on_grid`: a bound checked at every point of a grid (of N, T, ...) holds when no
  point exceeds it; the last point's value and bound are the ones recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from theory_checks.claim import Measurement
from theory_checks.claim import SeriesPoint
from theory_checks.tolerances import IDENTITY_RTOL


def identity_measurement(residual: float, details: dict[str, Any]) -> Measurement:
    """The measurement of an exact identity: ``residual`` (relative to the scale of its terms)
    against :data:`~theory_checks.tolerances.IDENTITY_RTOL`, with ``details``."""
    return Measurement(
        residual,
        IDENTITY_RTOL,
        residual <= IDENTITY_RTOL,
        "relative residual <=",
        details=details,
    )


def bound_on_grid(
    last: tuple[float, float],
    worst: float,
    series: Sequence[SeriesPoint],
    axis: str,
    **fields: Any,
) -> Measurement:
    """The measurement of a bound checked at every point of a grid of ``axis``: it holds when
    ``worst``, the largest excess (measured - bound - slack) over the points, is at most 0;
    ``last`` is the last point's (measured, bound), ``series`` every point's; ``fields`` are
    the measurement's other fields (``details``, ``slack``)."""
    return Measurement(
        last[0],
        last[1],
        worst <= 0.0,
        f"<= at every {axis} on the grid",
        series=tuple(series),
        **fields,
    )

"""Comparisons between the papers' algorithms: rounds to a target accuracy on the same problems,
each method tuned on the same step grid. The claims are in :file:`claims.toml`, their checks in
:mod:`theory_checks.comparison.checks`, the runs' definitions (target, budget, grid,
configurations) in :mod:`theory_checks.comparison.runs`, and the table `testbed check` records
in :mod:`theory_checks.comparison.table`. The papers' headline factors, measured under their
own protocols at the closest scale the data allow: :file:`headlines.toml`,
:mod:`theory_checks.comparison.headlines`."""

from __future__ import annotations

from theory_checks.comparison import headlines
from theory_checks.comparison.checks import CLAIMS as CLOSED_FORM_CLAIMS

CLAIMS = CLOSED_FORM_CLAIMS + headlines.CLAIMS

__all__ = ["CLAIMS"]

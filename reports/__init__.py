"""The empirical-vs-theory report, built from the results files that ``testbed check`` writes.

``build_report(results_dir, out_dir)`` writes ``index.html`` (self-contained, offline),
``report.md`` and PNG figures; see :mod:`reports.build`.
"""

from reports.build import build_report

__all__ = ["build_report"]

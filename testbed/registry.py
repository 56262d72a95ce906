"""The estimator registry: one entry per estimator variant, read by tests, checks and reports.

Adding a variant is one file (the estimator, or a configuration of an existing one) plus one
``EstimatorInfo`` entry in its paper's module of :mod:`testbed.entries` (``classical``,
``fednest``, ``aggitd``, ``fedmsa``, ``hgp``), or, from another package, one entry point
(:mod:`testbed.plugins`), loaded when a run's settings are put in force, not on import. Every
concrete :class:`~testbed.Estimator` subclass must appear in ``ESTIMATOR_DB`` and every entry
must name its claims (ids of :mod:`theory_checks` claims) or say why it has none;
``tests/test_registry.py`` enforces both.
"""

from __future__ import annotations

from testbed import plugins
from testbed.entries import aggitd
from testbed.entries import classical
from testbed.entries import fedmsa
from testbed.entries import fednest
from testbed.entries import hgp
from testbed.info import EstimatorInfo
from testbed.names import did_you_mean
from testbed.names import shown

BUILTIN: tuple[EstimatorInfo, ...] = tuple(
    classical.ENTRIES + aggitd.ENTRIES + fedmsa.ENTRIES + fednest.ENTRIES + hgp.ENTRIES
)

# The built-ins, and once a run's settings load them (``theory_checks.settings.load_plugins``)
# every installed plugin's entries (:mod:`testbed.plugins`), sorted by name; one list, refreshed
# in place, so every importer sees the same entries. Importing this module loads no plugin.
ESTIMATOR_DB: list[EstimatorInfo] = sorted(BUILTIN, key=lambda info: info.name)


def refresh_plugins() -> list[plugins.PluginProblem]:
    """Load the plugins' entries again (when a run's settings are put in force, after
    installing one, or in a test); the problems of the entry points left out."""
    ESTIMATOR_DB[:] = sorted(BUILTIN + tuple(plugins.load(BUILTIN)), key=lambda info: info.name)
    return plugins.problems()


def get_estimator(name: str) -> EstimatorInfo:
    for info in ESTIMATOR_DB:
        if info.name == name:
            return info
    missing = plugins.left_out(name)
    raise KeyError(
        f"no estimator named {shown(name)}"
        f"{did_you_mean(name, (info.name for info in ESTIMATOR_DB))}; `testbed list` "
        "shows every registered estimator and algorithm" + (f"; {missing}" if missing else "")
    )

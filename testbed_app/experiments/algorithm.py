"""The ``[algorithm]`` table of a config as the registered object it names, built in one place.

A config's validation builds it (the constructor's own checks: ranges that depend on other
parameters, choices) and the validated :class:`~testbed_app.experiments.base.ExperimentConfig`
keeps it (:attr:`~testbed_app.experiments.base.ExperimentConfig.entry`), so the experiment runs
the object that was checked; it is not built a second time from the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testbed.registry import get_estimator


def entry_parameters(table: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor's keyword arguments of an ``[algorithm]`` table: every key but
    ``name``, TOML arrays as tuples (the parameters' declared type, e.g. per-client
    ``local_steps``)."""
    return {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in table.items()
        if key != "name"
    }


def build_entry(table: Mapping[str, Any]) -> Any:
    """The registered estimator or outer algorithm ``table["name"]`` with the table's
    overrides of its registry defaults; the constructor's ``ValueError`` / ``TypeError`` on
    parameters it refuses."""
    return get_estimator(table["name"]).build(**entry_parameters(table))

"""Hypergradient testbed: estimators, oracles, the federation core and the registry.

The names below are imported on first use (PEP 562 ``__getattr__``), so that ``import
testbed`` (and ``testbed --help``) does not import torch; ``from testbed import Neumann`` works
as before.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE: dict[str, str] = {
    "FederatedEstimator": "testbed._algorithms.base",
    "IterationRecord": "testbed._algorithms.base",
    "OuterAlgorithm": "testbed._algorithms.base",
    "run_algorithm": "testbed._algorithms.base",
    "CallCounter": "testbed._calls",
    "Calls": "testbed._calls",
    "Estimate": "testbed._estimators.base",
    "Estimator": "testbed._estimators.base",
    "InnerState": "testbed._estimators.base",
    "ExactHypergradient": "testbed._estimators.classical",
    "ImplicitDifferentiation": "testbed._estimators.classical",
    "IterativeDifferentiation": "testbed._estimators.classical",
    "GlobalOracles": "testbed._estimators.global_oracles",
    "ConjugateGradient": "testbed._estimators.solvers",
    "ExactInnerSolution": "testbed._estimators.solvers",
    "GradientDescent": "testbed._estimators.solvers",
    "Neumann": "testbed._estimators.solvers",
    "DivergenceError": "testbed._estimators.validation",
    "InputError": "testbed._estimators.validation",
    "FederatedContext": "testbed._federation.context",
    "Ledger": "testbed._federation.ledger",
    "local_round": "testbed._federation.local",
    "ClientSampler": "testbed._federation.sampling",
    "Oracles": "testbed.oracles",
    "ESTIMATOR_DB": "testbed.registry",
    "EstimatorInfo": "testbed.registry",
    "get_estimator": "testbed.registry",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'testbed' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))

"""Hypergradient testbed: estimators, oracles, the federation core and the registry.

Everything a user or a claim needs is importable from here: the papers' classes (``FedNest``,
``FedIHGP``, ``AggITD``, ``FBOAggITD``, ``FedMSA``, ``HyperGradientPush``, ...), their strategy
objects (FedNest's updates ``FedInn``, ``LFedInn``, ``FedOut``, ``LFedOut``, ``MinimaxFedOut``;
HGP's averaging rules ``PushSumAveraging``, ``ExactAveraging``, ``ServerAveraging``), the
classical estimators and solvers, the oracles and the federation. The public subpackages hold
the rest: ``testbed.estimators`` (hypergradient estimators and their building blocks),
``testbed.algorithms`` (outer loops, FedNest's update strategies), ``testbed.federation``
(context, ledger, local rounds, sampling, the clients' work of a round),
``testbed.decentralized`` (graphs, Push-Sum, HGP and its averaging rules) and
``testbed.entries`` (the registry's entries per paper).

The names below are imported on first use (PEP 562 ``__getattr__``), so that ``import
testbed`` (and ``testbed --help``) does not import torch; ``from testbed import Neumann`` works
as before.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE: dict[str, str] = {
    "AggITDState": "testbed.algorithms.aggitd",
    "FBOAggITD": "testbed.algorithms.aggitd",
    "FederatedEstimator": "testbed.estimators.federated",
    "IterationRecord": "testbed.algorithms.base",
    "OuterAlgorithm": "testbed.algorithms.base",
    "run_algorithm": "testbed.algorithms.base",
    "FedMSA": "testbed.algorithms.fedmsa",
    "FedMSAState": "testbed.algorithms.fedmsa",
    "FedNest": "testbed.algorithms.fednest",
    "FedNestState": "testbed.algorithms.fednest",
    "FedInn": "testbed.algorithms.fednest_updates",
    "FedOut": "testbed.algorithms.fednest_updates",
    "InnerUpdate": "testbed.algorithms.fednest_updates",
    "LFedInn": "testbed.algorithms.fednest_updates",
    "LFedOut": "testbed.algorithms.fednest_updates",
    "MinimaxFedOut": "testbed.algorithms.fednest_updates",
    "OuterUpdate": "testbed.algorithms.fednest_updates",
    "CallCounter": "testbed.calls",
    "Calls": "testbed.calls",
    "AveragingRule": "testbed.decentralized.averaging",
    "ExactAveraging": "testbed.decentralized.averaging",
    "PushSumAveraging": "testbed.decentralized.averaging",
    "ServerAveraging": "testbed.decentralized.averaging",
    "GraphSequence": "testbed.decentralized.graphs",
    "DecentralizedGradient": "testbed.decentralized.hgp",
    "HGPState": "testbed.decentralized.hgp",
    "HyperGradientPush": "testbed.decentralized.hgp",
    "GraphLedger": "testbed.decentralized.ledger",
    "HGPPersonalization": "testbed.decentralized.personalization",
    "ExactConsensus": "testbed.decentralized.sgp",
    "StochasticGradientPush": "testbed.decentralized.sgp",
    "AggITD": "testbed.estimators.aggitd",
    "Estimate": "testbed.estimators.base",
    "Estimator": "testbed.estimators.base",
    "InnerState": "testbed.estimators.base",
    "ExactHypergradient": "testbed.estimators.classical",
    "ImplicitDifferentiation": "testbed.estimators.classical",
    "IterativeDifferentiation": "testbed.estimators.classical",
    "FedIHGP": "testbed.estimators.fednest",
    "IHGPResult": "testbed.estimators.fedihgp",
    "FixedPoint": "testbed.estimators.fixed_point",
    "GlobalOracles": "testbed.estimators.global_oracles",
    "ConjugateGradient": "testbed.estimators.solvers",
    "ExactInnerSolution": "testbed.estimators.solvers",
    "GradientDescent": "testbed.estimators.solvers",
    "Neumann": "testbed.estimators.solvers",
    "DivergenceError": "testbed.estimators.validation",
    "InputError": "testbed.estimators.validation",
    "ClientReply": "testbed.federation.client_work",
    "ClientWork": "testbed.federation.client_work",
    "InProcessClients": "testbed.federation.client_work",
    "portable": "testbed.federation.client_work",
    "FederatedContext": "testbed.federation.context",
    "Ledger": "testbed.federation.ledger",
    "LocalIterates": "testbed.federation.local",
    "ClientSampler": "testbed.federation.sampling",
    "FixedParticipants": "testbed.federation.sampling",
    "ScriptedParticipants": "testbed.federation.sampling",
    "ALL_KINDS": "testbed.info",
    "EstimatorInfo": "testbed.info",
    "Oracles": "testbed.oracles",
    "ESTIMATOR_DB": "testbed.registry",
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

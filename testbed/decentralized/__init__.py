"""Decentralized hypergradients (HGP): graphs, mixing weights, graph ledger, Push-Sum, SGP, HGP
and its averaging rules."""

from testbed.decentralized.averaging import (
    AVERAGING_RULES,
    AveragingRule,
    ExactAveraging,
    PushSumAveraging,
    ServerAveraging,
)
from testbed.decentralized.graphs import (
    CONNECTED_FAMILIES,
    GRAPH_FAMILIES,
    GraphSequence,
)
from testbed.decentralized.hgp import (
    DecentralizedGradient,
    HGPRun,
    HGPState,
    HyperGradientPush,
)
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.mixing import (
    MixingError,
    check_column_stochastic,
    metropolis_weights,
    pushsum_weights,
    slem,
)
from testbed.decentralized.personalization import HGPPersonalization, PersonalizationState
from testbed.decentralized.pushsum import (
    PushSumResult,
    consensus_error,
    push_sum,
    pushsum_operator,
)
from testbed.decentralized.sgp import ExactConsensus, InnerResult, StochasticGradientPush

__all__ = [
    "AVERAGING_RULES",
    "CONNECTED_FAMILIES",
    "GRAPH_FAMILIES",
    "AveragingRule",
    "DecentralizedGradient",
    "ExactAveraging",
    "ExactConsensus",
    "GraphLedger",
    "GraphSequence",
    "HGPPersonalization",
    "HGPRun",
    "HGPState",
    "HyperGradientPush",
    "InnerResult",
    "MixingError",
    "PersonalizationState",
    "PushSumAveraging",
    "PushSumResult",
    "ServerAveraging",
    "StochasticGradientPush",
    "check_column_stochastic",
    "consensus_error",
    "metropolis_weights",
    "push_sum",
    "pushsum_operator",
    "pushsum_weights",
    "slem",
]

"""Decentralized hypergradients (HGP): graphs, mixing weights, graph ledger, Push-Sum, SGP, HGP
and its averaging rules."""

from testbed.decentralized.averaging import AVERAGING_RULES
from testbed.decentralized.averaging import AveragingRule
from testbed.decentralized.averaging import ExactAveraging
from testbed.decentralized.averaging import PushSumAveraging
from testbed.decentralized.averaging import ServerAveraging
from testbed.decentralized.graphs import CONNECTED_FAMILIES
from testbed.decentralized.graphs import GRAPH_FAMILIES
from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.hgp import DecentralizedGradient
from testbed.decentralized.hgp import HGPRun
from testbed.decentralized.hgp import HGPState
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.ledger import GraphLedger
from testbed.decentralized.mixing import MixingError
from testbed.decentralized.mixing import check_column_stochastic
from testbed.decentralized.mixing import metropolis_weights
from testbed.decentralized.mixing import pushsum_weights
from testbed.decentralized.mixing import slem
from testbed.decentralized.personalization import HGPPersonalization
from testbed.decentralized.personalization import PersonalizationState
from testbed.decentralized.pushsum import PushSumResult
from testbed.decentralized.pushsum import consensus_error
from testbed.decentralized.pushsum import push_sum
from testbed.decentralized.pushsum import pushsum_operator
from testbed.decentralized.sgp import ExactConsensus
from testbed.decentralized.sgp import InnerResult
from testbed.decentralized.sgp import StochasticGradientPush

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

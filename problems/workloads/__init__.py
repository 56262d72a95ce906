"""MLP/CNN workloads on real data that satisfy the :class:`problems.Problem` contract.

Data loading (``data``), client splits (``splits``), models over flat parameter vectors
(``models``) and the paper workloads built from them.
"""

from problems.workloads.data import DATASETS
from problems.workloads.data import Dataset
from problems.workloads.data import DatasetError
from problems.workloads.data import load_dataset
from problems.workloads.hyper_representation import HyperRepresentation
from problems.workloads.influence import InfluenceProblem
from problems.workloads.loss_tuning import LossTuning
from problems.workloads.personalization import PersonalizationProblem
from problems.workloads.recipe import WorkloadRecipe
from problems.workloads.registry import WORKLOAD_BUILDERS
from problems.workloads.registry import WorkloadError
from problems.workloads.registry import build_workload
from problems.workloads.registry import workload_options
from problems.workloads.splits import SCHEMES
from problems.workloads.splits import ClientSplit
from problems.workloads.splits import SplitError
from problems.workloads.splits import long_tail_indices
from problems.workloads.splits import split_clients

__all__ = [
    "DATASETS",
    "Dataset",
    "DatasetError",
    "load_dataset",
    "SCHEMES",
    "ClientSplit",
    "SplitError",
    "long_tail_indices",
    "split_clients",
    "HyperRepresentation",
    "LossTuning",
    "WORKLOAD_BUILDERS",
    "WorkloadError",
    "build_workload",
    "workload_options",
    "WorkloadRecipe",
    "InfluenceProblem",
    "PersonalizationProblem",
]

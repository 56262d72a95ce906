"""MLP/CNN workloads on real data that satisfy the :class:`problems.Problem` contract.

Data loading (``data``), client splits (``splits``), models over flat parameter vectors
(``models``) and the paper workloads built from them.
"""

from problems.workloads.data import DATASETS, Dataset, DatasetError, load_dataset
from problems.workloads.hyper_representation import HyperRepresentation
from problems.workloads.influence import InfluenceProblem
from problems.workloads.loss_tuning import LossTuning
from problems.workloads.personalization import PersonalizationProblem
from problems.workloads.recipe import WorkloadRecipe
from problems.workloads.registry import (
    WORKLOAD_BUILDERS,
    WorkloadError,
    build_workload,
    workload_options,
)
from problems.workloads.splits import (
    SCHEMES,
    ClientSplit,
    SplitError,
    long_tail_indices,
    split_clients,
)

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

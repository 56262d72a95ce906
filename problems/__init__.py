"""Closed-form problem families with exact hypergradients, and the shared problem interface."""

from problems._base import PROBLEM_KINDS
from problems._base import SPEC_BUILDERS
from problems._base import Batch
from problems._base import ClosedFormOracles
from problems._base import ClosedFormProblem
from problems._base import Owned
from problems._base import Problem
from problems._base import ProblemConstants
from problems._base import ProblemError
from problems._base import ProblemKind
from problems._base import default_device
from problems._base import from_spec
from problems._rows import RecentCache
from problems._rows import all_clients
from problems._rows import is_plain
from problems._rows import loop_sum
from problems._rows import matvec
from problems._rows import memory_key
from problems._rows import rmatvec
from problems.compositional import LinearCompositional
from problems.family import ProblemFamily
from problems.logistic import PerClientLogistic
from problems.loop_reference import PerClientLoop
from problems.loop_reference import ProblemWrapper
from problems.minimax import QuadraticMinimax
from problems.per_client import PerClientQuadratic
from problems.quadratic_bilevel import QuadraticBilevel
from problems.registry import PROBLEM_DB
from problems.registry import ProblemInfo
from problems.registry import register
from problems.risk_averse import RiskAverse
from problems.workloads.recipe import WorkloadRecipe

SPEC_BUILDERS.update(
    {
        "QuadraticBilevel.random": QuadraticBilevel.random,
        "QuadraticMinimax.random": QuadraticMinimax.random,
        "QuadraticMinimax.fednest_synthetic": QuadraticMinimax.fednest_synthetic,
        "LinearCompositional.random": LinearCompositional.random,
        "RiskAverse": RiskAverse,
        "PerClientQuadratic.random": PerClientQuadratic.random,
        "PerClientLogistic.random": PerClientLogistic.random,
        # a saved workload recipe (a counterexample on a workload) rebuilds through from_spec
        "WorkloadRecipe": WorkloadRecipe,
    }
)

# The named instances: (name, kind, reference, build(seed=0) of a small default instance).
_INSTANCES = (
    (
        "quadratic-bilevel",
        "bilevel",
        "FedNest eq. (1) with quadratic f_i, g_i; the quadratic family of AggITD and FedMSA",
        lambda seed=0: QuadraticBilevel.random(4, 3, 5, 10.0, 0.3, seed=seed),
    ),
    (
        "quadratic-minimax",
        "minimax",
        "FedNest eq. (2) and Sec. 4.3 (SC-SC quadratic saddle); FedMSA's minimax maps",
        lambda seed=0: QuadraticMinimax.random(4, 3, 5, 10.0, 0.3, seed=seed),
    ),
    (
        "fednest-minimax-synthetic",
        "minimax",
        "FedNest Sec. 4.3 / Fig. 4 (lambda = 10, A_i = t_i I, centred b_i)",
        lambda seed=0: QuadraticMinimax.fednest_synthetic(seed=seed),
    ),
    (
        "linear-compositional",
        "compositional",
        "FedNest eq. (7) for N = 1; FedMSA (Fed-MCO), Sec. 2.3, N >= 1 linear levels",
        lambda seed=0: LinearCompositional.random(4, [2, 3, 4], seed),
    ),
    (
        "per-client-quadratic",
        "bilevel",
        "HGP Sec. 3, quadratic g_i and f_i (per-client hyperparameters lambda_i; x = [lambda_i])",
        lambda seed=0: PerClientQuadratic.random(4, 2, 3, 5.0, seed, outer_coupling=0.5),
    ),
    (
        "per-client-logistic",
        "bilevel",
        "HGP Sec. 5.1 eq. (11) (decay) / eq. (12) (influence); FedEM synthetic data",
        lambda seed=0: PerClientLogistic.random(3, 5, 100, 100, seed),
    ),
)
for _name, _kind, _reference, _build in _INSTANCES:
    register(ProblemInfo(name=_name, kind=_kind, reference=_reference, build=_build))
register(
    ProblemInfo(
        name="fedmsa-risk-averse",
        kind="compositional",
        reference="FedMSA Sec. 4 (mean-upper-semideviation, 3 levels)",
        build=lambda seed=0: RiskAverse(seed=seed),
        closed_form=False,
    )
)

__all__ = [
    "PROBLEM_KINDS",
    "default_device",
    "Owned",
    "ProblemFamily",
    "Batch",
    "ClosedFormOracles",
    "RecentCache",
    "all_clients",
    "is_plain",
    "loop_sum",
    "matvec",
    "memory_key",
    "rmatvec",
    "ClosedFormProblem",
    "LinearCompositional",
    "PROBLEM_DB",
    "PerClientLogistic",
    "PerClientLoop",
    "PerClientQuadratic",
    "Problem",
    "ProblemInfo",
    "ProblemWrapper",
    "ProblemConstants",
    "ProblemError",
    "ProblemKind",
    "QuadraticBilevel",
    "QuadraticMinimax",
    "RiskAverse",
    "SPEC_BUILDERS",
    "from_spec",
    "register",
]

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
from problems._rows import matvec
from problems._rows import memory_key
from problems._rows import rmatvec
from problems.compositional import LinearCompositional
from problems.family import ProblemFamily
from problems.minimax import QuadraticMinimax
from problems.quadratic_bilevel import QuadraticBilevel
from problems.registry import PROBLEM_DB
from problems.registry import ProblemInfo
from problems.registry import register
from problems.risk_averse import RiskAverse

SPEC_BUILDERS["QuadraticBilevel.random"] = QuadraticBilevel.random
SPEC_BUILDERS["QuadraticMinimax.random"] = QuadraticMinimax.random
SPEC_BUILDERS["QuadraticMinimax.fednest_synthetic"] = QuadraticMinimax.fednest_synthetic
SPEC_BUILDERS["LinearCompositional.random"] = LinearCompositional.random
SPEC_BUILDERS["RiskAverse"] = RiskAverse
register(
    ProblemInfo(
        name="quadratic-bilevel",
        kind="bilevel",
        reference=(
            "FedNest eq. (1) with quadratic f_i, g_i; the quadratic family of AggITD and FedMSA"
        ),
        build=lambda seed=0: QuadraticBilevel.random(4, 3, 5, 10.0, 0.3, seed=seed),
    )
)
register(
    ProblemInfo(
        name="quadratic-minimax",
        kind="minimax",
        reference="FedNest eq. (2) and Sec. 4.3 (SC-SC quadratic saddle); FedMSA's minimax maps",
        build=lambda seed=0: QuadraticMinimax.random(4, 3, 5, 10.0, 0.3, seed=seed),
    )
)
register(
    ProblemInfo(
        name="fednest-minimax-synthetic",
        kind="minimax",
        reference="FedNest Sec. 4.3 / Fig. 4 (lambda = 10, A_i = t_i I, centred b_i)",
        build=lambda seed=0: QuadraticMinimax.fednest_synthetic(seed=seed),
    )
)
register(
    ProblemInfo(
        name="linear-compositional",
        kind="compositional",
        reference="FedNest eq. (7) for N = 1; FedMSA (Fed-MCO), Sec. 2.3, N >= 1 linear levels",
        build=lambda seed=0: LinearCompositional.random(4, [2, 3, 4], seed),
    )
)
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
    "matvec",
    "memory_key",
    "rmatvec",
    "ClosedFormProblem",
    "LinearCompositional",
    "PROBLEM_DB",
    "Problem",
    "ProblemInfo",
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

# --- HGP (per-client hyperparameters): appended registrations ---
from problems.logistic import PerClientLogistic  # noqa: E402
from problems.per_client import PerClientQuadratic  # noqa: E402

SPEC_BUILDERS["PerClientQuadratic.random"] = PerClientQuadratic.random
SPEC_BUILDERS["PerClientLogistic.random"] = PerClientLogistic.random
register(
    ProblemInfo(
        name="per-client-quadratic",
        kind="bilevel",
        reference=(
            "HGP Sec. 3, quadratic g_i and f_i (per-client hyperparameters lambda_i; x = "
            "[lambda_i])"
        ),
        build=lambda seed=0: PerClientQuadratic.random(4, 2, 3, 5.0, seed, outer_coupling=0.5),
    )
)
register(
    ProblemInfo(
        name="per-client-logistic",
        kind="bilevel",
        reference="HGP Sec. 5.1 eq. (11) (decay) / eq. (12) (influence); FedEM synthetic data",
        build=lambda seed=0: PerClientLogistic.random(3, 5, 100, 100, seed),
    )
)
__all__ += ["PerClientLogistic", "PerClientQuadratic"]

# --- the per-client-loop reference that the benchmarks compare the batched client axis with ---
from problems.loop_reference import PerClientLoop  # noqa: E402
from problems.workloads.recipe import WorkloadRecipe  # noqa: E402

__all__ += ["PerClientLoop"]


# a saved workload recipe (a counterexample on a workload) rebuilds through from_spec
SPEC_BUILDERS["WorkloadRecipe"] = WorkloadRecipe

"""Registry entries for the AggITD estimators and algorithms (Xiao & Ji, ICML 2023)."""

from __future__ import annotations

import functools

from testbed.algorithms.aggitd import FBOAggITD
from testbed.estimators.aggitd import AggITD
from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo

# Defaults are the classes' dataclass fields; a variant fixes what its make sets.
_entry = functools.partial(EstimatorInfo, paper="AggITD", supports=ALL_KINDS)


def _estimator(name: str, reference: str, as_printed: bool) -> EstimatorInfo:
    """An :class:`AggITD` entry: the analysed estimator or the algorithm as printed."""
    return _entry(
        name=name,
        cls=AggITD,
        reference=reference,
        make=functools.partial(AggITD, as_printed=as_printed),
        fixed=("as_printed",),
    )


def _algorithm(name: str, reference: str, lower_solver: str) -> EstimatorInfo:
    """An :class:`FBOAggITD` entry: its lower-level solver is fixed."""
    return _entry(
        name=name,
        cls=FBOAggITD,
        reference=reference,
        make=functools.partial(FBOAggITD, lower_solver=lower_solver),
        fixed=("lower_solver",),
        role="algorithm",
    )


ENTRIES: list[EstimatorInfo] = [
    _estimator(
        "aggitd",
        "Xiao & Ji 2023, Alg. 1 (closed form eq. 5, mean over Q eq. 11)",
        as_printed=False,
    ),
    _estimator(
        "aggitd-as-printed",
        "Xiao & Ji 2023, Alg. 1 as printed (line 6 without lambda, line 15 z^{N-1})",
        as_printed=True,
    ),
    _algorithm(
        "fbo-aggitd",
        "Xiao & Ji 2023, Alg. 3 with Alg. 2 (One-Round-Lower) and Alg. 4 (One-Round-Upper); "
        "Table 1, Thm 1, Cor. 1",
        lower_solver="svrg",
    ),
    _algorithm(
        "fbo-aggitd-sgd",
        "Xiao & Ji 2023, Fig. 4 (FBO-AggITD_SGD: FedAvg lower level, Alg. 2 without its control "
        "variate)",
        lower_solver="sgd",
    ),
]

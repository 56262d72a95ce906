"""Registry entries for the AggITD estimators and algorithms (Xiao & Ji, ICML 2023)."""

from __future__ import annotations

import functools
from typing import Literal

from testbed.algorithms.aggitd import FBOAggITD
from testbed.estimators.aggitd import AggITD
from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo

# Defaults are the classes' dataclass fields; a variant fixes what its make sets.
_entry = functools.partial(EstimatorInfo, paper="AggITD", supports=ALL_KINDS)


def _variant(
    name: str,
    reference: str,
    cls: type,
    role: Literal["estimator", "algorithm"] = "estimator",
    **fixed: object,
) -> EstimatorInfo:
    """An entry of ``cls`` (:class:`AggITD`, or the algorithm :class:`FBOAggITD`) whose fields
    ``fixed`` the entry sets (as printed or analysed; the lower-level solver)."""
    return _entry(
        name=name,
        cls=cls,
        reference=reference,
        make=functools.partial(cls, **fixed),
        fixed=tuple(fixed),
        role=role,
    )


ENTRIES: list[EstimatorInfo] = [
    _variant(
        "aggitd",
        "Xiao & Ji 2023, Alg. 1 (closed form eq. 5, mean over Q eq. 11)",
        AggITD,
        as_printed=False,
    ),
    _variant(
        "aggitd-as-printed",
        "Xiao & Ji 2023, Alg. 1 as printed (line 6 without lambda, line 15 z^{N-1})",
        AggITD,
        as_printed=True,
    ),
    _variant(
        "fbo-aggitd",
        "Xiao & Ji 2023, Alg. 3 with Alg. 2 (One-Round-Lower) and Alg. 4 (One-Round-Upper); "
        "Table 1, Thm 1, Cor. 1",
        FBOAggITD,
        "algorithm",
        lower_solver="svrg",
    ),
    _variant(
        "fbo-aggitd-sgd",
        "Xiao & Ji 2023, Fig. 4 (FBO-AggITD_SGD: FedAvg lower level, Alg. 2 without its control "
        "variate)",
        FBOAggITD,
        "algorithm",
        lower_solver="sgd",
    ),
]

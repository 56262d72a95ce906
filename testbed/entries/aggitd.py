"""Registry entries for the AggITD estimators and algorithms (Xiao & Ji, ICML 2023)."""

from __future__ import annotations

from testbed.algorithms.aggitd import FBOAggITD
from testbed.estimators.aggitd import AggITD
from testbed.info import ALL_KINDS, EstimatorInfo

# Defaults are the classes' dataclass fields; a variant fixes what its make sets.
_PRINTED = ("as_printed",)
_LOWER = ("lower_solver",)

ENTRIES: list[EstimatorInfo] = [
    EstimatorInfo(
        name="aggitd",
        cls=AggITD,
        paper="AggITD",
        reference="Xiao & Ji 2023, Alg. 1 (closed form eq. 5, mean over Q eq. 11)",
        supports=ALL_KINDS,
        make=lambda **kw: AggITD(**kw),
        fixed=_PRINTED,
        claims=(
            "aggitd.alg1.per_index_identity",
            "aggitd.errata.prop1_alpha3_eq45",
            "aggitd.errata.prop2_sum_corrected",
            "aggitd.lower.contraction",
            "aggitd.prop1.bias_bound",
            "aggitd.prop1.mean_identity",
            "aggitd.prop2.second_moment",
            "aggitd.scaling.bias_rate_in_n",
            "aggitd.scaling.participation",
            "aggitd.errata.prop2_sum_as_printed",
        ),
    ),
    EstimatorInfo(
        name="aggitd-as-printed",
        cls=AggITD,
        paper="AggITD",
        reference="Xiao & Ji 2023, Alg. 1 as printed (line 6 without lambda, line 15 z^{N-1})",
        supports=ALL_KINDS,
        make=lambda **kw: AggITD(as_printed=True, **kw),
        fixed=_PRINTED,
        claims=("aggitd.alg1.as_printed",),
    ),
    EstimatorInfo(
        name="fbo-aggitd",
        cls=FBOAggITD,
        paper="AggITD",
        reference="Xiao & Ji 2023, Alg. 3 with Alg. 2 (One-Round-Lower) and Alg. 4 "
                  "(One-Round-Upper); Table 1, Thm 1, Cor. 1",
        supports=ALL_KINDS,
        make=lambda **kw: FBOAggITD(lower_solver="svrg", **kw),
        fixed=_LOWER,
        claims=(
            "aggitd.comm.rounds_per_iteration",
            "comparison.aggitd_fewer_rounds_than_fednest",
            "aggitd.cor1.floor_kept",
            "aggitd.cor1.no_floor",
            "aggitd.scaling.tau_invariance",
            "aggitd.errata.dh_theorem2_constant",
            "aggitd.lemma3.drift_bound",
            "aggitd.scaling.participation_algorithm",
            "aggitd.scaling.tau_stationarity",
            "aggitd.thm1.rate_in_K",
        ),
        role="algorithm",
    ),
    EstimatorInfo(
        name="fbo-aggitd-sgd",
        cls=FBOAggITD,
        paper="AggITD",
        reference="Xiao & Ji 2023, Fig. 4 (FBO-AggITD_SGD: FedAvg lower level, notes 2.3)",
        supports=ALL_KINDS,
        make=lambda **kw: FBOAggITD(lower_solver="sgd", **kw),
        fixed=_LOWER,
        claims=("aggitd.comm.sgd_rounds_per_iteration",),
        role="algorithm",
    ),
]

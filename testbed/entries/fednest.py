"""Registry entries for the fednest estimators and algorithms (Tarzanagh et al., ICML 2022).

The four Table 2 variants and the minimax form are configurations of one class,
:class:`~testbed.algorithms.fednest.FedNest`; FedIHGP (Algs. 3-4 and FedOut's first round) is
the registered hypergradient estimator.
"""

from __future__ import annotations

from typing import Any

from testbed.algorithms.fednest import FedNest
from testbed.estimators.fednest import FedIHGP
from testbed.info import ALL_KINDS, EstimatorInfo

_REFERENCE = "Tarzanagh et al. 2022 (FedNest), "

# The variants fix the two methods; every other default is FedNest's dataclass field.
_METHODS = ("inner_method", "outer_method")


def _variant(inner_method: str, outer_method: str) -> Any:
    def make(**kw: Any) -> FedNest:
        return FedNest(inner_method=inner_method, outer_method=outer_method,  # type: ignore[arg-type]
                       **kw)

    return make


ENTRIES: list[EstimatorInfo] = [
    EstimatorInfo(
        name="fedihgp",
        cls=FedIHGP,
        paper="FedNest",
        reference=_REFERENCE + "Alg. 3 (FedIHGP), eqs. (13a)-(13b), Lemma 2.2; T FedInn calls "
                               "(Alg. 4) warm-started from the state",
        supports=ALL_KINDS,
        make=lambda **kw: FedIHGP(**kw),
        claims=(
            "fednest.lemma22.averaged_bias",
            "fednest.lemma22.inverse_hessian_bound",
            "fednest.lemma22.inverse_hessian_identity",
            "fednest.lemma22.paper_constant",
            "fednest.lemma22.per_client_bias",
            "fednest.ihgp.client_sampling_variance",
            "fednest.ihgp.variance_exact",
            "fednest.ihgp.variance_linear_in_n",
            "fednest.ihgp.client_sampling_variance_n",
            "fednest.lemma22.abs_error_as_stated",
            "fednest.lemma22.abs_error_per_sample",
            "fednest.compositional.paper_indirect_form",
            "fednest.compositional.single_term_unbiased",
        ),
    ),
    EstimatorInfo(
        name="fednest",
        cls=FedNest,
        paper="FedNest",
        reference=_REFERENCE + "Alg. 1 with FedInn (Alg. 4), FedIHGP (Alg. 3), FedOut (Alg. 2)",
        supports=ALL_KINDS,
        make=_variant("svrg", "svrg"),
        fixed=_METHODS,
        claims=(
            "comparison.aggitd_fewer_rounds_than_fednest",
            "comparison.fedmsa_tenfold_fewer_rounds",
            "comparison.lfednest_fewer_rounds_homogeneous",
            "fednest.compositional.one_call_exact",
            "fednest.fedinn.linear_rate",
            "fednest.fedinn.tau_exponent",
            "fednest.rounds.fednest",
            "fednest.rounds.paper_count_random",
            "fednest.rounds.random_truncation",
            "fednest.thm31.stationarity_floor",
            "fednest.thm31.floor_slope_in_n",
            "fednest.thm31.k_rate_bilevel",
            "fednest.cor33.k_rate_compositional",
        ),
        role="algorithm",
    ),
    EstimatorInfo(
        name="fednest-minimax",
        cls=FedNest,
        paper="FedNest",
        reference=_REFERENCE + "Sec. 2.5, eq. (12): FedInn ascent on y, FedOut without the "
                               "indirect term; Sec. 4.3 (Fig. 4)",
        supports=frozenset({"minimax"}),
        make=_variant("svrg", "minimax"),
        fixed=_METHODS,
        claims=(
            "fednest.minimax.averaged_indirect_zero",
            "fednest.minimax.per_client_indirect_zero",
            "fednest.minimax.synthetic_linear_rate",
            "fednest.rounds.fednest_minimax",
            "fednest.cor32.k_rate_minimax",
        ),
        role="algorithm",
    ),
    EstimatorInfo(
        name="fednest-sgd",
        cls=FedNest,
        paper="FedNest",
        reference=_REFERENCE + "Table 2 (appendix; notes 2.7): LFedInn (FedAvg on y) + FedOut",
        supports=ALL_KINDS,
        make=_variant("sgd", "svrg"),
        fixed=_METHODS,
        claims=("fednest.fedavg.biased_fixed_point", "fednest.rounds.fednest_sgd"),
        role="algorithm",
    ),
    EstimatorInfo(
        name="lfednest",
        cls=FedNest,
        paper="FedNest",
        reference=_REFERENCE + "Sec. 2.4 and Table 2 (LFedNest: LFedInn + LFedOut, local "
                               "Neumann; Algs. 5-6 reconstructed, notes 2.7)",
        supports=ALL_KINDS,
        make=_variant("sgd", "local"),
        fixed=_METHODS,
        claims=("fednest.rounds.lfednest", "fednest.lfednest.heterogeneity_bias",
                "comparison.lfednest_fewer_rounds_homogeneous"),
        role="algorithm",
    ),
    EstimatorInfo(
        name="lfednest-svrg",
        cls=FedNest,
        paper="FedNest",
        reference=_REFERENCE + "Table 2 (appendix; notes 2.7): FedInn + LFedOut",
        supports=ALL_KINDS,
        make=_variant("svrg", "local"),
        fixed=_METHODS,
        claims=("fednest.rounds.lfednest_svrg",),
        role="algorithm",
    ),
]

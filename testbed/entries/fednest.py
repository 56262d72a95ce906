"""Registry entries for the fednest estimators and algorithms (Tarzanagh et al., ICML 2022).

The four Table 2 variants and the minimax form are configurations of one class,
:class:`~testbed.algorithms.fednest.FedNest`; FedIHGP (Algs. 3-4 and FedOut's first round) is
the registered hypergradient estimator.
"""

from __future__ import annotations

import functools

from testbed.algorithms.fednest import FedNest
from testbed.algorithms.fednest_updates import FedInn
from testbed.algorithms.fednest_updates import FedOut
from testbed.algorithms.fednest_updates import InnerUpdate
from testbed.algorithms.fednest_updates import LFedInn
from testbed.algorithms.fednest_updates import LFedOut
from testbed.algorithms.fednest_updates import MinimaxFedOut
from testbed.algorithms.fednest_updates import OuterUpdate
from testbed.estimators.fednest import FedIHGP
from testbed.info import ALL_KINDS
from testbed.info import EstimatorInfo

_REFERENCE = "Tarzanagh et al. 2022 (FedNest), "


def _variant(
    name: str,
    inner: InnerUpdate,
    outer: OuterUpdate,
    reference: str,
    supports: frozenset[str] = ALL_KINDS,
) -> EstimatorInfo:
    """A Table 2 variant: its pair of update strategies is fixed; every other default is
    FedNest's dataclass field."""
    return EstimatorInfo(
        name=name,
        cls=FedNest,
        paper="FedNest",
        reference=_REFERENCE + reference,
        supports=supports,
        make=functools.partial(FedNest, inner_method=inner, outer_method=outer),
        fixed=("inner_method", "outer_method"),
        role="algorithm",
    )


ENTRIES: list[EstimatorInfo] = [
    EstimatorInfo(
        name="fedihgp",
        cls=FedIHGP,
        paper="FedNest",
        reference=_REFERENCE + "Alg. 3 (FedIHGP), eqs. (13a)-(13b), Lemma 2.2; T FedInn calls "
        "(Alg. 4) warm-started from the state",
        supports=ALL_KINDS,
        make=FedIHGP,
    ),
    _variant(
        "fednest",
        FedInn(),
        FedOut(),
        "Alg. 1 with FedInn (Alg. 4), FedIHGP (Alg. 3), FedOut (Alg. 2)",
    ),
    _variant(
        "fednest-minimax",
        FedInn(),
        MinimaxFedOut(),
        "Sec. 2.4, eq. (12): FedInn ascent on y, FedOut without the indirect term; Sec. 4.3 "
        "(Fig. 4)",
        supports=frozenset({"minimax"}),
    ),
    _variant(
        "fednest-sgd",
        LFedInn(),
        FedOut(),
        "Table 2 (App. A): LFedInn (FedAvg on y) + FedOut",
    ),
    _variant(
        "lfednest",
        LFedInn(),
        LFedOut(),
        "Sec. 2.6 and Table 2 (LFedNest: LFedInn + LFedOut, local Neumann; Algs. 5-6 of "
        "App. A reconstructed from Table 2 and the authors' code)",
    ),
    _variant(
        "lfednest-svrg",
        FedInn(),
        LFedOut(),
        "Table 2 (App. A): FedInn + LFedOut",
    ),
]

r"""AggITD (Xiao & Ji 2023; abstract, Sec. 4, Table 2): FBO-AggITD needs fewer communication
rounds than FedNest on heterogeneous clients.

The paper counts ``2N + 3`` rounds per outer iteration for FBO-AggITD against ``2N + T + 3``
for FedNest (Sec. 4) and measures 2.5-3x fewer rounds to 90% test accuracy on MNIST (Table 2).
Here the abstract's weaker reading is decided: on a heterogeneous multi-client quadratic family
(Table 2's setting N = T = 5, tau = 1), the median over the family's problems of
``rounds(FBO-AggITD) / rounds(FedNest)`` to reach ``||grad h(x_k)|| <= 0.1 ||grad h(x_0)||``
for good is below 1, both tuned on the same step grid. The check and its statistical test
(:func:`~theory_checks.comparison.common.measure_rounds`, an exact Clopper-Pearson
interval of ``P(ratio < 1) > 1/2``) are shared with the other closed-form comparisons; Table
2's factor is decided under its own protocol in
:mod:`theory_checks.comparison.aggitd_table2_factor`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from testbed.algorithms.aggitd import FBOAggITD
from theory_checks.claim import Claim
from theory_checks.comparison.common import HETEROGENEOUS_CASES
from theory_checks.comparison.common import comparison_claim
from theory_checks.comparison.common import rounds_check
from theory_checks.comparison.common import rounds_perturbation
from theory_checks.comparison.runs import COMPARISONS
from theory_checks.perturbed_variants import registry_variant

# The perturbation: the smallest bug that costs the round savings and survives the step-size
# tuning (a bug that only rescales a step would be tuned away by the grid).


class _WithoutLastClient:
    """A client sampler whose draws never contain the last client (the server drops its
    upload every round); everything else is the wrapped sampler's."""

    def __init__(self, base: Any) -> None:
        self.base = base

    def sample(self, rng: np.random.Generator) -> torch.Tensor:
        clients = self.base.sample(rng)
        kept = clients[clients != self.base.n_clients - 1]
        return kept if kept.numel() else clients

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


@dataclasses.dataclass(frozen=True)
class _DropsLastClient(FBOAggITD):
    """FBO-AggITD whose server aggregates every round without the last client's upload."""

    def advance(self, ctx: Any, state: Any) -> Any:
        if not isinstance(ctx.sampler, _WithoutLastClient):
            ctx.sampler = _WithoutLastClient(ctx.sampler)
        return super().advance(ctx, state)


_aggitd_drops_client = registry_variant("fbo-aggitd", _DropsLastClient)


AGGITD_DROPS_CLIENT = rounds_perturbation(
    "AggITD aggregation drops a client",
    "the server averages the uploads of M - 1 clients every round (one client's message lost, "
    "e.g. a straggler timed out), in the lower-level, ITD and upper rounds alike: on "
    "heterogeneous clients the iterates converge to the stationary point of the other M - 1 "
    "clients' objective, so the target on the M clients' objective is held late or never. "
    "A step-size bug would be tuned away by the grid; losing one client's data is the "
    "smallest aggregation error that moves the fixed point",
    _aggitd_drops_client,
)


comparison_check_aggitd = rounds_check(
    COMPARISONS["aggitd"],
    "FBO-AggITD against FedNest in Table 2's setting (N = T = 5, tau = 1): the fraction of the "
    "family's problems with rounds ratio < 1 is above 1/2.",
)


AGGITD_FEWER_ROUNDS_THAN_FEDNEST = comparison_claim(
    COMPARISONS["aggitd"],
    id="comparison.aggitd_fewer_rounds_than_fednest",
    paper="AggITD",
    reference=(
        "Xiao & Ji 2023, abstract, Sec. 4 (2N + 3 vs 2N + T + 3 rounds per iteration) and "
        "Table 2 (2.5-3x fewer rounds to 90%)"
    ),
    statement=(
        "FBO-AggITD needs fewer rounds than FedNest (the abstract's reading; Table 2's "
        "factor is not measured here): median over heterogeneous problems of "
        "rounds(FBO-AggITD) / rounds(FedNest) < 1 to reach ||grad h(x_k)|| <= 0.1 ||grad "
        "h(x_0)|| for good, both tuned on the same step grid (Table 2 setting: N = T = 5, "
        "tau = 1)"
    ),
    strategy=HETEROGENEOUS_CASES,
    check=comparison_check_aggitd,
    perturbation=AGGITD_DROPS_CLIENT,
    notes=(
        "Reversed from the earlier 'fails as stated', which compared a fixed alpha = 0.01 "
        "(AggITD's App. A.3) with alpha = 1/L_h (FedNest's default) on one homogeneous client "
        "and counted the first dip below the target. Tuned on the same grid, both pick c = 1 "
        "and FBO-AggITD needs as many outer iterations as FedNest or fewer: the rounds ratio "
        "is the per-iteration 13/18 = 0.72 on most problems (geometric means 0.71-0.72 over "
        "15-17 problems per family). This is the weaker, per-iteration reading of the claim; "
        "Table 2's 2.5-3x is a number measured on MNIST networks, which closed-form "
        "quadratics do not reproduce (a toy scale: a replication record, never a refutation): "
        "the Table 2 replication configs measure it (docs/workloads.md, the replication table). "
        "Every draw "
        "counts; the draws FedNest solves in one iteration are reported apart with their own "
        "verdict."
    ),
)


CLAIMS: tuple[Claim, ...] = (AGGITD_FEWER_ROUNDS_THAN_FEDNEST,)

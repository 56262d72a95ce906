r"""FedMSA (Tarzanagh et al. 2023; abstract, Fig. 1(a), Fig. 4): "order-of-magnitude savings in
communication rounds" over FedNest, i.e. at most 1/10 of FedNest's rounds.

Decided on heterogeneous multi-client quadratic families in Fig. 4's setting (FedMSA with K =
12 local steps; FedNest with N = 3, T = K): the median over the family's problems of
``rounds(FedMSA) / rounds(FedNest)`` to reach ``||grad h(x_k)|| <= 0.1 ||grad h(x_0)||`` for
good is at most 1/10, both tuned on the same step grid. The check and its statistical test
(:func:`~theory_checks.comparison.common.measure_rounds`, an exact Clopper-Pearson
interval of ``P(ratio <= 1/10) > 1/2``) are shared with the other closed-form comparisons.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from testbed.algorithms.fedmsa import FedMSA
from theory_checks.claim import Claim
from theory_checks.comparison.common import HETEROGENEOUS_CASES
from theory_checks.comparison.common import comparison_claim
from theory_checks.comparison.common import rounds_check
from theory_checks.comparison.common import rounds_perturbation
from theory_checks.comparison.runs import COMPARISONS
from theory_checks.perturbed_variants import registry_variant

# The perturbation: the smallest bug that costs the round savings and survives the step-size
# tuning (a bug that only rescales a step would be tuned away by the grid).


@dataclasses.dataclass(frozen=True)
class _FrozenLocalDirections(FedMSA):
    """FedMSA whose local recursion (6) takes its correction at the current local point for
    both terms (an index slip: ``p(x_k) - p(x_k) = 0``), so every local step reuses the round's
    global ``(h_r, q_r)``: the local hypergradient is never updated."""

    def correction_point(self, current: Any, previous: Any) -> Any:
        return current  # the bug: h_{r,k} = p(x_k) + h_{r,k-1} - p(x_k) = h_{r,k-1}


_fedmsa_frozen_local_directions = registry_variant("fedmsa", _FrozenLocalDirections)


FEDMSA_FROZEN_LOCAL_DIRECTIONS = rounds_perturbation(
    "FedMSA local directions never updated",
    "an index slip in the local recursion (6) evaluates its correction p(x_k) - p(x_{k-1}) at "
    "x_k twice, so the K = 12 local steps all follow the round's global (h_r, q_r): the local "
    "hypergradient update, which the paper credits for the savings over FedNest's frozen "
    "indirect term, is gone, and the inner variables overshoot along a stale direction. The "
    "smaller bug of ignoring K (one local step per round) was measured still reaching the "
    "target within 1/10 of FedNest's rounds on 4 of 14 problems (FedNest with N = 3 often "
    "stalls), so it is not caught: the claim's margin comes from FedNest's stall as much as "
    "from FedMSA's local steps",
    _fedmsa_frozen_local_directions,
)


comparison_check_fedmsa = rounds_check(
    COMPARISONS["fedmsa"],
    "FedMSA (K = 12) against FedNest (N = 3, T = K), Fig. 4's setting: the fraction of the "
    "family's problems with rounds ratio <= 1/10 is above 1/2.",
)


FEDMSA_TENFOLD_FEWER_ROUNDS = comparison_claim(
    COMPARISONS["fedmsa"],
    id="comparison.fedmsa_tenfold_fewer_rounds",
    paper="FedMSA",
    reference=(
        "Tarzanagh et al. (FedMSA), abstract ('order-of-magnitude savings'), Fig. 1(a) "
        "('reduction of 10x') and Fig. 4 (K = 12)"
    ),
    statement=(
        "median over heterogeneous problems of rounds(FedMSA) / rounds(FedNest) <= 1/10 "
        "to reach ||grad h(x_k)|| <= 0.1 ||grad h(x_0)|| for good, both tuned on the same "
        "step grid (Fig. 4 setting: K = 12; FedNest N = 3, T = K)"
    ),
    strategy=HETEROGENEOUS_CASES,
    check=comparison_check_fedmsa,
    perturbation=FEDMSA_FROZEN_LOCAL_DIRECTIONS,
    notes=(
        "In the paper's own setting FedNest runs N = 3 Neumann terms and T = 12 FedInn calls "
        "(30 rounds per iteration) and often stalls above the target (its N = 3 bias floor): "
        'a capped FedNest count makes the ratio an upper bound, so "within 1/10" there is '
        "conservative, but it compares with a FedNest that does not reach the target, unlike "
        "Fig. 4's (over 2000 rounds to 90%). Every draw counts: on draws FedNest solves in "
        "one outer iteration the ratio is 4/30 = 0.13 on every one (reported apart with their "
        "own verdict); against FedNest with AggITD's N = T = 5 (18 rounds per iteration, bias "
        "floor below the target) the ratio is 0.06-0.17 (rounds-to-target table, "
        "fedmsa_vs_fednest_n5). Fig. 4's ~8x on MNIST is measured by the replication configs "
        "(docs/workloads.md, the replication table)."
    ),
)


CLAIMS: tuple[Claim, ...] = (FEDMSA_TENFOLD_FEWER_ROUNDS,)

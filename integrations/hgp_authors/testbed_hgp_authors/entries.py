"""The HGP authors' code as testbed registry entries (entry point ``testbed.estimators``),
enrolled in the HGP claims that apply to their deterministic estimator. Importing this needs
``HGP_AUTHORS_REPO`` (a checkout of hitachi-rd-cv/pdbo-hgp): without it the plugin is left out
with the line that says so.

- ``hgp-authors``: their driver and gossip on the testbed's graph sequences (Alg. 1 Push-Sum,
  Alg. 2): the Push-Sum consensus of their gossip (Lemma 2 corrected), Corollary 1's explicit
  bound (D1) at every m, and the negative control (no strong connectivity, no convergence);
- ``hgp-authors-static``: the same driver on the static undirected graph (their
  ``GossipGivenWeights`` with the Metropolis W, Theta_hat = W^S; the testbed's ``hgp-static``):
  Theorem 1's rate in S (the error floor falls like SLEM(W)^S), the static operator and the
  static iterates of eq. (10). These claims build the estimator with M, S and the graph seed
  only and read SLEM(W) from the static graph, so they need the family as the entry's default:
  on ``hgp-authors`` (``random_directed``) the rate in S would fit random directed graphs
  against the static W's rate (run so, it fails as stated: slope -0.661 against -0.405);
- ``hgp-authors-exact-averaging``: the same driver on their complete graph, one Push-Sum step
  per call (Theta exactly): the error identity of eq. (10) in M, Theorem 1's rate in M,
  Theorem 2's corrected bound in the inner error, Lemma 1's eta-invariance.
"""

from __future__ import annotations

import functools
from typing import Any

from testbed.decentralized.sgp import ExactConsensus
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.info import EstimatorInfo
from testbed.info import field_defaults
from testbed_hgp_authors.adapter import AuthorsHGP
from testbed_hgp_authors.authors_code import CODE

CALLS = (
    "lib_task.hyper_gradient_push.hyper_gradient_push, module_torch.hgp."
    "HyperGradEstimator, module_torch.gossip_protocol"
)
#: The inner solver's keywords (the testbed's: their SGP is not run) and their defaults.
INNER = {
    "inner_steps": None,
    **field_defaults(StochasticGradientPush, step_size="inner_step_size", variant="sgp_variant"),
}
#: Fields the adapter does not offer (the deterministic form; the edge probabilities of the
#: random families are the testbed's defaults).
FIXED = ("batch_size", "shared_sample", "keep_weights", "edge_probability", "inner")


def make(**kw: Any) -> AuthorsHGP:
    """``AuthorsHGP`` with the inner solver from ``inner_steps`` (None: the exact consensus
    solution; an int: that many testbed SGP steps from the state, 0 the state's own y)."""
    steps = kw.pop("inner_steps")
    size, variant = kw.pop("inner_step_size"), kw.pop("sgp_variant")
    inner = ExactConsensus() if steps is None else StochasticGradientPush(steps, size, variant)
    return AuthorsHGP(inner=inner, **kw)


# What the three entries share: the adapter, its builder, the closed-form bilevel problems
_entry = functools.partial(
    EstimatorInfo,
    cls=AuthorsHGP,
    paper="HGP (authors' code)",
    supports=frozenset({"bilevel"}),
    make=make,
    closed_form_only=True,
)

ENTRIES: list[EstimatorInfo] = [
    _entry(
        name="hgp-authors",
        reference=f"{CODE.source}: {CALLS} (GossipNormalize) on the testbed's graph sequences",
        settings=INNER,
        fixed=(*FIXED, "averaging"),
        enrolled_claims=(
            "hgp.lemma2.geometric_consensus",
            "hgp.corollary1.explicit_bound",
            "hgp.negative_control.not_strongly_connected",
        ),
    ),
    _entry(
        name="hgp-authors-static",
        reference=(
            f"{CODE.source}: {CALLS} (GossipGivenWeights, column i of the Metropolis W) on the "
            "testbed's static undirected graph (Theta_hat = W^S)"
        ),
        settings={**INNER, "graph_family": "static_undirected"},
        fixed=(*FIXED, "averaging"),
        enrolled_claims=(
            "hgp.theorem1.rate_in_s",
            "hgp.alg1.static_operator",
            "hgp.recursion.static_iterates",
        ),
    ),
    _entry(
        name="hgp-authors-exact-averaging",
        reference=f"{CODE.source}: {CALLS} on their GraphFullyConnected, n_push = 1 (Theta)",
        # averaging "exact" or "server" (the claims pass either): both are Theta, their gossip
        # on their complete graph
        settings={**INNER, "averaging": "exact"},
        fixed=(*FIXED, "pushsum_steps", "graph_family", "graph_seed"),
        enrolled_claims=(
            "hgp.exact_averaging.error_identity",
            "hgp.theorem1.rate_in_m",
            "hgp.theorem2.corrected",
            "hgp.lemma1.eta_invariance",
        ),
    ),
]

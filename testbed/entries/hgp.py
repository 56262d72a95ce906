"""Registry entries for the HGP (decentralized) estimators and algorithms.

HGP: Terashita & Hara, "Decentralized Hyper-Gradient Computation over Time-Varying Directed
Networks" (Alg. 1 Push-Sum, Alg. 2 HGP, eq. 10). Parameter names follow the README glossary:
M = ``neumann_terms``, S = ``pushsum_steps``, eta = ``neumann_step_size``, b = ``batch_size``.
"""

from __future__ import annotations

from typing import Any

from testbed.decentralized.hgp import DecentralizedGradient, HyperGradientPush
from testbed.decentralized.personalization import HGPPersonalization
from testbed.decentralized.sgp import ExactConsensus, StochasticGradientPush
from testbed.info import EstimatorInfo

BILEVEL = frozenset({"bilevel"})
PAPER = "HGP"


def _inner(inner_steps: int | None, inner_step_size: float | None, variant: str) -> Any:
    if inner_steps is None:
        return ExactConsensus()
    return StochasticGradientPush(inner_steps, inner_step_size, variant)  # type: ignore[arg-type]


def _hgp(*, neumann_terms: int, pushsum_steps: int = 10, neumann_step_size: float | None,
         averaging: str = "pushsum", graph_family: str = "random_directed", graph_seed: int = 0,
         batch_size: int | None = None, shared_sample: bool = False, keep_weights: bool = False,
         inner_steps: int | None = None, inner_step_size: float | None = None,
         sgp_variant: str = "assran") -> HyperGradientPush:
    return HyperGradientPush(
        neumann_terms=neumann_terms, pushsum_steps=pushsum_steps,
        neumann_step_size=neumann_step_size, averaging=averaging,  # type: ignore[arg-type]
        graph_family=graph_family, graph_seed=graph_seed, batch_size=batch_size,
        shared_sample=shared_sample, keep_weights=keep_weights,
        inner=_inner(inner_steps, inner_step_size, sgp_variant))


_PUSHSUM = {"neumann_terms": 50, "pushsum_steps": 10, "neumann_step_size": None,
            "graph_family": "random_directed", "graph_seed": 0, "batch_size": None,
            "inner_steps": None, "inner_step_size": None, "sgp_variant": "assran"}
_EXACT = {"neumann_terms": 50, "neumann_step_size": None, "averaging": "exact",
          "batch_size": None, "inner_steps": None, "inner_step_size": None}
_STOCHASTIC = {**_PUSHSUM, "averaging": "pushsum", "batch_size": 4, "shared_sample": False,
               "keep_weights": False}

ENTRIES: list[EstimatorInfo] = [
    EstimatorInfo(
        name="hgp",
        cls=HyperGradientPush,
        paper=PAPER,
        reference="HGP Alg. 2 with Alg. 1 Push-Sum (eq. 10), exact Jacobians (Cor. 1)",
        supports=BILEVEL,
        make=lambda **kw: _hgp(**kw),
        defaults=dict(_PUSHSUM),
        claims=("hgp.communication.vector_messages", "hgp.corollary1.explicit_bound",
                "hgp.influence.r2", "hgp.influence.r2_retraining",
                "hgp.lemma2.geometric_consensus",
                "hgp.lemma2.sqrt_n_constant", "hgp.negative_control.not_strongly_connected",
                "hgp.theorem1.stated_step_condition"),
    ),
    EstimatorInfo(
        name="hgp-centralized",
        cls=HyperGradientPush,
        paper=PAPER,
        reference="HGP sec. 4 (centralized variant: a server computes Theta exactly)",
        supports=BILEVEL,
        make=lambda **kw: _hgp(**{**kw, "averaging": "server"}),
        defaults={k: v for k, v in _EXACT.items() if k != "averaging"},
        claims=("hgp.exact_averaging.error_identity",),
    ),
    EstimatorInfo(
        name="hgp-clientgrad",
        cls=DecentralizedGradient,
        paper=PAPER,
        reference="HGP sec. 4 / Table 1 (ClientGrad, Chen et al. 2022); notes 3.7",
        supports=BILEVEL,
        make=lambda: DecentralizedGradient("client"),
        defaults={},
        claims=("hgp.taxonomy.closed_forms",),
        closed_form_only=True,
    ),
    EstimatorInfo(
        name="hgp-exact-averaging",
        cls=HyperGradientPush,
        paper=PAPER,
        reference="HGP eq. (9)-(10) with the exact averaging operator Theta (Lemma 1)",
        supports=BILEVEL,
        make=lambda **kw: _hgp(**kw),
        defaults=dict(_EXACT),
        claims=("hgp.exact_averaging.error_identity", "hgp.lemma1.eta_invariance",
                "hgp.theorem1.rate_in_m", "hgp.theorem2.as_stated", "hgp.theorem2.corrected"),
    ),
    EstimatorInfo(
        name="hgp-globalgrad",
        cls=DecentralizedGradient,
        paper=PAPER,
        reference="HGP sec. 4 / Table 1 (GlobalGrad, what HGP estimates); notes 2.6 (1)",
        supports=BILEVEL,
        make=lambda: DecentralizedGradient("global"),
        defaults={},
        claims=("hgp.taxonomy.closed_forms",),
        closed_form_only=True,
    ),
    EstimatorInfo(
        name="hgp-localgrad",
        cls=DecentralizedGradient,
        paper=PAPER,
        reference="HGP sec. 4 / Table 1 (LocalGrad, Gao et al. 2022); notes 3.7",
        supports=BILEVEL,
        make=lambda: DecentralizedGradient("local"),
        defaults={},
        claims=("hgp.taxonomy.closed_forms",),
        closed_form_only=True,
    ),
    EstimatorInfo(
        name="hgp-personalization",
        cls=HGPPersonalization,
        paper=PAPER,
        reference="HGP sec. 5.3 (HGP-PL: hypergradient descent on per-client lambda_i, SGP)",
        supports=BILEVEL,
        make=lambda outer_step_size, neumann_terms, pushsum_steps, inner_steps, graph_family,
        graph_seed: HGPPersonalization(outer_step_size=outer_step_size, estimator=_hgp(
            neumann_terms=neumann_terms, pushsum_steps=pushsum_steps, neumann_step_size=None,
            graph_family=graph_family, graph_seed=graph_seed, inner_steps=inner_steps,
            sgp_variant="nedic")),
        defaults={"outer_step_size": None, "neumann_terms": 15, "pushsum_steps": 5,
                  "inner_steps": 40, "graph_family": "random_directed", "graph_seed": 0},
        claims=("hgp.personalization.gain",),
        closed_form_only=True,
        role="algorithm",
    ),
    EstimatorInfo(
        name="hgp-practical",
        cls=HyperGradientPush,
        paper=PAPER,
        reference="HGP sec. 5.3 practical form: one sample for u and v, omega not reset",
        supports=BILEVEL,
        make=lambda **kw: _hgp(**kw),
        defaults={**_STOCHASTIC, "shared_sample": True, "keep_weights": True},
        claims=("hgp.stochastic.unbiased",),
    ),
    EstimatorInfo(
        name="hgp-static",
        cls=HyperGradientPush,
        paper=PAPER,
        reference="HGP sec. 4 static-network variant: Theta_hat = W^S (Metropolis W); notes 3.5",
        supports=BILEVEL,
        make=lambda **kw: _hgp(**kw),
        defaults={**_PUSHSUM, "graph_family": "static_undirected"},
        claims=("hgp.theorem1.rate_in_s",),
    ),
    EstimatorInfo(
        name="hgp-stochastic",
        cls=HyperGradientPush,
        paper=PAPER,
        reference="HGP Alg. 2 with minibatch Jacobians (Thm 1, Cor. 2), independent samples",
        supports=BILEVEL,
        make=lambda **kw: _hgp(**kw),
        defaults=dict(_STOCHASTIC),
        claims=("hgp.noise.sqrt_eta", "hgp.stochastic.unbiased",
                "hgp.theorem1.high_probability_bound", "hgp.theorem1.noise_exponent_b"),
    ),
]

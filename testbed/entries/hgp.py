"""Registry entries for the HGP (decentralized) estimators and algorithms.

HGP: Terashita & Hara, "Decentralized Hyper-Gradient Computation over Time-Varying Directed
Networks" (Alg. 1 Push-Sum, Alg. 2 HGP, eq. 10). Parameter names follow the glossary
(docs/glossary.md): M = ``neumann_terms``, S = ``pushsum_steps``, eta = ``neumann_step_size``, b =
``batch_size``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from testbed.decentralized.averaging import ServerAveraging
from testbed.decentralized.hgp import DecentralizedGradient
from testbed.decentralized.hgp import HyperGradientPush
from testbed.decentralized.hgp import Quantity
from testbed.decentralized.personalization import HGPPersonalization
from testbed.decentralized.sgp import ExactConsensus
from testbed.decentralized.sgp import StochasticGradientPush
from testbed.defaults import HGP_PERSONALIZATION
from testbed.info import EstimatorInfo
from testbed.info import field_defaults

_entry = functools.partial(EstimatorInfo, paper="HGP", supports=frozenset({"bilevel"}))

# Defaults are HyperGradientPush's dataclass fields, less those a variant fixes (its make sets
# them, or leaves them at the field's default): the averaging rule (Push-Sum by default), the
# graph's fields where the rule does not gossip, the practical form's switches where it is not
# offered; nothing registered varies edge_probability.
_GRAPH = ("pushsum_steps", "graph_family", "graph_seed", "edge_probability")
_PRACTICAL = ("shared_sample", "keep_weights")
_PUSHSUM = ("averaging", "edge_probability", *_PRACTICAL)

# The keywords of the inner solver, which each make assembles (HyperGradientPush's ``inner``):
# inner_steps = None (the registered estimators' default) is the exact consensus solution, else
# StochasticGradientPush(inner_steps, inner_step_size, sgp_variant) with SGP's own defaults.
_SOLVER = {
    "inner_steps": None,
    **field_defaults(StochasticGradientPush, step_size="inner_step_size"),
}
_INNER = {**_SOLVER, **field_defaults(StochasticGradientPush, variant="sgp_variant")}


def _hgp(**fixed: Any) -> Callable[..., HyperGradientPush]:
    """An HGP make: the inner solver from the ``_INNER`` keywords (their defaults where the entry
    does not offer them), the fields from the rest, ``fixed`` on top."""

    def make(**kw: Any) -> HyperGradientPush:
        kw = {**kw, **fixed}
        inner = {**_INNER, **{key: kw.pop(key) for key in _INNER if key in kw}}
        return HyperGradientPush(inner=_inner(**inner), **kw)

    return make


def _variant(
    name: str, reference: str, settings: dict[str, Any], fixed: tuple[str, ...], **make_fixed: Any
) -> EstimatorInfo:
    """A :class:`HyperGradientPush` entry: ``settings`` over the fields less ``fixed``;
    ``make_fixed`` the fields its make sets."""
    return _entry(
        name=name,
        cls=HyperGradientPush,
        reference=reference,
        make=_hgp(**make_fixed),
        settings=settings,
        fixed=fixed,
    )


def _inner(
    inner_steps: int | None, inner_step_size: float | None, sgp_variant: str
) -> ExactConsensus | StochasticGradientPush:
    if inner_steps is None:
        return ExactConsensus()
    return StochasticGradientPush(inner_steps, inner_step_size, sgp_variant)  # type: ignore[arg-type]


def _taxonomy(quantity: Quantity, reference: str) -> EstimatorInfo:
    """One of Table 1's closed-form hypergradients (:class:`DecentralizedGradient`)."""
    return _entry(
        name=f"hgp-{quantity}grad",
        cls=DecentralizedGradient,
        reference=reference,
        make=functools.partial(DecentralizedGradient, quantity),
        fixed=("quantity",),
        closed_form_only=True,
    )


ENTRIES: list[EstimatorInfo] = [
    _variant(
        "hgp",
        "HGP Alg. 2 with Alg. 1 Push-Sum (eq. 10), exact Jacobians (Cor. 1)",
        settings=_INNER,
        fixed=_PUSHSUM,
    ),
    _variant(
        "hgp-centralized",
        "HGP sec. 4 (centralized variant: a server computes Theta exactly)",
        settings=_SOLVER,
        fixed=("averaging", *_GRAPH, *_PRACTICAL),
        averaging=ServerAveraging(),
    ),
    _taxonomy("client", "HGP sec. 4 / Table 1 (ClientGrad, Chen et al. 2022)"),
    _variant(
        "hgp-exact-averaging",
        "HGP eq. (9)-(10) with the exact averaging operator Theta (Lemma 1)",
        settings={"averaging": "exact", **_SOLVER},
        fixed=(*_GRAPH, *_PRACTICAL),
    ),
    _taxonomy("global", "HGP sec. 4 / Table 1 (GlobalGrad, what HGP estimates; Sec. 3.3)"),
    _taxonomy("local", "HGP sec. 4 / Table 1 (LocalGrad, Gao et al. 2022)"),
    _entry(
        name="hgp-personalization",
        cls=HGPPersonalization,
        reference="HGP sec. 5.3 (HGP-PL: hypergradient descent on per-client lambda_i, SGP)",
        # outer_step_size is HGPPersonalization's field; the other keywords configure the HGP
        # estimator it holds (testbed.defaults.HGP_PERSONALIZATION: M, S, T Nedic SGP steps;
        # the graph's fields)
        make=lambda outer_step_size, **kw: HGPPersonalization(
            outer_step_size=outer_step_size, estimator=_hgp(sgp_variant="nedic")(**kw)
        ),
        settings={
            **HGP_PERSONALIZATION,
            **field_defaults(HyperGradientPush, "graph_family", "graph_seed"),
        },
        fixed=("participation", "batch_size", "estimator"),
        closed_form_only=True,
        role="algorithm",
    ),
    _variant(
        "hgp-practical",
        "HGP sec. 5.3 practical form: one sample for u and v, omega not reset",
        settings={**_INNER, "batch_size": 4, "shared_sample": True, "keep_weights": True},
        fixed=("edge_probability",),
    ),
    _variant(
        "hgp-static",
        "HGP sec. 4 static-network variant: Theta_hat = W^S (Metropolis W)",
        settings={**_INNER, "graph_family": "static_undirected"},
        fixed=_PUSHSUM,
    ),
    _variant(
        "hgp-stochastic",
        "HGP Alg. 2 with minibatch Jacobians (Thm 1, Cor. 2), independent samples",
        settings={**_INNER, "batch_size": 4},
        fixed=("edge_probability",),
    ),
]

"""Registry entries for the fedmsa estimators and algorithms."""

from __future__ import annotations

from typing import Any

from testbed.algorithms.fedmsa import FedMSA
from testbed.algorithms.fedmsa_maps import BilevelMaps, CompositionalMaps
from testbed.info import EstimatorInfo

_REFERENCE = "Tarzanagh, Li, Sharma, Oymak 2023 (arXiv 2306.01648), Algorithm 1, eqs. (5)-(6)"


def _fedmsa(maps: Any, outer_step_size: float, inner_step_size: Any, momentum: float,
            local_steps: int, participation: float | int | None,
            batch_size: int | None) -> FedMSA:
    return FedMSA(maps=maps, outer_step_size=outer_step_size, inner_step_size=inner_step_size,
                  momentum=momentum, local_steps=local_steps, participation=participation,
                  batch_size=batch_size)


_BLO_CLAIMS = (
    "fedmsa.blo.fixed_point_is_hypergradient",
    "fedmsa.lemma_b1.contraction",
    "fedmsa.lemma_b1.contraction_corrected",
    "fedmsa.local.deterministic_telescoping",
    "fedmsa.local.first_step_is_global_direction",
    "fedmsa.rate.K_at_tau_zero",
    "fedmsa.rate.R_deterministic",
    "fedmsa.tau_zero.equals_centralised_msa",
    "fedmsa.rate.M_stochastic",
    "fedmsa.rate.tau_stochastic",
    "fedmsa.rho.as_stated",
    "fedmsa.rho.proof_choice",
    "fedmsa.scaling.participation",
)

_MCO_CLAIMS = (
    "fedmsa.local.deterministic_telescoping",
    "fedmsa.local.first_step_is_global_direction",
    "fedmsa.mco.exact_semantics_fixed_point_stationary",
    "fedmsa.mco.paper_fixed_point_stationary",
    "fedmsa.rate.K_at_tau_zero",
    "fedmsa.rate.R_deterministic",
    "fedmsa.tau_zero.equals_centralised_msa",
)

ENTRIES: list[EstimatorInfo] = [
    EstimatorInfo(
        name="fedmsa",
        cls=FedMSA,
        paper="FedMSA",
        reference=_REFERENCE + "; bilevel maps eq. (10) (corrected 10a)",
        supports=frozenset({"bilevel", "minimax"}),
        make=lambda outer_step_size, inner_step_size, momentum, local_steps, participation,
        batch_size: _fedmsa(BilevelMaps(), outer_step_size, inner_step_size, momentum,
                            local_steps, participation, batch_size),
        defaults={"outer_step_size": 0.05, "inner_step_size": 0.1, "momentum": 0.1,
                  "local_steps": 4, "participation": 1, "batch_size": None},
        claims=(*_BLO_CLAIMS, "comparison.fedmsa_tenfold_fewer_rounds"),
        role="algorithm",
    ),
    EstimatorInfo(
        name="fedmsa-generalised",
        cls=FedMSA,
        paper="FedMSA",
        reference=_REFERENCE + "; generalised variant of the Conclusion as run in the authors' "
                  "code (ucr-optml/FedMSA, notes 2.6): 10% of clients do local steps and are "
                  "averaged, constant rho = 0.5, full-batch maps, alpha = 0.05, beta = 0.1",
        supports=frozenset({"bilevel", "minimax"}),
        make=lambda outer_step_size, inner_step_size, momentum, local_steps, participation,
        batch_size: _fedmsa(BilevelMaps(), outer_step_size, inner_step_size, momentum,
                            local_steps, participation, batch_size),
        defaults={"outer_step_size": 0.05, "inner_step_size": 0.1, "momentum": 0.5,
                  "local_steps": 4, "participation": 0.1, "batch_size": None},
        no_claims_reason="The paper proves nothing for the averaged multi-client local phase "
                         "(its Conclusion only conjectures it); its algebra is tested in "
                         "tests/test_fedmsa.py.",
        role="algorithm",
    ),
    EstimatorInfo(
        name="fedmsa-mco",
        cls=FedMSA,
        paper="FedMSA",
        reference=_REFERENCE + "; multi-level compositional maps eq. (11) (FedMCO, App. D)",
        supports=frozenset({"compositional"}),
        make=lambda outer_step_size, inner_step_size, momentum, local_steps, participation,
        batch_size, semantics: _fedmsa(CompositionalMaps(semantics), outer_step_size,
                                       inner_step_size, momentum, local_steps, participation,
                                       batch_size),
        defaults={"outer_step_size": 0.05, "inner_step_size": 0.1, "momentum": 0.1,
                  "local_steps": 4, "participation": 1, "batch_size": None,
                  "semantics": "paper"},
        claims=_MCO_CLAIMS,
        role="algorithm",
    ),
]

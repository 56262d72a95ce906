"""The cases and positive controls that FedMSA's claims (:file:`claims.toml`) name, and the
claims read from it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from problems import LinearCompositional, QuadraticBilevel, strategies
from theory_checks.claim import Claim, known_case
from theory_checks.claim_file import load_claims
from theory_checks.fedmsa.cases import MOMENTA, cases_of, families, scaled_bilevel

# Cases of claim fedmsa.local.first_step_is_global_direction
local_first_step_is_global_direction_cases = cases_of(
    st.one_of(families(stochastic=True), families()), momentum=MOMENTA)

# Cases of claim fedmsa.local.deterministic_telescoping
local_deterministic_telescoping_cases = cases_of(families(), momentum=MOMENTA)

# Cases of claim fedmsa.tau_zero.equals_centralised_msa
tau_zero_equals_centralised_msa_cases = cases_of(families(tau_zero=True), momentum=MOMENTA,
                                                 local_steps=st.integers(1, 4))

# Cases of claim fedmsa.blo.fixed_point_is_hypergradient
blo_fixed_point_is_hypergradient_cases = cases_of(st.one_of(
    strategies.quadratic_bilevel(max_dim=6), strategies.quadratic_minimax(max_dim=6)))

# Cases of claim fedmsa.mco.paper_fixed_point_stationary
mco_paper_fixed_point_stationary_cases = cases_of(
    strategies.linear_compositional(max_clients=6, max_dim=4, max_levels=3),
    semantics=st.just("paper"))

# Positive control of claim fedmsa.mco.paper_fixed_point_stationary
mco_paper_fixed_point_stationary_control = known_case(
    LinearCompositional.random(4, [2, 3, 3], 3, jacobian_heterogeneity=0.0,
                               value_heterogeneity=2.0).spec(),
    {"seed": 0, "semantics": "paper"})

# Cases of claim fedmsa.mco.exact_semantics_fixed_point_stationary
mco_exact_semantics_fixed_point_stationary_cases = cases_of(
    strategies.linear_compositional(max_clients=6, max_dim=4, max_levels=3),
    semantics=st.just("exact"))

# Cases of claims fedmsa.lemma_b1.contraction and .contraction_corrected
lemma_b1_contraction_cases = cases_of(scaled_bilevel())

# Positive control of claim fedmsa.lemma_b1.contraction
lemma_b1_contraction_control = known_case(
    QuadraticBilevel.random(1, 1, 1, 1.0, seed=0, gradient_heterogeneity=1.0, mu=0.5).spec(),
    {"seed": 0})



CLAIMS: tuple[Claim, ...] = load_claims(Path(__file__).with_name("claims.toml"))

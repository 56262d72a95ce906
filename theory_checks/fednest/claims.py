"""The claims of :mod:`theory_checks.fednest` as data: the positive controls of the refuted
claims, the Table 2 round-count claim factory, and ``CLAIMS`` (read from ``claims.toml``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from problems import LinearCompositional, QuadraticBilevel, QuadraticMinimax, strategies
from theory_checks.claim import Case, Claim, known_case
from theory_checks.claim_file import load_claims
from theory_checks.fednest import perturbations as perturb
from theory_checks.fednest.common import (
    PAPER,
    REF,
    bilevel_problems,
    case_builder,
    heterogeneous_bilevel,
)
from theory_checks.fednest.compositional import (
    compositional_cases,
)
from theory_checks.fednest.rounds import (
    check_rounds,
    round_cases,
    table2_formula,
    table2_rounds,
)


def _closed_form(max_clients: int = 6, max_dim: int = 4,
                 kappa: tuple[float, float] = (1.0, 30.0)) -> st.SearchStrategy[Any]:
    """Every closed-form family: bilevel, minimax, one-level compositional."""
    return st.one_of(
        bilevel_problems(max_clients, max_dim, kappa),
        strategies.quadratic_minimax(max_clients=max_clients, max_dim=max_dim, kappa=kappa),
        strategies.linear_compositional(max_clients=max_clients, min_levels=1, max_levels=1,
                                        max_dim=max_dim),
    )

# ------------------------------------------------------------------------------- positive controls
# A case inside each refuted claim's conditions on which its check says "holds".

# One client (per-client and averaged bias coincide) with affine f: the bias J H^{-1} A^N c is
# at most l_{g,1} l_{f,0} (1 - mu/l)^N / mu, so (15) with its proof's constant holds (as printed
# b = 0 and it fails: the control holds under one reading, which shows the check can say holds).
ONE_CLIENT_AFFINE_OUTER = known_case(
    QuadraticBilevel.random(1, 1, 2, 2.0, seed=0, outer_curvature=0.0).spec(),
    {"point_seed": 0, "neumann_terms": 4, "point_scale": 1.0})

# No cross derivative (J = 0) and affine f: the bias J H^{-1} A^N grad_y f is 0, at most the
# printed b = kappa_g l_{f,1} rho^N = 0. Affine f keeps the control inside A1 read globally, and
# with J != 0 every affine-f case has a bias above the printed b = 0 (the refutation).
NO_CROSS_AFFINE_OUTER = known_case(
    QuadraticBilevel.random(1, 1, 2, 2.0, seed=0, outer_curvature=0.0, cross_scale=0.0).spec(),
    {"point_seed": 0, "neumann_terms": 1, "point_scale": 1.0})

# One client: its grad_y f_1(x, y*) is the mean, which vanishes at y* (Danskin), so the
# per-client statement holds.
MINIMAX_ONE_CLIENT = known_case(
    QuadraticMinimax.random(1, 2, 2, 4.0, seed=0).spec(), {"point_seed": 0})

# N = 1: N' = 0 is the only draw, and h_i = l_{g,1} grad r_i^T p_0 is FedOut's direction when
# l_{g,1} = 1 (the y-block reading; under A1's joint constant the form is off by the factor
# l_{g,1}, so the control holds under that one reading).
COMPOSITIONAL_ONE_TERM = known_case(
    LinearCompositional.random(3, [2, 3], 0, heterogeneity=1.0).spec(),
    {"point_seed": 0, "neumann_terms": 1})


# =============================================================================== the claims


def _rounds_claim(name: str, inner: str, outer: str) -> Claim:
    kind = "minimax" if outer == "minimax" else "bilevel"
    formula = table2_rounds(inner, outer).text
    return Claim(
        id=f"fednest.rounds.{name.replace('-', '_')}",
        paper=PAPER,
        reference=f"{REF}, Table 2 (appendix; notes 2.7-2.8)",
        kind="communication_count",
        statement=f"{name}: ledger rounds per outer iteration = {formula} "
                  "(deterministic FedIHGP count), for any participation and tau_i",
        estimators=(name,),
        strategy=round_cases(kind),
        check=check_rounds,
        bound=table2_formula(inner, outer),
        perturbation=perturb.extra_round(name),
    )


# Cases of claim fednest.lemma22.inverse_hessian_identity
lemma22_inverse_hessian_identity_cases = case_builder(_closed_form(max_clients=5, max_dim=4),
                                                      neumann_terms=st.integers(1, 20))

# Cases of claim fednest.lemma22.inverse_hessian_bound
lemma22_inverse_hessian_bound_cases = case_builder(_closed_form(max_clients=4, max_dim=3))

def _affine_outer_bilevel(min_clients: int = 1, max_clients: int = 5, max_dim: int = 3,
                          gradient_heterogeneity: tuple[float, float] = (0.0, 2.0)
                          ) -> st.SearchStrategy[QuadraticBilevel]:
    """Bilevel problems whose every ``f_i`` is affine (``outer_curvature = 0``): Lipschitz on the
    whole space, so A1 holds under its strictest reading with ``l_{f,1} = 0`` and ``l_{f,0} =
    max_i ||grad f_i||`` (:data:`theory_checks.fednest.constants.A1_F_LIPSCHITZ_GLOBAL`)."""
    @st.composite
    def build(draw: st.DrawFn) -> QuadraticBilevel:
        dim_y = draw(st.integers(1, max_dim))
        return QuadraticBilevel.random(
            draw(st.integers(min_clients, max_clients)), draw(st.integers(1, max_dim)), dim_y,
            draw(st.floats(1.0, 10.0)) if dim_y > 1 else 1.0, seed=draw(strategies.SEEDS),
            hessian_heterogeneity=draw(st.floats(0.0, 0.5)),
            gradient_heterogeneity=draw(st.floats(*gradient_heterogeneity)),
            outer_curvature=0.0)

    return build()


# Cases of claim fednest.lemma22.per_client_bias: affine f_i (inside A1 read globally), several
# clients with spread gradients, and N up to 60, where (15)'s b (as printed or with its proof's
# l_{f,0}) has decayed while the per-client gap, which does not depend on N, has not.
lemma22_per_client_bias_cases = case_builder(
    _affine_outer_bilevel(min_clients=2, gradient_heterogeneity=(0.5, 2.0)),
    neumann_terms=st.integers(1, 60))

# Cases of claim fednest.lemma22.averaged_bias
lemma22_averaged_bias_cases = case_builder(bilevel_problems(max_clients=5, max_dim=3),
                                           neumann_terms=st.integers(1, 40),
                                           point_scale=st.floats(1.0, 20.0))

# Cases of claim fednest.lemma22.paper_constant: affine f_i (inside A1 read globally), where
# l_{f,1} = 0 while the bias J H^{-1} A^N grad_y f is not zero
lemma22_paper_constant_cases = case_builder(_affine_outer_bilevel(max_clients=4),
                                            neumann_terms=st.integers(1, 30),
                                            point_scale=st.floats(1.0, 50.0))

# Cases of claim fednest.ihgp.variance_exact
ihgp_variance_exact_cases = case_builder(_closed_form(max_clients=5, max_dim=4),
                                         neumann_terms=st.integers(1, 40))

# Cases of claim fednest.ihgp.variance_linear_in_n
ihgp_variance_linear_in_n_cases = case_builder(
    _closed_form(max_clients=3, max_dim=3, kappa=(1.0, 2.0)))

# Cases of claim fednest.ihgp.client_sampling_variance
ihgp_client_sampling_variance_cases = case_builder(
    heterogeneous_bilevel(min_hessian=0.0, max_dim=3, kappa_max=10.0, clients=(4, 7)))


def fedavg_biased_fixed_point_cases() -> st.SearchStrategy[Case]:
    """Cases of claim fednest.fedavg.biased_fixed_point."""
    return st.builds(lambda p, seed, tau: Case(p, {"point_seed": seed, "local_steps": tau}),
                     heterogeneous_bilevel(), strategies.SEEDS, st.integers(2, 5))


def fedinn_tau_exponent_cases() -> st.SearchStrategy[Case]:
    """Cases of claim fednest.fedinn.tau_exponent."""
    return st.builds(
        lambda p, seed, scaled, beta: Case(p, {"point_seed": seed, "scale_by_steps": scaled,
                                               "beta_scale": beta}),
        heterogeneous_bilevel(min_hessian=0.0, max_hessian=0.5, max_dim=3, kappa_max=10.0),
        strategies.SEEDS, st.booleans(), st.floats(0.05, 0.25))


# Cases of claim fednest.compositional.one_call_exact
compositional_one_call_exact_cases = compositional_cases(
    inner_step_size=st.one_of(st.just(1.0), st.floats(0.05, 1.0)),
    local_steps=st.integers(1, 4))

# Cases of claim fednest.compositional.paper_indirect_form (checked under both readings of
# l_{g,1}, theory_checks.fednest.constants.L_G1_READINGS)
compositional_neumann_cases = compositional_cases(neumann_terms=st.integers(1, 4))

# Cases of claim fednest.compositional.single_term_unbiased: l_{g,1} = 1, the y block (Cor.
# 3.3's kappa_g = 1), where I - H/l = 0 makes every p_{N'} with N' >= 1 vanish
compositional_single_term_cases = compositional_cases(neumann_terms=st.integers(1, 4),
                                                      l_g1=st.just("y_block"))

# Cases of claim fednest.thm31.stationarity_floor
def _small_cross_term(problems: st.SearchStrategy[QuadraticBilevel]
                      ) -> st.SearchStrategy[QuadraticBilevel]:
    """The drawn problems, some with the cross derivative scaled to 0.1: A1's joint l_{g,1} is
    then close to lambda_max(H), so at small kappa the floor sits near its bound, where a wrong
    Neumann step shows (at the full cross term l_{g,1} > lambda_max(H) leaves the bound slack)."""
    def rescale(problem: QuadraticBilevel, cross: float) -> QuadraticBilevel:
        return problem if cross == 1.0 else QuadraticBilevel.random(
            **{**{k: v for k, v in problem.spec().items() if k != "family"},
               "cross_scale": cross})

    return st.builds(rescale, problems, st.sampled_from([1.0, 0.1]))


thm31_stationarity_floor_cases = case_builder(
    _small_cross_term(bilevel_problems(max_clients=3, max_dim=2, kappa=(1.0, 5.0))),
    neumann_terms=st.integers(1, 10), inner_steps=st.integers(2, 4))


CLAIMS: tuple[Claim, ...] = load_claims(Path(__file__).with_name("claims.toml")) + (
    _rounds_claim("fednest", "svrg", "svrg"),
    _rounds_claim("lfednest", "sgd", "local"),
    _rounds_claim("fednest-sgd", "sgd", "svrg"),
    _rounds_claim("lfednest-svrg", "svrg", "local"),
    _rounds_claim("fednest-minimax", "svrg", "minimax"),
)

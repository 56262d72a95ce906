"""The claims of :mod:`theory_checks.fednest` as data: the positive controls of the refuted
claims, the Table 2 round-count claim factory, and ``CLAIMS`` (read from ``claims.toml``).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from problems import LinearCompositional, QuadraticBilevel, QuadraticMinimax, strategies
from theory_checks.claim import Case, Claim, known_case
from theory_checks.claim_file import load_claims
from theory_checks.fednest import perturbations as perturb
from theory_checks.fednest.common import (
    PAPER,
    REF,
    _bilevel,
    _case_builder,
    _closed_form,
    _heterogeneous_bilevel,
)
from theory_checks.fednest.compositional import (
    _compositional_cases,
)
from theory_checks.fednest.rounds import (
    _round_cases,
    _table2,
    _table2_formula,
    check_rounds,
)

# ------------------------------------------------------------------------------- positive controls
# A case inside each refuted claim's conditions on which its check says "holds".

# One client near its solution (the saved paper_constant counterexample's problem at another
# point): the per-client and the averaged bias coincide, and ||grad_y f|| <= l_{f,1} there, so
# (15) holds with the paper's b (measured 0.042 against 0.90).
_ONE_CLIENT_NEAR_SOLUTION = known_case(
    QuadraticBilevel.random(1, 1, 2, 1.0, seed=0).spec(),
    {"point_seed": 0, "neumann_terms": 1, "point_scale": 1.0})

# One client: its grad_y f_1(x, y*) is the mean, which vanishes at y* (Danskin), so the
# per-client statement holds.
_MINIMAX_ONE_CLIENT = known_case(
    QuadraticMinimax.random(1, 2, 2, 4.0, seed=0).spec(), {"point_seed": 0})

# N = 1: N' = 0 is the only draw, and h_i = l_{g,1} grad r_i^T p_0 is FedOut's direction.
_COMPOSITIONAL_ONE_TERM = known_case(
    LinearCompositional.random(3, [2, 3], 0, heterogeneity=1.0).spec(),
    {"point_seed": 0, "neumann_terms": 1})

# No case inside paper_count_random's conditions can hold: Alg. 3's N' <= N - 1 gives
# 2T + N' + 3 <= 2T + N + 2 rounds at every iteration. The control runs the same ledger count on
# the official code's deterministic truncation (all N Hessian rounds), the schedule the paper's
# 2T + N + 3 describes, so the check is shown able to say "holds".
_ROUNDS_DETERMINISTIC = known_case(
    QuadraticBilevel.random(3, 2, 2, 4.0, seed=0, hessian_heterogeneity=0.3,
                            gradient_heterogeneity=1.0).spec(),
    {"inner_steps": 2, "neumann_terms": 3, "local_steps": (1, 2, 1), "participation": 2,
     "point_seed": 0, "truncation": "deterministic"})


# =============================================================================== the claims


def _rounds_claim(name: str, inner: str, outer: str) -> Claim:
    kind = "minimax" if outer == "minimax" else "bilevel"
    formula = _table2(inner, outer).text
    return Claim(
        id=f"fednest.rounds.{name.replace('-', '_')}",
        paper=PAPER,
        reference=f"{REF}, Table 2 (appendix; notes 2.7-2.8)",
        kind="communication_count",
        statement=f"{name}: ledger rounds per outer iteration = {formula} "
                  "(deterministic FedIHGP count), for any participation and tau_i",
        estimators=(name,),
        strategy=_round_cases(kind),
        check=check_rounds,
        bound=_table2_formula(inner, outer),
        perturbation=perturb.extra_round(name),
    )


# Cases of claim fednest.lemma22.inverse_hessian_identity
lemma22_inverse_hessian_identity_cases = _case_builder(_closed_form(max_clients=5, max_dim=4),
                                                       neumann_terms=st.integers(1, 20))

# Cases of claim fednest.lemma22.inverse_hessian_bound
lemma22_inverse_hessian_bound_cases = _case_builder(_closed_form(max_clients=4, max_dim=3))

# Cases of claim fednest.lemma22.per_client_bias
lemma22_per_client_bias_cases = _case_builder(_bilevel(max_clients=5, max_dim=3),
                                              neumann_terms=st.integers(1, 40))

# Cases of claim fednest.lemma22.averaged_bias
lemma22_averaged_bias_cases = _case_builder(_bilevel(max_clients=5, max_dim=3),
                                            neumann_terms=st.integers(1, 40),
                                            point_scale=st.floats(1.0, 20.0))

# Cases of claim fednest.lemma22.paper_constant
lemma22_paper_constant_cases = _case_builder(_bilevel(max_clients=4, max_dim=3),
                                             neumann_terms=st.integers(1, 30),
                                             point_scale=st.floats(1.0, 50.0))

# Cases of claim fednest.ihgp.variance_exact
ihgp_variance_exact_cases = _case_builder(_closed_form(max_clients=5, max_dim=4),
                                          neumann_terms=st.integers(1, 40))

# Cases of claim fednest.ihgp.variance_linear_in_n
ihgp_variance_linear_in_n_cases = _case_builder(
    _closed_form(max_clients=3, max_dim=3, kappa=(1.0, 2.0)))

# Cases of claim fednest.ihgp.client_sampling_variance
ihgp_client_sampling_variance_cases = _case_builder(
    _heterogeneous_bilevel(min_hessian=0.0, max_dim=3, kappa_max=10.0, clients=(4, 7)))


def fedavg_biased_fixed_point_cases() -> st.SearchStrategy[Case]:
    """Cases of claim fednest.fedavg.biased_fixed_point."""
    return st.builds(lambda p, seed, tau: Case(p, {"point_seed": seed, "local_steps": tau}),
                     _heterogeneous_bilevel(), strategies.SEEDS, st.integers(2, 5))


def fedinn_tau_exponent_cases() -> st.SearchStrategy[Case]:
    """Cases of claim fednest.fedinn.tau_exponent."""
    return st.builds(
        lambda p, seed, scaled, beta: Case(p, {"point_seed": seed, "scale_by_steps": scaled,
                                               "beta_scale": beta}),
        _heterogeneous_bilevel(min_hessian=0.0, max_hessian=0.5, max_dim=3, kappa_max=10.0),
        strategies.SEEDS, st.booleans(), st.floats(0.05, 0.25))


# Cases of claim fednest.compositional.one_call_exact
compositional_one_call_exact_cases = _compositional_cases(
    inner_step_size=st.one_of(st.just(1.0), st.floats(0.05, 1.0)),
    local_steps=st.integers(1, 4))

# Cases of claims fednest.compositional.paper_indirect_form and .single_term_unbiased
compositional_neumann_cases = _compositional_cases(neumann_terms=st.integers(1, 4))

# Cases of claim fednest.thm31.stationarity_floor
thm31_stationarity_floor_cases = _case_builder(
    _bilevel(max_clients=3, max_dim=2, kappa=(1.0, 5.0)),
    neumann_terms=st.integers(1, 10), inner_steps=st.integers(2, 4))


CLAIMS: tuple[Claim, ...] = load_claims(Path(__file__).with_name("claims.toml")) + (
    _rounds_claim("fednest", "svrg", "svrg"),
    _rounds_claim("lfednest", "sgd", "local"),
    _rounds_claim("fednest-sgd", "sgd", "svrg"),
    _rounds_claim("lfednest-svrg", "svrg", "local"),
    _rounds_claim("fednest-minimax", "svrg", "minimax"),
)

"""The cases of FedNest's Lemma 2.2 (:mod:`theory_checks.fednest.lemma22`): the drawn case
strategies of each claim and the saved cases (positive controls and the (14b) counterexample).
"""

from __future__ import annotations

from hypothesis import strategies as st

from problems import QuadraticBilevel
from problems import strategies
from theory_checks.claim import Case
from theory_checks.claim import bilevel_spec
from theory_checks.claim import known_case
from theory_checks.fednest.common import bilevel_problems
from theory_checks.fednest.common import case_builder
from theory_checks.fednest.common import closed_form_problems

# =========================================================================================== cases


def abs_error_cases() -> st.SearchStrategy[Case]:
    """Lemma 2.2's absolute-error cases: noisy quadratic bilevel problems (1-3 clients, Hessian
    heterogeneity in [0, 0.5] and Hessian noise at most 0.95 less it), a point, the Neumann
    count N in [2, 8] and full or partial participation."""

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        dim_y = draw(st.integers(1, 2))
        hh = draw(st.floats(0.0, 0.5))
        problem = QuadraticBilevel.random(
            draw(st.integers(1, 3)),
            draw(st.integers(1, 2)),
            dim_y,
            draw(st.floats(1.0, 4.0)) if dim_y > 1 else 1.0,
            seed=draw(strategies.SEEDS),
            hessian_heterogeneity=hh,
            gradient_heterogeneity=draw(st.floats(0.0, 2.0)),
            n_samples=draw(st.integers(2, 6)),
            gradient_noise=0.5,
            hessian_noise=draw(st.floats(0.0, 0.95 - hh)),
        )
        participation = draw(st.one_of(st.none(), st.integers(1, problem.n_clients)))
        return Case(
            problem,
            {
                "point_seed": draw(strategies.SEEDS),
                "neumann_terms": draw(st.integers(2, 8)),
                "participation": participation,
            },
        )

    return build()


# Cases of claim fednest.lemma22.inverse_hessian_identity
lemma22_inverse_hessian_identity_cases = case_builder(
    closed_form_problems(max_clients=5, max_dim=4), neumann_terms=st.integers(1, 20)
)

# Cases of claim fednest.lemma22.inverse_hessian_bound
lemma22_inverse_hessian_bound_cases = case_builder(closed_form_problems(max_clients=4, max_dim=3))


def _affine_outer_bilevel(
    min_clients: int = 1,
    max_clients: int = 5,
    max_dim: int = 3,
    gradient_heterogeneity: tuple[float, float] = (0.0, 2.0),
) -> st.SearchStrategy[QuadraticBilevel]:
    """Bilevel problems whose every ``f_i`` is affine (``outer_curvature = 0``): Lipschitz on the
    whole space, so A1 holds under its strictest reading with ``l_{f,1} = 0`` and ``l_{f,0} =
    max_i ||grad f_i||`` (:data:`theory_checks.fednest.constants.A1_F_LIPSCHITZ_GLOBAL`)."""

    @st.composite
    def build(draw: st.DrawFn) -> QuadraticBilevel:
        dim_y = draw(st.integers(1, max_dim))
        return QuadraticBilevel.random(
            draw(st.integers(min_clients, max_clients)),
            draw(st.integers(1, max_dim)),
            dim_y,
            draw(st.floats(1.0, 10.0)) if dim_y > 1 else 1.0,
            seed=draw(strategies.SEEDS),
            hessian_heterogeneity=draw(st.floats(0.0, 0.5)),
            gradient_heterogeneity=draw(st.floats(*gradient_heterogeneity)),
            outer_curvature=0.0,
        )

    return build()


# Cases of claim fednest.lemma22.per_client_bias: affine f_i (inside A1 read globally), several
# clients with spread gradients, and N up to 60, where (15)'s b (as printed or with its proof's
# l_{f,0}) has decayed while the per-client gap, which does not depend on N, has not.
lemma22_per_client_bias_cases = case_builder(
    _affine_outer_bilevel(min_clients=2, gradient_heterogeneity=(0.5, 2.0)),
    neumann_terms=st.integers(1, 60),
)

# Cases of claim fednest.lemma22.averaged_bias
lemma22_averaged_bias_cases = case_builder(
    bilevel_problems(max_clients=5, max_dim=3),
    neumann_terms=st.integers(1, 40),
    point_scale=st.floats(1.0, 20.0),
)

# Cases of claim fednest.lemma22.paper_constant: affine f_i (inside A1 read globally), where
# l_{f,1} = 0 while the bias J H^{-1} A^N grad_y f is not zero
lemma22_paper_constant_cases = case_builder(
    _affine_outer_bilevel(max_clients=4),
    neumann_terms=st.integers(1, 30),
    point_scale=st.floats(1.0, 50.0),
)


# =============================================================================== positive controls
# A case inside each refuted claim's conditions on which its check says "holds", and the
# saved (14b) counterexample.

# One client (per-client and averaged bias coincide) with affine f: the bias J H^{-1} A^N c is
# at most l_{g,1} l_{f,0} (1 - mu/l)^N / mu, so (15) with its proof's constant holds (as printed
# b = 0 and it fails: the control holds under one reading, which shows the check can say holds).
ONE_CLIENT_AFFINE_OUTER = known_case(
    QuadraticBilevel.random(1, 1, 2, 2.0, seed=0, outer_curvature=0.0).spec(),
    {"point_seed": 0, "neumann_terms": 4, "point_scale": 1.0},
)

# No cross derivative (J = 0) and affine f: the bias J H^{-1} A^N grad_y f is 0, at most the
# printed b = kappa_g l_{f,1} rho^N = 0. Affine f keeps the control inside A1 read globally, and
# with J != 0 every affine-f case has a bias above the printed b = 0 (the refutation).
NO_CROSS_AFFINE_OUTER = known_case(
    QuadraticBilevel.random(1, 1, 2, 2.0, seed=0, outer_curvature=0.0, cross_scale=0.0).spec(),
    {"point_seed": 0, "neumann_terms": 1, "point_scale": 1.0},
)

# The (14b) counterexample: one client, kappa = 1 (mu_g = l_{g,1} = 1), two samples whose
# Hessians are 0.1 and 1.9: every factor of H_hat has norm 0.9 > 1 - mu_g/l = 0.
# The cross derivative is scaled to ||B|| = 0.096 so that A1's joint l_{g,1} = 1.0092 is close
# to lambda_max(H) = 1: FedIHGP's factors I - H_s/l_{g,1} then keep the sample Hessians'
# spread (0.1..1.9). At cross_scale 1 (||B|| = 0.64, l_{g,1} = 1.3125) the exact error is 2.36
# against the bound 2, an excess the check's resolution (a quarter of the bound) cannot decide;
# the case saved before the constant was A1's used l = lambda_max(H) = 1.0 < l_{g,1}, outside A1.
ABS_ERROR_COUNTEREXAMPLE = known_case(
    bilevel_spec(n_samples=2, gradient_noise=0.5, hessian_noise=0.9, cross_scale=0.15),
    {"point_seed": 0, "neumann_terms": 8, "participation": None},
)


# A case where (14b)'s bound is nearly tight under both readings, so that a wrong Neumann step
# shows against it: one client, kappa = 1, no Hessian noise (the sample Hessians equal the
# client's, mu_g = mu_s = 1), ||grad^2_xy g|| = 0.096 (l_{g,1} = 1.0092), N = 2. FedIHGP: H_hat is
# (2/l) or (2/l)(1 - 1/l) ~ 0, so E||H^{-1} - H_hat|| = 0.99 against 2 (holds, at half the bound);
# with the step 2/l (the perturbation) the factor is -0.98 and it is 3.9 (caught).
ABS_ERROR_TIGHT_CASE = known_case(
    QuadraticBilevel.random(
        1, 1, 1, 1.0, seed=0, n_samples=2, gradient_noise=0.5, hessian_noise=0.0, cross_scale=0.15
    ).spec(),
    {"point_seed": 0, "neumann_terms": 2, "participation": None},
)

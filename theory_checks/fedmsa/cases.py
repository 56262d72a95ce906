"""FedMSA case strategies shared by the claims of :mod:`theory_checks.fedmsa`: the closed-form
families (bilevel, minimax, compositional), their rate-sized variants and the scaled bilevel
instances of Lemma B.1."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

from problems import QuadraticBilevel, strategies
from theory_checks.claim import Case
from theory_checks.profiles import PerProfile

MOMENTA = st.sampled_from([0.0, 0.3, 1.0])


def families(*, stochastic: bool = False, tau_zero: bool = False, max_dim: int = 4,
             max_clients: int = 6, kappa: tuple[float, float] = (1.0, 30.0),
             max_levels: int = 3) -> st.SearchStrategy[Any]:
    """The closed-form families (bilevel, minimax, compositional) at these sizes; ``stochastic``
    adds sample noise, ``tau_zero`` makes the clients' Hessians (Jacobians) identical."""
    hh = 0.0 if tau_zero else 0.5
    noise: dict[str, Any] = (
        {"n_samples": 5, "gradient_noise": 0.5, "hessian_noise": 0.1} if stochastic else {})
    mco_noise: dict[str, Any] = (
        {"n_samples": 5, "matrix_noise": 0.1, "value_noise": 0.5} if stochastic else {})
    return st.one_of(
        strategies.quadratic_bilevel(max_clients=max_clients, max_dim=max_dim, kappa=kappa,
                                     max_hessian_heterogeneity=hh, **noise),
        strategies.quadratic_minimax(max_clients=max_clients, max_dim=max_dim, kappa=kappa,
                                     max_hessian_heterogeneity=hh, **noise),
        strategies.linear_compositional(max_clients=max_clients, max_dim=max_dim,
                                        max_levels=max_levels, kappa=kappa,
                                        max_jacobian_heterogeneity=0.0 if tau_zero else 0.5,
                                        **mco_noise),
    )


def cases_of(problems: st.SearchStrategy[Any], fixed: Mapping[str, Any] | None = None,
             **params: st.SearchStrategy[Any]) -> Callable[[], st.SearchStrategy[Case]]:
    """A claim's strategy: cases of ``problems``, each with a drawn seed, the drawn ``params``
    and the ``fixed`` parameters (the same in every case)."""
    constant = dict(fixed or {})

    def make() -> st.SearchStrategy[Case]:
        return st.builds(
            lambda problem, seed, extra: Case(problem, {"seed": seed, **extra, **constant}),
            problems, strategies.SEEDS, st.fixed_dictionaries(params))

    return make


@st.composite
def scaled_bilevel(draw: st.DrawFn) -> QuadraticBilevel:
    """Quadratic bilevel problems with ``mu`` in [0.5, 8]: Lemma B.1's step rule is not
    scale-invariant, so the inner curvature's absolute size matters (notes 3.4)."""
    dx = draw(st.integers(1, 3))
    dy = draw(st.integers(1, 3))
    M = draw(st.integers(1, 4))
    kappa = 1.0 if dy == 1 else draw(st.floats(1.0, 10.0))
    mu = draw(st.floats(0.5, 8.0))
    hh = draw(st.floats(0.0, 0.5))
    seed = draw(strategies.SEEDS)
    return QuadraticBilevel.random(M, dx, dy, kappa, seed=seed, hessian_heterogeneity=hh,
                                   gradient_heterogeneity=1.0, mu=mu)


def _rate_families(fast: bool, tau_zero: bool = False) -> st.SearchStrategy[Any]:
    """Why smaller instances on the fast profile (``fast``): the number of rounds needed grows
    with kappa and the dimension; kappa <= 2 and dimensions <= 2 keep a case near half a
    second."""
    if fast:
        return families(tau_zero=tau_zero, max_dim=2, kappa=(1.0, 2.0), max_levels=2,
                        max_clients=3)
    return families(tau_zero=tau_zero, max_dim=3, kappa=(1.0, 10.0), max_levels=3)


def rate_cases(tau_zero: bool = False, with_K: bool = True,
               round_budget: Mapping[str, int] | None = None) -> PerProfile:
    """The rate claims' cases, per profile (smaller instances and ``K <= 2`` on fast): a seed,
    a momentum, the local steps ``K`` (``with_K``) and, given ``round_budget`` (per profile
    name), the case's budget of map evaluations, ``params["round_budget"]``, which the check
    refuses to exceed."""
    def on(profile: str) -> Callable[[], st.SearchStrategy[Case]]:
        fast = profile == "fast"
        fixed = {} if round_budget is None else {"round_budget": int(round_budget[profile])}

        def make() -> st.SearchStrategy[Case]:
            params: dict[str, st.SearchStrategy[Any]] = {"momentum": MOMENTA}
            if with_K:
                params["local_steps"] = st.integers(1, 2 if fast else 4)
            return cases_of(_rate_families(fast, tau_zero), fixed, **params)()

        return make

    return PerProfile(on("fast"), on("thorough"))

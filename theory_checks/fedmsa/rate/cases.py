"""The cases of FedMSA Theorem 3.1's rates (:mod:`theory_checks.fedmsa.rate`), per profile: the
rate families of the R and K claims, the replicated client of the M claim with its grid of
client counts, and the heterogeneity family of the tau claim.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from problems import QuadraticBilevel
from problems import strategies
from theory_checks.claim import Case
from theory_checks.claim import PerProfile
from theory_checks.fedmsa.common import MOMENTA
from theory_checks.fedmsa.common import cases_of
from theory_checks.fedmsa.common import families

# --------------------------------------------------------------------------- cases


def _rate_families(fast: bool, tau_zero: bool = False) -> st.SearchStrategy[Any]:
    """Why smaller instances on the fast profile (``fast``): the number of rounds needed grows
    with kappa and the dimension; kappa <= 2 and dimensions <= 2 keep a case near half a
    second."""
    if fast:
        return families(tau_zero=tau_zero, max_dim=2, kappa=(1.0, 2.0), max_levels=2, max_clients=3)
    return families(tau_zero=tau_zero, max_dim=3, kappa=(1.0, 10.0), max_levels=3)


def rate_cases(
    tau_zero: bool = False, with_K: bool = True, round_budget: Mapping[str, int] | None = None
) -> PerProfile:
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


# Why {1, 2, 4} on the fast profile: identifying a round of M iid clients costs D + 1 +
# 2 (M + 1)(n - 1) single-round runs of ~10 ms (plus M validation rounds); the thorough
# profile adds 8. A case carries its grid (``params["m_grid"]``, :data:`IDENTICAL_CLIENTS`).
M_GRIDS = PerProfile(fast=(1, 2, 4), thorough=(1, 2, 4, 8))


def identical_clients(fast: bool) -> st.SearchStrategy[Case]:
    """The instance whose client 0 is replicated (its other clients are not used), with the
    profile's grid of client counts (:data:`M_GRIDS`). Why dimensions 1 and 2 samples on the
    fast profile (``fast``): the identification's cost grows with D = 3 (d_x + 2 d_y) and with
    n - 1 per minibatch row."""
    m_grid = M_GRIDS.fast if fast else M_GRIDS.thorough
    problem = st.builds(
        lambda dx, dy, kappa, seed, n: QuadraticBilevel.random(
            1, dx, dy, 1.0 if dy == 1 else kappa, seed=seed, n_samples=n, gradient_noise=1.0
        ),
        st.integers(1, 1 if fast else 2),
        st.integers(1, 1 if fast else 2),
        st.floats(1.0, 2.0),
        strategies.SEEDS,
        st.just(2) if fast else st.integers(2, 3),
    )
    return st.builds(
        lambda p, seed: Case(p, {"seed": seed, "m_grid": m_grid}), problem, strategies.SEEDS
    )


#: The cases of claim fedmsa.rate.M_stochastic, per profile.
IDENTICAL_CLIENTS = PerProfile(
    functools.partial(identical_clients, fast=True),
    functools.partial(identical_clients, fast=False),
)


def tau_cases(fast: bool) -> st.SearchStrategy[Case]:
    """Why M <= 2 and dimension 1 on the fast profile (``fast``): three identifications (one
    per tau) of M (D + 1 + (2 M + 2 K)(n - 1)) two-step rounds."""
    problem = st.builds(
        lambda m, dx, dy, kappa, seed, n: QuadraticBilevel.random(
            m,
            dx,
            dy,
            1.0 if dy == 1 else kappa,
            seed=seed,
            hessian_heterogeneity=0.1,
            gradient_heterogeneity=0.0,
            n_samples=n,
            gradient_noise=0.05,
        ),
        st.just(2) if fast else st.integers(2, 3),
        st.integers(1, 1 if fast else 2),
        st.integers(1, 1 if fast else 2),
        st.floats(1.0, 2.0),
        strategies.SEEDS,
        st.just(2) if fast else st.just(3),
    )
    return st.builds(lambda p, seed: Case(p, {"seed": seed}), problem, strategies.SEEDS)


#: The cases of claim fedmsa.rate.tau_stochastic, per profile.
TAU_CASES = PerProfile(
    functools.partial(tau_cases, fast=True), functools.partial(tau_cases, fast=False)
)

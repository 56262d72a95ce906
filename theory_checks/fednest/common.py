"""FedNest's shared helpers: what several of its results use (Tarzanagh, Li, Thrampoulidis,
Oymak; ICML 2022; notation of :mod:`theory_checks.fednest`).

- the constructors of FedNest's claims (:data:`fednest_claim`, narrowed by hypotheses:
  :data:`strongly_convex_claim`, :data:`neumann_series_claim`) and the kinds of claim that
  recur (:data:`STEP_IDENTITY`, :data:`SENTENCE_IDENTITY`, :func:`costly_cases`), which each
  result module narrows further so that a claim states only what differs;
- the paper's name and reference, client matrices ``H_i, J_i, grad f_i`` at a point, FedIHGP's
  exact expectation over ``N'`` (:func:`expected_ihgp`), FedIHGP alone (:func:`fedihgp`), affine
  maps read column by column (:func:`measured_map`) and the outer minimizer ``x*``;
- the case strategies several results draw from (:func:`case_builder`,
  :func:`bilevel_problems`, :func:`closed_form_problems`, :func:`heterogeneous_bilevel`,
  :func:`per_client_taus`);
- Thm 3.1's bias floor ``b_N^2`` (:func:`floor_bound`: the bound of ``fednest.thm31``'s floor
  claim and the choice of N in the K-rate design);
- the two-look :func:`sequential_test` of the K-rate check (:mod:`theory_checks.fednest.k_rate`)
  and of Lemma 2.2's (14b) check.

The A1-A2 constants and hypotheses live in :mod:`theory_checks.fednest.constants`.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import ProblemConstants
from problems import QuadraticBilevel
from problems import strategies
from results_format.verdicts import ABOUT_SENTENCE
from results_format.verdicts import ABOUT_STEP
from testbed.federation.context import FederatedContext
from testbed.oracles import Oracles
from theory_checks.claim import Case
from theory_checks.claim import NotMeasurable
from theory_checks.claim import PerProfile
from theory_checks.claim import paper_claim
from theory_checks.decision import Evidence
from theory_checks.decision import SpentRate
from theory_checks.decision import StatTest
from theory_checks.decision import batch_evidence
from theory_checks.exact_quantities import outer_affine
from theory_checks.fednest.constants import A1_NEUMANN_SCALE
from theory_checks.fednest.constants import A2_STRONG_CONVEXITY

#: The constructor of FedNest's claims (:class:`~theory_checks.claim.ClaimMaker`); each result
#: module narrows it with the fields its claims share.
fednest_claim = paper_claim("FedNest")

#: The kinds of FedNest claim that recur across its results, as the fields they fix (a claim
#: spreads one: ``lemma22_claim(**STEP_IDENTITY, id=...)``): an exact identity derived for a
#: step of the algorithms, and one that a sentence of the paper states.
STEP_IDENTITY: dict[str, Any] = {"kind": "exact_identity", "about": ABOUT_STEP}
SENTENCE_IDENTITY: dict[str, Any] = {"kind": "exact_identity", "about": ABOUT_SENTENCE}

#: FedNest's claims under A2 alone (every ``g_i`` strongly convex in y): those whose estimators
#: run no Neumann series, or whose identity holds at any scale ``1/l``.
strongly_convex_claim = fednest_claim.but(hypotheses=(A2_STRONG_CONVEXITY,))

#: FedNest's claims on FedIHGP's Neumann series (Alg. 3): A1's scale ``l >= l_{g,1}`` and A2.
neumann_series_claim = fednest_claim.but(hypotheses=(A1_NEUMANN_SCALE, A2_STRONG_CONVEXITY))


def costly_cases(fast: int | None = None, thorough: int | None = None) -> dict[str, Any]:
    """The fields of a claim expected to hold whose cases cost seconds each (the claim says
    why): no shrinking, since a shrunk case says no more than the failing one and costs as
    much again; with ``fast``, that many cases on the fast profile and ``thorough`` (None: the
    profile's count) on the thorough one. A claim spreads them:
    ``ihgp_claim(**costly_cases(2, 4), id=...)``."""
    if fast is None:
        return {"shrink": False}
    return {"shrink": False, "max_examples": PerProfile(fast, thorough)}


PAPER = "FedNest"
REF = "Tarzanagh et al. 2022"


# ========================================================================================= helpers


def all_clients(problem: Any) -> torch.Tensor:
    """The indices of every client: full participation."""
    return torch.arange(problem.n_clients)


def client_matrices(problem: Any, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-client ``H_i (M, dy, dy)``, ``J_i (M, dx, dy)``, ``grad_x f_i``, ``grad_y f_i``."""
    oracles, clients = Oracles(problem), all_clients(problem)
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    H = torch.stack([oracles.hvp_inner(x, y, e, clients) for e in eye], dim=2)
    J = torch.stack([oracles.jvp_inner_xy(x, y, e, clients) for e in eye], dim=2)
    gx, gy = oracles.grad_outer(x, y, clients)
    return {"H": 0.5 * (H + H.transpose(1, 2)), "J": J, "gx": gx, "gy": gy}


def client_taus(local_steps: Any, m: int) -> torch.Tensor:
    """The local-step counts ``tau_i`` of ``m`` clients: ``local_steps`` for each when it is one
    number, else the given per-client counts."""
    if isinstance(local_steps, int):
        return torch.full((m,), local_steps)
    return torch.as_tensor(local_steps)


def expected_ihgp(
    estimator: Any, problem: Any, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, float, Any]:
    """``E[p]`` and ``E||p||^2`` over ``N'`` (exact finite sum; full participation)."""
    ctx = FederatedContext(problem, np.random.default_rng(0))
    result = estimator.ihgp(ctx, x, y, truncation_index=estimator.neumann_terms - 1)
    path = torch.stack(result.path)
    probs = torch.as_tensor(estimator.truncation_probabilities(), dtype=torch.float64)
    mean = (probs[:, None] * path).sum(0)
    second = float((probs * (path**2).sum(1)).sum())
    return mean, second, result


def fedihgp(make: Callable[..., Any], terms: int, lam: float, **kw: Any) -> Any:
    """FedIHGP alone (Alg. 3, no inner steps) from the builder ``make``: ``terms`` Neumann
    terms of step ``lam``."""
    return make(inner_steps=0, neumann_terms=terms, neumann_step_size=lam, **kw)


def measured_map(
    update: Callable[[torch.Tensor], torch.Tensor], center: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(update(center) - center, columns update(center + e_j) - update(center))``."""
    base = update(center)
    eye = torch.eye(center.shape[0], dtype=torch.float64)
    columns = [update(center + e) - base for e in eye]
    return base - center, torch.stack(columns, dim=1)


def outer_minimizer(problem: Any) -> torch.Tensor:
    """``x* = argmin f = -G^{-1} g0`` of a closed-form problem, whose outer gradient is
    ``G x + g0`` (:func:`~theory_checks.exact_quantities.outer_affine`); not measurable when
    ``f`` is not strongly convex (Thm 3.1's K-rate regime and the floor's limit need it)."""
    hess, g0 = outer_affine(problem)
    if float(torch.linalg.eigvalsh(hess).min()) <= 0.0:
        raise NotMeasurable("f is not strongly convex: the K-rate regime is not reached")
    return torch.linalg.solve(hess, -g0)


# ====================================================================================== strategies


def case_builder(
    problems: st.SearchStrategy[Any], **params: st.SearchStrategy[Any]
) -> Callable[[], st.SearchStrategy[Case]]:
    """A claim's strategy: cases of ``problems`` with a drawn ``point_seed`` and the drawn
    ``params``."""

    def build() -> st.SearchStrategy[Case]:
        return st.builds(
            lambda problem, seed, values: Case(problem, {"point_seed": seed, **values}),
            problems,
            strategies.SEEDS,
            st.fixed_dictionaries(params),
        )

    return build


def bilevel_problems(
    max_clients: int = 6,
    max_dim: int = 4,
    kappa: tuple[float, float] = (1.0, 30.0),
    min_dim_y: int = 1,
) -> st.SearchStrategy[Any]:
    """Quadratic bilevel problems of :func:`problems.strategies.quadratic_bilevel`."""
    return strategies.quadratic_bilevel(
        max_clients=max_clients, max_dim=max_dim, kappa=kappa, min_dim_y=min_dim_y
    )


@st.composite
def heterogeneous_bilevel(
    draw: st.DrawFn,
    min_hessian: float = 0.2,
    max_hessian: float = 0.9,
    max_dim: int = 4,
    kappa_max: float = 20.0,
    clients: tuple[int, int] = (2, 6),
) -> QuadraticBilevel:
    """Bilevel problems with several clients, Hessian heterogeneity >= min_hessian and
    gradient heterogeneity >= 0.5."""
    dim_x = draw(st.integers(1, max_dim))
    dim_y = draw(st.integers(1, max_dim))
    n_clients = draw(st.integers(*clients))
    kappa = 1.0 if dim_y == 1 else draw(st.floats(1.0, kappa_max))
    hh = draw(st.floats(min_hessian, max_hessian))
    gh = draw(st.floats(0.5, 3.0))
    return QuadraticBilevel.random(
        n_clients,
        dim_x,
        dim_y,
        kappa,
        seed=draw(strategies.SEEDS),
        hessian_heterogeneity=hh,
        gradient_heterogeneity=gh,
    )


@st.composite
def per_client_taus(draw: st.DrawFn, problem: Any, low: int = 1, high: int = 4) -> tuple[int, ...]:
    """A number of local steps in ``[low, high]`` for each client of ``problem``."""
    return tuple(draw(st.integers(low, high)) for _ in range(problem.n_clients))


def closed_form_problems(
    max_clients: int = 6, max_dim: int = 4, kappa: tuple[float, float] = (1.0, 30.0)
) -> st.SearchStrategy[Any]:
    """Every closed-form family: bilevel, minimax, one-level compositional."""
    return st.one_of(
        bilevel_problems(max_clients, max_dim, kappa),
        strategies.quadratic_minimax(max_clients=max_clients, max_dim=max_dim, kappa=kappa),
        strategies.linear_compositional(
            max_clients=max_clients, min_levels=1, max_levels=1, max_dim=max_dim
        ),
    )


# ================================================================================= Thm 3.1's floor


def floor_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """``b_N^2`` with ``b_N = ||J_bar|| ||grad_y f(x_N, y*)|| (1/mu) (1 - mu/l)^N`` (item 3's
    explicit constant)."""
    rho = 1.0 - constants.mu * params["neumann_step_size"]
    b = params["cross_norm"] * params["grad_y_norm"] * rho ** params["neumann_terms"] / constants.mu
    return b * b


def sequential_test(
    quantity: str,
    draw: Callable[[int], float],
    looks: list[int],
    rate: float,
    high: float,
    evidence: Callable[[list[float]], Evidence] = batch_evidence,
) -> tuple[StatTest, list[float]]:
    """Draw independent replicates ``draw(r)`` up to each size in ``looks`` and stop at the
    first look whose interval (``evidence`` of the replicates so far, by default the Student-t
    interval of their mean, :func:`batch_evidence`, at ``rate / len(looks)``) is decided against
    ``value <= high``; returns the test of that look (its evidence a :class:`SpentRate`, so the
    runner decides it at the same spent rate) and the replicates drawn. Every later look reuses
    the earlier replicates (one growing sample). The looks are fixed before sampling."""
    values: list[float] = []
    test = None
    for size in looks:
        values += [draw(r) for r in range(len(values), size)]
        test = StatTest(quantity, SpentRate(evidence(values), len(looks)), high=high)
        if test.decide(rate).outcome != "undecided":
            break
    assert test is not None
    return test, values

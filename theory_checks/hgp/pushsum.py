"""Lemma 2 of HGP (Push-Sum consensus error): the proof's sqrt(n) step and the explicit Push-Sum
bound ``(n - 1) tau(A(S:1)) / delta_S`` (Dobrushin's coefficient,
:func:`theory_checks.hgp.constants.pushsum_bound`), and their checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from problems import strategies
from testbed.decentralized.graphs import GraphSequence
from theory_checks import stats
from theory_checks.claim import Case, Claim, Fit, Measurement, SeriesPoint
from theory_checks.hgp.common import MIXING_FAMILIES, graph_cases, graph_of
from theory_checks.hgp.constants import pushsum_bound

# --------------------------------------------------------------------------- Lemma 2


def _operators(case: Case, make: Callable[..., Any], grid: list[int]) -> list[np.ndarray]:
    """``Theta_hat_S - Theta`` as the estimator's own averaging applies it, for S on a grid."""
    n = case.problem.n_clients
    graph = graph_of(case)
    theta = np.full((n, n), 1.0 / n)
    return [make(pushsum_steps=S, graph_family=case.params["graph_family"],
                 graph_seed=case.params["graph_seed"]).averaging_operator(graph, 0) - theta
            for S in grid]


def _lemma2_grid(case: Case) -> list[int]:
    # Why 20 B steps: the B-connected ring contracts only once per window of B = n steps, so
    # 20 windows give a decay of several orders on every family while keeping n^2 work small.
    B = GraphSequence(case.params["graph_family"], case.problem.n_clients).window
    top = 20 * B
    return sorted(set(np.linspace(1, top, num=min(top, 15)).round().astype(int).tolist()))


def check_lemma2_sqrt_n(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """The step of Lemma 2's proof (App. C.1): ``sigma_max(Theta_hat - Theta) <= sqrt(n)
    max|E_ij|``.

    The proof bounds ``||(Theta - Theta_hat) y||_inf <= (8/delta) tau^S ||y||_1`` entrywise
    (Nedic-Olshevsky) and concludes ``sigma_max <= (8 sqrt(n)/delta) tau^S``; that needs
    ``sigma_max(E) <= sqrt(n) max_ij |E_ij|`` for the Push-Sum error E, which is what is checked
    (the lemma itself, with its existential delta, is not refuted by this).
    """
    grid = _lemma2_grid(case)
    worst, worst_S = 0.0, 0
    for S, E in zip(grid, _operators(case, make, grid), strict=True):
        entry = float(np.abs(E).max())
        if entry < 1e-13:  # exact consensus: nothing left to compare
            continue
        ratio = float(np.linalg.norm(E, 2)) / (math.sqrt(case.problem.n_clients) * entry)
        if ratio > worst:
            worst, worst_S = ratio, S
    # Why 1 + 1e-12: the ratio is a ratio of float64 norms; 1e-12 absorbs their round-off.
    return Measurement(worst, 1.0 + 1e-12, worst <= 1.0 + 1e-12,
                       "sigma_max(E) / (sqrt(n) max|E_ij|) <=",
                       details={"pushsum_steps": worst_S})


def check_lemma2_geometric(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Corrected Lemma 2: the estimator's Push-Sum error ``c_S = sigma_max(Theta_hat_S -
    Theta)`` is at most the proof's explicit constant ``(n - 1) tau(A(S:1)) / delta_S``
    (:func:`pushsum_bound`, computed from the graph sequence) for every S on the grid, and
    ``log c_S`` decays linearly in S (95% interval of the least-squares slope < 0).

    The bound is nearly tight (attained on an edgeless step, above 0.8 of it on mixing
    graphs), so an estimator whose averaging mixes less than Alg. 1 does (a missing step, no
    de-bias) exceeds it.
    """
    problem = case.problem
    grid = _lemma2_grid(case)
    ops = _operators(case, make, grid)
    graph = graph_of(case)
    c = np.array([float(np.linalg.norm(E, 2)) for E in ops])
    bounds = np.array([pushsum_bound(graph, S)[0] for S in grid])
    # Why 1e-12 relative and 1e-15 absolute: the bound is attained (ratio 1.0) on an edgeless
    # step, so only float64 round-off of the norms separates the two sides there.
    excess = c - bounds * (1.0 + 1e-12) - 1e-15
    constant_ok = bool((excess <= 0).all())
    ratio = float(np.max(c / np.maximum(bounds, 1e-300)))
    series = tuple(SeriesPoint("measured", "pushsum_steps", S, float(v), 0, S)
                   for S, v in zip(grid, c, strict=True)) + tuple(
        SeriesPoint("bound", "pushsum_steps", S, float(b), 0, S)
        for S, b in zip(grid, bounds, strict=True))
    # Why 1e-12: below it the consensus error is float64 round-off, not a Push-Sum mode.
    keep = c > 1e-12
    if keep.sum() < 3:
        passed = constant_ok and float(c[-1]) <= 1e-12
        return Measurement(float(c[-1]), 1e-12, passed, "c_S at the largest S <=",
                           series=series, details={"constant_ok": constant_ok,
                                                   "max_c_over_bound": ratio})
    fit = stats.fit_rate(np.array(grid)[keep], c[keep])
    result = Fit("log consensus error per Push-Sum step", fit.slope, fit.ci_low, fit.ci_high,
                 0.0, abs(fit.slope), residual=fit.residual_max)
    passed = constant_ok and fit.ci_high < 0.0
    return Measurement(fit.slope, 0.0, passed, "c_S <= (n - 1) tau(A(S:1)) / delta_S at every "
                       "S and 95% interval of the slope < 0", series=series, fit=result,
                       details={"tau_hat": math.exp(fit.slope), "constant_ok": constant_ok,
                                "max_c_over_bound": ratio, "n": problem.n_clients})


def lemma2_cases() -> st.SearchStrategy[Case]:
    """Lemma 2's cases: one-dimensional per-client quadratics on the mixing graph families."""
    return graph_cases(strategies.per_client_quadratic(max_dim=1), MIXING_FAMILIES)()

"""FedIHGP's client-sampling variance for ``N > 1`` (a derived law; the paper states none):
the exact mean and variance over every sequence of client subsets.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st

from problems import QuadraticBilevel, strategies
from theory_checks.claim import Case, Claim, Measurement, SeriesPoint
from theory_checks.exact_quantities import evaluation_point
from theory_checks.fednest.common import client_matrices, fedihgp, scripted_context
from theory_checks.fednest.constants import fednest_constants
from theory_checks.tolerances import IDENTITY_RTOL


def sampling_variance_formula(H: torch.Tensor, v: torch.Tensor, lam: float, terms: int,
                              size: int) -> tuple[float, torch.Tensor]:
    """Derived law of FedIHGP with ``|S_n| = s`` clients UAR per round, exact oracles.

    With ``A_i = I - lam H_i``, ``c_s = (m - s)/(s (m - 1))`` and the finite-population moments
    ``E[v_S v_S^T] = v_bar v_bar^T + c_s Sigma_v``,
    ``E[A_S M A_S^T] = A_bar M A_bar^T + c_s mean_i (A_i - A_bar) M (A_i - A_bar)^T``, the
    second moments ``M_0 = E[v_S v_S^T]``, ``M_n = E[A_S M_{n-1} A_S^T]`` (independent rounds)
    give ``E||p_{N'}||^2 = N lam^2 sum_{n<N} tr M_n`` and ``E p = lam sum_{n<N} A_bar^n v_bar``
    (independent of s). Returns ``(Var(p), E p)``; at s = m it is notes 3.2's formula, and
    ``Var(s) - Var(m)`` is a polynomial of degree N in ``c_s`` with no constant term.
    """
    m = H.shape[0]
    c_s = (m - size) / (size * (m - 1)) if m > 1 else 0.0
    eye = torch.eye(H.shape[1], dtype=torch.float64)
    A = eye - lam * H
    A_bar, v_bar = A.mean(0), v.mean(0)
    dA, dv = A - A_bar, v - v_bar
    M = torch.outer(v_bar, v_bar) + c_s * (dv.T @ dv) / m
    second, mean, power = 0.0, torch.zeros_like(v_bar), v_bar
    for _ in range(terms):
        second += float(torch.trace(M))
        mean = mean + power
        M = A_bar @ M @ A_bar.T + c_s * torch.einsum("mij,jk,mlk->il", dA, M, dA) / m
        power = A_bar @ power
    mean = lam * mean
    return terms * lam**2 * second - float(mean @ mean), mean


def check_sampling_variance_n(claim: Claim, case: Case, make: Callable[..., Any]
                              ) -> Measurement:
    """FedIHGP with ``|S_n| = s`` for every s and ``N > 1``: exact mean and variance over
    ``N'`` and every sequence of subsets ``(S_0, ..., S_{N-1})`` (enumerated through a scripted
    context; the path of a run with ``N' = N - 1`` gives every ``N' = n`` at once) equal
    :func:`sampling_variance_formula` (1e-10 relative)."""
    problem = case.problem
    m, terms = problem.n_clients, int(case.params["neumann_terms"])
    x, y = evaluation_point(problem, case.params["point_seed"])
    lam = 1.0 / fednest_constants(problem).l_g1
    mats = client_matrices(problem, x, y)
    worst, series, sizes, client_parts = 0.0, [], [], []
    _, full_mean = sampling_variance_formula(mats["H"], mats["gy"], lam, terms, m)
    var_full, _ = sampling_variance_formula(mats["H"], mats["gy"], lam, terms, m)
    for s in range(1, m + 1):
        subsets = [torch.tensor(c) for c in itertools.combinations(range(m), s)]
        estimator = fedihgp(make, terms, lam, participation=s)
        paths = []
        for sequence in itertools.product(subsets, repeat=terms):
            ctx = scripted_context(problem, sequence, s)
            paths.append(torch.stack(estimator.ihgp(ctx, x, y, truncation_index=terms - 1).path))
        stacked = torch.stack(paths)  # (sequences, N, dy)
        mean = stacked.mean((0, 1))
        variance = float((stacked**2).sum(-1).mean()) - float(mean @ mean)
        predicted, predicted_mean = sampling_variance_formula(mats["H"], mats["gy"], lam, terms,
                                                              s)
        scale = abs(predicted) + float(predicted_mean @ predicted_mean) + 1e-300
        worst = max(worst, abs(variance - predicted) / scale,
                    float((mean - full_mean).norm() ** 2) / scale)
        sizes.append(s)
        client_parts.append(variance - var_full)
        series += [SeriesPoint("measured", "sampled_clients", s, variance, 0, len(paths)),
                   SeriesPoint("theory", "sampled_clients", s, predicted, 0, len(paths))]
    details: dict[str, Any] = {"n_clients": m, "neumann_terms": terms,
                               "client_sampling_variance": client_parts}
    return Measurement(worst, IDENTITY_RTOL, worst <= IDENTITY_RTOL, "relative residual <=",
                       series=tuple(series), details=details)


def sampling_cases() -> st.SearchStrategy[Case]:
    """Client-sampling cases small enough to enumerate every participant set: (M, N) in
    {(3, 2), (3, 3), (4, 2)}, heterogeneous quadratic bilevel problems and a point."""
    @st.composite
    def build(draw: st.DrawFn) -> Case:
        m, terms = draw(st.sampled_from([(3, 2), (3, 3), (4, 2)]))
        dim_y = draw(st.integers(1, 3))
        problem = QuadraticBilevel.random(
            m, draw(st.integers(1, 3)), dim_y, draw(st.floats(1.0, 10.0)) if dim_y > 1 else 1.0,
            seed=draw(strategies.SEEDS), hessian_heterogeneity=draw(st.floats(0.0, 0.8)),
            gradient_heterogeneity=draw(st.floats(0.0, 3.0)))
        return Case(problem, {"point_seed": draw(strategies.SEEDS), "neumann_terms": terms})

    return build()

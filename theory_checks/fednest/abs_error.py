"""FedNest's Lemma 2.2 (14b) check: ``E||H^{-1} - H_hat|| <= bound`` by Monte Carlo with
Hoeffding's bound, with A1-A2's constants (as stated) and per-sample Hessian bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import ProblemConstants, QuadraticBilevel, strategies
from theory_checks import stats
from theory_checks.claim import Case, Claim, Measurement, NotMeasurable, SeriesPoint
from theory_checks.decision import Design, Hoeffding
from theory_checks.exact_quantities import evaluation_point
from theory_checks.fednest.common import LinearOuterProbe, client_matrices, fedihgp
from theory_checks.fednest.constants import neumann_scale
from theory_checks.fednest.k_rate import sequential_test


def _sample_hessian_range(problem: QuadraticBilevel) -> tuple[float, float]:
    """``min`` and ``max`` eigenvalue over every client's sample Hessians ``A_ij``."""
    if problem.A_samples is None:
        raise NotMeasurable("built without samples")
    eig = torch.linalg.eigvalsh(problem.A_samples)
    return float(eig.min()), float(eig.max())


def abs_error_bound_as_stated(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(14b) with A1-A2's constants: ``2 / mu_g``, ``mu_g = min_i lambda_min(H_i)``."""
    return 2.0 / constants.mu_clients


def abs_error_bound_per_sample(constants: ProblemConstants, params: Mapping[str, float]
                               ) -> float:
    """(14b) with per-sample constants (notes issue 4): ``2 / mu_s``, ``mu_s`` the smallest
    eigenvalue of any sample Hessian (and ``l`` >= the largest)."""
    return 2.0 / params["mu_samples"]


# Why a quarter of the bound: the effect (14b) must resolve, i.e. a case whose E Z is at most
# 3/4 of the bound is decided "holds" (and one at 5/4 of it "fails"). Half the bound was too
# coarse: a thorough-profile case has E Z = 1.11 against 2 (0.55 of the bound), which the
# half-width of 1.0 left undecided. The refutation seen (5.5 vs 2) is far larger; the Hoeffding
# sample size grows like 1/effect^2, so this costs 4x the draws of half (~70 draws, < 1 s).
ABS_ERROR_EFFECT = 0.25
# Why 2000 at most: a draw costs dim_y FedIHGP runs (~1 ms each); beyond that the check would
# leave the fast budget, and the interval is recorded undecided instead of guessing.
ABS_ERROR_MAX_DRAWS = 2000


def check_abs_error(claim: Claim, case: Case, make: Callable[..., Any],
                    design: Design) -> Measurement:
    """(14b): ``E||H^{-1} - H_hat|| <= bound`` by Monte Carlo over the minibatches and subsets.

    Each draw j runs FedIHGP once per probe ``grad_y f_i = e_k`` (same stream, so the same
    subsets and samples) with ``N' = N - 1``: the vectors after round n are the columns of
    ``H_hat`` for ``N' = n``, so ``Z_j = (1/N) sum_n ||H^{-1} - H_hat_n||`` is the exact
    expectation over ``N'`` given the samples (Rao-Blackwell). Every factor ``I - H_s / l`` has
    norm at most ``r = max(|1 - mu_s/l|, |1 - l_s/l|)``, so ``0 <= Z_j <= ||H^{-1}|| +
    (1/l) sum_{n<N} r^n`` (the value range). The statistical test: the mean of ``n`` draws, by
    Hoeffding's bound (rigorous for bounded values), against the region ``E Z <= bound``; ``n``
    is computed before sampling so that the half-width at half the case's rate is at most
    ``ABS_ERROR_EFFECT`` of the bound (capped at ``ABS_ERROR_MAX_DRAWS``), and drawn in two
    looks (:func:`sequential_test`: a quarter, then all), each decided at half the rate.
    The claim's bound picks the constants and ``l``: as stated (A1-A2: ``l = l_{g,1}``, the
    Lipschitz constant of ``grad g_i`` jointly in ``(x, y)``,
    :func:`~theory_checks.fednest.constants.neumann_scale`, and :func:`abs_error_bound_as_stated`)
    or per sample (``l`` the largest sample eigenvalue, :func:`abs_error_bound_per_sample`).
    """
    problem = case.problem
    terms = int(case.params["neumann_terms"])
    mu_s, l_s = _sample_hessian_range(problem)
    constants = problem.constants()
    # the scale FedIHGP divides by: A1's l_{g,1} (theory_checks.fednest.constants, joint in
    # (x, y)) as stated, the largest sample eigenvalue in the per-sample correction
    l_g = l_s if claim.bound is abs_error_bound_per_sample else neumann_scale(case)
    estimator = fedihgp(make, terms, 1.0 / l_g, participation=case.params["participation"],
                        batch_size=1)
    x, y = evaluation_point(problem, case.params["point_seed"])
    H = client_matrices(problem, x, y)["H"].mean(0)
    H_inv = torch.linalg.inv(H)
    bound = claim.evaluate_bound(constants, {"mu_samples": mu_s, "neumann_terms": terms})
    contraction = max(abs(1.0 - mu_s / l_g), abs(1.0 - l_s / l_g))
    value_range = (float(torch.linalg.matrix_norm(H_inv, ord=2))
                   + sum(contraction**n for n in range(terms)) / l_g)
    # Sizes before sampling: two looks (sequential_test), each at half the case's rate (one
    # bounded side); the last has the draws that resolve ABS_ERROR_EFFECT, the first a quarter of
    # them, which refutes a gross excess (the saved counterexample: 5.5 against 2) at a quarter of
    # the cost, confirmation included.
    looks_rate = design.false_fail_rate / 2.0
    total = design.samples(min(ABS_ERROR_MAX_DRAWS, stats.min_num_samples_for_hoeffding(
        2.0 * ABS_ERROR_EFFECT * bound, value_range, 2.0 * looks_rate)))
    looks = sorted({max(1, total // 4), total})
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    probes = [LinearOuterProbe(problem, e) for e in eye]

    def draw(j: int) -> float:
        paths = []
        for probe in probes:
            ctx = estimator.context(probe, design.rng(j))
            paths.append(torch.stack(estimator.ihgp(ctx, x, y, truncation_index=terms - 1).path))
        H_hats = torch.stack(paths, dim=2)  # (N, dy, dy): column k from probe k
        return float(torch.linalg.matrix_norm(H_inv - H_hats, ord=2).mean())

    test, samples = sequential_test(
        "E||H^{-1} - H_hat||", draw, looks, design.false_fail_rate, bound,
        evidence=lambda values: Hoeffding(float(np.mean(values)), value_range, len(values)))
    estimate = float(np.mean(samples))
    return Measurement(estimate, bound, True, "E <= bound (Hoeffding)",
                       series=(SeriesPoint("measured", "neumann_terms", terms, estimate),
                               SeriesPoint("bound", "neumann_terms", terms, bound)),
                       details={"mu_clients": constants.mu_clients, "mu_samples": mu_s,
                                "l_samples": l_s, "l": l_g, "draws": len(samples),
                                "looks": looks, "value_range": value_range},
                       tests=(test,))


def abs_error_cases() -> st.SearchStrategy[Case]:
    """Lemma 2.2's absolute-error cases: noisy quadratic bilevel problems (1-3 clients, Hessian
    heterogeneity in [0, 0.5] and Hessian noise at most 0.95 less it), a point, the Neumann
    count N in [2, 8] and full or partial participation."""
    @st.composite
    def build(draw: st.DrawFn) -> Case:
        dim_y = draw(st.integers(1, 2))
        hh = draw(st.floats(0.0, 0.5))
        problem = QuadraticBilevel.random(
            draw(st.integers(1, 3)), draw(st.integers(1, 2)), dim_y,
            draw(st.floats(1.0, 4.0)) if dim_y > 1 else 1.0, seed=draw(strategies.SEEDS),
            hessian_heterogeneity=hh, gradient_heterogeneity=draw(st.floats(0.0, 2.0)),
            n_samples=draw(st.integers(2, 6)), gradient_noise=0.5,
            hessian_noise=draw(st.floats(0.0, 0.95 - hh)))
        participation = draw(st.one_of(st.none(), st.integers(1, problem.n_clients)))
        return Case(problem, {"point_seed": draw(strategies.SEEDS),
                              "neumann_terms": draw(st.integers(2, 8)),
                              "participation": participation})

    return build()

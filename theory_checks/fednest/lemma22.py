"""FedNest's Lemma 2.2: the bias of FedIHGP's inverse-Hessian estimate and of the indirect
hypergradient it gives (Tarzanagh et al. 2022, Sec. 2.4, eqs. (13a)-(15)).

The result. Under A1-A2 (and B: unbiased oracles of bounded variance), for any ``x`` and ``y``,
with ``H = grad^2_y g(x, y)``, ``H_hat`` FedIHGP's estimate (13b)
``H_hat = (N / l_{g,1}) prod_{n=1}^{N'} (I - (1/(l_{g,1} |S_n|)) sum_{i in S_n} grad^2_y
g_i(x, y; zeta_{i,n}))``, ``N' ~ U{0..N-1}``, ``kappa_g = l_{g,1} / mu_g`` and ``W`` every draw
of FedIHGP (``N'``, the subsets and the samples)::

    (14a) ||H^{-1} - E_W[H_hat]||  <=  (1/mu_g) ((kappa_g - 1)/kappa_g)^N
    (14b) E_W ||H^{-1} - H_hat||   <=  2 / mu_g
    (15)  ||E_W[h^I_i(x, y)] - grad_bar^I f_i(x, y)||
                                   <=  b := kappa_g l_{f,1} ((kappa_g - 1)/kappa_g)^N

with ``h^I_i = -grad^2_xy g_i p_{N'}`` (13a) and ``grad_bar^I f_i = -J_bar H^{-1} grad_y f_i``
(8b). Exact identity behind (14a) (derived from (13b), ``A = I - H/l``): ``E[H_hat] =
H^{-1}(I - A^N)``, so ``H^{-1} - E[H_hat] = H^{-1} A^N``.

What is checked (exact expectations over ``N'`` as finite sums; ``E[H_hat]`` read column by
column through :class:`LinearOuterProbe`, whose ``grad_y f_i = e_j``):

- ``inverse_hessian_identity``: (13b)'s identity ``H^{-1} - E[H_hat] = H^{-1} A^N`` (1e-10);
- ``inverse_hessian_bound``: (14a) at N in {1, 2, 4, 8, 16};
- ``per_client_bias``: (15) "for all i", refuted under heterogeneity (the local Jacobian of (13a)
  against the global one of (8b)), with ``b`` as printed and with its proof's constant ``l_{f,0}``
  (readings);
- ``averaged_bias``: its correction, the client average with the explicit constant
  ``||J_bar|| ||grad_y f|| (1/mu_g) ((kappa_g - 1)/kappa_g)^N``;
- ``paper_constant``: (15)'s ``b`` on the client average, refuted on affine ``f_i`` where
  ``l_{f,1} = 0`` (the proof bounds ``||grad_y f||`` by ``l_{f,0}``);
- ``abs_error_as_stated``: (14b) by Monte Carlo (Hoeffding) under two readings of A1-A2
  (:data:`~theory_checks.fednest.constants.ASSUMPTION_READINGS`): on the expected Hessian, as
  Assumption A states them, it fails when sample Hessians leave ``[mu_g, l_{g,1}]``
  (Assumptions A-B do not keep them inside); on every sample's Hessian, as the bound's factors
  need them, it holds. The verdict is "holds" and names both readings with their outcomes;
- ``abs_error_per_sample``: the per-sample bound with FedIHGP's scale the largest sample
  eigenvalue of the ``y`` block, ``[mu_s, l]`` (the reading above with A1's ``y`` block).

Hypotheses: A1's ``l_{g,1}`` as FedIHGP's scale and A2
(:mod:`theory_checks.fednest.constants`); the refutations of (15) are shown on affine ``f_i``,
inside A1 read on the whole space (``A1_F_LIPSCHITZ_GLOBAL``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from problems import ProblemConstants, QuadraticBilevel, strategies
from results_format.verdicts import ABOUT_RESULT, ABOUT_STEP
from testbed.estimators.fednest import FedIHGP
from testbed.federation.context import FederatedContext
from theory_checks import stats
from theory_checks.claim import (
    Case,
    Claim,
    Measurement,
    NotMeasurable,
    PerProfile,
    Perturbation,
    SeriesPoint,
    bilevel_spec,
    known_case,
)
from theory_checks.decision import Design, Hoeffding
from theory_checks.exact_quantities import evaluation_point
from theory_checks.fednest.common import (
    bilevel_problems,
    case_builder,
    client_matrices,
    closed_form_problems,
    expected_ihgp,
    fedihgp,
    fednest_claim,
    sequential_test,
)
from theory_checks.fednest.constants import (
    A1_F_LIPSCHITZ_GLOBAL,
    A1_NEUMANN_SCALE,
    A2_EACH_SAMPLE,
    A2_STRONG_CONVEXITY,
    assumption_constants,
    fednest_constants,
    neumann_scale,
)
from theory_checks.fednest.perturbations import IHGP_SCALE_OFF_BY_ONE, ihgp_variant
from theory_checks.hypotheses import Reading
from theory_checks.tolerances import IDENTITY_RTOL

# ======================================================================================= the probe


class LinearOuterProbe:
    """``problem`` with every outer loss replaced by ``v^T y``, so ``grad_y f_i = v``.

    FedIHGP applied to the probe returns ``H_hat v``; probing ``v = e_j`` reads the columns of
    ``E[H_hat]`` (Lemma 2.2 is a statement about a matrix).
    """

    def __init__(self, base: Any, v: torch.Tensor) -> None:
        self.base, self.v = base, v
        self.kind, self.n_clients = base.kind, base.n_clients
        self.dim_x, self.dim_y = base.dim_x, base.dim_y

    @property
    def id(self) -> str:
        return f"probe({self.base.id})"

    def outer_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Any
    ) -> torch.Tensor:
        return (y * self.v).sum(-1) + 0.0 * x.sum(-1)

    def inner_loss(
        self, x: torch.Tensor, y: torch.Tensor, clients: torch.Tensor, batch: Any
    ) -> torch.Tensor:
        return self.base.inner_loss(x, y, clients, batch)

    def sample_batch(self, rng: np.random.Generator, clients: torch.Tensor, batch_size: int) -> Any:
        return self.base.sample_batch(rng, clients, batch_size)

    def initial_point(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.base.initial_point()

    def constants(self) -> ProblemConstants:
        return self.base.constants()


# ========================================================================================== checks


def _expected_hessian_inverse(
    estimator: Any, problem: Any, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """``E[H_hat]`` of FedIHGP over ``N'``, column by column: the expected IHGP of the probe
    whose outer gradient is ``e_j`` (:class:`LinearOuterProbe`)."""
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    columns = [expected_ihgp(estimator, LinearOuterProbe(problem, e), x, y)[0] for e in eye]
    return torch.stack(columns, dim=1)


def check_inverse_hessian_identity(
    claim: Claim, case: Case, make: Callable[..., Any]
) -> Measurement:
    """``H^{-1} - E[H_hat] = H^{-1} (I - H/l)^N`` with ``E`` over ``N'`` as a finite sum."""
    problem = case.problem
    x, y = evaluation_point(problem, case.params["point_seed"])
    terms = int(case.params["neumann_terms"])
    lam = 1.0 / neumann_scale(case)
    estimator = fedihgp(make, terms, lam)
    expected = _expected_hessian_inverse(estimator, problem, x, y)
    H = client_matrices(problem, x, y)["H"].mean(0)
    H_inv = torch.linalg.inv(H)
    eye = torch.eye(problem.dim_y, dtype=torch.float64)
    predicted = H_inv @ torch.linalg.matrix_power(eye - lam * H, terms)
    scale = float(torch.linalg.matrix_norm(H_inv, ord=2))
    relative = float(torch.linalg.matrix_norm(H_inv - expected - predicted, ord=2)) / scale
    return Measurement(
        relative,
        IDENTITY_RTOL,
        relative <= IDENTITY_RTOL,
        "relative residual <=",
        details={"neumann_terms": terms, "l_g1": 1.0 / lam},
    )


def inverse_hessian_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(14a): ``(1/mu_g) ((kappa_g - 1)/kappa_g)^N``."""
    kappa = params["l_g1"] / params["mu_g"]
    return ((kappa - 1.0) / kappa) ** params["neumann_terms"] / params["mu_g"]


def check_inverse_hessian_bound(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """``||H^{-1} - E[H_hat]|| <= (1/mu_g)((kappa_g - 1)/kappa_g)^N`` for N on a grid."""
    problem = case.problem
    x, y = evaluation_point(problem, case.params["point_seed"])
    pc = fednest_constants(problem).as_dict()
    lam = 1.0 / neumann_scale(case)
    H = client_matrices(problem, x, y)["H"].mean(0)
    H_inv = torch.linalg.inv(H)
    scale = float(torch.linalg.matrix_norm(H_inv, ord=2))
    series, worst, last = [], -math.inf, (0.0, 0.0)
    # Why this grid: 1..16 covers the regime N < kappa (bound near 1/mu) and N > kappa (several
    # e-folds) at kappa <= 30 while keeping sum(N) * dim_y Hessian rounds small.
    for terms in (1, 2, 4, 8, 16):
        estimator = fedihgp(make, terms, lam)
        error = float(
            torch.linalg.matrix_norm(
                H_inv - _expected_hessian_inverse(estimator, problem, x, y), ord=2
            )
        )
        bound = claim.evaluate_bound(problem.constants(), {**pc, "neumann_terms": terms})
        worst = max(worst, error - bound - IDENTITY_RTOL * scale)
        series += [
            SeriesPoint("measured", "neumann_terms", terms, error, 0, terms),
            SeriesPoint("bound", "neumann_terms", terms, bound, 0, terms),
        ]
        last = (error, bound)
    return Measurement(
        last[0],
        last[1],
        worst <= 0.0,
        "<= at every N on the grid",
        series=tuple(series),
        details={"kappa_g": pc["kappa_g"]},
    )


def _indirect_bias_parts(
    case: Case, make: Callable[..., Any], point_scale: float = 1.0
) -> dict[str, Any]:
    """``E[h^I_i]`` per client and the plug-in ``grad_bar^I f_i`` at ``(x, y*(x))``."""
    problem = case.problem
    x, _ = evaluation_point(problem, case.params["point_seed"])
    x = point_scale * x
    y = problem.exact_inner_solution(x)
    terms = int(case.params["neumann_terms"])
    pc = fednest_constants(problem).as_dict()
    estimator = fedihgp(make, terms, 1.0 / neumann_scale(case))
    mean_p, _, _ = expected_ihgp(estimator, problem, x, y)
    ctx = FederatedContext(problem, np.random.default_rng(0))
    h, direct, indirect = estimator.direction(ctx, x, y, mean_p)  # linear in p: E over N'
    mats = client_matrices(problem, x, y)
    J_bar, H_bar = mats["J"].mean(0), mats["H"].mean(0)
    plug_in_clients = -(J_bar @ torch.linalg.solve(H_bar, mats["gy"].T)).T  # (M, dx), eq (8b)
    plug_in = plug_in_clients.mean(0)
    # l_{f,0} at the case's point: the smallest Lipschitz constant of f_i on a region holding it
    # (the whole space when every f_i is affine, where grad f_i is constant)
    pc["l_f0"] = float(torch.cat([mats["gx"], mats["gy"]], dim=1).norm(dim=1).max())
    return {
        "problem": problem,
        "x": x,
        "y": y,
        "terms": terms,
        "pc": pc,
        "h": h,
        "direct": direct,
        "indirect": indirect,
        "plug_in_clients": plug_in_clients,
        "plug_in": plug_in,
        "J_bar": J_bar,
        "H_bar": H_bar,
        "gy": mats["gy"].mean(0),
        "scale": float(
            torch.linalg.matrix_norm(J_bar @ torch.linalg.inv(H_bar), ord=2)
            * mats["gy"].norm(dim=1).max()
        )
        + 1e-300,
    }


def paper_bias_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(15): ``b = kappa_g l_{f,1} ((kappa_g - 1)/kappa_g)^N``."""
    kappa = params["l_g1"] / params["mu_g"]
    return kappa * params["l_f1"] * ((kappa - 1.0) / kappa) ** params["neumann_terms"]


def proof_bias_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(15) with the constant its proof gives: ``kappa_g l_{f,0}
    ((kappa_g - 1)/kappa_g)^N``, ``l_{f,0} >= ||grad f_i||``: the bound of ``||J|| ||H^{-1} -
    E H_hat|| ||grad_y f||`` where the paper prints ``l_{f,1}``."""
    return paper_bias_bound(constants, {**params, "l_f1": params["l_f0"]})


#: The readings of (15)'s constant ``b`` (``params["constant"]``): as printed, and with the
#: ``l_{f,0}`` its proof gives; the per-client statement is refuted only if both fail.
BIAS_CONSTANTS = {"printed": paper_bias_bound, "proof": proof_bias_bound}


def check_per_client_bias(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """(15) for every client: ``max_i ||E[h^I_i] - grad_bar^I f_i|| <= b``, with ``b`` as printed
    or with its proof's constant (``params["constant"]``, :data:`BIAS_CONSTANTS`)."""
    parts = _indirect_bias_parts(case, make)
    gaps = (parts["indirect"] - parts["plug_in_clients"]).norm(dim=1)
    measured = float(gaps.max())
    bound_fn = BIAS_CONSTANTS[str(case.params.get("constant", "printed"))]
    bound = bound_fn(parts["problem"].constants(), {**parts["pc"], "neumann_terms": parts["terms"]})
    slack = IDENTITY_RTOL * parts["scale"]
    return Measurement(
        measured,
        bound,
        measured <= bound + slack,
        "max_i <=",
        slack=slack,
        details={
            "neumann_terms": parts["terms"],
            "n_clients": parts["problem"].n_clients,
            "l_f0": parts["pc"]["l_f0"],
            "l_f1": parts["pc"]["l_f1"],
        },
    )


def averaged_bias_bound(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """Corrected (15): ``||J_bar|| ||grad_y f|| (1/mu_g) ((kappa_g - 1)/kappa_g)^N``."""
    kappa = params["l_g1"] / params["mu_g"]
    return (
        params["cross_norm"]
        * params["grad_y_norm"]
        * ((kappa - 1.0) / kappa) ** params["neumann_terms"]
        / params["mu_g"]
    )


def check_averaged_bias(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Client-averaged (15) with the explicit constant: ``||E[h] - grad_bar f(x, y)|| <= bound``
    (``E[h] - grad_bar f = E[h^I] - grad_bar^I f`` since the direct part has no ``N'``)."""
    parts = _indirect_bias_parts(case, make, float(case.params.get("point_scale", 1.0)))
    plug_in_total = parts["direct"].mean(0) + parts["plug_in"]
    measured = float((parts["h"] - plug_in_total).norm())
    params = {
        **parts["pc"],
        "neumann_terms": parts["terms"],
        "cross_norm": float(torch.linalg.matrix_norm(parts["J_bar"], ord=2)),
        "grad_y_norm": float(parts["gy"].norm()),
    }
    bound = claim.evaluate_bound(parts["problem"].constants(), params)
    slack = IDENTITY_RTOL * parts["scale"]
    return Measurement(
        measured,
        bound,
        measured <= bound + slack,
        "<=",
        slack=slack,
        details={"neumann_terms": parts["terms"], "grad_y_norm": params["grad_y_norm"]},
    )


def check_paper_constant(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """Client-averaged (15) with the paper's constant ``b = kappa_g l_{f,1} rho^N``."""
    parts = _indirect_bias_parts(case, make, float(case.params["point_scale"]))
    measured = float((parts["h"] - parts["direct"].mean(0) - parts["plug_in"]).norm())
    bound = claim.evaluate_bound(
        parts["problem"].constants(), {**parts["pc"], "neumann_terms": parts["terms"]}
    )
    slack = IDENTITY_RTOL * parts["scale"]
    return Measurement(
        measured,
        bound,
        measured <= bound + slack,
        "<=",
        slack=slack,
        details={"grad_y_norm": float(parts["gy"].norm()), "l_f1": parts["pc"]["l_f1"]},
    )


# --------------------------------------------------------------------------- (14b)


def _sample_hessian_range(problem: QuadraticBilevel) -> tuple[float, float]:
    """``min`` and ``max`` eigenvalue over every client's sample Hessians ``A_ij``."""
    if problem.A_samples is None:
        raise NotMeasurable("built without samples")
    eig = torch.linalg.eigvalsh(problem.A_samples)
    return float(eig.min()), float(eig.max())


def abs_error_bound_as_stated(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(14b): ``2 / mu_g`` with A2's ``mu_g`` under the case's reading of A1-A2
    (:func:`~theory_checks.fednest.constants.assumption_constants`: ``min_i lambda_min(H_i)`` of
    the expected Hessians, or ``min_{i, zeta}`` over the sample Hessians)."""
    return 2.0 / params["mu_g"]


def abs_error_bound_per_sample(constants: ProblemConstants, params: Mapping[str, float]) -> float:
    """(14b) with per-sample constants (which Assumptions A-B do not state): ``2 / mu_s``, ``mu_s``
    the smallest eigenvalue of any sample Hessian (and ``l`` >= the largest)."""
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


def _abs_error_constants(
    claim: Claim, case: Case, mu_s: float, l_s: float
) -> tuple[str, float, float]:
    """The reading of A1-A2 (``"y block per sample"`` for the per-sample claim), the scale ``l``
    FedIHGP divides by and A2's ``mu_g``: A1-A2's (:mod:`theory_checks.fednest.constants`,
    ``l_{g,1}`` joint in ``(x, y)``) under the case's reading, on the expected or on each
    sample's Hessian; the largest sample eigenvalue ``l_s`` and ``mu_s`` in the per-sample
    claim."""
    per_sample_y = claim.bound is abs_error_bound_per_sample
    l_g = l_s if per_sample_y else neumann_scale(case)
    mu_g = mu_s if per_sample_y else assumption_constants(case).mu_g
    reading = (
        "y block per sample" if per_sample_y else str(case.params.get("assumptions", "expected"))
    )
    return reading, l_g, mu_g


def _abs_error_looks(design: Design, bound: float, value_range: float) -> list[int]:
    """The draws after which :func:`check_abs_error` looks, fixed before sampling: two looks
    (:func:`sequential_test`), each at half the case's rate (one bounded side); the last has the
    draws that resolve ``ABS_ERROR_EFFECT`` of ``bound`` by Hoeffding's bound, the first a
    quarter of them, which refutes a gross excess (the saved counterexample: 5.5 against 2) at
    a quarter of the cost, confirmation included."""
    looks_rate = design.false_fail_rate / 2.0
    total = design.samples(
        min(
            ABS_ERROR_MAX_DRAWS,
            stats.min_num_samples_for_hoeffding(
                2.0 * ABS_ERROR_EFFECT * bound, value_range, 2.0 * looks_rate
            ),
        )
    )
    return sorted({max(1, total // 4), total})


def check_abs_error(
    claim: Claim, case: Case, make: Callable[..., Any], design: Design
) -> Measurement:
    """(14b): ``E||H^{-1} - H_hat|| <= bound`` by Monte Carlo over the minibatches and subsets.

    Each draw j runs FedIHGP once per probe ``grad_y f_i = e_k`` (same stream, so the same
    subsets and samples) with ``N' = N - 1``: the vectors after round n are the columns of
    ``H_hat`` for ``N' = n``, so ``Z_j = (1/N) sum_n ||H^{-1} - H_hat_n||`` is the exact
    expectation over ``N'`` given the samples (Rao-Blackwell). Every factor ``I - H_s / l`` has
    norm at most ``r = max(|1 - mu_s/l|, |1 - l_s/l|)``, so ``0 <= Z_j <= ||H^{-1}|| +
    (1/l) sum_{n<N} r^n`` (the value range). The statistical test: the mean of ``n`` draws, by
    Hoeffding's bound (rigorous for bounded values), against the region ``E Z <= bound``, at
    the looks :func:`_abs_error_looks` fixes before sampling. The claim's bound picks the
    constants and ``l`` (:func:`_abs_error_constants`): (14b) as stated
    (:func:`abs_error_bound_as_stated`, A1-A2's ``l_{g,1}`` and ``mu_g`` under the case's
    reading) or the ``y``-block per-sample bound (:func:`abs_error_bound_per_sample`).
    """
    problem = case.problem
    terms = int(case.params["neumann_terms"])
    mu_s, l_s = _sample_hessian_range(problem)
    constants = problem.constants()
    reading, l_g, mu_g = _abs_error_constants(claim, case, mu_s, l_s)
    estimator = fedihgp(
        make, terms, 1.0 / l_g, participation=case.params["participation"], batch_size=1
    )
    x, y = evaluation_point(problem, case.params["point_seed"])
    H = client_matrices(problem, x, y)["H"].mean(0)
    H_inv = torch.linalg.inv(H)
    bound = claim.evaluate_bound(
        constants, {"mu_samples": mu_s, "mu_g": mu_g, "neumann_terms": terms}
    )
    contraction = max(abs(1.0 - mu_s / l_g), abs(1.0 - l_s / l_g))
    value_range = (
        float(torch.linalg.matrix_norm(H_inv, ord=2))
        + sum(contraction**n for n in range(terms)) / l_g
    )
    looks = _abs_error_looks(design, bound, value_range)
    probes = [LinearOuterProbe(problem, e) for e in torch.eye(problem.dim_y, dtype=torch.float64)]

    def draw(j: int) -> float:
        paths = []
        for probe in probes:
            ctx = estimator.context(probe, design.rng(j))
            paths.append(torch.stack(estimator.ihgp(ctx, x, y, truncation_index=terms - 1).path))
        H_hats = torch.stack(paths, dim=2)  # (N, dy, dy): column k from probe k
        return float(torch.linalg.matrix_norm(H_inv - H_hats, ord=2).mean())

    test, samples = sequential_test(
        "E||H^{-1} - H_hat||",
        draw,
        looks,
        design.false_fail_rate,
        bound,
        evidence=lambda values: Hoeffding(float(np.mean(values)), value_range, len(values)),
    )
    estimate = float(np.mean(samples))
    return Measurement(
        estimate,
        bound,
        True,
        "E <= bound (Hoeffding)",
        series=(
            SeriesPoint("measured", "neumann_terms", terms, estimate),
            SeriesPoint("bound", "neumann_terms", terms, bound),
        ),
        details={
            "mu_clients": constants.mu_clients,
            "mu_samples": mu_s,
            "mu_g": mu_g,
            "assumptions": reading,
            "l_samples": l_s,
            "l": l_g,
            "draws": len(samples),
            "looks": looks,
            "value_range": value_range,
        },
        tests=(test,),
    )


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


# ==================================================================================== perturbation


@dataclasses.dataclass(frozen=True)
class HalvedLipschitzIHGP(FedIHGP):
    """FedIHGP run with the Neumann step ``2/l`` it is not given: ``l`` read as the Lipschitz
    constant of ``g/2`` (the 1/2-convention slip of Sec. 3.2, where ``l_{g,1} = 1`` is used for
    ``g = 1/2 ||y - r(x)||^2``)."""

    def steps(self, problem: Any) -> tuple[float, float]:
        beta, lam = super().steps(problem)
        return beta, 2.0 * lam


IHGP_HALVED_LIPSCHITZ = Perturbation(
    "FedIHGP Neumann step 2/l",
    "the Neumann step is 2/l instead of 1/l (l read as the Lipschitz constant of g/2, the "
    "1/2-convention slip of Sec. 3.2): the sample factors I - 2 H_s / l reach norm ~1, so "
    "E||H^{-1} - H_hat|| grows like (2/l) N instead of staying under 2/mu_s; the check "
    "resolves an excess of half its bound (ABS_ERROR_EFFECT), which a smaller step error "
    "(factors still contracting) does not reach.",
    ihgp_variant(HalvedLipschitzIHGP),
)


# =========================================================================================== cases

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


# ====================================================================================== the claims


# What every claim of this result shares.
lemma22_claim = fednest_claim.but(estimators=("fedihgp",))


INVERSE_HESSIAN_IDENTITY = lemma22_claim(
    id="fednest.lemma22.inverse_hessian_identity",
    reference="Tarzanagh et al. 2022, Lemma 2.2 / eq. (13b); identity derived from (13b)",
    kind="exact_identity",
    about=ABOUT_STEP,
    statement="H^{-1} - E_{N'}[H_hat] = H^{-1} (I - H/l_{g,1})^N (exact expectation over N')",
    strategy=lemma22_inverse_hessian_identity_cases,
    check=check_inverse_hessian_identity,
    hypotheses=(A1_NEUMANN_SCALE, A2_STRONG_CONVEXITY),
    perturbation=IHGP_SCALE_OFF_BY_ONE,
    notes="E[H_hat] read column by column through a probe problem with grad_y f_i = e_j.",
)


INVERSE_HESSIAN_BOUND = lemma22_claim(
    id="fednest.lemma22.inverse_hessian_bound",
    reference="Tarzanagh et al. 2022, Lemma 2.2, eq. (14a)",
    kind="bias_bound",
    about=ABOUT_RESULT,
    statement=(
        "||H^{-1} - E[H_hat]|| <= (1/mu_g) ((kappa_g - 1)/kappa_g)^N, kappa_g = "
        "l_{g,1}/mu_g (per-client constants of A1-A2)"
    ),
    strategy=lemma22_inverse_hessian_bound_cases,
    check=check_inverse_hessian_bound,
    hypotheses=(A1_NEUMANN_SCALE, A2_STRONG_CONVEXITY),
    perturbation=IHGP_SCALE_OFF_BY_ONE,
    bound=inverse_hessian_bound,
    notes="l_{g,1} = max_i ||grad^2 g_i|| in z = (x, y) (A1), mu_g = min_i lambda_min(H_i).",
)


PER_CLIENT_BIAS = lemma22_claim(
    id="fednest.lemma22.per_client_bias",
    reference="Tarzanagh et al. 2022, Lemma 2.2, eq. (15) 'for all i'",
    kind="bias_bound",
    about=ABOUT_RESULT,
    statement=(
        "||E[h^I_i(x, y)] - grad_bar^I f_i(x, y)|| <= b = kappa_g l_{f,1} ((kappa_g - "
        "1)/kappa_g)^N for every client i"
    ),
    strategy=lemma22_per_client_bias_cases,
    check=check_per_client_bias,
    hypotheses=(A1_NEUMANN_SCALE, A2_STRONG_CONVEXITY, A1_F_LIPSCHITZ_GLOBAL),
    positive_control=ONE_CLIENT_AFFINE_OUTER,
    bound=paper_bias_bound,
    expected="fails",
    notes=(
        "E[h^I_i] uses the LOCAL Jacobian and the global grad_y f; (8b) uses the GLOBAL "
        "Jacobian and the LOCAL grad_y f_i: they agree only after averaging over clients, so "
        "under heterogeneity the gap does not vanish as N grows. The refutation is about 'for "
        "all i', not about (15)'s constant: it fails with b as printed and with the constant "
        "its proof gives (l_{f,0} for l_{f,1}, fednest.lemma22.paper_constant), on affine f_i "
        "(A1 read on the whole space). Saved counterexample (2 clients, N = 1): max_i gap "
        "0.106 against b = 0 as printed and 0.024 with the proof's l_{f,0} = 2.23."
    ),
    # The counterexample hypothesis found (saved as data): tried first on every run.
    examples=(
        known_case(
            bilevel_spec(n_clients=2, gradient_heterogeneity=1.0, outer_curvature=0.0),
            {"point_seed": 0, "neumann_terms": 1},
        ),
    ),
    readings=(
        Reading(
            "b as printed",
            "max_i ||E[h^I_i] - grad_bar^I f_i|| <= kappa_g l_{f,1} ((kappa_g - 1)/kappa_g)^N",
            {"constant": "printed"},
        ),
        Reading(
            "b with the proof's constant",
            (
                "max_i ||E[h^I_i] - grad_bar^I f_i|| <= kappa_g l_{f,0} ((kappa_g - 1)/kappa_g)^N, "
                "l_{f,0} >= ||grad f_i|| (the constant Lemma 2.2's proof gives)"
            ),
            {"constant": "proof"},
        ),
    ),
)


AVERAGED_BIAS = lemma22_claim(
    id="fednest.lemma22.averaged_bias",
    reference=(
        "Tarzanagh et al. 2022, Lemma 2.2, eq. (15), client-averaged, with the explicit constant"
    ),
    kind="bias_bound",
    about=ABOUT_RESULT,
    statement=(
        "||E[h(x, y)] - grad_bar f(x, y)|| <= ||J_bar|| ||grad_y f(x, y)|| (1/mu_g) "
        "((kappa_g - 1)/kappa_g)^N"
    ),
    strategy=lemma22_averaged_bias_cases,
    check=check_averaged_bias,
    hypotheses=(A1_NEUMANN_SCALE, A2_STRONG_CONVEXITY),
    perturbation=IHGP_SCALE_OFF_BY_ONE,
    bound=averaged_bias_bound,
    corrects=PER_CLIENT_BIAS.id,
    notes=(
        "Also the correction of fednest.lemma22.paper_constant: the constant is ||J|| "
        "||grad_y f|| / mu_g, not kappa_g l_{f,1}."
    ),
)


PAPER_CONSTANT = lemma22_claim(
    id="fednest.lemma22.paper_constant",
    reference="Tarzanagh et al. 2022, Lemma 2.2, eq. (15) constant b",
    kind="bias_bound",
    about=ABOUT_STEP,
    serves="fednest.lemma22.averaged_bias",
    statement=(
        "client-averaged ||E[h^I] - grad_bar^I f|| <= kappa_g l_{f,1} ((kappa_g - "
        "1)/kappa_g)^N at any (x, y)"
    ),
    strategy=lemma22_paper_constant_cases,
    check=check_paper_constant,
    hypotheses=(A1_NEUMANN_SCALE, A2_STRONG_CONVEXITY, A1_F_LIPSCHITZ_GLOBAL),
    positive_control=NO_CROSS_AFFINE_OUTER,
    bound=paper_bias_bound,
    expected="fails",
    notes=(
        "The bias is J H^{-1} A^N grad_y f: it scales with ||grad_y f||, which l_{f,1} (a "
        "Lipschitz constant of grad f) does not bound. Shown on affine f_i, inside A1 read on "
        "the whole space: there l_{f,1} = 0 (or any small positive constant) while the bias "
        "is not zero. The constant its proof gives, l_{f,0} for l_{f,1}, holds "
        "(fednest.lemma22.averaged_bias). Saved counterexample (one client, N = 1): bias "
        "0.095 against b = 0."
    ),
    # The counterexample hypothesis found (saved as data): tried first on every run.
    examples=(
        known_case(
            bilevel_spec(outer_curvature=0.0),
            {"point_seed": 0, "neumann_terms": 1, "point_scale": 1.0},
        ),
    ),
)


ABS_ERROR_AS_STATED = lemma22_claim(
    id="fednest.lemma22.abs_error_as_stated",
    reference=("Tarzanagh et al. 2022, Lemma 2.2, eq. (14b) with A1-A2's constants (Assumption A)"),
    kind="bias_bound",
    about=ABOUT_RESULT,
    statement=(
        "E_W||H^{-1} - H_hat|| <= 2/mu_g, with A2's mu_g and FedIHGP's scale A1's "
        "l_{g,1} (the Lipschitz constant of grad g_i in (x, y)) (stochastic Hessians, "
        "sampled clients)"
    ),
    strategy=abs_error_cases,
    check=check_abs_error,
    hypotheses=(A1_NEUMANN_SCALE, A2_STRONG_CONVEXITY, A2_EACH_SAMPLE),
    perturbation=IHGP_HALVED_LIPSCHITZ,
    bound=abs_error_bound_as_stated,
    decision="statistical",
    max_examples=4,
    shrink=False,
    examples=(
        ABS_ERROR_COUNTEREXAMPLE,
        ABS_ERROR_TIGHT_CASE,
    ),
    notes=(
        "Assumption A is stated for g_i(x, y) := E_zeta g_i(x, y; zeta) (eq. (7)), and "
        "(14b)'s H_hat (13b) multiplies factors I - (1/l_{g,1}) grad^2_y g_i(x, y; zeta) "
        "built from samples. Read on the expected Hessian (the literal reading), A1-A2 bound "
        "only the clients' mean Hessians; sample Hessians outside [mu_g, l_{g,1}] make ||I - "
        "H_sample/l|| exceed 1 - mu_g/l, and E||H_hat|| exceeds 1/mu_g: the saved case (one "
        "client, sample Hessians 0.1 and 1.9, l_{g,1} = 1.0092 joint in (x, y), ||grad^2_xy "
        "g|| = 0.096) measures 5.4 against 2/mu_g = 2, confirmed on fresh draws. Read on "
        "every sample function, as the bound's factors need them (Ghadimi & Wang's "
        "stochastic Neumann estimator, which (13b) is, assumes them per sample; the proof "
        "is in the appendix, not in the text held here), mu_g = 0.1 and l_{g,1} = 1.905 on "
        "that case, and the same family holds: 1.5 against 20. So the statement is not "
        "refuted: it holds under the per-sample reading and fails under the literal one, "
        "and the verdict names both. f plays no part (the check probes grad_y f = e_k, an "
        "affine f)."
    ),
    readings=(
        Reading(
            "A1-A2 on the expected Hessian (literal)",
            (
                "E_W||H^{-1} - H_hat|| <= 2/mu_g with mu_g = min_i lambda_min(grad^2_y g_i) and "
                "l_{g,1} = max_i ||grad^2 g_i(z)|| of g_i(z) = E_zeta g_i(z; zeta), as Assumption "
                "A states them"
            ),
            {"assumptions": "expected"},
            expected="fails",
        ),
        Reading(
            "A1-A2 on each sample (as the bound uses them)",
            (
                "E_W||H^{-1} - H_hat|| <= 2/mu_g with mu_g = min_{i, zeta} lambda_min(grad^2_y "
                "g_i(z; zeta)) and l_{g,1} = max_{i, zeta} ||grad^2 g_i(z; zeta)|| jointly in z = "
                "(x, y): A1-A2 applied to every sample function"
            ),
            {"assumptions": "each_sample"},
            expected="holds",
        ),
    ),
)


ABS_ERROR_PER_SAMPLE = lemma22_claim(
    id="fednest.lemma22.abs_error_per_sample",
    reference=("Tarzanagh et al. 2022, Lemma 2.2, eq. (14b) with per-sample Hessian bounds"),
    kind="bias_bound",
    about=ABOUT_RESULT,
    power_from=("fednest.lemma22.inverse_hessian_identity", "fednest.ihgp.variance_exact"),
    statement=(
        "E_W||H^{-1} - H_hat|| <= 2/mu_s when every sample Hessian lies in [mu_s, l] and "
        "FedIHGP uses 1/l"
    ),
    strategy=abs_error_cases,
    check=check_abs_error,
    hypotheses=(A2_STRONG_CONVEXITY,),
    perturbation=IHGP_HALVED_LIPSCHITZ,
    bound=abs_error_bound_per_sample,
    decision="statistical",
    corrects=ABS_ERROR_AS_STATED.id,
    max_examples=PerProfile(1, 3),
    shrink=False,
    examples=(ABS_ERROR_COUNTEREXAMPLE,),
    notes="||H^{-1}|| + (1/l) sum_n (1 - mu_s/l)^n <= 1/mu + 1/mu_s <= 2/mu_s.",
)


CLAIMS: tuple[Claim, ...] = (
    INVERSE_HESSIAN_IDENTITY,
    INVERSE_HESSIAN_BOUND,
    PER_CLIENT_BIAS,
    AVERAGED_BIAS,
    PAPER_CONSTANT,
    ABS_ERROR_AS_STATED,
    ABS_ERROR_PER_SAMPLE,
)

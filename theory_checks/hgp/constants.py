"""HGP's constants as Terashita & Hara define them, and its assumptions and conditions as
hypotheses on a case (:mod:`theory_checks.hypotheses`). Every HGP check takes its constants from
here, so a check and the assumptions it is judged against use one definition.

Paper letters -> testbed: the paper's inner model ``x`` is the testbed's ``y`` (``d_x`` =
``dim_y``), its ``lambda_i`` are the blocks of the testbed's outer variable; ``M`` =
``neumann_terms``, ``S`` = ``pushsum_steps``, ``eta`` = ``neumann_step_size``, ``b`` =
``batch_size``. ``g_hat(x, lambda; xi) = sum_k g_k(x_k, lambda_k; xi_k)`` is block diagonal over
the clients, so each constant below is a max or min over clients.

Constants (Thm 1 and App. C), for the oracle a case runs (:func:`oracle_of`):

- ``alpha = min_{lambda, xi} sigma_min(d^2_x g_hat)``. Exact Jacobians (Cor. 1, Thm 2 and every
  deterministic check): the one draw is the client Hessians, ``alpha = min_i lambda_min(H_i)``.
  Minibatches drawn with replacement (Alg. 2's stochastic form, :mod:`problems._rows`): b copies
  of one sample are a draw and every draw's mean lies in the samples' convex hull, so alpha is
  the smallest eigenvalue over single samples, exactly, for every b.
- ``beta = max_{lambda, xi} sigma_max(d^2_{x lambda} g_hat)``: likewise over the ``J_i``.
- ``L = max sigma_max(d^2_x g_hat)``: not a constant of the paper. Its proof uses
  ``sigma_max(I - eta d^2_x g_hat) <= 1 - eta alpha``, which needs ``eta L <= 2 - eta alpha``
  (a condition the paper does not state; :func:`step_condition`); the checks' default step is ``eta
  = 1/L``.
- ``kappa_x``, ``kappa_lambda`` (Assumption 3): ``max sigma_max(d^2 g_hat - d^2 g)``, the largest
  single-sample deviation (b copies attain it); 0 with exact Jacobians.
- ``mu = sqrt(kappa_lambda^2 + kappa_x^2 beta^2 / alpha^2)`` (Thm 1).
- ``nu_f``, ``nu_g`` (Assumption 4, Thm 2): Lipschitz constants in x (stacked) of
  ``d_lambda f``, ``d_x f`` and of ``d^2_{x lambda} g``, ``d^2_x g``; on the quadratic family
  ``nu_f = max_i max(||Q_i||, ||P_i^T Q_i||)`` and ``nu_g = 0`` (Hessians constant).
- ``c_S`` (Lemma 2): ``sigma_max(Theta_hat - Theta)`` of Alg. 1 on the case's graph segments
  (``Theta_hat = diag(P 1)^{-1} P``, P the product of a segment's column-stochastic weights),
  computed from the graph sequence, never from the estimator under test. It stands for the
  paper's ``(8 sqrt(n)/delta) tau^S``, whose delta and tau the lemma only asserts to exist; the
  proof's entrywise constant made explicit is ``(n - 1) tau(A(S:1)) / delta_S`` (Dobrushin's
  coefficient over the smallest Push-Sum weight, :func:`pushsum_bound`), which bounds ``c_S``.

Conditions, as :class:`~theory_checks.hypotheses.Hypothesis` objects (margins relative, >= 0
inside): Assumption 1 (:func:`assumption1`, :data:`A1_EXACT`), Assumption 2
(:data:`A2_STRONG_CONVEXITY`), Assumption 3 (:data:`A3_ORACLE`), Assumption 4
(:data:`A4_LIPSCHITZ`); Theorems 1-2's ``0 < alpha < 1/eta`` (:func:`eta_alpha_below_one`) and
S condition (:func:`s_condition`); the proof's unstated ``eta L <= 2 - eta alpha``
(:func:`step_condition`); and eq. (10)'s convergence, ``rho(I - eta H_bar) < 1``
(:func:`series_converges`). M and b carry no condition (any M >= 0, any b >= 1).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Literal

import numpy as np
import torch

from testbed.decentralized.graphs import GraphSequence
from testbed.decentralized.pushsum import consensus_error
from testbed.decentralized.pushsum import pushsum_operator
from theory_checks.hgp.common import case_identity
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import at_most
from theory_checks.replicates import shared

REF = "Terashita & Hara"

Oracle = Literal["exact", "minibatch"]

#: Why 1e-12 (relative): the constants are eigenvalues and norms of float64 matrices (round-off
#: ~1e-15 relative); a strict condition met by less than this is met by round-off only (kappa =
#: 1 gives ``eta alpha = 1`` up to the last bit), so it is not counted as met, and a non-strict
#: one missed by less than this is counted as met.
ROUND_OFF = 1e-12

#: Why 2048 steps: Assumption 1 is checked on the realised sequence (for the random families it
#: holds only with high probability, while the paper's Assumption 1 is deterministic); eight of the
#: graphs' 256-step chunks cover every horizon the checks run unless they set M and S; a family's
#: windows take 0.1-0.3 s of networkx on one loaded core (cached per graph and horizon).
A1_HORIZON = 2048


def positive(margin: float) -> float:
    """A margin of a strict condition: counted as met only beyond :data:`ROUND_OFF`."""
    return margin if margin > ROUND_OFF else min(margin, -ROUND_OFF)


def below(value: float, cap: float) -> float:
    """Margin of the strict ``value < cap`` (:func:`at_most`, met only beyond round-off)."""
    return positive(at_most(value, cap))


def at_most_up_to_round_off(value: float, cap: float) -> float:
    """Margin of ``value <= cap`` (:func:`at_most`), a miss within round-off counted as met."""
    margin = at_most(value, cap)
    return margin if margin < -ROUND_OFF else max(margin, 0.0)


# --------------------------------------------------------------------------- the constants


@dataclasses.dataclass(frozen=True)
class HGPConstants:
    """Thm 1's and Assumptions 3-4's constants of one problem under one oracle (module
    docstring).

    Attributes:
        alpha: ``min sigma_min(d^2_x g_hat)`` over clients and oracle draws.
        beta: ``max sigma_max(d^2_{x lambda} g_hat)``.
        L: ``max sigma_max(d^2_x g_hat)`` (the proof's unstated constant).
        kappa_x, kappa_lambda: Assumption 3's bounds (0 with exact Jacobians).
        nu_f, nu_g: Assumption 4's constants (NaN where the family does not give them).
        n: clients.
    """

    alpha: float
    beta: float
    L: float
    kappa_x: float
    kappa_lambda: float
    nu_f: float
    nu_g: float
    n: int

    @property
    def mu(self) -> float:
        """``mu = sqrt(kappa_lambda^2 + kappa_x^2 beta^2 / alpha^2)`` (Thm 1)."""
        return math.sqrt(self.kappa_lambda**2 + self.kappa_x**2 * self.beta**2 / self.alpha**2)

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self) | {"mu": self.mu}


def _norms(matrices: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(matrices, ord=2)


def hgp_constants(
    problem: Any, oracle: Oracle = "exact", x: torch.Tensor | None = None
) -> HGPConstants:
    """The constants of ``problem`` under ``oracle`` at ``x`` (default the initial point; the
    quadratic family's Hessians do not depend on it).

    ``"minibatch"`` needs the per-sample arrays of :class:`problems.PerClientQuadratic`
    (``A_samples``, ``C_samples``; ``J = -C^T`` has C's norms).
    """
    blocks = problem.client_blocks(problem.initial_point()[0] if x is None else x)
    H, J = blocks["H"], blocks["J"]
    kappa_x = kappa_lambda = 0.0
    if oracle == "minibatch":
        A_s, C_s = getattr(problem, "A_samples", None), getattr(problem, "C_samples", None)
        if A_s is None or C_s is None:
            raise ValueError(f"{problem.id}: no sample sets, so no minibatch oracle")
        d = H.shape[-1]
        H = torch.cat([H, A_s.reshape(-1, d, d)])
        J = torch.cat([J, C_s.reshape(-1, *C_s.shape[2:]).transpose(1, 2)])
        kappa_x = float(_norms(A_s - problem.A[:, None]).max())
        kappa_lambda = float(_norms(C_s - problem.C[:, None]).max())
    eig = torch.linalg.eigvalsh(0.5 * (H + H.transpose(-1, -2)))
    nu_f = nu_g = math.nan
    if hasattr(problem, "P") and hasattr(problem, "Q"):  # the quadratic family (A4)
        nu_f = max(
            float(_norms(problem.Q).max()),
            float(_norms(problem.P.transpose(1, 2) @ problem.Q).max()),
        )
        nu_g = 0.0
    return HGPConstants(
        alpha=float(eig.min()),
        beta=float(_norms(J).max()),
        L=float(eig.max()),
        kappa_x=kappa_x,
        kappa_lambda=kappa_lambda,
        nu_f=nu_f,
        nu_g=nu_g,
        n=int(problem.n_clients),
    )


def oracle_of(case: Any) -> Oracle:
    """The oracle a case runs: minibatches when it sets a batch size, else exact Jacobians."""
    return "minibatch" if case.params.get("batch_size") is not None else "exact"


def case_constants(case: Any) -> HGPConstants:
    """:func:`hgp_constants` of the case's problem under the case's oracle; computed once for a
    calibration's seeds (:func:`theory_checks.replicates.shared`: they do not depend on the
    seed)."""
    problem, oracle = case.problem, oracle_of(case)
    identity = case_identity(problem, problem.initial_point()[0])
    return shared(("hgp constants", oracle, *identity), lambda: hgp_constants(problem, oracle))


def step_size(case: Any, constants: HGPConstants | None = None) -> float:
    """The eta a check runs a case at, read from its parameters: ``neumann_step_size``;
    ``eta_factor / L``; ``eta_alpha / alpha``; else ``1 / L`` (the estimator's default under
    the proof's condition)."""
    p = case.params
    if p.get("neumann_step_size") is not None:
        return float(p["neumann_step_size"])
    k = constants or case_constants(case)
    if "eta_factor" in p:
        return float(p["eta_factor"]) / k.L
    if "eta_alpha" in p:
        return float(p["eta_alpha"]) / k.alpha
    return 1.0 / k.L


def deterministic_contractions(blocks: dict[str, torch.Tensor], eta: float) -> dict[str, float]:
    """The contraction factors of eq. (10) at eta with exact Jacobians (derived from eq. (10)): ``r
    = max_k ||I - eta H_k||`` (one client's Neumann factor) and ``rho_bar = ||I - eta H_bar||``
    (the exact-averaging rate of eq. (10))."""
    H = blocks["H"]
    eye = torch.eye(H.shape[-1], dtype=H.dtype)
    return {
        "r": float(_norms(eye - eta * H).max()),
        "rho_bar": float(torch.linalg.matrix_norm(eye - eta * H.mean(0), ord=2)),
    }


# --------------------------------------------------------------------------- Lemma 2


def ergodicity_coefficient(P: np.ndarray) -> float:
    """Dobrushin's coefficient of a column-stochastic ``P``: ``max_{j,k} (1/2)||P e_j -
    P e_k||_1`` (1 - the least overlap of two columns; submultiplicative, 0 iff rank one)."""
    return float(0.5 * np.abs(P[:, :, None] - P[:, None, :]).sum(axis=0).max())


def pushsum_bound(graph: GraphSequence, S: int, start: int = 0) -> tuple[float, float, float]:
    """Lemma 2's constant from its proof, explicit: ``(n - 1) tau(A(S:1)) / delta_S``.

    With ``P = A(S:1) = A(S) ... A(1)`` (the column-stochastic Push-Sum weights of the graph
    steps, Alg. 1) and weights ``omega = P 1``, ``Theta_hat = diag(omega)^{-1} P``, so
    ``E = Theta_hat - Theta = diag(omega)^{-1} P (I - Theta)`` and

    .. math::  |E_ij| = \\frac{1}{n \\omega_i} |\\textstyle\\sum_k (P_{ij} - P_{ik})|
               \\le \\frac{n - 1}{n} \\frac{\\tau(P)}{\\delta_S}

    (a coordinate of the difference of two probability vectors is at most their total
    variation distance), the entrywise bound Nedic-Olshevsky's Lemma 1 states with existential
    ``8/delta`` and ``tau^S``; then ``sigma_max(E) <= ||E||_F <= n max|E_ij|`` (the step the
    paper writes with sqrt(n)). Returns ``(bound, tau(P), delta_S)``. The reference P comes from
    the graph sequence, not from the estimator.
    """
    n = graph.n
    P = np.eye(n)
    for A in graph.mixing(start, S):
        P = A @ P
    tau = ergodicity_coefficient(P)
    delta = float((P @ np.ones(n)).min())
    return (n - 1) * tau / delta, tau, delta


@functools.lru_cache(maxsize=256)
def pushsum_errors(graph: GraphSequence, S: int, M: int) -> tuple[float, ...]:
    """``c^(m) = sigma_max(Theta_hat^(m) - Theta)``, ``m = 1..M``, of Alg. 1 (weights reset to
    1) on the segments ``(m - 1) S .. m S - 1`` of ``graph``: what Lemma 2 bounds, for each of
    HGP's M averaging calls (one operator per call, where the paper writes one Theta_hat)."""
    return tuple(
        consensus_error(pushsum_operator(graph.mixing((m - 1) * S, S))) for m in range(1, M + 1)
    )


def s_condition_cap(eta: float, alpha: float) -> float:
    """The S condition of Thms 1-2, ``S >= log(delta eta alpha / (16 sqrt(n) (1 - eta
    alpha))) / log tau``, is ``(8 sqrt(n)/delta) tau^S <= eta alpha / (2 (1 - eta alpha))``
    (proof, (17)); this is its right-hand side, the cap on ``c_S``."""
    return eta * alpha / (2.0 * (1.0 - eta * alpha)) if eta * alpha < 1.0 else math.inf


def steps_meeting_s_condition(
    graph: GraphSequence, S: int, M: int, eta: float, alpha: float, most: int = 256
) -> tuple[int, float] | None:
    """The smallest ``S' = S 2^k <= most`` at which ``max_m c^(m) <= eta alpha / (2 (1 - eta
    alpha))`` (:func:`s_condition_cap`) over the M calls, with that ``c_S``; None if none.

    Why 256: past it the small graphs of the checks are not contracting in practice.
    """
    cap = s_condition_cap(eta, alpha)
    while True:
        c = max(pushsum_errors(graph, S, M), default=0.0)
        if c <= cap:
            return S, c
        if S >= most:
            return None
        S *= 2


# --------------------------------------------------------------------------- Assumption 1


def case_graph(case: Any, family: str) -> GraphSequence:
    """The graph sequence a case runs on: its ``graph_family`` (``family`` when it names none)
    and ``graph_seed`` (0 when none), with the estimator's edge probabilities [0.4, 0.8]."""
    return GraphSequence(
        case.params.get("graph_family", family),
        case.problem.n_clients,
        int(case.params.get("graph_seed", 0)),
    )


def graph_horizon(case: Any) -> int:
    """The graph steps a case's run uses when its parameters say (``M S``), at most
    :data:`A1_HORIZON`; :data:`A1_HORIZON` otherwise."""
    p = case.params
    if "neumann_terms" in p and "pushsum_steps" in p:
        return max(1, min(A1_HORIZON, int(p["neumann_terms"]) * int(p["pushsum_steps"])))
    return A1_HORIZON


@functools.lru_cache(maxsize=256)
def measured_window(graph: GraphSequence, horizon: int) -> int | None:
    """The smallest B (at most half the horizon) whose aligned windows over ``horizon`` steps
    all have strongly connected unions; None if none."""
    return graph.measured_window(horizon, max_window=max(1, horizon // 2))


def assumption1(family: str = "random_directed") -> Hypothesis:
    """Assumption 1 (B-strong connectivity) on the case's realised graph sequence
    (:func:`case_graph`, family ``family`` when the case names none): the smallest B such that
    the union of every aligned window of B steps is strongly connected over the case's horizon
    (:func:`graph_horizon`, networkx). Margin ``1/B``; -1 when no B <= the horizon works."""

    def margin(case: Any) -> float:
        window = measured_window(case_graph(case, family), graph_horizon(case))
        return -1.0 if window is None else 1.0 / window

    return Hypothesis(
        "A1",
        "the union of E(s) over every window tB <= s < (t+1)B is strongly connected, "
        "B measured on the realised graphs of the run (margin 1/B)",
        f"{REF}, Assumption 1",
        margin,
    )


#: Assumption 1 for a claim on exact averaging: Theta itself, the average Push-Sum reaches under
#: it (eq. 1); no graph, so the complete one (B = 1).
A1_EXACT = Hypothesis(
    "A1",
    "exact averaging Theta (eq. 1): no graph, the complete one (B = 1, margin 1)",
    f"{REF}, Assumption 1, eq. (1)",
    lambda case: 1.0,
)

# --------------------------------------------------------------------------- Assumptions 2-4

#: Assumption 2: every g_i strongly convex in the model (alpha with exact Jacobians > 0).
A2_STRONG_CONVEXITY = Hypothesis(
    "A2",
    "every g_i strongly convex in x: min_i lambda_min(H_i) > 0 (margin alpha / L)",
    f"{REF}, Assumption 2",
    lambda case: (lambda k: positive(k.alpha / k.L))(hgp_constants(case.problem)),
)


def network_assumptions(family: str = "random_directed") -> tuple[Hypothesis, ...]:
    """Assumptions 1 (on the case's graphs, family ``family``: :func:`assumption1`) and 2, which
    every HGP result on a network of clients assumes."""
    return (assumption1(family), A2_STRONG_CONVEXITY)


#: Assumptions 1 and 2 for a claim on exact averaging (:data:`A1_EXACT`).
EXACT_AVERAGING_ASSUMPTIONS = (A1_EXACT, A2_STRONG_CONVEXITY)


def _oracle_margin(case: Any) -> float:
    """Assumption 3 for the minibatch oracle: per-sample strong convexity (Thm 1's alpha > 0)
    and unbiased sample sets (their means are the clients' matrices, to round-off)."""
    problem = case.problem
    k = hgp_constants(problem, "minibatch")
    scale = 1.0 + float(_norms(problem.A).max()) + float(_norms(problem.C).max())
    bias = (
        max(
            float(_norms(problem.A_samples.mean(1) - problem.A).max()),
            float(_norms(problem.C_samples.mean(1) - problem.C).max()),
        )
        / scale
    )
    return -bias if bias > ROUND_OFF else positive(k.alpha / k.L)


#: Assumption 3 (the appendix's version, with unbiasedness): bounded, unbiased Jacobian
#: oracles whose every draw is positive definite (alpha > 0 over samples).
A3_ORACLE = Hypothesis(
    "A3",
    "E d^2 g_hat = d^2 g and E d^2_{x lambda} g_hat = d^2_{x lambda} g (sample means equal "
    "the clients' matrices), kappa_x, kappa_lambda finite, every sample Hessian positive "
    "definite (margin alpha_samples / L_samples)",
    f"{REF}, Assumption 3 (App. C)",
    _oracle_margin,
)

#: Assumption 4 (Thm 2): Lipschitz derivatives in x, with finite nu_f and nu_g.
A4_LIPSCHITZ = Hypothesis(
    "A4",
    "d_lambda f, d_x f, d^2_{x lambda} g, d^2_x g Lipschitz in x: nu_f = max_i max(||Q_i||, "
    "||P_i^T Q_i||), nu_g = 0 on the quadratic family (margin 1 when finite)",
    f"{REF}, Assumption 4",
    lambda case: 1.0 if math.isfinite(hgp_constants(case.problem).nu_f) else -1.0,
)

# --------------------------------------------------------------------------- Theorems 1-2

EtasFn = Callable[[Any, HGPConstants], Sequence[float]]


def _etas(eta_factors: Sequence[float] | None) -> EtasFn:
    """Every eta a check runs: ``f / L`` for given factors, else the case's one
    (:func:`step_size`)."""
    if eta_factors is None:
        return lambda case, k: (step_size(case, k),)
    factors = tuple(float(f) for f in eta_factors)
    return lambda case, k: tuple(f / k.L for f in factors)


def eta_alpha_below_one(eta_factors: Sequence[float] | None = None) -> Hypothesis:
    """Thms 1-2's stated ``0 < alpha < 1/eta`` at every eta the check runs (strict: a case met
    by round-off only is outside)."""
    etas = _etas(eta_factors)

    def margin(case: Any) -> float:
        k = case_constants(case)
        if not k.alpha > 0.0:
            return -1.0
        return min(below(eta * k.alpha, 1.0) for eta in etas(case, k))

    return Hypothesis(
        "0 < alpha < 1/eta",
        "eta alpha < 1 with alpha > 0 of the case's oracle (margin 1 - eta alpha)",
        f"{REF}, Thm 1 and Thm 2",
        margin,
    )


def step_condition_holds(eta: float, constants: HGPConstants) -> bool:
    """Whether ``eta L <= 2 - eta alpha`` (:func:`step_condition`) holds at eta."""
    return at_most_up_to_round_off(eta * constants.L, 2.0 - eta * constants.alpha) >= 0.0


def step_condition(eta_factors: Sequence[float] | None = None) -> Hypothesis:
    """The proof's unstated ``eta L <= 2 - eta alpha`` (``sigma_max(I - eta d^2 g_hat) <= 1 -
    eta alpha``, App. C.2) at every eta the check runs."""
    etas = _etas(eta_factors)

    def margin(case: Any) -> float:
        k = case_constants(case)
        return min(at_most_up_to_round_off(eta * k.L, 2.0 - eta * k.alpha) for eta in etas(case, k))

    return Hypothesis(
        "eta L <= 2 - eta alpha",
        "sigma_max(I - eta d^2_x g_hat) <= 1 - eta alpha,"
        " L = max sigma_max(d^2_x g_hat) (used by the proof, not stated)",
        f"{REF}, proof of Thm 1 (App. C.2)",
        margin,
    )


def series_converges(eta_factors: Sequence[float] | None = None) -> Hypothesis:
    """Eq. (10) with exact averaging converges: ``rho(I - eta H_bar) < 1`` at every eta the
    check runs (eq. (10); only the averaged Hessian matters there)."""
    etas = _etas(eta_factors)

    def margin(case: Any) -> float:
        k = hgp_constants(case.problem)
        H_bar = case.problem.client_blocks(case.problem.initial_point()[0])["H"].mean(0)
        eig = torch.linalg.eigvalsh(H_bar)
        return min(below(float(torch.abs(1.0 - eta * eig).max()), 1.0) for eta in etas(case, k))

    return Hypothesis(
        "rho(I - eta H_bar) < 1",
        "the fixed-point iteration (10) with Theta converges (margin 1 - rho)",
        f"{REF}, eq. (10), Sec. 3.3",
        margin,
    )


#: What the S condition is checked at: ``(graph, S, M, eta, alpha)`` of a case, or None when
#: the case averages exactly (``c_S = 0``).
SConditionSetup = Callable[[Any], "tuple[GraphSequence, int, int, float, float] | None"]


def s_condition(setup: SConditionSetup) -> Hypothesis:
    """Thms 1-2's S condition with ``c_S`` (:func:`pushsum_errors`) for ``(8 sqrt(n)/delta)
    tau^S``: ``max_m c^(m) <= eta alpha / (2 (1 - eta alpha))`` at the S the check runs, which
    ``setup`` gives with its graph, M, eta and alpha (exact averaging: ``c_S = 0``)."""

    def margin(case: Any) -> float:
        found = setup(case)
        if found is None:
            return 1.0
        graph, S, M, eta, alpha = found
        cap = s_condition_cap(eta, alpha)
        if math.isinf(cap):  # eta alpha >= 1: the condition is void (its own hypothesis fails)
            return 1.0
        return at_most_up_to_round_off(max(pushsum_errors(graph, S, M), default=0.0), cap)

    return Hypothesis(
        "S condition",
        "c_S = max_m sigma_max(Theta_hat^(m) - Theta) <= eta alpha "
        "/ (2 (1 - eta alpha)), c_S for (8 sqrt(n)/delta) tau^S",
        f"{REF}, Thm 1 and Thm 2 (S >= log(delta eta alpha / (16 sqrt(n) "
        "(1 - eta alpha))) / log tau)",
        margin,
    )


#: The S condition for a claim on exact averaging: ``c_S = 0`` (margin 1).
S_CONDITION_EXACT = s_condition(lambda case: None)

__all__ = [
    "A1_EXACT",
    "A1_HORIZON",
    "A2_STRONG_CONVEXITY",
    "A3_ORACLE",
    "A4_LIPSCHITZ",
    "EXACT_AVERAGING_ASSUMPTIONS",
    "REF",
    "S_CONDITION_EXACT",
    "ROUND_OFF",
    "HGPConstants",
    "Oracle",
    "assumption1",
    "at_most_up_to_round_off",
    "below",
    "case_constants",
    "case_graph",
    "deterministic_contractions",
    "ergodicity_coefficient",
    "eta_alpha_below_one",
    "graph_horizon",
    "hgp_constants",
    "measured_window",
    "network_assumptions",
    "oracle_of",
    "positive",
    "pushsum_bound",
    "pushsum_errors",
    "s_condition",
    "s_condition_cap",
    "series_converges",
    "step_condition",
    "step_condition_holds",
    "step_size",
    "steps_meeting_s_condition",
]

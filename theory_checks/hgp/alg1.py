"""HGP Algorithm 1 (Push-Sum), as stochastic HGP (Alg. 2 with minibatch Jacobians) runs it: the
averaging operator of each of its M calls is exactly S Push-Sum steps over the next S graphs.

Algorithm 1 (Push-Sum, Sec. 2.1, after the paper's ref. [3]): from ``z_i^(0) = u_i`` and weights
``omega_i^(0) = 1``, each step t sends ``z_j / |N_j^out(t)|`` and ``omega_j / |N_j^out(t)|``
along the out-edges of graph ``G(t)`` (self-loop included) and sums what arrives; after S steps
``y_i = z_i^(S) / omega_i^(S)``. With ``W(t)`` the column-stochastic matrix ``W(t)_{ij} =
1 / |N_j^out(t)|`` for every edge ``j -> i`` of ``G(t)`` and ``P = W(t_0 + S - 1) ... W(t_0)``,

    Theta_hat(t_0, S) = diag(P 1)^{-1} P,                                               (A1)

and Algorithm 2 averages ``u`` with it M times, call m over the graph steps ``(m - 1) S .. m S
- 1`` (the graph clock advances by S per call, the weights reset to 1 each call). The claim
:data:`PUSHSUM_OPERATOR` checks, for the registered stochastic entry ``hgp-stochastic`` built
with the case's S, graph family and graph seed, that the operator of each of its first calls,
read off its own averaging step through the identity basis
(:func:`~theory_checks.hgp.common.averaging_operators`, the path its run takes), equals (A1)
computed here from the graph sequence's edge sets, to a relative 1e-12 (float64 round-off of
S products of n x n matrices).

Why it is needed: the stochastic claims (Theorem 1, Corollary 2, D3-D4) take the estimator's own
averaging operators into their exact moments, so a Push-Sum that runs S - 1 steps while S is
recorded changes the moments and the runs alike and passes them all, and Lemma 2's
claims check the Push-Sum of the exact-Jacobian entry, not this one. The operator depends on
nothing stochastic: the claim is exact.

The static-network variant (HGP sec. 4, entry ``hgp-static``) runs Algorithm 1 on one
undirected graph with the doubly-stochastic Metropolis weights W, whose Push-Sum weights stay
1: :data:`STATIC_OPERATOR` checks that each of its calls applies ``W^S``, W computed here from
the graph's edges (``W_ij = 1 / (1 + max(d_i, d_j))``), to the same 1e-12.

Hypothesis: Assumption 1 (B-strong connectivity of the graph sequence,
:func:`~theory_checks.hgp.constants.assumption1`), under which (A1) is well defined (every
``(P 1)_i > 0``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from problems import strategies
from results_format.verdicts import ABOUT_STEP
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import Perturbation
from theory_checks.hgp.common import MIXING_FAMILIES
from theory_checks.hgp.common import averaging_operators
from theory_checks.hgp.common import graph_cases
from theory_checks.hgp.common import graph_of
from theory_checks.hgp.common import hgp_claim
from theory_checks.hgp.constants import assumption1
from theory_checks.perturbed_variants import field_variant

# Why 1e-12: both sides are products of S <= 12 column-stochastic n x n matrices in float64
# (entries in [0, 1], round-off ~1e-16 per product); one Push-Sum step more or less moves an
# entry by O(1e-2) or more on the mixing families.
RTOL = 1e-12
# Why 3 calls: the second and third check the graph clock (each call starts S steps later).
CALLS = 3


def pushsum_operator(edges: np.ndarray) -> np.ndarray:
    """(A1) from the boolean edge sets ``edges[t, i, j]`` (j sends to i at step t) of S steps:
    ``diag(P 1)^{-1} P`` with ``P`` the product of the column-stochastic ``W(t)``."""
    n = edges.shape[-1]
    P = np.eye(n)
    for E in edges.astype(float):
        P = (E / E.sum(axis=0, keepdims=True)) @ P
    return P / P.sum(axis=1, keepdims=True)


def check_pushsum_operator(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """The estimator's first :data:`CALLS` averaging operators against (A1): the largest
    entry-wise gap."""
    n, S = case.problem.n_clients, int(case.params["pushsum_steps"])
    est = make(
        pushsum_steps=S,
        graph_family=case.params["graph_family"],
        graph_seed=case.params["graph_seed"],
    )
    graph = graph_of(case)
    measured = averaging_operators(est, n, CALLS)
    worst = max(
        float(np.abs(T - pushsum_operator(graph.edges(m * S, S))).max())
        for m, T in enumerate(measured)
    )
    return Measurement(
        worst, RTOL, worst <= RTOL, "max entry gap <=", details={"S": S, "n": n, "calls": CALLS}
    )


# Cases: any S in 1..12 on every mixing family with Algorithm 1's weights 1/|N_j^out|
# (static_undirected runs the Metropolis W of the static variant instead, another entry's;
# 1-dimensional problems: only n matters).
PUSHSUM_FAMILIES = tuple(f for f in MIXING_FAMILIES if f != "static_undirected")
pushsum_operator_cases = graph_cases(strategies.per_client_quadratic(max_dim=1), PUSHSUM_FAMILIES)


PUSHSUM_OPERATOR_PERTURBATION = Perturbation(
    name="Push-Sum one step short",
    description=(
        "The estimator runs S - 1 Push-Sum steps per call while S is recorded (the "
        "count read from one place and run from another): its operators are "
        "diag(P' 1)^{-1} P' over S - 1 graphs, and the graph clock runs behind, so "
        "(A1) misses by O(1e-2) or more on every case with S >= 1."
    ),
    build=field_variant("hgp-stochastic", pushsum_steps=lambda est: est.pushsum_steps - 1),
)


# What every claim of this result shares.
alg1_claim = hgp_claim.but(kind="exact_identity", about=ABOUT_STEP)


PUSHSUM_OPERATOR = alg1_claim(
    id="hgp.alg1.pushsum_operator",
    reference="HGP Algorithm 1 (Push-Sum, weights 1/|N_j^out|) inside Algorithm 2, M calls of "
    "S steps each (Sec. 2.1, Sec. 3.3)",
    statement=(
        "each averaging call of stochastic HGP applies Theta_hat = diag(P 1)^{-1} P, P "
        "the product of the S column-stochastic Push-Sum matrices of its graph steps "
        "((m - 1) S .. m S - 1 for call m)"
    ),
    estimators=("hgp-stochastic",),
    strategy=pushsum_operator_cases,
    check=check_pushsum_operator,
    hypotheses=(assumption1(),),
    perturbation=PUSHSUM_OPERATOR_PERTURBATION,
)


# --------------------------------------------------------------------------- static variant


def metropolis_operator(edges: np.ndarray, S: int) -> np.ndarray:
    """``W^S`` with ``W`` the Metropolis weights of the static undirected graph ``edges`` (self
    loops included): ``W_ij = 1 / (1 + max(d_i, d_j))`` on an edge, ``W_ii = 1 - sum_j W_ij``,
    ``d`` the degree without the self loop (Xiao & Boyd 2004). HGP Sec. 4 allows any constant
    doubly-stochastic matrix; its experiments (Sec. 5.3) use the fastest-mixing chain of its
    ref. [4], the testbed the Metropolis weights."""
    E = edges.astype(bool).copy()
    np.fill_diagonal(E, False)
    degree = E.sum(axis=1)
    W = np.where(E, 1.0 / (1.0 + np.maximum(degree[:, None], degree[None, :])), 0.0)
    W[np.diag_indices_from(W)] = 1.0 - W.sum(axis=1)
    return np.linalg.matrix_power(W, S)


def check_static_operator(claim: Claim, case: Case, make: Callable[..., Any]) -> Measurement:
    """The static variant's first :data:`CALLS` averaging operators against ``W^S``: the
    largest entry-wise gap."""
    n, S = case.problem.n_clients, int(case.params["pushsum_steps"])
    est = make(pushsum_steps=S, graph_seed=case.params["graph_seed"])
    graph = graph_of(case)
    reference = metropolis_operator(graph.edges(0, 1)[0], S)
    worst = max(float(np.abs(T - reference).max()) for T in averaging_operators(est, n, CALLS))
    return Measurement(
        worst, RTOL, worst <= RTOL, "max entry gap <=", details={"S": S, "n": n, "calls": CALLS}
    )


# Cases: the static undirected family (the entry's), S in 1..12.
static_operator_cases = graph_cases(
    strategies.per_client_quadratic(max_dim=1), ("static_undirected",)
)


STATIC_OPERATOR_PERTURBATION = Perturbation(
    name="static gossip one step short",
    description=(
        "The static variant runs S - 1 gossip steps per call while S is recorded: "
        "its operator is W^(S-1), which differs from W^S by O(1e-2) or more on these "
        "graphs."
    ),
    build=field_variant("hgp-static", pushsum_steps=lambda est: est.pushsum_steps - 1),
)


STATIC_OPERATOR = alg1_claim(
    id="hgp.alg1.static_operator",
    reference="HGP sec. 4, static-network variant: Algorithm 1 with the doubly-stochastic "
    "Metropolis W, Theta_hat = W^S (Sec. 4: any constant doubly-stochastic matrix)",
    statement=(
        "each averaging call of the static variant applies W^S, W the Metropolis "
        "weights of the static undirected graph"
    ),
    estimators=("hgp-static",),
    strategy=static_operator_cases,
    check=check_static_operator,
    hypotheses=(assumption1("static_undirected"),),
    perturbation=STATIC_OPERATOR_PERTURBATION,
)


CLAIMS: tuple[Claim, ...] = (PUSHSUM_OPERATOR, STATIC_OPERATOR)
